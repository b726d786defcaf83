// `lumen bench --parallel LIST`: batched decode of N sequences on the engine (parallel.h).
// The engine prefills all prompts in its first step (step budget N x prompt unless
// --step-tokens), then decodes the N sequences together; the compute roof is lumen's own
// prefill MAC rate over the MACs of one decode token including the LM head.
#include "parallel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "lumen_prof.h"
#include "prompt.h"
#include "requests.h"
#include "stats.h"

// ================================================================ option checks

enum lm_status lm_bench_parallel_check(const struct lm_bench_parallel_opts *o, bool parallel,
                                       const int *list, int n_list) {
    if (!parallel) {
        if (o->arrival || o->step_tokens || o->lookup)
            return lm_error_set(LM_ERR_ARG, "--arrival, --step-tokens and --lookup apply to --parallel runs");
        if (o->trace || o->perfetto || o->profile)
            return lm_error_set(LM_ERR_ARG, "--trace, --perfetto and --profile apply to --parallel runs "
                                            "(--breakdown profiles the pp/tg tests)");
        return LM_OK;
    }
    int max_n = 0;
    for (int i = 0; i < n_list; i++) max_n = list[i] > max_n ? list[i] : max_n;
    // every running request decodes one token per step; the arrival run also needs room
    // for the long prompt's chunk beside the N decode tokens
    if (o->step_tokens && o->step_tokens < max_n)
        return lm_error_set(LM_ERR_ARG,
                            "--step-tokens %d < N = %d (every sequence decodes one token per step)",
                            o->step_tokens, max_n);
    const int arr_budget = o->step_tokens ? o->step_tokens : LM_BENCH_ARRIVAL_STEP_TOKENS;
    if (o->arrival && arr_budget <= max_n + 1)
        return lm_error_set(LM_ERR_ARG,
                            "--arrival: a step budget of %d leaves no prefill chunk beside N = %d "
                            "decode tokens (raise --step-tokens above N + 1)", arr_budget, max_n);
    return LM_OK;
}

// ================================================================ one throughput run

