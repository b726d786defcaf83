// libFuzzer target for lumen serve's POST /v1/embeddings and /v1/rerank parsing
// (src/server/api_embed.c): the input is the JSON body, parsed as both. An embeddings request
// must hold 1..API_MAX_EMBED_INPUTS inputs, each exactly one of a non-empty text or a
// non-empty run of ids in [0, n_vocab), and dimensions >= 0; a rerank request a non-empty
// query and 1..API_MAX_EMBED_INPUTS documents; an error must come out as valid OpenAI-shaped
// JSON naming its status.
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct api_limits k_lim = {.max_values = 4096, .max_depth = API_MAX_DEPTH};
#define N_VOCAB 1000

static void check_error(const struct api_error *e) {
    if (e->status < 400 || e->status > 599 || !e->message[0]) __builtin_trap();
    char *s = api_error_json(e);
    if (!s) return; // out of memory
    json_t *j = json_loads(s, 0, NULL);
    json_t *err = json_object_get(j, "error");
    if (!j || json_object_size(j) != 1 || !json_is_string(json_object_get(err, "message")) ||
        !json_is_string(json_object_get(err, "type")))
        __builtin_trap();
    json_decref(j);
    free(s);
}

static void check_rerank(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_rerank(data, size);
    struct api_embed q;
    struct api_error e;
    memset(&e, 0, sizeof e);
    if (!api_parse_embed((const char *)data, size, N_VOCAB, &k_lim, &q, &e)) {
        check_error(&e);
        if (q.n != 0 || q.text || q.ids) __builtin_trap(); // nothing left behind
        return 0;
    }
    if (q.n < 1 || q.n > API_MAX_EMBED_INPUTS || q.dimensions < 0) __builtin_trap();
    for (int32_t i = 0; i < q.n; i++) {
        const bool text = q.text[i] != NULL, ids = q.ids[i] != NULL;
        if (text == ids) __builtin_trap();
        if (text && (q.text_len[i] == 0 || strlen(q.text[i]) > q.text_len[i])) __builtin_trap();
        if (ids && q.n_ids[i] < 1) __builtin_trap();
        for (int32_t k = 0; ids && k < q.n_ids[i]; k++)
            if (q.ids[i][k] < 0 || q.ids[i][k] >= N_VOCAB) __builtin_trap();
    }
    api_embed_free(&q);
    return 0;
}

static void check_rerank(const uint8_t *data, size_t size) {
    struct api_rerank q;
    struct api_error e;
    memset(&e, 0, sizeof e);
    if (!api_parse_rerank((const char *)data, size, &k_lim, &q, &e)) {
        check_error(&e);
        if (q.n != 0 || q.doc || q.query) __builtin_trap();
        return;
    }
    if (!q.query || q.query_len == 0 || q.n < 1 || q.n > API_MAX_EMBED_INPUTS || q.top_n < 0) __builtin_trap();
    for (int32_t i = 0; i < q.n; i++)
        if (!q.doc[i] || strlen(q.doc[i]) > q.doc_len[i]) __builtin_trap();
    api_rerank_free(&q);
}
