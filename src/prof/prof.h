// Built-in profiler, the library's side: the hot-path hooks the forward pass and the engine
// call (phases, per-layer ops, barrier waits, matmul shapes/variants, engine steps, memory).
// Recording is lock-free into per-thread buffers sized up front; the level is a process-wide
// switch read once per op (off = one predictable branch). Levels, start/stop, queries and
// writers are the public include/lumen_prof.h; the analyzer is src/report.
#ifndef LM_PROF_PROF_H
#define LM_PROF_PROF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/status.h"
#include "lumen_prof.h" // levels, phases, ops, init/shutdown, queries, writers
#include "tensor/dtype.h"

// Process-wide level; set before a run with lm_prof_init().
extern int lm_prof_level_g;

// Cheap timestamp: rdtsc where invariant TSC exists (constant_tsc + nonstop_tsc in
// /proc/cpuinfo), else CLOCK_MONOTONIC_RAW; lm_prof_ticks_to_ns() uses the
// calibration done in lm_prof_init(). Inline: a single rdtsc in the hot path.
extern int lm_prof_use_tsc_g;
uint64_t lm_prof_ticks_slow(void); // clock_gettime(CLOCK_MONOTONIC_RAW) in ns
static inline uint64_t lm_prof_ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_expect(lm_prof_use_tsc_g, 1)) return __builtin_ia32_rdtsc();
#endif
    return lm_prof_ticks_slow();
}
double lm_prof_ticks_to_ns(uint64_t ticks);
// Timestamp only when profiling is on (0 otherwise): `uint64_t t0 = lm_prof_now();`
// Built with -DLUMEN_PROFILER=OFF (LM_PROF_COMPILED_OUT), every hook folds to nothing:
// the reference point for the "compiled in but off" overhead benchmark.
#ifdef LM_PROF_COMPILED_OUT
static inline uint64_t lm_prof_now(void) { return 0; }
static inline bool lm_prof_on(void) { return false; }
#else
static inline uint64_t lm_prof_now(void) {
    return __builtin_expect(lm_prof_level_g != LM_PROF_OFF, 0) ? lm_prof_ticks() : 0;
}
static inline bool lm_prof_on(void) { return __builtin_expect(lm_prof_level_g != LM_PROF_OFF, 0); }
#endif

// ---- recording (hot path; all are no-ops when the level is OFF)
// The out-of-line *_rec functions do the work; the inline wrappers keep the OFF
// path to one branch at the call site.
void lm_prof_phase_rec(enum lm_prof_phase ph, uint64_t t0, uint64_t t1, int32_t step,
                       int32_t n_tokens);
void lm_prof_op_rec(int ith, enum lm_prof_op op, int layer, uint64_t t0, uint64_t t1);
void lm_prof_barrier_rec(int ith, enum lm_prof_op after_op, int layer, uint64_t t0,
                         uint64_t t1);

// lm_prof_phase_begin (lumen_prof.h) marks the phase the ops recorded from now on belong
// to in the summary aggregates; ops recorded with no phase begun go to phase "-" (the trace
// writers re-attribute ops to phases by time containment anyway).
extern volatile int lm_prof_cur_phase_g;

// Main thread: phase spans. step = decode step index (or -1), n_tokens = entries.
static inline void lm_prof_phase(enum lm_prof_phase ph, uint64_t t0, uint64_t t1,
                                 int32_t step, int32_t n_tokens) {
    if (lm_prof_on()) lm_prof_phase_rec(ph, t0, t1, step, n_tokens);
}
// Any pool thread: one op's compute span on that thread (before the barrier that
// follows it), and that barrier's wait span.
static inline void lm_prof_op(int ith, enum lm_prof_op op, int layer, uint64_t t0,
                              uint64_t t1) {
    if (lm_prof_on()) lm_prof_op_rec(ith, op, layer, t0, t1);
}
static inline void lm_prof_barrier(int ith, enum lm_prof_op after_op, int layer,
                                   uint64_t t0, uint64_t t1) {
    if (lm_prof_on()) lm_prof_barrier_rec(ith, after_op, layer, t0, t1);
}

