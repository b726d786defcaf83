// Sampler internals shared with tests: the speculative acceptance rule with its variants,
// two of them deliberately wrong so the statistical test can prove it detects a bad rule.
#ifndef LM_SAMPLE_INTERNAL_H
#define LM_SAMPLE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "lumen.h"

enum lm_spec_rule {
    LM_SPEC_RULE_COUPLED = 0,    // lm_sampler_verify: point-mass drafts by one draw x ~ p
    LM_SPEC_RULE_EXPLICIT,       // accept with min(1, p/q), else draw from max(0, p - q): two draws
    LM_SPEC_RULE_WRONG_ALWAYS,   // test only (wrong): accepts every draft with p > 0
    LM_SPEC_RULE_WRONG_RESIDUAL, // test only (wrong): on rejection draws from p, not p - q
};

int32_t lm_sampler_verify_rule(struct lm_sampler *s, const float *logits, int32_t draft,
                               const float *q, bool *accepted, enum lm_spec_rule rule);

// ---- grammar masks (bit (id & 31) of word id >> 5 set: allowed)
// dst = src where allowed, -inf elsewhere (dst may not alias src); returns the allowed count.
int32_t lm_mask_logits(float *dst, const float *src, const uint32_t *mask, int32_t n);
// The allowed candidates of top[0, n) in their order (best first) into out; returns their count.
// When it is at least lm_sampler_top_k_need, lm_sampler_sample_top_k on them draws the token the
// chain draws on the whole masked row: every allowed token outside top ranks below them all.
int32_t lm_sampler_filter_top_k(const struct lm_token_logit *top, int32_t n, const uint32_t *mask,
                                struct lm_token_logit *out);
// The sampler's own buffer holding logits masked (allocated at its first use: LM_ERR_NOMEM ->
// NULL with the message set); *allowed: the count of allowed tokens.
float *lm_sampler_masked_row(struct lm_sampler *s, const float *logits, const uint32_t *mask,
                             int32_t *allowed);

// ---- draft-model drafting (runtime/sched.c, docs/speculative.md)
struct lm_token_prob {
    int32_t id;
    float p;
};
// Seeds a xoshiro256** state as lm_sampler_init does from a seed.
void lm_sampler_rng_seed(uint64_t rng[4], uint64_t seed);
// The chain's distribution q on a draft model's logits row (penalties with the sampler's
// window as it is, top-k, top-p, min-p, temperature) and one token drawn from it with rng,
// the caller's own state: the request's sampler RNG is not touched. top/n_top: the row's
// best logits (lm_get_top_k), used when the chain needs no more (lm_sampler_top_k_need),
// else logits. q's nonzero entries go to out (room for the chain's candidates: top_k, else
// n_vocab), their count to *n_out. Greedy: the argmax, q a point mass (no draw).
int32_t lm_sampler_draft(struct lm_sampler *s, const float *logits, const struct lm_token_logit *top,
                         int32_t n_top, uint64_t rng[4], struct lm_token_prob *out, int32_t *n_out);

#endif
