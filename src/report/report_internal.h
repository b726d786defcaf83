// Internals of the JSONL trace analyzer shared by the loader (analyze.c), the text report
// (text.c) and the HTML report (html.c).
#ifndef LM_REPORT_REPORT_INTERNAL_H
#define LM_REPORT_REPORT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "report.h"

// A named series of durations (ns) with exact statistics after finalize.
struct lm_rgroup {
    char *key;
    uint64_t *v;
    size_t n, cap;
    double sum;
    // extras: matmul bytes/flops totals, variant counts
    double bytes, flops;
    struct lm_prof_row row; // filled by finalize
};

// Insertion-ordered string -> group map.
struct lm_rsection {
    struct lm_rgroup *g;
    size_t n, cap;
    size_t *slot; // hash slots: index + 1
    size_t n_slot;
};

enum {
    LM_RS_TYPE,
    LM_RS_PHASE,
    LM_RS_PHASE_OP,
    LM_RS_LAYER,
    LM_RS_OP,
    LM_RS_BARRIER_PHASE,
    LM_RS_BARRIER_OP,
    LM_RS_MATMUL,
    LM_RS_VARIANT,  // counts only: "kernel -> variant (reason)"
    LM_RS_MM_VARIANT, // counts only: "op dtype -> variant (reason)"
    LM_RS_STEP,     // per phase and engine step kind: latencies in step order (not sorted)
    LM_RS_STEP_TOKENS, // per engine step: token / sequence counts (not ns)
    LM_RS_EXPERT,   // MoE experts: "expert E" (all layers), time of its gate/up and down spans
    LM_RS_EXPERT_TOKENS, // MoE experts: "expert E", tokens per forward pass it ran in (counts)
    LM_RS_COUNT
};

#define LM_R_LAYERS (LM_PROF_MAX_LAYERS + 1)
enum { LM_RG_ATTN, LM_RG_FFN, LM_RG_OTHER, LM_RG_BARRIER, LM_RG_COUNT };

struct lm_rthread {
    double busy, wait;
    uint64_t n_bar;
};

struct lm_prof_report {
    char *path;
    uint64_t n_events; // event lines (header/end excluded)
    int n_threads;
    uint64_t dropped;
    char clock[32];
    struct lm_rsection sec[LM_RS_COUNT];
    // per phase (LM_PHASE_COUNT = "-"), per layer, time by group (ns, summed over threads)
    double layer_grp[LM_PHASE_COUNT + 1][LM_R_LAYERS][LM_RG_COUNT];
    int max_layer;
    struct lm_rthread th[LM_PROF_MAX_THREADS];
    uint64_t tokens[LM_PHASE_COUNT];
    int version;       // of the file's header
    // engine steps: tokens summed over the steps
    uint64_t step_tokens, step_decode, step_draft, step_accepted;
    // memory gauges: last and peak
    bool have_mem;
    uint64_t mem_last[5], mem_peak[5];
    uint64_t n_mem;
    // decode step latency series (ns, in file order) for the chart
    double *steps;
    size_t n_steps, cap_steps;
};

extern const char *const lm_r_mem_names[5];

// Section name used by lm_prof_report_row ("phase_op", ...).
const char *lm_r_section_name(int sec);
// Groups of a section sorted by total desc (caller frees the array).
struct lm_rgroup **lm_r_sorted(const struct lm_rsection *s, bool by_total);
const struct lm_rgroup *lm_r_find(const struct lm_rsection *s, const char *key);

// ns -> "1.234ms"-style text (adaptive unit).
const char *lm_r_fmt_ms(char *buf, size_t n, double ns);

#endif
