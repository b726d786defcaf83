// Top-k fused into the LM head (lm_context_set_top_k, lm_get_top_k) against the sampler on
// the full logits: the same tokens, bit for bit, for greedy and seeded sampling chains, at 1
// and 2 threads, with the best kernel table and the generic one; the head's selections equal
// the sorted full row (single and batched decode); the API's refusals.
// LM_TEST_LABELS: model;tables
#include "lm_test.h"
#include "lm_test_model.h"
#include "lumen.h"
#include "runtime/context.h"

#define N_GEN 24

static int32_t nv;
static struct lm_topk_cand *sorted_row; // (nv) reference

static int ref_cmp(const void *a, const void *b) {
    const struct lm_topk_cand *x = a, *y = b;
    const float u = isnan(x->logit) ? -INFINITY : x->logit, v = isnan(y->logit) ? -INFINITY : y->logit;
    if (u != v) return u > v ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

// lm_get_top_k(c, i) is the first k of logits row i sorted by rank
static bool top_matches(struct lm_context *c, int32_t i, int32_t k) {
    const float *lg = lm_get_logits(c, i);
    const struct lm_token_logit *top = NULL;
    const int32_t n = lm_get_top_k(c, i, &top);
    if (!lg || n != k || !top) return false;
    for (int32_t j = 0; j < nv; j++) sorted_row[j] = (struct lm_topk_cand){j, lg[j]};
    qsort(sorted_row, (size_t)nv, sizeof *sorted_row, ref_cmp);
    for (int32_t j = 0; j < k; j++)
        if (top[j].id != sorted_row[j].id || memcmp(&top[j].logit, &sorted_row[j].logit, sizeof(float)))
            return false;
    return true;
}

// N_GEN tokens after a short prompt with sampler params p; fused: through lm_get_top_k
static bool generate(struct lm_context *c, const struct lm_sampler_params *p, bool fused, int32_t *out,
                     int n_checks) {
    struct lm_sampler *s = NULL;
    CHECK(lm_sampler_init(&s, p, nv) == LM_OK);
    const int32_t need = lm_sampler_top_k_need(s);
    CHECK(lm_context_set_top_k(c, fused ? need : 0) == LM_OK);
    CHECK(lm_kv_cache_seq_rm(c, 0, 0, -1) == LM_OK);
    static const int32_t prompt[] = {2, 9259, 1902, 236764, 1217, 659, 611};
    const int32_t np = (int32_t)(sizeof prompt / sizeof prompt[0]);
    struct lm_batch_entry b[8];
    for (int32_t i = 0; i < np; i++) b[i] = (struct lm_batch_entry){prompt[i], i, 0, i == np - 1};
    bool ok = lm_decode(c, b, np) == LM_OK;
    for (int g = 0; ok && g < N_GEN; g++) {
        int32_t id;
        if (fused) {
            if (g < n_checks) CHECKF(top_matches(c, 0, need), "step %d: head top-%d != sorted row", g, need);
            const struct lm_token_logit *top = NULL;
            const int32_t n = lm_get_top_k(c, 0, &top);
            CHECK(n == need);
            id = lm_sampler_sample_top_k(s, top, n);
        } else {
            const struct lm_token_logit *top = NULL;
            CHECK(lm_get_top_k(c, 0, &top) == 0 && !top); // off: nothing selected
            id = lm_sampler_sample(s, lm_get_logits(c, 0));
        }
        out[g] = id;
        lm_sampler_accept(s, id);
        b[0] = (struct lm_batch_entry){id < 0 ? 0 : id, np + g, 0, true};
        ok = id >= 0 && lm_decode(c, b, 1) == LM_OK;
    }
    lm_sampler_free(s);
    return ok;
}

// the engine: events' tokens per request
struct got {
    int32_t tok[4][N_GEN];
    int n[4];
};
static void on_event(void *user, const struct lm_event *ev) {
    struct got *g = user;
    const int r = (int)(ev->id - 1) % 4; // ids count from 1 in submission order
    if (ev->token >= 0 && g->n[r] < N_GEN) g->tok[r][g->n[r]++] = ev->token;
}

// Requests with and without logprobs (which need the full row: the sampler's own pass) in
// one engine, in the same steps: the same tokens, greedy and sampled.
static void engine_check(struct lm_model *m) {
    struct lm_engine_params ep = {.max_running = 4, .step_tokens = 64, .n_ctx = 128, .n_threads = 2};
    struct lm_engine *e = NULL;
    CHECK(lm_engine_init(&e, m, &ep) == LM_OK);
    if (!e) return;
    static const int32_t prompt[] = {2, 9259, 1902, 236764, 1217};
    struct got g = {0};
    for (int i = 0; i < 4; i++) {
        struct lm_request_params rp = lm_request_params_default();
        rp.max_tokens = N_GEN;
        rp.ignore_eos = true;
        rp.sampling.seed = 9;
        if (i >= 2) rp.sampling.temperature = 0.0f; // 2, 3 greedy
        if (i % 2 == 1) rp.n_logprobs = 1;          // 1, 3 with logprobs: the full row
        uint64_t id = 0;
        CHECK(lm_engine_submit(e, prompt, 5, &rp, on_event, &g, &id) == LM_OK && id == (uint64_t)i + 1);
    }
    while (lm_engine_step(e) > 0) { }
    CHECK(g.n[0] == N_GEN && g.n[2] == N_GEN);
    CHECKF(g.n[0] == g.n[1] && !memcmp(g.tok[0], g.tok[1], sizeof g.tok[0]), "engine: sampled tokens differ");
    CHECKF(g.n[2] == g.n[3] && !memcmp(g.tok[2], g.tok[3], sizeof g.tok[2]), "engine: greedy tokens differ");
    lm_engine_free(e);
}

int main(void) {
    struct lm_model *m = lm_test_load(lm_test_model_path());
    if (!m) return 1;
    nv = lm_model_n_vocab(m);
    sorted_row = malloc(sizeof *sorted_row * (size_t)nv);
    const bool quick = lm_test_quick();

    // sampling chains whose candidates the head can select: greedy, the default chain,
    // a hot top-5, the largest top-k the head selects
    struct lm_sampler_params ps[4];
    for (int i = 0; i < 4; i++) ps[i] = lm_sampler_params_default();
    ps[0].temperature = 0.0f;
    ps[1].seed = 7;
    ps[2].temperature = 1.5f; ps[2].top_k = 5; ps[2].top_p = 1.0f; ps[2].min_p = 0.0f; ps[2].seed = 3;
    ps[3].temperature = 1.0f; ps[3].top_k = LM_TOP_K_MAX; ps[3].top_p = 0.99f; ps[3].min_p = 0.0f; ps[3].seed = 11;
    const struct lm_kernels *tabs[2] = {lm_kernels_best(), lm_kernels_generic()};
    int runs = 0, distinct_first = 0;
    int32_t first[4] = {0};
    for (int threads = quick ? 2 : 1; threads <= 2; threads++) {
        struct lm_context_params cp = {.n_ctx = 128, .n_seq_max = 2, .n_batch = 16, .n_threads = threads};
        struct lm_context *c = NULL;
        CHECK(lm_context_init(&c, m, &cp) == LM_OK);
        for (int t = 0; t < (quick ? 1 : 2); t++) {
            lm_context_set_kernels(c, tabs[t]);
            for (int i = 0; i < 4; i++) {
                int32_t a[N_GEN], f[N_GEN];
                CHECK(generate(c, &ps[i], false, a, 0));
                CHECK(generate(c, &ps[i], true, f, t == 0 && threads == 2 ? 3 : 1));
                CHECKF(!memcmp(a, f, sizeof a), "%d threads, %s table, chain %d: fused tokens differ",
                       threads, tabs[t]->name, i);
                if (runs < 4) first[runs] = a[N_GEN - 1];
                runs++;
            }
        }
        // two sequences in one batch: each logits row gets its own selection
        CHECK(lm_context_set_top_k(c, 40) == LM_OK);
        CHECK(lm_kv_cache_seq_rm(c, 0, 0, -1) == LM_OK && lm_kv_cache_seq_rm(c, 1, 0, -1) == LM_OK);
        struct lm_batch_entry b[4] = {{2, 0, 0, false}, {2, 0, 1, false}, {1217, 1, 0, true}, {9259, 1, 1, true}};
        CHECK(lm_decode(c, b, 4) == LM_OK);
        CHECK(top_matches(c, 0, 40));
        CHECK(top_matches(c, 1, 40));
        const struct lm_token_logit *t0 = NULL, *t1 = NULL;
        CHECK(lm_get_top_k(c, 0, &t0) == 40 && lm_get_top_k(c, 1, &t1) == 40 && t0[0].id != t1[0].id);
        CHECK(lm_get_top_k(c, 2, &t0) == 0 && !t0);
        // refusals
        CHECK(lm_context_set_top_k(c, -1) == LM_ERR_ARG);
        CHECK(lm_context_set_top_k(c, LM_TOP_K_MAX + 1) == LM_ERR_ARG);
        CHECK(lm_context_set_top_k(c, 0) == LM_OK);
        CHECK(lm_get_top_k(c, 0, &t0) == 0); // switched off: nothing until the next decode
        lm_context_free(c);
    }
    for (int i = 1; i < 4; i++) distinct_first += first[i] != first[0];
    CHECKF(distinct_first > 0, "the chains all ended on the same token: the comparison proves little");

    // chains that need every logit: penalties, top-k off or above LM_TOP_K_MAX
    struct lm_sampler_params q = lm_sampler_params_default();
    struct lm_sampler *s = NULL;
    q.repeat_penalty = 1.1f;
    CHECK(lm_sampler_init(&s, &q, nv) == LM_OK && lm_sampler_top_k_need(s) == 0);
    struct lm_token_logit one = {0, 1.0f};
    CHECK(lm_sampler_sample_top_k(s, &one, 1) == -1);
    lm_sampler_free(s);
    q = lm_sampler_params_default();
    q.top_k = 0;
    CHECK(lm_sampler_init(&s, &q, nv) == LM_OK && lm_sampler_top_k_need(s) == 0);
    lm_sampler_free(s);
    q.top_k = LM_TOP_K_MAX + 1;
    CHECK(lm_sampler_init(&s, &q, nv) == LM_OK && lm_sampler_top_k_need(s) == 0);
    lm_sampler_free(s);
    q = lm_sampler_params_default(); // default chain: 40; too few candidates given
    CHECK(lm_sampler_init(&s, &q, nv) == LM_OK && lm_sampler_top_k_need(s) == 40);
    CHECK(lm_sampler_sample_top_k(s, &one, 1) == -1);
    lm_sampler_free(s);
    engine_check(m);
    printf("%d chains compared fused against unfused, and in the engine\n", runs);
    free(sorted_row);
    lm_model_free(m);
    return lm_test_finish();
}
