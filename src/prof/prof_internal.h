// Profiler internals shared by the recorder (prof.c) and the writers (prof_write.c):
// per-thread aggregate/event buffers, the log-bucket histogram, the main-thread tables.
#ifndef LM_PROF_PROF_INTERNAL_H
#define LM_PROF_PROF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "prof/prof.h"

// ---- log-scale histogram over ticks: values < 8 exact, then 8 sub-buckets per power
// of two (relative bucket width 1/8: p95/p99 from it are within ~6%).
#define LM_PROF_HIST_BUCKETS 392 // (48 - 2) * 8 covers up to 2^48 ticks
struct lm_prof_hist {
    uint32_t b[LM_PROF_HIST_BUCKETS];
};
static inline int lm_prof_hist_index(uint64_t x) {
    if (x < 8) return (int)x;
    int b = 63 - __builtin_clzll(x);
    if (b > 47) return LM_PROF_HIST_BUCKETS - 1;
    return (b - 2) * 8 + (int)((x >> (b - 3)) & 7);
}
// Lower and upper (exclusive) bound of bucket i, in ticks.
void lm_prof_hist_bounds(int i, double *lo, double *hi);
// Estimated value at quantile q (0..1, nearest-rank over the bucket counts), clamped
// to [min, max]; in ticks.
double lm_prof_hist_quantile(const struct lm_prof_hist *h, uint64_t n, double q,
                             uint64_t min, uint64_t max);

struct lm_prof_stat {
    uint64_t n, sum, min, max; // ticks; min valid when n > 0
};
static inline void lm_prof_stat_add(struct lm_prof_stat *s, uint64_t d) {
    if (s->n == 0 || d < s->min) s->min = d;
    if (d > s->max) s->max = d;
    s->n++;
    s->sum += d;
}
void lm_prof_stat_merge(struct lm_prof_stat *dst, const struct lm_prof_stat *src);

// ---- trace events (32 bytes)
enum lm_prof_ev_type {
    LM_EV_PHASE = 1,
    LM_EV_OP,
    LM_EV_BARRIER,
    LM_EV_MATMUL,  // a = index into the matmul descriptor table
    LM_EV_VARIANT, // a = index into the variant table
    LM_EV_MEMORY,  // a = index into the memory log
    LM_EV_STEP,    // engine step: a = step, b = n_tokens, layer = n_decode, c = n_seqs
    LM_EV_EXPERT,  // one expert's share of a MoE op on thread 0: code = op, a = expert,
                   // b = its tokens
};
struct lm_prof_ev {
    uint64_t t0, t1;
    int32_t a;       // phase/step: step; matmul/variant/memory: table index
    int32_t b;       // phase/step: n_tokens
    int16_t layer;   // op/barrier/matmul; step: n_decode
    uint8_t type;    // enum lm_prof_ev_type
    uint8_t code;    // op (op/barrier/matmul) or phase (phase)
    uint8_t phase;   // phase current at record time (LM_PHASE_COUNT = none)
    uint8_t pad;     // step: n_accepted
    uint16_t c;      // step: n_seqs (code: n_draft)
};
_Static_assert(sizeof(struct lm_prof_ev) == 32, "trace events stay 32 bytes");

// Phase slots of the op aggregates: the phases plus "none".
#define LM_PROF_NPH (LM_PHASE_COUNT + 1)
#define LM_PROF_NL (LM_PROF_MAX_LAYERS + 1) // slot 0 = layer -1 (not per layer)

// Per-thread state; each thread writes only its own (64-byte aligned: no false sharing).
struct lm_prof_thread {
    struct lm_prof_stat *op;       // [NPH][OP_COUNT][NL]
    struct lm_prof_stat *bar;      // [NPH][OP_COUNT][NL]
    struct lm_prof_hist *op_hist;  // [NPH][OP_COUNT]
    struct lm_prof_hist *bar_hist; // [NPH][OP_COUNT]
    struct lm_prof_ev *ev;         // trace events
    size_t n_ev, cap_ev;
    uint64_t dropped;
    uint64_t busy, wait, n_bar;    // totals over the run
} __attribute__((aligned(64)));

static inline size_t lm_prof_slot(int ph, int op, int layer) {
    int l = layer < 0 ? 0 : (layer >= LM_PROF_MAX_LAYERS ? LM_PROF_MAX_LAYERS : layer + 1);
    return ((size_t)ph * LM_OP_COUNT + (size_t)op) * LM_PROF_NL + (size_t)l;
}

