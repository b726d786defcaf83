// One generation request between the engine thread and the HTTP thread that serves it:
// the engine's callback only appends events to a bounded queue (overflow cancels the
// request: a slow reader never blocks the engine); the HTTP thread waits on it, watching
// its client's socket for a hangup.
#ifndef LM_SERVER_JOB_H
#define LM_SERVER_JOB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lumen.h"

struct job_ev {
    int32_t token;
    int32_t n_top;
    float logprob;
    uint64_t t_ns;
};

// What the engine has said about the request so far.
struct job_state {
    bool done;             // its last event came (finish set)
    bool overflow;         // the queue filled up: cancelled as too slow
    enum lm_finish finish;
    int32_t n_prompt, n_cached;
    uint64_t t_submit, t_admit;
    char error[256];
};

struct job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;              // the HTTP side's, and the engine's while submitted
    struct lm_engine *e;
    uint64_t id;
    struct job_ev *ev;     // ring [cap]
    int32_t *top_tok;      // [cap * n_top_max]
    float *top_lp;
    int32_t cap, head, count, n_top_max;
    bool cancel_sent;
    struct job_state st;
};

// cap: events held before the request is cancelled; n_top_max: alternatives per event.
struct job *job_new(struct lm_engine *e, int32_t cap, int32_t n_top_max);
// Drops one reference (the HTTP side's); the job is freed with the last one.
void job_unref(struct job *j);
// lm_engine_submit with job_on_event; the engine holds a reference until its last event.
enum lm_status job_submit(struct job *j, const int32_t *prompt, int32_t n_prompt,
                          const struct lm_request_params *rp);
void job_cancel(struct job *j); // once; any thread

enum job_wait { JOB_READY, JOB_CLIENT_GONE, JOB_STOPPING };
// Waits until events are pending or the job is done. Every 10 ms it checks the client's
// socket (fd < 0: none) for a hangup and *stopping for a shutdown.
enum job_wait job_wait(struct job *j, int fd, const atomic_bool *stopping);
// Moves up to max pending events to out (their alternatives to top_tok/top_lp, n_top_max
// per event) and copies the state. Returns the number of events moved.
int32_t job_take(struct job *j, struct job_ev *out, int32_t *top_tok, float *top_lp, int32_t max,
                 struct job_state *st);
// True when the client's socket was closed by the peer (or is in error).
bool client_gone(int fd);

#endif
