// phi3 (Phi-3 / Phi-3.5-mini, Phi-4-mini) as llama.cpp loads and builds it (src/models/phi3.cpp):
// llama's pre-norm blocks with fused attn_qkv and fused ffn_up (gate rows then up rows), NeoX
// RoPE over rope.dimension_count dims (partial on Phi-4-mini), LongRoPE factors and attn_factor.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/status.h"
#include "model/model.h"

// ================================================================ fused tensors as views

// out = rows [r0, r0 + n) of the matrix f: a plain matrix of n rows (rows are contiguous),
// so the matmul path, the il repacking and the fused Q/K/V plan see three weights.
static void row_view(struct lm_weight *out, const struct lm_weight *f, int64_t r0, int64_t n,
                     const char *part) {
    *out = *f;
    out->data = (const char *)f->data + (size_t)r0 * f->row_bytes;
    out->n_out = n;
    snprintf(out->name, sizeof out->name, "%.50s[%s]", f->name, part);
}

// out = elements [e0, e0 + n) of the F32 vector f (a fused bias)
static void vec_view(struct lm_weight *out, const struct lm_weight *f, int64_t e0, int64_t n,
                     const char *part) {
    *out = *f;
    out->data = (const float *)f->data + e0;
    out->n_in = n;
    out->row_bytes = (size_t)n * sizeof(float);
    snprintf(out->name, sizeof out->name, "%.50s[%s]", f->name, part);
}

// ================================================================ load

// rope.freq_base, linear scaling (rope.scaling.factor; llama.cpp reads it for every family),
// LongRoPE's attn_factor and factor tensors, original context length.
static enum lm_status phi3_rope(struct lm_model *m) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    hp->rope_base = 10000.0f;
    if ((st = lm_model_key_f32(m, "rope.freq_base", &hp->rope_base, false))) return st;
    struct lm_gguf_str s = {0, ""};
    if ((st = lm_gguf_get_str(&m->gguf, "phi3.rope.scaling.type", &s, false))) return st;
    if (s.len && !lm_gguf_str_eq(s, "linear") && !lm_gguf_str_eq(s, "none"))
        return lm_error_set(LM_ERR_UNSUPPORTED,
                            "phi3: %s: rope scaling type '%.*s' is not supported (supported: "
                            "none, linear, and LongRoPE's factor tensors)",
                            m->path, (int)(s.len > 32 ? 32 : s.len), s.data);
    float factor = 0.0f;
    if ((st = lm_model_key_f32(m, "rope.scaling.factor", &factor, false))) return st;
    if (factor == 0.0f && (st = lm_model_key_f32(m, "rope.scale_linear", &factor, false)))
        return st;
    hp->rope_mscale = 1.0f;
    if ((st = lm_model_key_f32(m, "rope.scaling.attn_factor", &hp->rope_mscale, false))) return st;
    m->n_ctx_orig = hp->n_ctx_train;
    if ((st = lm_model_key_i32(m, "rope.scaling.original_context_length", &m->n_ctx_orig, false)))
        return st;
    if (!(hp->rope_base > 0.0f) || !(factor >= 0.0f && factor < 1e6f) ||
        !(hp->rope_mscale > 0.0f && hp->rope_mscale < 1e3f) || m->n_ctx_orig <= 0)
        return lm_error_set(LM_ERR_FORMAT,
                            "phi3: %s: rope.freq_base %g, rope.scaling.factor %g, "
                            "rope.scaling.attn_factor %g, rope.scaling.original_context_length "
                            "%d: need a positive base, factor in [0, 1e6), attn_factor in (0, "
                            "1000) and a positive length",
                            m->path, hp->rope_base, factor, hp->rope_mscale, m->n_ctx_orig);
    // llama.cpp: type "none" never scales; otherwise the factor (when set) is linear
    const bool none = s.len && lm_gguf_str_eq(s, "none");
    hp->rope_scale = !none && factor > 0.0f ? 1.0f / factor : 1.0f;
    hp->rope_scaling = hp->rope_scale != 1.0f ? LM_ROPE_SCALING_LINEAR : LM_ROPE_SCALING_NONE;
    // one pair for all layers (llama.cpp duplicates layer 0's); both optional
    struct lm_weight lw, sw;
    if ((st = lm_model_weight(m, &lw, "rope_factors_long.weight", hp->n_rot / 2, 1, false)))
        return st;
    if ((st = lm_model_weight(m, &sw, "rope_factors_short.weight", hp->n_rot / 2, 1, false)))
        return st;
    m->rope_long = lw.data;
    m->rope_short = sw.data;
    m->rope_freqs = NULL;
    return LM_OK;
}

static enum lm_status phi3_hparams(struct lm_model *m) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    if ((st = lm_model_block_dims(m))) return st;
    hp->head_dim_v = hp->n_head ? hp->n_embd / hp->n_head : 0;
    if ((st = lm_model_key_i32(m, "attention.value_length", &hp->head_dim_v, false))) return st;
    hp->n_rot = hp->head_dim_k;
    if ((st = lm_model_key_i32(m, "rope.dimension_count", &hp->n_rot, false))) return st;
    hp->n_ctx_train = 4096;
    if ((st = lm_model_key_i32(m, "context_length", &hp->n_ctx_train, false))) return st;
    if ((st = lm_model_key_f32(m, "attention.layer_norm_rms_epsilon", &hp->rms_eps, true)))
        return st;
    if ((st = lm_model_check_dims(m))) return st;
    // llama.cpp's phi3 graph asserts equal head sizes; RoPE covers n_rot <= head dims
    if (hp->head_dim_k != hp->head_dim_v || hp->n_rot <= 0 || hp->n_rot > hp->head_dim_k ||
        hp->n_rot % 2 != 0 || hp->n_rot / 2 > 256)
        return lm_error_set(LM_ERR_FORMAT,
                            "phi3: %s: head sizes %d/%d and rope.dimension_count %d: need equal "
                            "head sizes and an even rotary count in [2, head size]",
                            m->path, hp->head_dim_k, hp->head_dim_v, hp->n_rot);
    if ((st = phi3_rope(m))) return st;
    hp->rope_base_swa = hp->rope_base;
    hp->rope_type = LM_ROPE_NEOX;
    // attention.sliding_window: llama.cpp turns Phi's sliding window off (its PR 13676), so
    // every layer attends to the whole context
    hp->n_swa = 0;
    hp->swa_period = 0;
    hp->embd_scale = 1.0f;
    hp->final_softcap = 0.0f;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim_v); // Q scaled after RoPE
    hp->n_expert = hp->n_expert_used = hp->n_ff_exp = 0;
    return LM_OK;
}

