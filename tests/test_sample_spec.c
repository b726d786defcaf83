// Speculative decoding without a model: the acceptance rule keeps the target's
// distribution (chi-square over many draws, for prompt-lookup point-mass drafts and for a
// drafter's distribution q) and the test detects two deliberately wrong rules; greedy
// verification; prompt lookup; the step cost model and the draft-length choice.
// LM_TEST_LABELS: unit
#include "lm_test.h"
#include "lumen.h"
#include "runtime/spec.h"
#include "spec_chi2.h"

#define NV 300

static double gauss(void) {
    const double u1 = ((double)(lm_test_rng_u64() >> 11) + 0.5) * 0x1.0p-53;
    const double u2 = (double)(lm_test_rng_u64() >> 11) * 0x1.0p-53;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static void test_rule(void) {
    static float lg[NV], q[NV];
    static int counts[NV];
    static double p[NV];
    for (int i = 0; i < NV; i++) lg[i] = (float)(1.5 * gauss());
    const int k = 40, n_draws = 40000;
    const float t = 0.9f;
    // the draft: the 3rd most likely token (p ~ 0.1), and one outside the top k (p = 0)
    spec_target(lg, NV, k, t, p);
    int order[3] = {-1, -1, -1};
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < NV; i++) {
            bool used = false;
            for (int j = 0; j < r; j++) used = used || order[j] == i;
            if (!used && (order[r] < 0 || p[i] > p[order[r]])) order[r] = i;
        }
    int d_out = 0;
    while (p[d_out] > 0.0) d_out++;
    // a drafter's distribution: softmax of the logits plus noise (another model)
    double qt = 0.0;
    for (int i = 0; i < NV; i++) qt += q[i] = (float)exp(lg[i] + gauss());
    for (int i = 0; i < NV; i++) q[i] = (float)(q[i] / qt);
    // point-mass drafts (prompt lookup): a likely token and one the chain excludes; then
    // drafts drawn from q (a draft model), d = -1 below
    const int drafts[3] = {order[2], d_out, -1};
    for (int di = 0; di < 3; di++) {
        const int d = drafts[di];
        const float *qd = d < 0 ? q : NULL;
        double want = d >= 0 ? p[d] : 0.0; // acceptance: p(d), or sum min(p, q)
        for (int i = 0; d < 0 && i < NV; i++) want += p[i] < q[i] ? p[i] : q[i];
        for (int rule = 0; rule < 4; rule++) {
            int df = 0;
            double acc = 0.0;
            const double chi = spec_chi2_run(lg, NV, k, t, d, qd, (enum lm_spec_rule)rule, n_draws,
                                             1000 + rule, &df, &acc, counts, p);
            const double crit = spec_chi2_crit(df, 3.09); // p = 0.001
            const bool wrong = rule >= LM_SPEC_RULE_WRONG_ALWAYS;
            // a point-mass draft outside the chain's tokens is never accepted, and its
            // residual is p itself: no rule can go wrong there
            const bool detectable = wrong && d != d_out;
            printf("draft %-10s rule %d: chi2 %9.1f (df %d, crit %.1f), accepted %.3f (expected "
                   "%.3f)\n", d < 0 ? "from q" : d == d_out ? "p = 0" : "p ~ 0.07", rule, chi, df,
                   crit, acc, want);
            if (!wrong) {
                CHECKF(chi < crit, "rule %d, draft %d: chi2 %.1f >= %.1f", rule, d, chi, crit);
                CHECKF(fabs(acc - want) < 5.0 * sqrt(want * (1 - want) / n_draws) + 1e-9,
                       "rule %d acceptance %.4f, expected %.4f", rule, acc, want);
            } else if (detectable) {
                CHECKF(chi > crit, "wrong rule %d passed: chi2 %.1f <= %.1f", rule, chi, crit);
            }
        }
    }
}

