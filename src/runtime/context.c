// Context: KV cache, scratch buffers sized once for n_batch entries, thread pool,
// and lm_decode(), the single entry point of the forward pass.
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

// ================================================================ KV cache

static void kv_free(struct lm_kv_cache *kv) {
    if (kv->k)
        for (int i = 0; i < kv->n_seq * kv->n_layer; i++) free(kv->k[i]);
    if (kv->v)
        for (int i = 0; i < kv->n_seq * kv->n_layer; i++) free(kv->v[i]);
    free(kv->k);
    free(kv->v);
    free(kv->layer_slots);
    free(kv->seq_len);
    memset(kv, 0, sizeof *kv);
}

static enum lm_status kv_init(struct lm_kv_cache *kv, const struct lm_model *m, int32_t n_ctx,
                              int32_t n_seq, int32_t n_batch) {
    const struct lm_hparams *hp = &m->hp;
    kv->n_seq = n_seq;
    kv->n_layer = hp->n_layer;
    kv->kv_dim_k = hp->n_head_kv * hp->head_dim_k;
    kv->kv_dim_v = hp->n_head_kv * hp->head_dim_v;
    kv->layer_slots = calloc((size_t)hp->n_layer, sizeof *kv->layer_slots);
    kv->seq_len = calloc((size_t)n_seq, sizeof *kv->seq_len);
    kv->k = calloc((size_t)n_seq * hp->n_layer, sizeof *kv->k);
    kv->v = calloc((size_t)n_seq * hp->n_layer, sizeof *kv->v);
    if (!kv->layer_slots || !kv->seq_len || !kv->k || !kv->v) goto nomem;
    for (int l = 0; l < hp->n_layer; l++) {
        int32_t slots = n_ctx;
        if (m->layers[l].swa && hp->n_swa > 0 && hp->n_swa + n_batch < n_ctx)
            slots = hp->n_swa + n_batch;
        kv->layer_slots[l] = slots;
    }
    for (int s = 0; s < n_seq; s++)
        for (int l = 0; l < hp->n_layer; l++) {
            const size_t nk = (size_t)kv->layer_slots[l] * kv->kv_dim_k;
            const size_t nv = (size_t)kv->layer_slots[l] * kv->kv_dim_v;
            // cache-line aligned: attention reads rows in 32/64-byte pieces, and loads that
            // straddle two lines made it ~20% slower (malloc gives 16-byte alignment)
            kv->k[s * hp->n_layer + l] = aligned_alloc(64, (nk * sizeof(lm_f16) + 63) / 64 * 64);
            kv->v[s * hp->n_layer + l] = aligned_alloc(64, (nv * sizeof(lm_f16) + 63) / 64 * 64);
            if (!kv->k[s * hp->n_layer + l] || !kv->v[s * hp->n_layer + l]) goto nomem;
            kv->bytes += (nk + nv) * sizeof(lm_f16);
        }
    return LM_OK;
nomem:
    kv_free(kv);
    return lm_error_set(LM_ERR_NOMEM, "context: cannot allocate the KV cache (n_ctx %d, n_seq %d)",
                        n_ctx, n_seq);
}

void lm_kv_cache_seq_rm(struct lm_context *c, int32_t seq, int32_t p0, int32_t p1) {
    if (seq < 0 || seq >= c->n_seq) return;
    int32_t *len = &c->kv.seq_len[seq];
    if (p0 < 0) p0 = 0;
    // positions are contiguous from 0: removing a suffix truncates; removing a middle
    // range is not supported by this cache layout and truncates at p0 as well.
    if (p1 < 0 || p1 >= *len) {
        if (p0 < *len) *len = p0;
    } else if (p0 < p1) {
        *len = p0;
    }
}

int32_t lm_kv_cache_seq_len(const struct lm_context *c, int32_t seq) {
    if (seq < 0 || seq >= c->n_seq) return 0;
    return c->kv.seq_len[seq];
}

// ================================================================ context

// widens p to fit every matmul weight of m
static void matmul_ws_fit_model(struct lm_matmul_ws_params *p, const struct lm_model *m) {
    lm_matmul_ws_fit(p, &m->output);
    for (int l = 0; l < m->hp.n_layer; l++) {
        const struct lm_layer *L = &m->layers[l];
        const struct lm_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) lm_matmul_ws_fit(p, ws[i]);
    }
}

static void *xalloc(struct lm_context *c, size_t bytes, bool *ok) {
    void *p = NULL;
    // 64-byte alignment for SIMD loads
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) {
        *ok = false;
        return NULL;
    }
    // not cleared: every op writes before it reads, and untouched pages of the large
    // logits buffer (n_batch x n_vocab floats) then never become resident
    c->scratch_bytes += bytes;
    return p;
}

