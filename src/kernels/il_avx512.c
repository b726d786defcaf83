// AVX-512 VNNI GEMMs on the row-interleaved layouts (il_layout.h): one group of 16 weight
// rows against up to LM_IL_MAX_NT tokens, every weight vector decoded once and reused for all
// tokens of the tile. The int8 dtypes keep the 16 rows in the 16 i32 lanes (one vpdpbusd = 16
// rows x 4 columns, no horizontal sums); f16 tiles rows x tokens in zmm accumulators. Results
// are il_generic.c's bit for bit (kernels.h states the numerics).
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include <string.h>

#include "base/status.h"
#include "kernels/il_layout.h"
#include "kernels/kernels_internal.h"

#if defined(__x86_64__)
#include "kernels/simd_avx512.h"

// The int8 kernels prefetch one line per weight line, outside the token loop, IL_PF(NT)
// bytes ahead. Tiles of LM_IL_PF_NT or more tokens (prefill, many streams) read the weights
// slowly (~4-6 GB/s per core) and the hardware prefetcher falls behind: IL_PF_AHEAD (cold
// q6_K weights, 8 tokens: 58-67 -> 88-107 GMAC/s per core; a 7-token step of the default
// model, 2 threads: 10.5-12.2 -> 7.8-9.0 ms). Fewer tokens (decode) stream at the memory's
// rate, and there the hardware prefetcher alone keeps too few lines in flight: IL_PF_AHEAD_FEW,
// further ahead (one q4_K token over 760 MB of groups, 1 thread: 9.2 -> 12.0-12.8 GB/s, a
// plain sum of the same bytes 14 GB/s; 1 KB ahead gained little).
#ifndef LM_IL_PF_NT
#define LM_IL_PF_NT 6
#endif
#ifndef IL_PF_AHEAD
#define IL_PF_AHEAD 1024
#endif
#ifndef IL_PF_AHEAD_FEW
#define IL_PF_AHEAD_FEW 8192
#endif
#define IL_PF(NT) ((NT) >= LM_IL_PF_NT ? IL_PF_AHEAD : IL_PF_AHEAD_FEW)

// ============================================================================
// q8_0 / q5_0 / q4_0 (records of one 32-element block): per token and block, exact int32 for the
// 16 rows, then one convert, one multiply, one fma: fma(d_w * d_x, isum, acc) in block order
// ============================================================================

// one group (16 rows) x NT tokens; Q5: 1 q5_0 records, 2 q4_0 records, 0 q8_0 records
AI void il_q8_n(const int NT, const int Q5, int64_t n_in, float *y, size_t ys, const void *wg,
                const void *xa, size_t xas) {
    const int64_t nb = n_in / 32;
    const size_t rec = Q5 == 2 ? LM_IL_Q4_0_REC : Q5 ? LM_IL_Q5_0_REC : LM_IL_Q8_0_REC;
    const __m512i m4 = _mm512_set1_epi8(0x0f), b16 = _mm512_set1_epi8(16);
    __m512 acc[LM_IL_MAX_NT];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *r = (const uint8_t *)wg + (size_t)b * rec;
        for (size_t o = 0; o < rec; o += 64) // the record's lines, IL_PF(NT) on (the top of the file)
            _mm_prefetch((const char *)r + IL_PF(NT) + o, _MM_HINT_T0);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)r));
        __m512i w[8];
        if (Q5 == 2) {
            for (int j = 0; j < 4; j++) {
                const __m512i v = _mm512_loadu_si512((const void *)(r + 32 + 64 * j));
                w[2 * j] = _mm512_and_si512(v, m4);
                w[2 * j + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            }
        } else if (Q5) {
            for (int j = 0; j < 4; j++) {
                const __m512i v = _mm512_loadu_si512((const void *)(r + 32 + 64 * j));
                uint64_t h0, h1;
                memcpy(&h0, r + 32 + 256 + 16 * j, 8);
                memcpy(&h1, r + 32 + 256 + 16 * j + 8, 8);
                const __m512i lo = _mm512_and_si512(v, m4);
                const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                w[2 * j] = _mm512_mask_add_epi8(lo, (__mmask64)h0, lo, b16);
                w[2 * j + 1] = _mm512_mask_add_epi8(hi, (__mmask64)h1, hi, b16);
            }
        } else {
            for (int g = 0; g < 8; g++) w[g] = _mm512_loadu_si512((const void *)(r + 32 + 64 * g));
        }
        for (int t = 0; t < NT; t++) {
            const int8_t *xt = (const int8_t *)((const char *)xa + (size_t)t * xas);
            const int8_t *q = xt + b * 32;
            const float dx = ((const float *)(xt + nb * 32))[b];
            const int32_t c16 = ((const int32_t *)(xt + nb * 36))[Q5 ? b : nb + b];
            const int32_t c = Q5 == 2 ? c16 / 2 : c16; // q4_0: -8 sum = half of -16 sum
            __m512i s0 = _mm512_set1_epi32(c);
            if (NT <= 2) { // few tokens: two dependency chains per block
                __m512i s1 = _mm512_setzero_si512();
                for (int g = 0; g < 4; g++) {
                    s0 = _mm512_dpbusd_epi32(s0, w[g], bcast4(q + 4 * g));
                    s1 = _mm512_dpbusd_epi32(s1, w[g + 4], bcast4(q + 4 * g + 16));
                }
                s0 = _mm512_add_epi32(s0, s1);
            } else {
                for (int g = 0; g < 8; g++) s0 = _mm512_dpbusd_epi32(s0, w[g], bcast4(q + 4 * g));
            }
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(dx)), _mm512_cvtepi32_ps(s0), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(y + (size_t)t * ys, acc[t]);
}

