// What a model says about embeddings: its pooling (<arch>.pooling_type, llama.cpp's values),
// its embedding width, and a reranker's classification head and prompt; the pooling itself
// runs in runtime/ops_pool.c.
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h" // [SEP] (WordPiece)

#define LM_CLS_OUT_MAX 64 // classifier outputs (Qwen3-Reranker: 2)

// cls.output.weight (n_cls_out, n_embd) and cls.output.bias, both optional
static enum lm_status load_cls_out(struct lm_model *m) {
    const struct lm_gguf_tensor *t = lm_gguf_find_tensor(&m->gguf, "cls.output.weight");
    if (!t) return LM_OK;
    const int64_t n = t->n_dims == 2 ? t->ne[1] : 0;
    if (n < 1 || n > LM_CLS_OUT_MAX)
        return lm_error_set(LM_ERR_FORMAT, "model: %s: tensor 'cls.output.weight' needs 2 dimensions, "
                            "[n_embd %d, 1..%d outputs]", m->path, m->hp.n_embd, LM_CLS_OUT_MAX);
    if (n == 1) { // one row (bge-reranker's): lm_model_weight would read a (n_in, 1) shape as a vector
        const struct lm_dtype_traits *tr = lm_dtype_traits(t->type);
        if (t->ne[0] != m->hp.n_embd || !tr || !tr->supported)
            return lm_error_set(LM_ERR_FORMAT, "model: %s: tensor 'cls.output.weight' is [%lld, 1] of %s, "
                                "expected [%d, 1] of a type lumen runs", m->path, (long long)t->ne[0],
                                lm_dtype_name(t->type), m->hp.n_embd);
        m->cls_out = (struct lm_weight){.name = "cls.output.weight", .data = t->data, .type = t->type,
                                        .n_in = m->hp.n_embd, .n_out = 1,
                                        .row_bytes = lm_dtype_row_size(t->type, m->hp.n_embd)};
    } else {
        const enum lm_status st = lm_model_weight(m, &m->cls_out, "cls.output.weight", m->hp.n_embd, n, true);
        if (st != LM_OK) return st;
    }
    // the bias: n floats (a vector, or a (1) vector for one output)
    return lm_model_weight(m, &m->cls_out_b, "cls.output.bias", n, 1, false);
}

enum lm_status lm_model_load_pooling(struct lm_model *m) {
    uint32_t u = LM_POOLING_NONE;
    enum lm_status st = lm_model_key_u32(m, "pooling_type", &u, false);
    if (st != LM_OK) return st;
    if (u > LM_POOLING_RANK)
        return lm_error_set(LM_ERR_FORMAT, "model: %s: %s.pooling_type = %u is not a pooling type "
                            "(0 none, 1 mean, 2 cls, 3 last, 4 rank)", m->path, m->arch->name, u);
    m->hp.pooling = (enum lm_pooling)u;
    if ((st = load_cls_out(m)) != LM_OK) return st;
    struct lm_gguf_str tmpl = {0, NULL};
    if ((st = lm_gguf_get_str(&m->gguf, "tokenizer.chat_template.rerank", &tmpl, false)) != LM_OK) return st;
    if (tmpl.data) {
        if (!(m->rerank_template = malloc(tmpl.len + 1)))
            return lm_error_set(LM_ERR_NOMEM, "model: out of memory");
        memcpy(m->rerank_template, tmpl.data, tmpl.len);
        m->rerank_template[tmpl.len] = 0;
    }
    return LM_OK;
}

enum lm_pooling lm_model_pooling(const struct lm_model *m) { return m->hp.pooling; }
int32_t lm_model_n_embd(const struct lm_model *m) { return m->hp.n_embd; }
int32_t lm_model_n_cls_out(const struct lm_model *m) { return m->cls_out.data ? (int32_t)m->cls_out.n_out : 0; }
const char *lm_model_rerank_template(const struct lm_model *m) { return m->rerank_template; }

