// Runtime internals: the context (KV cache, scratch buffers, thread pool) and the
// parallel ops every architecture's forward pass is built from. All ops are called
// by every pool thread with (ith, nth) and split their work; the caller places
// lm_pool_barrier() between dependent ops.
#ifndef LM_RUNTIME_RUNTIME_H
#define LM_RUNTIME_RUNTIME_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "kernels/kernels.h"
#include "kernels/matmul.h"
#include "model/model.h"
#include "prof/prof.h"
#include "runtime/kv_cache.h"

// ---------------------------------------------------------------- context
struct lm_context {
    struct lm_model *m;
    const struct lm_kernels *kern;
    struct lm_pool *pool;
    int32_t n_ctx, n_seq, n_batch, n_threads, n_logits_max;
    // The KV pool: kv_own, or a target context's (a draft context, lm_context_init_draft,
    // which borrows its pool and thread pool too). This context's sequences are the pool's
    // [seq0, seq0 + n_seq), whose rows sit at kv->lay[kv_layout] (its model's layout).
    struct lm_kv_cache *kv;
    struct lm_kv_cache kv_own;
    int32_t seq0;
    int kv_layout;
    bool borrowed;       // kv and pool belong to another context

    // current batch (set by lm_decode)
    const struct lm_batch_entry *batch;
    int32_t n_tokens;
    size_t *kv_koff, *kv_voff; // [n_batch] each entry's K / V cell in the pool (lm_kv_prepare)
    int32_t *seq_next;         // [n_seq] lm_decode's position check
    int32_t n_out;       // entries wanting logits
    int32_t *out_rows;   // [n_batch] batch index of each output row
    // small batches (<= LM_PRIVATE_QUANT_ROWS tokens, 2+ threads): every thread computes the
    // residual adds and norms of all rows itself (lm_op_residual_norm_priv), into its own
    // xn_priv rows, while thread 0 writes the residual stream alternately to x and x_alt
    float *x_alt;        // (LM_PRIVATE_QUANT_ROWS, n_embd)
    float *xn_priv;      // (n_threads, LM_PRIVATE_QUANT_ROWS, n_embd)
    atomic_llong head_next; // next lm_head row to claim (lm_op_lm_head; lm_op_lm_head_reset)
    // fused top-k (lm_context_set_top_k): each thread selects from the logits it finishes,
    // lm_decode merges the threads' selections of each row into topk_out, sorted
    int32_t top_k;                 // 0: off
    int32_t topk_cap;              // the buffers hold selections of up to this k
    int32_t n_topk_rows;           // rows lm_get_top_k answers (last lm_decode's n_out, or 0)
    struct lm_topk *topk_part;     // (n_threads, n_logits_max)
    struct lm_topk *topk_out;      // (n_logits_max)
    struct lm_topk_cand *topk_buf; // (n_threads + 1) * n_logits_max * topk_cap candidates

    // scratch, sized once for n_batch entries (no allocation in the hot path)
    float *x;     // (n_batch, n_embd) residual stream
    float *xn;    // (n_batch, n_embd) normed input of a block
    float *q;     // (n_batch, n_head*hd_k)
    float *k;     // (n_batch, n_head_kv*hd_k)
    float *v;     // (n_batch, n_head_kv*hd_v)
    float *att;   // (n_batch, n_head*hd_v)
    float *o;     // (n_batch, n_embd)
    float *gate;  // (n_batch, n_ff)
    float *up;    // (n_batch, n_ff)
    // attention kernels' scratch (lm_attn_job.scratch), per thread: n_threads rows of
    // attn_scratch_stride floats (lm_attn_scratch_floats for windows up to n_ctx cells)
    float *attn_scratch;
    size_t attn_scratch_stride;
    float *logits;  // (n_logits_max, n_vocab)
    // matmul activations (quantized, repacked), n_batch rows of the widest input, shared
    // and per thread (kernels/matmul.h)
    struct lm_matmul_ws mm;
    // the decision of the last matmul op, kept by thread 0 when profiling, for its event
    // (lm_fwd_sync_mm -> lm_fwd_matmul_event)
    struct lm_matmul_decision mm_last;
    // RoPE cos/sin per batch entry for each distinct (base, scale) of the layers:
    // rope_cs[slot] -> (n_batch, n_rot) as (cos, sin) pairs; rope_slot[layer] -> slot
    int32_t n_rope_slots;
    float rope_base[4], rope_scale[4];
    float *rope_cs[4];
    int8_t *rope_slot;
    uint64_t scratch_bytes;
};

