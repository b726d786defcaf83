// AVX-512 VNNI kernels of iq4_nl and iq4_xs: the dot products (iq4_x86.h's bodies with
// vpdpbusd) and the il GEMMs (iq4_nl on q4_0's il records, iq4_xs on its own; each nibble
// looked up as kv + 128 by one vpshufb, then il_avx512.c's q8_0 / q5_K steps). Bit-identical
// to iq4_generic.c.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include "kernels/kernels_internal.h"

#if defined(__x86_64__)

#include <string.h>

#include "kernels/il_layout.h"
#include "kernels/iq4_x86.h"
#include "kernels/simd_avx512.h"

// w (n) iq4_nl . x (n) q8_0
void lm_vec_dot_iq4_nl_avx512(int64_t n, float *s, const void *w, const void *xq) {
    lm_dot_iq4_nl_ymm(n, s, w, xq, dot_i8i8_vnni);
}

// w (n) iq4_xs . x (n) q8_K
void lm_vec_dot_iq4_xs_avx512(int64_t n, float *s, const void *w, const void *xq) {
    lm_dot_iq4_xs_ymm(n, s, w, xq, dot_i8i8_vnni);
}

// ---- il GEMM: one group (16 rows) x NT tokens; per token and block exact int32 for the 16
// rows (c128 = -128 sum x undoes the + 128), then fma(d_w * d_x, isum, acc) in block order.
// Prefetch as il_avx512.c's int8 kernels (its measurements): further ahead for few tokens.
#define IQ4_PF(NT) ((NT) >= 6 ? 1024 : 8192)

AI void il_iq4_nl_n(const int NT, int64_t n_in, float *y, size_t ys, const void *wg, const void *xa,
                    size_t xas) {
    const int64_t nb = n_in / 32;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    int8_t t128[16];
    for (int i = 0; i < 16; i++) t128[i] = (int8_t)(lm_kvalues_iq4nl[i] + 128);
    const __m512i tbl = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)t128));
    __m512 acc[LM_IL_MAX_NT];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *r = (const uint8_t *)wg + (size_t)b * LM_IL_Q4_0_REC;
        for (size_t o = 0; o < LM_IL_Q4_0_REC; o += 64) _mm_prefetch((const char *)r + IQ4_PF(NT) + o, _MM_HINT_T0);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)r));
        __m512i wv[8];
        for (int j = 0; j < 4; j++) {
            const __m512i v = _mm512_loadu_si512((const void *)(r + 32 + 64 * j));
            wv[2 * j] = _mm512_shuffle_epi8(tbl, _mm512_and_si512(v, m4));
            wv[2 * j + 1] = _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
        }
#pragma GCC unroll 16
        for (int t = 0; t < NT; t++) { // unrolled: 16 tokens x 2048 columns, L1-resident, 1552 -> 1434 ns
            const int8_t *xt = (const int8_t *)((const char *)xa + (size_t)t * xas);
            const int8_t *q = xt + b * 32;
            const float dx = ((const float *)(xt + nb * 32))[b];
            __m512i s0 = _mm512_set1_epi32(((const int32_t *)(xt + nb * 36))[nb + b]);
            if (NT <= 2) { // few tokens: two dependency chains per block
                __m512i s1 = _mm512_setzero_si512();
                for (int g = 0; g < 4; g++) {
                    s0 = _mm512_dpbusd_epi32(s0, wv[g], bcast4(q + 4 * g));
                    s1 = _mm512_dpbusd_epi32(s1, wv[g + 4], bcast4(q + 4 * g + 16));
                }
                s0 = _mm512_add_epi32(s0, s1);
            } else {
                for (int g = 0; g < 8; g++) s0 = _mm512_dpbusd_epi32(s0, wv[g], bcast4(q + 4 * g));
            }
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(dx)), _mm512_cvtepi32_ps(s0), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(y + (size_t)t * ys, acc[t]);
}

#define IQ4_CASE(n) case n: il_iq4_nl_n(n, n_in, y, ys, wg, xa, xas); break;

