// Multi-head latent attention (deepseek2) as MQA over the compressed latent, llama.cpp's
// absorbed form: the KV pool keeps per position one row of kv_rank normed latent values and
// the shared RoPE key (n_rot), and no V rows (V is the latent); each head's query is its
// q_nope taken into the latent space through wk_b, followed by its roped q_pe; the
// attention's output per head (a latent vector) goes back through wv_b before attn_output.
#include <string.h>

#include "runtime/forward.h"

// [start, end) of n items for thread ith of nth
static void split(int64_t n, int ith, int nth, int64_t *s, int64_t *e) {
    const int64_t per = (n + nth - 1) / nth;
    *s = per * ith < n ? per * ith : n;
    *e = *s + per < n ? *s + per : n;
}

// Per head h of this thread's heads: Y[i, h] (n_out) = W[h] (n_out, n_in) @ X[i, h] (n_in)
// for tokens [0, n), X's head rows x_stride floats apart per token (head h at h * x_hs),
// Y's y_stride apart (head h at h * y_hs), times scale. Tokens go LM_PRIVATE_QUANT_ROWS at
// a time through this thread's own activation buffers: no barrier, and a head's results do
// not depend on the batch (the matmul's results do not depend on its row count).
static void heads_matmul(struct lm_context *c, const struct lm_weight *W, int64_t n_head,
                         const float *X, int64_t x_stride, int64_t x_hs, float *Y,
                         int64_t y_stride, int64_t y_hs, int64_t n, float scale, int ith,
                         int nth) {
    const int64_t n_in = W[0].n_in, n_out = W[0].n_out;
    float *const xg = c->mla_tmp + (size_t)ith * c->mla_tmp_stride;
    float *const yg = xg + (size_t)LM_PRIVATE_QUANT_ROWS * n_in;
    int64_t h0, h1;
    split(n_head, ith, nth, &h0, &h1);
    for (int64_t h = h0; h < h1; h++) {
        const struct lm_weight *w = &W[h];
        for (int64_t i0 = 0; i0 < n; i0 += LM_PRIVATE_QUANT_ROWS) {
            const int64_t cnt = n - i0 < LM_PRIVATE_QUANT_ROWS ? n - i0 : LM_PRIVATE_QUANT_ROWS;
            for (int64_t r = 0; r < cnt; r++)
                memcpy(xg + r * n_in, X + (i0 + r) * x_stride + h * x_hs, (size_t)n_in * sizeof(float));
            struct lm_matmul_plan p;
            lm_matmul_plan(&p, c->kern, &c->mm, &w, 1, xg, cnt, ith);
            lm_matmul_quantize(&p, 0, cnt);
            lm_matmul_rows(&p, 0, yg, 0, n_out);
            for (int64_t r = 0; r < cnt; r++) {
                float *y = Y + (i0 + r) * y_stride + h * y_hs;
                const float *s = yg + r * n_out;
                for (int64_t d = 0; d < n_out; d++) y[d] = s[d] * scale;
            }
        }
    }
}

