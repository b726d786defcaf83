// The sampling chain of the bench tests that sample, as the reports state it: one line of
// text (the markdown notes, the breakdown's header) and one JSON object (the "params").
#ifndef LM_BENCH_SAMPLING_H
#define LM_BENCH_SAMPLING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "lumen.h"

// "default chain: temp 0.8, top-k 40, top-p 0.95, min-p 0.05" for lm_sampler_params_default();
// otherwise "chain: temp T, top-k K, top-p P, min-p M[, repeat penalty R][, presence penalty
// P][, frequency penalty F], seed S" ("greedy" in place of the temp..min-p part at T <= 0).
void lm_bench_sampling_desc(const struct lm_sampler_params *sp, char *buf, size_t n);
// true when sp is lm_sampler_params_default() field for field.
bool lm_bench_sampling_is_default(const struct lm_sampler_params *sp);
// {"temperature": T, "top_k": K, "top_p": P, "min_p": M, "repeat_penalty": R,
//  "presence_penalty": P, "frequency_penalty": F, "seed": S}
void lm_bench_sampling_json(FILE *f, const struct lm_sampler_params *sp);

#endif
