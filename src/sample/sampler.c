// Sampler chain: penalties (repetition, presence, frequency) -> top-k -> top-p -> min-p -> temperature ->
// draw from a seeded RNG (temperature <= 0: greedy argmax). Same seed and
// parameters give the same tokens.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "base/status.h"
#include "lumen.h"
#include "sample/sample_internal.h"

struct lm_cand {
    int32_t id;
    float logit;
};

struct lm_sampler {
    struct lm_sampler_params p;
    int32_t n_vocab;
    uint64_t rng[4];      // xoshiro256**
    struct lm_cand *cand; // (n_vocab) reused: no allocation per token
    float *penalized;     // (n_vocab) logits copy when a penalty applies
    double *prob;         // (n_vocab) survivors' probabilities (speculative verification)
    int32_t *recent;      // ring of the last repeat_last_n accepted tokens
    int32_t n_recent, recent_pos;
};

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(uint64_t s[4]) {
    const uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = rotl(s[3], 45);
    return r;
}

// uniform in [0, 1)
static double rng_uniform(uint64_t s[4]) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

struct lm_sampler_params lm_sampler_params_default(void) {
    struct lm_sampler_params p = {
        .temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
        .repeat_penalty = 1.0f, .repeat_last_n = 64, .seed = 0,
    };
    return p;
}

enum lm_status lm_sampler_init(struct lm_sampler **out, const struct lm_sampler_params *p,
                               int32_t n_vocab) {
    *out = NULL;
    if (n_vocab <= 0) return lm_error_set(LM_ERR_ARG, "sampler: n_vocab %d", n_vocab);
    if (!(p->temperature == p->temperature) || !(p->top_p == p->top_p) || p->top_p < 0.0f ||
        !(p->min_p == p->min_p) || p->min_p > 1.0f || !(p->repeat_penalty > 0.0f) ||
        p->repeat_last_n < 0 || p->repeat_last_n > 1 << 20 || !isfinite(p->presence_penalty) ||
        !isfinite(p->frequency_penalty))
        return lm_error_set(LM_ERR_ARG, "sampler: invalid parameters (temp %g, top_p %g, min_p %g, "
                            "repeat_penalty %g, repeat_last_n %d, presence_penalty %g, "
                            "frequency_penalty %g)", p->temperature, p->top_p, p->min_p,
                            p->repeat_penalty, p->repeat_last_n, p->presence_penalty,
                            p->frequency_penalty);
    struct lm_sampler *s = calloc(1, sizeof *s);
    if (!s) return lm_error_set(LM_ERR_NOMEM, "sampler: out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    uint64_t seed = p->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&seed);
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->penalized = malloc((size_t)n_vocab * sizeof *s->penalized);
    s->prob = malloc((size_t)n_vocab * sizeof *s->prob);
    s->recent = malloc((size_t)(p->repeat_last_n > 0 ? p->repeat_last_n : 1) * sizeof(int32_t));
    if (!s->cand || !s->penalized || !s->prob || !s->recent) {
        lm_sampler_free(s);
        return lm_error_set(LM_ERR_NOMEM, "sampler: out of memory");
    }
    *out = s;
    return LM_OK;
}

void lm_sampler_free(struct lm_sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s->penalized);
    free(s->prob);
    free(s->recent);
    free(s);
}

void lm_sampler_accept(struct lm_sampler *s, int32_t token) {
    if (s->p.repeat_last_n <= 0) return;
    s->recent[s->recent_pos] = token;
    s->recent_pos = (s->recent_pos + 1) % s->p.repeat_last_n;
    if (s->n_recent < s->p.repeat_last_n) s->n_recent++;
}

static int cand_desc(const void *a, const void *b) {
    const struct lm_cand *x = a, *y = b;
    if (x->logit > y->logit) return -1;
    if (x->logit < y->logit) return 1;
    return x->id - y->id; // deterministic order for ties
}

// Moves the k largest to the front, sorted descending: a size-k min-heap over
// all candidates, O(n log k), then a sort of the k survivors.
static void heap_sift(struct lm_cand *h, int32_t k, int32_t i) {
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < k && cand_desc(&h[l], &h[m]) > 0) m = l; // "smaller" = later in desc order
        if (r < k && cand_desc(&h[r], &h[m]) > 0) m = r;
        if (m == i) return;
        struct lm_cand t = h[i]; h[i] = h[m]; h[m] = t;
        i = m;
    }
}

static void top_k_sort(struct lm_cand *c, int32_t n, int32_t k) {
    if (k < n) {
        for (int32_t i = k / 2 - 1; i >= 0; i--) heap_sift(c, k, i);
        for (int32_t i = k; i < n; i++)
            if (cand_desc(&c[i], &c[0]) < 0) { // better than the worst kept
                c[0] = c[i];
                heap_sift(c, k, 0);
            }
    }
    qsort(c, (size_t)(k < n ? k : n), sizeof *c, cand_desc);
}

