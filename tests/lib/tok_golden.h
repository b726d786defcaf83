// Shared by the byte-level BPE tokenizer tests: compare lumen with llama.cpp golden files
// (tools/gen_golden_bpe_tokens.py: hex input, add_bos, special, ids, hex detokenized) on ids,
// whole-sequence detokenization, piece round trips and the streaming detokenizer.
#ifndef LM_TOK_GOLDEN_H
#define LM_TOK_GOLDEN_H

#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <time.h>

#include "lm_test.h"
#include "lm_test_file.h"
#include "tokenizer/tokenizer.h"

static inline double tg_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline int tg_hexnib(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return 0;
}

static inline char *tg_unhex(const char *s, size_t *len) {
    size_t n = strlen(s);
    char *b = malloc(n / 2 + 1);
    for (size_t i = 0; i + 1 < n; i += 2) b[i / 2] = (char)(tg_hexnib(s[i]) * 16 + tg_hexnib(s[i + 1]));
    *len = n / 2;
    b[*len] = 0;
    return b;
}

static inline bool tg_file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

static inline void tg_show(const char *s, size_t n) {
    fputc('"', stderr);
    for (size_t i = 0; i < n && i < 80; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') fputc(c, stderr);
        else fprintf(stderr, "\\x%02x", c);
    }
    fprintf(stderr, n > 80 ? "\"...(%zu bytes)" : "\"", n);
}

static inline void tg_show_ids(const char *label, const int32_t *ids, size_t n) {
    fprintf(stderr, "    %s (%zu):", label, n);
    for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

static inline bool tg_valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!k || i + k > n) return false;
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)s[i + j] & 0xC0) != 0x80) return false;
        if (k == 3 && c == 0xE0 && (unsigned char)s[i + 1] < 0xA0) return false; // overlong
        if (k == 3 && c == 0xED && (unsigned char)s[i + 1] >= 0xA0) return false; // surrogate
        if (k == 4 && c == 0xF0 && (unsigned char)s[i + 1] < 0x90) return false;
        if (k == 4 && c == 0xF4 && (unsigned char)s[i + 1] >= 0x90) return false;
        i += k;
    }
    return true;
}

// Whether every byte of s has a token for its GPT-2 character (else llama.cpp drops the
// byte, e.g. falcon has no "\x0b", so the text cannot come back).
static inline bool tg_bytes_covered(const struct lm_tokenizer *t, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned b = (unsigned char)s[i];
        unsigned c = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE ? b
                     : b <= 0x20                                                    ? 0x100 + b
                     : b == 0xAD                                                    ? 0x143
                                                                                    : 0x100 + 33 + (b - 0x7F);
        char u[2];
        size_t k = 1;
        if (c < 0x80) u[0] = (char)c;
        else {
            u[0] = (char)(0xC0 | (c >> 6));
            u[1] = (char)(0x80 | (c & 0x3F));
            k = 2;
        }
        if (lm_tokenizer_find(t, u, k) < 0) return false;
    }
    return true;
}

struct tg_result {
    int total, matched, detok_ok, rt_total, rt_ok, stream_total, stream_ok;
};

