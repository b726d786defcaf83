// The engine (lm_engine_*) on the default model: requests alone and 16 at once give the
// same tokens (greedy and seeded sampling); a shared prefix is computed once and the
// second request still gets exactly what it gets alone; a long prompt is chunked so
// decoding requests get a token every step; cancellation at every stage frees the
// request's blocks; a small pool preempts and recomputes with identical results; finish
// reasons, logprobs, logit bias, a full queue and bad requests. (The engine thread:
// test_runtime_sched_threads.c.)
// LM_TEST_LABELS: model;engine
#include <pthread.h>
#include <time.h>

#include "lm_test.h"
#include "lm_test_model.h"
#include "lumen.h"

#define MAXR 64
#define MAXG 64

// what the events of one request said
struct rec {
    uint64_t id;
    int32_t tok[MAXG];
    float lp[MAXG];
    int n;
    enum lm_finish finish;
    int n_cached, finals, bad;
    int32_t top0[MAXG];
    int last_step; // step counter when the last event came (step-mode tests)
};

struct sink {
    pthread_mutex_t mu;
    struct rec r[MAXR];
    int n;
    int step; // incremented by the test between lm_engine_step calls
};

static void on_event(void *user, const struct lm_event *ev) {
    struct sink *s = user;
    pthread_mutex_lock(&s->mu);
    struct rec *r = NULL;
    for (int i = 0; i < s->n; i++) if (s->r[i].id == ev->id) r = &s->r[i];
    if (!r && s->n < MAXR) { r = &s->r[s->n++]; memset(r, 0, sizeof *r); r->id = ev->id; }
    if (r) {
        if (r->finals) r->bad++; // nothing after the last event
        if (ev->token >= 0) {
            if (ev->index != r->n) r->bad++;
            if (r->n < MAXG) {
                r->lp[r->n] = ev->logprob;
                r->top0[r->n] = ev->n_top > 0 ? ev->top_tokens[0] : -1;
                r->tok[r->n++] = ev->token;
            }
        }
        if (ev->finish != LM_FINISH_NONE) { r->finish = ev->finish; r->finals++; }
        r->n_cached = ev->n_cached;
        r->last_step = s->step;
    }
    pthread_mutex_unlock(&s->mu);
}

static struct rec *find(struct sink *s, uint64_t id) {
    for (int i = 0; i < s->n; i++) if (s->r[i].id == id) return &s->r[i];
    return NULL;
}

static int run_all(struct lm_engine *e, struct sink *s) {
    int steps = 0, left;
    while ((left = lm_engine_step(e)) > 0 && steps < 100000) { steps++; s->step++; }
    return left < 0 ? -1 : steps;
}

static struct lm_model *g_m;

static struct lm_engine *engine(int max_running, int step_tokens, int kv_tokens, int max_waiting) {
    struct lm_engine_params ep = {.max_running = max_running, .step_tokens = step_tokens,
                                  .n_ctx = 1024, .kv_tokens = kv_tokens, .n_threads = 2,
                                  .max_waiting = max_waiting};
    struct lm_engine *e = NULL;
    if (lm_engine_init(&e, g_m, &ep) != LM_OK) fprintf(stderr, "engine: %s\n", lm_error_msg());
    return e;
}

// the two event sinks and the prompts every sub-test shares (set up in main)
static struct sink s1, s2;
static int32_t prompts[16][48];

