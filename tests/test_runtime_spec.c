// Speculative decoding (prompt lookup) on the default model through the engine: greedy
// text is identical to plain decoding on many prompts (copy tasks, open-ended text, a
// prompt past the sliding window so rollbacks cross it), alone, 8 requests at once, and in
// a pool so small that requests are preempted; seeded sampling is identical too (the
// point-mass rule makes plain sampling's draw), with penalties over accepted drafts;
// drafting counters; KV blocks all released; and the acceptance rule's chi-square on the
// model's own next-token distribution.
// LM_TEST_LABELS: model;engine
#include "lm_test.h"
#include "lm_test_engine.h"
#include "lm_test_model.h"
#include "lumen.h"
#include "runtime/kv_cache.h"
#include "runtime/context.h"
#include "spec_chi2.h"

#define NP 12

static struct lm_model *g_m;

static const char *k_texts[NP] = {
    "Text: The old lighthouse stood at the edge of the cliff for more than two hundred years. "
    "Every night its keeper climbed the narrow stairs and trimmed the wick.\n"
    "The same text, repeated exactly:\n",
    "def compute_total(items):\n    total = 0\n    for item in items:\n        total += item.price "
    "* item.quantity\n    return total\n\n# The same function, renamed to sum_prices:\ndef sum_prices(",
    "Quote: \"We choose to go to the Moon in this decade and do the other things, not because they "
    "are easy, but because they are hard.\"\nThe quote again, word for word: \"",
    "Once upon a time, in a small village by the sea,",
    "The capital of France is",
    "List: apple, banana, cherry, date, elderberry, fig, grape.\nThe list again: apple,",
    "Rewrite with 'cat' changed to 'dog': The cat sat on the mat and the cat looked at the door "
    "while the rain fell.\nRewritten: The dog sat on the mat and the",
    "In 1905, Albert Einstein published four papers that changed physics.",
    "a b c d e f g a b c d e f g a b c",
    "SELECT name, email FROM users WHERE active = 1 ORDER BY name;\n-- same query for the "
    "customers table:\nSELECT name, email FROM",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "Dear John, thank you for your letter of the fifth. Dear John, thank",
};

static int32_t *toks_of(const char *text, int *n) {
    int32_t *ids = NULL;
    size_t ni = 0;
    lm_tokenize(lm_model_tokenizer(g_m), text, strlen(text), true, false, &ids, &ni);
    *n = (int)ni;
    return ids;
}

static struct lm_engine *engine_kv(int max_running, int kv_tokens) {
    struct lm_engine_params ep = {.max_running = max_running, .step_tokens = 256, .n_ctx = 2048,
                                  .kv_tokens = kv_tokens, .n_threads = 2};
    struct lm_engine *e = NULL;
    if (lm_engine_init(&e, g_m, &ep) != LM_OK) fprintf(stderr, "engine: %s\n", lm_error_msg());
    return e;
}

static struct lm_engine *engine(int max_running) { return engine_kv(max_running, 8192); }

static void run(struct lm_engine *e) {
    for (int i = 0; i < 100000 && lm_engine_step(e) > 0; i++) {}
}

// One request alone on a fresh engine; returns its drafted tokens.
static uint64_t gen(const int32_t *p, int n, const struct lm_request_params *rp, struct lm_test_rec *out) {
    struct lm_engine *e = engine(1);
    memset(out, 0, sizeof *out);
    CHECK(lm_engine_submit(e, p, n, rp, lm_test_rec_on_event, out, NULL) == LM_OK);
    run(e);
    struct lm_engine_stats st;
    lm_engine_stats(e, &st);
    CHECK(st.kv.n_used == 0 && lm_kv_check(lm_engine_context(e)->kv));
    CHECK(st.accepted_tokens <= st.drafted_tokens);
    lm_engine_free(e);
    return st.drafted_tokens;
}

