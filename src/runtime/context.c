// Context: KV cache, scratch buffers sized once for n_batch entries, thread pool,
// and lm_decode(), the single entry point of the forward pass.
#include <stdlib.h>
#include <string.h>

#include "runtime/forward.h"

// ================================================================ KV cache API

// A context names the pool's sequences [seq0, seq0 + n_seq) (a plain context: all of them).
static enum lm_status ctx_seq(const struct lm_context *c, const char *fn, int32_t seq) {
    if (seq < c->seq0 || seq >= c->seq0 + c->n_seq)
        return lm_error_set(LM_ERR_ARG, "%s: sequence %d out of range [%d, %d)", fn, seq, c->seq0,
                            c->seq0 + c->n_seq);
    return LM_OK;
}

int32_t lm_kv_cache_seq_pos(const struct lm_context *c, int32_t seq) {
    if (seq < c->seq0 || seq >= c->seq0 + c->n_seq) return -1;
    return c->kv->seqs[seq].n_pos;
}

int32_t lm_kv_cache_seq_len(const struct lm_context *c, int32_t seq) {
    return lm_kv_cache_seq_pos(c, seq);
}

enum lm_status lm_kv_cache_seq_rm(struct lm_context *c, int32_t seq, int32_t p0, int32_t p1) {
    const enum lm_status st = ctx_seq(c, "kv seq_rm", seq);
    return st != LM_OK ? st : lm_kv_seq_rm(c->kv, seq, p0, p1);
}

enum lm_status lm_kv_cache_seq_cp(struct lm_context *c, int32_t src, int32_t dst, int32_t n_pos) {
    enum lm_status st;
    if ((st = ctx_seq(c, "kv seq_cp", src)) != LM_OK || (st = ctx_seq(c, "kv seq_cp", dst)) != LM_OK)
        return st;
    return lm_kv_seq_cp(c->kv, src, dst, n_pos);
}

enum lm_status lm_kv_cache_seq_keep(struct lm_context *c, int32_t seq) {
    const enum lm_status st = ctx_seq(c, "kv seq_keep", seq);
    return st != LM_OK ? st : lm_kv_seq_keep(c->kv, seq);
}

enum lm_status lm_kv_cache_prefix_attach(struct lm_context *c, int32_t seq,
                                         const int32_t *tokens, int32_t n,
                                         int32_t *n_attached) {
    *n_attached = 0;
    const enum lm_status st = ctx_seq(c, "kv prefix", seq);
    return st != LM_OK ? st : lm_kv_prefix_attach(c->kv, seq, tokens, n, n_attached);
}

void lm_kv_cache_stats(const struct lm_context *c, struct lm_kv_cache_stats *out) {
    const struct lm_kv_cache *kv = c->kv;
    memset(out, 0, sizeof *out);
    out->block_size = LM_KV_BLOCK;
    out->n_blocks = kv->n_blocks;
    out->n_free = kv->n_free;
    out->n_cached_free = kv->n_evictable;
    out->n_used = kv->n_blocks - kv->n_free - kv->n_evictable;
    out->block_bytes = kv->block_bytes;
    out->bytes_used = (uint64_t)out->n_used * kv->block_bytes;
    out->prefix_queries = kv->prefix_queries;
    out->prefix_query_tokens = kv->prefix_query_tokens;
    out->prefix_hit_tokens = kv->prefix_hit_tokens;
    out->evictions = kv->evictions;
    out->cow_copies = kv->cow_copies;
}

// ================================================================ context

// widens p to fit every matmul weight of m
static void matmul_ws_fit_model(struct lm_matmul_ws_params *p, const struct lm_model *m) {
    lm_matmul_ws_fit(p, &m->output);
    for (int l = 0; l < m->hp.n_layer; l++) {
        const struct lm_layer *L = &m->layers[l];
        const struct lm_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down, &L->wq_a};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) lm_matmul_ws_fit(p, ws[i]);
        if (L->gate_exps) { // every expert's view has the shape of the first
            lm_matmul_ws_fit(p, &L->router);
            lm_matmul_ws_fit(p, &L->gate_exps[0]);
            lm_matmul_ws_fit(p, &L->down_exps[0]);
        }
    }
}

