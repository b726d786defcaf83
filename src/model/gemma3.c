// Gemma 3 (text): hyper-parameters from GGUF metadata and weight views, as llama.cpp reads
// them; the forward (lm_decoder_forward) gets scaled embeddings, pre+post norms around
// attention and FFN, per-head QK-norm, NEOX RoPE with separate local/global bases,
// interleaved sliding-window/global layers, GELU-gated FFN and a tied LM head from them.
#include <math.h>
#include <stdio.h>

#include "runtime/runtime.h"

// ================================================================ load

static enum lm_status gemma3_load(struct lm_model *m) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    uint32_t u;
#define REQ_U32(key, field)                                                         \
    do {                                                                            \
        if ((st = lm_model_key_u32(m, key, &u, true)) != LM_OK) return st;          \
        hp->field = (int32_t)u;                                                     \
    } while (0)
    REQ_U32("embedding_length", n_embd);
    REQ_U32("block_count", n_layer);
    REQ_U32("feed_forward_length", n_ff);
    REQ_U32("attention.head_count", n_head);
    hp->n_head_kv = hp->n_head;
    u = (uint32_t)hp->n_head_kv;
    if ((st = lm_model_key_u32(m, "attention.head_count_kv", &u, false)) != LM_OK) return st;
    hp->n_head_kv = (int32_t)u;
    u = (uint32_t)(hp->n_head ? hp->n_embd / hp->n_head : 0);
    if ((st = lm_model_key_u32(m, "attention.key_length", &u, false)) != LM_OK) return st;
    hp->head_dim_k = (int32_t)u;
    if ((st = lm_model_key_u32(m, "attention.value_length", &u, false)) != LM_OK) return st;
    hp->head_dim_v = (int32_t)u;
    u = 8192;
    if ((st = lm_model_key_u32(m, "context_length", &u, false)) != LM_OK) return st;
    hp->n_ctx_train = (int32_t)u;
    if ((st = lm_model_key_f32(m, "attention.layer_norm_rms_epsilon", &hp->rms_eps, true)))
        return st;
    hp->rope_base = 10000.0f;
    if ((st = lm_model_key_f32(m, "rope.freq_base", &hp->rope_base, false))) return st;
    hp->rope_base_swa = 10000.0f; // llama.cpp's default for Gemma 3 local layers
    if ((st = lm_model_key_f32(m, "rope.freq_base_swa", &hp->rope_base_swa, false))) return st;
    float factor = 1.0f;
    if ((st = lm_model_key_f32(m, "rope.scaling.factor", &factor, false))) return st;
    hp->rope_scale = factor > 0.0f ? 1.0f / factor : 1.0f;
    u = 0;
    if ((st = lm_model_key_u32(m, "attention.sliding_window", &u, false))) return st;
    hp->n_swa = (int32_t)u;
    u = 6; // llama.cpp's default period: every 6th layer is global
    if ((st = lm_model_key_u32(m, "attention.sliding_window_pattern", &u, false))) return st;
    hp->swa_period = (int32_t)u;
    hp->final_softcap = 0.0f;
    if ((st = lm_model_key_f32(m, "final_logit_softcapping", &hp->final_softcap, false)))
        return st;
#undef REQ_U32
    if (hp->n_embd <= 0 || hp->n_layer <= 0 || hp->n_head <= 0 || hp->n_head_kv <= 0 ||
        hp->n_head % hp->n_head_kv != 0 || hp->head_dim_k <= 0 || hp->head_dim_k > 512 ||
        hp->head_dim_v <= 0 || hp->head_dim_v > 512 || hp->n_ff <= 0 || hp->n_layer > 4096 ||
        hp->head_dim_k % 2 != 0)
        return lm_error_set(LM_ERR_FORMAT,
                            "gemma3: %s: inconsistent hyper-parameters (n_embd %d, n_layer %d, "
                            "n_head %d, n_head_kv %d, head_dim %d/%d, n_ff %d)",
                            m->path, hp->n_embd, hp->n_layer, hp->n_head, hp->n_head_kv,
                            hp->head_dim_k, hp->head_dim_v, hp->n_ff);
    hp->n_rot = hp->head_dim_k;
    hp->rope_type = LM_ROPE_NEOX;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    // gemma 3 27B scales by n_embd/n_head; every other size by the head size
    hp->attn_scale = hp->n_layer == 62 ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                       : 1.0f / sqrtf((float)hp->head_dim_k);

    const int64_t E = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim_k,
                  kd = (int64_t)hp->n_head_kv * hp->head_dim_k,
                  vd = (int64_t)hp->n_head_kv * hp->head_dim_v, F = hp->n_ff;
    const struct lm_gguf_tensor *te = lm_gguf_find_tensor(&m->gguf, "token_embd.weight");
    if (!te)
        return lm_error_set(LM_ERR_FORMAT, "gemma3: %s: missing tensor 'token_embd.weight'",
                            m->path);
    hp->n_vocab = (int32_t)te->ne[1];
    if ((st = lm_model_weight(m, &m->tok_embd, "token_embd.weight", E, hp->n_vocab, true)))
        return st;
    if ((st = lm_model_weight(m, &m->output_norm, "output_norm.weight", E, 1, true))) return st;
    if ((st = lm_model_weight(m, &m->output, "output.weight", E, hp->n_vocab, false))) return st;
    m->tied_output = m->output.data == NULL;
    if (m->tied_output) m->output = m->tok_embd;

    for (int il = 0; il < hp->n_layer; il++) {
        struct lm_layer *L = &m->layers[il];
        L->swa = hp->n_swa > 0 &&
                 (hp->swa_period == 0 || (il % hp->swa_period) < hp->swa_period - 1);
        L->rope_base = L->swa ? hp->rope_base_swa : hp->rope_base;
        L->rope_scale = L->swa ? 1.0f : hp->rope_scale;
#define W(field, nm, nin, nout)                                                        \
    if ((st = lm_model_weightf(m, &L->field, true, nin, nout, "blk.%d." nm, il))) return st
        W(attn_norm, "attn_norm.weight", E, 1);
        W(wq, "attn_q.weight", E, qd);
        W(wk, "attn_k.weight", E, kd);
        W(wv, "attn_v.weight", E, vd);
        W(q_norm, "attn_q_norm.weight", hp->head_dim_k, 1);
        W(k_norm, "attn_k_norm.weight", hp->head_dim_k, 1);
        W(wo, "attn_output.weight", qd, E);
        W(post_attn_norm, "post_attention_norm.weight", E, 1);
        W(ffn_norm, "ffn_norm.weight", E, 1);
        W(gate, "ffn_gate.weight", E, F);
        W(up, "ffn_up.weight", E, F);
        W(down, "ffn_down.weight", F, E);
        W(post_ffw_norm, "post_ffw_norm.weight", E, 1);
#undef W
    }
    return LM_OK;
}

const struct lm_arch lm_arch_gemma3 = {
    .name = "gemma3",
    .load = gemma3_load,
    .forward = lm_decoder_forward,
    .decoder = {.post_norms = true, .ffn_act = LM_FFN_ACT_GELU},
};
