// The token timestamps of a batched run's engine requests: the event sink the parallel and
// arrival runs submit their requests with, and what it collected.
#ifndef LM_BENCH_REQUESTS_H
#define LM_BENCH_REQUESTS_H

#include <stdbool.h>
#include <stdint.h>

#include "lumen.h"

struct lm_bench_request {
    uint64_t id;    // lm_engine_submit's
    uint64_t *t;    // [cap] CLOCK_MONOTONIC ns of each generated token (the caller's array)
    int n, cap;     // tokens generated (n may pass cap: the later ones are counted, not timed)
    bool done;      // its last event came
};
struct lm_bench_request_sink {
    struct lm_bench_request *r;
    int n_req;
    int bad;        // events of unknown requests, and errors
    int cancelled;
};
// lm_event_fn of the requests: user is the struct lm_bench_request_sink holding them.
void lm_bench_request_event(void *user, const struct lm_event *ev);

#endif
