// Sampler chain: penalties (repetition, presence, frequency) -> top-k -> top-p -> min-p -> temperature ->
// draw from a seeded RNG (temperature <= 0: greedy argmax). Same seed and
// parameters give the same tokens. The k best (greedy: 1) are selected by the kernels' top-k
// (kernels.h), here over the row or by the LM head as it computes it (lm_sampler_sample_top_k):
// one ranking, so both give the same token.
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "kernels/kernels.h"
#include "lumen.h"
#include "sample/sample_internal.h"

// the public candidate (lm_get_top_k) is the kernels' one
_Static_assert(sizeof(struct lm_token_logit) == sizeof(struct lm_topk_cand) &&
                   offsetof(struct lm_token_logit, id) == offsetof(struct lm_topk_cand, id) &&
                   offsetof(struct lm_token_logit, logit) == offsetof(struct lm_topk_cand, logit),
               "struct lm_token_logit and struct lm_topk_cand must share a layout");

struct lm_sampler {
    struct lm_sampler_params p;
    int32_t n_vocab;
    uint64_t rng[4];      // xoshiro256**
    const struct lm_kernels *kern; // topk_span
    struct lm_topk_cand *cand; // (n_vocab) reused: no allocation per token
    float *penalized;     // (n_vocab) logits copy when a penalty applies
    double *prob;         // (n_vocab) survivors' probabilities (speculative verification)
    float *masked;        // (n_vocab) logits with a grammar's disallowed tokens at -inf; made at
                          // the first masked draw (a request's, not every sampler's, 1 MiB)
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
    s->kern = lm_kernels_best();
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
    free(s->masked);
    free(s->recent);
    free(s);
}

void lm_sampler_accept(struct lm_sampler *s, int32_t token) {
    if (s->p.repeat_last_n <= 0) return;
    s->recent[s->recent_pos] = token;
    s->recent_pos = (s->recent_pos + 1) % s->p.repeat_last_n;
    if (s->n_recent < s->p.repeat_last_n) s->n_recent++;
}

// rank order of lm_topk (kernels.h): logit descending, then id ascending, NaN as -inf
static int cand_rank(const void *a, const void *b) {
    const struct lm_topk_cand *x = a, *y = b;
    const float u = x->logit != x->logit ? -INFINITY : x->logit,
                v = y->logit != y->logit ? -INFINITY : y->logit;
    if (u > v) return -1;
    if (u < v) return 1;
    return (x->id > y->id) - (x->id < y->id);
}

static bool penalizes(const struct lm_sampler_params *p) {
    return p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
}

int32_t lm_sampler_top_k_need(const struct lm_sampler *s) {
    const struct lm_sampler_params *p = &s->p;
    if (penalizes(p)) return 0; // the penalties change logits outside any top k
    if (p->temperature <= 0.0f) return 1;
    if (p->top_k > 0 && p->top_k < s->n_vocab && p->top_k <= LM_TOP_K_MAX) return p->top_k;
    return 0;
}

// top-p and min-p on the n best candidates c, sorted best first (temperature > 0): how many
// survive
static int32_t filter_sorted(const struct lm_sampler *s, const struct lm_topk_cand *c, int32_t n) {
    const struct lm_sampler_params *p = &s->p;
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
    return n;
}

// unnormalised probability of candidate c after temperature (mx: the best logit)
static inline double cand_w(const struct lm_sampler *s, const struct lm_topk_cand *c, float mx) {
    return exp((double)(c->logit - mx) / s->p.temperature);
}

// temperature, softmax, one draw from the survivors c[0, n)
static int32_t draw(struct lm_sampler *s, const struct lm_topk_cand *c, int32_t n) {
    const float mx = c[0].logit;
    double tot = 0.0;
    for (int32_t i = 0; i < n; i++) tot += cand_w(s, &c[i], mx);
    const double r = rng_uniform(s->rng) * tot;
    double acc = 0.0;
    for (int32_t i = 0; i < n; i++) {
        acc += cand_w(s, &c[i], mx);
        if (r < acc) return c[i].id;
    }
    return c[n - 1].id;
}

// The rest of the chain on the n best candidates c, sorted best first: top-p, min-p,
// temperature, the draw (temperature <= 0: the best).
static int32_t sample_sorted(struct lm_sampler *s, const struct lm_topk_cand *c, int32_t n) {
    if (s->p.temperature <= 0.0f) return c[0].id;
    return draw(s, c, filter_sorted(s, c, n));
}

