// Parallel ops of the forward pass (norms, matmul, rope, attention, activations,
// embedding, output head). Each is called on every pool thread, splits rows and calls the
// context's kernel table (kernels.h) for the arithmetic; no ISA code lives here.
#include <math.h>
#include <string.h>
#include <stdlib.h>

#include "runtime/forward.h"

// [start, end) of n items for thread ith of nth
static inline void split(int64_t n, int ith, int nth, int64_t *s, int64_t *e) {
    int64_t per = (n + nth - 1) / nth;
    *s = per * ith;
    if (*s > n) *s = n;
    *e = *s + per;
    if (*e > n) *e = n;
}

// Same for n output rows, in whole il groups (LM_MATMUL_ROW_ALIGN) when n is a multiple of one.
static inline void split_rows(int64_t n, int ith, int nth, int64_t *s, int64_t *e) {
    if (n % LM_MATMUL_ROW_ALIGN != 0) {
        split(n, ith, nth, s, e);
        return;
    }
    split(n / LM_MATMUL_ROW_ALIGN, ith, nth, s, e);
    *s *= LM_MATMUL_ROW_ALIGN;
    *e *= LM_MATMUL_ROW_ALIGN;
}

// ================================================================ norms

void lm_op_rmsnorm(struct lm_context *c, float *y, const float *x, const struct lm_weight *w,
                   int64_t n_rows, int64_t dim, float eps, int ith, int nth) {
    int64_t s, e;
    split(n_rows, ith, nth, &s, &e);
    const float *wf = (w && w->data) ? (const float *)w->data : NULL;
    for (int64_t i = s; i < e; i++) c->kern->rmsnorm(y + i * dim, x + i * dim, wf, dim, eps);
}

// ================================================================ matmul

// The path choice, activation plan and kernels live in kernels/matmul.h; these ops split
// rows across threads, place the barrier after a shared quantization, and keep thread 0's
// decision for the profiler.

// Plans Ws @ X on this thread and quantizes X: every row into this thread's own buffers
// (small batches), or this thread's share of the rows into shared ones, then a barrier.
static void matmul_begin(struct lm_context *c, struct lm_matmul_plan *p, const struct lm_weight *const *Ws,
                         int n_w, const float *X, int64_t n_rows, int ith, int nth) {
    lm_matmul_plan(p, c->kern, &c->mm, Ws, n_w, X, n_rows, ith);
    int64_t s = 0, e = n_rows;
    if (p->shared) split(n_rows, ith, nth, &s, &e);
    lm_matmul_quantize(p, s, e);
    if (p->shared) lm_pool_barrier(c->pool);
    if (ith == 0 && lm_prof_on()) c->mm_last = p->d;
}

// For each j: Ws[j] (n_out_j, n_in) @ X (n_rows, n_in) -> Ys[j] (n_rows, n_out_j).
// The rows of all weights are split across threads as one range (fused QKV: fewer
// barriers, better balance).
void lm_op_matmul_multi(struct lm_context *c, int n_w, float *const *Ys, const float *X,
                        const struct lm_weight *const *Ws, int64_t n_rows, int ith, int nth) {
    struct lm_matmul_plan p;
    matmul_begin(c, &p, Ws, n_w, X, n_rows, ith, nth);
    int64_t total = 0;
    bool aligned = true;
    for (int j = 0; j < n_w; j++) {
        total += Ws[j]->n_out;
        aligned = aligned && Ws[j]->n_out % LM_MATMUL_ROW_ALIGN == 0;
    }
    if (!aligned) { // each weight split on its own (il groups stay whole)
        for (int j = 0; j < n_w; j++) {
            int64_t a, b;
            split_rows(Ws[j]->n_out, ith, nth, &a, &b);
            if (a < b) lm_matmul_rows(&p, j, Ys[j], a, b);
        }
        return;
    }
    int64_t r0, r1;
    split_rows(total, ith, nth, &r0, &r1);
    int64_t base = 0;
    for (int j = 0; j < n_w; j++) {
        const int64_t n_out = Ws[j]->n_out;
        int64_t a = r0 - base, b = r1 - base;
        base += n_out;
        if (a < 0) a = 0;
        if (b > n_out) b = n_out;
        if (a < b) lm_matmul_rows(&p, j, Ys[j], a, b);
    }
}

void lm_op_matmul(struct lm_context *c, float *Y, const float *X, const struct lm_weight *W,
                  int64_t n_rows, int ith, int nth) {
    lm_op_matmul_multi(c, 1, &Y, X, &W, n_rows, ith, nth);
}

void lm_op_add_bias(float *Y, const struct lm_weight *b, int64_t n_rows, int ith, int nth) {
    int64_t s, e;
    split(n_rows, ith, nth, &s, &e);
    const float *bf = b->data;
    for (int64_t i = s; i < e; i++)
        for (int64_t j = 0; j < b->n_in; j++) Y[i * b->n_in + j] += bf[j];
}

