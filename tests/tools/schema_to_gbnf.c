// Helper of tests/grammar/test_schema_corpus.py: schema file (or - for stdin) -> GBNF on
// stdout, or the error on stderr and exit 1. -t: convert 21 times and print the first
// (cold) and the median conversion time on stderr ("ns FIRST MEDIAN").
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lumen.h"

int main(int argc, char **argv) {
    int timing = argc > 1 && !strcmp(argv[1], "-t");
    if (argc != 2 + timing) {
        fprintf(stderr, "usage: schema_to_gbnf [-t] SCHEMA.json|-\n");
        return 2;
    }
    const char *path = argv[1 + timing];
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        perror(path);
        return 2;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    if (f != stdin) fclose(f);
    if (!buf) return 2;
    char *g = NULL;
    size_t ng = 0;
    uint64_t ns[21];
    int runs = timing ? 21 : 1;
    enum lm_status st = LM_OK;
    for (int r = 0; r < runs; r++) {
        if (g) free(g), g = NULL;
        uint64_t t0 = lm_time_ns();
        st = lm_json_schema_to_gbnf(buf, n, &g, &ng);
        ns[r] = lm_time_ns() - t0;
    }
    if (timing) {
        uint64_t first = ns[0];
        for (int i = 1; i < runs; i++) // insertion sort
            for (int j = i; j > 0 && ns[j] < ns[j - 1]; j--) {
                uint64_t t = ns[j];
                ns[j] = ns[j - 1], ns[j - 1] = t;
            }
        fprintf(stderr, "ns %llu %llu\n", (unsigned long long)first, (unsigned long long)ns[runs / 2]);
    }
    free(buf);
    if (st != LM_OK) {
        fprintf(stderr, "%s\n", lm_error_msg());
        return 1;
    }
    fwrite(g, 1, ng, stdout);
    free(g);
    return 0;
}
