// Llama-style decoder families sharing one loader, as llama.cpp builds them
// (src/models/llama.cpp, qwen2.cpp, qwen3.cpp): pre-norm blocks, GQA attention, SwiGLU FFN,
// separate or tied LM head (the forward pass: runtime/forward.c). llama: NORM RoPE, linear or
// llama3 (rope_freqs) scaling; qwen2: q/k/v biases, NEOX RoPE; qwen3: per-head QK-norm;
// qwen3moe: qwen3 with a mixture-of-experts FFN (no shared expert), as llama with
// expert_count > 0 (Mixtral): router softmax, top-k, weights renormalised. granite and
// smollm3 are llama plus data that granite.c reads (multipliers, layers without RoPE).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "model/model.h"

// What differs between the families.
struct llama_variant {
    enum lm_rope_type rope_type;
    bool qk_norm;      // attn_q_norm / attn_k_norm required (qwen3)
    bool rope_freqs;   // rope_freqs.weight is looked for (llama)
    bool output_bias;  // output.bias is looked for (qwen2)
    bool moe;          // expert FFN required (qwen3moe); llama: when expert_count > 0
    enum lm_status (*ext)(struct lm_model *m); // the family's own data, after the rest (granite.c)
};

static const struct llama_variant k_llama = {LM_ROPE_NORM, false, true, false, false, NULL};
static const struct llama_variant k_qwen2 = {LM_ROPE_NEOX, false, false, true, false, NULL};
static const struct llama_variant k_qwen3 = {LM_ROPE_NEOX, true, false, false, false, NULL};
static const struct llama_variant k_qwen3moe = {LM_ROPE_NEOX, true, false, false, true, NULL};
// granite: llama + multipliers (attention.scale read as llama's); smollm3: no rope_freqs
static const struct llama_variant k_granite = {LM_ROPE_NORM, false, true, false, false,
                                               lm_granite_load_ext};
static const struct llama_variant k_smollm3 = {LM_ROPE_NORM, false, false, false, false,
                                               lm_smollm3_load_ext};

static const struct llama_variant *variant_of(const struct lm_model *m) {
    if (m->arch == &lm_arch_qwen2) return &k_qwen2;
    if (m->arch == &lm_arch_qwen3) return &k_qwen3;
    if (m->arch == &lm_arch_qwen3moe) return &k_qwen3moe;
    if (m->arch == &lm_arch_granite) return &k_granite;
    if (m->arch == &lm_arch_smollm3) return &k_smollm3;
    return &k_llama;
}

// ================================================================ load