#define IL_CASE(n, q5) case n: il_q8_n(n, q5, n_in, y, ys, wg, xa, xas); break;
#define IL_SWITCH(q5)                                                                          \
    switch (nt) {                                                                              \
        IL_CASE(1, q5) IL_CASE(2, q5) IL_CASE(3, q5) IL_CASE(4, q5) IL_CASE(5, q5)             \
        IL_CASE(6, q5) IL_CASE(7, q5) IL_CASE(8, q5) IL_CASE(9, q5) IL_CASE(10, q5)            \
        IL_CASE(11, q5) IL_CASE(12, q5) IL_CASE(13, q5) IL_CASE(14, q5) IL_CASE(15, q5)        \
        default: il_q8_n(16, q5, n_in, y, ys, wg, xa, xas); break;                             \
    }

void lm_il_gemm_q8_0_avx512(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                            const void *xa, size_t xas) {
    IL_SWITCH(0)
}

void lm_il_gemm_q5_0_avx512(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                            const void *xa, size_t xas) {
    IL_SWITCH(1)
}

void lm_il_gemm_q4_0_avx512(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                            const void *xa, size_t xas) {
    IL_SWITCH(2)
}

// ============================================================================
// q4_K / q5_K / q6_K (structs of one 256-column super-block): scales, mins and the float steps are
// per-lane vector ops; per lane the float operations are vec_dot's
// ============================================================================

AI const struct lm_block_q8_K *q8K_block(const void *xa, size_t xas, int t, int64_t i) {
    return (const struct lm_block_q8_K *)((const char *)xa + (size_t)t * xas) + i;
}

// ---- q4_K: per super-block, per token t and row r (lane r):
//   isum  = sum_j sc[j][r] * dot(q[r][32j..], x[32j..])
//   summs = sum_j mn[j][r] * (bsums[2j] + bsums[2j+1])
//   sum  += (d * x.d) * (float)isum - (dmin * x.d) * (float)summs
// A sub-block's dot is two 16-column halves (lo / hi nibbles), each |.| <= 16 * 15 * 128
// < 2^15: they are merged into the int16 halves of each lane and scaled and accumulated
// by one vpdpwssd against (sc, sc) in place of vpmulld + vpaddd (vpmulld zmm 0.40 ns vs
// vpdpwssd 0.28 ns on Zen 4: a 16-row x 2048 group at nt = 16 takes 3827 ns, 4073 with
// vpmulld). The mins use vpdpwssd on (mn[2p], mn[2p+1]) pairs against pair sums of bsums.

