// One `lumen bench` run (bench.h): the parameters' defaults and checks, then the probe, the
// single-stream tests at each thread count and the breakdown, or the batched runs.
#include "bench.h"

#include <stdlib.h>
#include <string.h>

#include "lumen_prof.h"
#include "prompt.h"

// ================================================================ parameters

struct lm_bench_params lm_bench_params_default(void) {
    struct lm_bench_params p = {.reps = 5, .warmup = 1, .bw_mib = 512,
                                .sampling = lm_sampler_params_default()};
    p.sampling.temperature = -1; // not given: resolve sets the mode's default
    return p;
}

static int list_max(const struct lm_bench_list *l) {
    int m = 0;
    for (int i = 0; i < l->n; i++) m = l->v[i] > m ? l->v[i] : m;
    return m;
}

enum lm_status lm_bench_params_resolve(struct lm_bench_params *p) {
    if (p->threads.n == 0) {
        const int cores = lm_cpu_physical_cores();
        p->threads = (struct lm_bench_list){.v = {cores < LM_PROF_MAX_THREADS ? cores : LM_PROF_MAX_THREADS},
                                            .n = 1};
    }
    const bool parallel = p->parallel.n > 0;
    if (p->prompt.n == 0) p->prompt = (struct lm_bench_list){.v = {parallel ? 64 : 512}, .n = 1};
    if (p->gen.n == 0) p->gen = (struct lm_bench_list){.v = {128}, .n = 1};
    if (p->depth.n == 0) p->depth = (struct lm_bench_list){.v = {0}, .n = 1};
    // the batched runs measure greedy decoding unless a temperature is given (as before the
    // sampling flags); the single-stream tests the default chain
    if (p->sampling.temperature < 0)
        p->sampling.temperature = parallel ? 0.0f : lm_sampler_params_default().temperature;
    if (parallel) { // one prompt and one generation length
        if (p->prompt.n != 1 || p->gen.n != 1 || p->prompt.v[0] < 1 || p->gen.v[0] < 2)
            return lm_error_set(LM_ERR_ARG, "--parallel takes one -p value >= 1 and one -n value >= 2");
        if (p->breakdown || p->ttft)
            return lm_error_set(LM_ERR_ARG, "--parallel does not combine with --breakdown or --ttft");
        if (list_max(&p->depth) > 0) return lm_error_set(LM_ERR_ARG, "--parallel does not combine with -d");
    }
    return lm_bench_parallel_check(&p->popt, parallel, p->parallel.v, p->parallel.n);
}

// The breakdown's prompt and generation: the first -p and -n values, 128 where those are 0.
static int breakdown_prompt(const struct lm_bench_params *p) {
    return p->prompt.v[0] > 0 ? p->prompt.v[0] : 128;
}
static int breakdown_gen(const struct lm_bench_params *p) { return p->gen.v[0] > 0 ? p->gen.v[0] : 128; }

int lm_bench_positions(const struct lm_bench_params *p) {
    if (p->parallel.n > 0) { // one sequence: prompt + generated (+ the arrival's long prompt)
        const int request = p->prompt.v[0] + p->gen.v[0] + 1, arrival = p->popt.arrival + 2;
        return request > arrival ? request : arrival;
    }
    const int max_tg = list_max(&p->gen), max_d = list_max(&p->depth);
    int need = max_d + list_max(&p->prompt);
    if (max_tg > 0 && LM_BENCH_TG_PROMPT + max_tg > need) need = LM_BENCH_TG_PROMPT + max_tg;
    if (max_tg > 0 && max_d + max_tg > need) need = max_d + max_tg;
    if (p->ttft > need) need = p->ttft;
    if (p->breakdown && max_d + breakdown_prompt(p) + breakdown_gen(p) > need)
        need = max_d + breakdown_prompt(p) + breakdown_gen(p);
    if (need < LM_BENCH_TG_PROMPT + 1) need = LM_BENCH_TG_PROMPT + 1; // the sampling test's prompt
    return need;
}

// ================================================================ batched runs

