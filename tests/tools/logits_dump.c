// Helper of tests/test_model_ref_forward.sh (takes arguments, so it is not a ctest): the
// logits of every position of token sequences, through include/lumen.h only.
//   logits_dump MODEL [BATCH]   stdin: one sequence per line (token ids, spaces between)
//                               stdout: per sequence, n_tokens rows of n_vocab float32
// Each sequence starts from an empty KV cache; BATCH positions per lm_decode (default 64;
// batch invariance makes the result independent of it).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lumen.h"

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s MODEL [BATCH] < sequences.txt > logits.f32\n", argv[0]);
        return 2;
    }
    const int batch = argc > 2 ? atoi(argv[2]) : 64;
    if (batch < 1 || batch > 4096) {
        fprintf(stderr, "logits_dump: batch %s out of range [1, 4096]\n", argv[2]);
        return 2;
    }
    // read every sequence first: the longest sizes the context
    int32_t *toks = NULL;
    size_t n_tok = 0, cap = 0, n_seq = 0, max_len = 0;
    size_t *lens = NULL;
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, stdin) > 0) {
        size_t len = 0;
        for (char *p = line, *end; ; p = end) {
            const long v = strtol(p, &end, 10);
            if (end == p) break;
            if (n_tok == cap) {
                cap = cap ? 2 * cap : 4096;
                if (!(toks = realloc(toks, cap * sizeof *toks))) return 1;
            }
            toks[n_tok++] = (int32_t)v;
            len++;
        }
        if (!len) continue;
        if (!(lens = realloc(lens, (n_seq + 1) * sizeof *lens))) return 1;
        lens[n_seq++] = len;
        if (len > max_len) max_len = len;
    }
    free(line);
    struct lm_model *m = NULL;
    if (lm_model_load(&m, argv[1], NULL) != LM_OK) {
        fprintf(stderr, "logits_dump: %s\n", lm_error_msg());
        return 1;
    }
    const int n_vocab = lm_model_n_vocab(m);
    struct lm_context *c = NULL;
    struct lm_context_params cp = {.n_ctx = (int32_t)(max_len ? max_len : 1), .n_seq_max = 1,
                                   .n_batch = batch, .n_threads = 0, .no_prefix_cache = true};
    const char *nt = getenv("LUMEN_THREADS");
    if (nt && *nt) cp.n_threads = atoi(nt);
    if (lm_context_init(&c, m, &cp) != LM_OK) {
        fprintf(stderr, "logits_dump: %s\n", lm_error_msg());
        return 1;
    }
    struct lm_batch_entry *e = malloc(sizeof *e * (size_t)batch);
    if (!e) return 1;
    const int32_t *t = toks;
    for (size_t s = 0; s < n_seq; t += lens[s], s++) {
        lm_kv_cache_seq_rm(c, 0, 0, -1);
        for (size_t p0 = 0; p0 < lens[s]; p0 += (size_t)batch) {
            const int n = (int)(lens[s] - p0 < (size_t)batch ? lens[s] - p0 : (size_t)batch);
            for (int i = 0; i < n; i++)
                e[i] = (struct lm_batch_entry){.token = t[p0 + (size_t)i], .pos = (int32_t)(p0 + (size_t)i),
                                               .seq = 0, .want_logits = true};
            if (lm_decode(c, e, n) != LM_OK) {
                fprintf(stderr, "logits_dump: sequence %zu, position %zu: %s\n", s, p0, lm_error_msg());
                return 1;
            }
            for (int i = 0; i < n; i++)
                if (fwrite(lm_get_logits(c, i), sizeof(float), (size_t)n_vocab, stdout) != (size_t)n_vocab) {
                    fprintf(stderr, "logits_dump: write failed\n");
                    return 1;
                }
        }
    }
    fflush(stdout);
    free(e);
    free(toks);
    free(lens);
    lm_context_free(c);
    lm_model_free(m);
    return 0;
}
