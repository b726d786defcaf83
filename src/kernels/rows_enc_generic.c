// Scalar row kernels of the encoder families (bert): LayerNorm with weight and bias, plain
// GELU (no gate). Each states the float order every table reproduces (kernels.h).
#pragma GCC optimize("fp-contract=off") // ggml's norm, mul and add round each step

#include <math.h>

#include "kernels/kernels_internal.h"

// y (n) = ((x - mean) * s) * w + b as ggml_norm, ggml_mul, ggml_add (kernels.h states the
// order): the sum of x in 16 double lanes and rmsnorm's tree, then the tail one by one; the
// squares of d = x - mean per 16-chunk by lm_tree16 into a double one chunk after the other
// (ggml_vec_cvar_f32's AVX-512 order), then the tail one by one. y may be x; w, b may be NULL.
void lm_layernorm_generic(float *y, const float *x, const float *w, const float *b, int64_t n,
                          float eps) {
    const int64_t nv = n - n % 16;
    double lane[16] = {0};
    for (int64_t j = 0; j < nv; j += 16)
        for (int l = 0; l < 16; l++) lane[l] += (double)x[j + l];
    double t[8], u[4];
    for (int l = 0; l < 8; l++) t[l] = lane[l] + lane[l + 8];
    for (int l = 0; l < 4; l++) u[l] = t[l + 4] + t[l];
    double sum = (u[2] + u[0]) + (u[3] + u[1]);
    for (int64_t j = nv; j < n; j++) sum += (double)x[j];
    const float mean = (float)sum / (float)n;
    double ss = 0.0;
    for (int64_t j = 0; j < nv; j += 16) {
        float sq[16];
        for (int l = 0; l < 16; l++) {
            const float d = x[j + l] - mean;
            y[j + l] = d;
            sq[l] = d * d;
        }
        ss += (double)lm_tree16(sq);
    }
    for (int64_t j = nv; j < n; j++) {
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
