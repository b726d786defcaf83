// Prometheus metrics of the server: request, token and latency counters kept by the HTTP
// threads, rendered with the engine's gauges. Names are stable (docs/server.md).
#ifndef LM_SERVER_METRICS_H
#define LM_SERVER_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "lumen.h"

enum metrics_route {
    MR_COMPLETIONS, MR_CHAT, MR_MODELS, MR_HEALTH, MR_METRICS, MR_TOKENIZE, MR_DETOKENIZE,
    MR_STATIC, MR_OTHER, MR_COUNT
};
enum metrics_hist { MH_TTFT, MH_ITL, MH_E2E, MH_QUEUE, MH_COUNT };
enum metrics_finish { MF_STOP, MF_LENGTH, MF_CANCELLED, MF_ERROR, MF_COUNT };

struct metrics;

struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);
const char *metrics_route_name(enum metrics_route r); // "/v1/completions", ...
void metrics_request(struct metrics *m, enum metrics_route r, int status);
void metrics_tokens(struct metrics *m, int64_t prompt, int64_t generated);
void metrics_finish(struct metrics *m, enum metrics_finish f);
void metrics_observe(struct metrics *m, enum metrics_hist h, double seconds);
// The front door's connections (conns.c).
struct metrics_conns {
    int open;                             // held now
    uint64_t refused, evicted, timed_out; // dropped at the caps (503; an idle one closed) or the deadline
};

// The exposition text (malloc'd); st is NULL while the model loads.
char *metrics_render(struct metrics *m, const struct lm_engine_stats *st, const struct metrics_conns *cs);

#endif
