// bert (BERT encoders: bge, all-MiniLM, XLM-RoBERTa-based files that llama.cpp loads as
// bert) and nomic-bert (nomic-embed-text v1.5: rotary positions, fused QKV, SwiGLU):
// hyper-parameters and weight views as llama.cpp's src/models/bert.cpp, nomic-bert.cpp read them.
// The forward pass runs it as an encoder (lm_decoder_desc.encoder; runtime/ops_enc.c).
#include <math.h>
#include <stdio.h>

#include "base/status.h"
#include "model/model.h"

// Sizes: the common block dims; attention.layer_norm_epsilon (required, as llama.cpp),
// context_length (rows of position_embd), the token type count (from the tokenizer keys),
// pooling type, causal flag and classifier labels.
static enum lm_status bert_hparams(struct lm_model *m) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    if ((st = lm_model_block_dims(m))) return st;
    hp->head_dim_v = hp->head_dim_k;
    if ((st = lm_model_key_i32(m, "context_length", &hp->n_ctx_train, true))) return st;
    if ((st = lm_model_key_f32(m, "attention.layer_norm_epsilon", &hp->norm_eps, true))) return st;
    if (!(isfinite(hp->norm_eps) && hp->norm_eps > 0.0f && hp->norm_eps < 1.0f))
        return lm_error_set(LM_ERR_FORMAT, "bert: %s: bert.attention.layer_norm_epsilon = %g (expected in (0, 1))",
                            m->path, hp->norm_eps);
    uint32_t ntt = 0;
    if ((st = lm_gguf_get_u32(&m->gguf, "tokenizer.ggml.token_type_count", &ntt, false))) return st;
    if (ntt == 0 || ntt > 1024)
        return lm_error_set(LM_ERR_FORMAT,
                            "bert: %s: tokenizer.ggml.token_type_count = %u (a bert model needs 1..1024 token "
                            "types)",
                            m->path, ntt);
    hp->n_token_types = (int32_t)ntt;
    // pooling_type and the classifier's cls.output: lm_model_load_pooling (model_embd.c)
    bool causal = false;
    char key[64];
    snprintf(key, sizeof key, "%s.attention.causal", m->arch->name);
    if ((st = lm_gguf_get_bool(&m->gguf, key, &causal, false))) return st;
    hp->causal_attn = causal;
    // what the one forward reads of every family: no RoPE (learned positions), q scaled by
    // 1/sqrt(head_dim) as llama.cpp's build_attn, no embedding scale
    hp->n_rot = hp->head_dim_k;
    hp->rope_base = hp->rope_base_swa = 10000.0f;
    hp->rope_scale = 1.0f;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim_k);
    hp->embd_scale = 1.0f;
    if (hp->n_head_kv != hp->n_head)
        return lm_error_set(LM_ERR_FORMAT, "bert: %s: head_count_kv %d != head_count %d (bert has no grouped KV)",
                            m->path, hp->n_head_kv, hp->n_head);
    return lm_model_check_dims(m);
}

static enum lm_status bert_load(struct lm_model *m) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    if ((st = bert_hparams(m))) return st;
    const int64_t E = hp->n_embd, F = hp->n_ff, Q = (int64_t)hp->n_head * hp->head_dim_k;
    const struct lm_gguf_tensor *te = lm_gguf_find_tensor(&m->gguf, "token_embd.weight");
    if (!te || te->n_dims != 2 || te->ne[1] <= 0 || te->ne[1] > INT32_MAX)
        return lm_error_set(LM_ERR_FORMAT, "bert: %s: missing or malformed tensor 'token_embd.weight'", m->path);
    hp->n_vocab = (int32_t)te->ne[1];
    // the embeddings and their LayerNorm; no LM head (an encoder's output is its hidden state)
    const struct {
        struct lm_weight *w;
        const char *name;
        int64_t n_in, n_out;
        bool required;
    } io[] = {
        {&m->tok_embd, "token_embd.weight", E, hp->n_vocab, true},
        {&m->type_embd, "token_types.weight", E, hp->n_token_types, false},
        {&m->pos_embd, "position_embd.weight", E, hp->n_ctx_train, true},
        {&m->tok_norm, "token_embd_norm.weight", E, 1, true},
        {&m->tok_norm_b, "token_embd_norm.bias", E, 1, true},
        {&m->cls, "cls.weight", E, E, false},
        {&m->cls_b, "cls.bias", E, 1, false},
    };
    for (size_t k = 0; k < sizeof io / sizeof io[0]; k++)
        if ((st = lm_model_weight(m, io[k].w, io[k].name, io[k].n_in, io[k].n_out, io[k].required))) return st;
    for (int il = 0; il < hp->n_layer; il++) {
        struct lm_layer *L = &m->layers[il];
        L->no_rope = true;
        L->rope_base = hp->rope_base;
        L->rope_scale = 1.0f;
        const struct lm_layer_tensor ts[] = {
            {&L->wq, "attn_q.weight", E, Q, true},
            {&L->bq, "attn_q.bias", Q, 1, false},
            {&L->wk, "attn_k.weight", E, Q, true},
            {&L->bk, "attn_k.bias", Q, 1, false},
            {&L->wv, "attn_v.weight", E, Q, true},
            {&L->bv, "attn_v.bias", Q, 1, false},
            {&L->wo, "attn_output.weight", Q, E, true},
            {&L->bo, "attn_output.bias", E, 1, false},
            {&L->attn_out_norm, "attn_output_norm.weight", E, 1, true},
            {&L->attn_out_norm_b, "attn_output_norm.bias", E, 1, true},
            {&L->up, "ffn_up.weight", E, F, true},
            {&L->up_b, "ffn_up.bias", F, 1, false},
            {&L->down, "ffn_down.weight", F, E, true},
            {&L->down_b, "ffn_down.bias", E, 1, false},
            {&L->layer_out_norm, "layer_output_norm.weight", E, 1, true},
            {&L->layer_out_norm_b, "layer_output_norm.bias", E, 1, true},
        };
        if ((st = lm_model_layer_weights(m, il, ts, (int)(sizeof ts / sizeof ts[0])))) return st;
    }
    return LM_OK;
}

