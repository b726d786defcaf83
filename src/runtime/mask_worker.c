// The mask worker (docs/structured.md): a thread that computes each constrained request's grammar
// mask (lm_grammar_matcher_fill_mask) while the step's forward pass runs: the mask depends only
// on the tokens the request accepted, so sampling finds it ready.
#include <pthread.h>
#include <stdlib.h>

#include "base/status.h"
#include "runtime/engine.h"

struct lm_mask_worker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct lm_req **jobs; // [max_running] this step's constrained requests
    int32_t n_jobs;
    bool posted, stop;    // under mu: jobs wait for the worker; the engine is going away
};

static void *worker_main(void *arg) {
    struct lm_mask_worker *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->posted && !w->stop) pthread_cond_wait(&w->cv, &w->mu);
        if (w->stop) break;
        const int32_t n = w->n_jobs;
        pthread_mutex_unlock(&w->mu);
        // the engine thread touches none of these requests until lm_mask_worker_wait
        for (int32_t i = 0; i < n; i++) {
            struct lm_req *r = w->jobs[i];
            lm_grammar_matcher_fill_mask(r->gm, r->mask);
            r->mask_ready = true;
        }
        pthread_mutex_lock(&w->mu);
        w->posted = false;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

// The worker, started at the first step with a constrained request (NULL if it cannot be:
// sampling then computes the masks itself).
static struct lm_mask_worker *worker(struct lm_engine *e) {
    if (e->masks) return e->masks;
    struct lm_mask_worker *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->jobs = calloc((size_t)e->p.max_running, sizeof *w->jobs);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (!w->jobs || pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        free(w->jobs);
        free(w);
        return NULL;
    }
    return e->masks = w;
}

void lm_mask_worker_begin(struct lm_engine *e, int32_t n) {
    struct lm_req *last = NULL;
    int32_t k = 0;
    struct lm_mask_worker *w = NULL;
    for (int32_t i = 0; i < n; i++) { // a request's entries are contiguous
        struct lm_req *r = e->batch_req[i];
        if (r == last || !lm_req_grammar_on(r) || !e->batch[i].want_logits || r->mask_ready) continue;
        // its first row this step: a decode token, or the end of its prompt
        last = r;
        if (!w && !(w = worker(e))) return;
        w->jobs[k++] = r;
        if (k == e->p.max_running) break;
    }
    if (k == 0) return;
    pthread_mutex_lock(&w->mu);
    w->n_jobs = k;
    w->posted = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void lm_mask_worker_wait(struct lm_engine *e) {
    struct lm_mask_worker *w = e->masks;
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    while (w->posted) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

void lm_mask_worker_free(struct lm_engine *e) {
    struct lm_mask_worker *w = e->masks;
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->jobs);
    free(w);
    e->masks = NULL;
}
