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

#endif
