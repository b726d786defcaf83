// The families' loading helpers: weight views by name with shape and dtype checks, the
// experts' stacked weights, the per-layer tensor tables, hyper-parameter keys. Each family
// (gemma3.c, llama.c) reads its model through these; model.c picks the family.
#include "model/model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// One line naming the tensor, its type and the types lumen runs (from the dtype traits).
static enum lm_status refuse_dtype(const struct lm_model *m, const char *name, enum lm_dtype t) {
    const struct lm_dtype_traits *tr = lm_dtype_traits(t);
    if (tr && tr->supported) return LM_OK;
    char names[256];
    return lm_error_set(LM_ERR_UNSUPPORTED,
                        "model: %s: tensor '%s' has type %s, which lumen cannot run (supported: %s)",
                        m->path, name, lm_dtype_name(t), lm_dtype_supported_names(names, sizeof names));
}

enum lm_status lm_model_weight(struct lm_model *m, struct lm_weight *w, const char *name,
                               int64_t n_in, int64_t n_out, bool required) {
    memset(w, 0, sizeof *w);
    enum lm_status st;
    const struct lm_gguf_tensor *t = lm_gguf_find_tensor(&m->gguf, name);
    if (!t) {
        if (!required) return LM_OK;
        return lm_error_set(LM_ERR_FORMAT, "model: %s: missing required tensor '%s'", m->path,
                            name);
    }
    if ((st = refuse_dtype(m, name, t->type)) != LM_OK) return st;
    const bool vec = n_out == 1;
    const bool ok = vec ? (t->n_dims == 1 && t->ne[0] == n_in)
                        : (t->n_dims == 2 && t->ne[0] == n_in && t->ne[1] == n_out);
    if (!ok) {
        char got[96];
        int o = snprintf(got, sizeof got, "[");
        for (uint32_t d = 0; d < t->n_dims && o < (int)sizeof got - 24; d++)
            o += snprintf(got + o, sizeof got - (size_t)o, "%s%lld", d ? ", " : "",
                          (long long)t->ne[d]);
        snprintf(got + o, sizeof got - (size_t)o, "]");
        if (vec)
            return lm_error_set(LM_ERR_FORMAT,
                                "model: %s: tensor '%s' has shape %s, expected [%lld]", m->path,
                                name, got, (long long)n_in);
        return lm_error_set(LM_ERR_FORMAT,
                            "model: %s: tensor '%s' has shape %s, expected [%lld, %lld]", m->path,
                            name, got, (long long)n_in, (long long)n_out);
    }
    if (vec && t->type != LM_DTYPE_F32)
        return lm_error_set(LM_ERR_UNSUPPORTED,
                            "model: %s: tensor '%s' has dtype %s, expected f32 for a vector",
                            m->path, name, lm_dtype_name(t->type));
    snprintf(w->name, sizeof w->name, "%s", name);
    w->data = t->data;
    w->type = t->type;
    w->n_in = n_in;
    w->n_out = n_out;
    w->row_bytes = lm_dtype_row_size(t->type, n_in);
    return LM_OK;
}

enum lm_status lm_model_weightf(struct lm_model *m, struct lm_weight *w, bool required,
                                int64_t n_in, int64_t n_out, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return lm_model_weight(m, w, name, n_in, n_out, required);
}

enum lm_status lm_model_expert_weights(struct lm_model *m, struct lm_weight *out, int il,
                                       const char *name, int64_t n_in, int64_t n_out,
                                       int64_t n_expert) {
    char full[128];
    snprintf(full, sizeof full, "blk.%d.%s", il, name);
    const struct lm_gguf_tensor *t = lm_gguf_find_tensor(&m->gguf, full);
    if (!t)
        return lm_error_set(LM_ERR_FORMAT, "model: %s: missing required expert tensor '%s'",
                            m->path, full);
    enum lm_status st = refuse_dtype(m, full, t->type);
    if (st != LM_OK) return st;
    if (t->n_dims != 3 || t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != n_expert) {
        char got[96];
        int o = snprintf(got, sizeof got, "[");
        for (uint32_t d = 0; d < t->n_dims && o < (int)sizeof got - 24; d++)
            o += snprintf(got + o, sizeof got - (size_t)o, "%s%lld", d ? ", " : "",
                          (long long)t->ne[d]);
        snprintf(got + o, sizeof got - (size_t)o, "]");
        return lm_error_set(LM_ERR_FORMAT,
                            "model: %s: expert tensor '%s' has shape %s, expected [%lld, %lld, "
                            "%lld] (n_in, n_out, n_expert)",
                            m->path, full, got, (long long)n_in, (long long)n_out,
                            (long long)n_expert);
    }
    const size_t row = lm_dtype_row_size(t->type, n_in), slice = row * (size_t)n_out;
    if ((uint64_t)slice * (uint64_t)n_expert > t->nbytes)
        return lm_error_set(LM_ERR_FORMAT,
                            "model: %s: expert tensor '%s' holds %llu bytes, %d experts of "
                            "%zu need more", m->path, full, (unsigned long long)t->nbytes,
                            (int)n_expert, slice);
    for (int64_t e = 0; e < n_expert; e++) {
        struct lm_weight *w = &out[e];
        memset(w, 0, sizeof *w);
        snprintf(w->name, sizeof w->name, "blk.%d.%s[%d]", il, name, (int)e);
        w->data = (const char *)t->data + (size_t)e * slice;
        w->type = t->type;
        w->n_in = n_in;
        w->n_out = n_out;
        w->row_bytes = row;
    }
    return LM_OK;
}