// top_k_sort straight from the logits (the k < n_vocab case): a size-k heap seeded with
// the first k ids, then one pass that touches the heap only for logits above its minimum
// (ids ascend, so an equal logit would sort after the kept one and is rightly skipped).
// Same survivors and order as top_k_sort on the full candidate array, without writing
// n_vocab candidates first (Gemma 3: 262144 logits, 0.59 -> ~0.1 ms per token).
static void top_k_scan(struct lm_cand *c, const float *logits, int32_t nv, int32_t k) {
    for (int32_t i = 0; i < k; i++) { c[i].id = i; c[i].logit = logits[i]; }
    for (int32_t i = k / 2 - 1; i >= 0; i--) heap_sift(c, k, i);
    float thr = c[0].logit;
    int32_t i = k;
#if defined(__AVX512F__)
    for (; i + 16 <= nv; i += 16) {
        __mmask16 m = _mm512_cmp_ps_mask(_mm512_loadu_ps(logits + i), _mm512_set1_ps(thr), _CMP_GT_OQ);
        while (m) {
            const int32_t j = i + __builtin_ctz(m);
            m &= (__mmask16)(m - 1);
            if (logits[j] > thr) {
                c[0].id = j;
                c[0].logit = logits[j];
                heap_sift(c, k, 0);
                thr = c[0].logit;
            }
        }
    }
#endif
    for (; i < nv; i++)
        if (logits[i] > thr) {
            c[0].id = i;
            c[0].logit = logits[i];
            heap_sift(c, k, 0);
            thr = c[0].logit;
        }
    qsort(c, (size_t)k, sizeof *c, cand_desc);
}

// First index of the largest logit (NaNs never win). 16 running maxima with their
// indices, then the best lane (lowest index among equal maxima): Gemma 3's 262144 logits
// in ~25 us instead of ~200 (the scalar loop), which the engine pays per request per step.
static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0, i = 1;
#if defined(__AVX512F__)
    if (n >= 32) {
        __m512 vm = _mm512_loadu_ps(x);
        __m512i vi = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
        __m512i cur = _mm512_add_epi32(vi, _mm512_set1_epi32(16));
        const __m512i step = _mm512_set1_epi32(16);
        for (i = 16; i + 16 <= n; i += 16) {
            const __m512 v = _mm512_loadu_ps(x + i);
            const __mmask16 gt = _mm512_cmp_ps_mask(v, vm, _CMP_GT_OQ);
            vm = _mm512_mask_mov_ps(vm, gt, v);
            vi = _mm512_mask_mov_epi32(vi, gt, cur);
            cur = _mm512_add_epi32(cur, step);
        }
        float mv[16];
        int32_t mi[16];
        _mm512_storeu_ps(mv, vm);
        _mm512_storeu_si512(mi, vi);
        best = mi[0];
        for (int l = 1; l < 16; l++)
            if (mv[l] > x[best] || (mv[l] == x[best] && mi[l] < best)) best = mi[l];
    }
#endif
    for (; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
}

// The chain up to the draw: penalties, then (temperature > 0) top-k, top-p and min-p.
// Greedy: returns 0 and *greedy_tok is the argmax of the penalized logits. Otherwise the
// survivors are s->cand[0, n) (descending), n is returned, *mx is the largest logit.
static int32_t chain(struct lm_sampler *s, const float *logits, int32_t *greedy_tok, float *mx_out) {
    const int32_t nv = s->n_vocab;
    const struct lm_sampler_params *p = &s->p;
    const bool penalize = p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f ||
                          p->frequency_penalty != 0.0f;
    if (penalize && s->n_recent > 0) {
        memcpy(s->penalized, logits, (size_t)nv * sizeof(float));
        for (int32_t i = 0; i < s->n_recent; i++) {
            const int32_t t = s->recent[i];
            if (t < 0 || t >= nv) continue;
            // each distinct token is penalized once, by its count in the window (llama.cpp)
            int dup = 0;
            for (int32_t j = 0; j < i; j++) if (s->recent[j] == t) { dup = 1; break; }
            if (dup) continue;
            int32_t count = 1;
            for (int32_t j = i + 1; j < s->n_recent; j++) count += s->recent[j] == t;
            float *l = &s->penalized[t];
            *l = *l > 0.0f ? *l / p->repeat_penalty : *l * p->repeat_penalty;
            *l -= (float)count * p->frequency_penalty + p->presence_penalty;
        }
        logits = s->penalized;
    }
    if (p->temperature <= 0.0f) {
        *greedy_tok = argmax(logits, nv);
        return 0;
    }
    struct lm_cand *c = s->cand;
    const int32_t k = (p->top_k > 0 && p->top_k < nv) ? p->top_k : nv;
    if (k < nv) {
        top_k_scan(c, logits, nv, k);
    } else {
        for (int32_t i = 0; i < nv; i++) { c[i].id = i; c[i].logit = logits[i]; }
        top_k_sort(c, nv, k);
    }
    int32_t n = k;
    // probabilities at temperature 1 for the top-p / min-p filters (llama.cpp order)
    double sum = 0.0;
    const float mx = c[0].logit;
    for (int32_t i = 0; i < n; i++) sum += exp((double)(c[i].logit - mx));
    if (p->top_p < 1.0f) {
        double cum = 0.0;
        int32_t keep = n;
        for (int32_t i = 0; i < n; i++) {
            cum += exp((double)(c[i].logit - mx)) / sum;
            if (cum >= p->top_p) { keep = i + 1; break; }
        }
        n = keep;
    }
    if (p->min_p > 0.0f) {
        const double thr = log((double)p->min_p); // p_i / p_max >= min_p
        int32_t keep = 1;
        while (keep < n && (double)(c[keep].logit - mx) >= thr) keep++;
        n = keep;
    }
    *mx_out = mx;
    return n;
}

