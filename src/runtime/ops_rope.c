// RoPE with llama3 frequency factors (ops_ext.h), bit-compatible with ggml's rope_ext
// cache (ggml-cpu ops.cpp, ggml_rope_cache_init + rope_yarn with ext_factor 0, mscale 1).
#include <math.h>

#include "runtime/ops_ext.h"

void lm_op_rope_ff(struct lm_context *c, float *x, int64_t n_heads, int64_t head_dim,
                   int64_t n_rot, float base, float scale, const float *freq_factors,
                   enum lm_rope_type type, int ith, int nth) {
    const int64_t n = c->n_tokens;
    const int64_t per = (n + nth - 1) / nth;
    int64_t s = per * ith, e = s + per;
    if (s > n) s = n;
    if (e > n) e = n;
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    const int64_t half = n_rot / 2;
    float cs[512]; // (n_rot/2) cos, sin pairs
    LM_ASSERT(n_rot <= 512 && n_rot <= head_dim && n_rot % 2 == 0);
    for (int64_t i = s; i < e; i++) {
        float theta = (float)c->batch[i].pos;
        for (int64_t d = 0; d < half; d++) {
            const float ff = freq_factors ? freq_factors[d] : 1.0f;
            const float t = scale * (theta / ff);
            cs[2 * d] = cosf(t);
            cs[2 * d + 1] = sinf(t);
            theta *= theta_scale;
        }
        for (int64_t h = 0; h < n_heads; h++) {
            float *v = x + (i * n_heads + h) * head_dim;
            for (int64_t d = 0; d < half; d++) {
                const float co = cs[2 * d], si = cs[2 * d + 1];
                const int64_t a = type == LM_ROPE_NEOX ? d : 2 * d;
                const int64_t b = type == LM_ROPE_NEOX ? d + half : 2 * d + 1;
                const float x0 = v[a], x1 = v[b];
                v[a] = x0 * co - x1 * si;
                v[b] = x0 * si + x1 * co;
            }
        }
    }
}

void lm_rope_llama3_factors(float *out, int n_rot, float base, float factor, float low_freq,
                            float high_freq, float orig_ctx) {
    const double lo_wl = (double)orig_ctx / low_freq, hi_wl = (double)orig_ctx / high_freq;
    for (int i = 0; i < n_rot / 2; i++) {
        // freqs as the converter computes them: float32 base ** (2i/dim)
        const float freq = 1.0f / powf(base, (float)(2 * i) / (float)n_rot);
        const double wl = 2.0 * M_PI / (double)freq;
        if (wl < hi_wl) {
            out[i] = 1.0f;
        } else if (wl > lo_wl) {
            out[i] = factor;
        } else {
            const double sm = ((double)orig_ctx / wl - low_freq) / ((double)high_freq - low_freq);
            out[i] = (float)(1.0 / ((1.0 - sm) / factor + sm));
        }
    }
}