// Checks every case of a golden file (at least min_cases); prints a summary line tagged with
// name. pieces: also the piece round trips and the streaming detokenizer (byte-level BPE and
// SentencePiece BPE; not WordPiece or Unigram, whose normalisers lower-case, strip accents and
// drop spaces, so their pieces do not give the input back).
static inline struct tg_result tg_check_golden_ex(const struct lm_tokenizer *t, const char *rel, const char *name,
                                                  bool pieces, int min_cases) {
    struct tg_result r = {0};
    size_t flen;
    char *file = lm_test_read_file(lm_test_path(rel), &flen);
    CHECKF(file != NULL, "missing %s (run its tools/gen_golden_*_tokens.py)", rel);
    if (!file) return r;
    int shown = 0;
    int32_t *exp = malloc(sizeof(int32_t) * 100000);
    size_t piece_cap = lm_tokenizer_max_piece(t) + 8;
    char *pbuf = malloc(piece_cap);
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
        if (nf != 5) {
            CHECKF(0, "%s: malformed golden line %d", rel, r.total + 1);
            continue;
        }
        size_t in_len, dt_len;
        char *in = tg_unhex(f[0], &in_len);
        char *dt = tg_unhex(f[4], &dt_len);
        bool add_bos = f[1][0] == '1', special = f[2][0] == '1';
        size_t n_exp = 0;
        for (char *p = f[3]; *p && n_exp < 100000;) {
            exp[n_exp++] = (int32_t)strtol(p, &p, 10);
            while (*p == ' ') p++;
        }
        int32_t *got = NULL;
        size_t n_got = 0;
        enum lm_status st = lm_tokenize(t, in, in_len, add_bos, special, &got, &n_got);
        r.total++;
        if (st == LM_OK && n_got == n_exp && memcmp(got, exp, n_exp * sizeof *exp) == 0) {
            r.matched++;
        } else if (shown++ < 8) {
            fprintf(stderr, "  %s: mismatch line %d add_bos=%d special=%d status=%s (%s) input=", name, r.total,
                    add_bos, special, lm_status_name(st), st == LM_OK ? "" : lm_error_msg());
            tg_show(in, in_len);
            fputc('\n', stderr);
            tg_show_ids("llama.cpp", exp, n_exp);
            tg_show_ids("lumen    ", got, n_got);
        }
        char *text = NULL;
        size_t n_text = 0;
        if (lm_tokenizer_detokenize(t, exp, n_exp, false, false, &text, &n_text) == LM_OK && n_text == dt_len &&
            memcmp(text, dt, dt_len) == 0)
            r.detok_ok++;
        else if (shown++ < 8) {
            fprintf(stderr, "  %s: detokenize mismatch line %d: want ", name, r.total);
            tg_show(dt, dt_len);
            fprintf(stderr, " got ");
            tg_show(text ? text : "", n_text);
            fputc('\n', stderr);
        }
        free(text);
        if (pieces && st == LM_OK && !add_bos && tg_valid_utf8(in, in_len) && tg_bytes_covered(t, in, in_len)) {
            // pieces (special tokens rendered when they were parsed) give back the input
            r.rt_total++;
            char *acc = malloc(in_len + piece_cap * 2 + 1);
            size_t n_acc = 0;
            bool fits = true;
            for (size_t i = 0; i < n_got && fits; i++) {
                size_t k = lm_token_to_piece(t, got[i], pbuf, piece_cap, special);
                if (n_acc + k > in_len + piece_cap) fits = false;
                else {
                    memcpy(acc + n_acc, pbuf, k);
                    n_acc += k;
                }
            }
            if (fits && n_acc == in_len && memcmp(acc, in, in_len) == 0) r.rt_ok++;
            else if (shown++ < 8) {
                fprintf(stderr, "  %s: piece round trip failed line %d: ", name, r.total);
                tg_show(in, in_len);
                fputc('\n', stderr);
            }
            // streaming: every chunk ends on a character boundary, the sum is the input
            if (!special) {
                r.stream_total++;
                struct lm_detok d;
                lm_detok_init(&d, false);
                size_t cap = lm_tokenizer_max_piece(t) + 4, k;
                char *buf = malloc(cap);
                bool ok = true;
                n_acc = 0;
                for (size_t i = 0; i < n_got && ok; i++) {
                    if (lm_detok_push(t, &d, got[i], buf, cap, &k) != LM_OK || !tg_valid_utf8(buf, k) ||
                        n_acc + k > in_len) {
                        ok = false;
                        break;
                    }
                    memcpy(acc + n_acc, buf, k);
                    n_acc += k;
                }
                if (ok) n_acc += lm_detok_flush(&d, acc + n_acc, 4);
                if (ok && n_acc == in_len && memcmp(acc, in, in_len) == 0) r.stream_ok++;
                else if (shown++ < 8) {
                    fprintf(stderr, "  %s: streaming detokenize failed line %d: ", name, r.total);
                    tg_show(in, in_len);
                    fputc('\n', stderr);
                }
                free(buf);
            }
            free(acc);
        }
        free(got);
        free(in);
        free(dt);
    }
    printf("%s: golden ids %d / %d identical; detokenize %d / %d; piece round trip %d / %d; streaming %d / %d\n",
           name, r.matched, r.total, r.detok_ok, r.total, r.rt_ok, r.rt_total, r.stream_ok, r.stream_total);
    CHECKF(r.total >= min_cases, "%s: only %d cases", name, r.total);
    CHECKF(r.matched == r.total, "%s: %d of %d golden cases differ", name, r.total - r.matched, r.total);
    CHECKF(r.detok_ok == r.total, "%s: %d of %d detokenizations differ", name, r.total - r.detok_ok, r.total);
    CHECKF(r.rt_ok == r.rt_total, "%s: %d of %d round trips differ", name, r.rt_total - r.rt_ok, r.rt_total);
    CHECKF(r.stream_ok == r.stream_total, "%s: %d of %d streams differ", name, r.stream_total - r.stream_ok,
           r.stream_total);
    free(pbuf);
    free(exp);
    free(file);
    return r;
}

static inline struct tg_result tg_check_golden(const struct lm_tokenizer *t, const char *rel, const char *name) {
    return tg_check_golden_ex(t, rel, name, true, 800);
}

// Encode throughput on a mixed paragraph (prose, code, CJK, emoji, digits).
static inline void tg_bench(const struct lm_tokenizer *t, const char *name) {
    const char *para = "Large language models are trained on vast amounts of text. They predict the next "
                       "token given the previous ones. Über-naïve façades, 日本語, 한국어, emoji 😀👍🏽, "
                       "and 1234567 numbers.\n    def f(x): return x ** 2  # don't\n";
    size_t pl = strlen(para), reps = 1000, n = pl * reps;
    char *big = malloc(n + 1);
    for (size_t i = 0; i < reps; i++) memcpy(big + i * pl, para, pl);
    big[n] = 0;
    int32_t *ids;
    size_t n_ids;
    double t0 = tg_now_ms();
    CHECK(lm_tokenize(t, big, n, true, false, &ids, &n_ids) == LM_OK);
    double ms = tg_now_ms() - t0;
    printf("%s: encode %zu bytes -> %zu tokens in %.1f ms (%.2f MB/s, %.0f tokens/s)\n", name, n, n_ids, ms,
           n / ms / 1e3, n_ids / ms * 1e3);
    free(ids);
    free(big);
}

#endif
