// One arrival run, and the medians of several (arrival.h).
#include "arrival.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "prompt.h"
#include "requests.h"
#include "stats.h"

#define STEP_CAP 65536 // steps recorded per run (a run takes about BASE + L / chunk + prompts)

struct step_rec {
    double ms;          // wall time of lm_engine_step
    int tokens, decode; // lm_engine_stats: last_step_tokens, last_step_decode
    int during;         // 0 before the arrival, 1 while the long prompt is prefilled, 2 after
};

// Steps the engine once, recording the step; returns lm_engine_step's value.
static int32_t step_timed(struct lm_engine *e, struct step_rec *rec, int *n_rec, int during) {
    const uint64_t t0 = lm_time_ns();
    const int32_t left = lm_engine_step(e);
    const uint64_t t1 = lm_time_ns();
    struct lm_engine_stats es;
    lm_engine_stats(e, &es);
    if (*n_rec < STEP_CAP && es.steps > 0)
        rec[(*n_rec)++] = (struct step_rec){(double)(t1 - t0) / 1e6, es.last_step_tokens,
                                            es.last_step_decode, during};
    return left;
}

static bool streams_have(const struct lm_bench_request_sink *s, int N, int n) {
    for (int i = 0; i < N; i++) if (s->r[i].n < n) return false;
    return true;
}