void lm_op_add(float *x, const float *y, int64_t n_rows, int64_t dim, int ith, int nth) {
    int64_t s, e;
    split(n_rows, ith, nth, &s, &e);
    for (int64_t i = s * dim; i < e * dim; i++) x[i] += y[i];
}

// x += o rows, o first multiplied by the model's residual_scale (granite) when it has one:
// a rounded product, then the sum (ggml_scale, then ggml_add), in two loops so that GCC does
// not contract them into one fma.
void lm_op_residual(const struct lm_context *c, float *x, float *o, int64_t n_rows, int64_t dim,
                    int ith, int nth) {
    const float rs = c->m->hp.residual_scale;
    int64_t s, e;
    split(n_rows, ith, nth, &s, &e);
    if (rs != 0.0f)
        for (int64_t i = s * dim; i < e * dim; i++) o[i] *= rs;
    for (int64_t i = s * dim; i < e * dim; i++) x[i] += o[i];
}

void lm_op_residual_norm_priv(struct lm_context *c, float *x_out, const float *x, const float *o,
                              const struct lm_weight *post, const struct lm_weight *norm,
                              float eps, int64_t n_rows, int64_t dim, float *y, int ith) {
    const float *pw = post && post->data ? (const float *)post->data : NULL;
    const float *nw = norm && norm->data ? (const float *)norm->data : NULL;
    const float rs = c->m->hp.residual_scale; // as lm_op_residual
    for (int64_t i = 0; i < n_rows; i++) {
        float *yr = y + i * dim;
        const float *xr = x + i * dim, *or_ = o + i * dim;
        if (post) c->kern->rmsnorm(yr, or_, pw, dim, eps);
        else memcpy(yr, or_, (size_t)dim * sizeof(float));
        if (rs != 0.0f)
            for (int64_t d = 0; d < dim; d++) yr[d] *= rs;
        for (int64_t d = 0; d < dim; d++) yr[d] = xr[d] + yr[d];
        if (ith == 0) memcpy(x_out + i * dim, yr, (size_t)dim * sizeof(float));
        c->kern->rmsnorm(yr, yr, nw, dim, eps);
    }
}

// ================================================================ rope

// cs = n_rot/2 (cos, sin) pairs of position pos, as ggml computes them:
// theta_i = pos * base^(-2i/n_rot) built by repeated multiplication in float, so the
// rounding matches the reference; both times mscale (ggml's attn_factor: phi3's LongRoPE
// factor, else 1, exact).
static void rope_angles(float *cs, int32_t pos, int64_t n_rot, float theta_scale, float scale,
                        const float *freq_factors, float mscale) {
    float theta = (float)pos;
    for (int64_t d = 0; d < n_rot / 2; d++) {
        const float t = freq_factors ? scale * (theta / freq_factors[d]) : theta * scale;
        cs[2 * d] = cosf(t) * mscale;
        cs[2 * d + 1] = sinf(t) * mscale;
        theta *= theta_scale;
    }
}

// ================================================================ attention

void lm_op_kv_write(struct lm_context *c, int il, int ith, int nth) {
    struct lm_kv_cache *kv = c->kv;
    const struct lm_kv_layout *lay = &kv->lay[c->kv_layout];
    int64_t s, e;
    split(c->n_tokens, ith, nth, &s, &e);
    const size_t hk = lm_kv_hblk_k(lay), hv = lay->kv_dim_v ? lm_kv_hblk_v(lay) : 0;
    for (int64_t i = s; i < e; i++) { // cells placed by lm_kv_prepare
        // head-major (kv_cache.h): head g's row is g * hk (hv) on from head 0's; q8_0 rows as
        // llama.cpp's CPU backend stores them (its x86 quantize_row_q8_0: 32-value blocks, so
        // per head or per row the same bytes)
        uint8_t *kd = kv->base + c->kv_koff[i] + lay->k_off[il];
        for (int32_t o = 0; o < lay->kv_dim_k; o += lay->head_k, kd += hk) {
            const float *x = c->k + i * lay->kv_dim_k + o;
            if (lay->type_k == LM_KV_Q8_0) c->kern->quant[LM_DTYPE_Q8_0](x, kd, lay->head_k);
            else c->kern->f32_to_f16((lm_f16 *)kd, x, lay->head_k);
        }
        uint8_t *vd = kv->base + c->kv_voff[i] + lay->v_off[il];
        for (int32_t o = 0; o < lay->kv_dim_v; o += lay->head_v, vd += hv) { // none: V is in K (MLA)
            const float *x = c->v + i * lay->kv_dim_v + o;
            if (lay->type_v == LM_KV_Q8_0) c->kern->quant[LM_DTYPE_Q8_0](x, vd, lay->head_v);
            else c->kern->f32_to_f16((lm_f16 *)vd, x, lay->head_v);
        }
    }
}