// A target context whose KV pool also holds a draft model's layout (speculative decoding
// with a draft model, docs/speculative.md): the pool's sequences [0, n_seq) are the
// target's, [n_seq, 2 n_seq) the draft context's; kv_tokens counts the target's positions
// and the pool gets as many blocks again for the draft's. The draft needs head sizes that
// are multiples of 16, like any model.
enum lm_status lm_context_init_pair(struct lm_context **out, struct lm_model *m,
                                    const struct lm_context_params *params,
                                    const struct lm_model *draft);
// The draft model's context on target context t (made by lm_context_init_pair with this
// model): borrows t's KV pool (layout 1, sequences [t->n_seq, 2 t->n_seq): entries name
// those ids) and thread pool, so both models run on one pool of threads and one pool of
// blocks; own scratch for n_batch entries (params: n_batch, n_logits_max; the rest is t's).
// The same forward path runs on the draft's weights. Free it before t.
enum lm_status lm_context_init_draft(struct lm_context **out, struct lm_context *t,
                                     struct lm_model *draft, const struct lm_context_params *params);

// Makes every op of c compute with table k (tests and tools: e.g. the generic table beside
// the best one in one process). Weight layouts do not depend on the table, so any table
// works on any loaded model; results are the same bits with every table (kernels.h).
void lm_context_set_kernels(struct lm_context *c, const struct lm_kernels *k);

// ---------------------------------------------------------------- the forward pass
// Runs the forward pass of c's current batch (set by lm_decode) on pool thread ith of nth:
// embeddings, every layer, the LM head of the entries that want logits (runtime/forward.c).
void lm_forward(struct lm_context *c, int ith, int nth);

// ---------------------------------------------------------------- ops
// Builds the ops' lookup tables (the f16 GELU table: ~1.4 ms) once per process; called by
// lm_context_init so the first forward pass does not pay for it.
void lm_ops_init(void);
// y[i] = rmsnorm(x[i]) * w for rows i in [0, n)  (w may be NULL: plain rmsnorm)
void lm_op_rmsnorm(struct lm_context *c, float *y, const float *x, const struct lm_weight *w,
                   int64_t n_rows, int64_t dim, float eps, int ith, int nth);
// Y (n_rows, W.n_out) = X (n_rows, W.n_in) @ W^T on the path kernels/matmul.h chooses.
// Quantizes X, barrier (large batches), computes: the caller places the barrier after it.
// _multi: several weights sharing X (up to LM_MATMUL_MAX_W). Thread 0 keeps the decision
// in c->mm_last when profiling.
void lm_op_matmul_multi(struct lm_context *c, int n_w, float *const *Ys, const float *X,
                        const struct lm_weight *const *Ws, int64_t n_rows, int ith, int nth);
void lm_op_matmul(struct lm_context *c, float *Y, const float *X, const struct lm_weight *W,
                  int64_t n_rows, int ith, int nth);
// Gate/up pair with aligned row ranges: thread ith computes rows [a, b) of BOTH weights
// (same n_out), then applies act(gate) * up on those columns for every token, so no
// barrier is needed between the matmul and the activation. act: 0 = GELU(tanh, f16
// table as llama.cpp), 1 = SiLU (in ggml_vec_swiglu_f32's vector order).
void lm_op_gate_up_act(struct lm_context *c, float *gate, float *up, const float *X,
                       const struct lm_weight *Wg, const struct lm_weight *Wu, int64_t n_rows,
                       int act, int il, int ith, int nth, uint64_t *t);
