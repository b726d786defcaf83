// `lumen bench --parallel`: batched decode of N sequences on the engine (cli_bench_parallel.c).
#ifndef LM_CLI_CLI_BENCH_PARALLEL_H
#define LM_CLI_CLI_BENCH_PARALLEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/cli_bench.h"

struct lm_bench_parallel_params {
    const int *list; // N values
    int n_list;
    int n_prompt, n_gen, n_threads, reps, warmup;
    bool roof;       // measure the prefill rate for the compute roof
    bool progress;
};

struct lm_bench_parallel_result {
    int n_seq, reps;
    double gen_tok_s, gen_tok_s_min, gen_tok_s_max; // aggregate, decode phase (median, range)
    double pp_tok_s;                                // N prompts / time to the last first token
    double ttft_ms_p50, ttft_ms_p99, itl_ms_p50, itl_ms_p99;
    uint64_t kv_bytes;        // peak bytes of the pool in use
    uint64_t kv_tokens_held;  // N x (prompt + generated - 1) at the end
    uint64_t kv_block_bytes;
    int kv_block_tokens;
    double prefill_tok_s, roof_tok_s, roof_frac; // NAN without the roof
};

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

#endif