// q5_K (Q5 = 1) is q4_K plus a masked add of 16 per weight vector (qh); its half dots reach
// 16 * 31 * 128 > 2^15, so the scale is one vpmulld on their int32 sum instead.
AI void q45_K_il(const int NT, const int Q5, int64_t n_in, float *y, size_t ys, const void *wg,
                 const void *xa, size_t xas) {
    const size_t sb_bytes = Q5 ? sizeof(struct lm_il_q5_K_sb) : sizeof(struct lm_il_q4_K_sb);
    const __m512i m4 = _mm512_set1_epi8(0x0f), b16 = _mm512_set1_epi8(16);
    __m512 sum[LM_IL_MAX_NT];
#pragma GCC unroll 16
    for (int t = 0; t < NT; t++) sum[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
        const struct lm_il_q4_K_sb *b = (const struct lm_il_q4_K_sb *)((const char *)wg + (size_t)i * sb_bytes);
        const uint64_t *qh = Q5 ? &((const struct lm_il_q5_K_sb *)b)->qh[0][0] : NULL;
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
            for (int c = 0; c < 4; c++) // the sub-block's 4 lines, IL_PF(NT) on (the top of the file)
                _mm_prefetch((const char *)b->qs[j] + IL_PF(NT) + 64 * c, _MM_HINT_T0);
            for (int v = 0; v < 4; v++) {
                const __m512i raw = _mm512_loadu_si512((const void *)b->qs[j][v]);
                lo[v] = _mm512_and_si512(raw, m4);
                hi[v] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
                if (Q5) {
                    lo[v] = _mm512_mask_add_epi8(lo[v], (__mmask64)qh[8 * j + v], lo[v], b16);
                    hi[v] = _mm512_mask_add_epi8(hi[v], (__mmask64)qh[8 * j + 4 + v], hi[v], b16);
                }
            }
            if (Q5) _mm_prefetch((const char *)(qh + 8 * j) + IL_PF(NT), _MM_HINT_T0);
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
                if (Q5) {
                    isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(_mm512_add_epi32(a0, a1), s32));
                } else {
                    const __m512i m = _mm512_mask_blend_epi16(0xAAAAAAAAu, a0, _mm512_slli_epi32(a1, 16));
                    isum[t] = _mm512_dpwssd_epi32(isum[t], m, scv);
                }
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

// ---- q6_K: quants stored unsigned (0..63), so per super-block, token t and row r:
//   isum = sum_j sc[j][r] * dot(q[r][16j..], x[16j..]) - 32 * sum_j sc[j][r] * bsums[j]
//   sum += (d * x.d) * (float)isum
// The correction goes straight into isum with vpdpwssd on (-32 sc) int16 pairs. The scale
// stays a vpmulld: a 16-column sub-block dot (|.| <= 16 * 63 * 128) does not fit int16.

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
            for (int c = 0; c < 6; c++) // the pair's 6 lines, IL_PF(NT) on (the top of the file)
                _mm_prefetch((const char *)qp + IL_PF(NT) + 64 * c, _MM_HINT_T0);
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

// ---- dispatch on the token count (compile-time NT so accumulators stay in registers)

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
AI void q4_K_il(const int NT, int64_t n_in, float *y, size_t ys, const void *wg, const void *xa,
                size_t xas) {
    q45_K_il(NT, 0, n_in, y, ys, wg, xa, xas);
}
AI void q5_K_il(const int NT, int64_t n_in, float *y, size_t ys, const void *wg, const void *xa,
                size_t xas) {
    q45_K_il(NT, 1, n_in, y, ys, wg, xa, xas);
}
LM_IL_DEF(lm_il_gemm_q4_K_avx512, q4_K_il)
LM_IL_DEF(lm_il_gemm_q5_K_avx512, q5_K_il)
LM_IL_DEF(lm_il_gemm_q6_K_avx512, q6_K_il)

// ============================================================================
// f16 (the file's own rows): register tiles of R rows x T tokens, each output one zmm
// accumulator whose 16 lanes take the elements k = l mod 16 (fma in k order), summed at the
// end by _mm512_reduce_add_ps's tree 16 rows at a time (lm_reduce_add16). Per 16 elements a
// tile converts R weight vectors from f16 once and loads T activation vectors (f32) for
// R x T fmas, where a single-row dot spends a convert and a load per fma. The numerics are
// those of vec_dot[F16] (kernels.h), so decode (one token) and prefill tiles agree.
// ============================================================================

// software prefetch distance within each weight row (bytes)
#define F16_PF_DIST 512

// R rows (n halves each, gap elements apart) x T tokens (xs floats apart) -> acc[r][t], the
// 16 lane sums of output (r, t); PF: software prefetch of the rows F16_PF_DIST bytes ahead
AI void f16_acc(const int R, const int T, const int PF, int64_t n, const lm_f16 *w, size_t gap,
                const float *x, size_t xs, __m512 acc[4][6]) {
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= n; k += 16) {
        __m512 wv[4];
        for (int r = 0; r < R; r++)
            wv[r] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + (size_t)r * gap + k)));
        if (PF && (k & 31) == 0) // a line per row every 2 blocks (past a row's end: the next row)
            for (int r = 0; r < R; r++) _mm_prefetch((const char *)(w + (size_t)r * gap + k) + F16_PF_DIST, _MM_HINT_T0);
        for (int t = 0; t < T; t++) {
            __m512 xv = _mm512_loadu_ps(x + (size_t)t * xs + k);
            if (R > 1) __asm__("" : "+v"(xv)); // one load for R fmas: GCC would fold it into each
            for (int r = 0; r < R; r++) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
        }
    }
    if (k < n) { // masked last block: zero lanes leave their sums as they are
        const __mmask16 m = (__mmask16)((1u << (n - k)) - 1);
        for (int r = 0; r < R; r++) {
            const __m512 wv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w + (size_t)r * gap + k));
            for (int t = 0; t < T; t++)
                acc[r][t] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + (size_t)t * xs + k), acc[r][t]);
        }
    }
}