int main(void) {
    if (!(g_m = lm_test_load(lm_test_model_path()))) return 1;
    const bool quick = lm_test_quick();
    const int np = quick ? 4 : NP, GEN = quick ? 24 : 64;
    int32_t *pr[NP];
    int pn[NP];
    for (int i = 0; i < NP; i++) pr[i] = toks_of(k_texts[i], &pn[i]);

    // ---- greedy and seeded sampling: alone, lookup vs plain
    static struct lm_test_rec plain[2][NP], look[2][NP], conc[2][NP];
    struct lm_request_params rp[2];
    uint64_t drafted = 0;
    for (int mode = 0; mode < 2; mode++) {
        rp[mode] = lm_request_params_default();
        rp[mode].max_tokens = GEN;
        rp[mode].ignore_eos = true;
        if (mode == 0) rp[mode].sampling.temperature = 0.0f;
        else rp[mode].sampling.repeat_penalty = 1.1f; // penalties see the accepted drafts
        for (int i = 0; i < np; i++) {
            rp[mode].sampling.seed = 100 + (uint64_t)i;
            struct lm_request_params r = rp[mode];
            CHECK(gen(pr[i], pn[i], &r, &plain[mode][i]) == 0);
            r.lookup = true;
            r.draft_max = i % 3 == 2 ? 3 : 0;
            drafted += gen(pr[i], pn[i], &r, &look[mode][i]);
            CHECKF(lm_test_rec_same(&plain[mode][i], &look[mode][i]), "%s prompt %d: lookup differs",
                   mode ? "sampled" : "greedy", i);
        }
    }
    printf("alone: %llu tokens drafted\n", (unsigned long long)drafted);
    CHECK(drafted > 0);

    // ---- 8 at once (continuous batching): each request as alone
    for (int mode = 0; mode < 2; mode++) {
        struct lm_engine *e = engine(8);
        for (int i = 0; i < np; i++) {
            struct lm_request_params r = rp[mode];
            r.sampling.seed = 100 + (uint64_t)i;
            r.lookup = i % 4 != 3; // one in four plain beside them
            memset(&conc[mode][i], 0, sizeof conc[mode][i]);
            CHECK(lm_engine_submit(e, pr[i], pn[i], &r, lm_test_rec_on_event, &conc[mode][i], NULL) == LM_OK);
        }
        run(e);
        struct lm_engine_stats st;
        lm_engine_stats(e, &st);
        printf("together (%s): drafted %llu, accepted %llu, %llu verify steps\n",
               mode ? "sampled" : "greedy", (unsigned long long)st.drafted_tokens,
               (unsigned long long)st.accepted_tokens, (unsigned long long)st.verify_steps);
        CHECK(st.drafted_tokens > 0 && st.accepted_tokens > 0 && st.verify_steps > 0);
        CHECK(st.kv.n_used == 0 && lm_kv_check(lm_engine_context(e)->kv));
        for (int i = 0; i < np; i++)
            CHECKF(lm_test_rec_same(&plain[mode][i], &conc[mode][i]), "%s prompt %d: together differs",
                   mode ? "sampled" : "greedy", i);
        lm_engine_free(e);
    }

    // ---- a pool too small for all of them: preemption (recompute) with drafts in flight
    {
        struct lm_engine *e = engine_kv(8, quick ? 128 : 384);
        static struct lm_test_rec pre[NP];
        for (int i = 0; i < np; i++) {
            struct lm_request_params r = rp[0];
            r.lookup = true;
            memset(&pre[i], 0, sizeof pre[i]);
            CHECK(lm_engine_submit(e, pr[i], pn[i], &r, lm_test_rec_on_event, &pre[i], NULL) == LM_OK);
        }
        run(e);
        struct lm_engine_stats st;
        lm_engine_stats(e, &st);
        printf("small pool: %llu preempted, drafted %llu, accepted %llu\n",
               (unsigned long long)st.preempted, (unsigned long long)st.drafted_tokens,
               (unsigned long long)st.accepted_tokens);
        CHECK(st.preempted > 0);
        CHECK(st.kv.n_used == 0 && lm_kv_check(lm_engine_context(e)->kv));
        for (int i = 0; i < np; i++)
            CHECKF(lm_test_rec_same(&plain[0][i], &pre[i]), "small pool, prompt %d: differs", i);
        lm_engine_free(e);
    }

    // ---- past the sliding window: a copy task whose drafts and rollbacks cross it
    {
        char text[16384] = "Text: ";
        for (int i = 0; i < (quick ? 6 : 22); i++)
            snprintf(text + strlen(text), sizeof text - strlen(text),
                     "Paragraph %d. The river bends twice before the mill, where %d workers "
                     "once ground wheat for the whole valley. ", i, 10 + 7 * i);
        strcat(text, "\nThe same text, repeated exactly:\nText: Paragraph 0. The river");
        int n = 0;
        int32_t *ids = toks_of(text, &n);
        printf("long prompt: %d tokens\n", n);
        struct lm_request_params r = rp[0];
        r.max_tokens = quick ? 32 : 96;
        struct lm_test_rec a, b;
        gen(ids, n, &r, &a);
        r.lookup = true;
        const uint64_t d = gen(ids, n, &r, &b);
        CHECK(d > 0);
        CHECKF(lm_test_rec_same(&a, &b), "long prompt: lookup differs");
        free(ids);
    }

    // ---- the acceptance rule on the model's next-token distribution (chi-square)
    {
        struct lm_context_params cp = {.n_ctx = 256, .n_threads = 2};
        struct lm_context *c = NULL;
        CHECK(lm_context_init(&c, g_m, &cp) == LM_OK);
        struct lm_batch_entry be[64];
        for (int i = 0; i < pn[3]; i++) be[i] = (struct lm_batch_entry){pr[3][i], i, 0, i == pn[3] - 1};
        const enum lm_status dst = lm_decode(c, be, pn[3]);
        CHECKF(dst == LM_OK, "%s", lm_error_msg());
        if (dst != LM_OK) return lm_test_finish();
        const int nv = lm_model_n_vocab(g_m);
        float *lg = malloc((size_t)nv * sizeof *lg);
        double *p = malloc((size_t)nv * sizeof *p);
        int *counts = malloc((size_t)nv * sizeof *counts);
        memcpy(lg, lm_get_logits(c, 0), (size_t)nv * sizeof *lg);
        spec_target(lg, nv, 40, 1.0f, p);
        int d = 0; // the second most likely token as the draft
        for (int i = 0, best = -1; i < nv; i++)
            if (p[i] > 0.0) {
                if (best < 0 || p[i] > p[best]) { d = best >= 0 ? best : d; best = i; }
                else if (d == best || p[i] > p[d]) d = i;
            }
        const int n_draws = quick ? 4000 : 20000;
        for (int rule = 0; rule < 4; rule++) {
            int df = 0;
            double acc = 0.0;
            const double chi = spec_chi2_run(lg, nv, 40, 1.0f, d, NULL, (enum lm_spec_rule)rule,
                                             n_draws, 7 + rule, &df, &acc, counts, p);
            const double crit = spec_chi2_crit(df, 3.09);
            printf("model logits, draft p=%.3f, rule %d: chi2 %.1f (df %d, crit %.1f), accepted %.3f\n",
                   p[d], rule, chi, df, crit, acc);
            if (rule < LM_SPEC_RULE_WRONG_ALWAYS) CHECKF(chi < crit, "rule %d: chi2 %.1f", rule, chi);
            else CHECKF(chi > crit, "wrong rule %d passed: chi2 %.1f", rule, chi);
        }
        free(lg);
        free(p);
        free(counts);
        lm_context_free(c);
    }
    for (int i = 0; i < NP; i++) free(pr[i]);
    lm_model_free(g_m);
    return lm_test_finish();
}
