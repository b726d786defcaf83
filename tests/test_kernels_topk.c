// Top-k selection (kernels.h): every table's topk_span, rows cut into spans offered in any
// order and partial selections merged, all give the reference selection: the whole row
// sorted by (logit descending, id ascending, NaN as -inf), first k, bit for bit. Rows of odd
// sizes with heavy ties, +-inf and NaN; k from 1 past the row length.
// LM_TEST_LABELS: unit
#include "lm_test.h"
#include "kernels/kernels.h"

static int ref_cmp(const void *a, const void *b) {
    const struct lm_topk_cand *x = a, *y = b;
    const float u = isnan(x->logit) ? -INFINITY : x->logit, v = isnan(y->logit) ? -INFINITY : y->logit;
    if (u != v) return u > v ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static bool same(const struct lm_topk_cand *a, const struct lm_topk_cand *b, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (a[i].id != b[i].id || memcmp(&a[i].logit, &b[i].logit, sizeof(float))) return false;
    return true;
}

static float draw(int kind) {
    const uint64_t r = lm_test_rng_u64();
    switch (kind) {
    case 0: return (float)((int64_t)(r % 2000001) - 1000000) * 1e-4f; // near-distinct
    case 1: return (float)(r % 5);                                    // heavy ties
    case 2: {                                                          // specials mixed in
        const int s = (int)(r % 16);
        return s == 0 ? NAN : s == 1 ? INFINITY : s == 2 ? -INFINITY : (float)((r >> 8) % 7) - 3.0f;
    }
    default: { // mostly -inf and NaN (a masked row): the worst kept ties with them
        const int s = (int)(r % 64);
        return s == 0 ? (float)((r >> 8) % 3) : s < 32 ? -INFINITY : NAN;
    }
    }
}

int main(void) {
    const struct lm_kernels *tabs[3] = {lm_kernels_generic(), lm_kernels_avx2(), lm_kernels_avx512()};
    static const int32_t sizes[] = {1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 255,
                                    257, 1023, 4099};
    static const int32_t ks[] = {1, 2, 3, 5, 16, 40, 256};
    const int32_t nmax = 4099, kmax = 4100;
    float *x = malloc(sizeof(float) * nmax);
    struct lm_topk_cand *ref = malloc(sizeof *ref * nmax), *buf = malloc(sizeof *buf * kmax),
                        *part = malloc(sizeof *part * kmax * 4), *mbuf = malloc(sizeof *mbuf * kmax);
    int32_t *cut = malloc(sizeof(int32_t) * 8);
    int cases = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        const int32_t n = sizes[si];
        for (int kind = 0; kind < 4; kind++) {
            for (int32_t i = 0; i < n; i++) x[i] = draw(kind);
            for (int32_t i = 0; i < n; i++) ref[i] = (struct lm_topk_cand){i, x[i]};
            qsort(ref, (size_t)n, sizeof *ref, ref_cmp);
            for (size_t ki = 0; ki <= sizeof ks / sizeof ks[0]; ki++) {
                const int32_t k = ki < sizeof ks / sizeof ks[0] ? ks[ki] : n + 1; // past the row too
                const int32_t want = k < n ? k : n;
                for (int t = 0; t < 3; t++) {
                    if (!tabs[t]) continue;
                    // the whole row in one span
                    struct lm_topk s;
                    lm_topk_reset(&s, buf, k);
                    tabs[t]->topk_span(&s, x, 0, n);
                    lm_topk_sort(&s);
                    CHECKF(s.n == want && same(s.c, ref, want), "%s: n %d k %d kind %d: whole row",
                           tabs[t]->name, n, k, kind);
                    // up to 4 spans offered to 4 selections in a shuffled order, then merged
                    const int nc = 1 + (int)(lm_test_rng_u64() % 4);
                    cut[0] = 0;
                    for (int c = 1; c < nc; c++) cut[c] = (int32_t)(lm_test_rng_u64() % (uint64_t)(n + 1));
                    cut[nc] = n;
                    for (int c = 1; c < nc; c++) // sort the cuts
                        for (int d = c; d > 0 && cut[d] < cut[d - 1]; d--) {
                            const int32_t tmp = cut[d]; cut[d] = cut[d - 1]; cut[d - 1] = tmp;
                        }
                    struct lm_topk ps[4];
                    for (int c = 0; c < 4; c++) lm_topk_reset(&ps[c], part + (size_t)c * kmax, k);
                    const int rot = (int)(lm_test_rng_u64() % 4);
                    for (int c = nc - 1; c >= 0; c--) // spans last to first, to selections in rotation
                        tabs[t]->topk_span(&ps[(c + rot) % 4], x + cut[c], cut[c], cut[c + 1] - cut[c]);
                    // every span, last to first, into one selection: ties with lower ids come late
                    struct lm_topk one;
                    lm_topk_reset(&one, buf, k);
                    for (int c = nc - 1; c >= 0; c--)
                        tabs[t]->topk_span(&one, x + cut[c], cut[c], cut[c + 1] - cut[c]);
                    lm_topk_sort(&one);
                    CHECKF(one.n == want && same(one.c, ref, want), "%s: n %d k %d kind %d: %d spans reversed",
                           tabs[t]->name, n, k, kind, nc);
                    struct lm_topk m;
                    lm_topk_reset(&m, mbuf, k);
                    for (int c = 3; c >= 0; c--) lm_topk_merge(&m, &ps[c]);
                    lm_topk_sort(&m);
                    CHECKF(m.n == want && same(m.c, ref, want), "%s: n %d k %d kind %d: %d spans merged",
                           tabs[t]->name, n, k, kind, nc);
                    cases++;
                }
            }
        }
    }
    // k = 0 keeps nothing
    struct lm_topk z;
    lm_topk_reset(&z, buf, 0);
    lm_kernels_generic()->topk_span(&z, x, 0, 17);
    CHECK(z.n == 0);
    printf("%d selections against the sorted row\n", cases);
    free(x); free(ref); free(buf); free(part); free(mbuf); free(cut);
    return lm_test_finish();
}
