// Golden-logits files from llama.cpp (tools/gen_golden_logits.py, tools/gen_golden_arch.py):
// parser, and the per-position comparison of lumen's logits against them (top-1 with
// near-tie allowance, top-5 overlap, max |d| over the golden top-20 pairs). Test-only,
// header-only (static functions); include after lm_test.h.
#ifndef LM_GOLDEN_CMP_H
#define LM_GOLDEN_CMP_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_test_file.h"
#include "lumen.h"

#define LM_GOLDEN_NEAR_TIE 0.1 // top-1/top-2 gap (llama.cpp) below which order may differ
#define LM_GOLDEN_MIN_TOP5_OVERLAP 4

// =====================================================================  file format

struct golden_prompt {
    char name[64];
    int special;
    char *text;       // UTF-8, NUL-terminated ("" when ids are fed directly)
    size_t text_len;
    int n_tokens;
    int32_t *tokens;  // [n_tokens]
    int32_t *top_id;  // [n_tokens][n_top]
    float *top_val;   // [n_tokens][n_top]
    int n_greedy;
    int32_t *greedy_id;  // [n_greedy]
    float *greedy_gap;   // [n_greedy] llama.cpp top1 - top2 logit
};

struct golden {
    int n_prompts, n_top, n_greedy;
    char model_file[128]; // optional "model <file> <sha256>" line
    char model_sha[72];
    struct golden_prompt *p;
};

static inline int golden_hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static inline void golden_free(struct golden *g) {
    for (int i = 0; g->p && i < g->n_prompts; i++) {
        struct golden_prompt *p = &g->p[i];
        free(p->text); free(p->tokens); free(p->top_id); free(p->top_val);
        free(p->greedy_id); free(p->greedy_gap);
    }
    free(g->p);
    g->p = NULL;
    g->n_prompts = 0;
}

#define GOLDEN_PARSE_FAIL(...)                                            \
    do {                                                                  \
        fprintf(stderr, "golden: %s:%d: ", path, lineno);                 \
        fprintf(stderr, __VA_ARGS__);                                     \
        fputc('\n', stderr);                                              \
        free(buf);                                                        \
        golden_free(g);                                                   \
        return 0;                                                         \
    } while (0)

