// Profiler hooks of the forward pass: op span + barrier wait per thread, and one
// matmul event (shape, dtype, kernel variant and why, bytes, flops) per matmul op, from
// the decision the op took (kernels/matmul.h).
#include <stdio.h>
#include <string.h>

#include "runtime/forward.h"

void lm_fwd_matmul_event(struct lm_context *c, enum lm_prof_op op, int layer, uint64_t t0,
                         uint64_t t1, const struct lm_matmul_decision *d) {
    const struct lm_weight *const *mm = d->w;
    struct lm_prof_matmul ev = {.op = op, .layer = layer, .n = d->n_rows, .k = mm[0]->n_in,
                                .wtype = mm[0]->type, .reason = lm_kernels_reason()};
    char name[64] = "", variant[64];
    uint64_t wbytes = 0;
    for (int j = 0; j < d->n_w; j++) {
        const struct lm_weight *w = mm[j];
        ev.m += w->n_out;
        wbytes += (uint64_t)w->n_out * w->row_bytes;
        if (j == 0) {
            snprintf(name, sizeof name, "%s", w->name);
        } else {
            // fused: "blk.3.attn_q.weight" + "k" + "v" -> "blk.3.attn_q+k+v"
            const char *dot = strrchr(w->name, '.');
            const char *us = NULL;
            for (const char *p = w->name; dot && p < dot; p++) if (*p == '_') us = p;
            size_t len = strlen(name);
            if (len > 7 && !strcmp(name + len - 7, ".weight")) name[len - 7] = 0;
            if (us && dot) {
                len = strlen(name);
                snprintf(name + len, sizeof name - len, "+%.*s", (int)(dot - us - 1), us + 1);
            }
        }
    }
    // the path the op took (il16, il_gemv, gemm_u8, multitoken, per_row_n, per_row), as
    // "q5_0+q8_0_avx512_il16"
    lm_matmul_decision_label(d, variant, sizeof variant);
    ev.weight = name;
    ev.variant = variant;
    ev.bytes = wbytes + (uint64_t)ev.n * (uint64_t)(ev.k + ev.m) * sizeof(float);
    ev.flops = 2ull * (uint64_t)ev.m * (uint64_t)ev.n * (uint64_t)ev.k;
    lm_prof_matmul_shape(&ev, t0, t1);
}

uint64_t lm_fwd_sync_rec(struct lm_context *c, int ith, enum lm_prof_op op, int layer,
                         uint64_t t0, const struct lm_weight *const *mm, int n_mm) {
    const uint64_t t1 = lm_prof_ticks();
    lm_prof_op(ith, op, layer, t0, t1);
    if (ith == 0 && n_mm > 0) {
        // the decision the matmul op just took (lm_op_matmul*, lm_op_lm_head): it must be
        // for these weights, or a forward pass names a matmul it did not run
        const struct lm_matmul_decision *d = &c->mm_last;
        LM_ASSERT(d->n_w == n_mm);
        for (int j = 0; j < n_mm; j++) LM_ASSERT(d->w[j] == mm[j]);
        lm_fwd_matmul_event(c, op, layer, t0, t1, d);
    }
    // the wait starts after the recording (the matmul event's formatting is ~1 us: it
    // showed as barrier time even at 1 thread); recording time stays outside both spans
    const uint64_t tb = lm_prof_ticks();
    lm_pool_barrier(c->pool);
    const uint64_t t2 = lm_prof_ticks();
    lm_prof_barrier(ith, op, layer, tb, t2);
    return t2;
}