// (a) alone vs together: greedy and seeded sampling give the same tokens
static void test_alone_vs_together(int NR, int GEN) {
    struct lm_request_params rp[16];
    for (int i = 0; i < NR; i++) {
        rp[i] = lm_request_params_default();
        rp[i].max_tokens = GEN;
        rp[i].ignore_eos = true;
        rp[i].sampling.seed = 1000 + (uint64_t)i;
        if (i % 2 == 0) rp[i].sampling.temperature = 0; // half greedy, half sampled
        rp[i].n_logprobs = i == 0 ? 3 : 0;
    }
    uint64_t id1[16], id2[16];
    for (int i = 0; i < NR; i++) { // one at a time, a fresh engine each (no prefix cache help)
        struct lm_engine *e = engine(1, 64, 0, 0);
        CHECK(e != NULL);
        CHECK(lm_engine_submit(e, prompts[i], 20 + 2 * i, &rp[i], on_event, &s1, &id1[i]) == LM_OK);
        CHECK(run_all(e, &s1) >= 0);
        lm_engine_free(e);
    }
    {
        struct lm_engine *e = engine(16, 64, 0, 0);
        for (int i = 0; i < NR; i++)
            CHECK(lm_engine_submit(e, prompts[i], 20 + 2 * i, &rp[i], on_event, &s2, &id2[i]) == LM_OK);
        struct timespec w0, w1;
        clock_gettime(CLOCK_MONOTONIC, &w0);
        const int steps = run_all(e, &s2);
        clock_gettime(CLOCK_MONOTONIC, &w1);
        struct lm_engine_stats st;
        lm_engine_stats(e, &st);
        // forward pass and sampling times: both spent, together within the steps' wall time
        const uint64_t wall = (uint64_t)(w1.tv_sec - w0.tv_sec) * 1000000000ull + (uint64_t)w1.tv_nsec -
                              (uint64_t)w0.tv_nsec;
        CHECKF(st.forward_ns > 0 && st.sample_ns > 0 && st.forward_ns + st.sample_ns <= wall,
               "forward %llu + sample %llu ns, wall %llu ns", (unsigned long long)st.forward_ns,
               (unsigned long long)st.sample_ns, (unsigned long long)wall);
        printf("%d requests together: %d steps, %llu generated, %llu prefilled\n", NR, steps,
               (unsigned long long)st.generated_tokens, (unsigned long long)st.prefilled_tokens);
        CHECK(st.generated_tokens == (uint64_t)(NR * GEN) && st.running == 0 && st.waiting == 0);
        CHECK(st.kv.n_used == 0); // every finished request's blocks were released
        lm_engine_free(e);
    }
    int same = 0;
    for (int i = 0; i < NR; i++) {
        struct rec *a = find(&s1, id1[i]), *b = find(&s2, id2[i]);
        CHECK(a && b);
        if (!a || !b) continue;
        CHECK(a->finish == LM_FINISH_LENGTH && b->finish == LM_FINISH_LENGTH && a->finals == 1 && b->finals == 1);
        CHECK(a->bad == 0 && b->bad == 0 && a->n == GEN && b->n == GEN);
        same += a->n == b->n && !memcmp(a->tok, b->tok, sizeof(int32_t) * (size_t)a->n);
    }
    CHECKF(same == NR, "%d of %d requests give the same tokens alone and together", same, NR);
    { // logprobs: <= 0, the greedy token is the top alternative
        struct rec *a = find(&s1, id1[0]);
        int ok = a != NULL;
        for (int g = 0; a && g < a->n; g++) ok = ok && a->lp[g] <= 0 && a->top0[g] == a->tok[g];
        CHECK(ok);
    }
}

// (b) prefix cache: a 100-token shared prefix is computed once; the second
// request gets exactly what it gets alone
static void test_prefix_cache(void) {
    int32_t p1[110], p2[110];
    lm_test_prompt(p1, 110, 77);
    memcpy(p2, p1, sizeof p1);
    for (int i = 100; i < 110; i++) p2[i] = 300 + i;
    struct lm_request_params g = lm_request_params_default();
    g.sampling.temperature = 0;
    g.max_tokens = 6;
    g.ignore_eos = true;
    struct lm_engine *e = engine(4, 64, 0, 0);
    uint64_t a, b, c;
    CHECK(lm_engine_submit(e, p1, 110, &g, on_event, &s1, &a) == LM_OK);
    CHECK(run_all(e, &s1) >= 0);
    CHECK(lm_engine_submit(e, p2, 110, &g, on_event, &s1, &b) == LM_OK);
    CHECK(run_all(e, &s1) >= 0);
    struct lm_engine_stats st;
    lm_engine_stats(e, &st);
    lm_engine_free(e);
    e = engine(4, 64, 0, 0); // p2 alone, nothing cached
    CHECK(lm_engine_submit(e, p2, 110, &g, on_event, &s1, &c) == LM_OK);
    CHECK(run_all(e, &s1) >= 0);
    lm_engine_free(e);
    struct rec *rb = find(&s1, b), *rc = find(&s1, c);
    CHECK(rb && rc && rb->n_cached == 96 && rc->n_cached == 0);
    CHECK(rb && rc && rb->n == 6 && rc->n == 6 && !memcmp(rb->tok, rc->tok, sizeof(int32_t) * 6));
    CHECK(st.prefilled_tokens == 110 + (110 - 96));
    CHECK(st.kv.prefix_hit_tokens == 96);
}