// llama3 frequency factors (n_rot/2 floats) from rope.scaling.* metadata, as
// convert_hf_to_gguf computes rope_freqs.weight (factor, low/high_freq_factor,
// original_context_length), in float32 like ggml's rope cache reads them.
static void rope_llama3_factors(float *out, int n_rot, float base, float factor, float low_freq,
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

static enum lm_status load_rope_scaling(struct lm_model *m, const struct llama_variant *v) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    char type[32] = "";
    struct lm_gguf_str s = {0, ""};
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", m->arch->name);
    if ((st = lm_gguf_get_str(&m->gguf, key, &s, false))) return st;
    snprintf(type, sizeof type, "%.*s", (int)(s.len < 31 ? s.len : 31), s.data);
    float factor = 0.0f;
    if ((st = lm_model_key_f32(m, "rope.scaling.factor", &factor, false))) return st;
    if (factor == 0.0f && (st = lm_model_key_f32(m, "rope.scale_linear", &factor, false)))
        return st;
    if (!(factor >= 0.0f && factor < 1e6f))
        return lm_error_set(LM_ERR_FORMAT, "%s: %s: rope.scaling.factor = %g is out of range",
                            m->arch->name, m->path, factor);
    hp->rope_scale = 1.0f;
    hp->rope_scaling = LM_ROPE_SCALING_NONE;
    m->rope_freqs = NULL;

    if (v->rope_freqs) {
        // llama 3.x: the converter stores the factors as a tensor (llama.cpp uses it as is)
        struct lm_weight rf;
        if ((st = lm_model_weight(m, &rf, "rope_freqs.weight", hp->n_rot / 2, 1, false)))
            return st;
        if (rf.data) {
            m->rope_freqs = rf.data;
            hp->rope_scaling = LM_ROPE_SCALING_LLAMA3;
        }
    }
    if (!strcmp(type, "") || !strcmp(type, "linear") || !strcmp(type, "none")) {
        // llama.cpp: a missing type means linear; the factor alone decides
        if (strcmp(type, "none") && factor > 0.0f && factor != 1.0f) {
            hp->rope_scale = 1.0f / factor;
            if (hp->rope_scaling == LM_ROPE_SCALING_NONE) hp->rope_scaling = LM_ROPE_SCALING_LINEAR;
        }
        return LM_OK;
    }
    if (!strcmp(type, "llama3") && v->rope_freqs) {
        // not written by convert_hf_to_gguf (llama.cpp rejects it); accepted from other
        // writers: compute the factors the converter would have stored
        if (m->rope_freqs) return LM_OK; // the tensor wins
        float lo = 1.0f, hi = 4.0f, orig = 8192.0f;
        uint32_t u = 8192;
        if ((st = lm_model_key_f32(m, "rope.scaling.low_freq_factor", &lo, false))) return st;
        if ((st = lm_model_key_f32(m, "rope.scaling.high_freq_factor", &hi, false))) return st;
        if ((st = lm_model_key_u32(m, "rope.scaling.original_context_length", &u, false)))
            return st;
        orig = (float)u;
        if (factor <= 0.0f) factor = 8.0f;
        if (!(hi > lo) || u == 0 || hp->n_rot / 2 > 256)
            return lm_error_set(LM_ERR_FORMAT,
                                "%s: %s: llama3 rope scaling needs high_freq_factor > "
                                "low_freq_factor and original_context_length > 0 (got %g, %g, %u)",
                                m->arch->name, m->path, hi, lo, u);
        rope_llama3_factors(m->rope_freqs_buf, hp->n_rot, hp->rope_base, factor, lo, hi, orig);
        m->rope_freqs = m->rope_freqs_buf;
        hp->rope_scaling = LM_ROPE_SCALING_LLAMA3;
        return LM_OK;
    }
    return lm_error_set(LM_ERR_UNSUPPORTED,
                        "%s: %s: rope scaling type '%s' is not supported (supported: none, "
                        "linear%s)",
                        m->arch->name, m->path, type, v->rope_freqs ? ", llama3" : "");
}

// Tensors llama.cpp would use but lumen does not implement: refuse rather than compute
// something else.
static enum lm_status reject_unsupported(struct lm_model *m, int il) {
    static const char *const k_names[] = {
        "attn_qkv.weight", "attn_output.bias", "ffn_gate.bias",       "ffn_up.bias",
        "ffn_down.bias",   "ffn_gate_inp.weight", "ffn_gate_up_exps.weight",
        "ffn_gate_shexp.weight", "ffn_gate_inp_shexp.weight"};
    // the router belongs to expert models; the rest lumen does not implement
    const bool moe = m->hp.n_expert > 0;
    char name[96];
    for (size_t k = 0; k < sizeof k_names / sizeof k_names[0]; k++) {
        if (moe && !strcmp(k_names[k], "ffn_gate_inp.weight")) continue;
        snprintf(name, sizeof name, "blk.%d.%s", il, k_names[k]);
        if (lm_gguf_find_tensor(&m->gguf, name))
            return lm_error_set(LM_ERR_UNSUPPORTED,
                                "%s: %s: tensor '%s' (fused QKV, output/FFN bias, a router "
                                "without expert_count, fused or shared experts) is not supported",
                                m->arch->name, m->path, name);
    }
    return LM_OK;
}

