// Speculative decoding helpers of the engine: prompt lookup, the step cost model, the
// acceptance estimate and the draft-length choice (runtime/spec.h, docs/speculative.md).
#include "runtime/spec.h"

#include <math.h>
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

bool lm_spec_cost_init(struct lm_spec_cost *c, int32_t n_max, int32_t s_max) {
    c->n_max = n_max;
    c->s_max = s_max < 1 ? 1 : s_max > n_max ? n_max : s_max;
    c->marginal = 0.0;
    c->ns = calloc((size_t)(c->s_max + 1) * ((size_t)n_max + 1), sizeof *c->ns);
    return c->ns != NULL;
}

void lm_spec_cost_free(struct lm_spec_cost *c) {
    free(c->ns);
    c->ns = NULL;
}

// row of s sequences (n_max + 1 entries by token count)
static double *cost_row(const struct lm_spec_cost *c, int32_t s) {
    return c->ns + (size_t)(s > c->s_max ? c->s_max : s) * ((size_t)c->n_max + 1);
}

void lm_spec_cost_observe(struct lm_spec_cost *c, int32_t s, int32_t n, uint64_t ns) {
    if (s < 1 || n < s || n > c->n_max || ns == 0) return;
    double *r = cost_row(c, s);
    const int32_t s0 = s > c->s_max ? c->s_max : s;
    // a moving average that follows the machine's load within a few steps; the noise of a
    // shared machine only ever adds time, so one slow step moves it by 7.5% at most (a
    // plain step's cost left high by a hiccup would make every draft look cheap)
    double x = (double)ns;
    if (r[n] > 0 && x > 1.25 * r[n]) x = 1.25 * r[n];
    // the price of a token beyond the sequences' own, against the same row's plain step
    if (n > s && s == s0 && r[s] > 0) {
        const double m = x > r[s] ? (x - r[s]) / (double)(n - s) : 0.0;
        c->marginal = c->marginal > 0 ? 0.8 * c->marginal + 0.2 * m : m;
    }
    r[n] = r[n] > 0 ? 0.7 * r[n] + 0.3 * x : x;
}

double lm_spec_cost_est(const struct lm_spec_cost *c, int32_t s, int32_t n) {
    if (s < 1 || n < s) return 0.0;
    if (n > c->n_max) n = c->n_max;
    const double *r = cost_row(c, s);
    if (r[n] > 0) return r[n];
    const int32_t s0 = s > c->s_max ? c->s_max : s; // the row's smallest count
    int32_t lo = n - 1, hi = n + 1;
    while (lo >= s0 && !(r[lo] > 0)) lo--;
    if (lo < s0) return 0.0;
    while (hi <= c->n_max && !(r[hi] > 0)) hi++;
    if (hi <= c->n_max && r[hi] >= r[lo])
        return r[lo] + (r[hi] - r[lo]) * (double)(n - lo) / (double)(hi - lo);
    if (c->marginal > 0) return r[lo] + c->marginal * (double)(n - lo);
    return r[lo] * (1.0 + 0.03 * (double)(n - lo));
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

int32_t lm_spec_choose_drafter(const struct lm_spec_cost *c, double a, int32_t s_seq, int32_t n_base,
                               int32_t n_streams, double extra_ns, double draft_ns, int32_t k_avail,
                               double *gain) {
    *gain = 0.0;
    const double t0 = lm_spec_cost_est(c, s_seq, n_base);
    if (!(t0 > 0) || k_avail <= 0 || !(a > 0) || n_streams < 1) return 0;
    // the drafting stream's rate goes from 1 / base to (1 + g) / time, every stream's (its
    // own included) is divided by time / base: the log of the product of all rates changes
    // by log(1 + g) - n_streams * log(time / base), with base = t0 + extra_ns and time =
    // t + extra_ns + K draft_ns
    const double base = t0 + extra_ns;
    double best = LM_SPEC_MIN_GAIN, g = 0.0, ai = 1.0, t = t0;
    int32_t kb = 0;
    for (int32_t k = 1; k <= k_avail && n_base + k <= c->n_max; k++) {
        ai *= a;
        g += ai;
        const double tk = lm_spec_cost_est(c, s_seq, n_base + k);
        if (tk > t) t = tk; // a longer step never costs less (estimates from noisy averages)
        const double v = log1p(g) - (double)n_streams * log((t + extra_ns + k * draft_ns) / base);
        if (v > best) {
            best = v;
            kb = k;
            *gain = g;
        }
    }
    return kb;
}

int32_t lm_spec_choose(const struct lm_spec_cost *c, double a, int32_t s_seq, int32_t n_base,
                       int32_t n_streams, int32_t k_avail, double *gain) {
    return lm_spec_choose_drafter(c, a, s_seq, n_base, n_streams, 0.0, 0.0, k_avail, gain);
}
