// gpt-oss (llama.cpp's `gpt-oss` architecture, LLM_ARCH_OPENAI_MOE) as data in the one decoder:
// pre-norm blocks with biased q/k/v/o projections, learned attention sinks, sliding-window
// (even layers) and full attention layers, NEOX RoPE with YaRN, and a mixture of experts with
// a biased router, softmax over the chosen top-k logits, biased experts and the clamped SwiGLU.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "model/model.h"

// ================================================================ hyper-parameters

// RoPE: NEOX over the whole head, YaRN when rope.scaling.type says so (gpt-oss-20b: factor 32
// over 4096 positions), the same base and scale on sliding and full layers (llama.cpp copies
// the training base and scale to the SWA ones unless rope.freq_base_swa is set).
static enum lm_status load_rope(struct lm_model *m) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    hp->rope_base = 10000.0f;
    if ((st = lm_model_key_f32(m, "rope.freq_base", &hp->rope_base, false))) return st;
    hp->rope_base_swa = hp->rope_base;
    if ((st = lm_model_key_f32(m, "rope.freq_base_swa", &hp->rope_base_swa, false))) return st;
    if (!(hp->rope_base > 0.0f) || hp->rope_base_swa != hp->rope_base)
        return lm_error_set(hp->rope_base > 0.0f ? LM_ERR_UNSUPPORTED : LM_ERR_FORMAT,
                            "gpt-oss: %s: rope.freq_base %g must be > 0, and rope.freq_base_swa "
                            "(%g) equal to it (YaRN's ramp is set up once)",
                            m->path, hp->rope_base, hp->rope_base_swa);
    hp->rope_type = LM_ROPE_NEOX;
    hp->rope_scale = 1.0f;
    hp->rope_scaling = LM_ROPE_SCALING_NONE;
    hp->yarn_ext_factor = 0.0f;
    hp->yarn_attn_factor = 1.0f;
    m->rope_freqs = NULL;
    struct lm_gguf_str s = {0, ""};
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", m->arch->name);
    if ((st = lm_gguf_get_str(&m->gguf, key, &s, false))) return st;
    float factor = 0.0f;
    if ((st = lm_model_key_f32(m, "rope.scaling.factor", &factor, false))) return st;
    if (lm_gguf_str_eq(s, "yarn")) {
        float ms;
        return lm_model_yarn(m, factor, &ms);
    }
    // llama.cpp: a missing type is linear, and the factor alone decides
    if (lm_gguf_str_eq(s, "none") ||
        ((s.len == 0 || lm_gguf_str_eq(s, "linear")) && (factor == 0.0f || factor == 1.0f)))
        return LM_OK;
    return lm_error_set(LM_ERR_UNSUPPORTED,
                        "gpt-oss: %s: rope scaling '%.*s' (factor %g) is not supported "
                        "(supported: none, yarn)",
                        m->path, (int)(s.len > 32 ? 32 : s.len), s.data, factor);
}

// The experts (expert_count, expert_used_count, expert_feed_forward_length) and the sliding
// window: llama.cpp's default pattern 2 (even layers sliding, odd ones full) unless the file
// has attention.sliding_window_pattern.
static enum lm_status load_block_hparams(struct lm_model *m) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    hp->n_expert = hp->n_expert_used = hp->n_ff_exp = 0;
    if ((st = lm_model_key_i32(m, "expert_count", &hp->n_expert, true))) return st;
    if ((st = lm_model_key_i32(m, "expert_used_count", &hp->n_expert_used, true))) return st;
    if ((st = lm_model_key_i32(m, "expert_feed_forward_length", &hp->n_ff_exp, true))) return st;
    if (hp->n_expert <= 0 || hp->n_expert > LM_MAX_EXPERTS || hp->n_expert_used <= 0 ||
        hp->n_expert_used > hp->n_expert || hp->n_ff_exp <= 0 || hp->n_ff_exp > (1 << 20))
        return lm_error_set(LM_ERR_FORMAT,
                            "gpt-oss: %s: expert_count %d, expert_used_count %d, "
                            "expert_feed_forward_length %d: need 0 < used <= count <= %d and a "
                            "positive expert size", m->path, hp->n_expert, hp->n_expert_used,
                            hp->n_ff_exp, LM_MAX_EXPERTS);
    hp->expert_gating = LM_EXPERT_GATING_SOFTMAX_WEIGHT;
    hp->expert_norm_w = false;
    hp->expert_w_scale = 0.0f; // llama.cpp reads no expert_weights_scale for gpt-oss
    hp->n_expert_groups = hp->n_group_used = 0;
    if ((st = lm_model_key_i32(m, "attention.sliding_window", &hp->n_swa, true))) return st;
    hp->swa_period = 2;
    if ((st = lm_model_key_i32(m, "attention.sliding_window_pattern", &hp->swa_period, false)))
        return st;
    if (hp->n_swa <= 0 || hp->swa_period < 0)
        return lm_error_set(LM_ERR_FORMAT,
                            "gpt-oss: %s: attention.sliding_window %d must be > 0 and "
                            "sliding_window_pattern %d >= 0", m->path, hp->n_swa, hp->swa_period);
    return LM_OK;
}

// ================================================================ tensors

// A 2-D F32 tensor "blk.<il>.<name>" of GGUF shape [n, n_expert]: the experts' bias rows.
static enum lm_status expert_bias(struct lm_model *m, int il, const char *name, int64_t n,
                                  const float **out) {
    struct lm_weight w;
    enum lm_status st = lm_model_weightf(m, &w, true, n, m->hp.n_expert, "blk.%d.%s", il, name);
    if (st) return st;
    if (w.type != LM_DTYPE_F32)
        return lm_error_set(LM_ERR_UNSUPPORTED, "gpt-oss: %s: tensor '%s' has dtype %s, expected "
                            "f32", m->path, w.name, lm_dtype_name(w.type));
    *out = w.data;
    return LM_OK;
}

