// The horizontal sum of GCC's _mm512_reduce_add_ps as a fixed add tree, for code whose
// float order must match it: scalar (lm_tree16) and 16 sums at once (lm_reduce_add16).
#ifndef LM_KERNELS_REDUCE16_H
#define LM_KERNELS_REDUCE16_H

// 16 lane sums -> one float: s[i] = a[i+8] + a[i], then s[i+4] + s[i], then
// (s0 + s2) + (s1 + s3). Float addition commutes, so only the tree's shape matters.
static inline float lm_tree16(const float *a) {
    float s8[8], s4[4];
    for (int i = 0; i < 8; i++) s8[i] = a[i + 8] + a[i];
    for (int i = 0; i < 4; i++) s4[i] = s8[i + 4] + s8[i];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

// lm_reduce_add16's lane 4k+m comes from input row 4m+k: feeding vector c in row
// lm_reduce16_slot(c) = 4(c%4) + c/4 (a transpose, its own inverse) puts the sums in order.
static inline int lm_reduce16_slot(int c) { return 4 * (c & 3) + (c >> 2); }

#if defined(__AVX512F__)
#include <immintrin.h>
// _mm512_reduce_add_ps of 16 vectors at once: x holds 16 rows of 16 floats, vector c in
// row lm_reduce16_slot(c); lane c of the result is lm_tree16 of vector c.
static inline __attribute__((always_inline)) __m512 lm_reduce_add16(const float *x) {
    __m512 y[8], z[4], w[2];
    for (int k = 0; k < 8; k++) { // rows 2k, 2k+1: a[i+8] + a[i], one row per 256 bits
        const __m512 a = _mm512_loadu_ps(x + 32 * k), b = _mm512_loadu_ps(x + 32 * k + 16);
        y[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)),
                             _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)));
    }
    for (int k = 0; k < 4; k++) // s[i+4] + s[i], one row per 128 bits
        z[k] = _mm512_add_ps(_mm512_shuffle_f32x4(y[2 * k], y[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)),
                             _mm512_shuffle_f32x4(y[2 * k], y[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)));
    for (int k = 0; k < 2; k++) // (s0 + s2), (s1 + s3) of two rows per 128 bits
        w[k] = _mm512_add_ps(_mm512_shuffle_ps(z[2 * k], z[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(z[2 * k], z[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
}
#endif

#endif