// token i's window and KV head g's rows into j
static void attn_item(const struct lm_context *c, int il, struct lm_attn_job *j, int64_t i, int64_t g) {
    const struct lm_hparams *hp = &c->m->hp;
    const struct lm_kv_cache *kv = c->kv;
    const struct lm_kv_layout *lay = &kv->lay[c->kv_layout];
    const struct lm_batch_entry *b = &c->batch[i];
    // causal: up to its own position; non-causal: up to its sequence's last in the batch
    // (lm_decode left seq_next one past it)
    j->p = c->non_causal ? c->seq_next[b->seq - c->seq0] - 1 : b->pos;
    j->p0 = 0;
    if (c->m->layers[il].swa && hp->n_swa > 0 && j->p - hp->n_swa + 1 > 0) j->p0 = j->p - hp->n_swa + 1;
    const struct lm_kv_seq *sq = &kv->seqs[b->seq];
    j->blocks = sq->blocks;
    j->present = sq->first_hole <= j->p ? sq->present : NULL;
    j->kb = kv->base + lay->k_off[il] + (size_t)g * lm_kv_hblk_k(lay);
    j->vb = lay->kv_dim_v == 0 ? j->kb : kv->base + lay->v_off[il] + (size_t)g * lm_kv_hblk_v(lay);
}

// One token's decode, or few (token, KV head) units (decode of 2-3 sequences), at any thread count:
// the threads share the chunks of long windows (kernels.h, LM_ATTN_CHUNK). Items per token: a short
// window is one item per (KV head, block of up to LM_ATTN_MAX_HEADS query heads), computed whole; a
// long one's items go chunk-major, (chunk, KV head, block of query heads), each reading its KV
// head's rows of the chunk's blocks, in order within a block (the pool is head-major:
// bench/c/attn_depth_bench.c). A contiguous range of items per thread, chunks write partials; after a barrier
// the merges go round-robin. The chunks and the merge are the kernel's own, so the bits are those
// of one thread computing the whole window. False: no long window, nothing done.
static bool attn_split(struct lm_context *c, int il, struct lm_attn_job j, lm_attn_fn attn, int ith, int nth) {
    const int64_t n_head = c->m->hp.n_head, n_kv = c->m->hp.n_head_kv, group = n_head / n_kv;
    const int64_t hdk = j.hdk, hdv = j.hdv, nhb = (group + LM_ATTN_MAX_HEADS - 1) / LM_ATTN_MAX_HEADS;
    const struct lm_weight *sw = &c->m->layers[il].attn_sinks;
    const float *sinks = sw->data ? (const float *)sw->data : NULL;
    int64_t total = 0, slots = 0;
    for (int64_t i = 0; i < c->n_tokens; i++) {
        attn_item(c, il, &j, i, 0);
        int32_t k0;
        const int32_t n = lm_attn_chunks(&j, &k0);
        total += n * n_kv * nhb;
        if (n > 1) slots += n * n_kv * nhb;
    }
    if (slots == 0 || slots > c->attn_part_n) return false;
    const int64_t a = total * ith / nth, b = total * (ith + 1) / nth;
    const size_t os = c->attn_part_ostride;
    for (int pass = 0; pass < 2; pass++) { // 0: this thread's items; 1: its merges
        int64_t it = 0, slot = 0, nlong = 0;
        for (int64_t i = 0; i < c->n_tokens; i++) {
            attn_item(c, il, &j, i, 0);
            int32_t k0;
            const int32_t n = lm_attn_chunks(&j, &k0); // the same window for every KV head
            // item (k, g, hb): it + (k * n_kv + g) * nhb + hb; its partial: slot + (g * nhb + hb) * n + k
            for (int32_t k = 0; k < (n > 1 ? n : 1); k++) {
                for (int64_t g = 0; g < n_kv; g++) {
                    attn_item(c, il, &j, i, g);
                    for (int64_t hb = 0; hb < nhb; hb++) {
                        const int64_t h0 = g * group + hb * LM_ATTN_MAX_HEADS;
                        const int64_t item = it + ((int64_t)k * n_kv + g) * nhb + hb, ps = slot + (g * nhb + hb) * n;
                        j.nh = (g + 1) * group - h0 < LM_ATTN_MAX_HEADS ? (int)((g + 1) * group - h0) : LM_ATTN_MAX_HEADS;
                        j.q = c->q + (i * n_head + h0) * hdk;
                        j.sinks = sinks ? sinks + h0 : NULL; // gpt-oss
                        float *out = c->att + (i * n_head + h0) * hdv;
                        if (pass == 1) {
                            if (n > 1 && k == 0 && nlong++ % nth == ith) {
                                lm_attn_merge(j.nh, hdv, n, c->attn_part + ps, c->attn_part_o + ps * os, os, j.sinks, out);
                                if (c->kv_rot_v) lm_hadamard(out, j.nh * hdv, c->kv_rot_v);
                            }
                            continue;
                        }
                        if (item < a || item >= b) continue;
                        if (n == 1) {
                            j.part = NULL;
                            j.out = out;
                        } else {
                            j.part = c->attn_part + ps + k;
                            j.chunk = k0 + k;
                            j.out = c->attn_part_o + (ps + k) * os;
                        }
                        attn(&j);
                        if (n == 1 && c->kv_rot_v) lm_hadamard(out, j.nh * hdv, c->kv_rot_v);
                    }
                }
            }
            it += n * n_kv * nhb;
            if (n > 1) slot += n * n_kv * nhb;
        }
        if (pass == 0) lm_pool_barrier(c->pool);
    }
    return true;
}

