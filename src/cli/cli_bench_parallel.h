// `lumen bench --parallel`: batched decode of N sequences on the engine (cli_bench_parallel.c)
// and a long prompt arriving while N streams decode (--arrival, cli_bench_arrival.c).
#ifndef LM_CLI_CLI_BENCH_PARALLEL_H
#define LM_CLI_CLI_BENCH_PARALLEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/cli_bench.h"

// Flags that only --parallel takes (parsed by lm_bench_parallel_flag).
struct lm_bench_parallel_opts {
    int arrival;          // --arrival L: a prompt of L tokens arrives while the N streams decode
    int step_tokens;      // --step-tokens S: the engine's step budget (0 = default, see below)
    const char *trace;    // --trace FILE: JSONL of one profiled run (largest N, largest -t)
    const char *perfetto; // --perfetto FILE: the same run for ui.perfetto.dev
    bool profile;         // --profile: that run's profiler summary on stderr
    bool lookup;          // --lookup: every request drafts by prompt lookup (docs/speculative.md)
};

struct lm_bench_parallel_params {
    const int *list; // N values
    int n_list;
    int n_prompt, n_gen, n_threads, reps, warmup;
    int step_tokens; // step budget; 0: N x prompt for the throughput runs (every prompt in the
                     // first step, as llama-batched-bench), 256 for the arrival runs
    int arrival;     // > 0: after each throughput repetition, an arrival run (cli_bench_arrival.c)
    bool roof;       // measure the prefill rate for the compute roof
    bool progress;
    // one extra, untimed, profiled run at the largest N (its arrival run with --arrival)
    const char *trace, *perfetto;
    bool profile;
    bool lookup;     // requests with prompt-lookup drafting
};

// The --arrival figures of one N (medians over the repetitions, ms).
struct lm_bench_arrival_result {
    int reps;
    int step_tokens, chunk_tokens;   // step budget; prefill tokens of a full chunk (budget - N)
    double gap_base_max, gap_base_p50; // streams' inter-token gaps before the arrival
    double gap_during_max, gap_during_p50; // gaps ending while the long prompt is prefilled
    double gap_during_max_worst;     // the largest gap_during_max of the repetitions
    double decode_step;              // a decode-only step (median, before the arrival)
    double chunk_step, chunk_step_max; // a step holding N decode tokens + a full chunk
    int n_chunk_steps;               // full-chunk steps of one run
    double long_ttft;                // the long prompt: submit to its first token
    double increase;                 // gap_during_max - gap_base_max (of the medians)
};

struct lm_bench_parallel_result {
    int n_seq, reps;
    double gen_tok_s, gen_tok_s_min, gen_tok_s_max; // aggregate, decode phase (median, range)
    double fwd_tok_s, fwd_tok_s_min, fwd_tok_s_max; // the same tokens over the decode steps'
                                                    // forward passes only (no sampling)
    double sample_ms_step;    // sampling + delivery per decode step (median)
    double pp_tok_s;                                // N prompts / time to the last first token
    double ttft_ms_p50, ttft_ms_p99, itl_ms_p50, itl_ms_p99;
    uint64_t kv_bytes;        // peak bytes of the pool in use
    uint64_t kv_tokens_held;  // N x (prompt + generated - 1) at the end
    uint64_t drafted, accepted; // --lookup: drafted / accepted tokens over the repetitions
    uint64_t kv_block_bytes;
    int kv_block_tokens;
    int step_tokens;          // the engine's step budget in the throughput runs
    double prefill_tok_s, roof_tok_s, roof_frac; // NAN without the roof
    int roof_prompt;          // prefill tokens of the roof's rate (512, or the model's context)
    bool has_arrival;
    struct lm_bench_arrival_result arr;
};

// Consumes argv[*i] (and its value) if it is one of the --parallel-only flags; usage
// error (exit 2) on a bad value. Returns false for any other argument.
bool lm_bench_parallel_flag(const char *cmd, int argc, char **argv, int *i,
                            struct lm_bench_parallel_opts *o);
// Usage errors for opts that do not fit the run (without --parallel, step budget too small).
void lm_bench_parallel_check(const char *cmd, const struct lm_bench_parallel_opts *o,
                             bool parallel, const int64_t *list, int n_list);

// Runs every N of pp->list (results in out[0 .. n_list)).
enum lm_status lm_bench_parallel_run(struct lm_model *m, const struct lm_bench_model_info *mi,
                                     const struct lm_bench_parallel_params *pp,
                                     struct lm_bench_parallel_result *out);
void lm_bench_parallel_print_md(FILE *f, const struct lm_bench_model_info *mi,
                                const struct lm_bench_parallel_params *pp,
                                const struct lm_bench_parallel_result *res, int n);
// The results as test objects of the -o json "tests" array (no surrounding brackets; a
// comma after the last one if more follow). median/min/max_ts are gen_tok_s's.
void lm_bench_parallel_print_json_tests(FILE *f, const struct lm_bench_parallel_params *pp,
                                        const struct lm_bench_parallel_result *res, int n,
                                        bool more);

// ---- internals shared by cli_bench_parallel.c and cli_bench_arrival.c
#define LM_BENCH_ARRIVAL_STEP_TOKENS 256 // arrival runs' default step budget (the engine's default)
#define LM_BENCH_ARRIVAL_BASE 32         // decode steps of the streams before the arrival
// Token timestamps of the requests of one run, filled by lm_bench_par_event.
struct lm_bench_par_req {
    uint64_t id;
    uint64_t *t;    // [cap] CLOCK_MONOTONIC ns of each generated token
    int n, cap;
    bool done;      // its last event came
};
struct lm_bench_par_sink {
    struct lm_bench_par_req *r;
    int n_req;
    int bad;        // events of unknown requests, errors
    int cancelled;
};
void lm_bench_par_event(void *user, const struct lm_event *ev);
// p-th percentile (0..100) of v[0, n), nearest rank; v is sorted in place. NAN if n == 0.
double lm_bench_pct(double *v, int n, double p);
// Prompt i of a run: BOS + the text from a different offset per i (n_ids > 1 ids).
void lm_bench_par_prompt(const int32_t *ids, int n_ids, int i, int32_t *out, int n);
// One arrival run at N streams (cli_bench_arrival.c); fills one repetition's figures.
enum lm_status lm_bench_arrival_once(struct lm_model *m, const int32_t *ids, int n_ids,
                                     const struct lm_bench_parallel_params *pp, int N,
                                     struct lm_bench_arrival_result *out);

#endif