#define LM_PROF_STR 64
// Matmul descriptor (one per distinct op/layer/shape/variant; trace events point here).
struct lm_prof_mm_desc {
    int op, layer, wtype;
    int64_t m, n, k;
    uint64_t bytes, flops;
    char weight[LM_PROF_STR], variant[LM_PROF_STR], reason[LM_PROF_STR];
    uint64_t hash;
    int sum;            // index of the shape x variant summary entry
};
// Shape x variant summary entry (aggregated over layers).
struct lm_prof_mm_sum {
    int op, wtype;
    int64_t m, n, k;
    char variant[LM_PROF_STR], reason[LM_PROF_STR];
    uint64_t bytes, flops; // totals over all executions
    struct lm_prof_stat st;
    struct lm_prof_hist hist;
};
struct lm_prof_variant_ent {
    char kernel[LM_PROF_STR], variant[LM_PROF_STR], reason[LM_PROF_STR];
    uint64_t count;
};
struct lm_prof_mem_ent {
    uint64_t t;
    struct lm_prof_memory m;
};

// Experts of MoE layers: aggregates in two slots, decode steps and everything else
// (prefill), per layer and expert (experts beyond LM_PROF_MAX_EXPERTS are not recorded).
#define LM_PROF_MOE_SLOTS 2
struct lm_prof_moe_cell {
    uint64_t tokens, calls, ticks; // tokens routed, forward passes it ran in, thread 0's ticks
};
struct lm_prof_moe_layer_agg {
    uint64_t calls, tokens, distinct; // forward passes, tokens, sum of experts touched
    int32_t distinct_min, distinct_max;
};
static inline size_t lm_prof_moe_slot(int slot, int layer, int expert) {
    return ((size_t)slot * LM_PROF_MAX_LAYERS + (size_t)layer) * LM_PROF_MAX_EXPERTS + (size_t)expert;
}

#define LM_PROF_MM_DESC_CAP 8192 // power of two (open addressing)
#define LM_PROF_MM_SUM_CAP 512
#define LM_PROF_VARIANT_CAP 256
#define LM_PROF_MEM_CAP 4096

struct lm_prof_state {
    int level, n_threads;
    uint64_t epoch;          // ticks at init
    double ns_per_tick;
    struct lm_prof_thread *th; // [n_threads]
    // main thread only
    struct lm_prof_stat phase[LM_PHASE_COUNT];
    struct lm_prof_hist phase_hist[LM_PHASE_COUNT];
    uint64_t phase_tokens[LM_PHASE_COUNT];
    // engine steps: [0] decode tokens only, [1] holding prefill tokens
    struct lm_prof_stat step[2];
    struct lm_prof_hist step_hist[2];
    uint64_t step_tokens, step_decode, step_seqs; // sums over the steps
    uint64_t step_draft, step_accepted, step_verify; // drafts, accepted, steps with drafts
    int32_t step_tok_min, step_tok_max;
    struct lm_prof_mm_desc *mm_desc; // [MM_DESC_CAP], hash table
    int *mm_desc_slot;               // hash slot -> desc index + 1
    int n_mm_desc;
    struct lm_prof_mm_sum *mm_sum;   // [MM_SUM_CAP]
    int n_mm_sum;
    struct lm_prof_variant_ent *var; // [VARIANT_CAP]
    int n_var;
    struct lm_prof_mem_ent *mem;     // [MEM_CAP]
    int n_mem;
    struct lm_prof_memory mem_last, mem_peak;
    bool have_mem;
    uint64_t dropped_main;           // table overflow
    // MoE layers (pool thread 0 records): [SLOTS][MAX_LAYERS][MAX_EXPERTS], [SLOTS][MAX_LAYERS]
    struct lm_prof_moe_cell *moe;
    struct lm_prof_moe_layer_agg *moe_layer;
    int moe_n_expert, moe_n_layer;   // the most recorded (0: no MoE layer ran)
};
extern struct lm_prof_state lm_prof_g;

static inline uint64_t lm_prof_to_ns(uint64_t ticks) {
    return (uint64_t)((double)ticks * lm_prof_g.ns_per_tick + 0.5);
}
// ns since init of an absolute tick value (0 if before init).
static inline uint64_t lm_prof_ts_ns(uint64_t t) {
    return t > lm_prof_g.epoch ? lm_prof_to_ns(t - lm_prof_g.epoch) : 0;
}

#endif