void lm_context_free(struct lm_context *c) {
    if (!c) return;
    if (c->pool) lm_pool_free(c->pool);
    kv_free(&c->kv);
    free(c->out_rows);
    free(c->x_alt); free(c->xn_priv);
    free(c->x); free(c->xn); free(c->q); free(c->k); free(c->v); free(c->att); free(c->o);
    free(c->gate); free(c->up); free(c->scores); free(c->attn_acc); free(c->qtmp); free(c->logits);
    lm_matmul_ws_free(&c->mm);
    for (int i = 0; i < c->n_rope_slots; i++) free(c->rope_cs[i]);
    free(c->rope_slot);
    free(c);
}

enum lm_status lm_context_init(struct lm_context **out, struct lm_model *m,
                               const struct lm_context_params *params) {
    *out = NULL;
    lm_ops_init();
    struct lm_context_params p = {0};
    if (params) p = *params;
    const struct lm_hparams *hp = &m->hp;
    if (p.n_ctx <= 0) p.n_ctx = hp->n_ctx_train;
    if (p.n_ctx > hp->n_ctx_train)
        return lm_error_set(LM_ERR_ARG, "context: n_ctx %d exceeds the model's context length %d",
                            p.n_ctx, hp->n_ctx_train);
    if (p.n_seq_max <= 0) p.n_seq_max = 1;
    if (p.n_seq_max > 256) return lm_error_set(LM_ERR_ARG, "context: n_seq_max %d > 256", p.n_seq_max);
    if (p.n_batch <= 0) p.n_batch = 512;
    if (p.n_batch > 8192) return lm_error_set(LM_ERR_ARG, "context: n_batch %d > 8192", p.n_batch);
    if (p.n_threads <= 0) p.n_threads = lm_cpu_physical_cores();
    if (p.n_threads > 256) return lm_error_set(LM_ERR_ARG, "context: %d threads > 256", p.n_threads);
    if (hp->head_dim_k % 16 != 0 || hp->head_dim_v % 16 != 0)
        return lm_error_set(LM_ERR_UNSUPPORTED, "context: head size %d/%d is not a multiple of 16",
                            hp->head_dim_k, hp->head_dim_v);

    struct lm_context *c = calloc(1, sizeof *c);
    if (!c) return lm_error_set(LM_ERR_NOMEM, "context: out of memory");
    c->m = m;
    c->kern = lm_kernels_best();
    c->n_ctx = p.n_ctx;
    c->n_seq = p.n_seq_max;
    c->n_batch = p.n_batch;
    c->n_threads = p.n_threads;
    enum lm_status st = kv_init(&c->kv, m, p.n_ctx, p.n_seq_max, p.n_batch);
    if (st != LM_OK) { free(c); return st; }

    const size_t B = (size_t)p.n_batch, E = (size_t)hp->n_embd;
    const size_t qd = (size_t)hp->n_head * hp->head_dim_k, kd = (size_t)c->kv.kv_dim_k,
                 vd = (size_t)c->kv.kv_dim_v, ad = (size_t)hp->n_head * hp->head_dim_v;
    size_t widest = E;
    if ((size_t)hp->n_ff > widest) widest = (size_t)hp->n_ff;
    if (ad > widest) widest = ad;
    bool ok = true;
    c->out_rows = xalloc(c, B * sizeof(int32_t), &ok);
    c->x = xalloc(c, B * E * sizeof(float), &ok);
    c->xn = xalloc(c, B * E * sizeof(float), &ok);
    c->x_alt = xalloc(c, (size_t)LM_PRIVATE_QUANT_ROWS * E * sizeof(float), &ok);
    c->xn_priv = xalloc(c, (size_t)p.n_threads * LM_PRIVATE_QUANT_ROWS * E * sizeof(float), &ok);
    c->q = xalloc(c, B * qd * sizeof(float), &ok);
    c->k = xalloc(c, B * kd * sizeof(float), &ok);
    c->v = xalloc(c, B * vd * sizeof(float), &ok);
    c->att = xalloc(c, B * ad * sizeof(float), &ok);
    c->o = xalloc(c, B * E * sizeof(float), &ok);
    c->gate = xalloc(c, B * (size_t)hp->n_ff * sizeof(float), &ok);
    c->up = xalloc(c, B * (size_t)hp->n_ff * sizeof(float), &ok);
    const size_t ah = (size_t)p.n_threads * LM_ATTN_MAX_HEADS;
    c->scores = xalloc(c, ah * ((size_t)p.n_ctx + 64) * sizeof(float), &ok);
    c->attn_acc = xalloc(c, ah * 512 * sizeof(float), &ok);
    c->qtmp = xalloc(c, ah * (size_t)hp->head_dim_k * sizeof(float), &ok);
    c->logits = xalloc(c, B * (size_t)hp->n_vocab * sizeof(float), &ok);
    struct lm_matmul_ws_params mp = {.n_threads = p.n_threads, .n_rows = p.n_batch,
                                     .n_in = (int64_t)widest};
    matmul_ws_fit_model(&mp, m);
    if (ok && lm_matmul_ws_init(&c->mm, &mp) == LM_OK) c->scratch_bytes += c->mm.bytes;
    else ok = false;
    // distinct RoPE (base, scale) pairs of the layers -> cached cos/sin slots
    c->rope_slot = calloc((size_t)hp->n_layer, 1);
    if (!c->rope_slot) ok = false;
    for (int l = 0; ok && l < hp->n_layer; l++) {
        const float b = m->layers[l].rope_base, sc = m->layers[l].rope_scale;
        int sl = 0;
        while (sl < c->n_rope_slots && !(c->rope_base[sl] == b && c->rope_scale[sl] == sc)) sl++;
        if (sl == c->n_rope_slots) {
            if (sl == 4) { ok = false; break; }
            c->rope_base[sl] = b;
            c->rope_scale[sl] = sc;
            c->rope_cs[sl] = xalloc(c, B * (size_t)hp->n_rot * sizeof(float), &ok);
            c->n_rope_slots++;
        }
        c->rope_slot[l] = (int8_t)sl;
    }
    if (!ok) {
        lm_context_free(c);
        return lm_error_set(LM_ERR_NOMEM, "context: cannot allocate scratch buffers (n_batch %d)",
                            p.n_batch);
    }
    c->pool = lm_pool_create(p.n_threads);
    if (!c->pool) {
        lm_context_free(c);
        return LM_ERR_NOMEM;
    }
    *out = c;
    return LM_OK;
}

