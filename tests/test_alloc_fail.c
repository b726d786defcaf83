// Allocation failures (tests/lib/alloc_fail.h: the Nth allocation of lumen's code returns NULL)
// swept over the model load, a context's init and first batch, KV growth (a sequence sharing
// another's blocks, then growing past its first reservation with a copy-on-write) on a
// context that must stay usable after each failure, and one engine request (init, submit,
// steps to the end): every N ends in a clean error (a status and a message; for a request,
// LM_FINISH_ERROR with its message) or a success through a fallback (listed in the output),
// never a crash, and under ASan (the sanitizer pass, where this test matters most) nothing
// leaks. Each sweep tries every N up to the first that injects no failure (the operation's
// allocation count + 1): the model load makes ~30 allocations (the vocabulary and the
// weights are a few large blocks), the others under 100, so no stride is needed.
// LM_TEST_LABELS: model;engine
#include "alloc_fail.h"
#include "lm_test.h"

#include "lumen.h"

struct sweep {
    const char *what;
    long tried, failed_clean, tolerated, total;
    uint64_t t0; // lm_time_ns at the start
};

// arm the nth failure with this thread's message cleared (a stale one must not pass a check)
static void arm(long n) {
    lm_error_set(LM_OK, "%s", "");
    alloc_fail_arm(n);
}

static void sweep_report(const struct sweep *s) {
    printf("%-16s %ld allocations; %ld tried: %ld clean errors, %ld succeeded despite the failure (%.1f s)\n",
           s->what, s->total, s->tried, s->failed_clean, s->tolerated, (double)(lm_time_ns() - s->t0) / 1e9);
}

// one outcome of an operation run with allocation n failing
static bool sweep_step(struct sweep *s, long n, enum lm_status st) {
    const long count = alloc_fail_disarm();
    s->tried++;
    if (!alloc_fail_injected()) { // past the end: the operation needs fewer allocations
        CHECKF(st == LM_OK, "%s: no failure injected (N %ld) yet %s: %s", s->what, n, lm_status_name(st),
               lm_error_msg());
        s->total = count;
        return false;
    }
    if (st == LM_OK) { // a fallback (listed: LUMEN_ALLOC_FAIL_BACKTRACE=1 shows where)
        s->tolerated++;
        printf("%s: N %ld failed, the operation went on without it\n", s->what, n);
    } else {
        s->failed_clean++;
        const char *msg = lm_error_msg();
        CHECKF(msg && msg[0], "%s: N %ld: %s with an empty message", s->what, n, lm_status_name(st));
    }
    return true;
}

// ---- model load

static void sweep_load(const char *path) {
    struct sweep s = {.what = "model load", .t0 = lm_time_ns()};
    for (long n = 1;; n++) {
        struct lm_model *m = NULL;
        arm(n);
        const enum lm_status st = lm_model_load(&m, path, NULL);
        const bool more = sweep_step(&s, n, st);
        if (st == LM_OK) lm_model_free(m);
        else CHECKF(m == NULL, "model load: N %ld failed but left a model", n);
        if (!more) break;
    }
    sweep_report(&s);
}

// ---- a context: init and a 16-token prompt; then KV growth on a context that lives
// through the sweep: a fresh sequence takes 250 positions of a prefilled one (seq_cp: its
// per-position arrays are reserved for 256 positions, the blocks shared), then decodes 8
// tokens (a copy-on-write of the shared last block, the arrays grown past 256: kv_cache.c's
// seq_reserve). Every N gets a sequence id never used before, so each run allocates the same.

static const struct lm_context_params k_cp = {.n_ctx = 512, .n_seq_max = 64, .n_batch = 64, .n_threads = 1,
                                              .kv_tokens = 1024};

static enum lm_status init_run(struct lm_model *m) {
    struct lm_context *c = NULL;
    enum lm_status st = lm_context_init(&c, m, &k_cp);
    if (st != LM_OK) {
        CHECK(c == NULL);
        return st;
    }
    struct lm_batch_entry e[16];
    for (int32_t i = 0; i < 16; i++) e[i] = (struct lm_batch_entry){2 + 7 * i, i, 0, i == 15};
    st = lm_decode(c, e, 16);
    lm_context_free(c);
    return st;
}

static void sweep_init(struct lm_model *m) {
    struct sweep s = {.what = "context init", .t0 = lm_time_ns()};
    for (long n = 1;; n++) {
        arm(n);
        const enum lm_status st = init_run(m);
        if (!sweep_step(&s, n, st)) break;
    }
    sweep_report(&s);
}

static enum lm_status grow_run(struct lm_context *c, int32_t seq) {
    enum lm_status st = lm_kv_cache_seq_cp(c, 0, seq, 250);
    struct lm_batch_entry e[8];
    for (int32_t i = 0; i < 8; i++) e[i] = (struct lm_batch_entry){300 + i, 250 + i, seq, i == 7};
    if (st == LM_OK) st = lm_decode(c, e, 8);
    return st;
}