static enum lm_status run_parallel(struct lm_model *m, const struct lm_bench_params *p,
                                   struct lm_bench_result *r) {
    const int n_th = p->threads.n, n_list = p->parallel.n;
    r->par_params = calloc((size_t)n_th, sizeof *r->par_params);
    r->par_results = calloc((size_t)n_th * (size_t)n_list, sizeof *r->par_results);
    if (!r->par_params || !r->par_results) return lm_error_set(LM_ERR_NOMEM, "bench: out of memory");
    int prof_ti = 0; // the profiled run: at the largest thread count
    for (int ti = 1; ti < n_th; ti++) if (p->threads.v[ti] > p->threads.v[prof_ti]) prof_ti = ti;
    for (int ti = 0; ti < n_th; ti++) {
        struct lm_bench_parallel_params *pp = &r->par_params[ti];
        *pp = (struct lm_bench_parallel_params){
            .list = p->parallel.v, .n_list = n_list, .n_prompt = p->prompt.v[0],
            .n_gen = p->gen.v[0], .n_threads = p->threads.v[ti], .reps = p->reps,
            .warmup = p->warmup, .step_tokens = p->popt.step_tokens, .arrival = p->popt.arrival,
            .roof = true, .trace = ti == prof_ti ? p->popt.trace : NULL,
            .perfetto = ti == prof_ti ? p->popt.perfetto : NULL,
            .profile = ti == prof_ti && p->popt.profile, .lookup = p->popt.lookup, .log = p->log,
            .kv_type_k = p->kv_type_k, .kv_type_v = p->kv_type_v,
            .sampling = p->sampling, .progress = p->progress};
        const enum lm_status st = lm_bench_parallel_run(m, &r->model, pp, &r->par_results[ti * n_list]);
        if (st != LM_OK) return st;
        r->n_par++;
    }
    return LM_OK;
}

// ================================================================ single-stream tests

// The tests of one thread count on a fresh context (the tokenizer and sampler tests once,
// with the first). ids: lm_bench_positions(p) prompt ids.
static enum lm_status run_tests_at(struct lm_model *m, const struct lm_bench_params *p, int ti,
                                   const int32_t *ids, struct lm_batch_entry *batch,
                                   struct lm_sampler *smp, struct lm_bench_result *r) {
    const int threads = p->threads.v[ti];
    // room for one more block beside the positions: a run rolled back to a depth inside a
    // full block (indexed by the prefix cache) writes into a copy of it
    struct lm_context_params cp = {.n_ctx = lm_bench_positions(p), .n_seq_max = 1,
                                   .n_batch = LM_BENCH_N_BATCH, .n_threads = threads,
                                   .kv_tokens = lm_bench_positions(p) + 64,
                                   .kv_type_k = p->kv_type_k, .kv_type_v = p->kv_type_v};
    struct lm_context *c = NULL;
    const uint64_t t_ctx0 = lm_time_ns();
    enum lm_status st = lm_context_init(&c, m, &cp);
    if (st != LM_OK) return st;
    if (ti == 0) {
        r->model.ctx_init_ms = (double)(lm_time_ns() - t_ctx0) / 1e6;
        struct lm_kv_cache_stats kvs;
        lm_kv_cache_stats(c, &kvs);
        r->model.kv_bytes = (uint64_t)kvs.n_blocks * kvs.block_bytes;
    }
    const struct lm_bench_test_setup s = {.c = c, .ids = ids, .batch = batch, .smp = smp,
                                      .warmup = p->warmup, .reps = p->reps, .log = p->log,
                                      .progress = p->progress, .live = p->live,
                                      .live_user = p->live_user};
    // per depth, the cache filled once and kept under the tests (pp and tg roll back to it)
    for (int di = 0; di < p->depth.n && st == LM_OK; di++) {
        struct lm_bench_test_setup sd = s;
        sd.depth = p->depth.v[di];
        st = lm_bench_fill_depth(&sd, sd.depth);
        for (int i = 0; i < p->prompt.n && st == LM_OK; i++)
            if (p->prompt.v[i] > 0)
                st = lm_bench_run_test(&sd, LM_BENCH_PP, p->prompt.v[i], threads, &r->tests[r->n_tests++]);
        for (int i = 0; i < p->gen.n && st == LM_OK; i++)
            if (p->gen.v[i] > 0)
                st = lm_bench_run_test(&sd, LM_BENCH_TG, p->gen.v[i], threads, &r->tests[r->n_tests++]);
    }
    lm_kv_cache_seq_rm(c, 0, 0, -1);
    if (p->ttft > 0 && st == LM_OK)
        st = lm_bench_run_test(&s, LM_BENCH_TTFT, p->ttft, threads, &r->tests[r->n_tests++]);
    if (ti == 0 && st == LM_OK) { // single-threaded tests, once
        st = lm_bench_run_tokenize(&s, m, &r->tests[r->n_tests++]);
        lm_kv_cache_seq_rm(c, 0, 0, -1);
        // the sampling test draws from the logits of a short prompt
        if (st == LM_OK) st = lm_bench_prefill(c, ids, LM_BENCH_TG_PROMPT + 1, batch);
        if (st == LM_OK) st = lm_bench_run_sample(&s, r->model.n_vocab, &r->tests[r->n_tests++]);
    }
    lm_context_free(c);
    return st;
}

// Resets the process's peak RSS (VmHWM) to its current RSS: the bandwidth probe's buffer (freed
// by then) is not the model's memory. Best effort: without it the peak includes the probe.
static void reset_rss_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return;
    fputs("5", f);
    fclose(f);
}