// (c) a long prompt arriving while 4 requests decode: chunked, the decoders get a
// token in every step, no step exceeds the budget
static void test_chunked_prefill(void) {
    struct sink *s = &s2;
    struct lm_engine *e = engine(8, 32, 0, 0);
    struct lm_request_params g = lm_request_params_default();
    g.sampling.temperature = 0;
    g.max_tokens = 40;
    g.ignore_eos = true;
    uint64_t d[4], big;
    for (int i = 0; i < 4; i++) CHECK(lm_engine_submit(e, prompts[i], 8, &g, on_event, s, &d[i]) == LM_OK);
    for (int k = 0; k < 3; k++) { lm_engine_step(e); s->step++; } // all 4 decoding now
    int32_t lp[300];
    lm_test_prompt(lp, 300, 5);
    g.max_tokens = 2;
    CHECK(lm_engine_submit(e, lp, 300, &g, on_event, s, &big) == LM_OK);
    int gaps = 0, over = 0, steps = 0, prev[4];
    for (int i = 0; i < 4; i++) prev[i] = find(s, d[i])->n;
    while (steps < 12) { // the 300-token prompt needs > 10 steps of 28 prefill tokens
        lm_engine_step(e);
        s->step++;
        steps++;
        struct lm_engine_stats st;
        lm_engine_stats(e, &st);
        if (st.last_step_tokens > 32) over++;
        for (int i = 0; i < 4; i++) {
            const int n = find(s, d[i])->n;
            if (n != prev[i] + 1) gaps++;
            prev[i] = n;
        }
    }
    CHECKF(gaps == 0 && over == 0, "decoders missed %d steps, %d steps over budget", gaps, over);
    CHECK(run_all(e, s) >= 0);
    CHECK(find(s, big) && find(s, big)->n == 2);
    lm_engine_free(e);
}

// (d) cancellation while queued, mid-prefill and decoding: blocks freed
static void test_cancel(void) {
    struct sink *s = &s2;
    struct lm_engine *e = engine(2, 16, 0, 0);
    struct lm_request_params g = lm_request_params_default();
    g.max_tokens = 50;
    g.ignore_eos = true;
    int32_t lp[200];
    lm_test_prompt(lp, 200, 6);
    uint64_t dec, pre, q;
    CHECK(lm_engine_submit(e, prompts[0], 10, &g, on_event, s, &dec) == LM_OK);
    lm_engine_step(e); // dec prefilled, decoding next
    CHECK(lm_engine_submit(e, lp, 200, &g, on_event, s, &pre) == LM_OK);
    CHECK(lm_engine_submit(e, prompts[1], 10, &g, on_event, s, &q) == LM_OK); // queued: 2 running
    lm_engine_step(e);
    lm_engine_step(e); // pre is mid-prefill (16 tokens a step)
    struct lm_engine_stats st;
    lm_engine_stats(e, &st);
    CHECK(st.running == 2 && st.waiting == 1 && st.kv.n_used > 0);
    lm_engine_cancel(e, q);
    lm_engine_cancel(e, pre);
    lm_engine_cancel(e, dec);
    lm_engine_cancel(e, 987654); // unknown: ignored
    CHECK(lm_engine_step(e) == 0);
    lm_engine_stats(e, &st);
    CHECK(st.running == 0 && st.waiting == 0 && st.kv.n_used == 0 && st.cancelled == 3);
    CHECK(find(s, dec)->finish == LM_FINISH_CANCELLED && find(s, pre)->finish == LM_FINISH_CANCELLED);
    CHECK(find(s, q) && find(s, q)->finish == LM_FINISH_CANCELLED && find(s, q)->n == 0);
    lm_engine_free(e);
}

// (e) a pool too small for all: preemption, results unchanged
static void test_preemption(void) {
    struct sink *s = &s2;
    struct lm_engine *e = engine(4, 64, 160, 0); // 10 blocks for 4 requests of ~60
    struct lm_request_params g = lm_request_params_default();
    g.sampling.temperature = 0;
    g.max_tokens = 30;
    g.ignore_eos = true;
    uint64_t ids[4], solo[4];
    for (int i = 0; i < 4; i++) CHECK(lm_engine_submit(e, prompts[i], 30, &g, on_event, s, &ids[i]) == LM_OK);
    CHECK(run_all(e, s) >= 0);
    struct lm_engine_stats st;
    lm_engine_stats(e, &st);
    printf("pool of 160 tokens, 4 requests of 60: %llu preemptions\n", (unsigned long long)st.preempted);
    CHECK(st.preempted > 0 && st.kv.n_used == 0);
    lm_engine_free(e);
    for (int i = 0; i < 4; i++) {
        e = engine(1, 64, 0, 0);
        CHECK(lm_engine_submit(e, prompts[i], 30, &g, on_event, s, &solo[i]) == LM_OK);
        CHECK(run_all(e, s) >= 0);
        lm_engine_free(e);
        struct rec *a = find(s, ids[i]), *b = find(s, solo[i]);
        CHECK(a && b && a->n == 30 && b->n == 30 && !memcmp(a->tok, b->tok, sizeof(int32_t) * 30));
    }
}