// V values per KV row: none for MLA, whose V is the first mla_kv_rank values of the K row
static int32_t kv_dim_v_of(const struct lm_hparams *hp) {
    return hp->mla_kv_rank > 0 ? 0 : hp->n_head_kv * hp->head_dim_v;
}

// a model's rows in the KV pool (kv_cache.h)
static struct lm_kv_layout kv_layout_of(const struct lm_hparams *hp, const struct lm_context_params *p) {
    return (struct lm_kv_layout){.n_layer = hp->n_layer, .kv_dim_k = hp->n_head_kv * hp->head_dim_k,
                                 .kv_dim_v = kv_dim_v_of(hp), .head_k = hp->head_dim_k,
                                 .head_v = kv_dim_v_of(hp) ? hp->head_dim_v : 0,
                                 .type_k = p->kv_type_k, .type_v = p->kv_type_v};
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
    if (c->pool && !c->borrowed) lm_pool_free(c->pool);
    lm_kv_free(&c->kv_own);
    free(c->kv_koff);
    free(c->kv_voff);
    free(c->seq_next);
    free(c->seq_embd);
    free(c->out_rows);
    free(c->x_alt); free(c->xn_priv);
    free(c->x); free(c->xn); free(c->q); free(c->k); free(c->v); free(c->att); free(c->o);
    free(c->gate); free(c->up); free(c->attn_scratch); free(c->attn_part); free(c->attn_part_o); free(c->logits);
    free(c->moe_logits); free(c->moe_xg); free(c->moe_g); free(c->moe_u); free(c->moe_y);
    free(c->moe_route); free(c->moe_tokens);
    free(c->mla_q); free(c->mla_qa); free(c->mla_o); free(c->mla_tmp);
    free(c->topk_part); free(c->topk_out); free(c->topk_buf);
    lm_matmul_ws_free(&c->mm);
    for (int i = 0; i < c->n_rope_slots; i++) free(c->rope_cs[i]);
    free(c->rope_slot);
    free(c);
}

