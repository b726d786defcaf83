// The parallel ops the forward pass is built from (runtime/ops.c): norms, matmuls over the
// kernels' path choice, RoPE, attention over the KV pool, the gated FFN, embeddings and the
// LM head. Every pool thread calls each op with (ith, nth) and the op splits its work; the
// caller places lm_pool_barrier() between dependent ops (runtime/forward.h's sync hooks).
#ifndef LM_RUNTIME_OPS_H
#define LM_RUNTIME_OPS_H

#include "runtime/context.h"

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
// out (n, n_embd) = the experts' FFN of X (n, n_embd) on layer L (runtime/ops_moe.c):
// router, per-token top-k, each chosen expert's gate/up, SwiGLU and down over the tokens
// that chose it, weighted and summed in ascending expert order. Barriers inside; ends at
// one. Records ffn_moe_router / ffn_moe_gate_up / ffn_moe_down spans when profiling.
void lm_op_moe_ffn(struct lm_context *c, float *out, const float *X, const struct lm_layer *L,
                   int64_t n, int il, int ith, int nth, uint64_t *t);
// out (n, n_embd) += the shared experts' SwiGLU FFN of X (L->gate/up/down with experts,
// deepseek2); ends at a barrier.
void lm_op_shared_ffn(struct lm_context *c, float *out, const float *X, const struct lm_layer *L,
                      int64_t n, int il, int ith, int nth, uint64_t *t);
// Bytes of one thread's routing arrays for n_tokens tokens (lm_context.moe_route_stride).
size_t lm_moe_route_bytes(int64_t n_tokens, int n_used, int n_expert);
// RoPE cos/sin tables of the batch for every slot (token split, like lm_op_embed)
void lm_op_rope_cache(struct lm_context *c, int ith, int nth);
// x's n values, blocks of nb (a power of two), each to H x / sqrt(nb) (kv_rot.c): the rotation
// of a q8_0 KV cache's q, k, v and attention output (context.h kv_rot_k / kv_rot_v)
void lm_hadamard(float *x, int64_t n, int64_t nb);
// q/k/v biases and q/k head norms (optional weights), RoPE from the cache,
// q *= attn_scale, K/V into the cache: all per token (token split, no barrier inside), so it follows the QKV matmul
// with one barrier. Records its sub-op spans when profiling.
void lm_op_qk_rope_kv(struct lm_context *c, int il, int ith, int nth, uint64_t *t);
// MLA (deepseek2; runtime/ops_mla.c): the q and latent projections, the latent's norm,
// RoPE, the K row write and the absorbed queries into c->q; ends at a barrier.
void lm_op_mla_qkv(struct lm_context *c, int il, const float *xin, int ith, int nth, uint64_t *t);
// The attention's rows [r0, r0 + n) per head through wv_b -> (n, n_head * mla_hd_v), the
// attn_output input (returned); ends at a barrier.
const float *lm_op_mla_v_up(struct lm_context *c, int il, int64_t r0, int64_t n, int ith, int nth,
                            uint64_t *t);
// Floats of one thread's MLA scratch (lm_context.mla_tmp_stride).
size_t lm_mla_tmp_floats(const struct lm_hparams *hp);
// Y += b per row (bias)
void lm_op_add_bias(float *Y, const struct lm_weight *b, int64_t n_rows, int ith, int nth);
// x += y over (n_rows, dim)
void lm_op_add(float *x, const float *y, int64_t n_rows, int64_t dim, int ith, int nth);
// The residual add of a block's output: x += o, o first scaled in place by
// hp.residual_scale when the model has one (granite). Rows split over the threads.
void lm_op_residual(const struct lm_context *c, float *x, float *o, int64_t n_rows, int64_t dim,
                    int ith, int nth);
// Barrier-free residual step for small batches, run by every thread on all n_rows rows:
// s = x + post(o) (post: an optional RMS norm; then times hp.residual_scale as
// lm_op_residual when the model has one), x_out = s (thread 0 only: x_out must not
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
// ---- encoders (bert; runtime/ops_enc.c)
// x rows = LN(tok_embd[t] + type_embd[0] + pos_embd[pos]) with token_embd_norm (+ bias);
// c->o is its scratch
void lm_op_embed_enc(struct lm_context *c, int ith, int nth);
// x rows = LN(x + o) with w (+ b), in place (post-norm)
void lm_op_residual_layernorm(struct lm_context *c, float *x, const float *o,
                              const struct lm_weight *w, const struct lm_weight *b, int64_t n_rows,
                              int ith, int nth);
// y rows = down(GELU(up x + up_b)) + down_b, or with a gate (nomic-bert) down(SiLU(gate x) *
// up x); hidden rows in c->gate; ends at a barrier
void lm_op_ffn_enc(struct lm_context *c, float *y, const float *x, const struct lm_layer *L,
                   int64_t n_rows, int il, int ith, int nth, uint64_t *t);
// The GELU table (65536 floats, ggml's GGML_GELU_FP16), built on first use
const float *lm_op_gelu_table(void);
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

#endif
