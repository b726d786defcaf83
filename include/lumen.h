// lumen public API: load a GGUF model, tokenize, run batches through the one
// forward path, sample. All symbols are prefixed lm_.
#ifndef LUMEN_H
#define LUMEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lumen_status.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------- model
struct lm_model;        // opaque: mapped file, hyper-parameters, weight views, tokenizer
struct lm_tokenizer;    // opaque, owned by the model

struct lm_model_params {
    bool validate_only;  // parse + check but do not prepare compute state
};

enum lm_status lm_model_load(struct lm_model **out, const char *path,
                             const struct lm_model_params *params /* may be NULL */);
void lm_model_free(struct lm_model *m);

int32_t lm_model_n_vocab(const struct lm_model *m);
int32_t lm_model_n_ctx_train(const struct lm_model *m);
const char *lm_model_arch(const struct lm_model *m);
const struct lm_tokenizer *lm_model_tokenizer(const struct lm_model *m);

// ---------------------------------------------------------------- tokenizer
// Encode text. add_special: BOS/EOS per the vocab's add_bos/add_eos flags.
// parse_special: control-token text (e.g. "<start_of_turn>") becomes the token.
// *out is malloc'd (caller frees); *n_out its length.
enum lm_status lm_tokenize(const struct lm_tokenizer *t, const char *text, size_t len,
                           bool add_special, bool parse_special, int32_t **out, size_t *n_out);
// Bytes of one token (byte-fallback tokens give their byte; control tokens give ""
// unless render_special). Returns the byte count; writes at most cap bytes.
size_t lm_token_to_piece(const struct lm_tokenizer *t, int32_t id, char *buf, size_t cap,
                         bool render_special);
int32_t lm_tokenizer_n_vocab(const struct lm_tokenizer *t);
int32_t lm_tokenizer_bos(const struct lm_tokenizer *t);
int32_t lm_tokenizer_eos(const struct lm_tokenizer *t);
bool lm_tokenizer_is_eog(const struct lm_tokenizer *t, int32_t id); // eos, eot, end_of_turn...

// ---------------------------------------------------------------- context + batch
// A context runs the forward pass for any number of sequences that share one KV pool
// (blocks of 16 positions, see docs/kv_cache.md). Not thread-safe: one thread at a
// time calls the functions taking a context (lm_engine wraps one for many threads).
struct lm_context;

struct lm_context_params {
    int32_t n_ctx;      // max positions of one sequence (0 = model's training context)
    int32_t n_seq_max;  // sequence ids are 0 .. n_seq_max-1 (0 = 1; at most 4096)
    int32_t n_batch;    // max entries per lm_decode call (0 = 512)
    int32_t n_threads;  // 0 = physical cores
    int32_t kv_tokens;  // KV pool capacity in positions, shared by all sequences, rounded up
                        // to whole blocks (0 = n_ctx); memory grows with the blocks in use
    bool no_prefix_cache; // do not index full blocks for reuse by later sequences
};

// One entry of a batch: token at position pos of sequence seq; logits computed iff want_logits.
struct lm_batch_entry {
    int32_t token;
    int32_t pos;
    int32_t seq;
    bool want_logits;
};

enum lm_status lm_context_init(struct lm_context **out, struct lm_model *m,
                               const struct lm_context_params *params);
void lm_context_free(struct lm_context *c);
int32_t lm_context_n_threads(const struct lm_context *c);
int32_t lm_context_n_ctx(const struct lm_context *c);
int32_t lm_context_n_seq(const struct lm_context *c);
int32_t lm_context_n_batch(const struct lm_context *c);
// Bytes of the scratch buffers sized at init (activations, logits, attention rows).
uint64_t lm_context_scratch_bytes(const struct lm_context *c);