// One repetition at N sequences; fills res (gen_tok_s etc. of this repetition).
static enum lm_status run_once(struct lm_model *m, const int32_t *ids, int n_ids,
                               const struct lm_bench_parallel_params *pp, int N,
                               struct lm_bench_parallel_result *res) {
    const int P = pp->n_prompt, G = pp->n_gen;
    struct lm_engine_params ep = {.max_running = N, .max_waiting = N,
                                  .step_tokens = pp->step_tokens ? pp->step_tokens : N * P,
                                  .n_ctx = P + G + 1, .kv_tokens = N * (P + G + 16),
                                  .n_threads = pp->n_threads, .no_prefix_cache = true,
                                  .kv_type_k = pp->kv_type_k, .kv_type_v = pp->kv_type_v};
    if (ep.step_tokens < N) ep.step_tokens = N;
    if (ep.step_tokens > 8192) ep.step_tokens = 8192;
    struct lm_engine *e = NULL;
    enum lm_status st = lm_engine_init(&e, m, &ep);
    if (st != LM_OK) return st;
    struct lm_bench_request_sink sink = {.n_req = N};
    sink.r = calloc((size_t)N, sizeof *sink.r);
    uint64_t *t_all = malloc((size_t)N * (size_t)G * sizeof *t_all);
    double *itl = malloc((size_t)N * (size_t)G * sizeof *itl);
    double *ttft = malloc((size_t)N * sizeof *ttft);
    int32_t *prompt = malloc((size_t)P * sizeof *prompt);
    if (!sink.r || !t_all || !itl || !ttft || !prompt) {
        lm_engine_free(e);
        free(sink.r); free(t_all); free(itl); free(ttft); free(prompt);
        return lm_error_set(LM_ERR_NOMEM, "bench: out of memory");
    }
    for (int i = 0; i < N; i++) sink.r[i] = (struct lm_bench_request){.t = t_all + (size_t)i * G, .cap = G};
    struct lm_request_params rp = lm_request_params_default();
    rp.sampling = pp->sampling;
    rp.max_tokens = G;
    rp.ignore_eos = true;
    rp.lookup = pp->lookup;
    const uint64_t t0 = lm_time_ns();
    for (int i = 0; i < N && st == LM_OK; i++) {
        lm_bench_request_prompt(ids, n_ids, i, prompt, P);
        st = lm_engine_submit(e, prompt, P, &rp, lm_bench_request_event, &sink, &sink.r[i].id);
    }
    uint64_t kv_peak = 0, fwd0 = 0, smp0 = 0;
    struct lm_engine_stats es = {0};
    int32_t left = st == LM_OK ? 1 : 0, n_steps_dec = -1;
    while (left > 0) {
        left = lm_engine_step(e);
        lm_engine_stats(e, &es);
        if (es.kv.bytes_used > kv_peak) kv_peak = es.kv.bytes_used;
        if (left < 0) st = LM_ERR_STATE;
        if (n_steps_dec >= 0) {
            n_steps_dec++;
            continue;
        }
        bool all = true; // the step that gave the last sequence its first token
        for (int i = 0; i < N && all; i++) all = sink.r[i].n > 0;
        if (all) {
            fwd0 = es.forward_ns;
            smp0 = es.sample_ns;
            n_steps_dec = 0;
        }
    }
    struct lm_kv_cache_stats ks;
    lm_kv_cache_stats(lm_engine_context(e), &ks);
    res->step_tokens = ep.step_tokens;
    res->drafted = es.drafted_tokens;
    res->accepted = es.accepted_tokens;
    lm_engine_free(e);
    if (st == LM_OK && (sink.bad || sink.cancelled))
        st = lm_error_set(LM_ERR_STATE, "bench: %d requests failed", sink.bad + sink.cancelled);
    for (int i = 0; i < N && st == LM_OK; i++)
        if (sink.r[i].n != G)
            st = lm_error_set(LM_ERR_STATE, "bench: request %d generated %d tokens, expected %d", i,
                              sink.r[i].n, G);
    if (st == LM_OK) {
        // The decode phase: from the moment the last sequence got its first token (the end
        // of the forward pass that finished its prompt) to the last token. With every prompt
        // in the first step (the default budget) that is G - 1 steps of N decode tokens,
        // each timed from the end of one forward pass to the end of the next (sampling
        // included): llama-batched-bench's S_TG over G - 1 steps. Counting the tokens
        // delivered after that moment keeps it exact when prompts are chunked.
        uint64_t t_all_first = 0, t_last = 0;
        for (int i = 0; i < N; i++) {
            if (sink.r[i].t[0] > t_all_first) t_all_first = sink.r[i].t[0];
            if (sink.r[i].t[G - 1] > t_last) t_last = sink.r[i].t[G - 1];
        }
        int n_itl = 0, n_dec = 0;
        for (int i = 0; i < N; i++) {
            const uint64_t *t = sink.r[i].t;
            ttft[i] = (double)(t[0] - t0) / 1e6;
            for (int k = 1; k < G; k++) {
                itl[n_itl++] = (double)(t[k] - t[k - 1]) / 1e6;
                n_dec += t[k] > t_all_first;
            }
        }
        res->gen_tok_s = t_last > t_all_first ? (double)n_dec / ((double)(t_last - t_all_first) * 1e-9) : NAN;
        // llama-batched-bench samples nothing: its S_TG times llama_decode calls only. The
        // engine's forward-pass time over the same steps gives that quantity.
        res->fwd_tok_s = es.forward_ns > fwd0 ? (double)n_dec / ((double)(es.forward_ns - fwd0) * 1e-9) : NAN;
        res->sample_ms_step = n_steps_dec > 0 ? (double)(es.sample_ns - smp0) / 1e6 / n_steps_dec : NAN;
        res->pp_tok_s = (double)N * P / ((double)(t_all_first - t0) * 1e-9);
        res->ttft_ms_p50 = lm_bench_percentile(ttft, N, 50);
        res->ttft_ms_p99 = lm_bench_percentile(ttft, N, 99);
        res->itl_ms_p50 = lm_bench_percentile(itl, n_itl, 50);
        res->itl_ms_p99 = lm_bench_percentile(itl, n_itl, 99);
        res->kv_bytes = kv_peak;
        res->kv_block_bytes = ks.block_bytes;
        res->kv_block_tokens = ks.block_size;
        res->kv_tokens_held = (uint64_t)N * (uint64_t)(P + G - 1);
    }
    free(sink.r);
    free(t_all);
    free(itl);
    free(ttft);
    free(prompt);
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
    if (!b) {
        lm_context_free(c);
        return lm_error_set(LM_ERR_NOMEM, "bench: out of memory");
    }
    double v[64];
    if (reps > 64) reps = 64;
    for (int r = -1; r < reps && st == LM_OK; r++) {
        lm_kv_cache_seq_rm(c, 0, 0, -1);
        for (int i = 0; i < n; i++) b[i] = (struct lm_batch_entry){ids[i], i, 0, i == n - 1};
        const uint64_t t0 = lm_time_ns();
        st = lm_decode(c, b, n);
        if (r >= 0) v[r] = (double)n / ((double)(lm_time_ns() - t0) * 1e-9);
    }
    free(b);
    lm_context_free(c);
    if (st == LM_OK) *tok_s = lm_bench_percentile(v, reps, 50);
    return st;
}

