// AVX2 quantizer of activation rows to q8_1 (the activations of q4_1 / q5_1 weights):
// quant_avx2.c's q8_0 steps plus s = f16(d * sum q); bit-identical to quant_generic.c's.
// Measured: 256 rows of 576, 0.34 ms generic -> ~0.04 ms here, ~half of a q4_1 o_proj's
// prefill matmul (/tmp harness over lm_matmul_*, 1 thread).
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include <string.h>

#include "kernels/kernels_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include "kernels/simd_avx2.h"

void lm_quant_q8_1_avx2(const float *x, void *vy, int64_t n) {
    struct lm_block_q8_1 *y = vy;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / LM_QK8_1; i++, x += 32) {
        __m256 v[4], m = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[k]));
        }
        const float amax = hmax_f32x8(m);
        const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[i].d = (lm_f16)_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], _mm256_set1_ps(id))); // half to even
        const int sum = hsum_i32x8(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
        y[i].s = (lm_f16)_cvtss_sh((float)sum * d, _MM_FROUND_TO_NEAREST_INT);
        store_i32x32_as_i8(y[i].qs, q[0], q[1], q[2], q[3]);
    }
}

#endif
