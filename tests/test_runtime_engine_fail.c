// The engine when a forward pass fails (context.h's test_fail_decode hook) on the default
// model: a failed step finishes each request of its batch exactly once with
// LM_FINISH_ERROR (prefill chunks, decode tokens and drafts: several batch rows of one
// request), leaves the queue and the pool consistent, and the engine serves the next
// requests; a failed draft-model forward drops that step's drafts and the requests go on
// with the same greedy tokens. Run under ASan by the sanitizer pass (a request freed on
// its first row and read on the next is the bug this guards).
// LM_TEST_LABELS: model
#include "lm_test.h"
#include "runtime/engine.h"

#define MAXR 16
#define MAXG 48

struct rec {
    uint64_t id;
    int32_t tok[MAXG];
    int n, finals;
    enum lm_finish finish;
};
static struct rec g_rec[MAXR];
static int g_n;

static void on_event(void *user, const struct lm_event *ev) {
    (void)user;
    struct rec *r = NULL;
    for (int i = 0; i < g_n; i++)
        if (g_rec[i].id == ev->id) r = &g_rec[i];
    if (!r) return;
    if (ev->token >= 0 && r->n < MAXG) r->tok[r->n++] = ev->token;
    if (ev->finish != LM_FINISH_NONE) {
        r->finish = ev->finish;
        r->finals++;
    }
}

static struct rec *submit(struct lm_engine *e, const struct lm_tokenizer *tok, const char *text,
                          int32_t n_repeat, struct lm_request_params rp) {
    char buf[8192] = "";
    for (int32_t i = 0; i < n_repeat; i++) strncat(buf, text, sizeof buf - strlen(buf) - 1);
    int32_t *ids = NULL;
    size_t n = 0;
    if (lm_tokenize(tok, buf, strlen(buf), true, false, &ids, &n) != LM_OK) return NULL;
    struct rec *r = &g_rec[g_n++];
    memset(r, 0, sizeof *r);
    const enum lm_status st = lm_engine_submit(e, ids, (int32_t)n, &rp, on_event, NULL, &r->id);
    free(ids);
    return st == LM_OK ? r : NULL;
}

static int run(struct lm_engine *e) {
    int steps = 0, failed = 0;
    for (int32_t left = 1; left > 0 && steps < 2000; steps++) {
        left = lm_engine_step(e);
        if (left < 0) {
            failed++;
            left = 1;
        }
    }
    return failed;
}

int main(void) {
    struct lm_model *m = NULL;
    if (lm_model_load(&m, lm_test_path("models/gemma-3-270m-q4_k_m.gguf"), NULL) != LM_OK) {
        fprintf(stderr, "%s\n", lm_error_msg());
        return 1;
    }
    const struct lm_tokenizer *tok = lm_model_tokenizer(m);
    struct lm_request_params greedy = lm_request_params_default();
    greedy.sampling.temperature = 0.0f;
    greedy.max_tokens = 24;
    greedy.ignore_eos = true;
    struct lm_request_params lookup = greedy;
    lookup.lookup = true;

    // ---- the model's forward pass fails while one request prefills in chunks, one decodes
    // with prompt-lookup drafts and one decodes plainly
    {
        struct lm_engine_params ep = {.max_running = 4, .step_tokens = 24, .n_ctx = 512, .n_threads = 2};
        struct lm_engine *e = NULL;
        CHECK(lm_engine_init(&e, m, &ep) == LM_OK);
        g_n = 0;
        struct rec *a = submit(e, tok, "one two three four five six seven eight. ", 2, lookup);
        struct rec *b = submit(e, tok, "The capital of France is", 1, greedy);
        CHECK(a && b);
        for (int i = 0; i < 6; i++) lm_engine_step(e); // both decoding; a drafts what it repeats
        struct rec *c = submit(e, tok, "A long prompt that takes several steps to prefill. ", 6, greedy);
        CHECK(c != NULL);
        lm_engine_step(e); // c's first chunk
        struct lm_engine_stats st0;
        lm_engine_stats(e, &st0);
        lm_engine_context(e)->test_fail_decode = 1;
        CHECK(lm_engine_step(e) == -1 && strstr(lm_error_msg(), "injected"));
        for (int i = 0; i < 3; i++)
            CHECKF(g_rec[i].finals == 1 && g_rec[i].finish == LM_FINISH_ERROR,
                   "request %d: %d final events, finish %d", i, g_rec[i].finals, g_rec[i].finish);
        struct lm_engine_stats st;
        lm_engine_stats(e, &st);
        CHECK(st.running == 0 && st.waiting == 0 && st.kv.n_used == 0);
        CHECK(lm_kv_check(lm_engine_context(e)->kv));
        // the engine goes on: the next request runs to its end
        struct rec *d = submit(e, tok, "The capital of France is", 1, greedy);
        CHECK(d && run(e) == 0 && d->finish == LM_FINISH_LENGTH && d->n == 24 && d->finals == 1);
        lm_engine_free(e);
    }

    // ---- the draft model's forward fails mid-drafting: its drafts are dropped for that
    // step; the greedy text is the one a plain run gives
    {
        struct lm_engine_params ep = {.max_running = 2, .step_tokens = 64, .n_ctx = 512, .n_threads = 2};
        struct lm_engine *e = NULL;
        CHECK(lm_engine_init(&e, m, &ep) == LM_OK);
        g_n = 0;
        struct rec *plain = submit(e, tok, "Once upon a time, in a small village by the sea,", 1, greedy);
        CHECK(plain && run(e) == 0 && plain->n == 24);
        lm_engine_free(e);

        ep.draft_model = m; // the model as its own draft
        CHECK(lm_engine_init(&e, m, &ep) == LM_OK);
        struct lm_request_params drafted = greedy;
        drafted.use_draft = true;
        drafted.draft_fixed = true;
        drafted.draft_max = 4;
        struct rec *r = submit(e, tok, "Once upon a time, in a small village by the sea,", 1, drafted);
        CHECK(r != NULL);
        lm_engine_step(e); // prefill, the draft catching up
        lm_engine_step(e);
        struct lm_context *dc = e->spec.draft_ctx;
        dc->test_fail_decode = 2; // the second drafting round of the next step
        CHECK(lm_engine_step(e) >= 0);
        dc->test_fail_decode = 1; // the catch-up round of the one after
        CHECK(lm_engine_step(e) >= 0);
        CHECK(run(e) == 0);
        CHECK(r->finish == LM_FINISH_LENGTH && r->finals == 1);
        CHECKF(r->n == plain->n && !memcmp(r->tok, plain->tok, sizeof(int32_t) * (size_t)r->n),
               "drafted greedy text differs from the plain run's after failed drafts");
        struct lm_engine_stats st;
        lm_engine_stats(e, &st);
        CHECK(st.drafted_tokens > 0 && st.kv.n_used == 0);
        CHECK(lm_kv_check(lm_engine_context(e)->kv));
        lm_engine_free(e);
    }
    lm_model_free(m);
    return lm_test_finish();
}