// Prefill: tiles of nr consecutive batch entries per (tile, KV head) unit, units round-robin
// (causal windows grow along the batch); lm_attn_tile runs the long windows of each run of one
// sequence's entries in a tile chunk-major, so each chunk of K / V is read from memory once per
// tile rather than once per row. Each row's bits are those of its own job (kernels.h),
// whatever nr and the thread count.
static void attn_tiles(struct lm_context *c, int il, const struct lm_attn_job *j0, lm_attn_fn attn, int64_t nr,
                       int ith, int nth) {
    const int64_t n_head = c->m->hp.n_head, n_kv = c->m->hp.n_head_kv, group = n_head / n_kv;
    const struct lm_weight *sw = &c->m->layers[il].attn_sinks;
    const float *sinks = sw->data ? (const float *)sw->data : NULL;
    const int64_t nt = (c->n_tokens + nr - 1) / nr;
    struct lm_attn_job rows[LM_ATTN_TILE];
    for (int64_t it = ith; it < nt * n_kv; it += nth) {
        const int64_t i0 = it / n_kv * nr, g = it % n_kv;
        const int n = (int)(c->n_tokens - i0 < nr ? c->n_tokens - i0 : nr);
        for (int64_t h0 = g * group; h0 < (g + 1) * group; h0 += LM_ATTN_MAX_HEADS) {
            for (int r = 0; r < n; r++) {
                struct lm_attn_job *j = &rows[r];
                *j = *j0;
                attn_item(c, il, j, i0 + r, g);
                j->nh = (g + 1) * group - h0 < LM_ATTN_MAX_HEADS ? (int)((g + 1) * group - h0) : LM_ATTN_MAX_HEADS;
                j->q = c->q + ((i0 + r) * n_head + h0) * j->hdk;
                j->out = c->att + ((i0 + r) * n_head + h0) * j->hdv;
                j->sinks = sinks ? sinks + h0 : NULL; // gpt-oss
            }
            // a tile's runs of one sequence share their K / V: batched decode's rows (one per
            // sequence) keep each row's window streaming on its own
            for (int a = 0, b; a < n; a = b) {
                for (b = a + 1; b < n && c->batch[i0 + b].seq == c->batch[i0 + a].seq; b++) {}
                lm_attn_tile(rows + a, b - a, attn, c->kern->attn_tile, j0->scratch);
            }
            if (c->kv_rot_v)
                for (int r = 0; r < n; r++) lm_hadamard(rows[r].out, rows[r].nh * rows[r].hdv, c->kv_rot_v);
        }
    }
}

