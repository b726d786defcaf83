// The result of `lumen bench --breakdown` as its run and analysis (breakdown.c) and its text
// and JSON reports (breakdown_print.c) share it: phases, components, matmul shapes, findings.
#ifndef LM_BENCH_BREAKDOWN_INTERNAL_H
#define LM_BENCH_BREAKDOWN_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "breakdown.h"
#include "breakdown_tables.h"

enum { BD_TOKENIZE = 0, BD_PREFILL, BD_SAMPLE, BD_DECODE, BD_DETOK, BD_NPH };
// "1. Tokenization (encode)", ...: the phases' rows in the report, numbered in run order
extern const char *const lm_bd_ph_label[BD_NPH];

#define BD_MAX_COMP 16
#define BD_MAX_MM 32
#define BD_MAX_LINES 16
#define BD_LINE 480

struct bd_comp {
    const char *name;
    double ms;       // decode total, mean over threads
    double pre_ms;   // prefill total, mean over threads
    uint64_t bytes;  // weight bytes per step read by it (matmuls), else 0
};

struct bd_mm {
    char op[24], dtype[16], variant[64];
    int64_t m, n, k;
    uint64_t count;
    double ms, gbps;
};

struct lm_bench_breakdown {
    const struct lm_bench_model_info *mi;
    int n_threads, n_prompt, n_gen, n_tok_text;
    int depth;        // cached positions before the prompt
    struct lm_sampler_params sampling; // the generation's chain
    double kv_tok;    // KV bytes a decode step read, mean over the steps
    double ph_ms[BD_NPH];
    int ph_count[BD_NPH];
    double ttft_ms, total_ms;
    char output[200];
    // per-op data (profiler)
    bool have_ops, have_prof_barriers;
    int n_layer;
    double *l_attn, *l_ffn; // [n_layer] decode ms (compute + barrier waits), thread means
    struct bd_comp comp[BD_MAX_COMP];
    int n_comp;
    double ops_ms, bar_ms, other_ms;
    bool have_pre_ops;              // prefill op spans recorded
    double pre_bar_ms, pre_other_ms; // prefill barrier waits / time outside recorded ops
    uint64_t n_barriers; // decode, thread 0
    struct bd_mm mm[BD_MAX_MM];
    int n_mm;
    struct lm_bd_tables tables; // decode matmuls by dtype, MoE experts
    // derived
    double dec_ts, pre_ts, dec_ms_tok, bytes_tok, ach_gbps, bw_gbps, roof_frac, tg_ref_ts;
    char find[BD_MAX_LINES][BD_LINE];
    int n_find;
    char sugg[BD_MAX_LINES][BD_LINE];
    int n_sugg;
    const char *primary;
};

static inline double bd_pct(double x, double tot) { return tot > 0 ? 100.0 * x / tot : 0.0; }

#endif
