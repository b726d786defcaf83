// The model as the bench reports it: llama-bench's description, size and parameters, and
// the weight bytes one decode step reads, by the matmul that reads them: the numerator of
// the decode roofline (bytes per token / measured bandwidth = the fastest decode can be).
#ifndef LM_BENCH_ROOFLINE_H
#define LM_BENCH_ROOFLINE_H

#include <stdint.h>

#include "lumen.h"

// Weight groups a decode step reads, for bytes/token and per-group GB/s.
enum lm_bench_grp {
    LM_BENCH_GRP_QKV = 0, // attn_q/k/v (+ biases)
    LM_BENCH_GRP_O,       // attn_output
    LM_BENCH_GRP_GATE_UP, // ffn_gate + ffn_up
    LM_BENCH_GRP_DOWN,    // ffn_down
    LM_BENCH_GRP_HEAD,    // output (or token_embd when tied) + output bias
    LM_BENCH_GRP_OTHER,   // norm vectors, one embedding row, anything else per token
    LM_BENCH_GRP_COUNT
};

// What the tests and the reports know about the model (from its tensor table).
struct lm_bench_model_info {
    const char *path;
    const char *arch;        // "gemma3"
    char desc[160];          // "gemma3 268M Q4_K - Medium"
    char head_dtype[16];     // dtype of the output head ("q8_0")
    uint64_t size_bytes;     // all tensors
    uint64_t n_params;       // all tensor elements
    uint64_t bytes_per_token;            // weights one decode step reads
    uint64_t grp_bytes[LM_BENCH_GRP_COUNT];
    uint64_t layer_params;   // elements of the per-layer matrices (prefill FLOPs)
    uint64_t head_params;    // elements of the output head
    int32_t n_layer, n_vocab, n_ctx_train;
    // the KV cache a decode step reads (f16 K and V, the cache's default type)
    uint64_t kv_cell_bytes;  // K + V bytes of one position in one layer (f16 cache unless
                             // lm_bench_model_info_kv_types says otherwise)
    uint64_t kv_k_elems, kv_v_elems; // K and V values of one position in one layer
    int32_t n_layer_swa;     // sliding-window layers (they read at most n_swa positions)
    int32_t n_swa;
    const char *kernels;     // kernel table name ("avx512_vnni")
    double load_ms;          // lm_model_load (mmap, validate, tokenizer): the caller's
    double ctx_init_ms;      // first lm_context_init (KV cache, scratch, thread pool)
    // memory (0 = unknown): the process's RSS when the run starts (after the load) and its
    // peak at the end (/proc/self/status VmRSS, VmHWM), the file, the first context's KV pool
    uint64_t rss_load, rss_peak, file_bytes, kv_bytes;
};

// Fills *out from m's tensor table (load_ms and ctx_init_ms 0; the runs set them). path is
// kept for the reports. Cannot fail.
void lm_bench_model_info(const struct lm_model *m, const char *path, struct lm_bench_model_info *out);
// Sets kv_cell_bytes for a cache of K rows of type tk and V rows of type tv (q8_0: 34 bytes
// per 32 values, the pool's row padding ignored).
void lm_bench_model_info_kv_types(struct lm_bench_model_info *mi, enum lm_kv_type tk, enum lm_kv_type tv);
// KV bytes one decode step reads when it attends to n_pos positions (the new one included):
// K and V of every position in every layer's window, sliding layers capped at theirs.
uint64_t lm_bench_kv_bytes(const struct lm_bench_model_info *mi, int64_t n_pos);

#endif