// Parses the whole file; returns 1 on success. Lines are split in place.
static inline int golden_load(struct golden *g, const char *path) {
    memset(g, 0, sizeof *g);
    size_t len;
    char *buf = lm_test_read_file(path, &len);
    int lineno = 0;
    if (!buf) GOLDEN_PARSE_FAIL("cannot read");
    struct golden_prompt *cur = NULL;
    int n_pos_seen = 0, idx = 0;
    char *line = buf;
    while (line && *line) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        lineno++;
        char *s = line;
        line = nl ? nl + 1 : NULL;
        if (*s == '#' || *s == 0) continue;
        char *rest;
        if (!strncmp(s, "model ", 6)) {
            if (sscanf(s + 6, "%127s %71s", g->model_file, g->model_sha) != 2)
                GOLDEN_PARSE_FAIL("bad model line");
        } else if (!strncmp(s, "n_prompts ", 10)) {
            g->n_prompts = atoi(s + 10);
            if (g->n_prompts <= 0 || g->n_prompts > 1000) GOLDEN_PARSE_FAIL("bad n_prompts");
            g->p = calloc((size_t)g->n_prompts, sizeof *g->p);
        } else if (!strncmp(s, "n_top ", 6)) {
            g->n_top = atoi(s + 6);
            if (g->n_top < 5 || g->n_top > 1000) GOLDEN_PARSE_FAIL("bad n_top");
        } else if (!strncmp(s, "n_greedy ", 9)) {
            g->n_greedy = atoi(s + 9);
            if (g->n_greedy < 0 || g->n_greedy > 100000) GOLDEN_PARSE_FAIL("bad n_greedy");
        } else if (!strncmp(s, "prompt ", 7)) {
            if (!g->p || !g->n_top) GOLDEN_PARSE_FAIL("prompt before header");
            int n_tok = 0;
            char name[64] = {0};
            if (sscanf(s + 7, "%d %d %63s", &idx, &n_tok, name) != 3)
                GOLDEN_PARSE_FAIL("bad prompt line");
            if (idx < 0 || idx >= g->n_prompts || n_tok <= 0 || n_tok > 1000000 || g->p[idx].tokens)
                GOLDEN_PARSE_FAIL("prompt index/count out of range or repeated");
            cur = &g->p[idx];
            snprintf(cur->name, sizeof cur->name, "%s", name);
            cur->n_tokens = n_tok;
            cur->tokens = calloc((size_t)n_tok, sizeof(int32_t));
            cur->top_id = calloc((size_t)n_tok * (size_t)g->n_top, sizeof(int32_t));
            cur->top_val = calloc((size_t)n_tok * (size_t)g->n_top, sizeof(float));
            cur->greedy_id = calloc((size_t)g->n_greedy + 1, sizeof(int32_t));
            cur->greedy_gap = calloc((size_t)g->n_greedy + 1, sizeof(float));
            n_pos_seen = 0;
        } else if (!cur) {
            GOLDEN_PARSE_FAIL("unexpected line before 'prompt'");
        } else if (!strncmp(s, "special ", 8)) {
            cur->special = atoi(s + 8);
        } else if (!strncmp(s, "text", 4) && (s[4] == ' ' || s[4] == 0)) {
            const char *h = s[4] ? s + 5 : s + 4;
            size_t hl = strlen(h);
            if (hl % 2) GOLDEN_PARSE_FAIL("odd hex length");
            free(cur->text);
            cur->text = malloc(hl / 2 + 1);
            for (size_t i = 0; i < hl / 2; i++) {
                int hi = golden_hexval(h[2 * i]), lo = golden_hexval(h[2 * i + 1]);
                if (hi < 0 || lo < 0) GOLDEN_PARSE_FAIL("bad hex");
                cur->text[i] = (char)(hi * 16 + lo);
            }
            cur->text[hl / 2] = 0;
            cur->text_len = hl / 2;
        } else if (!strncmp(s, "tokens ", 7)) {
            rest = s + 7;
            for (int i = 0; i < cur->n_tokens; i++) {
                char *e;
                long v = strtol(rest, &e, 10);
                if (e == rest) GOLDEN_PARSE_FAIL("too few tokens");
                cur->tokens[i] = (int32_t)v;
                rest = e;
            }
        } else if (!strncmp(s, "pos ", 4)) {
            char *e;
            long p = strtol(s + 4, &e, 10);
            if (p != n_pos_seen || p >= cur->n_tokens) GOLDEN_PARSE_FAIL("pos %ld out of order", p);
            rest = e;
            for (int k = 0; k < g->n_top; k++) {
                long id = strtol(rest, &e, 10);
                if (e == rest || *e != ':') GOLDEN_PARSE_FAIL("bad pair %d at pos %ld", k, p);
                rest = e + 1;
                float v = strtof(rest, &e);
                if (e == rest) GOLDEN_PARSE_FAIL("bad value %d at pos %ld", k, p);
                rest = e;
                cur->top_id[(size_t)p * g->n_top + k] = (int32_t)id;
                cur->top_val[(size_t)p * g->n_top + k] = v;
            }
            n_pos_seen++;
        } else if (!strncmp(s, "greedy", 6)) {
            rest = s + 6;
            for (int k = 0; k < g->n_greedy; k++) {
                char *e;
                long id = strtol(rest, &e, 10);
                if (e == rest || *e != ':') GOLDEN_PARSE_FAIL("bad greedy item %d", k);
                rest = e + 1;
                float v = strtof(rest, &e);
                if (e == rest) GOLDEN_PARSE_FAIL("bad greedy gap %d", k);
                rest = e;
                cur->greedy_id[k] = (int32_t)id;
                cur->greedy_gap[k] = v;
            }
            cur->n_greedy = g->n_greedy;
        } else if (!strcmp(s, "end")) {
            if (n_pos_seen != cur->n_tokens || !cur->text)
                GOLDEN_PARSE_FAIL("prompt %d incomplete (%d/%d positions)", idx, n_pos_seen,
                                  cur->n_tokens);
            cur = NULL;
        } else {
            GOLDEN_PARSE_FAIL("unknown line '%.20s'", s);
        }
    }
    free(buf);
    if (!g->p) { fprintf(stderr, "golden: %s: no prompts\n", path); return 0; }
    for (int i = 0; i < g->n_prompts; i++)
        if (!g->p[i].tokens || !g->p[i].text || g->p[i].n_greedy != g->n_greedy) {
            fprintf(stderr, "golden: %s: prompt %d missing or incomplete\n", path, i);
            golden_free(g);
            return 0;
        }
    return 1;
}
#undef GOLDEN_PARSE_FAIL

// =====================================================================  helpers

// Indices of the k largest logits, by value desc then id asc (same order as the golden file).
static inline void golden_top_k(const float *x, int n, int k, int32_t *out) {
    for (int j = 0; j < k; j++) out[j] = -1;
    for (int i = 0; i < n; i++) {
        float v = x[i];
        if (out[k - 1] >= 0 && !(v > x[out[k - 1]])) continue;
        int j = k - 1;
        while (j > 0 && (out[j - 1] < 0 || v > x[out[j - 1]])) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = i;
    }
}

