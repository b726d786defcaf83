// AVX-512 top-k span (kernels.h): 16 logits per compare against the worst kept; only lanes
// not below it (or NaN) go to lm_topk_push's exact test, so the selection is the generic one.
#include <math.h>

#include "kernels/kernels_internal.h"

#if defined(__x86_64__)
#include "kernels/simd_avx512.h"

void lm_topk_span_avx512(struct lm_topk *t, const float *x, int32_t id0, int64_t n) {
    int64_t i = 0;
    for (; i < n && t->n < t->k; i++) lm_topk_push(t, id0 + (int32_t)i, x[i]);
    if (t->k == 0) return;
    float thr = t->c[0].logit != t->c[0].logit ? -INFINITY : t->c[0].logit;
    // two vectors per step: one test of the OR of their masks when neither has a candidate
    for (; i + 32 <= n; i += 32) {
        const __m512 th = _mm512_set1_ps(thr);
        const __mmask16 m0 = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), th, _CMP_NLT_UQ);
        const __mmask16 m1 = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i + 16), th, _CMP_NLT_UQ);
        if (!(m0 | m1)) continue;
        uint32_t m = (uint32_t)m0 | (uint32_t)m1 << 16;
        while (m) {
            const int64_t j = i + __builtin_ctz(m);
            m &= m - 1;
            if (!(x[j] < thr)) { // the threshold may have risen since the compare
                lm_topk_push(t, id0 + (int32_t)j, x[j]);
                thr = t->c[0].logit != t->c[0].logit ? -INFINITY : t->c[0].logit;
            }
        }
    }
    for (; i < n; i++)
        if (!(x[i] < thr)) {
            lm_topk_push(t, id0 + (int32_t)i, x[i]);
            thr = t->c[0].logit != t->c[0].logit ? -INFINITY : t->c[0].logit;
        }
}
#endif