void lm_il_gemm_iq4_nl_avx512(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                              const void *xa, size_t xas) {
    switch (nt) {
        IQ4_CASE(1) IQ4_CASE(2) IQ4_CASE(3) IQ4_CASE(4) IQ4_CASE(5) IQ4_CASE(6) IQ4_CASE(7)
        IQ4_CASE(8) IQ4_CASE(9) IQ4_CASE(10) IQ4_CASE(11) IQ4_CASE(12) IQ4_CASE(13) IQ4_CASE(14)
        IQ4_CASE(15)
        default: il_iq4_nl_n(16, n_in, y, ys, wg, xa, xas); break;
    }
}

// ---- il GEMM of iq4_xs: per super-block and token, per sub-block j the 8 vpdpbusd of 16 rows
// x 32 columns start from -128 (bsums[2j] + bsums[2j+1]) and are scaled by sc[j] (one vpmulld:
// the sub-block dots reach 32 * 241 * 128 > 2^15), then iq4_generic.c's fma per super-block.
AI void il_iq4_xs_n(const int NT, int64_t n_in, float *y, size_t ys, const void *wg, const void *xa,
                    size_t xas) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    int8_t t128[16];
    for (int i = 0; i < 16; i++) t128[i] = (int8_t)(lm_kvalues_iq4nl[i] + 128);
    const __m512i tbl = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)t128));
    __m512 acc[LM_IL_MAX_NT];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
        const struct lm_il_iq4_xs_sb *b = (const struct lm_il_iq4_xs_sb *)wg + i;
        __m512i isum[LM_IL_MAX_NT];
        for (int t = 0; t < NT; t++) isum[t] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            __m512i lo[4], hi[4];
            for (int c = 0; c < 4; c++) _mm_prefetch((const char *)b->qs[j] + IQ4_PF(NT) + 64 * c, _MM_HINT_T0);
            for (int v = 0; v < 4; v++) {
                const __m512i raw = _mm512_loadu_si512((const void *)b->qs[j][v]);
                lo[v] = _mm512_shuffle_epi8(tbl, _mm512_and_si512(raw, m4));
                hi[v] = _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4));
            }
            const __m512i scv = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b->sc[j]));
            for (int t = 0; t < NT; t++) {
                const struct lm_block_q8_K *yb = (const struct lm_block_q8_K *)((const char *)xa + (size_t)t * xas) + i;
                const int8_t *yq = yb->qs + 32 * j;
                __m512i a0 = _mm512_set1_epi32(-128 * (yb->bsums[2 * j] + yb->bsums[2 * j + 1]));
                __m512i a1 = _mm512_setzero_si512();
                for (int v = 0; v < 4; v++) {
                    a0 = _mm512_dpbusd_epi32(a0, lo[v], bcast4(yq + 4 * v));
                    a1 = _mm512_dpbusd_epi32(a1, hi[v], bcast4(yq + 16 + 4 * v));
                }
                isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(_mm512_add_epi32(a0, a1), scv));
            }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d));
        for (int t = 0; t < NT; t++) {
            const float yd = ((const struct lm_block_q8_K *)((const char *)xa + (size_t)t * xas) + i)->d;
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(yd)), _mm512_cvtepi32_ps(isum[t]), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(y + (size_t)t * ys, acc[t]);
}

#define IQ4_XS_CASE(n) case n: il_iq4_xs_n(n, n_in, y, ys, wg, xa, xas); break;

void lm_il_gemm_iq4_xs_avx512(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                              const void *xa, size_t xas) {
    switch (nt) {
        IQ4_XS_CASE(1) IQ4_XS_CASE(2) IQ4_XS_CASE(3) IQ4_XS_CASE(4) IQ4_XS_CASE(5) IQ4_XS_CASE(6)
        IQ4_XS_CASE(7) IQ4_XS_CASE(8) IQ4_XS_CASE(9) IQ4_XS_CASE(10) IQ4_XS_CASE(11)
        IQ4_XS_CASE(12) IQ4_XS_CASE(13) IQ4_XS_CASE(14) IQ4_XS_CASE(15)
        default: il_iq4_xs_n(16, n_in, y, ys, wg, xa, xas); break;
    }
}

#endif
