// Built-in profiler: phases, per-layer ops, matmul shapes/variants, barrier waits,
// memory. Recording is lock-free into per-thread buffers sized up front; the level
// is a process-wide switch read once per op (off = one predictable branch).
//   LM_PROF_OFF      nothing recorded
//   LM_PROF_SUMMARY  per (phase, op, layer) aggregates: count, sum, min, max and a
//                    log-bucket histogram (for p95/p99) per thread; no event storage
//   LM_PROF_TRACE    additionally every event appended to the thread's buffer, for
//                    --trace (JSONL, docs/profiling.md) and --perfetto (Chrome trace)
#ifndef LM_PROF_PROF_H
#define LM_PROF_PROF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/status.h"
#include "tensor/dtype.h"

enum lm_prof_level { LM_PROF_OFF = 0, LM_PROF_SUMMARY = 1, LM_PROF_TRACE = 2 };

// Phases of a run (top level of the nesting phase / block_N / op).
enum lm_prof_phase {
    LM_PHASE_LOAD = 0,   // mmap + validate + prepare
    LM_PHASE_TOKENIZE,
    LM_PHASE_PREFILL,    // one lm_decode over prompt entries
    LM_PHASE_DECODE,     // one lm_decode of a generation step
    LM_PHASE_SAMPLE,
    LM_PHASE_DETOKENIZE,
    LM_PHASE_DRAFT,      // one lm_decode of a draft model (speculative decoding, -md)
    LM_PHASE_COUNT
};

// Ops of the forward pass; each instance is named with its layer (-1 = not per layer).
enum lm_prof_op {
    LM_OP_EMBED = 0,
    LM_OP_ATTN_NORM,
    LM_OP_QKV,          // q/k/v matmuls (one fused op: shared activation quantization)
    LM_OP_QK_NORM,
    LM_OP_ROPE,
    LM_OP_KV_WRITE,
    LM_OP_ATTENTION,
    LM_OP_O_PROJ,
    LM_OP_POST_ATTN_NORM,
    LM_OP_ATTN_RESIDUAL,
    LM_OP_FFN_NORM,
    LM_OP_GATE_UP,      // gate + up matmuls (fused)
    LM_OP_ACTIVATION,   // GELU/SiLU gating
    LM_OP_DOWN,
    LM_OP_POST_FFW_NORM,
    LM_OP_FFN_RESIDUAL,
    LM_OP_OUTPUT_NORM,
    LM_OP_LM_HEAD,
    LM_OP_COUNT
};

#define LM_PROF_MAX_LAYERS 256
#define LM_PROF_MAX_THREADS 64

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

// Allocates buffers for n_threads threads (trace mode: room for max_events per thread,
// older events are NOT overwritten: recording stops and a 'dropped' counter grows).
// max_events = 0 picks the default (1 << 20). Calling it again re-initializes.
enum lm_status lm_prof_init(enum lm_prof_level level, int n_threads, size_t max_events);
void lm_prof_shutdown(void);
// Events dropped because a thread's trace buffer (or a fixed table) was full.
uint64_t lm_prof_dropped(void);

const char *lm_prof_op_name(enum lm_prof_op op);       // "attn_norm", "qkv", ...
const char *lm_prof_phase_name(enum lm_prof_phase ph); // "prefill", ...

// ---- recording (hot path; all are no-ops when the level is OFF)
// The out-of-line *_rec functions do the work; the inline wrappers keep the OFF
// path to one branch at the call site.
void lm_prof_phase_rec(enum lm_prof_phase ph, uint64_t t0, uint64_t t1, int32_t step,
                       int32_t n_tokens);
void lm_prof_op_rec(int ith, enum lm_prof_op op, int layer, uint64_t t0, uint64_t t1);
void lm_prof_barrier_rec(int ith, enum lm_prof_op after_op, int layer, uint64_t t0,
                         uint64_t t1);

// Main thread, at the start of a phase: marks the phase that the ops recorded from
// now on (by any thread) belong to in the summary aggregates, and returns its t0.
// Ops recorded with no phase begun are attributed to phase "-" in the summary (the
// trace writers re-attribute ops to phases by time containment anyway).
uint64_t lm_prof_phase_begin(enum lm_prof_phase ph);
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
// start-up): kernel "dot_q4_K", variant "avx512_vnni", reason "cpu_feature avx512_vnni".
void lm_prof_variant_rec(const char *kernel, const char *variant, const char *reason);
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

