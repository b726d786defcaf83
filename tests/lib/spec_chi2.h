// Chi-square goodness of fit of the speculative acceptance rule (lm_sampler_verify_rule):
// many draws at one logits vector against the target distribution computed here
// independently of the sampler (top-k then temperature softmax). Shared by
// test_sample_spec.c (synthetic logits) and test_runtime_spec.c (the model's logits).
#ifndef LM_TEST_SPEC_CHI2_H
#define LM_TEST_SPEC_CHI2_H

#include <math.h>
#include <stdbool.h>

#include "lumen.h"
#include "sample/sample_internal.h"

// Target probabilities of the chain with top_k = k, temperature t (top-p, min-p, penalties
// off) into p[n] (0 outside the top k; ties by lower id, as the sampler).
static void spec_target(const float *lg, int n, int k, float t, double *p) {
    for (int i = 0; i < n; i++) p[i] = -1.0; // -1: not chosen yet
    double mx = -INFINITY, tot = 0.0;
    for (int r = 0; r < k && r < n; r++) { // k selections: the largest unchosen, lowest id on ties
        int b = -1;
        for (int i = 0; i < n; i++)
            if (p[i] < 0.0 && (b < 0 || lg[i] > lg[b])) b = i;
        if (r == 0) mx = lg[b];
        tot += p[b] = exp((double)(lg[b] - mx) / t);
    }
    for (int i = 0; i < n; i++) p[i] = p[i] < 0.0 ? 0.0 : p[i] / tot;
}

// Wilson-Hilferty approximation of the chi-square quantile at z standard deviations.
static double spec_chi2_crit(int df, double z) {
    const double a = 2.0 / (9.0 * df);
    return df * pow(1.0 - a + z * sqrt(a), 3.0);
}

// Draws n_draws tokens with the rule (draft d with q NULL = point mass; with a drafter's q,
// each draft is drawn from q, as a draft model's would be) and returns
// the chi-square statistic against p; *df its degrees of freedom (cells with an expected
// count >= 5, the rest pooled), *acc_rate the fraction of accepted drafts.
static double spec_chi2_run(const float *lg, int n, int k, float t, int d, const float *q,
                            enum lm_spec_rule rule, int n_draws, uint64_t seed, int *df,
                            double *acc_rate, int *counts, double *p) {
    struct lm_sampler_params sp = lm_sampler_params_default();
    sp.temperature = t;
    sp.top_k = k;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    sp.seed = seed;
    struct lm_sampler *s = NULL;
    if (lm_sampler_init(&s, &sp, n) != LM_OK) return INFINITY;
    spec_target(lg, n, k, t, p);
    for (int i = 0; i < n; i++) counts[i] = 0;
    int n_acc = 0, bad = 0;
    uint64_t xs = seed * 0x9e3779b97f4a7c15ull + 7; // the drafter's own RNG
    for (int i = 0; i < n_draws; i++) {
        bool acc = false;
        if (q) {
            xs ^= xs << 13; xs ^= xs >> 7; xs ^= xs << 17;
            const double u = (double)(xs >> 11) * 0x1.0p-53;
            double c = 0.0;
            d = n - 1;
            for (int j = 0; j < n; j++)
                if (u < (c += q[j])) { d = j; break; }
        }
        const int32_t x = lm_sampler_verify_rule(s, lg, d, q, &acc, rule);
        if (x < 0 || x >= n || (acc && x != d)) bad++;
        else counts[x]++;
        n_acc += acc;
    }
    lm_sampler_free(s);
    double chi = 0.0, pool_e = 0.0, pool_o = 0.0;
    int cells = 0;
    for (int i = 0; i < n; i++) {
        const double ex = p[i] * n_draws;
        if (ex >= 5.0) {
            chi += (counts[i] - ex) * (counts[i] - ex) / ex;
            cells++;
        } else {
            pool_e += ex;
            pool_o += counts[i];
        }
    }
    if (pool_e > 0.0) {
        if (pool_e >= 1.0) {
            chi += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
            cells++;
        } else if (pool_o > 5.0 * (pool_e + 1.0)) {
            chi = INFINITY; // far too many draws where p is ~0
        }
    }
    *df = cells > 1 ? cells - 1 : 1;
    *acc_rate = (double)n_acc / n_draws;
    return bad ? INFINITY : chi;
}

#endif
