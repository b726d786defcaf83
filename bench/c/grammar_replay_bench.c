// Helper of bench/structured.py (not a ctest): for one tokenizer, JSON schemas compiled (schema ->
// GBNF -> lm_grammar_compile) and documents replayed token by token through the mask, printing
// every timing as a line for the script to aggregate. Args: GGUF MANIFEST [rounds] [compiles]
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/timer.h"
#include "format/gguf.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

// MANIFEST: one schema a line, "NAME<TAB>SCHEMA_FILE<TAB>DOCS_FILE"; DOCS_FILE holds one JSON
// document a line (the text the model would write). Output lines (times in ns):
//   first NAME CONV COMPILE            the first compile for this tokenizer (builds the trie)
//                                      exit status 3 when a schema or document failed
//   compile NAME CONV COMPILE          a later compile of the same schema (the grammar dropped)
//   mask NAME MODE WALL CPU            one fill_mask; MODE warm (one grammar) or cold (a new
//                                      grammar per document, compiled outside the timing)
//   doc NAME TOKENS FORCED STEPS       a replay's jump-forward account: tokens of the document
//                                      that were the forced run at their position, and the
//                                      steps left (tokens - forced + 1 for the end)
//   fail NAME what                     a schema refused or a document outside the grammar

static uint64_t cpu_ns(void) { // this thread's CPU time: preemption on a busy machine excluded
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 12, len = 0;
    char *buf = malloc(cap + 1);
    for (size_t r; buf && (r = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += r;
        if (len == cap) {
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb, cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[len] = 0, *n = len;
    return buf;
}

// Schema text -> compiled grammar; the two phases' times in conv/comp. NULL (and a fail line)
// when refused.
static struct lm_grammar *compile(const struct lm_tokenizer *t, const char *name, const char *schema,
                                  size_t len, uint64_t *conv, uint64_t *comp) {
    char *gbnf = NULL;
    size_t n = 0;
    uint64_t t0 = lm_now_ns();
    if (lm_json_schema_to_gbnf(schema, len, &gbnf, &n) != LM_OK) {
        printf("fail %s schema: %s\n", name, lm_error_msg());
        return NULL;
    }
    uint64_t t1 = lm_now_ns();
    struct lm_grammar *g = NULL;
    enum lm_status st = lm_grammar_compile(&g, t, gbnf, n, NULL);
    uint64_t t2 = lm_now_ns();
    free(gbnf);
    if (st != LM_OK) {
        printf("fail %s compile: %s\n", name, lm_error_msg());
        return NULL;
    }
    *conv = t1 - t0, *comp = t2 - t1;
    return g;
}

// Replays one document: a mask before every token and before the end, each timed. Returns false
// (and a fail line) when a token or the end is not allowed.
static bool replay(const struct lm_tokenizer *t, struct lm_grammar *g, const char *name, const char *mode,
                   const char *doc, size_t len, uint32_t *bits, bool count_forced) {
    int32_t *ids = NULL, forced[64];
    size_t n = 0;
    if (lm_tokenize(t, doc, len, false, false, &ids, &n) != LM_OK) {
        printf("fail %s tokenize: %s\n", name, lm_error_msg());
        return false;
    }
    struct lm_grammar_matcher *m = NULL;
    if (lm_grammar_matcher_init(&m, g) != LM_OK) {
        printf("fail %s matcher: %s\n", name, lm_error_msg());
        free(ids);
        return false;
    }
    bool ok = true;
    size_t n_forced = 0, run_left = 0; // tokens still covered by the forced run seen last
    for (size_t i = 0; i <= n && ok; i++) {
        if (count_forced && run_left == 0 && i < n) { // the engine drafts the forced run here
            int32_t k = lm_grammar_matcher_forced(m, forced, 64), j = 0;
            while (j < k && i + (size_t)j < n && forced[j] == ids[i + (size_t)j]) j++;
            run_left = (size_t)j, n_forced += (size_t)j;
        }
        uint64_t c0 = cpu_ns(), w0 = lm_now_ns();
        lm_grammar_matcher_fill_mask(m, bits);
        uint64_t w = lm_now_ns() - w0, c = cpu_ns() - c0;
        printf("mask %s %s %llu %llu\n", name, mode, (unsigned long long)w, (unsigned long long)c);
        const int32_t want = i < n ? ids[i] : lm_tokenizer_eos(t);
        if (!((bits[want >> 5] >> (want & 31)) & 1)) {
            printf("fail %s %s at token %zu of %zu (id %d) not in the mask\n", name, i < n ? "token" : "end", i, n, want);
            ok = false;
        } else if (i < n && !lm_grammar_matcher_accept(m, ids[i])) {
            printf("fail %s token %zu of %zu (id %d) refused: %s\n", name, i, n, ids[i], lm_error_msg());
            ok = false;
        }
        if (run_left) run_left--;
    }
    if (ok && count_forced) printf("doc %s %zu %zu %zu\n", name, n, n_forced, n - n_forced + 1);
    lm_grammar_matcher_free(m);
    free(ids);
    return ok;
}

struct entry {
    char name[128];
    char *schema;
    size_t n_schema;
    char *docs; // lines
    size_t n_docs_text;
};

// Each document line of e calls replay (lines are cut in place, restored after).
static int replay_docs(const struct lm_tokenizer *t, struct lm_grammar *g, const struct entry *e, const char *mode,
                       uint32_t *bits, bool count_forced, int cold) {
    int bad = 0;
    for (char *p = e->docs; *p;) {
        char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len) {
            struct lm_grammar *gd = g;
            uint64_t a, b;
            if (cold && !(gd = compile(t, e->name, e->schema, e->n_schema, &a, &b))) return bad + 1;
            bad += !replay(t, gd, e->name, mode, p, len, bits, count_forced);
            if (cold) lm_grammar_free(gd);
        }
        p += len + (nl != NULL);
    }
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: grammar_replay_bench GGUF MANIFEST [rounds=3] [compiles=5]\n");
        return 2;
    }
    const int rounds = argc > 3 ? atoi(argv[3]) : 3, compiles = argc > 4 ? atoi(argv[4]) : 5;
    struct lm_gguf gg;
    struct lm_tokenizer *t = NULL;
    if (lm_gguf_open(&gg, argv[1]) != LM_OK) {
        fprintf(stderr, "grammar_replay_bench: %s\n", lm_error_msg());
        return 1;
    }
    int rc = 1, bad = 0;
    size_t n_man = 0, n_e = 0;
    char *man = NULL;
    struct entry *es = calloc(1024, sizeof *es);
    struct lm_grammar **warm = calloc(1024, sizeof *warm);
    uint32_t *bits = NULL;
    if (lm_tokenizer_load(&t, &gg) != LM_OK) {
        fprintf(stderr, "grammar_replay_bench: %s\n", lm_error_msg());
        goto done;
    }
    if (!es || !warm || !(bits = malloc(((size_t)lm_tokenizer_n_vocab(t) + 31) / 32 * 4))) goto done;
    if (!(man = slurp(argv[2], &n_man))) {
        fprintf(stderr, "grammar_replay_bench: cannot read %s\n", argv[2]);
        goto done;
    }
    for (char *line = strtok(man, "\n"); line && n_e < 1024; line = strtok(NULL, "\n")) {
        char *f1 = strchr(line, '\t'), *f2 = f1 ? strchr(f1 + 1, '\t') : NULL;
        if (!f2) continue;
        *f1 = *f2 = 0;
        struct entry *e = &es[n_e++];
        snprintf(e->name, sizeof e->name, "%s", line);
        if (!(e->schema = slurp(f1 + 1, &e->n_schema)) || !(e->docs = slurp(f2 + 1, &e->n_docs_text))) {
            fprintf(stderr, "grammar_replay_bench: cannot read %s or %s\n", f1 + 1, f2 + 1);
            goto done;
        }
    }
    printf("vocab %d\n", lm_tokenizer_n_vocab(t));
    bool first = true;
    for (size_t i = 0; i < n_e; i++) { // compile times; the first builds the vocabulary trie
        uint64_t a, b;
        warm[i] = compile(t, es[i].name, es[i].schema, es[i].n_schema, &a, &b);
        if (!warm[i]) { bad++; continue; }
        printf("%s %s %llu %llu\n", first ? "first" : "compile", es[i].name, (unsigned long long)a, (unsigned long long)b);
        first = false;
        for (int k = 1; k < compiles; k++) {
            struct lm_grammar *x = compile(t, es[i].name, es[i].schema, es[i].n_schema, &a, &b);
            if (x) printf("compile %s %llu %llu\n", es[i].name, (unsigned long long)a, (unsigned long long)b);
            lm_grammar_free(x);
        }
    }
    for (int r = 0; r < rounds; r++) // warm: each schema's one grammar, caches kept across rounds
        for (size_t i = 0; i < n_e; i++)
            if (warm[i]) bad += replay_docs(t, warm[i], &es[i], "warm", bits, r == 0, 0);
    for (int r = 0; r < rounds; r++) // cold: a new grammar per document (warm[] keeps the trie alive)
        for (size_t i = 0; i < n_e; i++)
            if (warm[i]) bad += replay_docs(t, NULL, &es[i], "cold", bits, false, 1);
    rc = bad ? 3 : 0;
done:
    for (size_t i = 0; es && i < n_e; i++) {
        lm_grammar_free(warm[i]);
        free(es[i].schema), free(es[i].docs);
    }
    free(warm), free(es), free(bits), free(man);
    lm_tokenizer_free(t);
    lm_gguf_close(&gg);
    return rc;
}