static enum lm_status load_layer(struct lm_model *m, int il) {
    const struct lm_hparams *hp = &m->hp;
    struct lm_layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, X = hp->n_expert, F = hp->n_ff_exp;
    const int64_t qd = (int64_t)hp->n_head * hp->head_dim_k, kd = (int64_t)hp->n_head_kv * hp->head_dim_k;
    enum lm_status st;
    L->swa = hp->swa_period == 0 || il % hp->swa_period < hp->swa_period - 1;
    L->rope_base = hp->rope_base;
    L->rope_scale = hp->rope_scale;
    const struct lm_layer_tensor ts[] = {
        {&L->attn_norm, "attn_norm.weight", E, 1, true},
        {&L->wq, "attn_q.weight", E, qd, true},
        {&L->wk, "attn_k.weight", E, kd, true},
        {&L->wv, "attn_v.weight", E, kd, true},
        {&L->bq, "attn_q.bias", qd, 1, true},
        {&L->bk, "attn_k.bias", kd, 1, true},
        {&L->bv, "attn_v.bias", kd, 1, true},
        {&L->wo, "attn_output.weight", qd, E, true},
        {&L->bo, "attn_output.bias", E, 1, true},
        {&L->attn_sinks, "attn_sinks.weight", hp->n_head, 1, true},
        // llama.cpp's attn_post_norm is the FFN's pre-norm: the residual, then this norm
        {&L->ffn_norm, "post_attention_norm.weight", E, 1, true},
        {&L->router, "ffn_gate_inp.weight", E, X, true},
        {&L->router_b, "ffn_gate_inp.bias", X, 1, true},
    };
    if ((st = lm_model_layer_weights(m, il, ts, (int)(sizeof ts / sizeof ts[0])))) return st;
    L->gate_exps = m->exps_buf + (size_t)3 * il * X;
    L->up_exps = L->gate_exps + X;
    L->down_exps = L->up_exps + X;
    if ((st = lm_model_expert_weights(m, L->gate_exps, il, "ffn_gate_exps.weight", E, F, X)) ||
        (st = lm_model_expert_weights(m, L->up_exps, il, "ffn_up_exps.weight", E, F, X)) ||
        (st = lm_model_expert_weights(m, L->down_exps, il, "ffn_down_exps.weight", F, E, X)))
        return st;
    if ((st = expert_bias(m, il, "ffn_gate_exps.bias", F, &L->gate_exps_b)) ||
        (st = expert_bias(m, il, "ffn_up_exps.bias", F, &L->up_exps_b)) ||
        (st = expert_bias(m, il, "ffn_down_exps.bias", E, &L->down_exps_b)))
        return st;
    char name[96];
    snprintf(name, sizeof name, "blk.%d.ffn_gate_up_exps.weight", il);
    if (lm_gguf_find_tensor(&m->gguf, name))
        return lm_error_set(LM_ERR_UNSUPPORTED, "gpt-oss: %s: tensor '%s' (fused expert gate/up) "
                            "is not supported", m->path, name);
    return LM_OK;
}

static enum lm_status gptoss_load(struct lm_model *m) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    if ((st = lm_model_block_dims(m))) return st;
    hp->head_dim_v = hp->head_dim_k;
    if ((st = lm_model_key_i32(m, "attention.value_length", &hp->head_dim_v, false))) return st;
    hp->n_rot = hp->head_dim_k;
    if ((st = lm_model_key_i32(m, "rope.dimension_count", &hp->n_rot, false))) return st;
    hp->n_ctx_train = 131072;
    if ((st = lm_model_key_i32(m, "context_length", &hp->n_ctx_train, false))) return st;
    if ((st = lm_model_key_f32(m, "attention.layer_norm_rms_epsilon", &hp->rms_eps, true)))
        return st;
    if ((st = lm_model_check_dims(m))) return st;
    // llama.cpp's graph sizes every head by n_rot
    if (hp->n_rot != hp->head_dim_k || hp->head_dim_k != hp->head_dim_v)
        return lm_error_set(LM_ERR_UNSUPPORTED,
                            "gpt-oss: %s: rope.dimension_count %d / head sizes %d, %d: partial RoPE "
                            "or k/v head sizes that differ are not supported",
                            m->path, hp->n_rot, hp->head_dim_k, hp->head_dim_v);
    if ((st = load_block_hparams(m))) return st;
    if ((st = load_rope(m))) return st;
    hp->attn_scale = 1.0f / sqrtf((float)hp->n_rot);
    hp->embd_scale = 1.0f;
    hp->final_softcap = 0.0f;
    if ((st = lm_model_io_weights(m))) return st;
    memset(&m->output_b, 0, sizeof m->output_b);
    if (!(m->exps_buf = calloc((size_t)3 * hp->n_layer * hp->n_expert, sizeof *m->exps_buf)))
        return lm_error_set(LM_ERR_NOMEM, "gpt-oss: out of memory (expert views)");
    for (int il = 0; il < hp->n_layer; il++)
        if ((st = load_layer(m, il))) return st;
    return LM_OK;
}

// pre-norm blocks, no post norms; the experts' activation is the clamped SwiGLU
const struct lm_arch lm_arch_gptoss = {
    .name = "gpt-oss",
    .load = gptoss_load,
    .decoder = {.post_norms = false, .ffn_act = LM_FFN_ACT_SWIGLU_OAI},
};
