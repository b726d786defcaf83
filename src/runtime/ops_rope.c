// RoPE with llama3 frequency factors (ops_ext.h), bit-compatible with ggml's rope_ext
// cache (ggml-cpu ops.cpp, ggml_rope_cache_init + rope_yarn with ext_factor 0, mscale 1).
#include <math.h>

#include "runtime/ops_ext.h"

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
