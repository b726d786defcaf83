// Row-interleaved q4_K / q6_K GEMM with AVX-512 VNNI: the 16 rows of a group sit in the 16
// i32 lanes, so one vpdpbusd (unsigned weights x broadcast of 4 signed activation bytes)
// does 16 rows x 4 columns, and scales, mins and the float steps are per-lane vector ops
// with no horizontal reductions. Each sub-block's weights are decoded once and reused for
// all nt tokens. Per lane the float operations are vec_dot's, so results are bit-identical.
#pragma GCC optimize("fp-contract=off") // see kernels_generic.c

#include "kernels/il_kq.h"

#if defined(__AVX512F__) && defined(__AVX512VNNI__)

#include <string.h>

#include "base/status.h"
#include "kernels/kernels_internal.h"
#include "kernels/simd_avx512.h"

// Prefill (LM_IL_PF_NT+ tokens, kernels_internal.h) streams the weights slowly (~4-6 GB/s per core) and the hardware
// prefetcher falls behind: software prefetch 1 KB ahead, one line per weight line, issued
// outside the token loop. Cold 640-row weights, 15 tokens, GMAC/s per core over 4
// alternating rounds: q4_K (k 1024) 106-115 -> 113-143, q6_K (k 2048) 90-101 -> 97-120,
// q6_K at 8 tokens 58-67 -> 88-107. (The same prefetch as one burst per super-block
// lost: 37-53 prefetches at once.) Fewer tokens are bandwidth-bound: no prefetch.
#define KQ_PF_AHEAD 1024

AI const struct lm_block_q8_K *q8K_block(const void *xa, size_t xas, int t, int64_t i) {
    return (const struct lm_block_q8_K *)((const char *)xa + (size_t)t * xas) + i;
}

// ============================================================================
// q4_K: per super-block, per token t and row r (lane r):
//   isum  = sum_j sc[j][r] * dot(q[r][32j..], x[32j..])
//   summs = sum_j mn[j][r] * (bsums[2j] + bsums[2j+1])
//   sum  += (d * x.d) * (float)isum - (dmin * x.d) * (float)summs
// A sub-block's dot is two 16-column halves (lo / hi nibbles), each |.| <= 16 * 15 * 128
// < 2^15: they are merged into the int16 halves of each lane and scaled and accumulated
// by one vpdpwssd against (sc, sc) in place of vpmulld + vpaddd (vpmulld zmm 0.40 ns vs
// vpdpwssd 0.28 ns on Zen 4; with two independent vpdpbusd chains the 16-row x 2048
// group at nt = 16 went 4073 -> 3827 ns). The mins use vpdpwssd on (mn[2p], mn[2p+1])
// pairs against pair sums of bsums.
// ============================================================================

AI void q4_K_il(const int NT, int64_t n_in, float *y, size_t ys, const void *wg, const void *xa,
                size_t xas) {
    const struct lm_il_q4_K_sb *w = wg;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512 sum[LM_IL_MAX_NT];
#pragma GCC unroll 16
    for (int t = 0; t < NT; t++) sum[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
        const struct lm_il_q4_K_sb *b = &w[i];
        const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d));
        const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->dmin));

        // mins term first (its registers are free again before the quant loop)
        __m512 mterm[LM_IL_MAX_NT];
        {
            __m512i mnv[4]; // lane r: (mn[2p][r], mn[2p+1][r]) as int16
            for (int p = 0; p < 4; p++)
                mnv[p] = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)b->mn[p]));
#pragma GCC unroll 16
            for (int t = 0; t < NT; t++) {
                const struct lm_block_q8_K *yb = q8K_block(xa, xas, t, i);
                // word j of s2 = bsums[2j] + bsums[2j+1] (|.| <= 32 * 128: int16 is exact)
                const __m256i bs = _mm256_loadu_si256((const __m256i *)yb->bsums);
                const __m512i s2 = _mm512_castsi128_si512(
                    _mm256_cvtepi32_epi16(_mm256_add_epi16(bs, _mm256_srli_epi32(bs, 16))));
                __m512i acc = _mm512_setzero_si512();
                for (int p = 0; p < 4; p++)
                    acc = _mm512_dpwssd_epi32(acc, mnv[p], _mm512_permutexvar_epi32(_mm512_set1_epi32(p), s2));
                mterm[t] = _mm512_mul_ps(_mm512_mul_ps(dm, _mm512_set1_ps(yb->d)), _mm512_cvtepi32_ps(acc));
            }
        }

        __m512i isum[LM_IL_MAX_NT];
