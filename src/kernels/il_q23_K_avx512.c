// AVX-512 VNNI GEMMs on the q2_K / q3_K row-interleaved layouts (il_layout.h): one group of 16
// weight rows (row r in i32 lane r) against up to LM_IL_MAX_NT q8_K tokens, each super-block's
// quants decoded once per tile. Results are il_q23_K_generic.c's bit for bit (exact int32 per
// super-block, then the same per-lane float steps as vec_dot).
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include <string.h>

#include "base/status.h"
#include "kernels/il_layout.h"
#include "kernels/kernels_internal.h"

#if defined(__x86_64__)
#include "kernels/simd_avx512.h"

// acc + vpdpbusd / vpdpwssd of w and the 4 bytes at p broadcast, the broadcast as the
// instruction's embedded {1to16} memory operand. With bcast4 (a vpbroadcastd per step) and
// the token loop unrolled, GCC kept broadcasts in registers and spilled: q3_K, 16 tokens x
// 2048 columns, L1-resident: 1739 -> 1495 ns per group (q2_K 1655 -> 1639); the Llama 3.2 1B
// q3_K_M shape's pp256 at 1 thread, CPU time: 0.966 -> 0.876 s.
AI __m512i dpbusd_m(__m512i acc, __m512i w, const void *p) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)p));
    return acc;
}
AI __m512i dpwssd_m(__m512i acc, __m512i w, const void *p) {
    __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)p));
    return acc;
}

// Prefetch distances as il_avx512.c's int8 kernels (measured there): near for tiles of
// many tokens, far for decode.
#define Q23_PF(NT) ((NT) >= 6 ? 1024 : 8192)

AI const struct lm_block_q8_K *q8K_at(const void *xa, size_t xas, int t, int64_t i) {
    return (const struct lm_block_q8_K *)((const char *)xa + (size_t)t * xas) + i;
}

// Per super-block, token t and lane r, for each sub-block pair p (columns 32p..32p+31):
//   a0, a1 = the two 16-column dots (|.| <= 16 * 7 * 128 < 2^15), merged into the int16
//   halves of each lane and scaled and accumulated by one vpdpwssd against (sc[2p], sc[2p+1])
// q2_K (Q3 = 0): the mins term summs = sum_j mn bsums_j by vpdpwssd on (mn, mn) pairs first,
//   then sum += (d * x.d) * isum - (dmin * x.d) * summs
// q3_K (Q3 = 1): a masked add of 4 for the high bit; -4 sum_j sc bsums_j into isum by
//   vpdpwssd on (-4 sc) pairs; sum += (d * x.d) * isum
AI void q23_K_il(const int NT, const int Q3, int64_t n_in, float *y, size_t ys, const void *wg,
                 const void *xa, size_t xas) {
    const size_t sb_bytes = Q3 ? sizeof(struct lm_il_q3_K_sb) : sizeof(struct lm_il_q2_K_sb);
    const __m512i m3 = _mm512_set1_epi8(3), b4 = _mm512_set1_epi8(4), m4w = _mm512_set1_epi16(0x0f);
    __m512 sum[LM_IL_MAX_NT];
#pragma GCC unroll 16
    for (int t = 0; t < NT; t++) sum[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
        const char *sb = (const char *)wg + (size_t)i * sb_bytes;
        const struct lm_il_q2_K_sb *b2 = (const struct lm_il_q2_K_sb *)sb;
        const struct lm_il_q3_K_sb *b3 = (const struct lm_il_q3_K_sb *)sb;
        const uint8_t(*qs)[4 * LM_IL_ROWS] = Q3 ? b3->qs : b2->qs;
        const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(Q3 ? b3->d : b2->d)));

        __m512 mterm[LM_IL_MAX_NT];
        if (!Q3) { // mins first (their registers are free again before the quant loop)
            const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b2->dmin));
            __m512i mnv[8]; // lane r: (mn[2p][r], mn[2p+1][r]) as int16
            for (int p = 0; p < 8; p++)
                mnv[p] = _mm512_srli_epi16(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)b2->sc[p])), 4);
#pragma GCC unroll 16
            for (int t = 0; t < NT; t++) {
                const struct lm_block_q8_K *yb = q8K_at(xa, xas, t, i);
                __m512i acc = _mm512_setzero_si512();
                for (int p = 0; p < 8; p++) acc = dpwssd_m(acc, mnv[p], &yb->bsums[2 * p]);
                mterm[t] = _mm512_mul_ps(_mm512_mul_ps(dm, _mm512_set1_ps(yb->d)), _mm512_cvtepi32_ps(acc));
            }
        }

        __m512i isum[LM_IL_MAX_NT];