// att (n_tokens, n_head * hdv): one kernel job per (token, KV head, subset of its query
// heads), each over the token's window of its sequence's cells (kernels.h, lm_attn_job).
void lm_op_attention(struct lm_context *c, int il, int ith, int nth) {
    const struct lm_hparams *hp = &c->m->hp;
    const struct lm_layer *L = &c->m->layers[il];
    struct lm_kv_cache *kv = c->kv;
    const struct lm_kv_layout *lay = &kv->lay[c->kv_layout];
    const int64_t hdk = hp->head_dim_k, hdv = hp->head_dim_v;
    const int64_t n_head = hp->n_head, n_kv = hp->n_head_kv, group = n_head / n_kv;
    const bool v_in_k = lay->kv_dim_v == 0; // MLA: V is the first hdv values of the K row
    struct lm_attn_job j = {
        .block_bytes = kv->block_bytes, .block_shift = LM_KV_BLOCK_SHIFT,
        .kstride = (size_t)lay->head_k, .vstride = (size_t)(v_in_k ? lay->head_k : lay->head_v),
        .hdk = (int32_t)hdk, .hdv = (int32_t)hdv,
        .scratch = c->attn_scratch + (size_t)ith * c->attn_scratch_stride,
        .k_q8 = lay->type_k == LM_KV_Q8_0,
        .v_q8 = (v_in_k ? lay->type_k : lay->type_v) == LM_KV_Q8_0,
    };
    const lm_attn_fn attn = j.k_q8 || j.v_q8 ? c->kern->attn_q8 : c->kern->attn;
    // Work items: (token, KV head, subset of its query heads). The heads are split into
    // subsets only when there are too few (token, KV head) pairs to share evenly among
    // the threads (decode: one token, so 2 threads take 2 of Gemma 3's 4 heads each).
    const int64_t units = (int64_t)c->n_tokens * n_kv;
    // one token (decode of one sequence), or too few units to share: long windows chunk-major
    if ((c->n_tokens == 1 || units < 4 * nth) && attn_split(c, il, j, attn, ith, nth)) return;
    int64_t nsub = 1;
    if (units < 4 * nth) {
        nsub = group;
        for (int64_t s = 1; s < group; s++)
            if (units * s % nth == 0) { nsub = s; break; }
    }
    // prefill: tiles of rows while they leave 4 units per thread (c->attn_tile: the scratch's rows)
    int64_t nr = units / (4 * nth) < c->attn_tile ? units / (4 * nth) : c->attn_tile;
    if (nr > c->n_tokens) nr = c->n_tokens;
    if (nsub == 1 && nr > 1) {
        attn_tiles(c, il, &j, attn, nr, ith, nth);
        return;
    }
    const int64_t hsub = (group + nsub - 1) / nsub; // heads per item
    nsub = (group + hsub - 1) / hsub;
    // Items go round-robin: causal windows grow along a prefill batch, so contiguous
    // ranges would give the last thread most of the work.
    for (int64_t it = ith; it < units * nsub; it += nth) {
        const int64_t i = it / (n_kv * nsub), g = it / nsub % n_kv;
        const int64_t hb = g * group + it % nsub * hsub;
        const int64_t he = hb + hsub < (g + 1) * group ? hb + hsub : (g + 1) * group;
        attn_item(c, il, &j, i, g);
        for (int64_t h0 = hb; h0 < he; h0 += LM_ATTN_MAX_HEADS) {
            j.nh = he - h0 < LM_ATTN_MAX_HEADS ? (int)(he - h0) : LM_ATTN_MAX_HEADS;
            j.q = c->q + (i * n_head + h0) * hdk;
            j.out = c->att + (i * n_head + h0) * hdv;
            j.sinks = L->attn_sinks.data ? (const float *)L->attn_sinks.data + h0 : NULL; // gpt-oss
            attn(&j);
            if (c->kv_rot_v) lm_hadamard(j.out, j.nh * hdv, c->kv_rot_v);
        }
    }
}

// ================================================================ fused, barrier-free chains

static void gelu_table_ensure(void);
static float g_gelu_table[65536];

void lm_op_gate_up_act(struct lm_context *c, float *gate, float *up, const float *X,
                       const struct lm_weight *Wg, const struct lm_weight *Wu, int64_t n_rows,
                       int act, int il, int ith, int nth, uint64_t *t) {
    const int64_t F = Wg->n_out;
    LM_ASSERT(Wu->n_out == F && Wu->n_in == Wg->n_in);
    const struct lm_weight *const ws[2] = {Wg, Wu};
    struct lm_matmul_plan p;
    matmul_begin(c, &p, ws, 2, X, n_rows, ith, nth);
    int64_t a, b;
    split_rows(F, ith, nth, &a, &b);
    lm_matmul_rows(&p, 0, gate, a, b);
    lm_matmul_rows(&p, 1, up, a, b);
    if (lm_prof_on()) { // the activation is its own op in the profile
        const uint64_t t1 = lm_prof_ticks();
        lm_prof_op(ith, LM_OP_GATE_UP, il, *t, t1);
        if (ith == 0) lm_fwd_matmul_event(c, LM_OP_GATE_UP, il, *t, t1, &p.d);
        *t = t1;
    }
    if (act == 0) gelu_table_ensure();
    for (int64_t i = 0; i < n_rows; i++) {
        float *g = gate + i * F;
        const float *u = up + i * F;
        if (act == 0)
            c->kern->geglu(g + a, u + a, b - a, g_gelu_table);
        else
            c->kern->swiglu(g, u, a, b, F);
    }
}

