// AVX-512 VNNI GEMM on the q4_1 / q5_1 il layouts (il_layout.h): one group of 16 weight rows
// against up to LM_IL_MAX_NT tokens, the 16 rows in the 16 i32 lanes (one vpdpbusd = 16 rows
// x 4 columns, no horizontal sums), each block's weights decoded once for every token of the
// tile. Results are il_q1_generic.c's bit for bit (kernels.h states the numerics).
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include <string.h>

#include "kernels/il_layout.h"
#include "kernels/kernels_internal.h"

#if defined(__x86_64__)
#include "kernels/simd_avx512.h"

// il_avx512.c's prefetch distances (its measurements): further ahead when few tokens stream
// the weights at the memory's rate (decode), nearer when a tile of many reads them slowly
#define IL_Q1_PF(NT) ((NT) >= 6 ? 1024 : 8192)

// one group (16 rows) x NT tokens; Q5: q5_1 records (else q4_1)
AI void il_q1_n(const int NT, const int Q5, int64_t n_in, float *y, size_t ys, const void *wg,
                const void *xa, size_t xas) {
    const int64_t nb = n_in / 32;
    const size_t rec = Q5 ? LM_IL_Q5_1_REC : LM_IL_Q4_1_REC;
    const __m512i m4 = _mm512_set1_epi8(0x0f), b16 = _mm512_set1_epi8(16);
    __m512 acc[LM_IL_MAX_NT];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *r = (const uint8_t *)wg + (size_t)b * rec;
        for (size_t o = 0; o < rec; o += 64) _mm_prefetch((const char *)r + IL_Q1_PF(NT) + o, _MM_HINT_T0);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)r));
        const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(r + 32)));
        __m512i w[8];
        for (int j = 0; j < 4; j++) {
            const __m512i v = _mm512_loadu_si512((const void *)(r + 64 + 64 * j));
            w[2 * j] = _mm512_and_si512(v, m4);
            w[2 * j + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            if (Q5) {
                uint64_t h0, h1;
                memcpy(&h0, r + 64 + 256 + 16 * j, 8);
                memcpy(&h1, r + 64 + 256 + 16 * j + 8, 8);
                w[2 * j] = _mm512_mask_add_epi8(w[2 * j], (__mmask64)h0, w[2 * j], b16);
                w[2 * j + 1] = _mm512_mask_add_epi8(w[2 * j + 1], (__mmask64)h1, w[2 * j + 1], b16);
            }
        }
        for (int t = 0; t < NT; t++) {
            const int8_t *xt = (const int8_t *)((const char *)xa + (size_t)t * xas);
            const int8_t *q = xt + b * 32;
            const float dx = ((const float *)(xt + nb * 32))[b];
            const float sx = ((const float *)(xt + nb * 36))[b];
            __m512i s0 = _mm512_setzero_si512();
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
            acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(sx), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++) _mm512_storeu_ps(y + (size_t)t * ys, acc[t]);
}

#define IL_Q1_CASE(n, q5) case n: il_q1_n(n, q5, n_in, y, ys, wg, xa, xas); break;
#define IL_Q1_SWITCH(q5)                                                                       \
    switch (nt) {                                                                              \
        IL_Q1_CASE(1, q5) IL_Q1_CASE(2, q5) IL_Q1_CASE(3, q5) IL_Q1_CASE(4, q5)                \
        IL_Q1_CASE(5, q5) IL_Q1_CASE(6, q5) IL_Q1_CASE(7, q5) IL_Q1_CASE(8, q5)                \
        IL_Q1_CASE(9, q5) IL_Q1_CASE(10, q5) IL_Q1_CASE(11, q5) IL_Q1_CASE(12, q5)             \
        IL_Q1_CASE(13, q5) IL_Q1_CASE(14, q5) IL_Q1_CASE(15, q5)                               \
        default: il_q1_n(16, q5, n_in, y, ys, wg, xa, xas); break;                             \
    }

void lm_il_gemm_q4_1_avx512(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                            const void *xa, size_t xas) {
    IL_Q1_SWITCH(0)
}

void lm_il_gemm_q5_1_avx512(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                            const void *xa, size_t xas) {
    IL_Q1_SWITCH(1)
}

#endif
