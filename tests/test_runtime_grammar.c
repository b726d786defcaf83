// Grammar-constrained generation through the engine on the default model: every token the
// engine delivers is one the grammar allows (the output replayed through a fresh matcher is a
// sentence), the request ends at the grammar's end, forced runs ride along as drafts
// (jump-forward) and the tokens equal a plain loop's (lm_decode one token at a time, masked
// sampling, no drafts), alone and beside other requests (greedy, seeded, with lookup, with a
// logit bias, with logprobs), and in a pool small enough to preempt.
// LM_TEST_LABELS: model;engine
#include <stdlib.h>
#include <string.h>

#include "lm_test.h"
#include "lm_test_engine.h"
#include "lm_test_model.h"
#include "lumen.h"

static struct lm_model *g_m;

// a person record: keys the grammar forces, free text and digits between
static const char k_gbnf[] =
    "root   ::= \"{\" ws \"\\\"name\\\":\" ws string \",\" ws \"\\\"age\\\":\" ws age \",\" ws (\n"
    "           \"\\\"city\\\":\" ws string \",\" ws \"\\\"tags\\\":\" ws tags ws \"}\" )\n"
    "string ::= \"\\\"\" [a-zA-Z .,'-]{1,24} \"\\\"\"\n"
    "age    ::= [1-9] [0-9]?\n"
    "tags   ::= \"[\" ws ( string ( \",\" ws string ){0,3} )? ws \"]\"\n"
    "ws     ::= \" \"?\n";

static const char *k_prompts[] = {
    "Here is a person record in JSON:\n",
    "The customer database export, one JSON object per line:\n",
    "Once upon a time, in a small village by the sea,",
    "JSON: ",
};
#define NPR (int)(sizeof k_prompts / sizeof k_prompts[0])

static int32_t *toks_of(const char *text, int *n) {
    int32_t *ids = NULL;
    size_t ni = 0;
    lm_tokenize(lm_model_tokenizer(g_m), text, strlen(text), true, false, &ids, &ni);
    *n = (int)ni;
    return ids;
}

// The output replayed through a fresh matcher: every token allowed, the text a sentence.
static void check_sentence(struct lm_grammar *g, const struct lm_test_rec *r, const char *what) {
    struct lm_grammar_matcher *gm = NULL;
    CHECK(lm_grammar_matcher_init(&gm, g) == LM_OK);
    if (!gm) return;
    int ok = 1;
    for (int i = 0; i < r->n && ok; i++) {
        const bool eog = lm_tokenizer_is_eog(lm_model_tokenizer(g_m), r->tok[i]);
        if (eog && i == r->n - 1) break;
        ok = lm_grammar_matcher_accept(gm, r->tok[i]);
        CHECKF(ok, "%s: token %d (id %d) refused on replay", what, i, r->tok[i]);
    }
    if (r->finish == LM_FINISH_EOG) CHECKF(lm_grammar_matcher_can_end(gm), "%s: not a sentence", what);
    lm_grammar_matcher_free(gm);
}

// The plain loop: one token per lm_decode, masked sampling on the full row, no drafts.
static void plain(struct lm_grammar *g, const int32_t *pr, int pn, const struct lm_request_params *rp,
                  struct lm_test_rec *out) {
    memset(out, 0, sizeof *out);
    struct lm_context_params cp = {.n_ctx = 512, .n_seq_max = 1, .n_batch = 128, .n_threads = 2};
    struct lm_context *c = NULL;
    struct lm_sampler *s = NULL;
    struct lm_grammar_matcher *gm = NULL;
    const int32_t nv = lm_model_n_vocab(g_m);
    uint32_t *mask = malloc(((size_t)nv + 31) / 32 * sizeof *mask);
    float *lg = malloc((size_t)nv * sizeof *lg);
    CHECK(lm_context_init(&c, g_m, &cp) == LM_OK && lm_sampler_init(&s, &rp->sampling, nv) == LM_OK &&
          lm_grammar_matcher_init(&gm, g) == LM_OK && mask && lg);
    struct lm_batch_entry b[128];
    for (int i = 0; i < pn; i++) b[i] = (struct lm_batch_entry){pr[i], i, 0, i == pn - 1};
    CHECK(lm_decode(c, b, pn) == LM_OK);
    for (int i = 0; i < pn; i++) lm_sampler_accept(s, pr[i]);
    for (int pos = pn; out->n < rp->max_tokens; pos++) {
        memcpy(lg, lm_get_logits(c, 0), (size_t)nv * sizeof *lg);
        for (int i = 0; i < rp->n_bias; i++) lg[rp->bias_tokens[i]] += rp->bias_values[i];
        lm_grammar_matcher_fill_mask(gm, mask);
        const int32_t t = lm_sampler_sample_masked(s, lg, mask);
        CHECK(t >= 0 && lm_grammar_matcher_accept(gm, t));
        lm_sampler_accept(s, t);
        out->tok[out->n++] = t;
        if (lm_tokenizer_is_eog(lm_model_tokenizer(g_m), t) || lm_grammar_matcher_is_done(gm)) {
            out->finish = LM_FINISH_EOG;
            break;
        }
        struct lm_batch_entry e = {t, pos, 0, true};
        CHECK(lm_decode(c, &e, 1) == LM_OK);
    }
    if (out->finish == LM_FINISH_NONE) out->finish = LM_FINISH_LENGTH;
    out->finals = 1;
    free(mask);
    free(lg);
    lm_grammar_matcher_free(gm);
    lm_sampler_free(s);
    lm_context_free(c);
}