static void test_greedy(void) {
    float lg[8] = {0.1f, 2.0f, 1.9f, -1.0f, 0.5f, 0.0f, 1.0f, 1.5f};
    struct lm_sampler_params sp = lm_sampler_params_default();
    sp.temperature = 0.0f;
    struct lm_sampler *s = NULL;
    CHECK(lm_sampler_init(&s, &sp, 8) == LM_OK);
    bool acc = true;
    CHECK(lm_sampler_verify(s, lg, 2, NULL, &acc) == 1 && !acc);
    CHECK(lm_sampler_verify(s, lg, 1, NULL, &acc) == 1 && acc);
    CHECK(lm_sampler_verify(s, lg, -1, NULL, &acc) == 1 && !acc);
    lm_sampler_free(s);
    // coupled rule: the emitted token is the plain sampler's draw for the same seed
    sp = lm_sampler_params_default();
    sp.seed = 5;
    struct lm_sampler *a = NULL, *b = NULL;
    CHECK(lm_sampler_init(&a, &sp, 8) == LM_OK && lm_sampler_init(&b, &sp, 8) == LM_OK);
    for (int i = 0; i < 200; i++) {
        const int32_t x = lm_sampler_sample(a, lg);
        const int32_t y = lm_sampler_verify(b, lg, (int32_t)(i % 8), NULL, &acc);
        CHECK(x == y && acc == (y == i % 8));
    }
    lm_sampler_free(a);
    lm_sampler_free(b);
}

static void test_lookup(void) {
    int32_t out[8];
    const int32_t t1[] = {5, 1, 2, 3, 4, 9, 9, 1, 2, 3};
    // tail (1 2 3) at index 1: continues 4 9 9 1 2 3 (the tail itself may be copied)
    CHECK(lm_spec_lookup(t1, 10, 8, out) == 6 && out[0] == 4 && out[1] == 9 && out[5] == 3);
    CHECK(lm_spec_lookup(t1, 10, 2, out) == 2 && out[0] == 4 && out[1] == 9);
    // the latest occurrence wins
    const int32_t t2[] = {1, 2, 7, 1, 2, 8, 1, 2};
    CHECK(lm_spec_lookup(t2, 8, 4, out) >= 1 && out[0] == 8);
    // no 2-gram match: nothing (a lone token is not enough)
    const int32_t t3[] = {1, 2, 3, 4, 2};
    CHECK(lm_spec_lookup(t3, 5, 4, out) == 0);
    CHECK(lm_spec_lookup(t3, 1, 4, out) == 0);
    CHECK(lm_spec_lookup(t1, 10, 0, out) == 0);
}

