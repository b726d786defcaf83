// Gemma 3 (text): hyper-parameters from GGUF metadata and weight views, as llama.cpp reads
// them; the forward pass (runtime/forward.c) gets scaled embeddings, pre+post norms around
// attention and FFN, per-head QK-norm, NEOX RoPE with separate local/global bases,
// interleaved sliding-window/global layers, GELU-gated FFN and a tied LM head from them.
#include <math.h>
#include <stdio.h>

#include "base/status.h"
#include "model/model.h"

// ================================================================ load

static enum lm_status gemma3_load(struct lm_model *m) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    if ((st = lm_model_block_dims(m))) return st;
    hp->head_dim_v = hp->head_dim_k;
    if ((st = lm_model_key_i32(m, "attention.value_length", &hp->head_dim_v, false))) return st;
    hp->n_ctx_train = 8192;
    if ((st = lm_model_key_i32(m, "context_length", &hp->n_ctx_train, false))) return st;
    if ((st = lm_model_key_f32(m, "attention.layer_norm_rms_epsilon", &hp->rms_eps, true)))
        return st;
    hp->rope_base = 10000.0f;
    if ((st = lm_model_key_f32(m, "rope.freq_base", &hp->rope_base, false))) return st;
    hp->rope_base_swa = 10000.0f; // llama.cpp's default for Gemma 3 local layers
    if ((st = lm_model_key_f32(m, "rope.freq_base_swa", &hp->rope_base_swa, false))) return st;
    float factor = 1.0f;
    if ((st = lm_model_key_f32(m, "rope.scaling.factor", &factor, false))) return st;
    hp->rope_scale = factor > 0.0f ? 1.0f / factor : 1.0f;
    hp->n_swa = 0;
    if ((st = lm_model_key_i32(m, "attention.sliding_window", &hp->n_swa, false))) return st;
    hp->swa_period = 6; // llama.cpp's default period: every 6th layer is global
    if ((st = lm_model_key_i32(m, "attention.sliding_window_pattern", &hp->swa_period, false)))
        return st;
    hp->final_softcap = 0.0f;
    if ((st = lm_model_key_f32(m, "final_logit_softcapping", &hp->final_softcap, false)))
        return st;
    if ((st = lm_model_check_dims(m))) return st;
    hp->n_rot = hp->head_dim_k;
    hp->rope_type = LM_ROPE_NEOX;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    // gemma 3 27B scales by n_embd/n_head; every other size by the head size
    hp->attn_scale = hp->n_layer == 62 ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                       : 1.0f / sqrtf((float)hp->head_dim_k);

    const int64_t E = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim_k,
                  kd = (int64_t)hp->n_head_kv * hp->head_dim_k,
                  vd = (int64_t)hp->n_head_kv * hp->head_dim_v, F = hp->n_ff;
    if ((st = lm_model_io_weights(m))) return st;

    for (int il = 0; il < hp->n_layer; il++) {
        struct lm_layer *L = &m->layers[il];
        L->swa = hp->n_swa > 0 &&
                 (hp->swa_period == 0 || (il % hp->swa_period) < hp->swa_period - 1);
        L->rope_base = L->swa ? hp->rope_base_swa : hp->rope_base;
        L->rope_scale = L->swa ? 1.0f : hp->rope_scale;
        const struct lm_layer_tensor ts[] = {
            {&L->attn_norm, "attn_norm.weight", E, 1, true},
            {&L->wq, "attn_q.weight", E, qd, true},
            {&L->wk, "attn_k.weight", E, kd, true},
            {&L->wv, "attn_v.weight", E, vd, true},
            {&L->q_norm, "attn_q_norm.weight", hp->head_dim_k, 1, true},
            {&L->k_norm, "attn_k_norm.weight", hp->head_dim_k, 1, true},
            {&L->wo, "attn_output.weight", qd, E, true},
            {&L->post_attn_norm, "post_attention_norm.weight", E, 1, true},
            {&L->ffn_norm, "ffn_norm.weight", E, 1, true},
            {&L->gate, "ffn_gate.weight", E, F, true},
            {&L->up, "ffn_up.weight", E, F, true},
            {&L->down, "ffn_down.weight", F, E, true},
            {&L->post_ffw_norm, "post_ffw_norm.weight", E, 1, true},
        };
        if ((st = lm_model_layer_weights(m, il, ts, (int)(sizeof ts / sizeof ts[0])))) return st;
    }
    return LM_OK;
}

const struct lm_arch lm_arch_gemma3 = {
    .name = "gemma3",
    .load = gemma3_load,
    .decoder = {.post_norms = true, .ffn_act = LM_FFN_ACT_GELU},
};