// YaRN's cos/sin as ggml's rope_yarn computes them (ext_factor != 0): theta per pair by
// repeated multiplication, interpolated (theta * scale) or extrapolated (theta) as the ramp
// over hp->yarn_corr says, both times the magnitude factor.
static void rope_angles_yarn(float *cs, int32_t pos, int64_t n_rot, float theta_scale, float scale,
                             const struct lm_hparams *hp) {
    const float lo = hp->yarn_corr[0], hi = hp->yarn_corr[1], ext = hp->yarn_ext_factor;
    const float mscale = ext != 0.0f ? hp->yarn_attn_factor * (1.0f + 0.1f * logf(1.0f / scale))
                                     : hp->yarn_attn_factor;
    float theta = (float)pos;
    for (int64_t d = 0; d < n_rot / 2; d++) {
        const float interp = scale * theta;
        float t = interp;
        if (ext != 0.0f) {
            const float y = ((float)d - lo) / fmaxf(0.001f, hi - lo);
            const float mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * ext;
            t = interp * (1.0f - mix) + theta * mix;
        }
        cs[2 * d] = cosf(t) * mscale;
        cs[2 * d + 1] = sinf(t) * mscale;
        theta *= theta_scale;
    }
}

void lm_op_rope_cache(struct lm_context *c, int ith, int nth) {
    const int64_t n_rot = c->m->hp.n_rot;
    const bool yarn = c->m->hp.rope_scaling == LM_ROPE_SCALING_YARN;
    int64_t s, e;
    split(c->n_tokens, ith, nth, &s, &e);
    for (int sl = 0; sl < c->n_rope_slots; sl++) {
        const float theta_scale = powf(c->rope_base[sl], -2.0f / (float)n_rot);
        const float scale = c->rope_scale[sl];
        for (int64_t i = s; i < e; i++) {
            float *cs = c->rope_cs[sl] + i * n_rot;
            if (yarn) rope_angles_yarn(cs, c->batch[i].pos, n_rot, theta_scale, scale, &c->m->hp);
            else rope_angles(cs, c->batch[i].pos, n_rot, theta_scale, scale, c->rope_freqs,
                             c->rope_mscale);
        }
    }
}

void lm_op_qk_rope_kv(struct lm_context *c, int il, int ith, int nth, uint64_t *t) {
    const struct lm_hparams *hp = &c->m->hp;
    const struct lm_layer *L = &c->m->layers[il];
    const int64_t hd = hp->head_dim_k, nh = hp->n_head, nkv = hp->n_head_kv;
    const float *qw = L->q_norm.data, *kw = L->k_norm.data;
    const float *cs0 = c->rope_cs[c->rope_slot[il]];
    const int64_t vd = (int64_t)nkv * hp->head_dim_v;
    int64_t s, e;
    split(c->n_tokens, ith, nth, &s, &e);
    // q/k/v biases (qwen2), then qk_norm (gemma3, qwen3): both in the QK_NORM span
    const struct lm_weight *bias[3] = {&L->bq, &L->bk, &L->bv};
    float *const bx[3] = {c->q, c->k, c->v};
    const int64_t bw[3] = {nh * hd, nkv * hd, vd};
    for (int j = 0; j < 3; j++)
        if (bias[j]->data)
            for (int64_t i = s; i < e; i++)
                for (int64_t d = 0; d < bw[j]; d++) bx[j][i * bw[j] + d] += ((const float *)bias[j]->data)[d];
    if (qw || kw)
        for (int64_t i = s; i < e; i++) {
            if (qw)
                for (int64_t h = 0; h < nh; h++) c->kern->rmsnorm(c->q + (i * nh + h) * hd, c->q + (i * nh + h) * hd, qw, hd, hp->rms_eps);
            if (kw)
                for (int64_t h = 0; h < nkv; h++) c->kern->rmsnorm(c->k + (i * nkv + h) * hd, c->k + (i * nkv + h) * hd, kw, hd, hp->rms_eps);
        }
    if (lm_prof_on()) { const uint64_t t1 = lm_prof_ticks(); lm_prof_op(ith, LM_OP_QK_NORM, il, *t, t1); *t = t1; }
    // rope, then q *= attn_scale (after rope, as llama.cpp)
    const bool neox = hp->rope_type == LM_ROPE_NEOX;
    const float scale = hp->attn_scale; // a local: q's stores could alias hp's fields
    for (int64_t i = s; i < e; i++) {
        const float *cs = cs0 + i * hp->n_rot;
        float *q = c->q + i * nh * hd;
        if (!L->no_rope) c->kern->rope(q, nh, hd, cs, hp->n_rot, neox); // smollm3: every 4th
        for (int64_t d = 0; d < nh * hd; d++) q[d] *= scale;
        if (!L->no_rope) c->kern->rope(c->k + i * nkv * hd, nkv, hd, cs, hp->n_rot, neox);
        if (c->kv_rot_k) { // a q8_0 K: q and k rotated alike (q.k kept)
            lm_hadamard(q, nh * hd, c->kv_rot_k);
            lm_hadamard(c->k + i * nkv * hd, nkv * hd, c->kv_rot_k);
        }
        if (c->kv_rot_v) lm_hadamard(c->v + i * vd, vd, c->kv_rot_v); // the output turns back
    }
    if (lm_prof_on()) { const uint64_t t1 = lm_prof_ticks(); lm_prof_op(ith, LM_OP_ROPE, il, *t, t1); *t = t1; }
    lm_op_kv_write(c, il, ith, nth);
}