static void test_choose(void) {
    struct lm_spec_cost c;
    CHECK(lm_spec_cost_init(&c, 64, 8) == LM_OK);
    double g = 0.0;
    CHECK(lm_spec_choose(&c, 0.9, 1, 1, 1, 8, &g) == 0); // nothing measured: no drafting
    lm_spec_cost_observe(&c, 1, 1, 10000000);
    CHECK(fabs(lm_spec_cost_est(&c, 1, 1) - 1e7) < 1);
    CHECK(lm_spec_cost_est(&c, 1, 5) > 1e7); // optimistic extrapolation above
    CHECK(lm_spec_cost_est(&c, 2, 5) == 0);  // another sequence count: its own row
    // cheap extra tokens, high acceptance: the longest draft
    CHECK(lm_spec_choose(&c, 0.9, 1, 1, 1, 8, &g) == 8 && g > 4.0);
    // measured: 9 tokens cost 3x one -> shorter drafts only, none at low acceptance
    lm_spec_cost_observe(&c, 1, 9, 30000000);
    // that step priced a token beyond the sequences' own (2.5 ms): other rows use it above
    // their largest measured count
    lm_spec_cost_observe(&c, 3, 3, 20000000);
    CHECK(fabs(c.marginal - 2.5e6) < 1 && fabs(lm_spec_cost_est(&c, 3, 5) - 2.5e7) < 1);
    const int k_hi = lm_spec_choose(&c, 0.9, 1, 1, 1, 8, &g);
    CHECK(k_hi >= 1 && k_hi < 8);
    CHECK(lm_spec_choose(&c, 0.1, 1, 1, 1, 8, &g) == 0);
    // alone in its step, the choice is the length with the most expected tokens per ns (if
    // it beats the plain step by the least gain)
    for (int k = 2; k <= 8; k++) lm_spec_cost_observe(&c, 1, k, (uint64_t)(1e7 * (1.0 + 0.12 * (k - 1))));
    for (int ia = 1; ia <= 9; ia++) {
        const double a = 0.1 * ia;
        int kb = 0;
        double best = exp(LM_SPEC_MIN_GAIN) / lm_spec_cost_est(&c, 1, 1), gk = 0.0, ak = 1.0;
        for (int k = 1; k <= 8; k++) {
            ak *= a;
            gk += ak;
            if ((1.0 + gk) / lm_spec_cost_est(&c, 1, 1 + k) > best) {
                best = (1.0 + gk) / lm_spec_cost_est(&c, 1, 1 + k);
                kb = k;
            }
        }
        CHECK(lm_spec_choose(&c, a, 1, 1, 1, 8, &g) == kb);
    }
    // 8 sequences in the step, each extra token 10% of its cost: even a sure draft cannot
    // repay 8 streams' slowdown (2 tokens for it, a 1.1x longer step for all: 2 < 1.1^8)...
    for (int n = 8; n <= 16; n++) lm_spec_cost_observe(&c, 8, n, (uint64_t)(2e7 + 2e6 * (n - 8)));
    CHECK(lm_spec_choose(&c, 0.99, 8, 8, 8, 8, &g) == 0);
    CHECK(lm_spec_choose(&c, 0.99, 8, 8, 1, 8, &g) > 0); // (alone, the same price pays)
    // ...at 1% per token a likely draft does, an unlikely one does not
    for (int rep = 0; rep < 40; rep++) // the moving averages converge
        for (int n = 8; n <= 16; n++) lm_spec_cost_observe(&c, 8, n, (uint64_t)(2e7 * (1.0 + 0.01 * (n - 8))));
    CHECK(lm_spec_choose(&c, 0.95, 8, 8, 8, 8, &g) > 0);
    CHECK(lm_spec_choose(&c, 0.05, 8, 8, 8, 8, &g) == 0);
    // a hiccup (one step 4x slower) moves the average by 7.5% at most
    const double before = lm_spec_cost_est(&c, 8, 8);
    lm_spec_cost_observe(&c, 8, 8, (uint64_t)(4 * before));
    CHECK(lm_spec_cost_est(&c, 8, 8) <= 1.0751 * before);
    // more sequences than rows share the last row; counts below s are not steps of s
    lm_spec_cost_observe(&c, 20, 24, 50000000);
    CHECK(fabs(lm_spec_cost_est(&c, 12, 24) - 5e7) < 1 && lm_spec_cost_est(&c, 9, 8) == 0);
    lm_spec_cost_free(&c);
    // acceptance: a run of rejections pauses, idling drifts back toward the prior
    struct lm_spec_acc a;
    lm_spec_acc_init(&a);
    CHECK(fabs(lm_spec_acc_rate(&a) - 0.5) < 1e-6);
    for (int i = 0; i < 10; i++) lm_spec_acc_update(&a, 4, 0);
    const double low = lm_spec_acc_rate(&a);
    CHECK(low < 0.1);
    for (int i = 0; i < 100; i++) lm_spec_acc_idle(&a);
    CHECK(lm_spec_acc_rate(&a) > low + 0.1);
    for (int i = 0; i < 10; i++) lm_spec_acc_update(&a, 8, 8);
    CHECK(lm_spec_acc_rate(&a) > 0.9);
}

int main(void) {
    test_rule();
    test_greedy();
    test_lookup();
    test_choose();
    return lm_test_finish();
}
