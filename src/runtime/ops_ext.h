// Ops added for the llama / qwen2 / qwen3 families, kept apart from ops.c: RoPE with
// per-dimension frequency factors (llama3 rope_freqs), in ops_rope.c. Same calling
// convention as
// runtime.h: every pool thread calls with (ith, nth); the caller places barriers.
#ifndef LM_RUNTIME_OPS_EXT_H
#define LM_RUNTIME_OPS_EXT_H

#include "runtime/runtime.h"

// RoPE in place on x (n_tokens, n_heads*head_dim) at the batch positions, as ggml's
// rope_ext computes it without YaRN: theta_i = pos * base^(-2i/n_rot) (built by repeated
// multiplication in float), then theta_i / freq_factors[i] (if not NULL), then * scale.
// freq_factors: (n_rot/2) floats or NULL. n_rot <= 512.
void lm_op_rope_ff(struct lm_context *c, float *x, int64_t n_heads, int64_t head_dim,
                   int64_t n_rot, float base, float scale, const float *freq_factors,
                   enum lm_rope_type type, int ith, int nth);

// llama3 frequency factors (n_rot/2 floats) from rope.scaling.* metadata, as
// convert_hf_to_gguf computes rope_freqs.weight (factor, low/high_freq_factor,
// original_context_length).
void lm_rope_llama3_factors(float *out, int n_rot, float base, float factor, float low_freq,
                            float high_freq, float orig_ctx);

#endif
