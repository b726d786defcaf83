// AVX-512 row kernels of the encoder families (kernels.h): LayerNorm with weight and bias and
// the plain f16-table GELU, the float operations of rows_enc_generic.c 16 lanes at a time
// (masked tails), bit-exact with it.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include <math.h>

#include "kernels/kernels_internal.h"

#if defined(__x86_64__)
#include "kernels/simd_avx512.h"

#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

// y (n) = ((x - mean) * s) * w + b: the sum of x in 16 double lanes (lanes 0-7 and 8-15 in
// two registers, added, then _mm512_reduce_add_pd's tree), the squares per chunk by
// _mm512_reduce_add_ps into a double in chunk order, tails as the generic kernel
void lm_layernorm_avx512(float *y, const float *x, const float *w, const float *b, int64_t n,
                         float eps) {
    const int64_t nv = n - n % 16;
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (int64_t j = 0; j < nv; j += 16) {
        const __m512 v = _mm512_loadu_ps(x + j);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
    }
    double sum = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    for (int64_t j = nv; j < n; j++) sum += (double)x[j];
    const float mean = (float)sum / (float)n;
    const __m512 vm = _mm512_set1_ps(mean);
    double ss = 0.0;
    for (int64_t j = 0; j < nv; j += 16) {
        const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + j), vm);
        _mm512_storeu_ps(y + j, d);
        ss += (double)_mm512_reduce_add_ps(_mm512_mul_ps(d, d));
    }
    for (int64_t j = nv; j < n; j++) {
        const float d = x[j] - mean;
        y[j] = d;
        ss += (double)(d * d);
    }
    const float var = (float)(ss / (double)n);
    const __m512 s = _mm512_set1_ps(1.0f / sqrtf(var + eps));
    for (int64_t j = 0; j < nv; j += 16) {
        __m512 v = _mm512_mul_ps(_mm512_loadu_ps(y + j), s);
        if (w) v = _mm512_mul_ps(v, _mm512_loadu_ps(w + j));
        if (b) v = _mm512_add_ps(v, _mm512_loadu_ps(b + j));
        _mm512_storeu_ps(y + j, v);
    }
    if (nv < n) {
        const __mmask16 m = mask_n(n - nv);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + nv), s);
        if (w) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + nv));
        if (b) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, b + nv));
        _mm512_mask_storeu_ps(y + nv, m, v);
    }
}

// g[j] = gelu(g[j]) for j < n: f16 table lookups by gather, 16 at a time, the last chunk masked
// (lm_geglu_avx512 without the gate)
void lm_gelu_avx512(float *g, int64_t n, const float *table) {
    const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 m = mask_n(n - j);
        const __m512 x = _mm512_maskz_loadu_ps(m, g + j);
        const __m512i idx = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, RNE));
        __m512 y = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, table, 4);
        y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ), x);
        y = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_GT_OQ), y);
        _mm512_mask_storeu_ps(g + j, m, y);
    }
}

#endif
