// Prometheus metrics of the server: request, token and latency counters kept by the HTTP
// threads, rendered with the engine's gauges. Names are stable (docs/server.md).
#ifndef LM_SERVER_METRICS_H
#define LM_SERVER_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "lumen.h"

enum metrics_hist { MH_TTFT, MH_ITL, MH_E2E, MH_QUEUE, MH_COUNT };
enum metrics_finish { MF_STOP, MF_LENGTH, MF_CANCELLED, MF_ERROR, MF_COUNT };

struct metrics;

#define METRICS_MAX_ROUTES 24 // route labels given to metrics_new ("other" is added)

// routes[n]: the route labels of lumen_requests_total, in their order (the server's route
// table: srv_route_metrics); "other" follows them, for requests of no route. The strings
// must outlive m. NULL when out of memory or n > METRICS_MAX_ROUTES.
struct metrics *metrics_new(const char *const *routes, int n);
void metrics_free(struct metrics *m);
// A request answered: route is one of the labels given to metrics_new (else, or NULL: "other").
void metrics_request(struct metrics *m, const char *route, int status);
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