#pragma GCC unroll 16
        for (int t = 0; t < NT; t++) isum[t] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            // 8 weight vectors of sub-block j: lo[v] = columns 32j + 4v.., hi[v] = 32j + 16 + 4v..
            __m512i lo[4], hi[4];
            if (NT >= LM_IL_PF_NT) // the sub-block's 4 lines, KQ_PF_AHEAD on (see the top of the file)
                for (int c = 0; c < 4; c++) _mm_prefetch((const char *)b->qs[j] + KQ_PF_AHEAD + 64 * c, _MM_HINT_T0);
            for (int v = 0; v < 4; v++) {
                const __m512i raw = _mm512_loadu_si512((const void *)b->qs[j][v]);
                lo[v] = _mm512_and_si512(raw, m4);
                hi[v] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
            }
            const __m512i s32 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->sc[j]));
            const __m512i scv = _mm512_or_si512(s32, _mm512_slli_epi32(s32, 16)); // (sc, sc)
#pragma GCC unroll 16
            for (int t = 0; t < NT; t++) {
                const int8_t *yq = q8K_block(xa, xas, t, i)->qs + 32 * j;
                __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
                for (int v = 0; v < 4; v++) {
                    a0 = _mm512_dpbusd_epi32(a0, lo[v], bcast4(yq + 4 * v));
                    a1 = _mm512_dpbusd_epi32(a1, hi[v], bcast4(yq + 16 + 4 * v));
                }
                const __m512i m = _mm512_mask_blend_epi16(0xAAAAAAAAu, a0, _mm512_slli_epi32(a1, 16));
                isum[t] = _mm512_dpwssd_epi32(isum[t], m, scv);
            }
        }

#pragma GCC unroll 16
        for (int t = 0; t < NT; t++) {
            const __m512 yd = _mm512_set1_ps(q8K_block(xa, xas, t, i)->d);
            const __m512 a = _mm512_mul_ps(_mm512_mul_ps(dx, yd), _mm512_cvtepi32_ps(isum[t]));
            sum[t] = _mm512_add_ps(sum[t], _mm512_sub_ps(a, mterm[t]));
        }
    }
#pragma GCC unroll 16
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(y + (size_t)t * ys, sum[t]);
}

// ============================================================================
// q6_K: quants stored unsigned (0..63), so per super-block, token t and row r:
//   isum = sum_j sc[j][r] * dot(q[r][16j..], x[16j..]) - 32 * sum_j sc[j][r] * bsums[j]
//   sum += (d * x.d) * (float)isum
// The correction goes straight into isum with vpdpwssd on (-32 sc) int16 pairs. The scale
// stays a vpmulld: a 16-column sub-block dot (|.| <= 16 * 63 * 128) does not fit int16.
// ============================================================================