// The parameters p with the defaults filled in (from m, or from the target context t whose
// sequences, context and threads a draft context takes), checked against m and draft.
static enum lm_status context_params_resolve(struct lm_context_params *pp, const struct lm_model *m,
                                             const struct lm_model *draft, const struct lm_context *t) {
    struct lm_context_params p = *pp;
    const struct lm_hparams *hp = &m->hp;
    if (t) { // the target's sequences, context and threads
        p.n_ctx = t->n_ctx;
        p.n_seq_max = t->n_seq;
        p.n_threads = t->n_threads;
        if (t->borrowed || t->kv->n_layouts != 2)
            return lm_error_set(LM_ERR_ARG, "context: %s: the target context's KV pool has no draft "
                                "layout (lm_context_init_pair)", m->path);
        const struct lm_kv_layout *L = &t->kv->lay[1];
        if (L->n_layer != hp->n_layer || L->kv_dim_k != hp->n_head_kv * hp->head_dim_k ||
            L->kv_dim_v != kv_dim_v_of(hp) || L->head_k != hp->head_dim_k)
            return lm_error_set(LM_ERR_ARG, "context: %s: the pool's draft layout (%d layers, kv dims "
                                "%d/%d) is another model's", m->path, L->n_layer, L->kv_dim_k,
                                L->kv_dim_v);
    }
    if (p.n_ctx <= 0) p.n_ctx = hp->n_ctx_train;
    if (p.n_ctx > hp->n_ctx_train)
        return lm_error_set(LM_ERR_ARG, "context: n_ctx %d exceeds the model's context length %d%s%s",
                            p.n_ctx, hp->n_ctx_train, t ? " (draft model " : "", t ? m->path : "");
    if (draft && p.n_ctx > draft->hp.n_ctx_train)
        return lm_error_set(LM_ERR_ARG, "context: n_ctx %d exceeds the draft model's context length "
                            "%d (%s)", p.n_ctx, draft->hp.n_ctx_train, draft->path);
    if (p.n_seq_max <= 0) p.n_seq_max = 1;
    if (p.n_seq_max > 4096) return lm_error_set(LM_ERR_ARG, "context: n_seq_max %d > 4096", p.n_seq_max);
    if (p.kv_tokens < 0) return lm_error_set(LM_ERR_ARG, "context: kv_tokens %d < 0", p.kv_tokens);
    if (p.kv_tokens == 0) p.kv_tokens = p.n_ctx;
    if (p.n_batch <= 0) p.n_batch = 512;
    if (p.n_logits_max <= 0 || p.n_logits_max > p.n_batch) p.n_logits_max = p.n_batch;
    if (p.n_batch > 8192) return lm_error_set(LM_ERR_ARG, "context: n_batch %d > 8192", p.n_batch);
    if (p.n_threads <= 0) p.n_threads = lm_cpu_physical_cores();
    if (p.n_threads > 256) return lm_error_set(LM_ERR_ARG, "context: %d threads > 256", p.n_threads);
    if (hp->head_dim_k % 16 != 0 || hp->head_dim_v % 16 != 0)
        return lm_error_set(LM_ERR_UNSUPPORTED, "context: head size %d/%d is not a multiple of 16",
                            hp->head_dim_k, hp->head_dim_v);
    if (!t) { // a draft context takes the pool's types
        if (!lm_kv_type_name(p.kv_type_k) || !lm_kv_type_name(p.kv_type_v))
            return lm_error_set(LM_ERR_ARG, "context: KV cache type %d is not a type (f16 = 0, q8_0 = 1)",
                                (int)(lm_kv_type_name(p.kv_type_k) ? p.kv_type_v : p.kv_type_k));
        const struct lm_model *const models[2] = {m, draft}; // draft may be m itself (self-drafting)
        for (int i = 0; i < 2; i++) {
            const struct lm_model *mm = models[i];
            if (mm && ((p.kv_type_k == LM_KV_Q8_0 && mm->hp.head_dim_k % 32 != 0) ||
                (p.kv_type_v == LM_KV_Q8_0 && mm->hp.head_dim_v % 32 != 0)))
                return lm_error_set(LM_ERR_UNSUPPORTED, "context: %s: a q8_0 KV cache needs head sizes "
                                    "that are multiples of 32 (K %d, V %d)", mm->path,
                                    mm->hp.head_dim_k, mm->hp.head_dim_v);
        }
    }
    if (draft && (draft->hp.head_dim_k % 16 != 0 || draft->hp.head_dim_v % 16 != 0))
        return lm_error_set(LM_ERR_UNSUPPORTED, "context: draft model %s: head size %d/%d is not a "
                            "multiple of 16", draft->path, draft->hp.head_dim_k, draft->hp.head_dim_v);
    *pp = p;
    return LM_OK;
}

// The Hadamard rotation of q8_0 K / V rows (context.h kv_rot_k / kv_rot_v), as llama.cpp's
// (LLAMA_ATTN_ROT_DISABLE there, LUMEN_KV_NO_ROT here)
static void kv_rot_init(struct lm_context *c) {
    const struct lm_hparams *hp = &c->m->hp;
    const struct lm_kv_layout *lay = &c->kv->lay[c->kv_layout];
    const char *no = getenv("LUMEN_KV_NO_ROT");
    const bool rot = !(no && *no && strcmp(no, "0")) && lay->kv_dim_v > 0;
    if (rot && lay->type_k == LM_KV_Q8_0 && hp->head_dim_k % 64 == 0)
        for (c->kv_rot_k = 64; hp->head_dim_k % (2 * c->kv_rot_k) == 0;) c->kv_rot_k *= 2;
    if (rot && lay->type_v == LM_KV_Q8_0 && hp->head_dim_v % 64 == 0) c->kv_rot_v = 64;
}

