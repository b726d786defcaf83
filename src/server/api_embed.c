// POST /v1/embeddings' body (OpenAI's shape) into struct api_embed: the inputs as texts or
// token ids, the encoding, the dimensions; POST /v1/rerank's (llama-server's / Jina's) into
// struct api_rerank; one 400 naming the field for anything else.
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"

void api_embed_free(struct api_embed *q) {
    for (int32_t i = 0; i < q->n; i++) {
        if (q->text) free(q->text[i]);
        if (q->ids) free(q->ids[i]);
    }
    free(q->text);
    free(q->text_len);
    free(q->ids);
    free(q->n_ids);
    memset(q, 0, sizeof *q);
}

// input k: a non-empty string
static bool take_text(json_t *v, const char *param, int32_t k, struct api_embed *q,
                      struct api_error *e) {
    const size_t n = json_string_length(v);
    if (n == 0) return api_bad_request(e, "invalid_value", param, "'%s' is an empty string", param);
    if (!(q->text[k] = api_dup_n(json_string_value(v), n))) return api_oom(e);
    q->text_len[k] = n;
    return true;
}

// input k: a non-empty array of token ids in [0, n_vocab)
static bool take_ids(json_t *a, const char *param, int32_t n_vocab, int32_t k, struct api_embed *q,
                     struct api_error *e) {
    const size_t n = json_array_size(a);
    if (n == 0) return api_bad_request(e, "invalid_value", param, "'%s' is an empty array of token ids", param);
    if (n > (size_t)INT32_MAX / 2) return api_bad_request(e, "invalid_value", param, "'%s' is too long", param);
    if (!(q->ids[k] = malloc(n * sizeof *q->ids[k]))) return api_oom(e);
    q->n_ids[k] = (int32_t)n;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_integer(x))
            return api_bad_request(e, "invalid_type", param, "'%s'[%zu] must be an integer token id "
                                   "(got %s)", param, i, api_json_kind(x));
        const json_int_t id = json_integer_value(x);
        if (id < 0 || id >= n_vocab)
            return api_bad_request(e, "invalid_value", param, "'%s'[%zu] is token %lld, outside the "
                                   "vocabulary [0, %d)", param, i, (long long)id, n_vocab);
        q->ids[k][i] = (int32_t)id;
    }
    return true;
}

static bool alloc_inputs(struct api_embed *q, size_t n, struct api_error *e) {
    q->text = calloc(n, sizeof *q->text);
    q->text_len = calloc(n, sizeof *q->text_len);
    q->ids = calloc(n, sizeof *q->ids);
    q->n_ids = calloc(n, sizeof *q->n_ids);
    q->n = (int32_t)n;
    return q->text && q->text_len && q->ids && q->n_ids ? true : api_oom(e);
}

static bool parse_input(json_t *in, int32_t n_vocab, struct api_embed *q, struct api_error *e) {
    if (json_is_string(in)) return alloc_inputs(q, 1, e) && take_text(in, "input", 0, q, e);
    if (!json_is_array(in))
        return api_wrong_type(e, "input", "a string, an array of strings, an array of token ids or "
                              "an array of arrays of token ids", in);
    const size_t n = json_array_size(in);
    if (n == 0) return api_bad_request(e, "invalid_value", "input", "'input' is an empty array");
    json_t *first = json_array_get(in, 0);
    if (json_is_integer(first)) return alloc_inputs(q, 1, e) && take_ids(in, "input", n_vocab, 0, q, e);
    if (n > API_MAX_EMBED_INPUTS)
        return api_bad_request(e, "invalid_value", "input", "'input' has %zu inputs, more than %d", n,
                               API_MAX_EMBED_INPUTS);
    if (!alloc_inputs(q, n, e)) return false;
    const bool texts = json_is_string(first);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(in, i);
        char param[40];
        snprintf(param, sizeof param, "input[%zu]", i);
        if (texts ? !json_is_string(v) : !json_is_array(v))
            return api_wrong_type(e, param, texts ? "a string (as input[0])"
                                                  : "an array of token ids (as input[0])", v);
        if (!(texts ? take_text(v, param, (int32_t)i, q, e) : take_ids(v, param, n_vocab, (int32_t)i, q, e)))
            return false;
    }
    return true;
}

