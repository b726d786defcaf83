// `lumen bench` internals shared by cli_bench.c (throughput tests, bandwidth probe,
// md/csv/json output) and cli_bench_breakdown.c (the --breakdown run and report).
#ifndef LM_CLI_CLI_BENCH_H
#define LM_CLI_CLI_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lumen.h"

enum lm_bench_fmt { LM_BENCH_MD = 0, LM_BENCH_CSV, LM_BENCH_JSON };

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

// What the tests and the report know about the model (from its tensor table).
struct lm_bench_model_info {
    const char *path;
    char desc[160];          // "gemma3 268M Q4_K - Medium"
    char head_dtype[16];     // dtype of the output head ("q8_0")
    uint64_t size_bytes;     // all tensors
    uint64_t n_params;       // all tensor elements
    uint64_t bytes_per_token;            // weights one decode step reads
    uint64_t grp_bytes[LM_BENCH_GRP_COUNT];
    uint64_t layer_params;   // elements of the per-layer matrices (prefill FLOPs)
    uint64_t head_params;    // elements of the output head
    int32_t n_layer, n_vocab, n_ctx_train;
    const char *kernels;     // kernel table name ("avx512_vnni")
    double load_ms;          // lm_model_load (mmap, validate, tokenizer)
    double ctx_init_ms;      // first lm_context_init (KV cache, scratch, thread pool)
};

// Best-of-3 read bandwidth with n threads (bytes / s / 1e9); < 0 if not measured.
struct lm_bench_bw {
    int threads;
    double gbps;
};
// Probe result for `threads` (or, if absent, the largest measured); 0 if none.
double lm_bench_bw_for(const struct lm_bench_bw *bw, int n_bw, int threads);

// Fixed English text for deterministic prompts and the tokenizer test.
extern const char lm_bench_text[];
// n deterministic prompt ids: BOS (if the vocab has one) then the text's ids repeated.
// malloc'd; NULL (message in lm_error_msg) on failure.
int32_t *lm_bench_tokens(const struct lm_model *m, int32_t n);

// Prefill ids[0..n) at positions 0.. of sequence 0 in chunks of n_batch (512), logits
// only on the last entry. The cache of sequence 0 must be empty.
enum lm_status lm_bench_prefill(struct lm_context *c, const int32_t *ids, int32_t n,
                                struct lm_batch_entry *batch);

// ---- --breakdown
struct lm_bench_breakdown_params {
    int n_threads;
    int n_prompt, n_gen;
    int warmup;
    double tg_ref_ts;        // tg tok/s of the unprofiled tests at n_threads (0 = none)
};
struct lm_bench_breakdown; // opaque result
// Runs one profiled (SUMMARY) generation and computes the report. Prints nothing.
enum lm_status lm_bench_breakdown_run(struct lm_model *m, const struct lm_bench_model_info *mi,
                                      const struct lm_bench_bw *bw, int n_bw,
                                      const struct lm_bench_breakdown_params *p,
                                      struct lm_bench_breakdown **out);
void lm_bench_breakdown_print(const struct lm_bench_breakdown *b, FILE *f);      // text
void lm_bench_breakdown_print_json(const struct lm_bench_breakdown *b, FILE *f); // object
void lm_bench_breakdown_free(struct lm_bench_breakdown *b);

// JSON string literal (quoted, escaped) to f.
void lm_bench_json_str(FILE *f, const char *s);

#endif