// Matmul description, recorded by thread 0 (the caller) once per matmul execution
// (not once per thread): t0..t1 = the matmul's span on thread 0. Strings are copied
// (truncated to 63 bytes), so stack buffers are fine.
struct lm_prof_matmul {
    enum lm_prof_op op;
    int layer;
    const char *weight;  // "blk.3.attn_q.weight"-style name ("" if unknown)
    int64_t m, n, k;     // W (m, k) @ X^T (k, n): m = out features, n = tokens, k = in
    enum lm_dtype wtype;
    const char *variant; // kernel variant, e.g. "q5_0_avx512_vnni"
    const char *reason;  // why this variant, e.g. "cpu_feature avx512_vnni"
    uint64_t bytes;      // weight bytes + activation bytes moved
    uint64_t flops;      // 2*m*n*k
};
void lm_prof_matmul_shape_rec(const struct lm_prof_matmul *mm, uint64_t t0, uint64_t t1);
static inline void lm_prof_matmul_shape(const struct lm_prof_matmul *mm, uint64_t t0,
                                        uint64_t t1) {
    if (lm_prof_on()) lm_prof_matmul_shape_rec(mm, t0, t1);
}

// Kernel variant selection (main thread, when a dispatch decision is made, e.g. at
// start-up): lm_prof_variant_rec of lumen_prof.h.
static inline void lm_prof_variant(const char *kernel, const char *variant,
                                   const char *reason) {
    if (lm_prof_on()) lm_prof_variant_rec(kernel, variant, reason);
}

// Engine step (lm_engine_step, on the thread running the steps = pool thread 0): one per
// step that ran a batch. t0..t1 spans the whole step (intake, admission, batch, forward
// pass, sampling and delivery); the forward pass inside it is a prefill phase (the step
// holds prefill tokens) or a decode phase (decode tokens only) whose step is this step's
// index, so the ops recorded during it carry that index in the trace.
struct lm_prof_step {
    int32_t step;      // engine step index (0, 1, ...)
    int32_t n_tokens;  // batch entries
    int32_t n_decode;  // of which decode tokens (one per decoding request); the rest prefill
    int32_t n_seqs;    // sequences (requests) in the batch
    int32_t n_draft;   // speculative drafts verified (not decode, not prefill; <= 255)
    int32_t n_accepted;// of which accepted
};
void lm_prof_step_rec(const struct lm_prof_step *st, uint64_t t0, uint64_t t1);
static inline void lm_prof_step(const struct lm_prof_step *st, uint64_t t0, uint64_t t1) {
    if (lm_prof_on()) lm_prof_step_rec(st, t0, t1);
}

// Experts of a MoE layer (runtime/ops_moe.c, pool thread 0 only). route: once per layer
// and forward pass, with the grouped routing (off[e + 1] - off[e] slots of expert e, of
// n_expert) of n_tokens tokens; expert: one expert's share of op (LM_OP_FFN_MOE_GATE_UP or
// _DOWN) on thread 0, t0..t1, over its n_tokens tokens.
void lm_prof_moe_route_rec(int layer, int n_expert, const int32_t *off, int64_t n_tokens);
void lm_prof_expert_rec(enum lm_prof_op op, int layer, int expert, int32_t n_tokens, uint64_t t0,
                        uint64_t t1);
static inline void lm_prof_moe_route(int layer, int n_expert, const int32_t *off, int64_t n_tokens) {
    if (lm_prof_on()) lm_prof_moe_route_rec(layer, n_expert, off, n_tokens);
}

// Memory gauges (main thread, when they change): lm_prof_memory_rec of lumen_prof.h.
static inline void lm_prof_memory(const struct lm_prof_memory *mem) {
    if (lm_prof_on()) lm_prof_memory_rec(mem);
}

#endif