// A context for m: its own KV pool and thread pool (t NULL; draft: a second model whose
// layout the pool also holds), or t's (a draft context, t the target's).
static enum lm_status context_init(struct lm_context **out, struct lm_model *m,
                                   const struct lm_context_params *params,
                                   const struct lm_model *draft, struct lm_context *t) {
    *out = NULL;
    lm_ops_init();
    struct lm_context_params p = {0};
    if (params) p = *params;
    const struct lm_hparams *hp = &m->hp;
    const enum lm_status checked = context_params_resolve(&p, m, draft, t);
    if (checked != LM_OK) return checked;

    struct lm_context *c = calloc(1, sizeof *c);
    if (!c) return lm_error_set(LM_ERR_NOMEM, "context: out of memory");
    c->m = m;
    c->kern = lm_kernels_best();
    c->n_ctx = p.n_ctx;
    c->n_seq = p.n_seq_max;
    c->n_batch = p.n_batch;
    c->n_logits_max = p.n_logits_max;
    c->n_threads = p.n_threads;
    c->non_causal = m->arch->decoder.encoder && !hp->causal_attn; // encoders see the whole input
    if (t) {
        c->kv = t->kv;
        c->pool = t->pool;
        c->borrowed = true;
        c->seq0 = t->n_seq;
        c->kv_layout = 1;
        c->kern = t->kern;
    } else {
        c->kv = &c->kv_own;
        struct lm_kv_layout lays[2] = {kv_layout_of(hp, &p)};
        if (draft) lays[1] = kv_layout_of(&draft->hp, &p); // as many blocks again as the target's
        const int64_t pool_tokens = (int64_t)p.kv_tokens * (draft ? 2 : 1);
        if (pool_tokens > INT32_MAX) {
            free(c);
            return lm_error_set(LM_ERR_ARG, "context: kv_tokens %d too large", p.kv_tokens);
        }
        // an encoder's K/V at a position depend on the whole input: nothing to share by prefix
        const bool prefix = !p.no_prefix_cache && !m->arch->decoder.encoder;
        enum lm_status st = lm_kv_init_layouts(&c->kv_own, lays, draft ? 2 : 1, p.n_ctx, p.n_seq_max,
                                               (int32_t)pool_tokens, prefix);
        if (st != LM_OK) { free(c); return st; }
    }

    kv_rot_init(c);
    const size_t B = (size_t)p.n_batch, E = (size_t)hp->n_embd;
    const size_t qd = (size_t)hp->n_head * hp->head_dim_k, kd = (size_t)c->kv->lay[c->kv_layout].kv_dim_k,
                 vd = (size_t)c->kv->lay[c->kv_layout].kv_dim_v, ad = (size_t)hp->n_head * hp->head_dim_v;
    size_t widest = E;
    if ((size_t)hp->n_ff > widest) widest = (size_t)hp->n_ff;
    if (ad > widest) widest = ad;
    bool ok = true;
    c->out_rows = xalloc(c, B * sizeof(int32_t), &ok);
    c->kv_koff = xalloc(c, B * sizeof(size_t), &ok);
    c->kv_voff = xalloc(c, B * sizeof(size_t), &ok);
    c->seq_next = xalloc(c, (size_t)p.n_seq_max * sizeof(int32_t), &ok);
    c->seq_embd = calloc((size_t)p.n_seq_max, sizeof *c->seq_embd);
    if (!c->seq_embd) ok = false;
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
    if (hp->n_expert > 0) {
        const size_t BK = B * (size_t)hp->n_expert_used, FX = (size_t)hp->n_ff_exp;
        c->moe_logits = xalloc(c, B * (size_t)hp->n_expert * sizeof(float), &ok);
        c->moe_xg = xalloc(c, BK * E * sizeof(float), &ok);
        c->moe_g = xalloc(c, BK * FX * sizeof(float), &ok);
        c->moe_u = xalloc(c, BK * FX * sizeof(float), &ok);
        c->moe_y = xalloc(c, B * E * sizeof(float), &ok);
        c->moe_route_stride = lm_moe_route_bytes((int64_t)B, hp->n_expert_used, hp->n_expert);
        c->moe_route = xalloc(c, (size_t)p.n_threads * c->moe_route_stride, &ok);
        c->moe_tokens = calloc((size_t)hp->n_layer * (size_t)hp->n_expert, sizeof(uint64_t));
        if (!c->moe_tokens) ok = false;
    }
    if (hp->mla_kv_rank > 0) {
        const size_t H = (size_t)hp->n_head;
        c->mla_q = xalloc(c, B * H * (size_t)hp->mla_hd_k * sizeof(float), &ok);
        if (hp->mla_q_rank > 0) c->mla_qa = xalloc(c, B * (size_t)hp->mla_q_rank * sizeof(float), &ok);
        c->mla_o = xalloc(c, B * H * (size_t)hp->mla_hd_v * sizeof(float), &ok);
        c->mla_tmp_stride = lm_mla_tmp_floats(hp);
        c->mla_tmp = xalloc(c, (size_t)p.n_threads * c->mla_tmp_stride * sizeof(float), &ok);
    }
    // whole 64-byte lines per thread: each thread's scratch starts aligned
    c->attn_scratch_stride = (lm_attn_scratch_floats(hp->head_dim_k, hp->head_dim_v, p.n_ctx) + 15) & ~(size_t)15;
    c->attn_tile = p.n_batch < LM_ATTN_TILE ? (int)p.n_batch : LM_ATTN_TILE; // prefill tiles (ops.c)
    if (c->attn_tile > 1) {
        const size_t tf = lm_attn_tile_scratch_floats(hp->head_dim_k, hp->head_dim_v, p.n_ctx, c->attn_tile);
        if ((tf + 15) / 16 * 16 > c->attn_scratch_stride) c->attn_scratch_stride = (tf + 15) & ~(size_t)15;
    }
    c->attn_scratch = xalloc(c, (size_t)p.n_threads * c->attn_scratch_stride * sizeof(float), &ok);
    if (p.n_ctx > LM_ATTN_CHUNK) { // long windows' chunks, chunk-major (runtime/ops.c attn_split)
        const int64_t nhb = (hp->n_head / hp->n_head_kv + LM_ATTN_MAX_HEADS - 1) / LM_ATTN_MAX_HEADS;
        // units (token, KV head) of a split batch: fewer than 4 per thread, or one token's
        const int64_t units = 4 * (int64_t)p.n_threads > hp->n_head_kv ? 4 * (int64_t)p.n_threads : hp->n_head_kv;
        c->attn_part_n = units * nhb * (p.n_ctx / LM_ATTN_CHUNK + 1);
        c->attn_part_ostride = (size_t)LM_ATTN_MAX_HEADS * (size_t)hp->head_dim_v;
        c->attn_part = xalloc(c, (size_t)c->attn_part_n * sizeof(struct lm_attn_part), &ok);
        c->attn_part_o = xalloc(c, (size_t)c->attn_part_n * c->attn_part_ostride * sizeof(float), &ok);
    }
    c->logits = xalloc(c, (size_t)c->n_logits_max * (size_t)hp->n_vocab * sizeof(float), &ok);
    struct lm_matmul_ws_params mp = {.n_threads = p.n_threads, .n_rows = p.n_batch,
                                     .n_in = (int64_t)widest};
    matmul_ws_fit_model(&mp, m);
    if (ok && lm_matmul_ws_init(&c->mm, &mp) == LM_OK) c->scratch_bytes += c->mm.bytes;
    else ok = false;
    c->rope_freqs = lm_model_rope_factors(m, p.n_ctx);
    c->rope_mscale = hp->rope_mscale > 0.0f ? hp->rope_mscale : 1.0f;
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
    if (!c->pool) c->pool = lm_pool_create(p.n_threads);
    if (!c->pool) {
        lm_context_free(c);
        return LM_ERR_NOMEM;
    }
    *out = c;
    return LM_OK;
}

