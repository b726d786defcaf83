// Profiler hooks of the forward pass: op span + barrier wait per thread, and one
// matmul event (shape, dtype, kernel variant and why, bytes, flops) per matmul op.
#include <stdio.h>
#include <string.h>

#include "runtime/runtime.h"

void lm_fwd_matmul_event(struct lm_context *c, enum lm_prof_op op, int layer, uint64_t t0,
                         uint64_t t1, const struct lm_weight *const *mm, int n_mm) {
    struct lm_prof_matmul ev = {.op = op, .layer = layer, .n = c->n_tokens, .k = mm[0]->n_in,
                                .wtype = mm[0]->type, .reason = lm_kernels_reason()};
    if (op == LM_OP_LM_HEAD) ev.n = c->n_out;
    char name[64] = "", variant[64] = "";
    uint64_t wbytes = 0;
    for (int j = 0; j < n_mm; j++) {
        const struct lm_weight *w = mm[j];
        ev.m += w->n_out;
        wbytes += (uint64_t)w->n_out * w->row_bytes;
        if (j == 0) {
            snprintf(name, sizeof name, "%s", w->name);
            snprintf(variant, sizeof variant, "%s", lm_dtype_name(w->type));
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
            if (w->type != mm[0]->type && !strstr(variant, lm_dtype_name(w->type))) {
                len = strlen(variant);
                snprintf(variant + len, sizeof variant - len, "+%s", lm_dtype_name(w->type));
            }
        }
    }
    const size_t vlen = strlen(variant);
    // which path lm_op_matmul* takes: row-interleaved weights (il16: 16-row groups x token
    // tiles), repacked-activation GEMM tiles, multi-token dots, or one dot per (row, token)
    const enum lm_dtype w0 = mm[0]->type;
    const char *path = "";
    if (mm[0]->il)
        path = "_il16";
    else if (ev.n > LM_PRIVATE_QUANT_ROWS && lm_vec_dot_type(w0) == LM_DTYPE_Q8_0 && c->kern->vec_dot_n_u8[w0])
        path = "_gemm_u8";
    else if (ev.n > 1 && c->kern->vec_dot_n[w0])
        path = "_multitoken";
    snprintf(variant + vlen, sizeof variant - vlen, "_%s%s", c->kern->name, path);
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
    if (ith == 0 && n_mm > 0) lm_fwd_matmul_event(c, op, layer, t0, t1, mm, n_mm);
    // the wait starts after the recording (the matmul event's formatting is ~1 us: it
    // showed as barrier time even at 1 thread); recording time stays outside both spans
    const uint64_t tb = lm_prof_ticks();
    lm_pool_barrier(c->pool);
    const uint64_t t2 = lm_prof_ticks();
    lm_prof_barrier(ith, op, layer, tb, t2);
    return t2;
}
