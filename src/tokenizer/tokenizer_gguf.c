// The tokenizer from a GGUF file's tokenizer.ggml.* metadata: the model kind, tokens,
// scores, types, merges, special ids and the encoder models' normaliser options (WordPiece
// lower-casing, the Unigram charsmap), each checked against its expected type and range,
// handed to lm_tokenizer_init_desc (tokenizer.c), which validates and builds the rest.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

static enum lm_status get_id(const struct lm_gguf *g, const char *key, int64_t *out) {
    uint64_t v;
    enum lm_status st = lm_gguf_get_u64(g, key, &v, false);
    if (st != LM_OK) return st;
    if (lm_gguf_find_kv(g, key)) *out = v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
    return LM_OK;
}

static enum lm_status get_flag(const struct lm_gguf *g, const char *key, int *out) {
    bool b;
    if (!lm_gguf_find_kv(g, key)) return LM_OK;
    enum lm_status st = lm_gguf_get_bool(g, key, &b, true);
    if (st == LM_OK) *out = b;
    return st;
}

// tokenizer.ggml.scores (float32, or int32 as some converters write it) into *out, malloc'd;
// *out stays NULL when the key is absent.
static enum lm_status read_scores(const struct lm_gguf *g, const char *name, uint64_t n, float **out) {
    const struct lm_gguf_kv *kv = lm_gguf_find_kv(g, "tokenizer.ggml.scores");
    if (!kv) return LM_OK;
    if (kv->type != LM_GGUF_TYPE_ARRAY || (kv->arr_type != LM_GGUF_TYPE_FLOAT32 && kv->arr_type != LM_GGUF_TYPE_INT32))
        return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: tokenizer.ggml.scores: expected array of float32, got %s%s%s",
                            name, lm_gguf_type_name(kv->type), kv->type == LM_GGUF_TYPE_ARRAY ? " of " : "",
                            kv->type == LM_GGUF_TYPE_ARRAY ? lm_gguf_type_name(kv->arr_type) : "");
    if (kv->arr_n != n)
        return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: tokenizer.ggml.scores has %llu entries, tokens has %llu",
                            name, (unsigned long long)kv->arr_n, (unsigned long long)n);
    float *scores = malloc(n * sizeof *scores);
    if (!scores) return lm_error_set(LM_ERR_NOMEM, "tokenizer: %s: out of memory", name);
    const uint8_t *p = kv->data;
    for (uint64_t i = 0; i < n; i++) {
        if (kv->arr_type == LM_GGUF_TYPE_FLOAT32) {
            memcpy(&scores[i], p + 4 * i, 4);
        } else {
            int32_t v;
            memcpy(&v, p + 4 * i, 4);
            scores[i] = (float)v;
        }
    }
    *out = scores;
    return LM_OK;
}

// tokenizer.ggml.token_type (int32) into *out, malloc'd; *out stays NULL when absent.
static enum lm_status read_types(const struct lm_gguf *g, const char *name, uint64_t n, int32_t **out) {
    if (!lm_gguf_find_kv(g, "tokenizer.ggml.token_type")) return LM_OK;
    uint64_t nt;
    const void *td;
    enum lm_status st = lm_gguf_get_arr(g, "tokenizer.ggml.token_type", LM_GGUF_TYPE_INT32, &nt, &td, true);
    if (st != LM_OK) return st;
    if (nt != n)
        return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: tokenizer.ggml.token_type has %llu entries, tokens has %llu",
                            name, (unsigned long long)nt, (unsigned long long)n);
    int32_t *types = malloc(n * sizeof *types);
    if (!types) return lm_error_set(LM_ERR_NOMEM, "tokenizer: %s: out of memory", name);
    memcpy(types, td, n * sizeof *types);
    *out = types;
    return LM_OK;
}