// The q and latent projections, the latent's norm, RoPE of q_pe and k_pe, the absorbed
// queries (c->q: (n_tokens, n_head, kv_rank + n_rot), scaled by attn_scale) and the K row
// write. Ends at a barrier (kv_write's span).
void lm_op_mla_qkv(struct lm_context *c, int il, const float *xin, int ith, int nth, uint64_t *t) {
    const struct lm_hparams *hp = &c->m->hp;
    const struct lm_layer *L = &c->m->layers[il];
    const int64_t N = c->n_tokens, H = hp->n_head, kvr = hp->mla_kv_rank, rot = hp->n_rot;
    const int64_t hk = hp->mla_hd_k, nope = hk - rot, hd = hp->head_dim_k; // hd = kvr + rot
    // ---- projections: q (directly or through the q low-rank pair) and the latent + k_pe
    if (hp->mla_q_rank > 0) {
        const struct lm_weight *const ws[2] = {&L->wq_a, &L->wk};
        float *const ys[2] = {c->mla_qa, c->k};
        lm_op_matmul_multi(c, 2, ys, xin, ws, N, ith, nth);
        *t = lm_fwd_sync_mm(c, ith, LM_OP_QKV, il, *t, ws, 2);
        lm_op_rmsnorm(c, c->mla_qa, c->mla_qa, &L->q_a_norm, N, hp->mla_q_rank, hp->rms_eps, ith, nth);
        lm_pool_barrier(c->pool);
        const struct lm_weight *const wq[1] = {&L->wq};
        lm_op_matmul(c, c->mla_q, c->mla_qa, &L->wq, N, ith, nth);
        *t = lm_fwd_sync_mm(c, ith, LM_OP_QKV, il, *t, wq, 1);
    } else {
        const struct lm_weight *const ws[2] = {&L->wq, &L->wk};
        float *const ys[2] = {c->mla_q, c->k};
        lm_op_matmul_multi(c, 2, ys, xin, ws, N, ith, nth);
        *t = lm_fwd_sync_mm(c, ith, LM_OP_QKV, il, *t, ws, 2);
    }
    // ---- per token: latent norm, RoPE of k_pe and of every head's q_pe (into c->q's tail)
    const float *cs0 = c->rope_cs[c->rope_slot[il]];
    const float scale = hp->attn_scale;
    int64_t s, e;
    split(N, ith, nth, &s, &e);
    for (int64_t i = s; i < e; i++) {
        float *kr = c->k + i * hd;
        c->kern->rmsnorm(kr, kr, (const float *)L->kv_a_norm.data, kvr, hp->rms_eps);
        const float *cs = cs0 + i * rot;
        c->kern->rope(kr + kvr, 1, rot, cs, rot, false);
        float *qs = c->mla_q + i * H * hk;
        c->kern->rope(qs + nope, H, hk, cs, rot, false);
        for (int64_t h = 0; h < H; h++) {
            float *qd = c->q + (i * H + h) * hd + kvr;
            const float *qp = qs + h * hk + nope;
            for (int64_t d = 0; d < rot; d++) qd[d] = qp[d] * scale;
        }
    }
    if (lm_prof_on()) { const uint64_t t1 = lm_prof_ticks(); lm_prof_op(ith, LM_OP_ROPE, il, *t, t1); *t = t1; }
    lm_op_kv_write(c, il, ith, nth);
    *t = lm_fwd_mark(ith, LM_OP_KV_WRITE, il, *t);
    // ---- absorption: q_abs[i, h] = wk_b[h] @ q_nope[i, h], per head (no barrier needed:
    // it writes c->q[., ., 0:kvr], the loop above c->q[., ., kvr:])
    heads_matmul(c, L->wk_b, H, c->mla_q, H * hk, hk, c->q, H * hd, hd, N, scale, ith, nth);
    *t = lm_fwd_sync(c, ith, LM_OP_MLA_ABSORB, il, *t);
}

// out (n, n_head * mla_hd_v) = per head wv_b[h] @ att rows [r0, r0 + n) of head h (its
// latent-space output); ends at a barrier.
const float *lm_op_mla_v_up(struct lm_context *c, int il, int64_t r0, int64_t n, int ith, int nth,
                            uint64_t *t) {
    const struct lm_hparams *hp = &c->m->hp;
    const struct lm_layer *L = &c->m->layers[il];
    const int64_t H = hp->n_head, kvr = hp->mla_kv_rank, hv = hp->mla_hd_v;
    heads_matmul(c, L->wv_b, H, c->att + r0 * H * kvr, H * kvr, kvr, c->mla_o, H * hv, hv, n, 1.0f,
                 ith, nth);
    *t = lm_fwd_sync(c, ith, LM_OP_MLA_V_UP, il, *t);
    return c->mla_o;
}

size_t lm_mla_tmp_floats(const struct lm_hparams *hp) {
    const int64_t kvr = hp->mla_kv_rank, nope = hp->mla_hd_k - hp->n_rot, hv = hp->mla_hd_v;
    const int64_t in = kvr > nope ? kvr : nope, out = kvr > hv ? kvr : hv;
    return ((size_t)LM_PRIVATE_QUANT_ROWS * (size_t)(in + out) + 15) & ~(size_t)15;
}