bool api_parse_embed(const char *body, size_t len, int32_t n_vocab, const struct api_limits *lim,
                     struct api_embed *q, struct api_error *e) {
    memset(q, 0, sizeof *q);
    json_t *o = api_load_object(body, len, lim, e);
    if (!o) return false;
    bool ok = true;
    json_t *in = api_field(o, "input");
    if (!in) ok = api_bad_request(e, "missing_field", "input", "'input' is required");
    else ok = parse_input(in, n_vocab, q, e);
    json_t *f = ok ? api_field(o, "encoding_format") : NULL;
    if (f && !json_is_string(f)) ok = api_wrong_type(e, "encoding_format", "\"float\" or \"base64\"", f);
    else if (f && !strcmp(json_string_value(f), "base64")) q->base64 = true;
    else if (f && strcmp(json_string_value(f), "float"))
        ok = api_bad_request(e, "invalid_value", "encoding_format", "'encoding_format' must be \"float\" "
                             "or \"base64\"");
    long long dims = 0;
    if (ok) ok = api_get_int(o, "dimensions", 1, 1 << 20, &dims, NULL, e);
    q->dimensions = (int32_t)dims;
    json_decref(o);
    if (!ok) api_embed_free(q);
    return ok;
}

// ================================================================ POST /v1/rerank

void api_rerank_free(struct api_rerank *q) {
    for (int32_t i = 0; q->doc && i < q->n; i++) free(q->doc[i]);
    free(q->doc);
    free(q->doc_len);
    free(q->query);
    memset(q, 0, sizeof *q);
}

static bool parse_documents(json_t *d, struct api_rerank *q, struct api_error *e) {
    if (!d) return api_bad_request(e, "missing_field", "documents", "'documents' is required");
    if (!json_is_array(d)) return api_wrong_type(e, "documents", "an array of strings", d);
    const size_t n = json_array_size(d);
    if (n == 0) return api_bad_request(e, "invalid_value", "documents", "'documents' is an empty array");
    if (n > API_MAX_EMBED_INPUTS)
        return api_bad_request(e, "invalid_value", "documents", "'documents' has %zu entries, more than %d",
                               n, API_MAX_EMBED_INPUTS);
    q->doc = calloc(n, sizeof *q->doc);
    q->doc_len = calloc(n, sizeof *q->doc_len);
    q->n = (int32_t)n;
    if (!q->doc || !q->doc_len) return api_oom(e);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(d, i);
        char param[40];
        snprintf(param, sizeof param, "documents[%zu]", i);
        if (!json_is_string(v)) return api_wrong_type(e, param, "a string", v);
        q->doc_len[i] = json_string_length(v);
        if (!(q->doc[i] = api_dup_n(json_string_value(v), q->doc_len[i]))) return api_oom(e);
    }
    return true;
}

bool api_parse_rerank(const char *body, size_t len, const struct api_limits *lim, struct api_rerank *q,
                      struct api_error *e) {
    memset(q, 0, sizeof *q);
    json_t *o = api_load_object(body, len, lim, e);
    if (!o) return false;
    bool ok = true;
    json_t *qv = api_field(o, "query");
    if (!qv) ok = api_bad_request(e, "missing_field", "query", "'query' is required");
    else if (!json_is_string(qv)) ok = api_wrong_type(e, "query", "a string", qv);
    else if (json_string_length(qv) == 0) ok = api_bad_request(e, "invalid_value", "query", "'query' is an empty string");
    else if (!(q->query = api_dup_n(json_string_value(qv), q->query_len = json_string_length(qv)))) ok = api_oom(e);
    if (ok) ok = parse_documents(api_field(o, "documents"), q, e);
    long long top_n = 0;
    if (ok) ok = api_get_int(o, "top_n", 1, 1 << 30, &top_n, NULL, e);
    q->top_n = (int32_t)top_n;
    if (ok) ok = api_get_bool(o, "return_documents", &q->return_documents, e);
    json_decref(o);
    if (!ok) api_rerank_free(q);
    return ok;
}
