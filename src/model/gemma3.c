// Gemma 3 (text): hyper-parameters from GGUF metadata, weight views, and the
// forward pass as llama.cpp computes it (scaled embeddings, pre+post norms around
// attention and FFN, per-head QK-norm, NEOX RoPE with separate local/global bases,
// interleaved sliding-window/global layers, GELU-gated FFN, tied LM head).
#include <math.h>
#include <stdio.h>

#include "runtime/runtime.h"

// ================================================================ load

static enum lm_status gemma3_load(struct lm_model *m) {
    struct lm_hparams *hp = &m->hp;
    enum lm_status st;
    uint32_t u;
#define REQ_U32(key, field)                                                         \
    do {                                                                            \
        if ((st = lm_model_key_u32(m, key, &u, true)) != LM_OK) return st;          \
        hp->field = (int32_t)u;                                                     \
    } while (0)
    REQ_U32("embedding_length", n_embd);
    REQ_U32("block_count", n_layer);
    REQ_U32("feed_forward_length", n_ff);
    REQ_U32("attention.head_count", n_head);
    hp->n_head_kv = hp->n_head;
    u = (uint32_t)hp->n_head_kv;
    if ((st = lm_model_key_u32(m, "attention.head_count_kv", &u, false)) != LM_OK) return st;
    hp->n_head_kv = (int32_t)u;
    u = (uint32_t)(hp->n_head ? hp->n_embd / hp->n_head : 0);
    if ((st = lm_model_key_u32(m, "attention.key_length", &u, false)) != LM_OK) return st;
    hp->head_dim_k = (int32_t)u;
    if ((st = lm_model_key_u32(m, "attention.value_length", &u, false)) != LM_OK) return st;
    hp->head_dim_v = (int32_t)u;
    u = 8192;
    if ((st = lm_model_key_u32(m, "context_length", &u, false)) != LM_OK) return st;
    hp->n_ctx_train = (int32_t)u;
    if ((st = lm_model_key_f32(m, "attention.layer_norm_rms_epsilon", &hp->rms_eps, true)))
        return st;
    hp->rope_base = 10000.0f;
    if ((st = lm_model_key_f32(m, "rope.freq_base", &hp->rope_base, false))) return st;
    hp->rope_base_swa = 10000.0f; // llama.cpp's default for Gemma 3 local layers
    if ((st = lm_model_key_f32(m, "rope.freq_base_swa", &hp->rope_base_swa, false))) return st;
    float factor = 1.0f;
    if ((st = lm_model_key_f32(m, "rope.scaling.factor", &factor, false))) return st;
    hp->rope_scale = factor > 0.0f ? 1.0f / factor : 1.0f;
    u = 0;
    if ((st = lm_model_key_u32(m, "attention.sliding_window", &u, false))) return st;
    hp->n_swa = (int32_t)u;
    u = 6; // llama.cpp's default period: every 6th layer is global
    if ((st = lm_model_key_u32(m, "attention.sliding_window_pattern", &u, false))) return st;
    hp->swa_period = (int32_t)u;
    hp->final_softcap = 0.0f;
    if ((st = lm_model_key_f32(m, "final_logit_softcapping", &hp->final_softcap, false)))
        return st;
#undef REQ_U32
    if (hp->n_embd <= 0 || hp->n_layer <= 0 || hp->n_head <= 0 || hp->n_head_kv <= 0 ||
        hp->n_head % hp->n_head_kv != 0 || hp->head_dim_k <= 0 || hp->head_dim_k > 512 ||
        hp->head_dim_v <= 0 || hp->head_dim_v > 512 || hp->n_ff <= 0 || hp->n_layer > 4096 ||
        hp->head_dim_k % 2 != 0)
        return lm_error_set(LM_ERR_FORMAT,
                            "gemma3: %s: inconsistent hyper-parameters (n_embd %d, n_layer %d, "
                            "n_head %d, n_head_kv %d, head_dim %d/%d, n_ff %d)",
                            m->path, hp->n_embd, hp->n_layer, hp->n_head, hp->n_head_kv,
                            hp->head_dim_k, hp->head_dim_v, hp->n_ff);
    hp->n_rot = hp->head_dim_k;
    hp->rope_type = LM_ROPE_NEOX;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    // gemma 3 27B scales by n_embd/n_head; every other size by the head size
    hp->attn_scale = hp->n_layer == 62 ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                       : 1.0f / sqrtf((float)hp->head_dim_k);