// ================================================================ activations

static int g_gelu_ready;

// GELU (tanh approximation) tabulated over all f16 inputs, as ggml does by default
// (GGML_GELU_FP16): the input is rounded to f16, the result too. The one fmaf is the
// contraction GCC made of "1 + 0.044715 x x" under -march=native when this table was
// first built, written out so that every build (LUMEN_NATIVE=OFF too) gets the same table.
static void gelu_table_init(void) {
    for (int i = 0; i < 65536; i++) {
        const float x = lm_f16_to_f32((lm_f16)i);
        const float y = (0.5f * x) * (1.0f + tanhf((0.79788456080286535587989211986876f * x) *
                                                   fmaf(0.044715f * x, x, 1.0f)));
        g_gelu_table[i] = lm_f16_to_f32(lm_f32_to_f16(y));
    }
    __atomic_store_n(&g_gelu_ready, 1, __ATOMIC_RELEASE);
}

void lm_ops_init(void) { gelu_table_ensure(); }

const float *lm_op_gelu_table(void) {
    gelu_table_ensure();
    return g_gelu_table;
}

static void gelu_table_ensure(void) {
    if (!__atomic_load_n(&g_gelu_ready, __ATOMIC_ACQUIRE)) {
        // first use: one thread builds the table, others wait (rare, at warm-up)
        static int building;
        if (__atomic_exchange_n(&building, 1, __ATOMIC_ACQ_REL) == 0) gelu_table_init();
        while (!__atomic_load_n(&g_gelu_ready, __ATOMIC_ACQUIRE)) { }
    }
}

// ================================================================ embedding / output

void lm_op_embed(struct lm_context *c, float scale, int ith, int nth) {
    const struct lm_weight *E = &c->m->tok_embd;
    const int64_t d = E->n_in;
    int64_t s, e;
    split(c->n_tokens, ith, nth, &s, &e);
    for (int64_t i = s; i < e; i++) {
        float *row = c->x + i * d;
        const void *src = (const char *)E->data + (size_t)c->batch[i].token * E->row_bytes;
        c->kern->dequant[E->type](src, row, d);
        if (scale != 1.0f)
            for (int64_t j = 0; j < d; j++) row[j] *= scale;
    }
}

// xn rows = final norm of the residual rows that want logits (gathered)
void lm_op_output_norm(struct lm_context *c, const float *x, int ith, int nth) {
    const struct lm_model *m = c->m;
    const int64_t d = m->hp.n_embd;
    int64_t s, e;
    split(c->n_out + c->n_eout, ith, nth, &s, &e); // logits rows, then embedding rows
    const bool copy = m->arch->decoder.encoder && !m->output_norm.data; // bert: no final norm
    for (int64_t r = s; r < e; r++) {
        if (copy) memcpy(c->xn + r * d, x + (int64_t)c->out_rows[r] * d, (size_t)d * sizeof(float));
        else c->kern->rmsnorm(c->xn + r * d, x + (int64_t)c->out_rows[r] * d,
                              (const float *)m->output_norm.data, d, m->hp.rms_eps);
    }
}

// a separate call, not a side effect of the output norm: the caller owns the barrier that
// orders it before every thread's first claim
void lm_op_lm_head_reset(struct lm_context *c, int ith) {
    if (ith == 0) atomic_store_explicit(&c->head_next, 0, memory_order_relaxed);
}

// the smallest claim of lm_head rows: 128 groups, ~1.4 MB of Gemma's q8_0 head
#define LM_HEAD_CHUNK 2048

// Thread ith's fused top-k selections: empties them (every pass, before the head).
static void head_topk_reset(struct lm_context *c, int ith) {
    struct lm_topk *t = c->topk_part + (size_t)ith * c->n_logits_max;
    struct lm_topk_cand *buf = c->topk_buf + (size_t)ith * c->n_logits_max * c->topk_cap;
    for (int32_t r = 0; r < c->n_out; r++) lm_topk_reset(&t[r], buf + (size_t)r * c->topk_cap, c->top_k);
}

// Feeds columns [a, b) of every logits row, final values, to thread ith's selections.
static void head_topk_cols(struct lm_context *c, int ith, int64_t a, int64_t b) {
    const int64_t nv = c->m->hp.n_vocab;
    struct lm_topk *t = c->topk_part + (size_t)ith * c->n_logits_max;
    for (int32_t r = 0; r < c->n_out; r++)
        c->kern->topk_span(&t[r], c->logits + r * nv + a, (int32_t)a, b - a);
}

