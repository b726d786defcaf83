// lumen public API: load a GGUF model, tokenize, run batches through the one
// forward path, sample. All symbols are prefixed lm_.
#ifndef LUMEN_H
#define LUMEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

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
struct lm_context;

struct lm_context_params {
    int32_t n_ctx;      // max positions per sequence (0 = model's training context)
    int32_t n_seq_max;  // number of sequences the KV cache holds (0 = 1)
    int32_t n_batch;    // max entries per lm_decode call (0 = 512)
    int32_t n_threads;  // 0 = physical cores
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

// Runs the forward pass over n entries (prefill, decode, batched decode and
// speculative verification are all this call). Entries of one sequence must have
// consecutive positions continuing that sequence's cache.
enum lm_status lm_decode(struct lm_context *c, const struct lm_batch_entry *entries, int32_t n);
// Logits (n_vocab floats) of the i-th entry of the last lm_decode that asked for them
// (i counts only entries with want_logits), or NULL.
const float *lm_get_logits(const struct lm_context *c, int32_t i);
// Forget positions [p0, p1) of seq (p1 < 0: to the end). p0 = 0, p1 = -1 clears it.
void lm_kv_cache_seq_rm(struct lm_context *c, int32_t seq, int32_t p0, int32_t p1);
int32_t lm_kv_cache_seq_len(const struct lm_context *c, int32_t seq);

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