static void sweep_kv(struct lm_model *m) {
    struct lm_context *c = NULL;
    CHECK(lm_context_init(&c, m, &k_cp) == LM_OK);
    struct lm_batch_entry e[64];
    enum lm_status st = c ? LM_OK : LM_ERR_NOMEM;
    for (int32_t p0 = 0; st == LM_OK && p0 < 250; p0 += 64) { // sequence 0: 250 positions
        const int32_t n = p0 + 64 <= 250 ? 64 : 250 - p0;
        for (int32_t i = 0; i < n; i++) e[i] = (struct lm_batch_entry){2 + 7 * (p0 + i), p0 + i, 0, i == n - 1};
        st = lm_decode(c, e, n);
    }
    CHECKF(st == LM_OK, "kv growth: the prefill failed: %s", lm_error_msg());
    struct sweep s = {.what = "kv growth", .t0 = lm_time_ns()};
    for (long n = 1; st == LM_OK; n++) {
        const int32_t seq = (int32_t)n;
        if (seq >= k_cp.n_seq_max) {
            CHECKF(false, "kv growth: more than %d runs", k_cp.n_seq_max - 1);
            break;
        }
        arm(n);
        const enum lm_status r = grow_run(c, seq);
        const bool more = sweep_step(&s, n, r);
        CHECK(lm_kv_cache_seq_rm(c, seq, 0, -1) == LM_OK);
        if (!more) break;
    }
    sweep_report(&s);
    lm_context_free(c);
}

// ---- one engine request

struct req_rec {
    int n_tokens, finals;
    enum lm_finish finish;
};

static void on_event(void *user, const struct lm_event *ev) {
    struct req_rec *r = user;
    if (ev->token >= 0) r->n_tokens++;
    if (ev->finish != LM_FINISH_NONE) {
        r->finish = ev->finish;
        r->finals++;
        if (ev->finish == LM_FINISH_ERROR) CHECKF(ev->error && ev->error[0], "engine: an error without a message");
    }
}

// LM_OK: the request ran to max_tokens; LM_ERR_NOMEM stands for a request finished with
// LM_FINISH_ERROR (its message is in the event); other statuses come from init / submit
static enum lm_status engine_run(struct lm_model *m, const int32_t *prompt, int32_t n_prompt) {
    struct lm_engine_params ep = {.max_running = 2, .n_ctx = 128, .kv_tokens = 256, .n_threads = 1};
    struct lm_engine *e = NULL;
    enum lm_status st = lm_engine_init(&e, m, &ep);
    if (st != LM_OK) {
        CHECK(e == NULL);
        return st;
    }
    struct lm_request_params rp = lm_request_params_default();
    rp.max_tokens = 12;
    rp.ignore_eos = true;
    struct req_rec r = {0};
    st = lm_engine_submit(e, prompt, n_prompt, &rp, on_event, &r, NULL);
    if (st == LM_OK) {
        int steps = 0;
        for (int32_t left = 1; left != 0 && steps < 200; steps++) left = lm_engine_step(e);
        CHECKF(r.finals == 1, "engine: a request finished %d times", r.finals);
        if (r.finish == LM_FINISH_ERROR) {
            st = lm_error_set(LM_ERR_NOMEM, "engine: the request finished with an error (its event's)");
        } else {
            CHECKF(r.finish == LM_FINISH_LENGTH && r.n_tokens == 12, "engine: finish %s after %d tokens",
                   lm_finish_name(r.finish), r.n_tokens);
        }
    }
    lm_engine_free(e);
    return st;
}

static void sweep_engine(struct lm_model *m) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    const char *text = "The quick brown fox jumps over the lazy dog. Once upon a time";
    CHECK(lm_tokenize(lm_model_tokenizer(m), text, strlen(text), true, false, &ids, &n_ids) == LM_OK);
    struct sweep s = {.what = "engine request", .t0 = lm_time_ns()};
    for (long n = 1; ids; n++) {
        arm(n);
        const enum lm_status st = engine_run(m, ids, (int32_t)n_ids);
        if (!sweep_step(&s, n, st)) break;
    }
    free(ids);
    sweep_report(&s);
}

int main(void) {
    const char *path = lm_test_model_path();
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (getenv("LUMEN_ALLOW_SKIP")) {
            printf("SKIP: no model at %s\n", path);
            return 0;
        }
        fprintf(stderr, "FAIL: no model at %s\n", path);
        return 1;
    }
    fclose(f);
    sweep_load(path);

    struct lm_model *m = NULL;
    if (lm_model_load(&m, path, NULL) != LM_OK) {
        fprintf(stderr, "FAIL: %s\n", lm_error_msg());
        return 1;
    }
    sweep_init(m);
    sweep_kv(m);
    sweep_engine(m);
    lm_model_free(m);
    return lm_test_finish();
}