enum lm_status lm_context_init(struct lm_context **out, struct lm_model *m,
                               const struct lm_context_params *params) {
    return context_init(out, m, params, NULL, NULL);
}

enum lm_status lm_context_init_pair(struct lm_context **out, struct lm_model *m,
                                    const struct lm_context_params *params,
                                    const struct lm_model *draft) {
    return context_init(out, m, params, draft, NULL);
}

enum lm_status lm_context_init_draft(struct lm_context **out, struct lm_context *t,
                                     struct lm_model *draft, const struct lm_context_params *params) {
    return context_init(out, draft, params, NULL, t);
}

// ================================================================ decode

static void forward_worker(void *arg, int ith, int nth) {
    struct lm_context *c = arg;
    lm_forward(c, ith, nth);
}

enum lm_status lm_decode(struct lm_context *c, const struct lm_batch_entry *e, int32_t n) {
    if (c->test_fail_decode > 0 && --c->test_fail_decode == 0)
        return lm_error_set(LM_ERR_STATE, "decode: a failure injected by a test");
    if (n <= 0) return lm_error_set(LM_ERR_ARG, "decode: empty batch");
    if (n > c->n_batch)
        return lm_error_set(LM_ERR_ARG, "decode: batch of %d entries exceeds n_batch %d", n,
                            c->n_batch);
    const int32_t n_vocab = c->m->hp.n_vocab;
    // validate: tokens in range, sequences known, positions consecutive per sequence
    for (int32_t i = 0; i < n; i++) {
        if (e[i].seq < c->seq0 || e[i].seq >= c->seq0 + c->n_seq)
            return lm_error_set(LM_ERR_ARG, "decode: entry %d: sequence %d out of range [%d, %d)",
                                i, e[i].seq, c->seq0, c->seq0 + c->n_seq);
        c->seq_next[e[i].seq - c->seq0] = c->kv->seqs[e[i].seq].n_pos;
    }
    int32_t n_out = 0, n_eout = 0;
    for (int32_t i = 0; i < n; i++) {
        if (e[i].token < 0 || e[i].token >= n_vocab)
            return lm_error_set(LM_ERR_ARG, "decode: entry %d: token %d out of range [0, %d)", i,
                                e[i].token, n_vocab);
        if (e[i].pos != c->seq_next[e[i].seq - c->seq0])
            return lm_error_set(LM_ERR_ARG,
                                "decode: entry %d: sequence %d expects position %d, got %d", i,
                                e[i].seq, c->seq_next[e[i].seq - c->seq0], e[i].pos);
        if (e[i].pos >= c->n_ctx)
            return lm_error_set(LM_ERR_STATE, "decode: sequence %d is full (n_ctx %d)", e[i].seq,
                                c->n_ctx);
        c->seq_next[e[i].seq - c->seq0]++;
        if (e[i].want_logits && c->seq_embd[e[i].seq - c->seq0]) {
            n_eout++;
        } else if (e[i].want_logits) {
            if (!c->m->output.data)
                return lm_error_set(LM_ERR_ARG, "decode: entry %d wants logits; %s (%s) has no LM head "
                                    "(an embedding model: put its sequence in embedding mode)", i,
                                    c->m->path, c->m->arch->name);
            if (n_out == c->n_logits_max)
                return lm_error_set(LM_ERR_ARG, "decode: more than %d entries want logits "
                                    "(n_logits_max)", c->n_logits_max);
            c->out_rows[n_out++] = i;
        }
    }
    enum lm_status st = lm_kv_prepare(c->kv, e, n, c->kv_koff, c->kv_voff);
    if (st != LM_OK) return st;
    for (int32_t i = 0, r = n_out; n_eout > 0 && i < n; i++) // embedding rows after logits rows
        if (e[i].want_logits && c->seq_embd[e[i].seq - c->seq0]) c->out_rows[r++] = i;
    c->batch = e;
    c->n_tokens = n;
    c->n_out = n_out;
    c->n_eout = n_eout;
    c->n_topk_rows = 0;
    lm_pool_run(c->pool, forward_worker, c);
    lm_kv_commit(c->kv, e, n);
    if (c->top_k > 0) { // the threads' selections of each row -> one, sorted
        const size_t cap = (size_t)c->topk_cap;
        struct lm_topk_cand *out_buf = c->topk_buf + (size_t)c->n_threads * c->n_logits_max * cap;
        for (int32_t r = 0; r < n_out; r++) {
            struct lm_topk *t = &c->topk_out[r];
            lm_topk_reset(t, out_buf + (size_t)r * cap, c->top_k);
            for (int ith = 0; ith < c->n_threads; ith++)
                lm_topk_merge(t, &c->topk_part[(size_t)ith * c->n_logits_max + r]);
            lm_topk_sort(t);
        }
        c->n_topk_rows = n_out;
    }
    return LM_OK;
}