// expert_count, expert_used_count, expert_feed_forward_length (qwen3moe; default n_ff /
// n_expert_used as llama.cpp's; llama's experts are n_ff wide). Both families renormalise the chosen
// weights and never scale them (llama.cpp passes norm_w = true and the unread, zero
// expert_weights_scale).
static enum lm_status load_experts_hparams(struct lm_model *m, const struct llama_variant *v) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    hp->n_expert = hp->n_expert_used = hp->n_ff_exp = 0;
    if ((st = lm_model_key_i32(m, "expert_count", &hp->n_expert, false))) return st;
    if (hp->n_expert == 0 && !v->moe) return LM_OK;
    if ((st = lm_model_key_i32(m, "expert_used_count", &hp->n_expert_used, false))) return st;
    // llama (Mixtral) experts have feed_forward_length's size: llama.cpp ignores the key there
    hp->n_ff_exp = v->moe && hp->n_expert_used > 0 ? hp->n_ff / hp->n_expert_used : hp->n_ff;
    if (v->moe && (st = lm_model_key_i32(m, "expert_feed_forward_length", &hp->n_ff_exp, false)))
        return st;
    if (hp->n_expert <= 0 || hp->n_expert > LM_MAX_EXPERTS || hp->n_expert_used <= 0 ||
        hp->n_expert_used > hp->n_expert || hp->n_ff_exp <= 0)
        return lm_error_set(LM_ERR_FORMAT,
                            "%s: %s: expert_count %d, expert_used_count %d, "
                            "expert_feed_forward_length %d: need 0 < used <= count <= %d and a "
                            "positive expert size",
                            m->arch->name, m->path, hp->n_expert, hp->n_expert_used,
                            hp->n_ff_exp, LM_MAX_EXPERTS);
    hp->expert_norm_w = true;
    hp->expert_w_scale = 0.0f;
    return LM_OK;
}

// The router and the expert views of layer il (hp.n_expert > 0).
static enum lm_status load_layer_experts(struct lm_model *m, int il) {
    const struct lm_hparams *hp = &m->hp;
    struct lm_layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, F = hp->n_ff_exp, X = hp->n_expert;
    enum lm_status st;
    if (!m->exps_buf && !(m->exps_buf = calloc((size_t)3 * hp->n_layer * X, sizeof *m->exps_buf)))
        return lm_error_set(LM_ERR_NOMEM, "model: out of memory (expert views)");
    L->gate_exps = m->exps_buf + (size_t)3 * il * X;
    L->up_exps = L->gate_exps + X;
    L->down_exps = L->up_exps + X;
    if ((st = lm_model_weightf(m, &L->router, true, E, X, "blk.%d.ffn_gate_inp.weight", il)))
        return st;
    if ((st = lm_model_expert_weights(m, L->gate_exps, il, "ffn_gate_exps.weight", E, F, X)))
        return st;
    if ((st = lm_model_expert_weights(m, L->up_exps, il, "ffn_up_exps.weight", E, F, X)))
        return st;
    return lm_model_expert_weights(m, L->down_exps, il, "ffn_down_exps.weight", F, E, X);
}

