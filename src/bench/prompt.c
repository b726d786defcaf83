// The bench's fixed text, its prompts and the chunked prefill (prompt.h).
#include "prompt.h"

#include <stdlib.h>
#include <string.h>

const char lm_bench_text[] =
    "The old lighthouse keeper climbed the spiral stairs every evening at dusk, counting "
    "each of the one hundred and twelve steps as his father had taught him. From the gallery "
    "he could see the whole bay: fishing boats returning with their nets, gulls circling over "
    "the harbour, and the long grey line of the breakwater where children liked to run when "
    "the tide was low. He trimmed the wick, polished the great lens with a soft cloth, and "
    "wrote the weather in his logbook: wind from the south-west, a light swell, clouds "
    "gathering over the hills. Ships had relied on his light for forty years, and in all that "
    "time he had never once let it go dark. In winter the storms came quickly. Rain hammered "
    "against the windows and the tower seemed to sway, but the light kept turning, sweeping "
    "its beam across the black water so that sailors far from shore would know where the "
    "rocks were hidden. Some nights he read by the lamp in the small room below the lantern, "
    "books about navigation, astronomy and the history of the coast; other nights he simply "
    "listened to the sea. When the village built a new automatic beacon on the point, people "
    "asked whether he would finally retire. He smiled and said that a machine could turn a "
    "light, but it could not watch the sea, and that he would keep climbing the stairs for as "
    "long as his legs allowed. ";

int32_t *lm_bench_tokens(const struct lm_model *m, int32_t n) {
    const struct lm_tokenizer *tok = lm_model_tokenizer(m);
    int32_t *body = NULL;
    size_t n_body = 0;
    if (lm_tokenize(tok, lm_bench_text, strlen(lm_bench_text), false, false, &body, &n_body) !=
        LM_OK)
        return NULL;
    int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
    if (!ids || n_body == 0) {
        free(body);
        free(ids);
        lm_error_set(LM_ERR_NOMEM, "bench: cannot build %d prompt tokens", n);
        return NULL;
    }
    int32_t i = 0;
    const int32_t bos = lm_tokenizer_bos(tok);
    if (bos >= 0 && n > 0) ids[i++] = bos;
    for (size_t j = 0; i < n; j = (j + 1) % n_body) ids[i++] = body[j];
    free(body);
    return ids;
}

void lm_bench_request_prompt(const int32_t *ids, int n_ids, int i, int32_t *out, int n) {
    out[0] = ids[0];
    for (int j = 1; j < n; j++) out[j] = ids[1 + (j - 1 + 37 * i) % (n_ids - 1)];
}

enum lm_status lm_bench_prompt_text(const struct lm_tokenizer *tok, int n, char **out, size_t *len) {
    *out = NULL;
    const size_t tl = strlen(lm_bench_text);
    size_t try_len = 64;
    for (int iter = 0; iter < 64; iter++) {
        char *text = malloc(try_len + 1);
        if (!text) return lm_error_set(LM_ERR_NOMEM, "bench: out of memory");
        for (size_t i = 0; i < try_len; i++) text[i] = lm_bench_text[i % tl];
        text[try_len] = 0;
        int32_t *ids = NULL;
        size_t n_ids = 0;
        const enum lm_status st = lm_tokenize(tok, text, try_len, true, false, &ids, &n_ids);
        free(ids);
        if (st != LM_OK) {
            free(text);
            return st;
        }
        if (n_ids >= (size_t)n) {
            *out = text;
            *len = try_len;
            return LM_OK;
        }
        free(text);
        // grow by the observed bytes/token, with 10% margin
        const double bpt = n_ids ? (double)try_len / (double)n_ids : 4.0;
        const size_t next = (size_t)(bpt * n * 1.1) + 16;
        try_len = next > try_len ? next : try_len * 2;
    }
    return lm_error_set(LM_ERR_ARG, "bench: cannot build a %d-token prompt", n);
}

enum lm_status lm_bench_prefill(struct lm_context *c, const int32_t *ids, int32_t n,
                                struct lm_batch_entry *batch) {
    return lm_bench_prefill_at(c, ids, 0, n, batch);
}

enum lm_status lm_bench_prefill_at(struct lm_context *c, const int32_t *ids, int32_t start,
                                   int32_t n, struct lm_batch_entry *batch) {
    for (int32_t off = 0; off < n; off += LM_BENCH_N_BATCH) {
        const int32_t nb = n - off < LM_BENCH_N_BATCH ? n - off : LM_BENCH_N_BATCH;
        for (int32_t j = 0; j < nb; j++)
            batch[j] = (struct lm_batch_entry){.token = ids[start + off + j], .pos = start + off + j,
                                               .seq = 0, .want_logits = off + j == n - 1};
        enum lm_status st = lm_decode(c, batch, nb);
        if (st != LM_OK) return st;
    }
    return LM_OK;
}
