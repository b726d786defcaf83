// Speculative decoding helpers of the engine (docs/speculative.md): prompt-lookup drafts
// from a sequence's own tokens, the measured cost of a step by its token count, the
// acceptance estimate of a request, and the choice of a draft length that pays.
#ifndef LM_RUNTIME_SPEC_H
#define LM_RUNTIME_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "lumen.h"

#define LM_SPEC_NGRAM_MIN 2  // shortest match (a single token matches too much to be worth it)
#define LM_SPEC_MATCH_MAX 32 // a match this long is taken at once

// Prompt lookup: among the earlier places where the last LM_SPEC_NGRAM_MIN or more tokens
// of toks[0, n_toks) occur, the one matching the longest run of tokens before (the best
// aligned copy of the text; the latest on ties), and copies up to k_max of the tokens that
// followed it into out. Returns the count (0: no match). Against "the latest 4-, 3- or
// 2-gram", replaying the greedy outputs of bench/spec_prompts.jsonl with 8-token drafts:
// the same accepted tokens on 8 of 9 prompts, one step fewer on rename_function_py
// (the longest match skips short runs that repeat, like indentation, to the aligned copy).
int32_t lm_spec_lookup(const int32_t *toks, int32_t n_toks, int32_t k_max, int32_t *out);

// Forward time of a step by its token count [1, n_max]: a moving average per count,
// measured by the engine on every step. Counts never measured are estimated from their
// measured neighbours (linear between two, an optimistic +3% per token above the largest
// below, so an untried length gets tried once and then is measured).
struct lm_spec_cost {
    int32_t n_max;
    double *ns;     // [n_max + 1] average forward ns (0: never measured)
};
bool lm_spec_cost_init(struct lm_spec_cost *c, int32_t n_max);
void lm_spec_cost_free(struct lm_spec_cost *c);
void lm_spec_cost_observe(struct lm_spec_cost *c, int32_t n, uint64_t ns);
// Estimated ns of a step of n tokens; 0 if no count <= n was measured yet.
double lm_spec_cost_est(const struct lm_spec_cost *c, int32_t n);

// Acceptance of a request's drafts: decayed counts of accepted and rejected draft
// positions; while drafting is paused they drift back to the prior, so a request whose
// text turns copyable again is probed again after a while.
struct lm_spec_acc {
    float acc, rej;
};
void lm_spec_acc_init(struct lm_spec_acc *a);
double lm_spec_acc_rate(const struct lm_spec_acc *a); // probability a draft token is accepted
void lm_spec_acc_update(struct lm_spec_acc *a, int32_t drafted, int32_t accepted);
void lm_spec_acc_idle(struct lm_spec_acc *a);

// The draft length in [0, k_avail] that maximises the step's expected tokens per ns:
// (g_base + a + a^2 + ... + a^K) / cost(n_base + K), where g_base is the tokens the step
// yields without this draft (its decode tokens and the gains of drafts already in it).
// 0 when no length beats the step without it, or its cost is unknown. *gain: a+..+a^K.
int32_t lm_spec_choose(const struct lm_spec_cost *c, double a, int32_t n_base, double g_base,
                       int32_t k_avail, double *gain);

#endif
