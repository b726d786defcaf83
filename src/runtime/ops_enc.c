// Ops of the encoder families (bert, model/bert.c) in the one forward pass: the input
// LayerNorm over token + type + learned position embeddings, the post-norm residual steps
// and the ungated FFN (GELU(up x + b) -> down + b). Each splits rows over the pool threads
// and calls the kernel table (layernorm, gelu) for the arithmetic.
#include "runtime/forward.h"

static inline void split(int64_t n, int ith, int nth, int64_t *s, int64_t *e) {
    int64_t per = (n + nth - 1) / nth;
    *s = per * ith;
    if (*s > n) *s = n;
    *e = *s + per;
    if (*e > n) *e = n;
}

static const float *f32_or_null(const struct lm_weight *w) { return (const float *)w->data; }

// x rows = LN(tok_embd[t] + type_embd[0] + pos_embd[pos]) (llama.cpp's order: (tok + type)
// first, then the position row added), with token_embd_norm and its bias. The loader checked
// every position the context allows against pos_embd's rows.
void lm_op_embed_enc(struct lm_context *c, int ith, int nth) {
    const struct lm_model *m = c->m;
    const struct lm_weight *T = &m->tok_embd, *Ty = &m->type_embd, *P = &m->pos_embd;
    const int64_t d = T->n_in;
    float *tmp = c->o; // a scratch row per token (c->o is free before the first layer)
    int64_t s, e;
    split(c->n_tokens, ith, nth, &s, &e);
    for (int64_t i = s; i < e; i++) {
        float *row = c->x + i * d, *r2 = tmp + i * d;
        c->kern->dequant[T->type]((const char *)T->data + (size_t)c->batch[i].token * T->row_bytes, row, d);
        if (Ty->data) { // "sentence A": type row 0
            c->kern->dequant[Ty->type](Ty->data, r2, d);
            for (int64_t j = 0; j < d; j++) row[j] += r2[j];
        }
        if (P->data) {
            c->kern->dequant[P->type]((const char *)P->data + (size_t)c->batch[i].pos * P->row_bytes, r2, d);
            for (int64_t j = 0; j < d; j++) row[j] += r2[j];
        }
        c->kern->layernorm(row, row, f32_or_null(&m->tok_norm), f32_or_null(&m->tok_norm_b), d,
                           m->hp.norm_eps);
    }
}

// x rows = LN(x + o) with w and b (post-norm), in place; o is overwritten by nothing.
void lm_op_residual_layernorm(struct lm_context *c, float *x, const float *o,
                              const struct lm_weight *w, const struct lm_weight *b, int64_t n_rows,
                              int ith, int nth) {
    const int64_t d = c->m->hp.n_embd;
    int64_t s, e;
    split(n_rows, ith, nth, &s, &e);
    for (int64_t i = s; i < e; i++) {
        float *xr = x + i * d;
        const float *orow = o + i * d;
        for (int64_t j = 0; j < d; j++) xr[j] = orow[j] + xr[j];
        c->kern->layernorm(xr, xr, f32_or_null(w), f32_or_null(b), d, c->m->hp.norm_eps);
    }
}

// y rows (n_rows, n_embd) = down(GELU(up x + up_b)) + down_b (llama.cpp's LLM_FFN_GELU,
// LLM_FFN_SEQ), or with a gate (nomic-bert) down(SiLU(gate x) * up x); hidden rows in c->gate.
// Ends at a barrier.
void lm_op_ffn_enc(struct lm_context *c, float *y, const float *x, const struct lm_layer *L,
                   int64_t n_rows, int il, int ith, int nth, uint64_t *t) {
    const int64_t F = L->up.n_out;
    const struct lm_weight *const up[1] = {&L->up}, *const down[1] = {&L->down};
    if (L->gate.data) { // nomic-bert: SiLU(gate x) * (up x), llama.cpp's LLM_FFN_SILU, LLM_FFN_PAR
        lm_op_gate_up_act(c, c->gate, c->up, x, &L->gate, &L->up, n_rows, LM_FFN_ACT_SILU, il, ith,
                          nth, t);
        *t = lm_fwd_sync(c, ith, LM_OP_ACTIVATION, il, *t);
        lm_op_matmul(c, y, c->gate, &L->down, n_rows, ith, nth);
        *t = lm_fwd_sync_mm(c, ith, LM_OP_DOWN, il, *t, down, 1);
        return;
    }
    lm_op_matmul(c, c->gate, x, &L->up, n_rows, ith, nth);
    *t = lm_fwd_sync_mm(c, ith, LM_OP_GATE_UP, il, *t, up, 1);
    const float *table = lm_op_gelu_table();
    const float *ub = f32_or_null(&L->up_b);
    int64_t s, e;
    split(n_rows, ith, nth, &s, &e);
    for (int64_t i = s; i < e; i++) {
        float *g = c->gate + i * F;
        if (ub)
            for (int64_t j = 0; j < F; j++) g[j] += ub[j];
        c->kern->gelu(g, F, table);
    }
    *t = lm_fwd_sync(c, ith, LM_OP_ACTIVATION, il, *t);
    lm_op_matmul(c, y, c->gate, &L->down, n_rows, ith, nth);
    *t = lm_fwd_sync_mm(c, ith, LM_OP_DOWN, il, *t, down, 1);
    if (L->down_b.data) { // added before the residual, as ggml's graph: (down + b) + x
        lm_op_add_bias(y, &L->down_b, n_rows, ith, nth);
        *t = lm_fwd_sync(c, ith, LM_OP_DOWN, il, *t);
    }
}