// the head's last pass writes the final logits: the bias, else the soft-capping, else the
// matmul itself
static bool head_has_bias(const struct lm_context *c) { return c->m->output_b.data != NULL; }

// logits (n_out, n_vocab) = lm_head(xn rows), then the optional logit scale (granite) and
// final soft-capping.
// The head is the largest matmul of a step (Gemma 3: 72% of the bytes read per token), so
// threads claim shrinking row ranges (1/(2 nth) of what is left) rather than a static half:
// a thread slowed by the shared machine no longer leaves the other idle at the barrier, and
// long claims keep the read streams running (head time per token 3.8-5.7 vs 4.1-6.2 ms with
// fixed 2048-row chunks at 2 threads). Fused top-k: each claimed range is computed
// LM_HEAD_CHUNK rows at a time and selected from while in L1 (the sampler's own pass over
// Gemma 3's 262144 logits took ~36 us per token).
void lm_op_lm_head(struct lm_context *c, int ith, int nth) {
    const struct lm_model *m = c->m;
    const struct lm_weight *W = &m->output;
    const float cap = m->hp.final_softcap;
    // granite: logits * (1 / logit_scale), as ggml_scale (1: none)
    const float lmul = m->hp.logit_scale != 0.0f ? 1.0f / m->hp.logit_scale : 1.0f;
    const bool topk = c->top_k > 0,
               topk_inline = topk && cap <= 0.0f && lmul == 1.0f && !head_has_bias(c);
    if (topk) head_topk_reset(c, ith);
    const bool claim = W->n_out % LM_MATMUL_ROW_ALIGN == 0 && W->n_out > 2 * LM_HEAD_CHUNK;
    if (claim && (nth > 1 || topk_inline)) {
        struct lm_matmul_plan p;
        matmul_begin(c, &p, &W, 1, c->xn, c->n_out, ith, nth);
        for (;;) {
            // guided: a claim takes 1/(2 nth) of the rows left (at least LM_HEAD_CHUNK), so
            // each thread streams a few long ranges and the last claims stay small
            int64_t a = atomic_load_explicit(&c->head_next, memory_order_relaxed), n = 0;
            do {
                if (a >= W->n_out) break;
                n = (W->n_out - a) / (2 * nth) & ~(int64_t)(LM_MATMUL_ROW_ALIGN - 1);
                if (n < LM_HEAD_CHUNK) n = LM_HEAD_CHUNK;
            } while (!atomic_compare_exchange_weak_explicit(&c->head_next, &a, a + n, memory_order_relaxed,
                                                            memory_order_relaxed));
            if (a >= W->n_out) break;
            const int64_t b = a + n < W->n_out ? a + n : W->n_out;
            if (!topk_inline) {
                lm_matmul_rows(&p, 0, c->logits, a, b);
                continue;
            }
            for (int64_t s = a; s < b; s += LM_HEAD_CHUNK) {
                const int64_t e = s + LM_HEAD_CHUNK < b ? s + LM_HEAD_CHUNK : b;
                lm_matmul_rows(&p, 0, c->logits, s, e);
                head_topk_cols(c, ith, s, e);
            }
        }
    } else {
        lm_op_matmul(c, c->logits, c->xn, W, c->n_out, ith, nth);
        if (topk_inline) { // a small or unaligned head: select once every thread is done
            lm_pool_barrier(c->pool);
            int64_t s, e;
            split(m->hp.n_vocab, ith, nth, &s, &e);
            head_topk_cols(c, ith, s, e);
        }
    }
    if (cap > 0.0f || lmul != 1.0f) {
        lm_pool_barrier(c->pool);
        // element-wise, so this split (columns of every row) gives the same values as any
        const int64_t nv = m->hp.n_vocab;
        int64_t s, e;
        split(nv, ith, nth, &s, &e);
        if (lmul != 1.0f)
            for (int32_t r = 0; r < c->n_out; r++)
                for (int64_t i = s; i < e; i++) c->logits[r * nv + i] *= lmul;
        if (cap > 0.0f)
            for (int32_t r = 0; r < c->n_out; r++)
                for (int64_t i = s; i < e; i++)
                    c->logits[r * nv + i] = tanhf(c->logits[r * nv + i] / cap) * cap;
        if (topk && !head_has_bias(c)) head_topk_cols(c, ith, s, e);
    }
}

// element-wise like lm_op_add_bias (same values), split by columns for the selection
void lm_op_lm_head_bias(struct lm_context *c, int ith, int nth) {
    const int64_t nv = c->m->hp.n_vocab;
    const float *bf = c->m->output_b.data;
    int64_t s, e;
    split(nv, ith, nth, &s, &e);
    for (int32_t r = 0; r < c->n_out; r++)
        for (int64_t j = s; j < e; j++) c->logits[r * nv + j] += bf[j];
    if (c->top_k > 0) head_topk_cols(c, ith, s, e);
}
