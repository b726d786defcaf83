// The engine's thread boundary: an engine thread runs the steps while 3 threads submit
// (retrying on a full queue) and this one cancels and reads stats; every request gets
// exactly one last event, indices in order; lm_engine_free with requests in flight
// still ends each one; half the requests draft by prompt lookup. Small requests: this test also runs under ThreadSanitizer
// (scripts/test.sh, label `threads`).
// LM_TEST_LABELS: model;threads
#include <pthread.h>
#include <time.h>

#include "lm_test.h"
#include "lm_test_model.h"
#include "lumen.h"

#define MAXR 32

struct rec {
    uint64_t id;
    int n, finals, bad;
};

struct sink {
    pthread_mutex_t mu;
    struct rec r[MAXR];
    int n;
};

static void on_event(void *user, const struct lm_event *ev) {
    struct sink *s = user;
    pthread_mutex_lock(&s->mu);
    struct rec *r = NULL;
    for (int i = 0; i < s->n; i++) if (s->r[i].id == ev->id) r = &s->r[i];
    if (!r && s->n < MAXR) { r = &s->r[s->n++]; r->id = ev->id; }
    if (r) {
        if (r->finals) r->bad++;
        if (ev->token >= 0 && ev->index != r->n++) r->bad++;
        if (ev->finish != LM_FINISH_NONE) r->finals++;
    }
    pthread_mutex_unlock(&s->mu);
}

struct thr_arg { struct lm_engine *e; struct sink *s; int base; uint64_t ids[4]; };

static void *submitter(void *p) {
    struct thr_arg *a = p;
    for (int i = 0; i < 4; i++) {
        int32_t t[12];
        t[0] = 2;
        for (int k = 1; k < 12; k++) t[k] = 300 + 17 * (a->base + i) + (i % 2 ? k % 3 : k);
        struct lm_request_params rp = lm_request_params_default();
        rp.sampling.temperature = 0;
        rp.max_tokens = 4;
        rp.lookup = i % 2; // repeating prompts: prompt-lookup drafts in the steps too
        rp.ignore_eos = true;
        while (lm_engine_submit(a->e, t, 12, &rp, on_event, a->s, &a->ids[i]) == LM_ERR_BUSY) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

int main(void) {
    struct lm_model *m = lm_test_load(lm_test_model_path());
    if (!m) return 1;
    static struct sink s;
    pthread_mutex_init(&s.mu, NULL);
    struct lm_engine_params ep = {.max_running = 4, .max_waiting = 4, .step_tokens = 64,
                                  .n_ctx = 256, .n_threads = 2};
    struct lm_engine *e = NULL;
    CHECK(lm_engine_init(&e, m, &ep) == LM_OK);
    CHECK(lm_engine_start(e) == LM_OK);
    CHECK(lm_engine_start(e) == LM_ERR_STATE);
    struct thr_arg ta[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        ta[i] = (struct thr_arg){.e = e, .s = &s, .base = 10 * i};
        pthread_create(&th[i], NULL, submitter, &ta[i]);
    }
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    lm_engine_cancel(e, ta[0].ids[3]);
    lm_engine_cancel(e, ta[1].ids[2]);
    struct lm_engine_stats st = {0};
    const time_t deadline = time(NULL) + 600; // generous: sanitizer builds are slow
    while (time(NULL) < deadline) {
        lm_engine_stats(e, &st);
        if (st.finished == 12) break;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    CHECKF(st.finished == 12, "%llu of 12 finished", (unsigned long long)st.finished);
    CHECK(st.running == 0 && st.waiting == 0);
    CHECK(st.accepted_tokens <= st.drafted_tokens);
    printf("drafted %llu, accepted %llu\n", (unsigned long long)st.drafted_tokens,
           (unsigned long long)st.accepted_tokens);
    pthread_mutex_lock(&s.mu);
    int fin = 0, bad = 0;
    for (int i = 0; i < s.n; i++) { fin += s.r[i].finals == 1; bad += s.r[i].bad; }
    pthread_mutex_unlock(&s.mu);
    CHECK(fin == 12 && bad == 0);
    // free with requests in flight: each still gets its last event
    struct thr_arg t2 = {.e = e, .s = &s, .base = 90};
    submitter(&t2);
    lm_engine_free(e);
    int last = 0;
    for (int i = 0; i < s.n; i++) last += s.r[i].finals == 1;
    CHECK(last == 16);
    lm_model_free(m);
    return lm_test_finish();
}