static enum lm_status run_single(struct lm_model *m, const struct lm_bench_params *p,
                                 struct lm_bench_result *r) {
    const int n_th = p->threads.n;
    int32_t *ids = lm_bench_tokens(m, lm_bench_positions(p));
    if (!ids) return LM_ERR_NOMEM; // lm_bench_tokens' message
    enum lm_status st = LM_OK;
    if (p->bw_mib > 0) // the probe: before any model run
        st = lm_bench_bw_measure(p->bw_mib, p->threads.v, n_th, p->progress ? p->log : NULL, r->bw,
                                 &r->n_bw);
    reset_rss_peak();
    r->tests = calloc((size_t)n_th * ((size_t)p->depth.n * (size_t)(p->prompt.n + p->gen.n) + 1) + 2,
                      sizeof *r->tests);
    struct lm_batch_entry *batch = malloc(LM_BENCH_N_BATCH * sizeof *batch);
    struct lm_sampler *smp = NULL;
    if (st == LM_OK && (!r->tests || !batch)) st = lm_error_set(LM_ERR_NOMEM, "bench: out of memory");
    if (st == LM_OK) st = lm_sampler_init(&smp, &p->sampling, r->model.n_vocab);
    for (int ti = 0; ti < n_th && st == LM_OK; ti++) st = run_tests_at(m, p, ti, ids, batch, smp, r);

    // the breakdown: at the largest thread count, compared with the tg test of its length there
    int bd_threads = 1;
    for (int i = 0; i < n_th; i++) if (p->threads.v[i] > bd_threads) bd_threads = p->threads.v[i];
    for (int i = 0; i < r->n_tests && st == LM_OK; i++) {
        struct lm_bench_test *t = &r->tests[i];
        lm_bench_test_finish(t, &r->model, r->bw, r->n_bw);
        if (t->kind == LM_BENCH_TG && t->threads == bd_threads && t->n_gen == breakdown_gen(p) &&
            t->depth == list_max(&p->depth))
            r->tg_ref_ts = t->med_ts;
    }
    if (p->breakdown && st == LM_OK) {
        if (p->progress && p->log)
            fprintf(p->log, "lumen bench: breakdown run (%d + %d tokens at depth %d, %d threads)\n",
                    breakdown_prompt(p), breakdown_gen(p), list_max(&p->depth), bd_threads);
        const struct lm_bench_breakdown_params bp = {.n_threads = bd_threads,
                                                     .n_prompt = breakdown_prompt(p),
                                                     .n_gen = breakdown_gen(p), .warmup = p->warmup,
                                                     .depth = list_max(&p->depth),
                                                     .tg_ref_ts = r->tg_ref_ts,
                                                     .sampling = p->sampling};
        st = lm_bench_breakdown_run(m, &r->model, r->bw, r->n_bw, &bp, &r->breakdown);
    }
    lm_sampler_free(smp);
    free(batch);
    free(ids);
    return st;
}

// ================================================================ the run

enum lm_status lm_bench_run(struct lm_model *m, const struct lm_bench_params *p,
                            struct lm_bench_result *out) {
    memset(out, 0, sizeof *out);
    lm_bench_model_info(m, p->model_path, &out->model);
    lm_bench_model_info_kv_types(&out->model, p->kv_type_k, p->kv_type_v);
    out->model.load_ms = p->load_ms;
    struct lm_model_info info;
    lm_model_info(m, &info);
    out->model.file_bytes = info.file_bytes;
    uint64_t load_peak = 0, rss = 0;
    lm_prof_read_rss(&out->model.rss_load, &load_peak);
    if (p->parallel.n > 0) {
        // the probe first, before any model run (as in the single-stream mode)
        enum lm_status st = LM_OK;
        if (p->bw_mib > 0)
            st = lm_bench_bw_measure(p->bw_mib, p->threads.v, p->threads.n, p->progress ? p->log : NULL,
                                     out->bw, &out->n_bw);
        reset_rss_peak();
        st = st == LM_OK ? run_parallel(m, p, out) : st;
        lm_prof_read_rss(&rss, &out->model.rss_peak);
        if (load_peak > out->model.rss_peak) out->model.rss_peak = load_peak;
        return st;
    }
    const enum lm_status st = run_single(m, p, out);
    lm_prof_read_rss(&rss, &out->model.rss_peak);
    if (load_peak > out->model.rss_peak) out->model.rss_peak = load_peak;
    return st;
}

void lm_bench_result_free(struct lm_bench_result *r) {
    for (int i = 0; i < r->n_tests; i++) free(r->tests[i].ns);
    free(r->tests);
    lm_bench_breakdown_free(r->breakdown);
    free(r->par_params);
    free(r->par_results);
    memset(r, 0, sizeof *r);
}