// ================================================================ a reranker's prompt

// s with every "{query}" and "{document}" replaced (malloc'd, NUL-terminated; NULL: no memory)
static char *fill_template(const char *s, const char *q, size_t ql, const char *d, size_t dl, size_t *len) {
    size_t cap = strlen(s) + 1, n = 0;
    for (const char *p = s; (p = strchr(p, '{')); p++) cap += ql + dl; // enough for every brace
    char *out = malloc(cap);
    if (!out) return NULL;
    while (*s) {
        if (!strncmp(s, "{query}", 7)) {
            memcpy(out + n, q, ql), n += ql, s += 7;
        } else if (!strncmp(s, "{document}", 10)) {
            memcpy(out + n, d, dl), n += dl, s += 10;
        } else {
            out[n++] = *s++;
        }
    }
    out[n] = 0;
    *len = n;
    return out;
}

// appends the tokens of text to *ids (grown with realloc)
static enum lm_status append_tokens(const struct lm_tokenizer *t, const char *text, size_t len,
                                    int32_t **ids, size_t *n) {
    int32_t *v = NULL;
    size_t k = 0;
    enum lm_status st = lm_tokenize(t, text, len, false, false, &v, &k);
    int32_t *grown = st == LM_OK ? realloc(*ids, (*n + k + 2) * sizeof **ids) : NULL;
    if (st == LM_OK && !grown) st = lm_error_set(LM_ERR_NOMEM, "rerank: out of memory");
    if (grown) {
        memcpy(grown + *n, v, k * sizeof *v);
        *ids = grown;
        *n += k;
    }
    free(v);
    return st;
}

enum lm_status lm_rerank_tokens(const struct lm_model *m, const char *query, size_t qlen,
                                const char *doc, size_t dlen, int32_t **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    const struct lm_tokenizer *t = m->tok;
    if (m->rerank_template) { // llama-server: the template's text, special tokens parsed, no BOS/EOS added
        size_t len = 0;
        char *p = fill_template(m->rerank_template, query, qlen, doc, dlen, &len);
        if (!p) return lm_error_set(LM_ERR_NOMEM, "rerank: out of memory");
        const enum lm_status st = lm_tokenize(t, p, len, false, true, ids, n);
        free(p);
        return st;
    }
    // without one: [BOS] query [EOS] document [EOS], as the vocabulary adds them
    enum lm_status st = LM_OK;
    if (!(*ids = malloc(2 * sizeof **ids))) return lm_error_set(LM_ERR_NOMEM, "rerank: out of memory");
    if (lm_tokenizer_add_bos(t)) (*ids)[(*n)++] = lm_tokenizer_bos(t);
    // [SEP] between them where the vocabulary adds one (tokenizer.ggml.add_sep_token; WordPiece's
    // default): a BERT cross-encoder's [CLS] query [SEP] document; EOS falls back to [SEP]
    bool add_sep = t->kind == LM_TOK_KIND_WPM && t->sep >= 0;
    if ((st = lm_gguf_get_bool(&m->gguf, "tokenizer.ggml.add_sep_token", &add_sep, false))) {
        free(*ids);
        *ids = NULL;
        return st;
    }
    const int32_t eos = lm_tokenizer_eos(t) >= 0 ? lm_tokenizer_eos(t) : t->sep;
    st = append_tokens(t, query, qlen, ids, n);
    if (st == LM_OK && lm_tokenizer_add_eos(t)) (*ids)[(*n)++] = eos;
    if (st == LM_OK && add_sep && t->sep >= 0) (*ids)[(*n)++] = t->sep;
    if (st == LM_OK) st = append_tokens(t, doc, dlen, ids, n);
    if (st == LM_OK && lm_tokenizer_add_eos(t)) (*ids)[(*n)++] = eos;
    if (st != LM_OK) {
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return st;
}
