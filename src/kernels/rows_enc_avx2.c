// AVX2 row kernels of the encoder families (kernels.h): LayerNorm with weight and bias and the
// plain f16-table GELU, the float operations of rows_enc_generic.c 8 lanes at a time (the 16
// double lanes as four registers, the 16-float chunk sums by tree16_ymm), bit-exact with it.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include <math.h>

#include "kernels/kernels_internal.h"

#if defined(__x86_64__)
#include "kernels/simd_avx2.h"

#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

// y (n) = ((x - mean) * s) * w + b (lm_layernorm_generic's order)
void lm_layernorm_avx2(float *y, const float *x, const float *w, const float *b, int64_t n,
                       float eps) {
    const int64_t nv = n - n % 16;
    // double lanes 0-3, 4-7, 8-11, 12-15
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t j = 0; j < nv; j += 16) {
        const __m256 v0 = _mm256_loadu_ps(x + j), v1 = _mm256_loadu_ps(x + j + 8);
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(v0)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(v0, 1)));
        a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm256_castps256_ps128(v1)));
        a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm256_extractf128_ps(v1, 1)));
    }
    // t[l] = lane l + lane l+8 (l < 8), u[l] = t[l+4] + t[l], (u2 + u0) + (u3 + u1)
    const __m256d u = _mm256_add_pd(_mm256_add_pd(a1, a3), _mm256_add_pd(a0, a2));
    const __m128d h = _mm_add_pd(_mm256_extractf128_pd(u, 1), _mm256_castpd256_pd128(u));
    double sum = _mm_cvtsd_f64(h) + _mm_cvtsd_f64(_mm_unpackhi_pd(h, h));
    for (int64_t j = nv; j < n; j++) sum += (double)x[j];
    const float mean = (float)sum / (float)n;
    const __m256 vm = _mm256_set1_ps(mean);
    double ss = 0.0;
    for (int64_t j = 0; j < nv; j += 16) {
        const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + j), vm);
        const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + j + 8), vm);
        _mm256_storeu_ps(y + j, d0);
        _mm256_storeu_ps(y + j + 8, d1);
        ss += (double)tree16_ymm(_mm256_mul_ps(d0, d0), _mm256_mul_ps(d1, d1));
    }
    for (int64_t j = nv; j < n; j++) {
        const float d = x[j] - mean;
        y[j] = d;
        ss += (double)(d * d);
    }
    const float var = (float)(ss / (double)n);
    const float sc = 1.0f / sqrtf(var + eps);
    const __m256 s = _mm256_set1_ps(sc);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(y + j), s);
        if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + j));
        if (b) v = _mm256_add_ps(v, _mm256_loadu_ps(b + j));
        _mm256_storeu_ps(y + j, v);
    }
    for (; j < n; j++) {
        float v = y[j] * sc;
        if (w) v = v * w[j];
        if (b) v = v + b[j];
        y[j] = v;
    }
}

// g[j] = gelu(g[j]) for j < n: f16 table lookups by gather, 8 at a time, the tail generic
void lm_gelu_avx2(float *g, int64_t n, const float *table) {
    const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 x = _mm256_loadu_ps(g + j);
        const __m256i idx = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, RNE));
        __m256 y = _mm256_i32gather_ps(table, idx, 4);
        y = _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
        y = _mm256_and_ps(y, _mm256_cmp_ps(x, lo, _CMP_GT_OQ));
        _mm256_storeu_ps(g + j, y);
    }
    if (j < n) lm_gelu_generic(g + j, n - j, table);
}

#endif
