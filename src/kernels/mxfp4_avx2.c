// AVX2 kernels of mxfp4: the dot products (vec_dot, vec_dot_n: mxfp4_x86.h's body with
// maddubs + madd) and the il GEMM. Bit-identical to mxfp4_generic.c.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include "kernels/kernels_internal.h"

#if defined(__x86_64__) || defined(__i386__)

#include <string.h>

#include "kernels/il_layout.h"
#include "kernels/mxfp4_x86.h"

LM_DEF_DOT_MXFP4(avx2, dot_i8i8)

// ---- il GEMM on il_layout.h's mxfp4 records. Without vpdpbusd the +128 form of the AVX-512
// kernel would overflow maddubs's int16 pairs (140 * 128 * 2), so the codes are looked up as
// the signed kv (|kv| <= 12) and take the activation's sign, maddubs multiplying |x| (0..128):
// a pair is at most 2 * 128 * 12 = 3072, the 8 steps of a block at most 24576, so they add in
// int16 and one madd per block widens them. Exact int32 per block, then the generic fma.

// 8 E8M0 bytes -> 8 floats lm_e8m0_half(e)
AI __m256 e8m0_half8(const uint8_t *e8) {
    const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)e8));
    const __m256i norm = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(norm, sub, small));
}

AI void il_mxfp4_avx2_n(const int NT, int64_t n_in, float *y, size_t ys, const void *wg, const void *xa,
                        size_t xas) {
    const int64_t nb = n_in / 32;
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    const __m256i tbl = mxfp4_table_ymm();
    __m256 acc[LM_IL_MAX_NT][2];
    for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *r = (const uint8_t *)wg + (size_t)b * LM_IL_MXFP4_REC;
        const __m256 dw[2] = {e8m0_half8(r), e8m0_half8(r + 8)};
        __m256i wv[8][2]; // [elements 4g..4g+3][rows 0-7, 8-15]: signed kv
        for (int j = 0; j < 4; j++)
            for (int h = 0; h < 2; h++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(r + 16 + 64 * j + 32 * h));
                wv[2 * j][h] = _mm256_shuffle_epi8(tbl, _mm256_and_si256(v, m4));
                wv[2 * j + 1][h] = _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
            }
        for (int t = 0; t < NT; t++) {
            const int8_t *xt = (const int8_t *)((const char *)xa + (size_t)t * xas);
            const int8_t *q = xt + b * 32;
            const float dx = ((const float *)(xt + nb * 32))[b];
            __m256i s16[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
            for (int g = 0; g < 8; g++) {
                int32_t x4;
                memcpy(&x4, q + 4 * g, 4);
                const __m256i xb = _mm256_set1_epi32(x4), ax = _mm256_sign_epi8(xb, xb);
                for (int h = 0; h < 2; h++)
                    s16[h] = _mm256_add_epi16(s16[h], _mm256_maddubs_epi16(ax, _mm256_sign_epi8(wv[g][h], xb)));
            }
            const __m256 vdx = _mm256_set1_ps(dx);
            for (int h = 0; h < 2; h++)
                acc[t][h] = _mm256_fmadd_ps(_mm256_mul_ps(vdx, dw[h]), _mm256_cvtepi32_ps(_mm256_madd_epi16(s16[h], ones)),
                                            acc[t][h]);
        }
    }
    for (int t = 0; t < NT; t++) {
        _mm256_storeu_ps(y + (size_t)t * ys, acc[t][0]);
        _mm256_storeu_ps(y + (size_t)t * ys + 8, acc[t][1]);
    }
}

#define MXFP4_CASE(n) case n: il_mxfp4_avx2_n(n, n_in, y, ys, wg, xa, xas); break;

void lm_il_gemm_mxfp4_avx2(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                           const void *xa, size_t xas) {
    switch (nt) {
        MXFP4_CASE(1) MXFP4_CASE(2) MXFP4_CASE(3) MXFP4_CASE(4) MXFP4_CASE(5) MXFP4_CASE(6)
        MXFP4_CASE(7) MXFP4_CASE(8) MXFP4_CASE(9) MXFP4_CASE(10) MXFP4_CASE(11) MXFP4_CASE(12)
        MXFP4_CASE(13) MXFP4_CASE(14) MXFP4_CASE(15)
        default: il_mxfp4_avx2_n(16, n_in, y, ys, wg, xa, xas); break;
    }
}

#endif
