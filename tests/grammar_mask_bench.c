// Mask microbenchmark (not a ctest): compiles llama.cpp's json.gbnf for the default model's
// tokenizer, then replays JSON documents token by token (fill_mask, check the next token is
// allowed, accept) and prints mean/p50/p99 mask time, cache statistics and compile times.
//   build/grammar_mask_bench [model.gguf] [rounds]
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timer.h"
#include "format/gguf.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

static const char *docs[] = {
    "{\"name\": \"Ada Lovelace\", \"born\": 1815, \"languages\": [\"English\", \"French\"], \"active\": false}",
    "{\n  \"id\": \"3f2c9a1e-77b0-4c1d-9e2a-5b8d0c4f6a21\",\n  \"items\": [\n    {\"sku\": \"A-100\", \"qty\": 2, \"price\": 19.99},\n"
    "    {\"sku\": \"B-205\", \"qty\": 1, \"price\": 5.5}\n  ],\n  \"note\": \"deliver after 5pm \\u2014 ring twice\",\n  \"paid\": true\n}",
    "{\"city\": \"Zürich\", \"temp_c\": -3.5, \"tags\": [\"snow\", \"wind\", \"☃\"], \"forecast\": {\"tomorrow\": {\"high\": 2, \"low\": -6}, "
    "\"summary\": \"cold and \\\"breezy\\\"\"}, \"sensors\": [1, 2, 3, 4, 5, 6, 7, 8], \"ok\": null}",
    "{\"tool\": \"search\", \"arguments\": {\"query\": \"best pizza near me\", \"limit\": 10, \"filters\": {\"open_now\": true, "
    "\"price\": [1, 2]}}, \"emoji\": \"🍕🍕\", \"path\": \"C:\\\\Users\\\\ada\\\\notes.txt\"}",
    "{\"matrix\": [[1, 0, 0], [0, 1, 0], [0, 0, 1]], \"labels\": {\"x\": \"horizontal\", \"y\": \"vertical\"}, \"description\": "
    "\"An identity matrix has ones on the main diagonal and zeros elsewhere; it leaves vectors unchanged.\"}",
};

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "models/gemma-3-270m-q4_k_m.gguf";
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    struct lm_gguf gg;
    struct lm_tokenizer *t;
    if (lm_gguf_open(&gg, path) != LM_OK || lm_tokenizer_load(&t, &gg) != LM_OK) {
        fprintf(stderr, "grammar_mask_bench: %s\n", lm_error_msg());
        return 1;
    }
    FILE *f = fopen("tests/data/gbnf/json.gbnf", "rb");
    if (!f) { fprintf(stderr, "grammar_mask_bench: run from the source tree\n"); return 1; }
    static char gbnf[1 << 16];
    size_t glen = fread(gbnf, 1, sizeof gbnf, f);
    fclose(f);
    const int32_t nv = t->n_vocab, W = (nv + 31) / 32;
    uint32_t *bits = malloc((size_t)W * 4);
    // compile: the first includes building the vocabulary trie; then the cached trie
    uint64_t c_ns[21];
    struct lm_grammar *g = NULL;
    for (int i = 0; i < 21; i++) {
        struct lm_grammar *x;
        uint64_t t0 = lm_now_ns();
        if (lm_grammar_compile(&x, t, gbnf, glen, NULL) != LM_OK) { fprintf(stderr, "%s\n", lm_error_msg()); return 1; }
        c_ns[i] = lm_now_ns() - t0;
        if (i == 0) g = x;
        else lm_grammar_free(x);
    }
    uint64_t first = c_ns[0];
    qsort(c_ns + 1, 20, sizeof *c_ns, cmp_u64);
    printf("vocab %d, trie %u nodes; compile json.gbnf: first %.2f ms (trie build), then p50 %.3f ms, max %.3f ms\n",
           nv, g->trie->n, first / 1e6, c_ns[10] / 1e6, c_ns[20] / 1e6);
    size_t n_docs = sizeof docs / sizeof *docs, cap = 1 << 16, n_t = 0;
    uint64_t *ns = malloc(cap * sizeof *ns);
    int bad = 0;
    for (int mode = 0; mode < 2; mode++) { // 0: one grammar, warm caches; 1: a new grammar per document
        n_t = 0;
        for (int r = 0; r < rounds; r++)
            for (size_t d = 0; d < n_docs; d++) {
                struct lm_grammar *gd = g;
                if (mode == 1 && lm_grammar_compile(&gd, t, gbnf, glen, NULL) != LM_OK) return 1;
                int32_t *ids;
                size_t n;
                if (lm_tokenize(t, docs[d], strlen(docs[d]), false, false, &ids, &n) != LM_OK) return 1;
                struct lm_grammar_matcher *m;
                if (lm_grammar_matcher_init(&m, gd) != LM_OK) return 1;
                for (size_t i = 0; i <= n; i++) {
                    uint64_t t0 = lm_now_ns();
                    lm_grammar_matcher_fill_mask(m, bits);
                    uint64_t dt = lm_now_ns() - t0;
                    if (n_t < cap) ns[n_t++] = dt;
                    int32_t want = i < n ? ids[i] : lm_tokenizer_eos(t);
                    if (!((bits[want >> 5] >> (want & 31)) & 1)) {
                        if (!bad++) fprintf(stderr, "doc %zu token %zu (id %d) not allowed\n", d, i, want);
                        break;
                    }
                    if (i < n && !lm_grammar_matcher_accept(m, ids[i])) {
                        if (!bad++) fprintf(stderr, "doc %zu token %zu refused\n", d, i);
                        break;
                    }
                }
                lm_grammar_matcher_free(m);
                free(ids);
                if (mode == 1) lm_grammar_free(gd);
            }
        qsort(ns, n_t, sizeof *ns, cmp_u64);
        double sum = 0;
        for (size_t i = 0; i < n_t; i++) sum += (double)ns[i];
        printf("%s: %zu masks over %d x %zu documents: mean %.1f us, p50 %.1f us, p99 %.1f us, max %.1f us\n",
               mode ? "new grammar per document (cold caches)" : "one grammar (caches warm after the first document)",
               n_t, rounds, n_docs, sum / (double)n_t / 1e3, ns[n_t / 2] / 1e3, ns[n_t * 99 / 100] / 1e3, ns[n_t - 1] / 1e3);
    }
    printf("states %u, stack nodes %u, cores %u, fills %llu, cache hits %llu, trie nodes walked %llu\n",
           g->eng.n_states, g->eng.n_nodes, g->masks.n_cores, (unsigned long long)g->masks.n_fills,
           (unsigned long long)g->masks.n_hits, (unsigned long long)g->masks.n_walked);
    lm_grammar_free(g);
    lm_tokenizer_free(t);
    lm_gguf_close(&gg);
    free(bits), free(ns);
    if (bad) fprintf(stderr, "grammar_mask_bench: %d documents failed\n", bad);
    return bad ? 1 : 0;
}
