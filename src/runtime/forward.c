// The forward pass: the one decoder of every architecture (gemma3, llama, qwen2, qwen3,
// qwen3moe, granite, smollm3, gpt-oss, deepseek2: latent attention through runtime/ops_mla.c;
// the bert encoder: post-norm through runtime/ops_enc.c),
// llama.cpp's pre-norm block stack, shaped by m->arch->decoder (lm_decoder_desc) and by the
// model's data (hyper-parameters, optional weights; experts: lm_op_moe_ffn), so no family has
// a copy of it. Prefill, decode, batched decode and speculative verification are all this
// function (lm_decode).
#include "runtime/forward.h"

// Runs on every pool thread. Each op ends either at a barrier, lm_fwd_sync (which records
// its span and the wait when profiling), or without one, lm_fwd_mark, where the next op
// works on the same rows of the same thread (row-aligned chains: norm -> residual -> norm,
// q/k norm -> rope -> kv write, gate/up -> activation).
//
// Barriers per layer: qkv, kv_write, attention, o_proj, ffn_norm, activation, down and the
// next layer's attn_norm (8; the matmuls of batches over LM_PRIVATE_QUANT_ROWS rows add one
// each after quantizing). Small batches on 2+ threads drop ffn_norm's and attn_norm's (6):
// every thread then computes the residual steps of all rows itself
// (lm_op_residual_norm_priv) into its own xn rows, while thread 0 writes the stream
// alternately to c->x and c->x_alt (a thread may not overwrite rows others still read).
//
// The residual stream starts in c->x (lm_op_embed) and ends in xcur, which the output norm
// is given: on the private path that is c->x only because each layer swaps twice.
void lm_forward(struct lm_context *c, int ith, int nth) {
    const struct lm_model *m = c->m;
    const struct lm_decoder_desc *dd = &m->arch->decoder;
    const struct lm_hparams *hp = &m->hp;
    const int64_t N = c->n_tokens, E = hp->n_embd;
    const float eps = hp->rms_eps;
    uint64_t t = lm_prof_now();

    const bool enc = dd->encoder; // bert: post-norm blocks without pre-norms (ops_enc.c)
    if (enc) lm_op_embed_enc(c, ith, nth); // into c->x, LayerNormed
    else lm_op_embed(c, hp->embd_scale, ith, nth); // into c->x
    lm_op_rope_cache(c, ith, nth);
    t = lm_fwd_mark(ith, LM_OP_EMBED, -1, t);
    if (enc) {
        t = lm_fwd_sync(c, ith, LM_OP_EMBED, -1, t);
    } else {
        lm_op_rmsnorm(c, c->xn, c->x, &m->layers[0].attn_norm, N, E, eps, ith, nth);
        t = lm_fwd_sync(c, ith, LM_OP_ATTN_NORM, 0, t);
    }

    const bool pv = nth > 1 && N <= LM_PRIVATE_QUANT_ROWS && !enc; // barrier-free residual steps
    const bool mla = hp->mla_kv_rank > 0; // latent attention (deepseek2)
    float *xcur = c->x, *xoth = c->x_alt;
    float *const xn_own = pv ? c->xn_priv + (size_t)ith * LM_PRIVATE_QUANT_ROWS * E : c->xn;
    const float *xin = enc ? c->x : c->xn; // the QKV input: attn_norm(x) (encoders: x)
    for (int il = 0; il < hp->n_layer; il++) {
        const struct lm_layer *L = &m->layers[il];
        const bool last = il + 1 == hp->n_layer;
        const struct lm_weight *const post_attn = dd->post_norms ? &L->post_attn_norm : NULL;
        const struct lm_weight *const post_ffw = dd->post_norms ? &L->post_ffw_norm : NULL;
        const struct lm_weight *const next_norm = last ? NULL : &m->layers[il + 1].attn_norm;

        // ---- attention block: q/k/v biases, QK-norm, RoPE, q *= attn_scale and the K/V
        // write happen per token in lm_op_qk_rope_kv (optional weights: when present)
        if (mla) { // latent attention: ends at a barrier (runtime/ops_mla.c)
            lm_op_mla_qkv(c, il, xin, ith, nth, &t);
        } else {
            const struct lm_weight *const qkv[3] = {&L->wq, &L->wk, &L->wv};
            float *const ys[3] = {c->q, c->k, c->v};
            lm_op_matmul_multi(c, 3, ys, xin, qkv, N, ith, nth);
            t = lm_fwd_sync_mm(c, ith, LM_OP_QKV, il, t, qkv, 3);
            lm_op_qk_rope_kv(c, il, ith, nth, &t); // records qk_norm and rope itself
            t = lm_fwd_sync(c, ith, LM_OP_KV_WRITE, il, t);
        }
        // the last layer goes on with the output tokens' rows only (none: done)
        int64_t r0 = 0, Nr = N;
        if (last) {
            Nr = lm_last_layer_rows(c, &r0);
            if (Nr == 0) break;
        }
        lm_op_attention(c, il, ith, nth);
        t = lm_fwd_sync(c, ith, LM_OP_ATTENTION, il, t);
        const struct lm_weight *const wo[1] = {&L->wo};
        const float *const wo_in = mla ? lm_op_mla_v_up(c, il, r0, Nr, ith, nth, &t)
                                       : c->att + r0 * L->wo.n_in;
        lm_op_matmul(c, c->o, wo_in, &L->wo, Nr, ith, nth);
        t = lm_fwd_sync_mm(c, ith, LM_OP_O_PROJ, il, t, wo, 1);
        if (L->bo.data) { // output projection bias (gpt-oss), rows split: its own barrier
            lm_op_add_bias(c->o, &L->bo, Nr, ith, nth);
            t = lm_fwd_sync(c, ith, LM_OP_O_PROJ, il, t);
        }
        if (enc) { // post-norm: x = LN(x + attn), then x = LN(x + FFN(x)), the FFN ungated
            float *const xr = xcur + r0 * E;
            lm_op_residual_layernorm(c, xr, c->o, &L->attn_out_norm, &L->attn_out_norm_b, Nr, ith, nth);
            t = lm_fwd_sync(c, ith, LM_OP_ATTN_RESIDUAL, il, t);
            lm_op_ffn_enc(c, c->o, xr, L, Nr, il, ith, nth, &t);
            lm_op_residual_layernorm(c, xr, c->o, &L->layer_out_norm, &L->layer_out_norm_b, Nr, ith, nth);
            t = lm_fwd_sync(c, ith, LM_OP_FFN_RESIDUAL, il, t);
            continue;
        }
        if (pv) { // post norm + residual + ffn norm in the ffn_norm span
            lm_fwd_residual_priv(c, &xcur, &xoth, r0, c->o, post_attn, &L->ffn_norm, eps, Nr, E,
                                 xn_own, ith);
            t = lm_fwd_mark(ith, LM_OP_FFN_NORM, il, t);
        } else {
            if (post_attn) {
                lm_op_rmsnorm(c, c->o, c->o, post_attn, Nr, E, eps, ith, nth);
                t = lm_fwd_mark(ith, LM_OP_POST_ATTN_NORM, il, t);
            }
            lm_op_residual(c, xcur + r0 * E, c->o, Nr, E, ith, nth);
            t = lm_fwd_mark(ith, LM_OP_ATTN_RESIDUAL, il, t);
            lm_op_rmsnorm(c, c->xn, xcur + r0 * E, &L->ffn_norm, Nr, E, eps, ith, nth);
            t = lm_fwd_sync(c, ith, LM_OP_FFN_NORM, il, t);
        }

        // ---- feed-forward block: down(act(gate) * up), or the experts' (ends at a barrier)
        if (L->router.data) {
            lm_op_moe_ffn(c, c->o, xn_own, L, Nr, il, ith, nth, &t);
            if (L->gate.data) // shared experts (deepseek2): their FFN added to the routed sum
                lm_op_shared_ffn(c, c->o, xn_own, L, Nr, il, ith, nth, &t);
        } else {
            lm_op_gate_up_act(c, c->gate, c->up, xn_own, &L->gate, &L->up, Nr,
                              (int)dd->ffn_act, il, ith, nth, &t);
            t = lm_fwd_sync(c, ith, LM_OP_ACTIVATION, il, t);
            const struct lm_weight *const down[1] = {&L->down};
            lm_op_matmul(c, c->o, c->gate, &L->down, Nr, ith, nth);
            t = lm_fwd_sync_mm(c, ith, LM_OP_DOWN, il, t, down, 1);
        }
        if (pv) { // post norm + residual + the next layer's attn norm in the attn_norm span
            lm_fwd_residual_priv(c, &xcur, &xoth, r0, c->o, post_ffw, next_norm, eps, Nr, E, xn_own,
                                 ith);
            xin = xn_own;
            if (last) // thread 0 wrote the rows every thread's output norm reads
                t = lm_fwd_sync(c, ith, LM_OP_FFN_RESIDUAL, il, t);
            else
                t = lm_fwd_mark(ith, LM_OP_ATTN_NORM, il + 1, t);
            continue;
        }
        if (post_ffw) {
            lm_op_rmsnorm(c, c->o, c->o, post_ffw, Nr, E, eps, ith, nth);
            t = lm_fwd_mark(ith, LM_OP_POST_FFW_NORM, il, t);
        }
        lm_op_residual(c, xcur + r0 * E, c->o, Nr, E, ith, nth);
        if (last) {
            t = lm_fwd_sync(c, ith, LM_OP_FFN_RESIDUAL, il, t);
        } else {
            t = lm_fwd_mark(ith, LM_OP_FFN_RESIDUAL, il, t);
            lm_op_rmsnorm(c, c->xn, xcur, next_norm, N, E, eps, ith, nth);
            t = lm_fwd_sync(c, ith, LM_OP_ATTN_NORM, il + 1, t);
        }
    }

    // ---- output: final norm of the rows that want logits, LM head (+ soft-capping inside),
    // output bias (qwen2) after its own barrier
    if (c->n_out + c->n_eout == 0) return;
    lm_op_lm_head_reset(c, ith); // ordered before the head's claims by the barrier below
    lm_op_output_norm(c, xcur, ith, nth); // embedding rows end here (lm_get_embeddings)
    t = lm_fwd_sync(c, ith, LM_OP_OUTPUT_NORM, -1, t);
    if (c->n_out == 0) return;
    const struct lm_weight *const head[1] = {&m->output};
    lm_op_lm_head(c, ith, nth);
    t = lm_fwd_sync_mm(c, ith, LM_OP_LM_HEAD, -1, t, head, 1);
    if (m->output_b.data) {
        lm_op_lm_head_bias(c, ith, nth);
        lm_fwd_sync(c, ith, LM_OP_LM_HEAD, -1, t);
    }
}