// Runs the forward pass over n entries: prefill, decode, batched decode of many sequences,
// speculative verification and any mix of them are all this call, and each entry's
// results are the same whatever else shares the batch (batch invariance, bit for bit).
// Entries of one sequence must have consecutive positions continuing that sequence
// (lm_kv_cache_seq_pos). LM_ERR_KV_FULL: the pool lacks blocks for the batch; nothing
// was changed (free sequences or wait, then retry).
enum lm_status lm_decode(struct lm_context *c, const struct lm_batch_entry *entries, int32_t n);
// Logits (n_vocab floats) of the i-th entry of the last lm_decode that asked for them
// (i counts only entries with want_logits), or NULL. Valid until the next lm_decode on
// this context or lm_context_free.
const float *lm_get_logits(const struct lm_context *c, int32_t i);

// ---------------------------------------------------------------- KV cache sequences
// Every function validates its sequence ids and ranges: LM_ERR_ARG with a message, no
// change made. Rollback is exact at any depth: every position's K/V stays in the pool
// until removed (sliding-window layers included).
// Next position of seq (positions [0, pos) are held or were removed as a hole), or -1 if
// seq is out of range.
int32_t lm_kv_cache_seq_pos(const struct lm_context *c, int32_t seq);
// Same as lm_kv_cache_seq_pos (older name).
int32_t lm_kv_cache_seq_len(const struct lm_context *c, int32_t seq);
// Removes positions [p0, p1) of seq (p1 < 0: to the end). A range reaching the end is a
// rollback: the sequence continues at p0. A range inside leaves a hole that attention
// skips; later positions keep theirs. p0 = 0, p1 = -1 clears the sequence.
enum lm_status lm_kv_cache_seq_rm(struct lm_context *c, int32_t seq, int32_t p0, int32_t p1);
// Gives the empty sequence dst the first n_pos positions of src (n_pos < 0: all) by
// sharing src's blocks, no data copied; whichever writes into a shared block first
// copies it (copy-on-write).
enum lm_status lm_kv_cache_seq_cp(struct lm_context *c, int32_t src, int32_t dst, int32_t n_pos);
// Removes every sequence but seq.
enum lm_status lm_kv_cache_seq_keep(struct lm_context *c, int32_t seq);
// Prefix cache: attaches to the empty sequence seq the longest run of cached full blocks
// whose tokens begin tokens[0, n) (at least one token is left to compute, for logits);
// *n_attached positions are then held and decoding continues at that position.
enum lm_status lm_kv_cache_prefix_attach(struct lm_context *c, int32_t seq,
                                         const int32_t *tokens, int32_t n,
                                         int32_t *n_attached);

struct lm_kv_cache_stats {
    int32_t block_size;       // positions per block
    int32_t n_blocks;         // pool capacity
    int32_t n_used;           // held by at least one sequence
    int32_t n_cached_free;    // held by none, kept for the prefix cache (evicted LRU first)
    int32_t n_free;           // neither
    uint64_t block_bytes;     // K and V of all layers for one block
    uint64_t bytes_used;      // n_used * block_bytes
    uint64_t prefix_queries, prefix_query_tokens, prefix_hit_tokens;
    uint64_t evictions, cow_copies;
};
void lm_kv_cache_stats(const struct lm_context *c, struct lm_kv_cache_stats *out);

// ---------------------------------------------------------------- sampling
struct lm_sampler_params {
    float temperature;    // <= 0: greedy
    int32_t top_k;        // <= 0: off
    float top_p;          // >= 1: off
    float min_p;          // <= 0: off
    float repeat_penalty; // 1: off
    int32_t repeat_last_n;// window for the penalty (default 64)
    uint64_t seed;
};
struct lm_sampler;
enum lm_status lm_sampler_init(struct lm_sampler **out, const struct lm_sampler_params *p,
                               int32_t n_vocab);
void lm_sampler_free(struct lm_sampler *s);
int32_t lm_sampler_sample(struct lm_sampler *s, const float *logits);
void lm_sampler_accept(struct lm_sampler *s, int32_t token); // feeds the repetition window
struct lm_sampler_params lm_sampler_params_default(void);

#ifdef __cplusplus
}
#endif
#endif