const float *lm_get_logits(const struct lm_context *c, int32_t i) {
    if (i < 0 || i >= c->n_out) return NULL;
    return c->logits + (size_t)i * c->m->hp.n_vocab;
}

const float *lm_get_embeddings(const struct lm_context *c, int32_t i) {
    if (i < 0 || i >= c->n_eout) return NULL;
    return c->xn + (size_t)(c->n_out + i) * c->m->hp.n_embd; // the output norm's rows
}

void lm_context_set_causal(struct lm_context *c, bool causal) { c->non_causal = !causal; }

enum lm_status lm_context_seq_set_embd(struct lm_context *c, int32_t seq, bool on) {
    const enum lm_status st = ctx_seq(c, "seq_set_embd", seq);
    if (st == LM_OK) c->seq_embd[seq - c->seq0] = on;
    return st;
}

// ================================================================ fused top-k

enum lm_status lm_context_set_top_k(struct lm_context *c, int32_t k) {
    if (k < 0 || k > LM_TOP_K_MAX)
        return lm_error_set(LM_ERR_ARG, "context: top-k %d out of range [0, %d]", k, LM_TOP_K_MAX);
    c->n_topk_rows = 0;
    if (k > c->topk_cap) { // buffers for the largest k asked so far: a smaller k reuses them
        const size_t rows = (size_t)c->n_logits_max, nt = (size_t)c->n_threads;
        struct lm_topk *part = realloc(c->topk_part, nt * rows * sizeof *part);
        if (part) c->topk_part = part;
        struct lm_topk *out = realloc(c->topk_out, rows * sizeof *out);
        if (out) c->topk_out = out;
        struct lm_topk_cand *buf = realloc(c->topk_buf, (nt + 1) * rows * (size_t)k * sizeof *buf);
        if (buf) c->topk_buf = buf;
        if (!part || !out || !buf) {
            c->top_k = 0;
            return lm_error_set(LM_ERR_NOMEM, "context: cannot allocate top-%d selections for %d rows", k,
                                c->n_logits_max);
        }
        c->topk_cap = k;
    }
    c->top_k = k;
    return LM_OK;
}

