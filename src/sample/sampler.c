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
    s->recent = malloc((size_t)(p->repeat_last_n > 0 ? p->repeat_last_n : 1) * sizeof(int32_t));
    if (!s->cand || !s->penalized || !s->recent) {
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

// The rest of the chain on the n best candidates c, sorted best first: top-p, min-p,
// temperature, the draw (temperature <= 0: the best).
static int32_t sample_sorted(struct lm_sampler *s, const struct lm_topk_cand *c, int32_t n) {
    const struct lm_sampler_params *p = &s->p;
    if (p->temperature <= 0.0f) return c[0].id;
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
    // temperature, softmax, draw
    double tot = 0.0;
    for (int32_t i = 0; i < n; i++) tot += exp((double)(c[i].logit - mx) / p->temperature);
    const double r = rng_uniform(s->rng) * tot;
    double acc = 0.0;
    for (int32_t i = 0; i < n; i++) {
        acc += exp((double)(c[i].logit - mx) / p->temperature);
        if (r < acc) return c[i].id;
    }
    return c[n - 1].id;
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

int32_t lm_sampler_sample(struct lm_sampler *s, const float *logits) {
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
        return sample_sorted(s, s->cand, t.n);
    }
    for (int32_t i = 0; i < nv; i++) { s->cand[i].id = i; s->cand[i].logit = logits[i]; }
    qsort(s->cand, (size_t)nv, sizeof *s->cand, cand_rank);
    return sample_sorted(s, s->cand, nv);
}