// RoPE cos/sin tables of the batch for every slot (token split, like lm_op_embed)
void lm_op_rope_cache(struct lm_context *c, int ith, int nth);
// q/k/v biases and q/k head norms (optional weights), RoPE from the cache,
// q *= attn_scale, K/V into the cache: all per token (token split, no barrier inside), so it follows the QKV matmul
// with one barrier. Records its sub-op spans when profiling.
void lm_op_qk_rope_kv(struct lm_context *c, int il, int ith, int nth, uint64_t *t);
// Y += b per row (bias)
void lm_op_add_bias(float *Y, const struct lm_weight *b, int64_t n_rows, int ith, int nth);
// x += y over (n_rows, dim)
void lm_op_add(float *x, const float *y, int64_t n_rows, int64_t dim, int ith, int nth);
// Barrier-free residual step for small batches, run by every thread on all n_rows rows:
// s = x + post(o) (post: an optional RMS norm), x_out = s (thread 0 only: x_out must not
// be x, which other threads are reading), y = norm(s) into this thread's private rows.
// The same float operations as lm_op_rmsnorm(o, o, post) + lm_op_add(x, o) +
// lm_op_rmsnorm(y, x, norm), so results are bit-identical to that sequence.
void lm_op_residual_norm_priv(struct lm_context *c, float *x_out, const float *x, const float *o,
                              const struct lm_weight *post, const struct lm_weight *norm,
                              float eps, int64_t n_rows, int64_t dim, float *y, int ith);
// Writes the batch's K and V rows of layer il into the cache.
void lm_op_kv_write(struct lm_context *c, int il, int ith, int nth);
// att (n_tokens, n_head*hd_v) = softmax(q k^T + mask) v over the cache of layer il.
void lm_op_attention(struct lm_context *c, int il, int ith, int nth);
// x (n_tokens, n_embd) = embedding rows of the batch tokens * scale
void lm_op_embed(struct lm_context *c, float scale, int ith, int nth);
// xn rows = final norm of the rows of x that want logits (gathered by out_rows). x: the
// buffer holding the final residual stream (n_tokens rows; the forward's, c->x or c->x_alt).
void lm_op_output_norm(struct lm_context *c, const float *x, int ith, int nth);
// Rewinds the head's row-claim counter (thread 0). lm_op_lm_head needs it once per pass,
// with a barrier between the two (the forward puts it before the output norm's barrier).
void lm_op_lm_head_reset(struct lm_context *c, int ith);
// logits = lm_head(xn rows) (+ final soft-capping); has an internal barrier if capping.
// With c->top_k, the pass that writes the final logits (this one, or lm_op_lm_head_bias)
// also feeds them to this thread's top-k selections (c->topk_part).
void lm_op_lm_head(struct lm_context *c, int ith, int nth);
// logits += the output bias (qwen2), and the fused top-k selection of the biased logits;
// after the head's barrier
void lm_op_lm_head_bias(struct lm_context *c, int ith, int nth);

// ---------------------------------------------------------------- profiling hooks
// Ends op `op` of `layer` on this thread (started at t0 = lm_prof_now() or the previous
// sync's return), waits at the barrier, records both spans when profiling is on, and
// returns the start time of the next op. With profiling off: just the barrier.
// mm/n_mm: the op's weights; thread 0 records one matmul event (fused ops: m is the sum
// of the rows) from the decision the op kept in c->mm_last, which must be for mm.
// One matmul event (thread 0) over [t0, t1] for the decision d a matmul op took: its
// weights, rows and variant label (lm_matmul_decision_label).
void lm_fwd_matmul_event(struct lm_context *c, enum lm_prof_op op, int layer, uint64_t t0,
                         uint64_t t1, const struct lm_matmul_decision *d);
// Records op span [t0, now] on this thread without a barrier (the next op uses the same
// row partition); returns now. No-op (returns 0) when profiling is off.
static inline uint64_t lm_fwd_mark(int ith, enum lm_prof_op op, int layer, uint64_t t0) {
    if (!lm_prof_on()) return 0;
    const uint64_t t1 = lm_prof_ticks();
    lm_prof_op(ith, op, layer, t0, t1);
    return t1;
}
uint64_t lm_fwd_sync_rec(struct lm_context *c, int ith, enum lm_prof_op op, int layer,
                         uint64_t t0, const struct lm_weight *const *mm, int n_mm);
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
    if (c->n_out == 0) return 0;
    for (int32_t r = 1; r < c->n_out; r++)
        if (c->out_rows[r] != c->out_rows[0] + r) return c->n_tokens;
    *first = c->out_rows[0];
    return c->n_out;
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