int32_t lm_sampler_sample_top_k(struct lm_sampler *s, const struct lm_token_logit *top, int32_t n) {
    const int32_t need = lm_sampler_top_k_need(s);
    if (need == 0 || n < need) {
        lm_error_set(LM_ERR_ARG, "sampler: %d candidates given, the chain needs %s", n,
                     need ? "more" : "every logit (lm_sampler_sample)");
        return -1;
    }
    return sample_sorted(s, (const struct lm_topk_cand *)top, need);
}

// Penalties, then the k best of the row sorted into s->cand (greedy: k = 1); returns k.
static int32_t select_sorted(struct lm_sampler *s, const float *logits) {
    const int32_t nv = s->n_vocab;
    const struct lm_sampler_params *p = &s->p;
    if (penalizes(p) && s->n_recent > 0) {
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
    // the k best, sorted (greedy: k = 1): the same selection lm_get_top_k gives when the
    // LM head selects them (lm_context_set_top_k), so both paths draw the same token
    const int32_t k = p->temperature <= 0.0f ? 1 : (p->top_k > 0 && p->top_k < nv) ? p->top_k : nv;
    if (k < nv) {
        struct lm_topk t;
        lm_topk_reset(&t, s->cand, k);
        s->kern->topk_span(&t, logits, 0, nv);
        lm_topk_sort(&t);
        return t.n;
    }
    for (int32_t i = 0; i < nv; i++) { s->cand[i].id = i; s->cand[i].logit = logits[i]; }
    qsort(s->cand, (size_t)nv, sizeof *s->cand, cand_rank);
    return nv;
}

int32_t lm_sampler_sample(struct lm_sampler *s, const float *logits) {
    return sample_sorted(s, s->cand, select_sorted(s, logits));
}

// ================================================================ masked sampling (grammars)

int32_t lm_mask_logits(float *dst, const float *src, const uint32_t *mask, int32_t n) {
    int32_t allowed = 0;
    for (int32_t w = 0; w * 32 < n; w++) {
        const uint32_t bits = mask[w];
        const int32_t i0 = w * 32, m = n - i0 < 32 ? n - i0 : 32;
        if (bits == 0) { // most words outside a string: nothing allowed
            for (int32_t j = 0; j < m; j++) dst[i0 + j] = -INFINITY;
        } else if (bits == 0xffffffffu && m == 32) { // inside a string: nearly all allowed
            memcpy(dst + i0, src + i0, 32 * sizeof *dst);
            allowed += 32;
        } else {
            for (int32_t j = 0; j < m; j++) {
                const bool on = bits >> j & 1u;
                dst[i0 + j] = on ? src[i0 + j] : -INFINITY;
                allowed += on;
            }
        }
    }
    return allowed;
}

int32_t lm_sampler_filter_top_k(const struct lm_token_logit *top, int32_t n, const uint32_t *mask,
                                struct lm_token_logit *out) {
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++)
        if (mask[top[i].id >> 5] >> (top[i].id & 31) & 1u) out[k++] = top[i];
    return k;
}

float *lm_sampler_masked_row(struct lm_sampler *s, const float *logits, const uint32_t *mask,
                             int32_t *allowed) {
    if (!s->masked && !(s->masked = malloc((size_t)s->n_vocab * sizeof *s->masked))) {
        lm_error_set(LM_ERR_NOMEM, "sampler: out of memory for a masked row");
        return NULL;
    }
    *allowed = lm_mask_logits(s->masked, logits, mask, s->n_vocab);
    return s->masked;
}

int32_t lm_sampler_sample_masked(struct lm_sampler *s, const float *logits, const uint32_t *mask) {
    int32_t allowed = 0;
    const float *row = lm_sampler_masked_row(s, logits, mask, &allowed);
    if (!row) return -1;
    if (allowed == 0) {
        lm_error_set(LM_ERR_ARG, "sampler: the mask allows no token");
        return -1;
    }
    int32_t n = select_sorted(s, row);
    // the chain never draws a masked token: it has weight 0 at any temperature, and greedy
    // ranks it last; cutting the candidates at the first one keeps top-p / min-p exact
    while (n > 1 && s->cand[n - 1].logit == -INFINITY) n--;
    return sample_sorted(s, s->cand, n);
}

// ================================================================ speculative verification