// ================================================================ decode

static void forward_worker(void *arg, int ith, int nth) {
    struct lm_context *c = arg;
    c->m->arch->forward(c, ith, nth);
}

enum lm_status lm_decode(struct lm_context *c, const struct lm_batch_entry *e, int32_t n) {
    if (n <= 0) return lm_error_set(LM_ERR_ARG, "decode: empty batch");
    if (n > c->n_batch)
        return lm_error_set(LM_ERR_ARG, "decode: batch of %d entries exceeds n_batch %d", n,
                            c->n_batch);
    const int32_t n_vocab = c->m->hp.n_vocab;
    // validate: tokens in range, sequences known, positions contiguous per sequence
    int32_t next[256];
    for (int s = 0; s < c->n_seq; s++) next[s] = c->kv.seq_len[s];
    int32_t n_out = 0;
    for (int32_t i = 0; i < n; i++) {
        if (e[i].token < 0 || e[i].token >= n_vocab)
            return lm_error_set(LM_ERR_ARG, "decode: entry %d: token %d out of range [0, %d)", i,
                                e[i].token, n_vocab);
        if (e[i].seq < 0 || e[i].seq >= c->n_seq)
            return lm_error_set(LM_ERR_ARG, "decode: entry %d: sequence %d out of range [0, %d)",
                                i, e[i].seq, c->n_seq);
        if (e[i].pos != next[e[i].seq])
            return lm_error_set(LM_ERR_ARG,
                                "decode: entry %d: sequence %d expects position %d, got %d", i,
                                e[i].seq, next[e[i].seq], e[i].pos);
        if (e[i].pos >= c->n_ctx)
            return lm_error_set(LM_ERR_STATE, "decode: sequence %d is full (n_ctx %d)", e[i].seq,
                                c->n_ctx);
        next[e[i].seq]++;
        if (e[i].want_logits) c->out_rows[n_out++] = i;
    }
    c->batch = e;
    c->n_tokens = n;
    c->n_out = n_out;
    lm_pool_run(c->pool, forward_worker, c);
    for (int s = 0; s < c->n_seq; s++) c->kv.seq_len[s] = next[s];
    return LM_OK;
}

const float *lm_get_logits(const struct lm_context *c, int32_t i) {
    if (i < 0 || i >= c->n_out) return NULL;
    return c->logits + (size_t)i * c->m->hp.n_vocab;
}

int32_t lm_context_n_threads(const struct lm_context *c) { return c->n_threads; }
int32_t lm_context_n_ctx(const struct lm_context *c) { return c->n_ctx; }