static void run(struct lm_engine *e) {
    while (lm_engine_step(e) > 0) {}
}

int main(void) {
    if (lm_model_load(&g_m, lm_test_model_path(), NULL) != LM_OK) {
        CHECKF(0, "cannot load the default model: %s", lm_error_msg());
        return lm_test_finish();
    }
    struct lm_grammar *g = NULL;
    CHECKF(lm_grammar_compile(&g, lm_model_tokenizer(g_m), k_gbnf, sizeof k_gbnf - 1, NULL) == LM_OK,
           "compile: %s", lm_error_msg());
    if (!g) return lm_test_finish();

    // the requests: 4 prompts (2 in the sanitizer and generic-kernel passes) x (greedy, seeded
    // with logprobs, greedy + lookup, greedy + a bias against '"')
    const int NR = (lm_test_quick() ? 2 : NPR) * 4;
    struct lm_request_params rps[4 * NPR];
    int32_t *pr[NPR];
    int pn[NPR];
    int32_t bias_tok[1] = {-1};
    float bias_val[1] = {-3.0f};
    {
        int32_t *q = NULL;
        size_t nq = 0;
        lm_tokenize(lm_model_tokenizer(g_m), "\"", 1, false, false, &q, &nq);
        if (nq == 1) bias_tok[0] = q[0];
        free(q);
    }
    for (int p = 0; p < NPR; p++) pr[p] = toks_of(k_prompts[p], &pn[p]);
    for (int i = 0; i < NR; i++) {
        struct lm_request_params rp = lm_request_params_default();
        rp.max_tokens = 200; // the grammar ends within ~170 characters
        rp.grammar = g;
        const int kind = i % 4;
        rp.sampling.temperature = kind == 1 ? 0.8f : 0.0f;
        rp.sampling.seed = 11 + (uint64_t)i;
        rp.lookup = kind == 2;
        if (kind == 3 && bias_tok[0] >= 0) {
            rp.bias_tokens = bias_tok;
            rp.bias_values = bias_val;
            rp.n_bias = 1;
        }
        if (kind == 1) rp.n_logprobs = 3;
        rps[i] = rp;
    }

    // alone on an engine each, then all at once, then in a pool that preempts
    static struct lm_test_rec ref[4 * NPR], alone[4 * NPR], together[4 * NPR], tight[4 * NPR];
    uint64_t forced = 0;
    for (int i = 0; i < NR; i++) {
        plain(g, pr[i / 4], pn[i / 4], &rps[i], &ref[i]);
        struct lm_engine_params ep = {.max_running = 1, .n_ctx = 512, .n_threads = 2};
        struct lm_engine *e = NULL;
        CHECK(lm_engine_init(&e, g_m, &ep) == LM_OK);
        if (!e) break;
        CHECK(lm_engine_submit(e, pr[i / 4], pn[i / 4], &rps[i], lm_test_rec_on_event, &alone[i], NULL) == LM_OK);
        run(e);
        struct lm_engine_stats st;
        lm_engine_stats(e, &st);
        forced += st.forced_tokens;
        lm_engine_free(e);
        CHECKF(lm_test_rec_same(&alone[i], &ref[i]), "request %d alone: %d tokens, plain loop %d", i, alone[i].n, ref[i].n);
        check_sentence(g, &alone[i], "alone");
        CHECKF(alone[i].finish == LM_FINISH_EOG, "request %d: finish %d (the grammar ends within 200 tokens)",
               i, alone[i].finish);
    }
    CHECKF(forced > 0, "no forced tokens rode along (jump-forward)");
    printf("jump-forward: %llu forced tokens over %d requests\n", (unsigned long long)forced, NR);
    for (int round = 0; round < 2; round++) {
        struct lm_test_rec *out = round ? tight : together;
        // round 1: a pool of 256 positions for 8 running requests of up to ~210: preemption
        struct lm_engine_params ep = {.max_running = 8, .n_ctx = 512, .kv_tokens = round ? 256 : 0,
                                      .n_threads = 2};
        struct lm_engine *e = NULL;
        CHECK(lm_engine_init(&e, g_m, &ep) == LM_OK);
        if (!e) break;
        for (int i = 0; i < NR; i++)
            CHECK(lm_engine_submit(e, pr[i / 4], pn[i / 4], &rps[i], lm_test_rec_on_event, &out[i], NULL) == LM_OK);
        run(e);
        lm_engine_free(e);
        for (int i = 0; i < NR; i++)
            CHECKF(lm_test_rec_same(&out[i], &ref[i]), "request %d, %s: differs from the plain loop", i,
                   round ? "preempting pool" : "16 at once");
    }
    // a grammar that is refused is an error with a message, and no grammar
    struct lm_grammar *bad = NULL;
    static const char k_bad[] = "root ::= undefined-rule";
    CHECK(lm_grammar_compile(&bad, lm_model_tokenizer(g_m), k_bad, sizeof k_bad - 1, NULL) != LM_OK);
    CHECK(bad == NULL && strlen(lm_error_msg()) > 0);
    for (int p = 0; p < NPR; p++) free(pr[p]);
    lm_grammar_free(g);
    lm_model_free(g_m);
    return lm_test_finish();
}
