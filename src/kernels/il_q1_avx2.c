// AVX2 GEMM on the q4_1 / q5_1 il layouts (il_layout.h): one group of 16 weight rows (two ymm
// of 8 i32 lanes, rows 0-7 and 8-15) against up to LM_IL_MAX_NT tokens, maddubs + madd for
// 16 rows x 4 columns. The same integer sums and float steps as il_q1_generic.c (bit for bit),
// so the AVX2 table computes the bits of the generic and AVX-512 ones on these weights.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include <string.h>

#include "kernels/il_layout.h"
#include "kernels/kernels_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include "kernels/simd_avx2.h"

// one group (16 rows) x nt tokens; Q5: q5_1 records (else q4_1)
AI void il_q1_avx2(const int Q5, int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                   const void *xa, size_t xas) {
    const int64_t nb = n_in / 32;
    const size_t rec = Q5 ? LM_IL_Q5_1_REC : LM_IL_Q4_1_REC;
    const __m256i m4 = _mm256_set1_epi8(0x0f), b16 = _mm256_set1_epi8(16), one = _mm256_set1_epi16(1);
    __m256 acc[LM_IL_MAX_NT][2];
    for (int t = 0; t < nt; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *r = (const uint8_t *)wg + (size_t)b * rec;
        const __m256 dw[2] = {_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)r)),
                              _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(r + 16)))};
        const __m256 mw[2] = {_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(r + 32))),
                              _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(r + 48)))};
        __m256i w[8][2]; // columns 4g..4g+3, rows 0-7 / 8-15
        for (int j = 0; j < 4; j++)
            for (int h = 0; h < 2; h++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(r + 64 + 64 * j + 32 * h));
                w[2 * j][h] = _mm256_and_si256(v, m4);
                w[2 * j + 1][h] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            }
        if (Q5)
            for (int g = 0; g < 8; g++) {
                uint64_t hb;
                memcpy(&hb, r + 64 + 256 + 8 * g, 8);
                for (int h = 0; h < 2; h++)
                    w[g][h] = _mm256_or_si256(w[g][h], _mm256_and_si256(bits_to_bytes((uint32_t)(hb >> (32 * h))), b16));
            }
        for (int t = 0; t < nt; t++) {
            const int8_t *xt = (const int8_t *)((const char *)xa + (size_t)t * xas);
            const int8_t *q = xt + b * 32;
            const float dx = ((const float *)(xt + nb * 32))[b];
            const float sx = ((const float *)(xt + nb * 36))[b];
            __m256i s[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
            for (int g = 0; g < 8; g++) {
                int32_t x4;
                memcpy(&x4, q + 4 * g, 4);
                const __m256i xb = _mm256_set1_epi32(x4);
                for (int h = 0; h < 2; h++) // |products| <= 2 * 31 * 128: no int16 saturation
                    s[h] = _mm256_add_epi32(s[h], _mm256_madd_epi16(_mm256_maddubs_epi16(w[g][h], xb), one));
            }
            for (int h = 0; h < 2; h++) {
                acc[t][h] = _mm256_fmadd_ps(_mm256_mul_ps(dw[h], _mm256_set1_ps(dx)), _mm256_cvtepi32_ps(s[h]), acc[t][h]);
                acc[t][h] = _mm256_fmadd_ps(mw[h], _mm256_set1_ps(sx), acc[t][h]);
            }
        }
    }
    for (int t = 0; t < nt; t++) {
        _mm256_storeu_ps(y + (size_t)t * ys, acc[t][0]);
        _mm256_storeu_ps(y + (size_t)t * ys + 8, acc[t][1]);
    }
}

void lm_il_gemm_q4_1_avx2(int64_t n_in, int nt, float *y, size_t ys, const void *wg, const void *xa,
                          size_t xas) {
    il_q1_avx2(0, n_in, nt, y, ys, wg, xa, xas);
}

void lm_il_gemm_q5_1_avx2(int64_t n_in, int nt, float *y, size_t ys, const void *wg, const void *xa,
                          size_t xas) {
    il_q1_avx2(1, n_in, nt, y, ys, wg, xa, xas);
}

#endif
