// AVX2 row kernels (kernels.h): the float operations of rows_generic.c, 8 lanes at a time;
// for now gpt-oss's clamped SwiGLU (exp by lm_expf_ggml_256, simd_avx2.h), bit-exact with its
// generic oracle. The other row kernels run generic on this table.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include "kernels/kernels_internal.h"

#if defined(__x86_64__)
#include "kernels/simd_avx2.h"

// gpt-oss's clamped SwiGLU for j in [a, b): lm_swiglu_oai_generic's operations 8 lanes at a
// time (the clamps as its compares, so NaNs go the same way), the tail by the generic kernel
void lm_swiglu_oai_avx2(float *g, const float *u, int64_t a, int64_t b, float alpha, float limit) {
    const __m256 lim = _mm256_set1_ps(limit), nlim = _mm256_set1_ps(-limit);
    const __m256 va = _mm256_set1_ps(alpha), one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    int64_t j = a;
    for (; j + 8 <= b; j += 8) {
        const __m256 gv = _mm256_loadu_ps(g + j), uv = _mm256_loadu_ps(u + j);
        const __m256 x = _mm256_blendv_ps(lim, gv, _mm256_cmp_ps(gv, lim, _CMP_LT_OQ));
        __m256 y = _mm256_blendv_ps(uv, lim, _mm256_cmp_ps(lim, uv, _CMP_LT_OQ));
        y = _mm256_blendv_ps(y, nlim, _mm256_cmp_ps(uv, nlim, _CMP_LT_OQ));
        const __m256 e = lm_expf_ggml_256(_mm256_mul_ps(va, _mm256_xor_ps(x, sign)));
        const __m256 glu = _mm256_div_ps(x, _mm256_add_ps(one, e));
        _mm256_storeu_ps(g + j, _mm256_mul_ps(glu, _mm256_add_ps(y, one)));
    }
    if (j < b) lm_swiglu_oai_generic(g, u, j, b, alpha, limit);
}

#endif