static inline int golden_argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

// Decodes toks[0..n) at positions 0.. of seq 0 in chunks of n_batch. If all_logits, calls
// fn(ud, pos, logits) for every position; otherwise only the last entry has logits.
typedef void (*golden_logits_fn)(void *ud, int pos, const float *logits);
static inline int golden_decode(struct lm_context *c, const int32_t *toks, int n, int n_batch,
                         int all_logits, golden_logits_fn fn, void *ud) {
    struct lm_batch_entry *e = malloc(sizeof *e * (size_t)n_batch);
    for (int p0 = 0; p0 < n; p0 += n_batch) {
        int m = n - p0 < n_batch ? n - p0 : n_batch;
        for (int i = 0; i < m; i++) {
            e[i].token = toks[p0 + i];
            e[i].pos = p0 + i;
            e[i].seq = 0;
            e[i].want_logits = all_logits || p0 + i == n - 1;
        }
        enum lm_status st = lm_decode(c, e, m);
        CHECKF(st == LM_OK, "lm_decode(%d entries at pos %d): %s: %s", m, p0,
               lm_status_name(st), lm_error_msg());
        if (st != LM_OK) { free(e); return 0; }
        if (all_logits && fn) {
            for (int i = 0; i < m; i++) {
                const float *l = lm_get_logits(c, i);
                CHECKF(l != NULL, "lm_get_logits(%d) after chunk at %d", i, p0);
                if (!l) { free(e); return 0; }
                fn(ud, p0 + i, l);
            }
        }
    }
    free(e);
    return 1;
}

// =====================================================================  per-position comparison

struct golden_cmp {
    const struct golden *g;
    const struct golden_prompt *gp;
    const char *tag;  // prefix of the messages
    int n_vocab;
    int n_pos, top1_agree, top1_bad_disagree, top5_bad;
    double max_abs, sum_abs;
    long n_abs;
    int max_abs_pos, max_abs_id;
};

// golden_logits_fn: compares one position's logits with the golden top-20.
static inline void golden_compare_position(void *ud, int pos, const float *logits) {
    struct golden_cmp *s = ud;
    const int nt = s->g->n_top;
    const int32_t *gid = s->gp->top_id + (size_t)pos * nt;
    const float *gval = s->gp->top_val + (size_t)pos * nt;
    int32_t mine[5];
    golden_top_k(logits, s->n_vocab, 5, mine);
    s->n_pos++;
    if (mine[0] == gid[0]) {
        s->top1_agree++;
    } else {
        float gap = gval[0] - gval[1];
        fprintf(stderr, "  [%s %s] pos %d: top-1 %d (%.4f) vs llama.cpp %d (%.4f), llama.cpp gap "
                "%.4f%s\n", s->tag, s->gp->name, pos, mine[0], logits[mine[0]], gid[0], gval[0],
                gap, gap < LM_GOLDEN_NEAR_TIE ? " (near-tie, allowed)" : "");
        if (!(gap < LM_GOLDEN_NEAR_TIE)) s->top1_bad_disagree++;
    }
    int overlap = 0;
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 5; b++)
            if (mine[a] == gid[b]) overlap++;
    if (overlap < LM_GOLDEN_MIN_TOP5_OVERLAP) {
        s->top5_bad++;
        fprintf(stderr, "  [%s %s] pos %d: top-5 overlap %d: lumen %d %d %d %d %d vs llama.cpp "
                "%d %d %d %d %d\n", s->tag, s->gp->name, pos, overlap, mine[0], mine[1], mine[2],
                mine[3], mine[4], gid[0], gid[1], gid[2], gid[3], gid[4]);
    }
    static int verbose = -1;
    if (verbose < 0) verbose = getenv("LUMEN_GOLDEN_VERBOSE") != NULL;
    double pos_max = 0;
    for (int k = 0; k < nt; k++) {
        if (gid[k] < 0 || gid[k] >= s->n_vocab) continue;
        double d = fabs((double)logits[gid[k]] - (double)gval[k]);
        if (d > pos_max) pos_max = d;
        if (!(d <= s->max_abs)) { // also catches NaN
            s->max_abs = isnan(d) ? INFINITY : d;
            s->max_abs_pos = pos;
            s->max_abs_id = gid[k];
        }
        s->sum_abs += d;
        s->n_abs++;
    }
    if (verbose)
        printf("    [%s %s] pos %d: max|d| over the golden top-%d %.6f (top-1 %d %.5f vs %.5f)\n",
               s->tag, s->gp->name, pos, nt, pos_max, gid[0], logits[gid[0]], gval[0]);
}

#endif