// Memory gauges (bytes), recorded (main thread) when they change; 0 = unknown.
struct lm_prof_memory {
    uint64_t weights_mapped, kv_cache, scratch, rss, rss_peak;
};
void lm_prof_memory_rec(const struct lm_prof_memory *mem);
static inline void lm_prof_memory(const struct lm_prof_memory *mem) {
    if (lm_prof_on()) lm_prof_memory_rec(mem);
}
// Current RSS and peak RSS of the process from /proc/self/status (0 if unavailable).
void lm_prof_read_rss(uint64_t *rss, uint64_t *rss_peak);

// ---- queries on the in-memory SUMMARY aggregates (for lumen bench --breakdown)
// Total ms of op in phase ph at layer (-1 = not per layer): its compute spans, or with
// barrier = true the waits at the barrier after it; averaged over the pool threads.
// *count (if not NULL) is incremented by the number of executions on thread 0.
double lm_prof_query_ms(enum lm_prof_phase ph, enum lm_prof_op op, int layer, bool barrier,
                        uint64_t *count);
// Matmul shape x variant aggregates over the whole run.
struct lm_prof_matmul_agg {
    enum lm_prof_op op;
    enum lm_dtype wtype;
    int64_t m, n, k;
    const char *variant; // valid until lm_prof_shutdown()
    uint64_t count;      // executions
    double total_ms;     // time on thread 0
    uint64_t bytes;      // total over all executions
};
int lm_prof_matmul_count(void);
bool lm_prof_matmul_get(int i, struct lm_prof_matmul_agg *out);

// ---- output
// End-of-run summary (the --profile table) to f.
void lm_prof_print_summary(FILE *f);
// JSONL (schema docs/profiling.md) and Chrome Trace Event JSON (ui.perfetto.dev).
// Both need LM_PROF_TRACE (LM_ERR_STATE otherwise).
enum lm_status lm_prof_write_jsonl(const char *path);
enum lm_status lm_prof_write_perfetto(const char *path);

// ---- analysis of a JSONL trace (`lumen analyze`)
#define LM_PROF_JSONL_SCHEMA "lumen-trace"
#define LM_PROF_JSONL_VERSION 2     // written; version 2 added the engine `step` event
#define LM_PROF_JSONL_VERSION_MIN 1 // oldest version the analyzer reads

struct lm_prof_report;
// Reads and validates path; on malformed input returns LM_ERR_FORMAT (or
// LM_ERR_UNSUPPORTED for another version) with "path:LINE: what" in lm_error_msg().
enum lm_status lm_prof_report_load(const char *path, struct lm_prof_report **out);
void lm_prof_report_free(struct lm_prof_report *r);
// The text report (seeds 000/001 style; every timing row count | total | avg | min |
// max | p95 | p99, percentiles exact, nearest-rank).
void lm_prof_report_print(const struct lm_prof_report *r, FILE *f);
// One self-contained HTML page (inline CSS + SVG charts, no network).
enum lm_status lm_prof_report_write_html(const struct lm_prof_report *r, const char *path);

// One timing row, in ns.
struct lm_prof_row {
    uint64_t count;
    double total, avg, min, max, p95, p99;
};
// Looks up a row of a report section for tests and tools. Sections and keys:
//   "type" (event type), "phase" ("decode"), "phase_op" ("decode :: qkv"),
//   "layer" ("decode :: block_3"), "op" ("qkv"), "barrier_phase" ("decode"),
//   "barrier_op" ("decode :: qkv"), "matmul" ("qkv m=1024 n=1 k=640 q4_K avx2"),
//   "step" (latency of each phase span, key "decode" / "prefill" / ...; of engine steps,
//   keys "engine" (all), "engine decode only", "engine with prefill"),
//   "step_tokens" (per engine step, values are counts, not ns: keys "tokens", "decode",
//   "prefill", "seqs"; total = sum over the steps).
bool lm_prof_report_row(const struct lm_prof_report *r, const char *section,
                        const char *key, struct lm_prof_row *out);

#endif
