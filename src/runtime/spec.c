// Speculative decoding helpers of the engine: prompt lookup, the step cost model, the
// acceptance estimate and the draft-length choice (runtime/spec.h, docs/speculative.md).
#include "runtime/spec.h"

#include <stdlib.h>
#include <string.h>

int32_t lm_spec_lookup(const int32_t *toks, int32_t n_toks, int32_t k_max, int32_t *out) {
    if (k_max <= 0 || n_toks < LM_SPEC_NGRAM_MIN + 1) return 0;
    // every earlier end e (< n_toks, so a token follows) of a run equal to the sequence's
    // tail, scored by the run's length (at most LM_SPEC_MATCH_MAX): the longest is the best
    // aligned copy; ties go to the latest
    const int32_t *tail = toks + n_toks - 1;
    int32_t best_e = -1, best_l = LM_SPEC_NGRAM_MIN - 1;
    for (int32_t e = n_toks - 1; e >= LM_SPEC_NGRAM_MIN; e--) {
        if (toks[e - 1] != *tail) continue;
        int32_t l = 1;
        while (l < LM_SPEC_MATCH_MAX && l < e && toks[e - 1 - l] == tail[-l]) l++;
        if (l > best_l) {
            best_l = l;
            best_e = e;
            if (l == LM_SPEC_MATCH_MAX) break;
        }
    }
    if (best_e < 0) return 0;
    int32_t k = 0;
    for (int32_t i = best_e; i < n_toks && k < k_max; i++) out[k++] = toks[i];
    return k;
}

// ================================================================ step cost

bool lm_spec_cost_init(struct lm_spec_cost *c, int32_t n_max) {
    c->n_max = n_max;
    c->ns = calloc((size_t)n_max + 1, sizeof *c->ns);
    return c->ns != NULL;
}

void lm_spec_cost_free(struct lm_spec_cost *c) {
    free(c->ns);
    c->ns = NULL;
}

void lm_spec_cost_observe(struct lm_spec_cost *c, int32_t n, uint64_t ns) {
    if (n < 1 || n > c->n_max || ns == 0) return;
    // a moving average that follows the machine's load within a few steps
    c->ns[n] = c->ns[n] > 0 ? 0.7 * c->ns[n] + 0.3 * (double)ns : (double)ns;
}

double lm_spec_cost_est(const struct lm_spec_cost *c, int32_t n) {
    if (n < 1) return 0.0;
    if (n > c->n_max) n = c->n_max;
    if (c->ns[n] > 0) return c->ns[n];
    int32_t lo = n - 1, hi = n + 1;
    while (lo >= 1 && !(c->ns[lo] > 0)) lo--;
    if (lo < 1) return 0.0;
    while (hi <= c->n_max && !(c->ns[hi] > 0)) hi++;
    if (hi <= c->n_max && c->ns[hi] >= c->ns[lo])
        return c->ns[lo] + (c->ns[hi] - c->ns[lo]) * (double)(n - lo) / (double)(hi - lo);
    return c->ns[lo] * (1.0 + 0.03 * (double)(n - lo));
}

// ================================================================ acceptance

// prior: one accepted and one rejected position (rate 0.5)
void lm_spec_acc_init(struct lm_spec_acc *a) { a->acc = a->rej = 1.0f; }

double lm_spec_acc_rate(const struct lm_spec_acc *a) {
    return (double)a->acc / ((double)a->acc + (double)a->rej);
}

void lm_spec_acc_update(struct lm_spec_acc *a, int32_t drafted, int32_t accepted) {
    // decay per verification: the last ~5 verifications dominate
    a->acc = 0.8f * a->acc + (float)accepted;
    a->rej = 0.8f * a->rej + (accepted < drafted ? 1.0f : 0.0f);
}

void lm_spec_acc_idle(struct lm_spec_acc *a) {
    a->acc = 0.97f * a->acc + 0.03f;
    a->rej = 0.97f * a->rej + 0.03f;
}

int32_t lm_spec_choose(const struct lm_spec_cost *c, double a, int32_t n_base, double g_base,
                       int32_t k_avail, double *gain) {
    *gain = 0.0;
    const double t0 = lm_spec_cost_est(c, n_base);
    if (!(t0 > 0) || k_avail <= 0 || !(a > 0)) return 0;
    double best = g_base / t0, g = 0.0, ai = 1.0;
    int32_t kb = 0;
    for (int32_t k = 1; k <= k_avail && n_base + k <= c->n_max; k++) {
        ai *= a;
        g += ai;
        const double v = (g_base + g) / lm_spec_cost_est(c, n_base + k);
        if (v > best * 1.0001) {
            best = v;
            kb = k;
            *gain = g;
        }
    }
    return kb;
}
