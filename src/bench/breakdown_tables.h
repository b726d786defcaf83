// Two tables of `lumen bench --breakdown` beside its components: decode matmul time by the
// weights' dtype (which kernels the time goes to), and the experts of MoE layers (tokens
// per expert, experts touched per forward pass, the experts' matmul time). Read from the
// profiler's aggregates before it shuts down.
#ifndef LM_BENCH_BREAKDOWN_TABLES_H
#define LM_BENCH_BREAKDOWN_TABLES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define LM_BD_MAX_DTYPE 12
#define LM_BD_TOP_EXPERTS 8

struct lm_bd_dtype {
    char dtype[16];
    uint64_t count;  // decode matmul executions (n = 1 shapes)
    double ms;       // their time on thread 0
    uint64_t bytes;  // weight + activation bytes they moved
};

struct lm_bd_moe_phase {         // one slot of the profiler's expert aggregates
    uint64_t passes, tokens, distinct; // summed over the MoE layers
    int32_t distinct_min, distinct_max;
    double ms;                   // experts' matmuls on thread 0
    uint64_t pairs, pairs_unused, tokens_max, tokens_median; // over (layer, expert) pairs
    struct { int layer, expert; uint64_t tokens; double ms; } top[LM_BD_TOP_EXPERTS];
    int n_top;                   // by tokens, then time
};

struct lm_bd_tables {
    struct lm_bd_dtype dt[LM_BD_MAX_DTYPE];
    int n_dt;
    int moe_n_expert, moe_n_layer, moe_used; // 0 experts: no MoE layer ran
    struct lm_bd_moe_phase moe[2]; // [0] prefill (every pass not a decode step), [1] decode
};

// Fills *t from the profiler (SUMMARY or TRACE, still initialized); n_used: experts per token.
// Cannot fail (a table that does not fit is truncated).
void lm_bd_tables_collect(struct lm_bd_tables *t, int n_layer, int n_used);
// Text tables; dec_ms / pre_ms the decode and prefill wall times they are shares of.
void lm_bd_tables_print(const struct lm_bd_tables *t, double dec_ms, double pre_ms, FILE *f);
// ", \"matmul_by_dtype\": [...], \"moe\": {...} or null" members of the breakdown object.
void lm_bd_tables_print_json(const struct lm_bd_tables *t, FILE *f);

#endif