// ================================================================ profiled run

// The arrival run of pp at N streams.
static enum lm_status arrival_once(struct lm_model *m, const int32_t *ids, int n_ids,
                                   const struct lm_bench_parallel_params *pp, int N,
                                   struct lm_bench_arrival_result *out) {
    const struct lm_bench_arrival_params a = {.n_streams = N, .n_prompt = pp->n_prompt,
                                              .n_long = pp->arrival, .step_tokens = pp->step_tokens,
                                              .n_threads = pp->n_threads, .sampling = pp->sampling};
    return lm_bench_arrival_once(m, ids, n_ids, &a, out);
}

// One extra run at N under the profiler (its arrival run when pp->arrival), then the
// summary (to the log) and the trace files. Untimed: its figures are not reported.
static enum lm_status profiled_run(struct lm_model *m, const int32_t *ids, int n_ids,
                                   const struct lm_bench_parallel_params *pp, int N) {
    const enum lm_prof_level lvl = pp->trace || pp->perfetto ? LM_PROF_TRACE : LM_PROF_SUMMARY;
    enum lm_status st = lm_prof_init(lvl, pp->n_threads > 0 ? pp->n_threads : 1, 0);
    if (st != LM_OK) return st;
    if (pp->progress && pp->log)
        fprintf(pp->log, "lumen bench: profiled %s run at N = %d, %d threads\n",
                pp->arrival ? "arrival" : "parallel", N, pp->n_threads);
    if (pp->arrival) {
        struct lm_bench_arrival_result a;
        st = arrival_once(m, ids, n_ids, pp, N, &a);
    } else {
        struct lm_bench_parallel_result r;
        st = run_once(m, ids, n_ids, pp, N, &r);
    }
    if (st == LM_OK && lm_prof_dropped() > 0 && pp->log)
        fprintf(pp->log, "lumen bench: the profiler dropped %llu events (trace buffers full)\n",
                (unsigned long long)lm_prof_dropped());
    if (st == LM_OK && pp->profile && pp->log) lm_prof_print_summary(pp->log);
    if (st == LM_OK && pp->trace) st = lm_prof_write_jsonl(pp->trace);
    if (st == LM_OK && pp->perfetto) st = lm_prof_write_perfetto(pp->perfetto);
    lm_prof_shutdown();
    return st;
}

// ================================================================ all N