    const int64_t E = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim_k,
                  kd = (int64_t)hp->n_head_kv * hp->head_dim_k,
                  vd = (int64_t)hp->n_head_kv * hp->head_dim_v, F = hp->n_ff;
    const struct lm_gguf_tensor *te = lm_gguf_find_tensor(&m->gguf, "token_embd.weight");
    if (!te)
        return lm_error_set(LM_ERR_FORMAT, "gemma3: %s: missing tensor 'token_embd.weight'",
                            m->path);
    hp->n_vocab = (int32_t)te->ne[1];
    if ((st = lm_model_weight(m, &m->tok_embd, "token_embd.weight", E, hp->n_vocab, true)))
        return st;
    if ((st = lm_model_weight(m, &m->output_norm, "output_norm.weight", E, 1, true))) return st;
    if ((st = lm_model_weight(m, &m->output, "output.weight", E, hp->n_vocab, false))) return st;
    m->tied_output = m->output.data == NULL;
    if (m->tied_output) m->output = m->tok_embd;

    for (int il = 0; il < hp->n_layer; il++) {
        struct lm_layer *L = &m->layers[il];
        L->swa = hp->n_swa > 0 &&
                 (hp->swa_period == 0 || (il % hp->swa_period) < hp->swa_period - 1);
        L->rope_base = L->swa ? hp->rope_base_swa : hp->rope_base;
        L->rope_scale = L->swa ? 1.0f : hp->rope_scale;
#define W(field, nm, nin, nout)                                                        \
    if ((st = lm_model_weightf(m, &L->field, true, nin, nout, "blk.%d." nm, il))) return st
        W(attn_norm, "attn_norm.weight", E, 1);
        W(wq, "attn_q.weight", E, qd);
        W(wk, "attn_k.weight", E, kd);
        W(wv, "attn_v.weight", E, vd);
        W(q_norm, "attn_q_norm.weight", hp->head_dim_k, 1);
        W(k_norm, "attn_k_norm.weight", hp->head_dim_k, 1);
        W(wo, "attn_output.weight", qd, E);
        W(post_attn_norm, "post_attention_norm.weight", E, 1);
        W(ffn_norm, "ffn_norm.weight", E, 1);
        W(gate, "ffn_gate.weight", E, F);
        W(up, "ffn_up.weight", E, F);
        W(down, "ffn_down.weight", F, E);
        W(post_ffw_norm, "post_ffw_norm.weight", E, 1);
#undef W
    }
    return LM_OK;
}

// ================================================================ forward

