// The 256-bit dot-product bodies of the 32-element block formats that dot_avx2.c and
// dot_avx512.c share: each ISA file passes its signed int8 dot step (dot_i8i8: maddubs +
// madd; dot_i8i8_vnni: vpdpbusd), the one instruction in which their kernels differ.
#ifndef LM_KERNELS_DOT_BLOCKS32_X86_H
#define LM_KERNELS_DOT_BLOCKS32_X86_H

#include "kernels/simd_avx2.h"

// signed x signed int8 (32 each) -> 8 x i32, each the sum of 4 products. Passed as a
// constant to the always-inline bodies below, so the call is inlined as a direct one.
typedef __m256i (*lm_dot_i8i8_fn)(__m256i x, __m256i y);

// w (n) q8_0 . x (n) q8_0; two accumulators over pairs of blocks
AI void lm_dot_q8_0_ymm(int64_t n, float *s, const void *w, const void *xq, lm_dot_i8i8_fn dot) {
    const struct lm_block_q8_0 *x = w;
    const struct lm_block_q8_0 *y = xq;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0, nb = n / 32;
    for (; i + 2 <= nb; i += 2) {
        __m256 d0 = _mm256_set1_ps(f16_to_f32(x[i].d) * f16_to_f32(y[i].d));
        __m256 d1 = _mm256_set1_ps(f16_to_f32(x[i + 1].d) * f16_to_f32(y[i + 1].d));
        __m256i p0 = dot(_mm256_loadu_si256((const __m256i *)x[i].qs), _mm256_loadu_si256((const __m256i *)y[i].qs));
        __m256i p1 = dot(_mm256_loadu_si256((const __m256i *)x[i + 1].qs),
                         _mm256_loadu_si256((const __m256i *)y[i + 1].qs));
        acc0 = _mm256_fmadd_ps(d0, _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(d1, _mm256_cvtepi32_ps(p1), acc1);
    }
    for (; i < nb; i++) {
        __m256 d0 = _mm256_set1_ps(f16_to_f32(x[i].d) * f16_to_f32(y[i].d));
        __m256i p0 = dot(_mm256_loadu_si256((const __m256i *)x[i].qs), _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc0 = _mm256_fmadd_ps(d0, _mm256_cvtepi32_ps(p0), acc0);
    }
    *s = hsum_f32x8(_mm256_add_ps(acc0, acc1));
}

// w (n) q4_0 . x (n) q8_0
AI void lm_dot_q4_0_ymm(int64_t n, float *s, const void *w, const void *xq, lm_dot_i8i8_fn dot) {
    const struct lm_block_q4_0 *x = w;
    const struct lm_block_q8_0 *y = xq;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i qx = _mm256_sub_epi8(unpack_nibbles32(x[i].qs), _mm256_set1_epi8(8));
        __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        __m256 d = _mm256_set1_ps(f16_to_f32(x[i].d) * f16_to_f32(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot(qx, qy)), acc);
    }
    *s = hsum_f32x8(acc);
}

#endif
