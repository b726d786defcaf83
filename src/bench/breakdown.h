// `lumen bench --breakdown`: one profiled generation (the profiler in SUMMARY mode) and its
// report: phases, prefill and decode by component, per-layer attention vs FFN, matmul
// shapes, and a bottleneck analysis whose every statement cites a measured number.
#ifndef LM_BENCH_BREAKDOWN_H
#define LM_BENCH_BREAKDOWN_H

#include <stdio.h>

#include "bandwidth.h"
#include "lumen.h"
#include "roofline.h"

struct lm_bench_breakdown_params {
    int n_threads;
    int n_prompt, n_gen;
    int depth;               // positions filled (unprofiled) before the prompt (-d)
    int warmup;              // > 0: one unprofiled prompt + 4 steps first
    double tg_ref_ts;        // tg tok/s of the unprofiled tests at n_threads (0 = none)
    struct lm_sampler_params sampling; // the generation's chain (bench: the default chain
                                       // unless sampling flags are given)
};
struct lm_bench_breakdown; // the measured run and its analysis (opaque)

// Runs the profiled generation and computes the report; prints nothing. Starts and shuts
// down the profiler (one running elsewhere is lost). mi and bw must outlive *out. Failure:
// *out NULL, the status and message of what failed (context, decode, profiler, memory).
enum lm_status lm_bench_breakdown_run(struct lm_model *m, const struct lm_bench_model_info *mi,
                                      const struct lm_bench_bw *bw, int n_bw,
                                      const struct lm_bench_breakdown_params *p,
                                      struct lm_bench_breakdown **out);
void lm_bench_breakdown_print(const struct lm_bench_breakdown *b, FILE *f);      // text
void lm_bench_breakdown_print_json(const struct lm_bench_breakdown *b, FILE *f); // one object
void lm_bench_breakdown_free(struct lm_bench_breakdown *b);                       // NULL is fine

#endif
