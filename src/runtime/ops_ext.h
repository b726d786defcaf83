// Helpers for the llama / qwen2 / qwen3 families, kept apart from ops.c (ops_rope.c): the
// llama3 RoPE frequency factors, which lm_op_rope_cache then applies.
#ifndef LM_RUNTIME_OPS_EXT_H
#define LM_RUNTIME_OPS_EXT_H

#include "runtime/runtime.h"

// llama3 frequency factors (n_rot/2 floats) from rope.scaling.* metadata, as
// convert_hf_to_gguf computes rope_freqs.weight (factor, low/high_freq_factor,
// original_context_length).
void lm_rope_llama3_factors(float *out, int n_rot, float base, float factor, float low_freq,
                            float high_freq, float orig_ctx);

#endif