static enum lm_status llama_load(struct lm_model *m) {
    const struct llama_variant *v = variant_of(m);
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    if ((st = lm_model_block_dims(m))) return st;
    hp->head_dim_v = hp->n_head ? hp->n_embd / hp->n_head : 0;
    if ((st = lm_model_key_i32(m, "attention.value_length", &hp->head_dim_v, false))) return st;
    hp->n_rot = hp->head_dim_k;
    if ((st = lm_model_key_i32(m, "rope.dimension_count", &hp->n_rot, false))) return st;
    hp->n_ctx_train = 4096;
    if ((st = lm_model_key_i32(m, "context_length", &hp->n_ctx_train, false))) return st;
    if ((st = load_experts_hparams(m, v))) return st;
    if ((st = lm_model_key_f32(m, "attention.layer_norm_rms_epsilon", &hp->rms_eps, true)))
        return st;
    if ((st = lm_model_check_dims(m))) return st;
    // llama.cpp's graphs for these families assert head size == n_rot (no partial RoPE)
    if (hp->n_rot != hp->head_dim_k || hp->head_dim_k != hp->head_dim_v)
        return lm_error_set(LM_ERR_UNSUPPORTED,
                            "%s: %s: rope.dimension_count %d / head sizes %d, %d: partial RoPE or "
                            "k/v head sizes that differ are not supported",
                            m->arch->name, m->path, hp->n_rot, hp->head_dim_k, hp->head_dim_v);
    hp->rope_base = 10000.0f;
    if ((st = lm_model_key_f32(m, "rope.freq_base", &hp->rope_base, false))) return st;
    if (!(hp->rope_base > 0.0f))
        return lm_error_set(LM_ERR_FORMAT, "%s: %s: rope.freq_base = %g must be > 0",
                            m->arch->name, m->path, hp->rope_base);
    hp->rope_base_swa = hp->rope_base;
    hp->rope_type = v->rope_type;
    hp->n_swa = 0; // llama.cpp ignores sliding windows for these families
    hp->swa_period = 0;
    hp->embd_scale = 1.0f;
    hp->final_softcap = 0.0f;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim_k);
    float as = 0.0f; // llama: optional attention.scale overrides 1/sqrt(head_dim)
    if (v->rope_freqs && (st = lm_model_key_f32(m, "attention.scale", &as, false))) return st;
    if (as != 0.0f) hp->attn_scale = as;

    const int64_t E = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim_k,
                  kd = (int64_t)hp->n_head_kv * hp->head_dim_k,
                  vd = (int64_t)hp->n_head_kv * hp->head_dim_v, F = hp->n_ff;
    if ((st = lm_model_io_weights(m))) return st;
    memset(&m->output_b, 0, sizeof m->output_b);
    if (v->output_bias &&
        (st = lm_model_weight(m, &m->output_b, "output.bias", hp->n_vocab, 1, false)))
        return st;
    if ((st = load_rope_scaling(m, v))) return st;

    for (int il = 0; il < hp->n_layer; il++) {
        struct lm_layer *L = &m->layers[il];
        L->swa = false;
        L->rope_base = hp->rope_base;
        L->rope_scale = hp->rope_scale;
        if ((st = reject_unsupported(m, il))) return st;
        const struct lm_layer_tensor ts[] = {
            {&L->attn_norm, "attn_norm.weight", E, 1, true},
            {&L->wq, "attn_q.weight", E, qd, true},
            {&L->wk, "attn_k.weight", E, kd, true},
            {&L->wv, "attn_v.weight", E, vd, true},
            {&L->bq, "attn_q.bias", qd, 1, false},
            {&L->bk, "attn_k.bias", kd, 1, false},
            {&L->bv, "attn_v.bias", vd, 1, false},
            {&L->q_norm, "attn_q_norm.weight", hp->head_dim_k, 1, v->qk_norm},
            {&L->k_norm, "attn_k_norm.weight", hp->head_dim_k, 1, v->qk_norm},
            {&L->wo, "attn_output.weight", qd, E, true},
            {&L->ffn_norm, "ffn_norm.weight", E, 1, true},
            {&L->gate, "ffn_gate.weight", E, F, true},
            {&L->up, "ffn_up.weight", E, F, true},
            {&L->down, "ffn_down.weight", F, E, true},
        };
        const bool moe = hp->n_expert > 0; // experts instead of the dense FFN (last 3)
        const int nts = (int)(sizeof ts / sizeof ts[0]) - (moe ? 3 : 0);
        if ((st = lm_model_layer_weights(m, il, ts, nts))) return st;
        if (moe && (st = load_layer_experts(m, il))) return st;
        if (!v->qk_norm) { // llama.cpp only reads QK-norm weights for qwen3
            memset(&L->q_norm, 0, sizeof L->q_norm);
            memset(&L->k_norm, 0, sizeof L->k_norm);
        }
    }
    return v->ext ? v->ext(m) : LM_OK;
}

// pre-norm blocks only, SwiGLU
#define LLAMA_DECODER {.post_norms = false, .ffn_act = LM_FFN_ACT_SILU}
const struct lm_arch lm_arch_llama = {
    .name = "llama", .load = llama_load, .decoder = LLAMA_DECODER};
const struct lm_arch lm_arch_qwen2 = {
    .name = "qwen2", .load = llama_load, .decoder = LLAMA_DECODER};
const struct lm_arch lm_arch_qwen3 = {
    .name = "qwen3", .load = llama_load, .decoder = LLAMA_DECODER};
const struct lm_arch lm_arch_qwen3moe = {
    .name = "qwen3moe", .load = llama_load, .decoder = LLAMA_DECODER};
const struct lm_arch lm_arch_granite = {
    .name = "granite", .load = llama_load, .decoder = LLAMA_DECODER};
const struct lm_arch lm_arch_smollm3 = {
    .name = "smollm3", .load = llama_load, .decoder = LLAMA_DECODER};