// (f) finish reasons, logit bias, a full queue, bad requests
static void test_finish_reasons(void) {
    struct sink *s = &s2;
    struct lm_engine *e = engine(1, 64, 0, 1); // holds 1 running + 1 queued
    struct lm_request_params g = lm_request_params_default();
    g.sampling.temperature = 0;
    g.max_tokens = 3;
    int32_t bt = 1234;
    float bv = 100.0f;
    g.bias_tokens = &bt;
    g.bias_values = &bv;
    g.n_bias = 1;
    g.ignore_eos = true;
    uint64_t a, b;
    CHECK(lm_engine_submit(e, prompts[2], 12, &g, on_event, s, &a) == LM_OK);
    g.n_bias = 0;
    g.max_tokens = 0; // until the context ends: 1024 - 1020
    int32_t lp[1020];
    lm_test_prompt(lp, 1020, 8);
    CHECK(lm_engine_submit(e, lp, 1020, &g, on_event, s, &b) == LM_OK);
    CHECK(lm_engine_submit(e, prompts[3], 12, &g, on_event, s, NULL) == LM_ERR_BUSY &&
          strstr(lm_error_msg(), "queue"));
    CHECK(run_all(e, s) >= 0);
    struct rec *ra = find(s, a), *rb = find(s, b);
    CHECK(ra && ra->finish == LM_FINISH_LENGTH && ra->n == 3 && ra->tok[0] == 1234 && ra->tok[2] == 1234);
    CHECKF(rb && rb->finish == LM_FINISH_CONTEXT && rb->n == 4, "finish %d n %d", rb ? (int)rb->finish : -1, rb ? rb->n : -1);
    struct lm_engine_stats st;
    lm_engine_stats(e, &st);
    CHECK(st.refused_busy == 1);
    // bad requests: one clear message each
    g.max_tokens = 10;
    CHECK(lm_engine_submit(e, prompts[0], 0, &g, on_event, s, NULL) == LM_ERR_ARG);
    int32_t badt[2] = {2, 1 << 30};
    CHECK(lm_engine_submit(e, badt, 2, &g, on_event, s, NULL) == LM_ERR_ARG && strstr(lm_error_msg(), "out of range"));
    g.max_tokens = 100;
    CHECK(lm_engine_submit(e, lp, 1000, &g, on_event, s, NULL) == LM_ERR_ARG && strstr(lm_error_msg(), "exceeds"));
    g.max_tokens = 1;
    g.n_logprobs = 99;
    CHECK(lm_engine_submit(e, prompts[0], 5, &g, on_event, s, NULL) == LM_ERR_ARG);
    g.n_logprobs = 0;
    g.sampling.top_p = -1;
    CHECK(lm_engine_submit(e, prompts[0], 5, &g, on_event, s, NULL) == LM_ERR_ARG);
    lm_engine_free(e);
    struct lm_engine_params bad = {.max_running = 8, .step_tokens = 4};
    CHECK(lm_engine_init(&e, g_m, &bad) == LM_ERR_ARG && e == NULL);
}

// (f2) a burst: free sequences take requests beyond the queue (3 running + 2 queued),
// the next is refused; once one finishes, one more fits
static void test_burst(void) {
    struct sink *s = &s2;
    s->n = 0;
    struct lm_engine *e = engine(3, 64, 0, 2);
    struct lm_request_params g = lm_request_params_default();
    g.sampling.temperature = 0;
    g.max_tokens = 2;
    for (int i = 0; i < 5; i++) CHECK(lm_engine_submit(e, prompts[i], 8, &g, on_event, s, NULL) == LM_OK);
    CHECK(lm_engine_submit(e, prompts[5], 8, &g, on_event, s, NULL) == LM_ERR_BUSY);
    for (int done = 0; !done && lm_engine_step(e) > 0;)
        for (int i = 0; i < s->n; i++) done |= s->r[i].finals > 0;
    CHECK(lm_engine_submit(e, prompts[5], 8, &g, on_event, s, NULL) == LM_OK);
    CHECK(run_all(e, s) >= 0);
    lm_engine_free(e);
}

int main(void) {
    if (!(g_m = lm_test_load(lm_test_model_path()))) return 1;
    const bool quick = lm_test_quick();
    const int NR = quick ? 6 : 16, GEN = quick ? 8 : 16;
    pthread_mutex_init(&s1.mu, NULL);
    pthread_mutex_init(&s2.mu, NULL);
    for (int i = 0; i < 16; i++) lm_test_prompt(prompts[i], 48, (uint64_t)(50 + i));

    test_alone_vs_together(NR, GEN);
    test_prefix_cache();
    test_chunked_prefill();
    test_cancel();
    test_preemption();
    test_finish_reasons();
    test_burst();

    lm_model_free(g_m);
    return lm_test_finish();
}