// "bert" / "t5": the separator id, normaliser flags and tokenizer.ggml.precompiled_charsmap
// (an array of int8 or uint8; left in the mapping, the tokenizer copies it).
static enum lm_status read_encoder_keys(const struct lm_gguf *g, const char *name, struct lm_tokenizer_desc *d) {
    enum lm_status st;
    if ((st = get_id(g, "tokenizer.ggml.seperator_token_id", &d->sep)) ||
        (st = get_flag(g, "tokenizer.ggml.normalizer.lowercase", &d->lowercase)) ||
        (st = get_flag(g, "tokenizer.ggml.normalizer.strip_accents", &d->strip_accents)) ||
        (st = get_flag(g, "tokenizer.ggml.remove_extra_whitespaces", &d->remove_extra_ws)))
        return st;
    const struct lm_gguf_kv *kv = lm_gguf_find_kv(g, "tokenizer.ggml.precompiled_charsmap");
    if (!kv) return LM_OK;
    if (kv->type != LM_GGUF_TYPE_ARRAY || (kv->arr_type != LM_GGUF_TYPE_UINT8 && kv->arr_type != LM_GGUF_TYPE_INT8))
        return lm_error_set(LM_ERR_FORMAT,
                            "tokenizer: %s: tokenizer.ggml.precompiled_charsmap: expected array of uint8, got %s%s%s",
                            name, lm_gguf_type_name(kv->type), kv->type == LM_GGUF_TYPE_ARRAY ? " of " : "",
                            kv->type == LM_GGUF_TYPE_ARRAY ? lm_gguf_type_name(kv->arr_type) : "");
    d->charsmap = kv->data;
    d->charsmap_len = (size_t)kv->arr_n;
    return LM_OK;
}

enum lm_status lm_tokenizer_load(struct lm_tokenizer **out, const struct lm_gguf *g) {
    *out = NULL;
    const char *name = g->path;
    struct lm_gguf_str model;
    enum lm_status st = lm_gguf_get_str(g, "tokenizer.ggml.model", &model, true);
    if (st != LM_OK) return st;
    char model_c[64];
    snprintf(model_c, sizeof model_c, "%.*s", (int)(model.len < 63 ? model.len : 63), model.data);
    bool encoder = lm_gguf_str_eq(model, "bert") || lm_gguf_str_eq(model, "t5");
    if (!lm_gguf_str_eq(model, "llama") && !lm_gguf_str_eq(model, "gpt2") && !encoder)
        return lm_error_set(LM_ERR_UNSUPPORTED,
                            "tokenizer: %s: tokenizer.ggml.model '%s' not supported ('llama' = SentencePiece, "
                            "'gpt2' = byte-level BPE, 'bert' = WordPiece, 't5' = Unigram)",
                            name, model_c);

