// `lumen bench --parallel LIST`: llama-batched-bench's job on the engine. For each N,
// N requests with distinct prompts of -p tokens are submitted at once and generate -n
// tokens each (greedy, end-of-generation ignored); the engine prefills all prompts in
// its first step, then decodes the N sequences together. Reports aggregate decode
// tokens/s, TTFT and inter-token latency percentiles, the KV memory held against the
// tokens held, and the compute roof (lumen's own prefill MAC rate / MACs of one decode
// token including the LM head).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "base/timer.h"
#include "cli/cli.h"
#include "cli/cli_bench.h"
#include "cli/cli_bench_parallel.h"
#include "lumen.h"

// ================================================================ one run

struct par_req {
    uint64_t id, t_submit, t_first, t_last;
    int n;
    double *itl; // [n_gen] gaps between consecutive tokens, ms
};

struct par_run {
    struct par_req *r;
    int n_req, n_gen;
    uint64_t t_all_first; // when the last request got its first token
    int bad;
};

static void par_event(void *user, const struct lm_event *ev) {
    struct par_run *run = user;
    struct par_req *q = NULL;
    for (int i = 0; i < run->n_req; i++) if (run->r[i].id == ev->id) q = &run->r[i];
    if (!q) { run->bad++; return; }
    if (ev->finish == LM_FINISH_ERROR || ev->finish == LM_FINISH_CANCELLED) run->bad++;
    if (ev->token < 0) return;
    if (q->n == 0) q->t_first = ev->t_ns;
    else if (q->n - 1 < run->n_gen) q->itl[q->n - 1] = (double)(ev->t_ns - q->t_last) / 1e6;
    q->t_last = ev->t_ns;
    q->n++;
}

