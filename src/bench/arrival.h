// `lumen bench --parallel LIST --arrival L`: while N streams decode, a request with an
// L-token prompt arrives. The engine splits that prompt into chunks of (step budget - N)
// tokens beside the N decode tokens of each step, so a stream's worst inter-token gap should
// grow by at most one such step. One run measures the streams' gaps before and during the
// prefill, the step times, and the long prompt's time to first token.
#ifndef LM_BENCH_ARRIVAL_H
#define LM_BENCH_ARRIVAL_H

#include <stdint.h>

#include "lumen.h"

#define LM_BENCH_ARRIVAL_STEP_TOKENS 256 // arrival runs' default step budget (the engine's default)
#define LM_BENCH_ARRIVAL_BASE 32         // decode steps of the streams before the arrival

struct lm_bench_arrival_params {
    int n_streams;   // N
    int n_prompt;    // tokens of each stream's prompt
    int n_long;      // L: tokens of the arriving prompt
    int step_tokens; // the engine's step budget (0: LM_BENCH_ARRIVAL_STEP_TOKENS); > N + 1
    int n_threads;
    struct lm_sampler_params sampling; // every request's chain
};

// The figures of one run, or (lm_bench_arrival_summarize) the medians of several (ms).
struct lm_bench_arrival_result {
    int reps;
    int step_tokens, chunk_tokens;   // step budget; prefill tokens of a full chunk (budget - N)
    double gap_base_max, gap_base_p50; // streams' inter-token gaps before the arrival
    double gap_during_max, gap_during_p50; // gaps ending while the long prompt is prefilled
    double gap_during_max_worst;     // the largest gap_during_max of the repetitions
    double decode_step;              // a decode-only step (median, before the arrival)
    double chunk_step, chunk_step_max; // a step holding N decode tokens + a full chunk
    int n_chunk_steps;               // full-chunk steps of one run
    double long_ttft;                // the long prompt: submit to its first token
    double increase;                 // gap_during_max - gap_base_max (of the medians)
};

// One run on an engine of its own. ids: n_ids prompt ids (lm_bench_tokens) to cut the
// prompts from (lm_bench_request_prompt), n_ids > 1. Failure: the engine's status and
// message, or LM_ERR_STATE when a request failed or a stream ended before the long prompt
// was prefilled.
enum lm_status lm_bench_arrival_once(struct lm_model *m, const int32_t *ids, int n_ids,
                                     const struct lm_bench_arrival_params *a,
                                     struct lm_bench_arrival_result *out);
// The reps runs as one result: every figure the nearest-rank median of its runs (the lower
// middle run of an even count), increase recomputed from those medians, and
// gap_during_max_worst the largest gap_during_max. reps >= 1.
void lm_bench_arrival_summarize(const struct lm_bench_arrival_result *runs, int reps,
                                struct lm_bench_arrival_result *out);

#endif
