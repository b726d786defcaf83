// Top-k selection (kernels.h): a size-k heap under one strict total order (logit descending,
// then id ascending, NaN as -inf), and the scalar span kernel that feeds it.
#include <math.h>
#include <stdlib.h>

#include "kernels/kernels_internal.h"

static inline float rank_key(float v) { return v != v ? -INFINITY : v; }

// a ranks before b
static inline bool better(struct lm_topk_cand a, struct lm_topk_cand b) {
    const float x = rank_key(a.logit), y = rank_key(b.logit);
    return x > y || (x == y && a.id < b.id);
}

void lm_topk_reset(struct lm_topk *t, struct lm_topk_cand *buf, int32_t k) {
    t->c = buf;
    t->k = k > 0 ? k : 0;
    t->n = 0;
}

// min-heap by rank: every parent ranks after its children, so c[0] is the worst kept
static void sift_down(struct lm_topk_cand *h, int32_t n, int32_t i) {
    const struct lm_topk_cand x = h[i];
    for (;;) {
        int32_t l = 2 * i + 1, w = i;
        struct lm_topk_cand wc = x;
        if (l < n && better(wc, h[l])) { w = l; wc = h[l]; }
        if (l + 1 < n && better(wc, h[l + 1])) { w = l + 1; wc = h[l + 1]; }
        if (w == i) break;
        h[i] = wc;
        i = w;
    }
    h[i] = x;
}

void lm_topk_push(struct lm_topk *t, int32_t id, float logit) {
    const struct lm_topk_cand x = {id, logit};
    struct lm_topk_cand *h = t->c;
    if (t->n < t->k) { // filling: sift up
        int32_t i = t->n++;
        while (i > 0) {
            const int32_t p = (i - 1) / 2;
            if (!better(h[p], x)) break;
            h[i] = h[p];
            i = p;
        }
        h[i] = x;
    } else if (t->k > 0 && better(x, h[0])) {
        h[0] = x;
        sift_down(h, t->n, 0);
    }
}

void lm_topk_merge(struct lm_topk *dst, const struct lm_topk *src) {
    for (int32_t i = 0; i < src->n; i++) lm_topk_push(dst, src->c[i].id, src->c[i].logit);
}

static int cmp_rank(const void *a, const void *b) {
    const struct lm_topk_cand *x = a, *y = b;
    return better(*x, *y) ? -1 : better(*y, *x) ? 1 : 0;
}

void lm_topk_sort(struct lm_topk *t) { qsort(t->c, (size_t)t->n, sizeof *t->c, cmp_rank); }

// x[i] as id id0 + i: the first ones fill the heap, then only values not below the worst
// kept (or NaN) get the exact test
void lm_topk_span_generic(struct lm_topk *t, const float *x, int32_t id0, int64_t n) {
    int64_t i = 0;
    for (; i < n && t->n < t->k; i++) lm_topk_push(t, id0 + (int32_t)i, x[i]);
    if (t->k == 0) return;
    float thr = rank_key(t->c[0].logit);
    for (; i < n; i++)
        if (!(x[i] < thr)) {
            lm_topk_push(t, id0 + (int32_t)i, x[i]);
            thr = rank_key(t->c[0].logit);
        }
}