enum lm_status lm_bench_parallel_run(struct lm_model *m, const struct lm_bench_model_info *mi,
                                     const struct lm_bench_parallel_params *pp,
                                     struct lm_bench_parallel_result *out) {
    int n_ids = pp->n_prompt + 512;
    if (pp->arrival + 512 > n_ids) n_ids = pp->arrival + 512;
    int32_t *ids = lm_bench_tokens(m, n_ids);
    if (!ids) return LM_ERR_NOMEM; // lm_bench_tokens' message
    enum lm_status st = LM_OK;
    // the roof: lumen's own prefill MAC rate over the MACs of one decode token
    double pp_rate = 0;
    int n_roof = 512 < n_ids ? 512 : n_ids;
    if (n_roof > mi->n_ctx_train) n_roof = mi->n_ctx_train;
    if (pp->roof) st = prefill_rate(m, ids, n_roof, pp->n_threads, pp->reps, &pp_rate);
    const double mac_layers = (double)mi->layer_params, mac_head = (double)mi->head_params;
    for (int k = 0; k < pp->n_list && st == LM_OK; k++) {
        const int N = pp->list[k];
        struct lm_bench_parallel_result *res = &out[k];
        memset(res, 0, sizeof *res);
        res->n_seq = N;
        // per repetition: gen and fwd tok/s, sampling ms/step, TTFT and ITL p50/p99, prefill
        // tok/s, the arrival run
        double g[64], fw[64], smp[64], tf50[64], tf99[64], i50[64], i99[64], ppr[64];
        struct lm_bench_arrival_result ar[64];
        const int reps = pp->reps < 64 ? pp->reps : 64;
        for (int r = -pp->warmup; r < reps && st == LM_OK; r++) {
            struct lm_bench_parallel_result one = {0};
            st = run_once(m, ids, n_ids, pp, N, &one);
            if (st != LM_OK || r < 0) continue;
            g[r] = one.gen_tok_s; fw[r] = one.fwd_tok_s; smp[r] = one.sample_ms_step;
            tf50[r] = one.ttft_ms_p50; tf99[r] = one.ttft_ms_p99;
            i50[r] = one.itl_ms_p50; i99[r] = one.itl_ms_p99; ppr[r] = one.pp_tok_s;
            res->kv_bytes = one.kv_bytes;
            res->kv_block_bytes = one.kv_block_bytes;
            res->kv_block_tokens = one.kv_block_tokens;
            res->kv_tokens_held = one.kv_tokens_held;
            res->step_tokens = one.step_tokens;
            res->drafted += one.drafted;
            res->accepted += one.accepted;
            if (pp->progress && pp->log)
                fprintf(pp->log, "lumen bench: parallel %d rep %d/%d: %.1f gen tok/s, TTFT p50 %.1f ms\n",
                        N, r + 1, reps, one.gen_tok_s, one.ttft_ms_p50);
            if (pp->arrival) {
                st = arrival_once(m, ids, n_ids, pp, N, &ar[r]);
                if (st == LM_OK && pp->progress && pp->log)
                    fprintf(pp->log, "lumen bench: arrival of %d tokens at %d streams rep %d/%d: worst "
                                    "gap %.1f -> %.1f ms, full-chunk step %.1f ms\n", pp->arrival, N,
                            r + 1, reps, ar[r].gap_base_max, ar[r].gap_during_max, ar[r].chunk_step);
            }
        }
        if (st != LM_OK) break;
        if (pp->lookup && pp->log)
            fprintf(pp->log, "lumen bench: parallel %d --lookup: %llu tokens drafted, %llu accepted "
                            "(%.1f%%) over %d repetitions\n", N, (unsigned long long)res->drafted,
                    (unsigned long long)res->accepted,
                    res->drafted ? 100.0 * (double)res->accepted / (double)res->drafted : 0.0, reps);
        res->reps = reps;
        lm_bench_min_max(g, reps, &res->gen_tok_s_min, &res->gen_tok_s_max);
        lm_bench_min_max(fw, reps, &res->fwd_tok_s_min, &res->fwd_tok_s_max);
        // nearest-rank medians (the lower middle repetition of an even count)
        res->gen_tok_s = lm_bench_percentile(g, reps, 50);
        res->fwd_tok_s = lm_bench_percentile(fw, reps, 50);
        res->sample_ms_step = lm_bench_percentile(smp, reps, 50);
        res->pp_tok_s = lm_bench_percentile(ppr, reps, 50);
        res->ttft_ms_p50 = lm_bench_percentile(tf50, reps, 50);
        res->ttft_ms_p99 = lm_bench_percentile(tf99, reps, 50);
        res->itl_ms_p50 = lm_bench_percentile(i50, reps, 50);
        res->itl_ms_p99 = lm_bench_percentile(i99, reps, 50);
        res->prefill_tok_s = pp_rate;
        res->roof_prompt = n_roof;
        res->roof_tok_s = pp_rate > 0 ? pp_rate * mac_layers / (mac_layers + mac_head) : NAN;
        res->roof_frac = pp_rate > 0 ? res->gen_tok_s / res->roof_tok_s : NAN;
        if (pp->arrival) {
            res->has_arrival = true;
            lm_bench_arrival_summarize(ar, reps, &res->arr);
        }
    }
    if (st == LM_OK && (pp->trace || pp->perfetto || pp->profile)) {
        int n_max = pp->list[0];
        for (int k = 1; k < pp->n_list; k++) n_max = pp->list[k] > n_max ? pp->list[k] : n_max;
        st = profiled_run(m, ids, n_ids, pp, n_max);
    }
    free(ids);
    return st;
}

// ================================================================ output

