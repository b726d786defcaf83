// One generation request between the engine thread and the HTTP thread that serves it:
// the engine's callback only appends events to a bounded queue (overflow cancels the
// request and shuts its client's socket: a slow reader never blocks the engine, and its
// connection ends at once); the HTTP thread sleeps in poll() on the job's eventfd, its
// client's socket and the server's stop eventfd, so a hangup or a shutdown is seen at the
// moment it happens, whatever the token rate.
#ifndef LM_SERVER_JOB_H
#define LM_SERVER_JOB_H

#include <pthread.h>
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
    int wake_fd;           // eventfd: written when an event arrives for a sleeping waiter
    bool sleeping;         // the HTTP thread is (about to be) in poll() waiting for events
    int client_fd;         // the client's socket, shut down on overflow (-1: none, or closed)
    int refs;              // the HTTP side's, and the engine's while submitted
    struct lm_engine *e;
    uint64_t id;
    struct job_ev *ev;     // ring [cap]
    int32_t *top_tok;      // [cap * n_top_max]
    float *top_lp;
    int32_t cap, head, count, n_top_max;
    bool cancel_sent;
    struct job_state st;
    // an embedding request (server/embed.c): the vector of its last event is copied here
    // (set before job_submit, freed with the job); n_embd stays 0 until it came
    float *embd;
    int32_t embd_cap, n_embd;
};

// cap: events held before the request is cancelled; n_top_max: alternatives per event;
// client_fd: the client's socket (-1: none). NULL when out of memory or file descriptors.
struct job *job_new(struct lm_engine *e, int32_t cap, int32_t n_top_max, int client_fd);
// The client's socket is about to be closed (MHD's completion callback): the job forgets it.
void job_detach_client(struct job *j);
// Drops one reference (the HTTP side's); the job is freed with the last one.
void job_unref(struct job *j);
// lm_engine_submit with job_on_event; the engine holds a reference until its last event.
enum lm_status job_submit(struct job *j, const int32_t *prompt, int32_t n_prompt,
                          const struct lm_request_params *rp);
void job_cancel(struct job *j); // once; any thread

enum job_wait { JOB_READY, JOB_CLIENT_GONE, JOB_STOPPING };
// Waits until events are pending or the job is done. On every wake-up (and before
// returning READY) it checks the client's socket (client_fd < 0: none) for a hangup and
// stop_fd (an eventfd the server writes once to stop; < 0: none) for a shutdown.
enum job_wait job_wait(struct job *j, int stop_fd);
// Moves up to max pending events to out (their alternatives to top_tok/top_lp, n_top_max
// per event) and copies the state. Returns the number of events moved.
int32_t job_take(struct job *j, struct job_ev *out, int32_t *top_tok, float *top_lp, int32_t max,
                 struct job_state *st);

#endif
