// The bench's workload: a fixed English text, deterministic prompts made of its tokens, and
// the chunked prefill every single-stream test starts with. The same text and prompts on
// every run, so runs and machines compare.
#ifndef LM_BENCH_PROMPT_H
#define LM_BENCH_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#include "lumen.h"

#define LM_BENCH_N_BATCH 512 // entries of one lm_decode call in a prefill

// The fixed text (bench/serve_load.py reads its words from this file too).
extern const char lm_bench_text[];

// n prompt ids: BOS (if the vocabulary has one), then the text's ids repeated. malloc'd;
// NULL on failure (lm_error_msg says why).
int32_t *lm_bench_tokens(const struct lm_model *m, int32_t n);
// Request i's prompt of a batched run, n ids into out: ids[0] (BOS), then ids[1, n_ids)
// read from an offset of 37 x i, so no two requests share a prefix past the BOS. n_ids > 1.
void lm_bench_request_prompt(const int32_t *ids, int n_ids, int i, int32_t *out, int n);
// A prefix of the text, repeated as needed, that tokenizes (with BOS) to at least n tokens:
// a prompt whose tokenization is part of what is timed. *out is malloc'd, NUL-terminated,
// *len bytes. Failure (*out NULL): lm_tokenize's status, LM_ERR_NOMEM, or LM_ERR_ARG when
// 64 tries do not reach n tokens; with a message.
enum lm_status lm_bench_prompt_text(const struct lm_tokenizer *tok, int n, char **out, size_t *len);

// Prefills ids[0, n) at positions 0.. of sequence 0 in chunks of LM_BENCH_N_BATCH, logits
// only for the last entry. batch holds LM_BENCH_N_BATCH entries; the cache of sequence 0
// must be empty. lm_decode's status (and message) on failure.
enum lm_status lm_bench_prefill(struct lm_context *c, const int32_t *ids, int32_t n,
                                struct lm_batch_entry *batch);
// The same from position start: ids[start, start + n) at positions start.. (sequence 0 must
// hold exactly positions [0, start)).
enum lm_status lm_bench_prefill_at(struct lm_context *c, const int32_t *ids, int32_t start,
                                   int32_t n, struct lm_batch_entry *batch);

#endif
