// `lumen bench --parallel LIST`: llama-batched-bench's job on the engine. For each N, N
// requests with distinct prompts are submitted at once and decoded together; aggregate
// decode tokens/s, TTFT and inter-token latency percentiles, the KV memory held, the compute
// roof; with --arrival also a long prompt arriving while the N streams decode (arrival.h).
#ifndef LM_BENCH_PARALLEL_H
#define LM_BENCH_PARALLEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "arrival.h"
#include "lumen.h"
#include "roofline.h"

// The flags only --parallel takes.
struct lm_bench_parallel_opts {
    int arrival;          // --arrival L: a prompt of L tokens arrives while the N streams decode
    int step_tokens;      // --step-tokens S: the engine's step budget (0 = default, see below)
    const char *trace;    // --trace FILE: JSONL of one profiled run (largest N, largest -t)
    const char *perfetto; // --perfetto FILE: the same run for ui.perfetto.dev
    bool profile;         // --profile: that run's profiler summary in the log
    bool lookup;          // --lookup: every request drafts by prompt lookup (docs/speculative.md)
};

// LM_ERR_ARG with the usage message when opts do not fit the run: given without --parallel
// (parallel false), a step budget below the largest N of list[0, n_list), or an arrival
// budget that leaves no prefill chunk beside N decode tokens.
enum lm_status lm_bench_parallel_check(const struct lm_bench_parallel_opts *o, bool parallel,
                                       const int *list, int n_list);

struct lm_bench_parallel_params {
    const int *list; // N values
    int n_list;
    int n_prompt, n_gen, n_threads, reps, warmup;
    int step_tokens; // step budget; 0: N x prompt for the throughput runs (every prompt in the
                     // first step, as llama-batched-bench), 256 for the arrival runs
    int arrival;     // > 0: after each throughput repetition, an arrival run (arrival.h)
    bool roof;       // measure the prefill rate for the compute roof
    // one extra, untimed, profiled run at the largest N (its arrival run with --arrival)
    const char *trace, *perfetto;
    bool profile;
    bool lookup;     // requests with prompt-lookup drafting
    enum lm_kv_type kv_type_k, kv_type_v; // KV cache types of the throughput runs' engine
    struct lm_sampler_params sampling; // every request's chain, the arrival runs' too (bench:
                                       // greedy unless sampling flags are given)
    FILE *log;       // notes (lookup counts, the profiled run's summary and dropped events)
    bool progress;   // and a line per repetition in log
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

// Runs every N of pp->list (results in out[0 .. n_list)); "medians" are nearest-rank p50
// over the repetitions. Failure: the status and message of the first run that failed
// (engine, context, LM_ERR_STATE when a request failed or generated too few tokens, the
// profiler's writers).
enum lm_status lm_bench_parallel_run(struct lm_model *m, const struct lm_bench_model_info *mi,
                                     const struct lm_bench_parallel_params *pp,
                                     struct lm_bench_parallel_result *out);
// The markdown table of one thread count's results, with the notes that define its columns.
void lm_bench_parallel_print_md(FILE *f, const struct lm_bench_model_info *mi,
                                const struct lm_bench_parallel_params *pp,
                                const struct lm_bench_parallel_result *res, int n);
// The results as test objects of the -o json "tests" array (no surrounding brackets; a
// comma after the last one if more follow). median/min/max_ts are gen_tok_s's.
void lm_bench_parallel_print_json_tests(FILE *f, const struct lm_bench_parallel_params *pp,
                                        const struct lm_bench_parallel_result *res, int n,
                                        bool more);

#endif
