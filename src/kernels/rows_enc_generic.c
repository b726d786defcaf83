// Scalar row kernels of the encoder families (bert): LayerNorm with weight and bias, plain
// GELU (no gate). Every table holds these generic ones (kernels.h states their float order).
#pragma GCC optimize("fp-contract=off") // ggml's norm, mul and add round each step

#include <math.h>

#include "kernels/kernels_internal.h"

// y (n) = ((x - mean) * s) * w + b as ggml_norm, ggml_mul, ggml_add: mean and the variance
// summed in double (ggml_float) one by one, each rounded to float; s = 1 / sqrtf(var + eps).
// y may be x; w and b may be NULL.
void lm_layernorm_generic(float *y, const float *x, const float *w, const float *b, int64_t n,
                          float eps) {
    double sum = 0.0;
    for (int64_t j = 0; j < n; j++) sum += (double)x[j];
    const float mean = (float)sum / (float)n;
    double ss = 0.0;
    for (int64_t j = 0; j < n; j++) {
        const float d = x[j] - mean;
        y[j] = d;
        ss += (double)(d * d);
    }
    const float var = (float)(ss / (double)n);
    const float s = 1.0f / sqrtf(var + eps);
    for (int64_t j = 0; j < n; j++) {
        float v = y[j] * s;
        if (w) v = v * w[j];
        if (b) v = v + b[j];
        y[j] = v;
    }
}

// g[j] = gelu(g[j]) for j < n, by the same table and ranges as lm_geglu_generic (ggml_gelu's
// GGML_GELU_FP16): x >= 10 -> x; x > -10 -> table[f16 bits of x]; else (and NaN) 0.
void lm_gelu_generic(float *g, int64_t n, const float *table) {
    for (int64_t j = 0; j < n; j++) {
        const float x = g[j];
        g[j] = x >= 10.0f ? x : x > -10.0f ? table[lm_f32_to_f16(x)] : 0.0f;
    }
}
