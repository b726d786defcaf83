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
#define LM_SPEC_MIN_GAIN 0.03 // lm_spec_choose: least log gain of the product of rates

// Prompt lookup: among the earlier places where the last LM_SPEC_NGRAM_MIN or more tokens
// of toks[0, n_toks) occur, the one matching the longest run of tokens before (the best
// aligned copy of the text; the latest on ties), and copies up to k_max of the tokens that
// followed it into out. Returns the count (0: no match). Against "the latest 4-, 3- or
// 2-gram", replaying the greedy outputs of bench/spec_prompts.jsonl with 8-token drafts:
// the same accepted tokens on 8 of 9 prompts, one step fewer on rename_function_py
// (the longest match skips short runs that repeat, like indentation, to the aligned copy).
int32_t lm_spec_lookup(const int32_t *toks, int32_t n_toks, int32_t k_max, int32_t *out);

// Forward time of a decode step (every entry wants logits: decode tokens and drafts, no
// prefill) by its sequence count s and token count n >= s: a moving average per (s, n),
// measured by the engine on every such step. The sequence count matters as much as the
// tokens (on the default model, 8 tokens of one sequence cost 15% less than one token each
// of 8), and prefill steps are left out (a prompt token wants no logits: it skips the LM
// head, which is most of a drafted row's price). Counts never measured are estimated from
// the measured ones of the same s: linear between two; above the largest below, plus the
// marginal price of a token measured on any row (a drafted row's price hardly depends on
// s: ~1 ms at 2 threads on the default model, from 1 to 8 sequences), or, before any step
// measured it, an optimistic +3% per token, so an untried length gets tried once. s above
// s_max shares row s_max.
struct lm_spec_cost {
    int32_t n_max, s_max;
    double marginal; // ns per token beyond a step's sequences (moving average; 0: unknown)
    double *ns;     // [(s_max + 1) * (n_max + 1)] average forward ns (0: never measured)
};
// LM_OK, or LM_ERR_NOMEM with a message (the table is (s_max + 1) x (n_max + 1) doubles).
enum lm_status lm_spec_cost_init(struct lm_spec_cost *c, int32_t n_max, int32_t s_max);
void lm_spec_cost_free(struct lm_spec_cost *c);
void lm_spec_cost_observe(struct lm_spec_cost *c, int32_t s, int32_t n, uint64_t ns);
// Estimated ns of a step of s sequences and n tokens; 0 if no count in [s, n] was measured.
double lm_spec_cost_est(const struct lm_spec_cost *c, int32_t s, int32_t n);

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

// The draft length in [0, k_avail] for one of the n_streams requests (decoding or
// prefilling) of a step of s_seq decoding sequences that holds n_base tokens so far. A draft of K tokens with
// per-token acceptance a yields g = a + a^2 + ... + a^K expected extra tokens to its
// request and makes the step cost(n_base + K) instead of cost(n_base), which slows every
// request in it. The length maximises the log of the product of the requests' token
// rates, log(1 + g) - n_streams * log(cost(n_base + K) / cost(n_base)) (proportional
// fairness): alone, that is the most tokens per ns; among n streams, a draft must repay
// the slowdown it imposes on each of the others, so one request's drafts never buy the
// step's throughput with another's latency. 0 when no length gains, or the cost is
// unknown. *gain: the chosen length's g. A length must gain at least LM_SPEC_MIN_GAIN
// (the product of rates 3% higher): near break-even, the measurement noise decides, and a
// draft that breaks even in rates still delays the requests that do not draft.
int32_t lm_spec_choose(const struct lm_spec_cost *c, double a, int32_t s_seq, int32_t n_base,
                       int32_t n_streams, int32_t k_avail, double *gain);

// lm_spec_choose for drafts that cost more than their rows in the step (lm_spec_choose is
// this with extra_ns = draft_ns = 0): each drafted token
// adds draft_ns (a draft model's forward of one position) and the step already carries
// extra_ns of drafting (the drafts of requests chosen before): the length maximising
// log(1 + g) - n_streams * log((cost(s_seq, n_base + K) + extra_ns + K draft_ns) /
// (cost(s_seq, n_base) + extra_ns)), at least LM_SPEC_MIN_GAIN.
int32_t lm_spec_choose_drafter(const struct lm_spec_cost *c, double a, int32_t s_seq, int32_t n_base,
                               int32_t n_streams, double extra_ns, double draft_ns, int32_t k_avail,
                               double *gain);

// ---- draft models (spec_draft.c)
struct lm_model;
// LM_OK when draft can draft for target: the same vocabulary size, the same text for every
// token id, the same BOS / EOS / EOT and end-of-generation tokens; else LM_ERR_ARG with one
// line naming both files and the first id that differs.
enum lm_status lm_spec_vocab_check(const struct lm_model *target, const struct lm_model *draft);

#endif