    uint64_t n = 0;
    const void *tok_data = NULL;
    if ((st = lm_gguf_get_arr(g, "tokenizer.ggml.tokens", LM_GGUF_TYPE_STRING, &n, &tok_data, true)) != LM_OK)
        return st;
    if (n == 0 || n > LM_TOK_MAX_VOCAB)
        return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: tokenizer.ggml.tokens has %llu entries (expected 1..%d)",
                            name, (unsigned long long)n, LM_TOK_MAX_VOCAB);
    const struct lm_gguf_str *toks = tok_data;

    struct lm_tokenizer_desc d = {.model = model_c, .n_vocab = (int32_t)n,
                                  .bos = -1, .eos = -1, .unk = -1, .pad = -1, .eot = -1, .eom = -1,
                                  .fim_pad = -1, .fim_rep = -1, .fim_sep = -1,
                                  .add_bos = -1, .add_eos = -1, .add_space_prefix = -1,
                                  .sep = -1, .lowercase = -1, .strip_accents = -1, .remove_extra_ws = -1};
    const char **texts = malloc(n * sizeof *texts);
    uint32_t *lens = malloc(n * sizeof *lens);
    float *scores = NULL;
    int32_t *types = NULL;
    const char **mtexts = NULL;
    uint32_t *mlens = NULL;
    char pre_c[64] = "";
    if (!texts || !lens) {
        st = lm_error_set(LM_ERR_NOMEM, "tokenizer: %s: out of memory", name);
        goto done;
    }
    for (uint64_t i = 0; i < n; i++) {
        if (toks[i].len > (1u << 20)) {
            st = lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: tokenizer.ggml.tokens[%llu] is %llu bytes (limit 1 MiB)",
                              name, (unsigned long long)i, (unsigned long long)toks[i].len);
            goto done;
        }
        texts[i] = toks[i].data;
        lens[i] = (uint32_t)toks[i].len;
    }
    d.texts = texts;
    d.lens = lens;

    if ((st = read_scores(g, name, n, &scores)) != LM_OK || (st = read_types(g, name, n, &types)) != LM_OK)
        goto done;
    d.scores = scores;
    d.types = types;
    if ((st = get_id(g, "tokenizer.ggml.bos_token_id", &d.bos)) ||
        (st = get_id(g, "tokenizer.ggml.eos_token_id", &d.eos)) ||
        (st = get_id(g, "tokenizer.ggml.unknown_token_id", &d.unk)) ||
        (st = get_id(g, "tokenizer.ggml.padding_token_id", &d.pad)) ||
        (st = get_id(g, "tokenizer.ggml.eot_token_id", &d.eot)) ||
        (st = get_id(g, "tokenizer.ggml.eom_token_id", &d.eom)) ||
        (st = get_id(g, "tokenizer.ggml.fim_pad_token_id", &d.fim_pad)) ||
        (st = get_id(g, "tokenizer.ggml.fim_rep_token_id", &d.fim_rep)) ||
        (st = get_id(g, "tokenizer.ggml.fim_sep_token_id", &d.fim_sep)) ||
        (st = get_flag(g, "tokenizer.ggml.add_bos_token", &d.add_bos)) ||
        (st = get_flag(g, "tokenizer.ggml.add_eos_token", &d.add_eos)) ||
        (st = get_flag(g, "tokenizer.ggml.add_space_prefix", &d.add_space_prefix)))
        goto done;
    if (encoder && (st = read_encoder_keys(g, name, &d)) != LM_OK) goto done;
    if (lm_gguf_str_eq(model, "gpt2")) {
        struct lm_gguf_str pre = {0};
        if ((st = lm_gguf_get_str(g, "tokenizer.ggml.pre", &pre, false)) != LM_OK) goto done;
        if (pre.len >= sizeof pre_c) {
            st = lm_error_set(LM_ERR_UNSUPPORTED, "tokenizer: %s: tokenizer.ggml.pre is %llu bytes long (not a known name)",
                              name, (unsigned long long)pre.len);
            goto done;
        }
        if (pre.len) memcpy(pre_c, pre.data, pre.len);
        pre_c[pre.len] = 0;
        if (strlen(pre_c) != pre.len) {
            st = lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: tokenizer.ggml.pre contains a NUL byte", name);
            goto done;
        }
        d.pre = pre_c;
        if (lm_gguf_find_kv(g, "tokenizer.ggml.merges")) {
            uint64_t nm;
            const void *md;
            if ((st = lm_gguf_get_arr(g, "tokenizer.ggml.merges", LM_GGUF_TYPE_STRING, &nm, &md, true)) != LM_OK)
                goto done;
            if (nm > ((uint64_t)1 << 26)) {
                st = lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: tokenizer.ggml.merges has %llu entries (limit %d)", name,
                                  (unsigned long long)nm, 1 << 26);
                goto done;
            }
            const struct lm_gguf_str *ms = md;
            mtexts = malloc((nm ? nm : 1) * sizeof *mtexts);
            mlens = malloc((nm ? nm : 1) * sizeof *mlens);
            if (!mtexts || !mlens) {
                st = lm_error_set(LM_ERR_NOMEM, "tokenizer: %s: out of memory", name);
                goto done;
            }
            for (uint64_t i = 0; i < nm; i++) {
                if (ms[i].len > (1u << 20)) {
                    st = lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: tokenizer.ggml.merges[%llu] is %llu bytes (limit 1 MiB)",
                                      name, (unsigned long long)i, (unsigned long long)ms[i].len);
                    goto done;
                }
                mtexts[i] = ms[i].data;
                mlens[i] = (uint32_t)ms[i].len;
            }
            d.merges = mtexts;
            d.merge_lens = mlens;
            d.n_merges = (int64_t)nm;
        }
    }
    st = lm_tokenizer_init_desc(out, &d, name);
done:
    free(mtexts);
    free(mlens);
    free(texts);
    free(lens);
    free(scores);
    free(types);
    return st;
}

enum lm_status lm_tokenizer_open(struct lm_tokenizer **out, const char *path) {
    *out = NULL;
    struct lm_gguf g;
    enum lm_status st = lm_gguf_open(&g, path);
    if (st != LM_OK) return st;
    st = lm_tokenizer_load(out, &g);
    lm_gguf_close(&g);
    return st;
}

void lm_tokenizer_close(struct lm_tokenizer *t) { lm_tokenizer_free(t); }