// nomic-bert: bert's hyper-parameters with NeoX RoPE (rope.freq_base, default 10000; over the
// whole head) instead of position_embd; attn_qkv fused (or separate), the FFN SiLU(gate x) *
// (up x) -> down without biases (llama.cpp's graph passes none for this family).
static enum lm_status nomic_load(struct lm_model *m) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    if ((st = bert_hparams(m))) return st;
    hp->rope_type = LM_ROPE_NEOX;
    if ((st = lm_model_key_f32(m, "rope.freq_base", &hp->rope_base, false))) return st;
    if (!(hp->rope_base > 0.0f))
        return lm_error_set(LM_ERR_FORMAT, "nomic-bert: %s: rope.freq_base = %g (expected > 0)", m->path,
                            hp->rope_base);
    hp->rope_base_swa = hp->rope_base;
    const int64_t E = hp->n_embd, F = hp->n_ff, Q = (int64_t)hp->n_head * hp->head_dim_k;
    const struct lm_gguf_tensor *te = lm_gguf_find_tensor(&m->gguf, "token_embd.weight");
    if (!te || te->n_dims != 2 || te->ne[1] <= 0 || te->ne[1] > INT32_MAX)
        return lm_error_set(LM_ERR_FORMAT, "nomic-bert: %s: missing or malformed tensor 'token_embd.weight'",
                            m->path);
    hp->n_vocab = (int32_t)te->ne[1];
    if ((st = lm_model_weight(m, &m->tok_embd, "token_embd.weight", E, hp->n_vocab, true)) ||
        (st = lm_model_weight(m, &m->type_embd, "token_types.weight", E, hp->n_token_types, false)) ||
        (st = lm_model_weight(m, &m->tok_norm, "token_embd_norm.weight", E, 1, true)) ||
        (st = lm_model_weight(m, &m->tok_norm_b, "token_embd_norm.bias", E, 1, true)))
        return st;
    for (int il = 0; il < hp->n_layer; il++) {
        struct lm_layer *L = &m->layers[il];
        L->rope_base = hp->rope_base;
        L->rope_scale = 1.0f;
        if ((st = lm_model_qkv(m, il))) return st;
        const struct lm_layer_tensor ts[] = {
            {&L->wo, "attn_output.weight", Q, E, true},
            {&L->bo, "attn_output.bias", E, 1, false},
            {&L->attn_out_norm, "attn_output_norm.weight", E, 1, true},
            {&L->attn_out_norm_b, "attn_output_norm.bias", E, 1, true},
            {&L->up, "ffn_up.weight", E, F, true},
            {&L->gate, "ffn_gate.weight", E, F, true},
            {&L->down, "ffn_down.weight", F, E, true},
            {&L->layer_out_norm, "layer_output_norm.weight", E, 1, true},
            {&L->layer_out_norm_b, "layer_output_norm.bias", E, 1, true},
        };
        if ((st = lm_model_layer_weights(m, il, ts, (int)(sizeof ts / sizeof ts[0])))) return st;
    }
    return LM_OK;
}

const struct lm_arch lm_arch_nomic_bert = {
    .name = "nomic-bert",
    .load = nomic_load,
    .decoder = {.post_norms = false, .ffn_act = LM_FFN_ACT_SILU, .encoder = true},
};

const struct lm_arch lm_arch_bert = {
    .name = "bert",
    .load = bert_load,
    .decoder = {.post_norms = false, .ffn_act = LM_FFN_ACT_GELU, .encoder = true},
};
