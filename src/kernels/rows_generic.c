// Scalar row kernels of the forward pass (kernels.h): RMS norm, RoPE, GELU / SiLU gating
// (and gpt-oss's clamped SwiGLU),
// f32 -> f16 rows. Each states the float operations and order every table reproduces.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h: only the fmaf written here fuse

#include <math.h>

#include "kernels/kernels_internal.h"

// y (n) = rmsnorm(x (n)) [* w (n)]; the sum of squares in 16 double lanes, then
// _mm512_reduce_add_pd's tree, then the tail (kernels.h)
void lm_rmsnorm_generic(float *y, const float *x, const float *w, int64_t n, float eps) {
    double lane[16] = {0};
    const int64_t nv = n - n % 16;
    for (int64_t j = 0; j < nv; j += 16)
        for (int l = 0; l < 16; l++) lane[l] += (double)(x[j + l] * x[j + l]);
    double t[8], u[4];
    for (int l = 0; l < 8; l++) t[l] = lane[l] + lane[l + 8];
    for (int l = 0; l < 4; l++) u[l] = t[l + 4] + t[l];
    double sum = (u[2] + u[0]) + (u[3] + u[1]);
    for (int64_t j = nv; j < n; j++) sum += (double)(x[j] * x[j]);
    const float scale = 1.0f / sqrtf((float)(sum / (double)n) + eps);
    if (w) {
        for (int64_t j = 0; j < n; j++) y[j] = (x[j] * scale) * w[j];
    } else {
        for (int64_t j = 0; j < n; j++) y[j] = x[j] * scale;
    }
}

// rows r < n_rows of x (stride apart), dims [0, n_rot): pairs rotated by cs (n_rot/2 (cos, sin))
void lm_rope_generic(float *x, int64_t n_rows, int64_t stride, const float *cs, int64_t n_rot,
                     bool neox) {
    const int64_t h = n_rot / 2;
    for (int64_t r = 0; r < n_rows; r++) {
        float *v = x + r * stride;
        for (int64_t i = 0; i < h; i++) {
            const float co = cs[2 * i], si = cs[2 * i + 1];
            const int64_t a = neox ? i : 2 * i, b = neox ? i + h : 2 * i + 1;
            const float x0 = v[a], x1 = v[b];
            v[a] = fmaf(x0, co, -(x1 * si));
            v[b] = fmaf(x0, si, x1 * co);
        }
    }
}

// g (n) = gelu(g) * u (n), GELU from the f16 table
void lm_geglu_generic(float *g, const float *u, int64_t n, const float *table) {
    for (int64_t j = 0; j < n; j++) {
        const float x = g[j];
        const float y = x >= 10.0f ? x : x > -10.0f ? table[lm_f32_to_f16(x)] : 0.0f;
        g[j] = y * u[j];
    }
}

// g[j] = silu(g[j]) * u[j] for j in [a, b) of a row of F: ggml_vec_swiglu_f32's vector
// formula below F - F % 16, its scalar one after
void lm_swiglu_generic(float *g, const float *u, int64_t a, int64_t b, int64_t F) {
    const int64_t vend = F - F % 16;
    for (int64_t j = a; j < b; j++) {
        const float x = g[j];
        const float e = j < vend ? lm_expf_ggml(0.0f - x) : expf(-x);
        g[j] = (x / (1.0f + e)) * u[j];
    }
}

// gpt-oss's clamped SwiGLU for j in [a, b), ggml_compute_forward_swiglu_oai_f32's formula
// with lm_expf_ggml for its expf (one order for every lane and split, so the AVX-512 form is
// bit-exact with this one; ggml's expf and this differ by ~1 ulp)
void lm_swiglu_oai_generic(float *g, const float *u, int64_t a, int64_t b, float alpha, float limit) {
    for (int64_t j = a; j < b; j++) {
        const float x = g[j] < limit ? g[j] : limit;                              // std::min
        const float y = u[j] < -limit ? -limit : (limit < u[j] ? limit : u[j]);   // std::clamp
        const float glu = x / (1.0f + lm_expf_ggml(alpha * (-x)));
        g[j] = glu * (y + 1.0f);
    }
}

// y (n halves) = x (n floats), rounded to nearest even
void lm_f32_to_f16_generic(lm_f16 *y, const float *x, int64_t n) {
    for (int64_t j = 0; j < n; j++) y[j] = lm_f32_to_f16(x[j]);
}