// rows w[0..R) of a group (n apart) x T tokens: the lane sums of output (r, t) ->
// lanes + 16 * lm_reduce16_slot(r0 + r) + 256 * t, reduced 16 rows at a time later
AI void f16_tile(const int R, const int T, int64_t n, const lm_f16 *w, const float *x, size_t xs,
                 float *lanes, int r0) {
    __m512 acc[4][6];
    f16_acc(R, T, T > 2, n, w, (size_t)n, x, xs, acc);
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++)
            _mm512_storeu_ps(lanes + 256 * t + 16 * lm_reduce16_slot(r0 + r), acc[r][t]);
}

// all 16 rows of the group for T tokens: tiles of 4 rows; for 1-2 tokens (decode) one row
// at a time. Rows are 2 n bytes apart, so an R-row tile reads R streams at once, and on
// this VM the read rate falls with their number (Qwen2.5 lm_head, one token, 1 thread:
// 1 row ~24 GB/s, 2 rows ~13, 8 rows ~10); with several tokens the tile is compute-bound.
AI void f16_rows(const int T, int64_t n, const lm_f16 *w, const float *x, size_t xs, float *lanes) {
    if (T <= 2) {
        for (int r0 = 0; r0 < LM_IL_ROWS; r0++) f16_tile(1, T, n, w + (size_t)r0 * n, x, xs, lanes, r0);
    } else {
        for (int r0 = 0; r0 < LM_IL_ROWS; r0 += 4) f16_tile(4, T, n, w + (size_t)r0 * n, x, xs, lanes, r0);
    }
}

void lm_il_gemm_f16_avx512(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                           const void *xa, size_t xas) {
    float lanes[6 * 256] __attribute__((aligned(64)));
    const lm_f16 *w = wg;
    const size_t xs = xas / sizeof(float);
    for (int t0 = 0; t0 < nt; t0 += 6) {
        const int T = nt - t0 < 6 ? nt - t0 : 6;
        const float *x = (const float *)((const char *)xa + (size_t)t0 * xas);
        switch (T) {
        case 1: f16_rows(1, n_in, w, x, xs, lanes); break;
        case 2: f16_rows(2, n_in, w, x, xs, lanes); break;
        case 3: f16_rows(3, n_in, w, x, xs, lanes); break;
        case 4: f16_rows(4, n_in, w, x, xs, lanes); break;
        case 5: f16_rows(5, n_in, w, x, xs, lanes); break;
        default: f16_rows(6, n_in, w, x, xs, lanes); break;
        }
        for (int t = 0; t < T; t++) _mm512_storeu_ps(y + (size_t)(t0 + t) * ys, lm_reduce_add16(lanes + 256 * t));
    }
}

// Decode: R rows gap elements apart x T tokens, each output reduced on its own
AI void f16_far(const int R, const int T, int64_t n, const lm_f16 *w, size_t gap, const float *x,
                size_t xs, float *y, size_t ys, size_t ygap) {
    __m512 acc[4][6];
    f16_acc(R, T, 0, n, w, gap, x, xs, acc);
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) y[(size_t)t * ys + (size_t)r * ygap] = _mm512_reduce_add_ps(acc[r][t]);
}

// il_gemv[F16]: the rows are cut into 4 contiguous quarters walked in lockstep, so memory
// sees 4 long sequential streams. Tiles of neighbouring rows (4 streams ~2 KB long, then a
// jump) read at ~10 GB/s on this VM where one row at a time reads ~23 and 4 far streams
// ~25 (the hardware prefetcher follows long streams only).
void lm_il_gemv_f16_avx512(int64_t n_in, int64_t n_rows, int nt, float *y, size_t ys,
                           const void *w0, const void *xa, size_t xas) {
    const lm_f16 *w = w0;
    const float *x = xa;
    const size_t xs = xas / sizeof(float);
    const int64_t q = n_rows / 4;
    for (int64_t r = 0; r < q; r++) {
        if (nt == 1) f16_far(4, 1, n_in, w + (size_t)r * n_in, (size_t)q * n_in, x, xs, y + r, ys, q);
        else f16_far(4, 2, n_in, w + (size_t)r * n_in, (size_t)q * n_in, x, xs, y + r, ys, q);
    }
    for (int64_t r = 4 * q; r < n_rows; r++) {
        if (nt == 1) f16_far(1, 1, n_in, w + (size_t)r * n_in, 0, x, xs, y + r, ys, 0);
        else f16_far(1, 2, n_in, w + (size_t)r * n_in, 0, x, xs, y + r, ys, 0);
    }
}

#endif
