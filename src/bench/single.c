// Single-stream tests: pp, tg, ttft, tokenizer and sampler throughput (single.h).
#include "single.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prompt.h"
#include "stats.h"

const char *lm_bench_test_kind_name(enum lm_bench_test_kind k) {
    static const char *const names[] = {"pp", "tg", "ttft", "tokenize", "sample"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

// ================================================================ one run of each test

// At a depth, each run rolls the sequence back to the depth's positions (kept from the fill),
// as llama-bench restores its saved state.
static enum lm_status run_pp(const struct lm_bench_test_setup *s, int n, uint64_t *ns) {
    lm_kv_cache_seq_rm(s->c, 0, s->depth, -1);
    const uint64_t t0 = lm_time_ns();
    enum lm_status st = lm_bench_prefill_at(s->c, s->ids, s->depth, n, s->batch);
    *ns = lm_time_ns() - t0;
    return st;
}

static enum lm_status run_tg(const struct lm_bench_test_setup *s, int n, uint64_t *ns) {
    lm_kv_cache_seq_rm(s->c, 0, s->depth, -1);
    enum lm_status st = LM_OK;
    if (s->depth == 0 && (st = lm_bench_prefill(s->c, s->ids, LM_BENCH_TG_PROMPT, s->batch)) != LM_OK)
        return st;
    const int32_t start = s->depth > 0 ? s->depth : LM_BENCH_TG_PROMPT;
    const uint64_t t0 = lm_time_ns();
    for (int i = 0; i < n; i++) {
        const int32_t pos = start + i;
        struct lm_batch_entry e = {.token = s->ids[pos], .pos = pos, .seq = 0, .want_logits = true};
        if ((st = lm_decode(s->c, &e, 1)) != LM_OK) return st;
    }
    *ns = lm_time_ns() - t0;
    return LM_OK;
}

static enum lm_status run_ttft(const struct lm_bench_test_setup *s, int n, uint64_t *ns) {
    lm_kv_cache_seq_rm(s->c, 0, 0, -1);
    const uint64_t t0 = lm_time_ns();
    enum lm_status st = lm_bench_prefill(s->c, s->ids, n, s->batch);
    if (st != LM_OK) return st;
    volatile int32_t id = lm_sampler_sample(s->smp, lm_get_logits(s->c, 0));
    (void)id;
    *ns = lm_time_ns() - t0;
    return LM_OK;
}

// ================================================================ repetitions

static void live(const struct lm_bench_test_setup *s, const char *label, int done, int total) {
    if (s->live && !s->progress) s->live(s->live_user, label, done, total);
}

enum lm_status lm_bench_run_test(const struct lm_bench_test_setup *s,
                                 enum lm_bench_test_kind kind, int n, int threads,
                                 struct lm_bench_test *t) {
    enum lm_status (*run)(const struct lm_bench_test_setup *, int, uint64_t *) =
        kind == LM_BENCH_PP ? run_pp : kind == LM_BENCH_TG ? run_tg : run_ttft;
    if (kind != LM_BENCH_TTFT && s->depth > 0)
        snprintf(t->name, sizeof t->name, "%s%d @ d%d", lm_bench_test_kind_name(kind), n, s->depth);
    else snprintf(t->name, sizeof t->name, "%s%d", lm_bench_test_kind_name(kind), n);
    t->kind = kind;
    t->depth = kind != LM_BENCH_TTFT ? s->depth : 0;
    t->threads = threads;
    if (kind == LM_BENCH_TG) t->n_gen = n;
    else t->n_prompt = n;
    t->units = (double)n;
    char label[64];
    snprintf(label, sizeof label, "lumen bench: %s t=%d", t->name, t->threads);
    const int total = s->warmup + s->reps;
    live(s, label, 0, total);
    uint64_t ns;
    enum lm_status st = LM_OK;
    for (int w = 0; w < s->warmup && st == LM_OK; w++) {
        st = run(s, n, &ns);
        if (st == LM_OK) live(s, label, w + 1, total);
    }
    t->reps = s->reps;
    if (st == LM_OK && !(t->ns = calloc((size_t)s->reps, sizeof *t->ns)))
        st = lm_error_set(LM_ERR_NOMEM, "bench: out of memory");
    for (int i = 0; i < s->reps && st == LM_OK; i++) {
        if ((st = run(s, n, &ns)) != LM_OK) break;
        live(s, label, s->warmup + i + 1, total);
        t->ns[i] = (double)ns;
        if (s->progress && s->log)
            fprintf(s->log, "lumen bench: %s t=%d rep %d/%d: %.2f ms (%.2f t/s)\n", t->name,
                    t->threads, i + 1, s->reps, (double)ns / 1e6, t->units / ((double)ns * 1e-9));
    }
    live(s, label, -1, total);
    return st;
}

enum lm_status lm_bench_fill_depth(const struct lm_bench_test_setup *s, int depth) {
    lm_kv_cache_seq_rm(s->c, 0, 0, -1);
    if (depth == 0) return LM_OK;
    char label[64];
    snprintf(label, sizeof label, "lumen bench: fill depth %d", depth);
    live(s, label, 0, 1);
    const uint64_t t0 = lm_time_ns();
    const enum lm_status st = lm_bench_prefill(s->c, s->ids, depth, s->batch);
    live(s, label, -1, 1);
    if (st == LM_OK && s->progress && s->log)
        fprintf(s->log, "lumen bench: filled depth %d in %.1f s (untimed)\n", depth,
                (double)(lm_time_ns() - t0) / 1e9);
    return st;
}

enum lm_status lm_bench_run_tokenize(const struct lm_bench_test_setup *s,
                                     const struct lm_model *m, struct lm_bench_test *t) {
    snprintf(t->name, sizeof t->name, "tokenize");
    t->kind = LM_BENCH_TOKENIZE;
    t->threads = 1;
    const size_t tl = strlen(lm_bench_text), copies = LM_BENCH_TOK_TEXT_BYTES / tl + 1;
    char *text = malloc(copies * tl + 1);
    if (!text) return lm_error_set(LM_ERR_NOMEM, "bench: out of memory");
    for (size_t i = 0; i < copies; i++) memcpy(text + i * tl, lm_bench_text, tl);
    const size_t len = copies * tl;
    text[len] = 0;
    t->ns = calloc((size_t)s->reps, sizeof *t->ns);
    if (!t->ns) { free(text); return lm_error_set(LM_ERR_NOMEM, "bench: out of memory"); }
    t->reps = s->reps;
    t->bytes = (double)len;
    for (int i = -s->warmup; i < s->reps; i++) {
        int32_t *ids = NULL;
        size_t n_ids = 0;
        const uint64_t t0 = lm_time_ns();
        enum lm_status st = lm_tokenize(lm_model_tokenizer(m), text, len, true, false, &ids, &n_ids);
        const uint64_t dt = lm_time_ns() - t0;
        free(ids);
        if (st != LM_OK) { free(text); return st; }
        t->units = (double)n_ids;
        if (i >= 0) t->ns[i] = (double)dt;
    }
    free(text);
    return LM_OK;
}

enum lm_status lm_bench_run_sample(const struct lm_bench_test_setup *s, int32_t n_vocab,
                                   struct lm_bench_test *t) {
    snprintf(t->name, sizeof t->name, "sample");
    t->kind = LM_BENCH_SAMPLE;
    t->threads = 1;
    const float *lg = lm_get_logits(s->c, 0);
    if (!lg) return lm_error_set(LM_ERR_STATE, "bench: no logits to sample from");
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    t->ns = calloc((size_t)s->reps, sizeof *t->ns);
    if (!logits || !t->ns) { free(logits); return lm_error_set(LM_ERR_NOMEM, "bench: out of memory"); }
    memcpy(logits, lg, (size_t)n_vocab * sizeof *logits);
    t->reps = s->reps;
    t->units = LM_BENCH_SAMPLES_PER_REP;
    for (int i = -s->warmup; i < s->reps; i++) {
        const uint64_t t0 = lm_time_ns();
        for (int k = 0; k < LM_BENCH_SAMPLES_PER_REP; k++)
            lm_sampler_accept(s->smp, lm_sampler_sample(s->smp, logits));
        const uint64_t dt = lm_time_ns() - t0;
        if (i >= 0) t->ns[i] = (double)dt;
    }
    free(logits);
    return LM_OK;
}

// ================================================================ statistics

void lm_bench_test_finish(struct lm_bench_test *t, const struct lm_bench_model_info *mi,
                          const struct lm_bench_bw *bw, int n_bw) {
    double ts[1024]; // tok/s of each repetition (reps <= 1000)
    const int n = t->reps < 1024 ? t->reps : 1024;
    for (int i = 0; i < n; i++) ts[i] = t->ns[i] > 0 ? t->units / (t->ns[i] * 1e-9) : 0.0;
    lm_bench_mean_sd(ts, n, &t->avg_ts, &t->sd_ts);
    lm_bench_mean_sd(t->ns, n, &t->avg_ns, &t->sd_ns);
    t->med_ts = lm_bench_median(ts, n);
    t->med_ns = lm_bench_median(t->ns, n);
    lm_bench_min_max(ts, n, &t->min_ts, &t->max_ts);
    t->gbps = t->roof = NAN;
    if (t->kind == LM_BENCH_TG) {
        // steps attend to start+1 .. start+n_gen positions (the new one included)
        const int start = t->depth > 0 ? t->depth : LM_BENCH_TG_PROMPT;
        double kv = 0;
        for (int i = 0; i < t->n_gen; i++) kv += (double)lm_bench_kv_bytes(mi, start + i + 1);
        t->kv_bytes = t->n_gen > 0 ? kv / t->n_gen : 0;
        t->gbps = ((double)mi->bytes_per_token + t->kv_bytes) * t->med_ts / 1e9;
        const double b = lm_bench_bw_for(bw, n_bw, t->threads);
        if (b > 0) t->roof = t->gbps / b;
    }
}