enum lm_status lm_bench_arrival_once(struct lm_model *m, const int32_t *ids, int n_ids,
                                     const struct lm_bench_arrival_params *a,
                                     struct lm_bench_arrival_result *out) {
    memset(out, 0, sizeof *out);
    const int N = a->n_streams, P = a->n_prompt, L = a->n_long;
    const int S = a->step_tokens ? a->step_tokens : LM_BENCH_ARRIVAL_STEP_TOKENS;
    const int chunk = S - N; // > 1: lm_bench_parallel_check
    const int n_chunks = (L + chunk - 1) / chunk;
    // the streams outlive the prefill with room to spare (they are cancelled after it)
    const int gen_cap = 1 + LM_BENCH_ARRIVAL_BASE + 2 * n_chunks + 16;
    struct lm_engine_params ep = {.max_running = N + 1, .max_waiting = N + 1, .step_tokens = S,
                                  .n_ctx = P + gen_cap + 1 > L + 2 ? P + gen_cap + 1 : L + 2,
                                  .kv_tokens = N * (P + gen_cap + 16) + L + 32,
                                  .n_threads = a->n_threads, .no_prefix_cache = true};
    struct lm_engine *e = NULL;
    enum lm_status st = lm_engine_init(&e, m, &ep);
    if (st != LM_OK) return st;
    struct lm_bench_request_sink sink = {.n_req = N + 1};
    sink.r = calloc((size_t)N + 1, sizeof *sink.r);
    uint64_t *t_all = malloc(((size_t)N * gen_cap + 1) * sizeof *t_all);
    int32_t *prompt = malloc((size_t)(P > L ? P : L) * sizeof *prompt);
    struct step_rec *rec = malloc(STEP_CAP * sizeof *rec);
    double *gb = malloc((size_t)N * gen_cap * sizeof *gb), *gd = malloc((size_t)N * gen_cap * sizeof *gd);
    double *sv = malloc(STEP_CAP * sizeof *sv);
    if (!sink.r || !t_all || !prompt || !rec || !gb || !gd || !sv) {
        st = lm_error_set(LM_ERR_NOMEM, "bench: out of memory");
        goto done;
    }
    for (int i = 0; i < N; i++)
        sink.r[i] = (struct lm_bench_request){.t = t_all + (size_t)i * gen_cap, .cap = gen_cap};
    sink.r[N] = (struct lm_bench_request){.t = t_all + (size_t)N * gen_cap, .cap = 1};
    struct lm_request_params rp = lm_request_params_default();
    rp.sampling = a->sampling;
    rp.max_tokens = gen_cap;
    rp.ignore_eos = true;
    for (int i = 0; i < N && st == LM_OK; i++) {
        lm_bench_request_prompt(ids, n_ids, i, prompt, P);
        st = lm_engine_submit(e, prompt, P, &rp, lm_bench_request_event, &sink, &sink.r[i].id);
    }
    int n_rec = 0;
    int32_t left = 1;
    // 1. the streams' prompts, then LM_BENCH_ARRIVAL_BASE decode steps (the baseline)
    while (st == LM_OK && left > 0 && !streams_have(&sink, N, 1 + LM_BENCH_ARRIVAL_BASE))
        if ((left = step_timed(e, rec, &n_rec, 0)) < 0) st = LM_ERR_STATE;
    // 2. the long prompt arrives; step until its first token (its prefill is done)
    const uint64_t t_arr = lm_time_ns();
    if (st == LM_OK) {
        lm_bench_request_prompt(ids, n_ids, N, prompt, L);
        struct lm_request_params rl = rp;
        rl.max_tokens = 1;
        st = lm_engine_submit(e, prompt, L, &rl, lm_bench_request_event, &sink, &sink.r[N].id);
    }
    while (st == LM_OK && left > 0 && !sink.r[N].done) {
        if ((left = step_timed(e, rec, &n_rec, 1)) < 0) st = LM_ERR_STATE;
        for (int i = 0; i < N && st == LM_OK; i++)
            if (sink.r[i].done)
                st = lm_error_set(LM_ERR_STATE, "bench: arrival: stream %d finished before the "
                                  "%d-token prompt was prefilled", i, L);
    }
    // 3. cancel the streams and drain
    for (int i = 0; i < N; i++) lm_engine_cancel(e, sink.r[i].id);
    while (left > 0) {
        left = lm_engine_step(e);
        if (left < 0 && st == LM_OK) st = LM_ERR_STATE;
    }
    if (st == LM_OK && (sink.bad || sink.r[N].n != 1))
        st = lm_error_set(LM_ERR_STATE, "bench: arrival: %d failed requests, long prompt gave %d tokens",
                          sink.bad, sink.r[N].n);
    if (st != LM_OK) goto done;

    // gaps of the streams: baseline = both ends after every stream's first token and before
    // the arrival; during = ending after the arrival, at the long prompt's first token at latest
    uint64_t t_all_first = 0;
    for (int i = 0; i < N; i++) t_all_first = sink.r[i].t[0] > t_all_first ? sink.r[i].t[0] : t_all_first;
    const uint64_t t_long = sink.r[N].t[0];
    int nb = 0, nd = 0;
    for (int i = 0; i < N; i++) {
        const struct lm_bench_request *q = &sink.r[i];
        const int n = q->n < q->cap ? q->n : q->cap;
        for (int k = 1; k < n; k++) {
            const double g = (double)(q->t[k] - q->t[k - 1]) / 1e6;
            if (q->t[k - 1] >= t_all_first && q->t[k] <= t_arr) gb[nb++] = g;
            else if (q->t[k] > t_arr && q->t[k] <= t_long) gd[nd++] = g;
        }
    }
    out->step_tokens = S;
    out->chunk_tokens = chunk;
    out->gap_base_p50 = lm_bench_percentile(gb, nb, 50);
    out->gap_base_max = lm_bench_percentile(gb, nb, 100);
    out->gap_during_p50 = lm_bench_percentile(gd, nd, 50);
    out->gap_during_max = lm_bench_percentile(gd, nd, 100);
    out->increase = out->gap_during_max - out->gap_base_max;
    out->long_ttft = (double)(t_long - t_arr) / 1e6;
    // step times: decode-only steps of the baseline (N decode tokens), full-chunk steps
    // (N decode tokens + a chunk that fills the budget); without a full chunk (L < chunk),
    // the steps that held the prompt
    int ns = 0;
    for (int i = 0; i < n_rec; i++)
        if (rec[i].during == 0 && rec[i].tokens == N && rec[i].decode == N) sv[ns++] = rec[i].ms;
    out->decode_step = lm_bench_percentile(sv, ns, 50);
    ns = 0;
    for (int i = 0; i < n_rec; i++)
        if (rec[i].during == 1 && rec[i].tokens == S && rec[i].decode == N) sv[ns++] = rec[i].ms;
    out->n_chunk_steps = ns;
    if (ns == 0)
        for (int i = 0; i < n_rec; i++)
            if (rec[i].during == 1 && rec[i].tokens > rec[i].decode) sv[ns++] = rec[i].ms;
    out->chunk_step = lm_bench_percentile(sv, ns, 50);
    out->chunk_step_max = lm_bench_percentile(sv, ns, 100);
done:
    lm_engine_free(e);
    free(sink.r);
    free(t_all);
    free(prompt);
    free(rec);
    free(gb);
    free(gd);
    free(sv);
    return st;
}

void lm_bench_arrival_summarize(const struct lm_bench_arrival_result *runs, int reps,
                                struct lm_bench_arrival_result *out) {
    *out = runs[0];
    out->reps = reps;
    double v[64];
    if (reps > 64) reps = 64;
#define ARR_MED(f)                                                \
    do {                                                          \
        for (int r = 0; r < reps; r++) v[r] = runs[r].f;          \
        out->f = lm_bench_percentile(v, reps, 50);                \
    } while (0)
    ARR_MED(gap_base_max); ARR_MED(gap_base_p50); ARR_MED(gap_during_max);
    ARR_MED(gap_during_p50); ARR_MED(decode_step); ARR_MED(chunk_step);
    ARR_MED(chunk_step_max); ARR_MED(long_ttft);
#undef ARR_MED
    out->increase = out->gap_during_max - out->gap_base_max; // as the table reads
    out->gap_during_max_worst = runs[0].gap_during_max;
    for (int r = 1; r < reps; r++)
        if (runs[r].gap_during_max > out->gap_during_max_worst)
            out->gap_during_max_worst = runs[r].gap_during_max;
}
