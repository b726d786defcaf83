// AVX-512 VNNI kernels on the q8_0 / q5_0 il layouts (kernels_il.c): the 16 rows of a group
// sit in the 16 int32 lanes, each vpdpbusd takes 16 rows x 4 elements against 4 broadcast
// activation bytes. A block's 8 weight vectors are decoded once and reused for every token
// of the tile; per token and block the float work is one convert, one multiply, one fma
// for all 16 rows. Same results as the generic kernels (exact int32 per block, then
// fma(d_w * d_x, isum, acc) per block in order).
#pragma GCC optimize("fp-contract=off")

#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_internal.h"

#if defined(__AVX512F__) && defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include "kernels/simd_avx512.h"

#ifndef IL_PF_AHEAD
#define IL_PF_AHEAD 1024
#endif

// one group (16 rows) x NT tokens; Q5: q5_0 records, else q8_0 records
AI void il_q8_n(const int NT, const int Q5, int64_t n_in, float *y, size_t ys, const void *wg,
                const void *xa, size_t xas) {
    const int64_t nb = n_in / 32;
    const size_t rec = Q5 ? LM_IL_Q5_0_REC : LM_IL_Q8_0_REC;
    const __m512i m4 = _mm512_set1_epi8(0x0f), b16 = _mm512_set1_epi8(16);
    __m512 acc[LM_IL_MAX_NT];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *r = (const uint8_t *)wg + (size_t)b * rec;
        if (NT >= LM_IL_PF_NT) // weights stream slowly; ahead of the hardware prefetcher (fewer
            // tokens: bandwidth-bound like decode, where prefetching loses)
            for (size_t o = 0; o < rec; o += 64) _mm_prefetch((const char *)r + IL_PF_AHEAD + o, _MM_HINT_T0);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)r));
        __m512i w[8];
        if (Q5) {
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
            const int32_t c = ((const int32_t *)(xt + nb * 36))[Q5 ? b : nb + b];
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

#endif
