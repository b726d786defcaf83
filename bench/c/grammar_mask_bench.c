// Mask microbenchmark (not a ctest): json.gbnf and a schema-style grammar for the default
// model's tokenizer, JSON documents replayed token by token (fill_mask, next token allowed,
// accept): mean/p50/p99 mask time (wall, thread CPU), compile time. Args: [gguf] [rounds] [file]
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <time.h>
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

static const char *person_docs[] = {
    "{\"name\": \"Ada Lovelace\", \"age\": 36, \"tags\": [\"mathematician\", \"writer\"], \"address\": {\"street\": \"12 St James's Square\", \"city\": \"London\"}}",
    "{\"name\": \"José Núñez\", \"age\": 41, \"tags\": [], \"address\": {\"street\": \"Calle Mayor 5\", \"city\": \"Madrid\"}}",
    "{\n  \"name\": \"李雷\",\n  \"age\": 29,\n  \"tags\": [\"engineer\", \"climber\", \"🧗\"],\n  \"address\": {\"street\": \"88 Nanjing Road\", \"city\": \"Shanghai\"}\n}",
    "{\"name\": \"O\\\"Brien\", \"age\": -1, \"tags\": [\"test\\nline\"], \"address\": {\"street\": \"\", \"city\": \"Cork\"}}",
};

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t cpu_ns(void) { // this thread's CPU time: preemption on a busy machine excluded
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void report(const char *what, uint64_t *ns, size_t n) {
    qsort(ns, n, sizeof *ns, cmp_u64);
    double sum = 0;
    size_t over = 0;
    for (size_t i = 0; i < n; i++) sum += (double)ns[i], over += ns[i] > 1000000;
    printf("  %-10s mean %7.1f us, p50 %6.1f us, p99 %7.1f us, max %8.1f us, %zu over 1 ms\n", what,
           sum / (double)n / 1e3, ns[n / 2] / 1e3, ns[n * 99 / 100] / 1e3, ns[n - 1] / 1e3, over);
}


// Compiles file (21 times: the first may build the trie), then replays the documents with one
// grammar (warm caches) and with a new grammar per document (cold caches). Returns failures.
static int run(const struct lm_tokenizer *t, const char *file, const char *const *docs, size_t n_docs, int rounds) {
    FILE *f = fopen(file, "rb");
    if (!f) { fprintf(stderr, "grammar_mask_bench: %s: run from the source tree\n", file); return 1; }
    static char gbnf[1 << 16];
    size_t glen = fread(gbnf, 1, sizeof gbnf, f);
    fclose(f);
    const int32_t nv = t->n_vocab, W = (nv + 31) / 32;
    uint32_t *bits = malloc((size_t)W * 4);
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
    printf("%s: vocab %d, trie %u nodes; compile: first %.2f ms, then p50 %.3f ms, max %.3f ms\n",
           file, nv, g->trie->n, first / 1e6, c_ns[10] / 1e6, c_ns[20] / 1e6);
    size_t cap = 1 << 16, n_t = 0;
    uint64_t *ns = malloc(cap * sizeof *ns), *cpu = malloc(cap * sizeof *cpu);
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
                    uint64_t c0 = cpu_ns(), t0 = lm_now_ns();
                    lm_grammar_matcher_fill_mask(m, bits);
                    uint64_t dt = lm_now_ns() - t0, dc = cpu_ns() - c0;
                    if (n_t < cap) ns[n_t] = dt, cpu[n_t++] = dc;
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
        printf(" %s: %zu masks over %d x %zu documents\n",
               mode ? "new grammar per document (cold caches)" : "one grammar (caches warm after the first document)", n_t, rounds, n_docs);
        report("wall", ns, n_t);
        report("thread CPU", cpu, n_t);
    }
    printf(" states %u, stack nodes %u, cores %u, fills %llu, cache hits %llu, trie nodes walked %llu\n",
           g->eng.n_states, g->eng.n_nodes, g->masks.n_cores, (unsigned long long)g->masks.n_fills,
           (unsigned long long)g->masks.n_hits, (unsigned long long)g->masks.n_walked);
    lm_grammar_free(g);
    free(bits), free(ns), free(cpu);
    return bad;
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
    uint64_t t0 = lm_now_ns();
    struct lm_grammar *warm; // builds the shared vocabulary trie once
    if (lm_grammar_compile(&warm, t, "root ::= \"x\"", 12, NULL) != LM_OK) return 1;
    printf("vocabulary trie built in %.1f ms (once per tokenizer)\n", (lm_now_ns() - t0) / 1e6);
    const char *only = argc > 3 ? argv[3] : ""; // a substring of the grammar file names to run
    int bad = 0;
    if (strstr("tests/data/gbnf/json.gbnf", only)) bad += run(t, "tests/data/gbnf/json.gbnf", docs, sizeof docs / sizeof *docs, rounds);
    if (strstr("tests/data/gbnf/person_schema.gbnf", only))
        bad += run(t, "tests/data/gbnf/person_schema.gbnf", person_docs, sizeof person_docs / sizeof *person_docs, rounds);
    lm_grammar_free(warm);
    lm_tokenizer_free(t);
    lm_gguf_close(&gg);
    if (bad) fprintf(stderr, "grammar_mask_bench: %d documents failed\n", bad);
    return bad ? 1 : 0;
}