// unnormalised probability of candidate i after temperature
static inline double cand_w(const struct lm_sampler *s, int32_t i, float mx) {
    return exp((double)(s->cand[i].logit - mx) / s->p.temperature);
}

// Draws from the survivors (temperature, softmax); one uniform from the RNG.
static int32_t draw(struct lm_sampler *s, int32_t n, float mx) {
    double tot = 0.0;
    for (int32_t i = 0; i < n; i++) tot += cand_w(s, i, mx);
    const double r = rng_uniform(s->rng) * tot;
    double acc = 0.0;
    for (int32_t i = 0; i < n; i++) {
        acc += cand_w(s, i, mx);
        if (r < acc) return s->cand[i].id;
    }
    return s->cand[n - 1].id;
}

int32_t lm_sampler_sample(struct lm_sampler *s, const float *logits) {
    int32_t g = 0;
    float mx = 0.0f;
    const int32_t n = chain(s, logits, &g, &mx);
    return n == 0 ? g : draw(s, n, mx);
}

// ================================================================ speculative verification

// Probability of each survivor (after temperature), normalised, into p[0, n).
static void probs(struct lm_sampler *s, int32_t n, float mx, double *p) {
    double tot = 0.0;
    for (int32_t i = 0; i < n; i++) tot += p[i] = cand_w(s, i, mx);
    for (int32_t i = 0; i < n; i++) p[i] /= tot;
}

int32_t lm_sampler_verify_rule(struct lm_sampler *s, const float *logits, int32_t draft,
                               const float *q, bool *accepted, enum lm_spec_rule rule) {
    *accepted = false;
    int32_t g = 0;
    float mx = 0.0f;
    const int32_t n = chain(s, logits, &g, &mx);
    if (n == 0) { // greedy: the draft stands iff it is the argmax
        *accepted = draft >= 0 && g == draft;
        return g;
    }
    if (draft < 0 || (!q && rule == LM_SPEC_RULE_COUPLED)) {
        // point mass q at the draft: accept with probability p(draft), else draw from p
        // without the draft, renormalised. One draw x ~ p is exactly that: x == draft has
        // probability p(draft), and x given x != draft is distributed as p renormalised
        // over the other tokens. Plain sampling makes the same draw, so a seeded run gives
        // the same text with or without drafting.
        const int32_t x = draw(s, n, mx);
        *accepted = draft >= 0 && x == draft;
        return x;
    }
    double *p = s->prob;
    probs(s, n, mx, p);
    double pd = 0.0, qd = q ? (double)q[draft] : 1.0;
    for (int32_t i = 0; i < n; i++)
        if (s->cand[i].id == draft) pd = p[i];
    const double u = rng_uniform(s->rng);
    if (rule == LM_SPEC_RULE_WRONG_ALWAYS) { // test-only: trusts any draft the chain allows
        *accepted = pd > 0.0;
        if (*accepted) return draft;
    } else if (u * qd < pd) { // accept with probability min(1, p/q)
        *accepted = true;
        return draft;
    }
    // rejected: draw from max(0, p - q) renormalised (point mass q: p without the draft)
    double tot = 0.0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t id = s->cand[i].id;
        double r = p[i];
        if (rule != LM_SPEC_RULE_WRONG_RESIDUAL) r -= q ? (double)q[id] : (id == draft ? 1.0 : 0.0);
        p[i] = r > 0.0 ? r : 0.0;
        tot += p[i];
    }
    if (!(tot > 0.0)) return draw(s, n, mx); // p == q: nothing left over (never with p(d) < 1)
    const double r = rng_uniform(s->rng) * tot;
    double acc = 0.0;
    for (int32_t i = 0; i < n; i++) {
        acc += p[i];
        if (r < acc && p[i] > 0.0) return s->cand[i].id;
    }
    for (int32_t i = n - 1; i >= 0; i--)
        if (p[i] > 0.0) return s->cand[i].id;
    return s->cand[0].id;
}

int32_t lm_sampler_verify(struct lm_sampler *s, const float *logits, int32_t draft, const float *q,
                          bool *accepted) {
    return lm_sampler_verify_rule(s, logits, draft, q, accepted, LM_SPEC_RULE_COUPLED);
}
