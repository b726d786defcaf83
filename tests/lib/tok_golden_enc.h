// Shared by the encoder tokenizer tests (WordPiece, Unigram): compare lumen with llama.cpp
// golden files (tools/gen_golden_encoder_tokens.py: hex input, add_special, special, ids, hex
// detokenized) on ids and whole-sequence detokenization. (Pieces do not give the input back:
// these normalisers lower-case, strip accents and drop spaces.)
#ifndef LM_TEST_TOK_GOLDEN_ENC_H
#define LM_TEST_TOK_GOLDEN_ENC_H

#include "tok_golden.h"

// Checks every case of a golden file (all must match); returns the number of cases.
static inline int tge_check_golden(const struct lm_tokenizer *t, const char *rel, const char *name) {
    size_t flen;
    char *file = lm_test_read_file(lm_test_path(rel), &flen);
    CHECKF(file != NULL, "missing %s (run tools/gen_golden_encoder_tokens.py)", rel);
    if (!file) return 0;
    int total = 0, matched = 0, detok_ok = 0, shown = 0;
    int32_t *exp = malloc(sizeof(int32_t) * 100000);
    for (char *line = file, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        char *f[5];
        int nf = 0;
        f[nf++] = line;
        for (char *p = line; *p && nf < 5; p++)
            if (*p == '\t') {
                *p = 0;
                f[nf++] = p + 1;
            }
        total++;
        if (nf != 5) {
            CHECKF(0, "%s: malformed golden line %d", rel, total);
            continue;
        }
        size_t in_len, dt_len, n_exp = 0, n_got = 0;
        char *in = tg_unhex(f[0], &in_len), *dt = tg_unhex(f[4], &dt_len);
        bool add_special = f[1][0] == '1', special = f[2][0] == '1';
        for (char *p = f[3]; *p && n_exp < 100000;) {
            exp[n_exp++] = (int32_t)strtol(p, &p, 10);
            while (*p == ' ') p++;
        }
        int32_t *got = NULL;
        enum lm_status st = lm_tokenize(t, in, in_len, add_special, special, &got, &n_got);
        if (st == LM_OK && n_got == n_exp && memcmp(got, exp, n_exp * sizeof *exp) == 0) {
            matched++;
        } else if (shown++ < 8) {
            fprintf(stderr, "  %s: mismatch line %d add_special=%d special=%d status=%s (%s) input=", name, total,
                    add_special, special, lm_status_name(st), st == LM_OK ? "" : lm_error_msg());
            tg_show(in, in_len);
            fputc('\n', stderr);
            tg_show_ids("llama.cpp", exp, n_exp);
            tg_show_ids("lumen    ", got, n_got);
        }
        char *text = NULL;
        size_t n_text = 0;
        if (lm_tokenizer_detokenize(t, exp, n_exp, false, false, &text, &n_text) == LM_OK && n_text == dt_len &&
            memcmp(text, dt, dt_len) == 0) {
            detok_ok++;
        } else if (shown++ < 8) {
            fprintf(stderr, "  %s: detokenize mismatch line %d: want ", name, total);
            tg_show(dt, dt_len);
            fprintf(stderr, " got ");
            tg_show(text ? text : "", n_text);
            fputc('\n', stderr);
        }
        free(text);
        free(got);
        free(in);
        free(dt);
    }
    printf("%s: ids %d/%d, detokenize %d/%d\n", name, matched, total, detok_ok, total);
    CHECKF(total > 100 && matched == total && detok_ok == total, "%s: golden mismatches", name);
    free(exp);
    free(file);
    return total;
}

#endif