static int cmp_dbl(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// p-th percentile (0..100) of v[0, n), nearest rank; v is sorted in place
static double pct(double *v, int n, double p) {
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    int k = (int)ceil(p / 100.0 * n) - 1;
    if (k < 0) k = 0;
    if (k >= n) k = n - 1;
    return v[k];
}

// One repetition at N sequences; fills res (gen_tok_s etc. of this repetition).
static enum lm_status run_once(struct lm_model *m, const int32_t *ids, int n_ids,
                               const struct lm_bench_parallel_params *pp, int N,
                               struct lm_bench_parallel_result *res) {
    const int P = pp->n_prompt, G = pp->n_gen;
    struct lm_engine_params ep = {.max_running = N, .max_waiting = N,
                                  .step_tokens = N * P > N ? N * P : N, .n_ctx = P + G + 1,
                                  .kv_tokens = N * (P + G + 16),
                                  .n_threads = pp->n_threads, .no_prefix_cache = true};
    if (ep.step_tokens > 8192) ep.step_tokens = 8192;
    struct lm_engine *e = NULL;
    enum lm_status st = lm_engine_init(&e, m, &ep);
    if (st != LM_OK) return st;
    struct par_run run = {.n_req = N, .n_gen = G};
    run.r = calloc((size_t)N, sizeof *run.r);
    double *itl_all = malloc((size_t)N * (size_t)G * sizeof *itl_all);
    double *ttft = malloc((size_t)N * sizeof *ttft);
    if (!run.r || !itl_all || !ttft) {
        lm_engine_free(e);
        free(run.r); free(itl_all); free(ttft);
        return lm_error_set(LM_ERR_NOMEM, "bench: out of memory");
    }
    for (int i = 0; i < N; i++) {
        run.r[i].itl = itl_all + (size_t)i * G;
    }
    struct lm_request_params rp = lm_request_params_default();
    rp.sampling.temperature = 0;
    rp.max_tokens = G;
    rp.ignore_eos = true;
    // distinct prompts: BOS + the text from a different offset per sequence
    int32_t *prompt = malloc((size_t)P * sizeof *prompt);
    const uint64_t t0 = lm_now_ns();
    for (int i = 0; i < N && st == LM_OK; i++) {
        prompt[0] = ids[0];
        for (int j = 1; j < P; j++) prompt[j] = ids[1 + (j - 1 + 37 * i) % (n_ids - 1)];
        st = lm_engine_submit(e, prompt, P, &rp, par_event, &run, &run.r[i].id);
        run.r[i].t_submit = lm_now_ns();
    }
    free(prompt);
    uint64_t kv_peak = 0;
    int32_t left = st == LM_OK ? 1 : 0;
    while (left > 0) {
        left = lm_engine_step(e);
        struct lm_engine_stats es;
        lm_engine_stats(e, &es);
        if (es.kv.bytes_used > kv_peak) kv_peak = es.kv.bytes_used;
        if (left < 0) st = LM_ERR_STATE;
    }
    const uint64_t t_end = lm_now_ns();
    struct lm_kv_cache_stats ks;
    lm_kv_cache_stats(lm_engine_context(e), &ks);
    lm_engine_free(e);
    if (st == LM_OK && run.bad) st = lm_error_set(LM_ERR_STATE, "bench: %d requests failed", run.bad);
    if (st == LM_OK) {
        uint64_t t_all_first = 0;
        int n_itl = 0;
        for (int i = 0; i < N; i++) {
            if (run.r[i].t_first > t_all_first) t_all_first = run.r[i].t_first;
            ttft[i] = (double)(run.r[i].t_first - t0) / 1e6;
            for (int k = 0; k < run.r[i].n - 1; k++) itl_all[n_itl++] = run.r[i].itl[k];
        }
        // decode phase: every sequence past its prompt; G - 1 steps of N tokens
        // (llama-batched-bench's S_TG: its G steps after the prompts)
        res->gen_tok_s = (double)N * (G - 1) / ((double)(t_end - t_all_first) * 1e-9);
        res->pp_tok_s = (double)N * P / ((double)(t_all_first - t0) * 1e-9);
        res->ttft_ms_p50 = pct(ttft, N, 50);
        res->ttft_ms_p99 = pct(ttft, N, 99);
        res->itl_ms_p50 = pct(itl_all, n_itl, 50);
        res->itl_ms_p99 = pct(itl_all, n_itl, 99);
        res->kv_bytes = kv_peak;
        res->kv_block_bytes = ks.block_bytes;
        res->kv_block_tokens = ks.block_size;
        res->kv_tokens_held = (uint64_t)N * (uint64_t)(P + G - 1);
    }
    free(run.r);
    free(itl_all);
    free(ttft);
    return st;
}

// Prefill rate of one sequence (pp test): median tok/s of reps runs of n tokens.
static enum lm_status prefill_rate(struct lm_model *m, const int32_t *ids, int n, int threads,
                                   int reps, double *tok_s) {
    struct lm_context_params cp = {.n_ctx = n, .n_batch = n, .n_threads = threads, .n_logits_max = 1};
    struct lm_context *c = NULL;
    enum lm_status st = lm_context_init(&c, m, &cp);
    if (st != LM_OK) return st;
    struct lm_batch_entry *b = malloc((size_t)n * sizeof *b);
    double v[64];
    if (reps > 64) reps = 64;
    for (int r = -1; r < reps && st == LM_OK; r++) {
        lm_kv_cache_seq_rm(c, 0, 0, -1);
        for (int i = 0; i < n; i++) b[i] = (struct lm_batch_entry){ids[i], i, 0, i == n - 1};
        const uint64_t t0 = lm_now_ns();
        st = lm_decode(c, b, n);
        if (r >= 0) v[r] = (double)n / ((double)(lm_now_ns() - t0) * 1e-9);
    }
    free(b);
    lm_context_free(c);
    if (st == LM_OK) *tok_s = pct(v, reps, 50);
    return st;
}

enum lm_status lm_bench_parallel_run(struct lm_model *m, const struct lm_bench_model_info *mi,
                                     const struct lm_bench_parallel_params *pp,
                                     struct lm_bench_parallel_result *out) {
    const int n_ids = pp->n_prompt + 512;
    int32_t *ids = lm_bench_tokens(m, n_ids);
    if (!ids) return LM_ERR_NOMEM;
    enum lm_status st = LM_OK;
    // the roof: lumen's own prefill MAC rate over the MACs of one decode token
    double pp_rate = 0;
    if (pp->roof) st = prefill_rate(m, ids, 512 < n_ids ? 512 : n_ids, pp->n_threads, pp->reps, &pp_rate);
    const double mac_layers = (double)mi->layer_params, mac_head = (double)mi->head_params;
    for (int k = 0; k < pp->n_list && st == LM_OK; k++) {
        const int N = pp->list[k];
        struct lm_bench_parallel_result *res = &out[k];
        memset(res, 0, sizeof *res);
        res->n_seq = N;
        double g[64], tf50[64], tf99[64], i50[64], i99[64], ppr[64];
        const int reps = pp->reps < 64 ? pp->reps : 64;
        for (int r = -pp->warmup; r < reps && st == LM_OK; r++) {
            struct lm_bench_parallel_result one = {0};
            st = run_once(m, ids, n_ids, pp, N, &one);
            if (st != LM_OK || r < 0) continue;
            g[r] = one.gen_tok_s; tf50[r] = one.ttft_ms_p50; tf99[r] = one.ttft_ms_p99;
            i50[r] = one.itl_ms_p50; i99[r] = one.itl_ms_p99; ppr[r] = one.pp_tok_s;
            res->kv_bytes = one.kv_bytes;
            res->kv_block_bytes = one.kv_block_bytes;
            res->kv_block_tokens = one.kv_block_tokens;
            res->kv_tokens_held = one.kv_tokens_held;
            if (pp->progress)
                fprintf(stderr, "lumen bench: parallel %d rep %d/%d: %.1f gen tok/s, TTFT p50 %.1f ms\n",
                        N, r + 1, reps, one.gen_tok_s, one.ttft_ms_p50);
        }
        if (st != LM_OK) break;
        res->reps = reps;
        res->gen_tok_s_min = res->gen_tok_s_max = g[0];
        for (int r = 1; r < reps; r++) {
            if (g[r] < res->gen_tok_s_min) res->gen_tok_s_min = g[r];
            if (g[r] > res->gen_tok_s_max) res->gen_tok_s_max = g[r];
        }
        res->gen_tok_s = pct(g, reps, 50);
        res->pp_tok_s = pct(ppr, reps, 50);
        res->ttft_ms_p50 = pct(tf50, reps, 50);
        res->ttft_ms_p99 = pct(tf99, reps, 50);
        res->itl_ms_p50 = pct(i50, reps, 50);
        res->itl_ms_p99 = pct(i99, reps, 50);
        res->prefill_tok_s = pp_rate;
        res->roof_tok_s = pp_rate > 0 ? pp_rate * mac_layers / (mac_layers + mac_head) : NAN;
        res->roof_frac = pp_rate > 0 ? res->gen_tok_s / res->roof_tok_s : NAN;
    }
    free(ids);
    return st;
}

// ================================================================ output

void lm_bench_parallel_print_md(FILE *f, const struct lm_bench_model_info *mi,
                                const struct lm_bench_parallel_params *pp,
                                const struct lm_bench_parallel_result *res, int n) {
    fprintf(f, "| model | threads | test | n_seq | gen t/s | gen t/s vs N=1 | roof | TTFT p50 ms | "
               "TTFT p99 ms | ITL p50 ms | ITL p99 ms | KV MiB | KV / tokens held |\n");
    fprintf(f, "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    double base = NAN;
    for (int i = 0; i < n; i++) if (res[i].n_seq == 1) base = res[i].gen_tok_s;
    for (int i = 0; i < n; i++) {
        const struct lm_bench_parallel_result *r = &res[i];
        char rel[16] = "", roof[16] = "";
        if (isfinite(base) && base > 0) snprintf(rel, sizeof rel, "%.2fx", r->gen_tok_s / base);
        if (isfinite(r->roof_frac)) snprintf(roof, sizeof roof, "%.0f%%", 100 * r->roof_frac);
        const double exact = r->kv_block_tokens > 0 ? (double)r->kv_tokens_held *
                                                          (double)r->kv_block_bytes / r->kv_block_tokens : 0;
        fprintf(f, "| %s | %d | pp%d+tg%d | %d | %.2f | %s | %s | %.1f | %.1f | %.2f | %.2f | %.2f | %.3f |\n",
                mi->desc, pp->n_threads, pp->n_prompt, pp->n_gen, r->n_seq, r->gen_tok_s, rel, roof,
                r->ttft_ms_p50, r->ttft_ms_p99, r->itl_ms_p50, r->itl_ms_p99,
                (double)r->kv_bytes / (1 << 20), exact > 0 ? (double)r->kv_bytes / exact : NAN);
    }
    if (n > 0 && isfinite(res[0].roof_tok_s))
        fprintf(f, "\ncompute roof: %.1f tok/s = prefill %.1f tok/s (pp512, median of %d) x %.1f M layer "
                   "MACs / %.1f M MACs per decode token (layers + %.1f M head)\n",
                res[0].roof_tok_s, res[0].prefill_tok_s, pp->reps, (double)mi->layer_params / 1e6,
                (double)(mi->layer_params + mi->head_params) / 1e6, (double)mi->head_params / 1e6);
    fprintf(f, "gen t/s: generated tokens per second over all sequences once every prompt is in "
               "(median of %d); KV / tokens held: peak pool bytes in use over the bytes of the "
               "tokens held (1 = no waste; blocks of %d positions)\n", n > 0 ? res[0].reps : 0,
            n > 0 ? res[0].kv_block_tokens : 0);
}

void lm_bench_parallel_print_json_tests(FILE *f, const struct lm_bench_parallel_params *pp,
                                        const struct lm_bench_parallel_result *res, int n,
                                        bool more) {
    for (int i = 0; i < n; i++) {
        const struct lm_bench_parallel_result *r = &res[i];
        fprintf(f, "    {\"test\": \"pp%d+tg%d@%d\", \"kind\": \"batched\", \"n_threads\": %d, "
                   "\"n_prompt\": %d, \"n_gen\": %d, \"n_seq\": %d, \"reps\": %d,\n     "
                   "\"median_ts\": %.4f, \"min_ts\": %.4f, \"max_ts\": %.4f, \"gen_tok_s\": %.4f, "
                   "\"gen_tok_s_min\": %.4f, \"gen_tok_s_max\": %.4f, \"pp_tok_s\": %.4f, "
                   "\"ttft_ms_p50\": %.4f, \"ttft_ms_p99\": %.4f, \"itl_ms_p50\": %.4f, "
                   "\"itl_ms_p99\": %.4f,\n     \"kv_bytes\": %llu, \"kv_tokens_held\": %llu, "
                   "\"kv_block_bytes\": %llu, \"prefill_tok_s\": ",
                pp->n_prompt, pp->n_gen, r->n_seq, pp->n_threads, pp->n_prompt, pp->n_gen, r->n_seq,
                r->reps, r->gen_tok_s, r->gen_tok_s_min, r->gen_tok_s_max, r->gen_tok_s,
                r->gen_tok_s_min, r->gen_tok_s_max, r->pp_tok_s,
                r->ttft_ms_p50, r->ttft_ms_p99, r->itl_ms_p50, r->itl_ms_p99,
                (unsigned long long)r->kv_bytes, (unsigned long long)r->kv_tokens_held,
                (unsigned long long)r->kv_block_bytes);
        if (isfinite(r->roof_tok_s))
            fprintf(f, "%.4f, \"roof_tok_s\": %.4f, \"roof_frac\": %.4f}", r->prefill_tok_s,
                    r->roof_tok_s, r->roof_frac);
        else
            fprintf(f, "null, \"roof_tok_s\": null, \"roof_frac\": null}");
        fprintf(f, "%s\n", i + 1 < n || more ? "," : "");
    }
}