enum lm_status lm_model_block_dims(struct lm_model *m) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    if ((st = lm_model_key_i32(m, "embedding_length", &hp->n_embd, true))) return st;
    if ((st = lm_model_key_i32(m, "block_count", &hp->n_layer, true))) return st;
    if ((st = lm_model_key_i32(m, "feed_forward_length", &hp->n_ff, true))) return st;
    if ((st = lm_model_key_i32(m, "attention.head_count", &hp->n_head, true))) return st;
    hp->n_head_kv = hp->n_head;
    if ((st = lm_model_key_i32(m, "attention.head_count_kv", &hp->n_head_kv, false))) return st;
    hp->head_dim_k = hp->n_head ? hp->n_embd / hp->n_head : 0;
    if ((st = lm_model_key_i32(m, "attention.key_length", &hp->head_dim_k, false))) return st;
    return LM_OK;
}

enum lm_status lm_model_check_dims(const struct lm_model *m) {
    const struct lm_hparams *hp = &m->hp;
    if (hp->n_embd <= 0 || hp->n_layer <= 0 || hp->n_head <= 0 || hp->n_head_kv <= 0 ||
        hp->n_head % hp->n_head_kv != 0 || hp->head_dim_k <= 0 || hp->head_dim_k > 512 ||
        hp->head_dim_v <= 0 || hp->head_dim_v > 512 || hp->n_ff <= 0 || hp->n_layer > 4096 ||
        hp->head_dim_k % 2 != 0 || hp->n_ctx_train <= 0)
        return lm_error_set(LM_ERR_FORMAT,
                            "%s: %s: inconsistent hyper-parameters (n_embd %d, n_layer %d, "
                            "n_head %d, n_head_kv %d, head_dim %d/%d, n_ff %d, n_ctx %d)",
                            m->arch->name, m->path, hp->n_embd, hp->n_layer, hp->n_head,
                            hp->n_head_kv, hp->head_dim_k, hp->head_dim_v, hp->n_ff,
                            hp->n_ctx_train);
    return LM_OK;
}

enum lm_status lm_model_io_weights(struct lm_model *m) {
    struct lm_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd;
    enum lm_status st;
    const struct lm_gguf_tensor *te = lm_gguf_find_tensor(&m->gguf, "token_embd.weight");
    if (!te || te->n_dims != 2 || te->ne[1] <= 0 || te->ne[1] > INT32_MAX)
        return lm_error_set(LM_ERR_FORMAT,
                            "%s: %s: missing or malformed tensor 'token_embd.weight'",
                            m->arch->name, m->path);
    hp->n_vocab = (int32_t)te->ne[1];
    if ((st = lm_model_weight(m, &m->tok_embd, "token_embd.weight", E, hp->n_vocab, true)))
        return st;
    if ((st = lm_model_weight(m, &m->output_norm, "output_norm.weight", E, 1, true))) return st;
    if ((st = lm_model_weight(m, &m->output, "output.weight", E, hp->n_vocab, false))) return st;
    m->tied_output = m->output.data == NULL;
    if (m->tied_output) m->output = m->tok_embd;
    return LM_OK;
}

enum lm_status lm_model_layer_weights(struct lm_model *m, int il, const struct lm_layer_tensor *ts,
                                      int n) {
    for (int k = 0; k < n; k++) {
        const struct lm_layer_tensor *t = &ts[k];
        enum lm_status st =
            lm_model_weightf(m, t->w, t->required, t->n_in, t->n_out, "blk.%d.%s", il, t->name);
        if (st != LM_OK) return st;
    }
    return LM_OK;
}

enum lm_status lm_model_key_u32(struct lm_model *m, const char *suffix, uint32_t *out,
                                bool required) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", m->arch->name, suffix);
    return lm_gguf_get_u32(&m->gguf, key, out, required);
}

enum lm_status lm_model_key_f32(struct lm_model *m, const char *suffix, float *out,
                                bool required) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", m->arch->name, suffix);
    return lm_gguf_get_f32(&m->gguf, key, out, required);
}

enum lm_status lm_model_key_i32(struct lm_model *m, const char *suffix, int32_t *out,
                                bool required) {
    uint32_t u = (uint32_t)*out;
    enum lm_status st = lm_model_key_u32(m, suffix, &u, required);
    if (st == LM_OK) *out = (int32_t)u;
    return st;
}