AI void q6_K_il(const int NT, int64_t n_in, float *y, size_t ys, const void *wg, const void *xa,
                size_t xas) {
    const struct lm_il_q6_K_sb *w = wg;
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    const __m512i neg32 = _mm512_set1_epi16(-32);
    __m512 sum[LM_IL_MAX_NT];
#pragma GCC unroll 16
    for (int t = 0; t < NT; t++) sum[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
        const struct lm_il_q6_K_sb *b = &w[i];
        __m512i isum[LM_IL_MAX_NT];
#pragma GCC unroll 16
        for (int t = 0; t < NT; t++) isum[t] = _mm512_setzero_si512();
        for (int p = 0; p < 8; p++) {
            // lane r: (sc[2p], sc[2p+1]) as int16, then each as int32 and -32 * both as int16
            const __m512i scp = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)b->sc[p]));
            const __m512i sce = _mm512_srai_epi32(_mm512_slli_epi32(scp, 16), 16);
            const __m512i sco = _mm512_srai_epi32(scp, 16);
            const __m512i scn = _mm512_mullo_epi16(scp, neg32);
            // 8 weight vectors of the pair, q[u] = columns 32p + 4u..: low 4 bits from ql's
            // nibbles, high 2 bits moved from qh to bits 4-5 (epi16 shifts: neighbours' bits
            // only land outside 0x30), merged with one ternlog (a | (b & c) = 0xF8)
            const struct lm_il_q6_K_pair *qp = &b->q[p];
            if (NT >= LM_IL_PF_NT) // the pair's 6 lines, KQ_PF_AHEAD on (see the top of the file)
                for (int c = 0; c < 6; c++) _mm_prefetch((const char *)qp + KQ_PF_AHEAD + 64 * c, _MM_HINT_T0);
            __m512i q[8];
            for (int h = 0; h < 2; h++) {
                const __m512i qh = _mm512_loadu_si512((const void *)qp->qh[h]);
                const __m512i hs[4] = {_mm512_slli_epi16(qh, 4), _mm512_slli_epi16(qh, 2), qh,
                                       _mm512_srli_epi16(qh, 2)};
                for (int s = 0; s < 4; s++) {
                    const __m512i ql = _mm512_loadu_si512((const void *)qp->ql[s]);
                    const __m512i lo = _mm512_and_si512(h ? _mm512_srli_epi16(ql, 4) : ql, m4);
                    q[4 * h + s] = _mm512_ternarylogic_epi32(lo, hs[s], m30, 0xF8);
                }
            }
#pragma GCC unroll 16
            for (int t = 0; t < NT; t++) {
                const struct lm_block_q8_K *yb = q8K_block(xa, xas, t, i);
                const int8_t *yq = yb->qs + 32 * p;
                __m512i ae = _mm512_setzero_si512(), ao = _mm512_setzero_si512();
                for (int u = 0; u < 4; u++) {
                    ae = _mm512_dpbusd_epi32(ae, q[u], bcast4(yq + 4 * u));
                    ao = _mm512_dpbusd_epi32(ao, q[4 + u], bcast4(yq + 16 + 4 * u));
                }
                __m512i s = _mm512_dpwssd_epi32(isum[t], scn, bcast4(&yb->bsums[2 * p]));
                s = _mm512_add_epi32(s, _mm512_mullo_epi32(ae, sce));
                isum[t] = _mm512_add_epi32(s, _mm512_mullo_epi32(ao, sco));
            }
        }
        const __m512 dv = _mm512_loadu_ps(b->d);
#pragma GCC unroll 16
        for (int t = 0; t < NT; t++) {
            const __m512 yd = _mm512_set1_ps(q8K_block(xa, xas, t, i)->d);
            sum[t] = _mm512_add_ps(sum[t], _mm512_mul_ps(_mm512_mul_ps(dv, yd), _mm512_cvtepi32_ps(isum[t])));
        }
    }
#pragma GCC unroll 16
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(y + (size_t)t * ys, sum[t]);
}

// ============================================================================
// dispatch on the token count (compile-time NT so accumulators stay in registers)
// ============================================================================

#define LM_IL_CASE(fn, n) case n: fn(n, n_in, y, ys, wg, xa, xas); break;
#define LM_IL_DEF(name, fn)                                                                   \
    void name(int64_t n_in, int nt, float *y, size_t ys, const void *wg, const void *xa,      \
              size_t xas) {                                                                   \
        LM_ASSERT(n_in % LM_QK_K == 0 && nt >= 1 && nt <= LM_IL_MAX_NT);                      \
        switch (nt) {                                                                         \
        LM_IL_CASE(fn, 1) LM_IL_CASE(fn, 2) LM_IL_CASE(fn, 3) LM_IL_CASE(fn, 4)               \
        LM_IL_CASE(fn, 5) LM_IL_CASE(fn, 6) LM_IL_CASE(fn, 7) LM_IL_CASE(fn, 8)               \
        LM_IL_CASE(fn, 9) LM_IL_CASE(fn, 10) LM_IL_CASE(fn, 11) LM_IL_CASE(fn, 12)            \
        LM_IL_CASE(fn, 13) LM_IL_CASE(fn, 14) LM_IL_CASE(fn, 15) LM_IL_CASE(fn, 16)           \
        }                                                                                     \
    }
LM_IL_DEF(lm_il_gemm_q4_K_avx512, q4_K_il)
LM_IL_DEF(lm_il_gemm_q6_K_avx512, q6_K_il)

#endif
