// Set-up helpers of the model tests, on the public API (lumen.h): load a model, make
// deterministic prompts, prefill a sequence in chunks, compare logits rows bit for bit.
// Built once as the lumen_test library (tests/lib/*.c) and linked into every test.
#ifndef LM_TEST_MODEL_H
#define LM_TEST_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "lumen.h"

// LUMEN_TEST_QUICK set and not "0" (the sanitizer pass): tests run a smaller subset
bool lm_test_quick(void);

// The model at path, or NULL after a "cannot load model: <message>" line on stderr
struct lm_model *lm_test_load(const char *path);

// Deterministic pseudo-text for the default model: BOS (2), then ids in [100, 20100)
void lm_test_prompt(int32_t *t, int n, uint64_t seed);
// Deterministic ids in [3, n_vocab), no BOS (the random-weight models of tools/make_arch_gguf.py)
void lm_test_ids(int32_t *t, int n, uint64_t seed, int n_vocab);

// Decode t[0, n) of seq from its current position in batches of `chunk` entries; the
// logits of every position into out (n rows of n_vocab floats) unless out is NULL.
// False after a "decode: <message>" line on stderr.
bool lm_test_prefill(struct lm_context *c, int32_t seq, const int32_t *t, int n, int chunk,
                     float *out, int n_vocab);

// Sequence 0 alone: prefill t[0, n) in one batch, then `gen` greedy steps; the logits rows
// the tokens were drawn from into ref (gen rows of n_vocab floats) and the tokens into toks.
// Sequence 0 is cleared before and after. False after a message on stderr.
bool lm_test_greedy_alone(struct lm_context *c, const int32_t *t, int n, int gen, float *ref,
                          int32_t *toks, int n_vocab);

// Two logits rows of n_vocab floats: the same bits
bool lm_test_same(const float *a, const float *b, int n_vocab);
// Index of the largest of n_vocab logits (the first of equals)
int lm_test_argmax(const float *a, int n_vocab);
// First of n rows of n_vocab logits whose bits differ between a and b, -1 if none
int lm_test_first_diff(const float *a, const float *b, int n, int n_vocab);

#endif