void lm_bench_parallel_print_md(FILE *f, const struct lm_bench_model_info *mi,
                                const struct lm_bench_parallel_params *pp,
                                const struct lm_bench_parallel_result *res, int n) {
    fprintf(f, "| model | threads | test | n_seq | gen t/s | gen t/s vs N=1 | fwd t/s | roof | TTFT p50 ms | "
               "TTFT p99 ms | ITL p50 ms | ITL p99 ms | KV MiB | KV / tokens held |\n");
    fprintf(f, "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    double base = NAN;
    for (int i = 0; i < n; i++) if (res[i].n_seq == 1) base = res[i].gen_tok_s;
    for (int i = 0; i < n; i++) {
        const struct lm_bench_parallel_result *r = &res[i];
        char rel[16] = "", roof[16] = "";
        if (isfinite(base) && base > 0) snprintf(rel, sizeof rel, "%.2fx", r->gen_tok_s / base);
        if (isfinite(r->roof_frac)) snprintf(roof, sizeof roof, "%.0f%%", 100 * r->roof_frac);
        const double exact = r->kv_block_tokens > 0 ? (double)r->kv_tokens_held *
                                                          (double)r->kv_block_bytes / r->kv_block_tokens : 0;
        fprintf(f, "| %s | %d | pp%d+tg%d | %d | %.2f | %s | %.2f | %s | %.1f | %.1f | %.2f | %.2f | %.2f | %.3f |\n",
                mi->desc, pp->n_threads, pp->n_prompt, pp->n_gen, r->n_seq, r->gen_tok_s, rel,
                r->fwd_tok_s, roof,
                r->ttft_ms_p50, r->ttft_ms_p99, r->itl_ms_p50, r->itl_ms_p99,
                (double)r->kv_bytes / (1 << 20), exact > 0 ? (double)r->kv_bytes / exact : NAN);
    }
    if (n > 0 && isfinite(res[0].roof_tok_s))
        fprintf(f, "\ncompute roof: %.1f tok/s = prefill %.1f tok/s (pp%d, median of %d) x %.1f M layer "
                   "MACs / %.1f M MACs per decode token (layers + %.1f M head)\n",
                res[0].roof_tok_s, res[0].prefill_tok_s, res[0].roof_prompt, pp->reps,
                (double)mi->layer_params / 1e6,
                (double)(mi->layer_params + mi->head_params) / 1e6, (double)mi->head_params / 1e6);
    fprintf(f, "gen t/s: generated tokens per second over all sequences once every prompt is in, "
               "from the last sequence's first token to the last token (the decode steps; median "
               "of %d); fwd t/s: the same tokens over those steps' forward passes only (no "
               "sampling, as llama-batched-bench's S_TG); step budget %s; KV / tokens held: peak pool bytes in use over the bytes of the "
               "tokens held (1 = no waste; blocks of %d positions)\n", n > 0 ? res[0].reps : 0,
            pp->step_tokens ? "of --step-tokens" : "N x prompt (every prompt in the first step)",
            n > 0 ? res[0].kv_block_tokens : 0);
    if (n == 0 || !res[0].has_arrival) return;
    fprintf(f, "\n| threads | n_seq | arrival | step budget | chunk | worst gap before ms | worst gap "
               "during prefill ms | increase ms | full-chunk step ms median / max (steps) | increase / "
               "longest chunk step | decode step ms | long prompt TTFT ms |\n");
    fprintf(f, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int i = 0; i < n; i++) {
        const struct lm_bench_arrival_result *a = &res[i].arr;
        fprintf(f, "| %d | %d | %d | %d | %d | %.2f | %.2f | %.2f | %.2f / %.2f (%d) | %.2f | "
                   "%.2f | %.1f |\n", pp->n_threads, res[i].n_seq, pp->arrival, a->step_tokens,
                a->chunk_tokens, a->gap_base_max, a->gap_during_max, a->increase, a->chunk_step,
                a->chunk_step_max, a->n_chunk_steps,
                a->chunk_step_max > 0 ? a->increase / a->chunk_step_max : NAN,
                a->decode_step, a->long_ttft);
    }
    fprintf(f, "\narrival: after the N streams' first tokens and %d decode steps, one request "
               "with a prompt of %d tokens (max_tokens 1) arrives; gaps are the streams' "
               "inter-token times before it and those ending while its prompt is prefilled; a "
               "full-chunk step holds N decode tokens + (step budget - N) tokens of its prompt (later "
               "chunks attend to more positions: the longest is the one a stream waits for); increase "
               "/ longest chunk step <= 1: the worst gap grew by at most one chunk's step (a stream "
               "that waited for two chunks would read about 2); medians of %d runs (largest worst gap "
               "during prefill: %.1f ms at N = %d)\n",
            LM_BENCH_ARRIVAL_BASE, pp->arrival, res[0].arr.reps, res[n - 1].arr.gap_during_max_worst,
            res[n - 1].n_seq);
}

void lm_bench_parallel_print_json_tests(FILE *f, const struct lm_bench_parallel_params *pp,
                                        const struct lm_bench_parallel_result *res, int n,
                                        bool more) {
    for (int i = 0; i < n; i++) {
        const struct lm_bench_parallel_result *r = &res[i];
        fprintf(f, "    {\"test\": \"pp%d+tg%d@%d\", \"kind\": \"batched\", \"n_threads\": %d, "
                   "\"n_prompt\": %d, \"n_gen\": %d, \"n_seq\": %d, \"reps\": %d, \"step_tokens\": %d,\n     "
                   "\"median_ts\": %.4f, \"min_ts\": %.4f, \"max_ts\": %.4f, \"gen_tok_s\": %.4f, "
                   "\"gen_tok_s_min\": %.4f, \"gen_tok_s_max\": %.4f, \"fwd_tok_s\": %.4f, "
                   "\"fwd_tok_s_min\": %.4f, \"fwd_tok_s_max\": %.4f, \"sample_ms_per_step\": %.4f, "
                   "\"pp_tok_s\": %.4f, "
                   "\"ttft_ms_p50\": %.4f, \"ttft_ms_p99\": %.4f, \"itl_ms_p50\": %.4f, "
                   "\"itl_ms_p99\": %.4f,\n     \"kv_bytes\": %llu, \"kv_tokens_held\": %llu, "
                   "\"kv_block_bytes\": %llu, \"prefill_tok_s\": ",
                pp->n_prompt, pp->n_gen, r->n_seq, pp->n_threads, pp->n_prompt, pp->n_gen, r->n_seq,
                r->reps, r->step_tokens, r->gen_tok_s, r->gen_tok_s_min, r->gen_tok_s_max, r->gen_tok_s,
                r->gen_tok_s_min, r->gen_tok_s_max, r->fwd_tok_s, r->fwd_tok_s_min, r->fwd_tok_s_max,
                r->sample_ms_step, r->pp_tok_s,
                r->ttft_ms_p50, r->ttft_ms_p99, r->itl_ms_p50, r->itl_ms_p99,
                (unsigned long long)r->kv_bytes, (unsigned long long)r->kv_tokens_held,
                (unsigned long long)r->kv_block_bytes);
        if (isfinite(r->roof_tok_s))
            fprintf(f, "%.4f, \"roof_tok_s\": %.4f, \"roof_frac\": %.4f", r->prefill_tok_s,
                    r->roof_tok_s, r->roof_frac);
        else
            fprintf(f, "null, \"roof_tok_s\": null, \"roof_frac\": null");
        if (r->has_arrival) {
            const struct lm_bench_arrival_result *a = &r->arr;
            fprintf(f, ",\n     \"arrival\": {\"n_prompt\": %d, \"step_tokens\": %d, \"chunk_tokens\": %d, "
                       "\"reps\": %d, \"gap_base_max_ms\": ", pp->arrival, a->step_tokens,
                    a->chunk_tokens, a->reps);
            lm_bench_json_num(f, a->gap_base_max);
            lm_bench_json_member_num(f, ", \"gap_base_p50_ms\": ", a->gap_base_p50);
            lm_bench_json_member_num(f, ", \"gap_during_max_ms\": ", a->gap_during_max);
            lm_bench_json_member_num(f, ", \"gap_during_p50_ms\": ", a->gap_during_p50);
            lm_bench_json_member_num(f, ", \"gap_during_max_worst_ms\": ", a->gap_during_max_worst);
            lm_bench_json_member_num(f, ", \"increase_ms\": ", a->increase);
            lm_bench_json_member_num(f, ",\n       \"chunk_step_ms\": ", a->chunk_step);
            lm_bench_json_member_num(f, ", \"chunk_step_max_ms\": ", a->chunk_step_max);
            fprintf(f, ", \"n_chunk_steps\": %d, \"increase_over_longest_chunk_step\": ", a->n_chunk_steps);
            lm_bench_json_num(f, a->chunk_step_max > 0 ? a->increase / a->chunk_step_max : NAN);
            lm_bench_json_member_num(f, ", \"increase_over_median_chunk_step\": ",
                                     a->chunk_step > 0 ? a->increase / a->chunk_step : NAN);
            lm_bench_json_member_num(f, ", \"decode_step_ms\": ", a->decode_step);
            lm_bench_json_member_num(f, ", \"long_ttft_ms\": ", a->long_ttft);
            fputs("}", f);
        } else {
            fputs(", \"arrival\": null", f);
        }
        fprintf(f, "}%s\n", i + 1 < n || more ? "," : "");
    }
}
