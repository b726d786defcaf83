// Set-up helpers of the model tests (lm_test_model.h): the code each of test_runtime_batch,
// _kv_q8, _batch_moe, _sched, ... used to carry its own copy of.
#include "lm_test_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool lm_test_quick(void) {
    const char *q = getenv("LUMEN_TEST_QUICK");
    return q && *q && strcmp(q, "0") != 0;
}

struct lm_model *lm_test_load(const char *path) {
    struct lm_model *m = NULL;
    if (lm_model_load(&m, path, NULL) != LM_OK) {
        fprintf(stderr, "cannot load model: %s\n", lm_error_msg());
        return NULL;
    }
    return m;
}

// xorshift64 from a seed-derived state: the same ids for the same seed in every test
void lm_test_prompt(int32_t *t, int n, uint64_t seed) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    if (n > 0) t[0] = 2; // BOS
    for (int i = 1; i < n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        t[i] = 100 + (int32_t)(x % 20000);
    }
}

void lm_test_ids(int32_t *t, int n, uint64_t seed, int n_vocab) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        t[i] = 3 + (int32_t)(x % (uint64_t)(n_vocab - 3));
    }
}

bool lm_test_prefill(struct lm_context *c, int32_t seq, const int32_t *t, int n, int chunk,
                     float *out, int n_vocab) {
    if (chunk < 1) {
        fprintf(stderr, "lm_test_prefill: chunk %d < 1\n", chunk);
        return false;
    }
    struct lm_batch_entry *b = malloc(sizeof *b * (size_t)chunk);
    if (!b) {
        fprintf(stderr, "lm_test_prefill: out of memory for a batch of %d\n", chunk);
        return false;
    }
    const int p0 = lm_kv_cache_seq_pos(c, seq);
    bool ok = true;
    for (int off = 0; ok && off < n; off += chunk) {
        const int nb = n - off < chunk ? n - off : chunk;
        for (int i = 0; i < nb; i++) b[i] = (struct lm_batch_entry){t[off + i], p0 + off + i, seq, true};
        if (lm_decode(c, b, nb) != LM_OK) {
            fprintf(stderr, "decode: %s\n", lm_error_msg());
            ok = false;
        } else if (out) {
            for (int i = 0; i < nb; i++)
                memcpy(out + (size_t)(off + i) * (size_t)n_vocab, lm_get_logits(c, i), sizeof(float) * (size_t)n_vocab);
        }
    }
    free(b);
    return ok;
}

bool lm_test_greedy_alone(struct lm_context *c, const int32_t *t, int n, int gen, float *ref,
                          int32_t *toks, int n_vocab) {
    if (lm_kv_cache_seq_rm(c, 0, 0, -1) != LM_OK || !lm_test_prefill(c, 0, t, n, n, NULL, n_vocab)) return false;
    const size_t row = sizeof(float) * (size_t)n_vocab;
    memcpy(ref, lm_get_logits(c, n - 1), row);
    for (int g = 0; g < gen; g++) {
        const float *l = g == 0 ? ref : lm_get_logits(c, 0);
        if (g > 0) memcpy(ref + (size_t)g * (size_t)n_vocab, l, row);
        toks[g] = lm_test_argmax(l, n_vocab);
        struct lm_batch_entry e = {toks[g], n + g, 0, true};
        if (lm_decode(c, &e, 1) != LM_OK) {
            fprintf(stderr, "decode: %s\n", lm_error_msg());
            return false;
        }
    }
    return lm_kv_cache_seq_rm(c, 0, 0, -1) == LM_OK;
}

bool lm_test_same(const float *a, const float *b, int n_vocab) {
    return !memcmp(a, b, sizeof(float) * (size_t)n_vocab);
}

int lm_test_argmax(const float *a, int n_vocab) {
    int b = 0;
    for (int i = 1; i < n_vocab; i++) if (a[i] > a[b]) b = i;
    return b;
}

int lm_test_first_diff(const float *a, const float *b, int n, int n_vocab) {
    for (int i = 0; i < n; i++)
        if (!lm_test_same(a + (size_t)i * (size_t)n_vocab, b + (size_t)i * (size_t)n_vocab, n_vocab)) return i;
    return -1;
}