// Runs on every pool thread. SYNC ends an op at a barrier (recording its span and the
// wait when profiling); MARK ends an op without one, where the next op works on the same
// rows of the same thread (row-aligned chains: norm -> residual -> norm, q/k norm ->
// rope -> kv write, gate/up -> activation). Decode has 8 barriers per layer, 6 with 2+
// threads (the residual steps then run on every thread, lm_op_residual_norm_priv).
static void gemma3_forward(struct lm_context *c, int ith, int nth) {
    const struct lm_model *m = c->m;
    const struct lm_hparams *hp = &m->hp;
    const int64_t N = c->n_tokens, E = hp->n_embd;
    uint64_t t = lm_prof_now();
#define SYNC(op, layer) t = lm_fwd_sync(c, ith, op, layer, t)
#define SYNC_MM(op, layer, ws, n) t = lm_fwd_sync_mm(c, ith, op, layer, t, ws, n)
#define MARK(op, layer) t = lm_fwd_mark(ith, op, layer, t)

    lm_op_embed(c, hp->embd_scale, ith, nth);
    lm_op_rope_cache(c, ith, nth);
    MARK(LM_OP_EMBED, -1);
    lm_op_rmsnorm(c->xn, c->x, &m->layers[0].attn_norm, N, E, hp->rms_eps, ith, nth);
    SYNC(LM_OP_ATTN_NORM, 0);
    // small batches: residual steps without barriers (lm_op_residual_norm_priv), the
    // stream alternating between x and x_alt, the norms into this thread's xn rows
    const bool pv = nth > 1 && N <= LM_PRIVATE_QUANT_ROWS;
    float *xcur = c->x, *xoth = c->x_alt;
    float *const xn_own = pv ? c->xn_priv + (size_t)ith * LM_PRIVATE_QUANT_ROWS * E : c->xn;
    const float *xin = c->xn; // the QKV input: attn_norm(x)
    for (int il = 0; il < hp->n_layer; il++) {
        const struct lm_layer *L = &m->layers[il];
        // ---- attention block (xn = attn_norm(x) from the previous step)
        const struct lm_weight *const qkv[3] = {&L->wq, &L->wk, &L->wv};
        {
            float *const ys[3] = {c->q, c->k, c->v};
            lm_op_matmul_multi(c, 3, ys, xin, qkv, N, ith, nth);
        }
        SYNC_MM(LM_OP_QKV, il, qkv, 3);
        lm_op_qk_rope_kv(c, il, ith, nth, &t); // records qk_norm and rope itself
        SYNC(LM_OP_KV_WRITE, il);
        // the last layer goes on with the output tokens' rows only (none: done)
        int64_t r0 = 0, Nr = N;
        if (il + 1 == hp->n_layer) {
            Nr = lm_last_layer_rows(c, &r0);
            if (Nr == 0) break;
        }
        lm_op_attention(c, il, ith, nth);
        SYNC(LM_OP_ATTENTION, il);
        const struct lm_weight *const wo[1] = {&L->wo};
        lm_op_matmul(c, c->o, c->att + r0 * L->wo.n_in, &L->wo, Nr, ith, nth);
        SYNC_MM(LM_OP_O_PROJ, il, wo, 1);
        if (pv) { // post norm + residual + ffn norm in the FFN_NORM span, no barrier
            lm_fwd_residual_priv(&xcur, &xoth, r0, c->o, &L->post_attn_norm, &L->ffn_norm,
                                     hp->rms_eps, Nr, E, xn_own, ith);
            MARK(LM_OP_FFN_NORM, il);
        } else {
            lm_op_rmsnorm(c->o, c->o, &L->post_attn_norm, Nr, E, hp->rms_eps, ith, nth);
            MARK(LM_OP_POST_ATTN_NORM, il);
            lm_op_add(xcur + r0 * E, c->o, Nr, E, ith, nth);
            MARK(LM_OP_ATTN_RESIDUAL, il);
            lm_op_rmsnorm(c->xn, xcur + r0 * E, &L->ffn_norm, Nr, E, hp->rms_eps, ith, nth);
            SYNC(LM_OP_FFN_NORM, il);
        }
        // ---- feed-forward block
        lm_op_gate_up_act(c, c->gate, c->up, xn_own, &L->gate, &L->up, Nr, 0, il, ith, nth, &t);
        SYNC(LM_OP_ACTIVATION, il);
        const struct lm_weight *const down[1] = {&L->down};
        lm_op_matmul(c, c->o, c->gate, &L->down, Nr, ith, nth);
        SYNC_MM(LM_OP_DOWN, il, down, 1);
        if (pv) { // back into x; the last layer's rows are needed by every thread's head
            const bool last = il + 1 == hp->n_layer;
            lm_fwd_residual_priv(&xcur, &xoth, r0, c->o, &L->post_ffw_norm,
                                     last ? NULL : &m->layers[il + 1].attn_norm, hp->rms_eps, Nr, E,
                                     xn_own, ith);
            xin = xn_own;
            if (last) SYNC(LM_OP_FFN_RESIDUAL, il);
            else MARK(LM_OP_ATTN_NORM, il + 1);
            continue;
        }
        lm_op_rmsnorm(c->o, c->o, &L->post_ffw_norm, Nr, E, hp->rms_eps, ith, nth);
        MARK(LM_OP_POST_FFW_NORM, il);
        lm_op_add(xcur + r0 * E, c->o, Nr, E, ith, nth);
        if (il + 1 < hp->n_layer) {
            MARK(LM_OP_FFN_RESIDUAL, il);
            lm_op_rmsnorm(c->xn, c->x, &m->layers[il + 1].attn_norm, N, E, hp->rms_eps, ith, nth);
            SYNC(LM_OP_ATTN_NORM, il + 1);
        } else {
            SYNC(LM_OP_FFN_RESIDUAL, il);
        }
    }
    if (c->n_out > 0) {
        lm_op_output_norm(c, ith, nth);
        SYNC(LM_OP_OUTPUT_NORM, -1);
        const struct lm_weight *const head[1] = {&m->output};
        lm_op_lm_head(c, ith, nth);
        SYNC_MM(LM_OP_LM_HEAD, -1, head, 1);
    }
#undef SYNC
#undef SYNC_MM
#undef MARK
}

const struct lm_arch lm_arch_gemma3 = {
    .name = "gemma3",
    .load = gemma3_load,
    .forward = gemma3_forward,
};