int32_t lm_get_top_k(const struct lm_context *c, int32_t i, const struct lm_token_logit **out) {
    *out = NULL;
    if (i < 0 || i >= c->n_topk_rows) return 0;
    // same layout (static assert in sample/sampler.c)
    *out = (const struct lm_token_logit *)c->topk_out[i].c;
    return c->topk_out[i].n;
}

void lm_context_set_kernels(struct lm_context *c, const struct lm_kernels *k) { c->kern = k; }

int32_t lm_context_n_threads(const struct lm_context *c) { return c->n_threads; }
int32_t lm_context_n_ctx(const struct lm_context *c) { return c->n_ctx; }
int32_t lm_context_n_seq(const struct lm_context *c) { return c->n_seq; }
int32_t lm_context_n_batch(const struct lm_context *c) { return c->n_batch; }
uint64_t lm_context_scratch_bytes(const struct lm_context *c) { return c->scratch_bytes; }

void lm_context_thread_stats(const struct lm_context *c, int ith, struct lm_context_thread_stats *out) {
    struct lm_pool_stats ps = {0};
    if (ith >= 0 && ith < c->n_threads) lm_pool_stats_get(c->pool, ith, &ps);
    out->wait_ns = ps.wait_ns;
    out->n_barriers = ps.n_barriers;
}

void lm_context_thread_stats_reset(struct lm_context *c) { lm_pool_stats_reset(c->pool); }
