// The forward pass (runtime/forward.c) and its profiling hooks: each op of a layer ends at
// a barrier (lm_fwd_sync*) or continues on the same rows of the same thread (lm_fwd_mark);
// with profiling on they record the op's span, its barrier wait and one event per matmul
// (runtime/forward_prof.c), with profiling off a sync is just the barrier.
#ifndef LM_RUNTIME_FORWARD_H
#define LM_RUNTIME_FORWARD_H

#include "prof/prof.h"
#include "runtime/ops.h"

// Runs the forward pass of c's current batch (set by lm_decode) on pool thread ith of nth:
// embeddings, every layer, the LM head of the entries that want logits (runtime/forward.c).
void lm_forward(struct lm_context *c, int ith, int nth);

// ---------------------------------------------------------------- profiling hooks
// Records op span [t0, now] on this thread without a barrier (the next op uses the same
// row partition); returns now. No-op (returns 0) when profiling is off.
static inline uint64_t lm_fwd_mark(int ith, enum lm_prof_op op, int layer, uint64_t t0) {
    if (!lm_prof_on()) return 0;
    const uint64_t t1 = lm_prof_ticks();
    lm_prof_op(ith, op, layer, t0, t1);
    return t1;
}
// Ends op `op` of `layer` on this thread (started at t0 = lm_prof_now() or the previous
// sync's return), waits at the barrier, records both spans, and returns the start time of
// the next op. mm/n_mm: the op's weights; thread 0 records one matmul event (fused ops: m
// is the sum of the rows) from the decision the op kept in c->mm_last, which must be for
// mm. Called by lm_fwd_sync / lm_fwd_sync_mm when profiling is on.
uint64_t lm_fwd_sync_rec(struct lm_context *c, int ith, enum lm_prof_op op, int layer,
                         uint64_t t0, const struct lm_weight *const *mm, int n_mm);
// One matmul event (thread 0) over [t0, t1] for the decision d a matmul op took: its
// weights, rows and variant label (lm_matmul_decision_label).
void lm_fwd_matmul_event(struct lm_context *c, enum lm_prof_op op, int layer, uint64_t t0,
                         uint64_t t1, const struct lm_matmul_decision *d);
// A forward pass's barrier-free residual step (small batches, 2+ threads): rows [r0, r0+n)
// of the stream *xcur plus post(o) go to *xoth (thread 0), norm of them to this thread's
// xn rows; then the two stream buffers swap, so *xcur holds the sum.
static inline void lm_fwd_residual_priv(struct lm_context *c, float **xcur, float **xoth,
                                        int64_t r0, const float *o, const struct lm_weight *post,
                                        const struct lm_weight *norm, float eps, int64_t n,
                                        int64_t E, float *xn, int ith) {
    lm_op_residual_norm_priv(c, *xoth + r0 * E, *xcur + r0 * E, o, post, norm, eps, n, E, xn, ith);
    float *const t = *xcur;
    *xcur = *xoth;
    *xoth = t;
}

// The last layer's rows after attention: only the tokens that want logits feed anything
// (its K/V are written before). If those rows are one contiguous range, *first gets its
// start and the count is returned (n_out, possibly 0); otherwise all n_tokens rows
// (*first = 0). llama.cpp prunes the last layer the same way (inp_out_ids).
static inline int64_t lm_last_layer_rows(const struct lm_context *c, int64_t *first) {
    *first = 0;
    const int32_t n_rows = c->n_out + c->n_eout; // logits rows, then embedding rows
    if (n_rows == 0) return 0;
    for (int32_t r = 1; r < n_rows; r++)
        if (c->out_rows[r] != c->out_rows[0] + r) return c->n_tokens;
    *first = c->out_rows[0];
    return n_rows;
}

static inline uint64_t lm_fwd_sync(struct lm_context *c, int ith, enum lm_prof_op op, int layer,
                                   uint64_t t0) {
    if (!lm_prof_on()) {
        lm_pool_barrier(c->pool);
        return 0;
    }
    return lm_fwd_sync_rec(c, ith, op, layer, t0, NULL, 0);
}
static inline uint64_t lm_fwd_sync_mm(struct lm_context *c, int ith, enum lm_prof_op op,
                                      int layer, uint64_t t0, const struct lm_weight *const *mm,
                                      int n_mm) {
    if (!lm_prof_on()) {
        lm_pool_barrier(c->pool);
        return 0;
    }
    return lm_fwd_sync_rec(c, ith, op, layer, t0, mm, n_mm);
}

#endif