#pragma GCC unroll 16
        for (int t = 0; t < NT; t++) isum[t] = _mm512_setzero_si512();
        for (int p = 0; p < 8; p++) {
            _mm_prefetch((const char *)qs[2 * p] + Q23_PF(NT), _MM_HINT_T0);
            _mm_prefetch((const char *)qs[2 * p + 1] + Q23_PF(NT), _MM_HINT_T0);
            // q[s]: columns 32p + 4s.. (sub-block 2p), q[4 + s]: 32p + 16 + 4s.. (2p + 1)
            __m512i q[8];
            for (int e = 0; e < 2; e++) {
                const __m512i raw = _mm512_loadu_si512((const void *)qs[2 * p + e]);
                for (int s = 0; s < 4; s++) {
                    q[4 * e + s] = _mm512_and_si512(s ? _mm512_srli_epi16(raw, 2 * s) : raw, m3);
                    if (Q3) q[4 * e + s] = _mm512_mask_add_epi8(q[4 * e + s], (__mmask64)b3->qh[2 * p + e][s],
                                                                q[4 * e + s], b4);
                }
            }
            if (Q3) _mm_prefetch((const char *)b3->qh[2 * p] + Q23_PF(NT), _MM_HINT_T0);
            __m512i scv; // lane r: (sc[2p][r], sc[2p+1][r]) as int16
            if (Q3) scv = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)b3->sc[p]));
            else scv = _mm512_and_si512(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)b2->sc[p])), m4w);
            const __m512i scn = Q3 ? _mm512_slli_epi16(_mm512_sub_epi16(_mm512_setzero_si512(), scv), 2) : scv;
#pragma GCC unroll 16
            for (int t = 0; t < NT; t++) {
                const struct lm_block_q8_K *yb = q8K_at(xa, xas, t, i);
                const int8_t *yq = yb->qs + 32 * p;
                __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
                for (int s = 0; s < 4; s++) {
                    a0 = dpbusd_m(a0, q[s], yq + 4 * s);
                    a1 = dpbusd_m(a1, q[4 + s], yq + 16 + 4 * s);
                }
                const __m512i m = _mm512_mask_blend_epi16(0xAAAAAAAAu, a0, _mm512_slli_epi32(a1, 16));
                isum[t] = _mm512_dpwssd_epi32(isum[t], m, scv);
                if (Q3) isum[t] = dpwssd_m(isum[t], scn, &yb->bsums[2 * p]);
            }
        }

#pragma GCC unroll 16
        for (int t = 0; t < NT; t++) {
            const __m512 yd = _mm512_set1_ps(q8K_at(xa, xas, t, i)->d);
            const __m512 a = _mm512_mul_ps(_mm512_mul_ps(dx, yd), _mm512_cvtepi32_ps(isum[t]));
            sum[t] = _mm512_add_ps(sum[t], Q3 ? a : _mm512_sub_ps(a, mterm[t]));
        }
    }
#pragma GCC unroll 16
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(y + (size_t)t * ys, sum[t]);
}

AI void q2_K_il(const int NT, int64_t n_in, float *y, size_t ys, const void *wg, const void *xa, size_t xas) {
    q23_K_il(NT, 0, n_in, y, ys, wg, xa, xas);
}
AI void q3_K_il(const int NT, int64_t n_in, float *y, size_t ys, const void *wg, const void *xa, size_t xas) {
    q23_K_il(NT, 1, n_in, y, ys, wg, xa, xas);
}

// dispatch on the token count (compile-time NT so accumulators stay in registers)
#define Q23_CASE(fn, n) case n: fn(n, n_in, y, ys, wg, xa, xas); break;
#define Q23_DEF(name, fn)                                                                     \
    void name(int64_t n_in, int nt, float *y, size_t ys, const void *wg, const void *xa,      \
              size_t xas) {                                                                   \
        LM_ASSERT(n_in % LM_QK_K == 0 && nt >= 1 && nt <= LM_IL_MAX_NT);                      \
        switch (nt) {                                                                         \
        Q23_CASE(fn, 1) Q23_CASE(fn, 2) Q23_CASE(fn, 3) Q23_CASE(fn, 4)                       \
        Q23_CASE(fn, 5) Q23_CASE(fn, 6) Q23_CASE(fn, 7) Q23_CASE(fn, 8)                       \
        Q23_CASE(fn, 9) Q23_CASE(fn, 10) Q23_CASE(fn, 11) Q23_CASE(fn, 12)                    \
        Q23_CASE(fn, 13) Q23_CASE(fn, 14) Q23_CASE(fn, 15) Q23_CASE(fn, 16)                   \
        }                                                                                     \
    }
Q23_DEF(lm_il_gemm_q2_K_avx512, q2_K_il)
Q23_DEF(lm_il_gemm_q3_K_avx512, q3_K_il)

#endif
