// lumen's profiler, as programs drive it (lumen run --profile/--trace, lumen bench
// --breakdown): levels, phases and ops, start and stop, the phase spans a program marks,
// queries of the summary and the writers (their JSONL is read back by src/report).
// docs/profiling.md describes what is recorded; the library's hooks are src/prof/prof.h.
#ifndef LUMEN_PROF_H
#define LUMEN_PROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lumen_status.h"

#ifdef __cplusplus
extern "C" {
#endif

// One level for the whole process:
//   LM_PROF_OFF      nothing recorded
//   LM_PROF_SUMMARY  per (phase, op, layer) aggregates: count, sum, min, max and a
//                    log-bucket histogram (for p95/p99) per thread; no event storage
//   LM_PROF_TRACE    additionally every event appended to the thread's buffer, for
//                    --trace (JSONL, docs/profiling.md) and --perfetto (Chrome trace)
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
    LM_OP_FFN_MOE_ROUTER,  // experts: router matmul, top-k, grouping (and gathering) of tokens
    LM_OP_FFN_MOE_GATE_UP, // experts: gate + up matmuls of the chosen experts, SwiGLU
    LM_OP_FFN_MOE_DOWN,    // experts: down matmuls, weighted sum into the FFN output
    LM_OP_MLA_ABSORB,      // MLA: each head's q_nope through wk_b into the latent space
    LM_OP_MLA_V_UP,        // MLA: each head's latent attention output through wv_b
    LM_OP_COUNT
};

#define LM_PROF_MAX_LAYERS 256
#define LM_PROF_MAX_THREADS 64
#define LM_PROF_MAX_EXPERTS 256 // experts per MoE layer the per-expert profile records

// ---- start and stop
// Allocates buffers for n_threads threads (trace mode: room for max_events per thread,
// older events are NOT overwritten: recording stops and a 'dropped' counter grows).
// max_events = 0 picks the default (1 << 20). Calling it again re-initializes.
enum lm_status lm_prof_init(enum lm_prof_level level, int n_threads, size_t max_events);
void lm_prof_shutdown(void);
// Whether the profiler records: initialized above LM_PROF_OFF, in a build with the
// profiler compiled in (-DLUMEN_PROFILER=OFF builds always say false).
bool lm_prof_enabled(void);
// Events dropped because a thread's trace buffer (or a fixed table) was full.
uint64_t lm_prof_dropped(void);

const char *lm_prof_op_name(enum lm_prof_op op);       // "attn_norm", "qkv", ...
const char *lm_prof_phase_name(enum lm_prof_phase ph); // "prefill", ...

// ---- what a program records (main thread; each is a no-op while the profiler is off)
// A phase span: begin returns its start (0 when off) and tells the summary which phase the
// ops recorded from now on (by any thread) belong to; end records the span up to now.
// step = decode step index (or -1), n_tokens = the entries it ran.
uint64_t lm_prof_phase_begin(enum lm_prof_phase ph);
void lm_prof_phase_end(enum lm_prof_phase ph, uint64_t t0, int32_t step, int32_t n_tokens);
// Kernel variant selection: kernel "dot_q4_K", variant "q4_K_avx512_vnni", reason
// "cpu_feature avx512_vnni". Strings are copied (truncated to 63 bytes).
void lm_prof_variant_rec(const char *kernel, const char *variant, const char *reason);
// The variant of each weight dtype's dot-product kernel m runs on (one lm_prof_variant_rec
// per dtype with such a kernel, in the order of the tensor table).
struct lm_model;
void lm_prof_record_kernels(const struct lm_model *m);
// Memory gauges (bytes), recorded when they change; 0 = unknown.
struct lm_prof_memory {
    uint64_t weights_mapped, kv_cache, scratch, rss, rss_peak;
};
void lm_prof_memory_rec(const struct lm_prof_memory *mem);
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
    int32_t wtype;       // the weights' element type (lm_tensor_type_name)
    int64_t m, n, k;
    const char *variant; // valid until lm_prof_shutdown()
    uint64_t count;      // executions
    double total_ms;     // time on thread 0
    uint64_t bytes;      // total over all executions
};
int lm_prof_matmul_count(void);
bool lm_prof_matmul_get(int i, struct lm_prof_matmul_agg *out);

// Experts of mixture-of-experts layers (any level above off), in two slots: decode steps
// (decode = true) and every other forward pass (prefill, or none begun).
struct lm_prof_moe_expert {
    uint64_t tokens; // (token, expert) slots routed to it
    uint64_t calls;  // forward passes in which it had tokens (its weights were read)
    double ms;       // its gate/up + down matmuls on pool thread 0 (its share of the rows)
};
struct lm_prof_moe_layer {
    uint64_t calls;  // forward passes through the layer
    uint64_t tokens; // tokens routed (each to n_expert_used experts)
    uint64_t distinct; // sum over the calls of the experts touched
    int32_t distinct_min, distinct_max;
};
// Experts per layer recorded so far (0: no MoE layer ran since lm_prof_init).
int lm_prof_moe_n_expert(void);
// false (and *out zeroed) when layer or expert is out of range or nothing was recorded.
bool lm_prof_moe_expert_get(bool decode, int layer, int expert, struct lm_prof_moe_expert *out);
bool lm_prof_moe_layer_get(bool decode, int layer, struct lm_prof_moe_layer *out);

// ---- output
// End-of-run summary (the --profile table) to f.
void lm_prof_print_summary(FILE *f);
// JSONL (schema docs/profiling.md) and Chrome Trace Event JSON (ui.perfetto.dev).
// Both need LM_PROF_TRACE (LM_ERR_STATE otherwise).
enum lm_status lm_prof_write_jsonl(const char *path);
enum lm_status lm_prof_write_perfetto(const char *path);

// ---- the JSONL trace format (read back by `lumen analyze`: src/report/report.h)
#define LM_PROF_JSONL_SCHEMA "lumen-trace"
#define LM_PROF_JSONL_VERSION 3     // written; version 2 added the engine `step` event,
                                    // version 3 the MoE `expert` event

#ifdef __cplusplus
}
#endif
#endif