// Q/K/V of layer il: attn_qkv.weight (n_embd, q + k + v rows) as three row views, with
// attn_qkv.bias or attn_q/k/v.bias when present; or separate attn_q/k/v (both as llama.cpp's
// create_tensor_qkv accepts).
static enum lm_status phi3_qkv(struct lm_model *m, int il) {
    const struct lm_hparams *hp = &m->hp;
    struct lm_layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim_k,
                  kd = (int64_t)hp->n_head_kv * hp->head_dim_k,
                  vd = (int64_t)hp->n_head_kv * hp->head_dim_v;
    enum lm_status st;
    struct lm_weight f, fb;
    if ((st = lm_model_weightf(m, &f, false, E, qd + kd + vd, "blk.%d.attn_qkv.weight", il)))
        return st;
    if (!f.data) {
        const struct lm_layer_tensor ts[] = {
            {&L->wq, "attn_q.weight", E, qd, true},  {&L->wk, "attn_k.weight", E, kd, true},
            {&L->wv, "attn_v.weight", E, vd, true},  {&L->bq, "attn_q.bias", qd, 1, false},
            {&L->bk, "attn_k.bias", kd, 1, false},   {&L->bv, "attn_v.bias", vd, 1, false},
        };
        return lm_model_layer_weights(m, il, ts, (int)(sizeof ts / sizeof ts[0]));
    }
    row_view(&L->wq, &f, 0, qd, "q");
    row_view(&L->wk, &f, qd, kd, "k");
    row_view(&L->wv, &f, qd + kd, vd, "v");
    if ((st = lm_model_weightf(m, &fb, false, qd + kd + vd, 1, "blk.%d.attn_qkv.bias", il)))
        return st;
    if (fb.data) {
        vec_view(&L->bq, &fb, 0, qd, "q");
        vec_view(&L->bk, &fb, qd, kd, "k");
        vec_view(&L->bv, &fb, qd + kd, vd, "v");
        return LM_OK;
    }
    const struct lm_layer_tensor bs[] = {
        {&L->bq, "attn_q.bias", qd, 1, false},
        {&L->bk, "attn_k.bias", kd, 1, false},
        {&L->bv, "attn_v.bias", vd, 1, false},
    };
    if ((st = lm_model_layer_weights(m, il, bs, 3))) return st;
    if (!L->bq.data || !L->bk.data || !L->bv.data) // llama.cpp adds them only all three
        memset(&L->bq, 0, sizeof L->bq), memset(&L->bk, 0, sizeof L->bk),
            memset(&L->bv, 0, sizeof L->bv);
    return LM_OK;
}

enum lm_status lm_model_qkv(struct lm_model *m, int il) { return phi3_qkv(m, il); }

static enum lm_status phi3_load(struct lm_model *m) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    if ((st = phi3_hparams(m))) return st;
    if ((st = lm_model_io_weights(m))) return st;
    memset(&m->output_b, 0, sizeof m->output_b); // llama.cpp's phi3 loads no output bias
    const int64_t E = hp->n_embd, F = hp->n_ff, qd = (int64_t)hp->n_head * hp->head_dim_k;
    for (int il = 0; il < hp->n_layer; il++) {
        struct lm_layer *L = &m->layers[il];
        memset(L, 0, sizeof *L);
        L->swa = false;
        L->rope_base = hp->rope_base;
        L->rope_scale = hp->rope_scale;
        char name[64];
        snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", il);
        if (lm_gguf_find_tensor(&m->gguf, name))
            return lm_error_set(LM_ERR_UNSUPPORTED,
                                "phi3: %s: tensor '%s': experts in a phi3 file are not "
                                "supported (llama.cpp does not load them either)", m->path, name);
        if ((st = phi3_qkv(m, il))) return st;
        struct lm_weight up2;
        const struct lm_layer_tensor ts[] = {
            {&L->attn_norm, "attn_norm.weight", E, 1, true},
            {&L->wo, "attn_output.weight", qd, E, true},
            {&L->ffn_norm, "ffn_norm.weight", E, 1, true},
            {&up2, "ffn_up.weight", E, 2 * F, true}, // gate rows [0, F), up rows [F, 2F)
            {&L->down, "ffn_down.weight", F, E, true},
        };
        if ((st = lm_model_layer_weights(m, il, ts, (int)(sizeof ts / sizeof ts[0])))) return st;
        row_view(&L->gate, &up2, 0, F, "gate");
        row_view(&L->up, &up2, F, F, "up");
    }
    return LM_OK;
}

// pre-norm blocks, SwiGLU over the fused ffn_up's halves
const struct lm_arch lm_arch_phi3 = {
    .name = "phi3", .load = phi3_load,
    .decoder = {.post_norms = false, .ffn_act = LM_FFN_ACT_SILU}};