int32_t lm_sampler_verify_rule(struct lm_sampler *s, const float *logits, int32_t draft,
                               const float *q, bool *accepted, enum lm_spec_rule rule) {
    *accepted = false;
    const struct lm_topk_cand *c = s->cand;
    int32_t n = select_sorted(s, logits);
    if (s->p.temperature <= 0.0f) { // greedy: the draft stands iff it is the best
        *accepted = draft >= 0 && c[0].id == draft;
        return c[0].id;
    }
    n = filter_sorted(s, c, n);
    if (draft < 0 || (!q && rule == LM_SPEC_RULE_COUPLED)) {
        // point mass q at the draft: accept with probability p(draft), else draw from p
        // without the draft, renormalised. One draw x ~ p is exactly that: x == draft has
        // probability p(draft), and x given x != draft is distributed as p renormalised
        // over the other tokens. Plain sampling makes the same draw, so a seeded run gives
        // the same text with or without drafting.
        const int32_t x = draw(s, c, n);
        *accepted = draft >= 0 && x == draft;
        return x;
    }
    double *p = s->prob, tot = 0.0;
    for (int32_t i = 0; i < n; i++) tot += p[i] = cand_w(s, &c[i], c[0].logit);
    for (int32_t i = 0; i < n; i++) p[i] /= tot;
    double pd = 0.0;
    const double qd = q ? (double)q[draft] : 1.0;
    for (int32_t i = 0; i < n; i++)
        if (c[i].id == draft) pd = p[i];
    const double u = rng_uniform(s->rng);
    if (rule == LM_SPEC_RULE_WRONG_ALWAYS) { // test-only: trusts any draft the chain allows
        *accepted = pd > 0.0;
        if (*accepted) return draft;
    } else if (u * qd < pd) { // accept with probability min(1, p/q)
        *accepted = true;
        return draft;
    }
    // rejected: draw from max(0, p - q) renormalised (point mass q: p without the draft)
    tot = 0.0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t id = c[i].id;
        double r = p[i];
        if (rule != LM_SPEC_RULE_WRONG_RESIDUAL) r -= q ? (double)q[id] : (id == draft ? 1.0 : 0.0);
        p[i] = r > 0.0 ? r : 0.0;
        tot += p[i];
    }
    if (!(tot > 0.0)) return draw(s, c, n); // p == q: nothing left over (never with p(d) < 1)
    const double r = rng_uniform(s->rng) * tot;
    double acc = 0.0;
    for (int32_t i = 0; i < n; i++) {
        acc += p[i];
        if (r < acc && p[i] > 0.0) return c[i].id;
    }
    for (int32_t i = n - 1; i >= 0; i--)
        if (p[i] > 0.0) return c[i].id;
    return c[0].id;
}

// ================================================================ draft-model drafting

void lm_sampler_rng_seed(uint64_t rng[4], uint64_t seed) {
    for (int i = 0; i < 4; i++) rng[i] = splitmix64(&seed);
}

int32_t lm_sampler_draft(struct lm_sampler *s, const float *logits, const struct lm_token_logit *top,
                         int32_t n_top, uint64_t rng[4], struct lm_token_prob *out, int32_t *n_out) {
    const int32_t need = lm_sampler_top_k_need(s);
    const struct lm_topk_cand *c = s->cand;
    int32_t n;
    if (top && need > 0 && n_top >= need) {
        c = (const struct lm_topk_cand *)top;
        n = need;
    } else {
        n = select_sorted(s, logits);
    }
    if (s->p.temperature <= 0.0f) {
        out[0] = (struct lm_token_prob){c[0].id, 1.0f};
        *n_out = 1;
        return c[0].id;
    }
    n = filter_sorted(s, c, n);
    double tot = 0.0;
    for (int32_t i = 0; i < n; i++) tot += cand_w(s, &c[i], c[0].logit);
    // q as the floats the verification will read; the draw is from exactly those
    double qs = 0.0;
    for (int32_t i = 0; i < n; i++) {
        out[i] = (struct lm_token_prob){c[i].id, (float)(cand_w(s, &c[i], c[0].logit) / tot)};
        qs += out[i].p;
    }
    *n_out = n;
    const double r = rng_uniform(rng) * qs;
    double acc = 0.0;
    for (int32_t i = 0; i < n; i++) {
        acc += out[i].p;
        if (r < acc && out[i].p > 0.0f) return out[i].id;
    }
    for (int32_t i = n - 1; i >= 0; i--)
        if (out[i].p > 0.0f) return out[i].id;
    return out[0].id;
}

int32_t lm_sampler_verify(struct lm_sampler *s, const float *logits, int32_t draft, const float *q,
                          bool *accepted) {
    return lm_sampler_verify_rule(s, logits, draft, q, accepted, LM_SPEC_RULE_COUPLED);
}
