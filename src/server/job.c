// The engine <-> HTTP thread bridge of one request (job.h). The engine thread holds the
// job's mutex only to append an event (and, for a sleeping waiter, to write its eventfd);
// the HTTP thread only to copy events out.
#define _GNU_SOURCE // POLLRDHUP
#include "job.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

struct job *job_new(struct lm_engine *e, int32_t cap, int32_t n_top_max, int client_fd) {
    struct job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->refs = 1;
    j->e = e;
    j->client_fd = client_fd;
    j->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    j->cap = cap > 0 ? cap : 1;
    j->n_top_max = n_top_max;
    j->ev = malloc((size_t)j->cap * sizeof *j->ev);
    if (n_top_max > 0) {
        j->top_tok = malloc((size_t)j->cap * (size_t)n_top_max * sizeof *j->top_tok);
        j->top_lp = malloc((size_t)j->cap * (size_t)n_top_max * sizeof *j->top_lp);
    }
    pthread_mutex_init(&j->mu, NULL);
    if (j->wake_fd < 0 || !j->ev || (n_top_max > 0 && (!j->top_tok || !j->top_lp))) {
        job_unref(j);
        return NULL;
    }
    return j;
}

static void job_free(struct job *j) {
    pthread_mutex_destroy(&j->mu);
    if (j->wake_fd >= 0) close(j->wake_fd);
    free(j->ev);
    free(j->top_tok);
    free(j->top_lp);
    free(j->embd);
    free(j);
}

void job_unref(struct job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    const int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left == 0) job_free(j);
}

// Engine thread (or lm_engine_free's caller): append, or on overflow cancel; never waits
// for the HTTP side.
static void job_on_event(void *user, const struct lm_event *ev) {
    struct job *j = user;
    bool cancel = false;
    pthread_mutex_lock(&j->mu);
    j->st.n_prompt = ev->n_prompt;
    j->st.n_cached = ev->n_cached;
    j->st.t_submit = ev->t_submit_ns;
    j->st.t_admit = ev->t_admit_ns;
    if (ev->token >= 0) {
        if (j->count < j->cap) {
            const int32_t k = (j->head + j->count) % j->cap;
            const int32_t nt = ev->n_top < j->n_top_max ? ev->n_top : j->n_top_max;
            j->ev[k] = (struct job_ev){.token = ev->token, .n_top = nt, .logprob = ev->logprob,
                                       .t_ns = ev->t_ns};
            if (nt > 0) {
                memcpy(j->top_tok + (size_t)k * j->n_top_max, ev->top_tokens, (size_t)nt * sizeof(int32_t));
                memcpy(j->top_lp + (size_t)k * j->n_top_max, ev->top_logprobs, (size_t)nt * sizeof(float));
            }
            j->count++;
        } else if (!j->st.overflow) {
            // too slow: its HTTP thread is blocked in a write; shutting the socket ends that
            // write now (the connection closes, logged and counted at once), not at a timeout
            j->st.overflow = true;
            cancel = !j->cancel_sent;
            j->cancel_sent = true;
            if (j->client_fd >= 0) shutdown(j->client_fd, SHUT_RDWR);
        }
    }
    int left = 1;
    struct lm_engine *e = j->e;
    const uint64_t id = j->id;
    if (ev->finish != LM_FINISH_NONE) {
        cancel = false; // nothing left to cancel
        j->st.done = true;
        j->st.finish = ev->finish;
        if (ev->error) snprintf(j->st.error, sizeof j->st.error, "%s", ev->error);
        if (ev->embd && j->embd && ev->n_embd <= j->embd_cap) {
            memcpy(j->embd, ev->embd, (size_t)ev->n_embd * sizeof *j->embd);
            j->n_embd = ev->n_embd;
        }
        left = --j->refs; // the engine's reference: no more events
    }
    if (j->sleeping) { // under the lock: the waiter may free the job once it is released
        j->sleeping = false;
        const uint64_t one = 1;
        ssize_t w = write(j->wake_fd, &one, sizeof one);
        (void)w; // EAGAIN only at a counter of 2^64 - 2: the waiter is awake already
    }
    pthread_mutex_unlock(&j->mu);
    // j may be freed by the HTTP side from here on (when left > 0): only locals below
    if (cancel) lm_engine_cancel(e, id);
    if (left == 0) job_free(j);
}

enum lm_status job_submit(struct job *j, const int32_t *prompt, int32_t n_prompt,
                          const struct lm_request_params *rp) {
    pthread_mutex_lock(&j->mu);
    j->refs++; // the engine's, before any event can come
    pthread_mutex_unlock(&j->mu);
    const enum lm_status st = lm_engine_submit(j->e, prompt, n_prompt, rp, job_on_event, j, &j->id);
    if (st != LM_OK) {
        pthread_mutex_lock(&j->mu);
        j->refs--;
        pthread_mutex_unlock(&j->mu);
    }
    return st;
}

void job_cancel(struct job *j) {
    pthread_mutex_lock(&j->mu);
    const bool send = !j->cancel_sent && !j->st.done;
    j->cancel_sent = true;
    const uint64_t id = j->id;
    pthread_mutex_unlock(&j->mu);
    if (send) lm_engine_cancel(j->e, id);
}

void job_detach_client(struct job *j) {
    pthread_mutex_lock(&j->mu);
    j->client_fd = -1;
    pthread_mutex_unlock(&j->mu);
}

enum job_wait job_wait(struct job *j, int stop_fd) {
    for (;;) {
        pthread_mutex_lock(&j->mu);
        const bool ready = j->count > 0 || j->st.done;
        j->sleeping = !ready;
        pthread_mutex_unlock(&j->mu);
        // the client's hangup and the stop are checked on every wake-up, events or not
        struct pollfd p[3] = {{.fd = j->client_fd, .events = POLLRDHUP},
                              {.fd = stop_fd, .events = POLLIN},
                              {.fd = j->wake_fd, .events = POLLIN}};
        const int k = poll(p, 3, ready ? 0 : -1);
        if (k < 0 && errno != EINTR) return JOB_CLIENT_GONE; // cannot watch the socket: give up on it
        if (j->client_fd >= 0 && (p[0].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
            return JOB_CLIENT_GONE;
        if (stop_fd >= 0 && (p[1].revents & POLLIN)) return JOB_STOPPING;
        if (ready) return JOB_READY;
        if (p[2].revents & POLLIN) {
            uint64_t v;
            ssize_t r = read(j->wake_fd, &v, sizeof v);
            (void)r;
        }
    }
}

int32_t job_take(struct job *j, struct job_ev *out, int32_t *top_tok, float *top_lp, int32_t max,
                 struct job_state *st) {
    pthread_mutex_lock(&j->mu);
    int32_t n = j->count < max ? j->count : max;
    for (int32_t i = 0; i < n; i++) {
        const int32_t k = (j->head + i) % j->cap;
        out[i] = j->ev[k];
        if (j->n_top_max > 0 && top_tok) {
            memcpy(top_tok + (size_t)i * j->n_top_max, j->top_tok + (size_t)k * j->n_top_max,
                   (size_t)j->n_top_max * sizeof(int32_t));
            memcpy(top_lp + (size_t)i * j->n_top_max, j->top_lp + (size_t)k * j->n_top_max,
                   (size_t)j->n_top_max * sizeof(float));
        }
    }
    j->head = (j->head + n) % j->cap;
    j->count -= n;
    *st = j->st;
    if (j->count > 0) st->done = false; // the last event is not taken yet
    pthread_mutex_unlock(&j->mu);
    return n;
}
