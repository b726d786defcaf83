// `lumen bench` as a library: what to measure (struct lm_bench_params, checked and completed
// by lm_bench_params_resolve), one call that measures it all on a loaded model
// (lm_bench_run), and the reports of the result (markdown, CSV, JSON). The command line
// parses flags into the params and prints; the measuring is src/bench/ (roofline.h,
// bandwidth.h, single.h, breakdown.h, parallel.h, arrival.h).
#ifndef LM_BENCH_BENCH_H
#define LM_BENCH_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "bandwidth.h"
#include "breakdown.h"
#include "lumen.h"
#include "parallel.h"
#include "roofline.h"
#include "single.h"

#define LM_BENCH_MAX_LIST 32 // values of one list flag (-p 128,512)

struct lm_bench_list {
    int v[LM_BENCH_MAX_LIST];
    int n; // 0: not given (lm_bench_params_resolve fills the default)
};

enum lm_bench_format { LM_BENCH_MD = 0, LM_BENCH_CSV, LM_BENCH_JSON };

struct lm_bench_params {
    const char *model_path;       // for the reports
    double load_ms;               // the caller's lm_model_load time (reported)
    struct lm_bench_list prompt;  // -p: prefill tests (0 entries skip); --parallel: the prompt
    struct lm_bench_list gen;     // -n: decode tests; --parallel: tokens per request
    struct lm_bench_list threads; // -t
    struct lm_bench_list depth;   // -d: pp and tg tests after this many cached positions
    int reps, warmup;
    int ttft;                     // a TTFT test of this many prompt tokens (0: none)
    int bw_mib;                   // the bandwidth probe's buffer (0: no probe)
    bool breakdown;               // one profiled generation and its report
    struct lm_bench_list parallel; // --parallel: batched runs instead of the pp/tg tests
    struct lm_bench_parallel_opts popt;
    enum lm_kv_type kv_type_k, kv_type_v; // -ctk / -ctv: the KV cache types of every context
    // The sampling flags (the table of `lumen run`): the chain of the tests that sample (the
    // ttft and sample tests, the breakdown's generation, the --parallel and --arrival
    // requests; pp and tg sample nothing). temperature < 0: not given, and
    // lm_bench_params_resolve sets each mode's default: 0.8 (lm_sampler_params_default) for
    // the single-stream tests, 0 (greedy) for --parallel.
    struct lm_sampler_params sampling;
    // while measuring
    FILE *log;                    // progress and notes ("lumen bench: ..." lines; NULL: none)
    bool progress;                // a line per test run and per probe in log
    lm_bench_live_fn live;        // live display of a long single-stream test (single.h)
    void *live_user;
};

// The defaults of `lumen bench` with no flags: reps 5, warmup 1, bw_mib 512, lists empty,
// sampling lm_sampler_params_default() with the temperature not given (-1).
struct lm_bench_params lm_bench_params_default(void);
// Completes p's lists left empty (prompt {512}, or {64} with --parallel; gen {128}; depth
// {0}; threads {physical cores, at most LM_PROF_MAX_THREADS}) and a temperature not given
// (0.8, or 0 with --parallel), and checks what does not fit together.
// LM_ERR_ARG with the usage message ("--parallel takes one -p value >= 1 ...") otherwise.
enum lm_status lm_bench_params_resolve(struct lm_bench_params *p);
// Positions of one sequence the runs of a resolved p need: the longest test, a breakdown's
// prompt + generation, a batched request and its arrival. lm_bench_run needs a model whose
// training context holds them (the caller says which flags to lower when it does not).
int lm_bench_positions(const struct lm_bench_params *p);

struct lm_bench_result {
    struct lm_bench_model_info model;
    struct lm_bench_bw bw[LM_BENCH_MAX_LIST + 1]; // the probe: 1 thread and each -t value
    int n_bw;
    struct lm_bench_test *tests;                  // single-stream runs, in run order
    int n_tests;
    double tg_ref_ts;                             // the tg tok/s the breakdown compares with
    struct lm_bench_breakdown *breakdown;         // with p->breakdown
    struct lm_bench_parallel_params *par_params;  // --parallel: per thread count, per N
    struct lm_bench_parallel_result *par_results;
    int n_par;
};

// Measures everything a resolved p asks for on m. Failure: the first failure's status and
// message (a context, decode, engine, profiler or allocation failure; *out holds what was
// measured until then). p must outlive *out; free *out with lm_bench_result_free either way.
enum lm_status lm_bench_run(struct lm_model *m, const struct lm_bench_params *p,
                            struct lm_bench_result *out);
void lm_bench_result_free(struct lm_bench_result *r);

// The report of a run in fmt to out: the tests table and notes (md), rows (csv) or one
// document (json); with a breakdown its report after the table (md), to err (csv), or as the
// "breakdown" object (json). --parallel runs print their tables (md, csv) or test objects.
void lm_bench_report(const struct lm_bench_params *p, const struct lm_bench_result *r,
                     enum lm_bench_format fmt, FILE *out, FILE *err);

#endif
