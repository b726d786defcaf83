// Parallel ops of the forward pass (norms, matmul, rope, attention, activations,
// embedding, output head). Each is called on every pool thread and splits rows.
#include <math.h>
#include <string.h>
#include <stdlib.h>

#include "kernels/reduce16.h"
#include "runtime/runtime.h"

#if defined(__F16C__) && defined(__AVX2__)
#include <immintrin.h>
#define LM_OPS_F16C 1
#endif

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

static void rmsnorm_row(float *y, const float *x, const float *w, int64_t dim, float eps) {
    // ggml accumulates the float squares in double, one after the other; 16 double lanes
    // change that sum by ~1e-16 relative, far below the float rounding of the scale
    double sum = 0.0;
    int64_t j0 = 0;
#if defined(__AVX512F__)
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (; j0 + 16 <= dim; j0 += 16) {
        const __m512 v = _mm512_loadu_ps(x + j0), sq = _mm512_mul_ps(v, v);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(sq, 1)));
    }
    sum = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
#endif
    for (int64_t j = j0; j < dim; j++) sum += (double)(x[j] * x[j]);
    const float scale = 1.0f / sqrtf((float)(sum / (double)dim) + eps);
    if (w) {
        for (int64_t j = 0; j < dim; j++) y[j] = (x[j] * scale) * w[j];
    } else {
        for (int64_t j = 0; j < dim; j++) y[j] = x[j] * scale;
    }
}

void lm_op_rmsnorm(float *y, const float *x, const struct lm_weight *w, int64_t n_rows,
                   int64_t dim, float eps, int ith, int nth) {
    int64_t s, e;
    split(n_rows, ith, nth, &s, &e);
    const float *wf = (w && w->data) ? (const float *)w->data : NULL;
    for (int64_t i = s; i < e; i++) rmsnorm_row(y + i * dim, x + i * dim, wf, dim, eps);
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

void lm_op_residual_norm_priv(float *x_out, const float *x, const float *o,
                              const struct lm_weight *post, const struct lm_weight *norm,
                              float eps, int64_t n_rows, int64_t dim, float *y, int ith) {
    const float *pw = post && post->data ? (const float *)post->data : NULL;
    const float *nw = norm && norm->data ? (const float *)norm->data : NULL;
    for (int64_t i = 0; i < n_rows; i++) {
        float *yr = y + i * dim;
        const float *xr = x + i * dim, *or_ = o + i * dim;
        if (post) rmsnorm_row(yr, or_, pw, dim, eps);
        else memcpy(yr, or_, (size_t)dim * sizeof(float));
        for (int64_t d = 0; d < dim; d++) yr[d] = xr[d] + yr[d];
        if (ith == 0) memcpy(x_out + i * dim, yr, (size_t)dim * sizeof(float));
        rmsnorm_row(yr, yr, nw, dim, eps);
    }
}

// ================================================================ rope

// cs = n_rot/2 (cos, sin) pairs of position pos, as ggml computes them:
// theta_i = pos * base^(-2i/n_rot) built by repeated multiplication in float, so the
// rounding matches the reference.
static void rope_angles(float *cs, int32_t pos, int64_t n_rot, float theta_scale, float scale,
                        const float *freq_factors) {
    float theta = (float)pos;
    for (int64_t d = 0; d < n_rot / 2; d++) {
        const float t = freq_factors ? scale * (theta / freq_factors[d]) : theta * scale;
        cs[2 * d] = cosf(t);
        cs[2 * d + 1] = sinf(t);
        theta *= theta_scale;
    }
}

static void rope_row(float *v, const float *cs, int64_t n_rot, enum lm_rope_type type) {
    for (int64_t d = 0; d < n_rot / 2; d++) {
        const float co = cs[2 * d], si = cs[2 * d + 1];
        int64_t a, b;
        if (type == LM_ROPE_NEOX) { a = d; b = d + n_rot / 2; }
        else { a = 2 * d; b = 2 * d + 1; }
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * co - x1 * si;
        v[b] = x0 * si + x1 * co;
    }
}

// ================================================================ attention

static inline float dot_f16_f32(const lm_f16 *a, const float *b, int64_t n) {
#ifdef LM_OPS_F16C
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m256 a0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + j)));
        __m256 a1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + j + 8)));
        acc0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b + j), acc0);
        acc1 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b + j + 8), acc1);
    }
    acc0 = _mm256_add_ps(acc0, acc1);
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(acc0), _mm256_extractf128_ps(acc0, 1));
    r = _mm_hadd_ps(r, r);
    r = _mm_hadd_ps(r, r);
    float sum = _mm_cvtss_f32(r);
    for (; j < n; j++) sum += lm_f16_to_f32(a[j]) * b[j];
    return sum;
#else
    float sum = 0.0f;
    for (int64_t j = 0; j < n; j++) sum += lm_f16_to_f32(a[j]) * b[j];
    return sum;
#endif
}

// y += a * x (x in f16)
static inline void axpy_f16(float *y, float a, const lm_f16 *x, int64_t n) {
#ifdef LM_OPS_F16C
    const __m256 va = _mm256_set1_ps(a);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + j)));
        _mm256_storeu_ps(y + j, _mm256_fmadd_ps(va, xv, _mm256_loadu_ps(y + j)));
    }
    for (; j < n; j++) y[j] += a * lm_f16_to_f32(x[j]);
#else
    for (int64_t j = 0; j < n; j++) y[j] += a * lm_f16_to_f32(x[j]);
#endif
}

static inline void f32_to_f16_row(lm_f16 *y, const float *x, int64_t n) {
    int64_t j = 0;
#ifdef LM_OPS_F16C
    for (; j + 8 <= n; j += 8)
        _mm_storeu_si128((__m128i *)(y + j), _mm256_cvtps_ph(_mm256_loadu_ps(x + j), 0));
#endif
    for (; j < n; j++) y[j] = lm_f32_to_f16(x[j]);
}

void lm_op_kv_write(struct lm_context *c, int il, int ith, int nth) {
    struct lm_kv_cache *kv = &c->kv;
    int64_t s, e;
    split(c->n_tokens, ith, nth, &s, &e);
    for (int64_t i = s; i < e; i++) { // cells placed by lm_kv_prepare
        lm_f16 *kd = (lm_f16 *)(kv->base + c->kv_koff[i] + kv->k_off[il]);
        lm_f16 *vd = (lm_f16 *)(kv->base + c->kv_voff[i] + kv->v_off[il]);
        f32_to_f16_row(kd, c->k + i * kv->kv_dim_k, kv->kv_dim_k);
        f32_to_f16_row(vd, c->v + i * kv->kv_dim_v, kv->kv_dim_v);
    }
}

#if defined(__AVX512F__)
// ---- llama.cpp-order attention (AVX-512)
// Gemma 3 amplifies rounding differences chaotically (a 1e-5 change in one attention
// sum can move a logit by 0.3 a few layers later; llama.cpp itself differs by ~0.2
// between its batch sizes). To remove one source of such differences, attention
// reproduces the float operation order of llama.cpp's CPU single-token path (below).
// This does NOT make lumen agree with llama.cpp token for token: other sums still run in
// another order (the first difference found by layer dumps is one ulp in a Q4_K matmul,
// where llama.cpp runs a repacked 8-row GEMV), so lumen reproduces llama.cpp's logits
// only at position 0 of a sequence (to 2e-5); from position 1-2 on they differ by
// 0.1-0.7 (mean |d| 0.20 over the golden prompts' top-20, top-1 97%), as much as
// llama.cpp's own n_ubatch 1 and 512 paths differ from each other. The tolerances are
// in tests/test_model_gemma3_golden.c; against the float64 reference both engines are
// equally far from exact (tests/test_model_ref_forward.sh, docs/accuracy.md).
// The order followed:
//   q.k      ggml_vec_dot_f16: 4 accumulators x 16 lanes over 64-element steps,
//            (acc0+acc2)+(acc1+acc3), horizontal _mm512_reduce_add_ps, tail in double
//   softmax  exp(x - max) by the same range-reduced polynomial as ggml_v_expf, summed
//            per 16 cells with _mm512_reduce_add_ps into a double; p = e * (float)(1/sum)
//   p.v      p rounded to f16, then ggml_vec_dot_f16 over the cells as above
// Cells are positions (a fresh llama.cpp cache places position i in cell i); masked
// cells contribute exact zeros, so only the valid window is visited. A cell's K/V row is
// found through the sequence's block table (kv_cache.h): cell c lives in block
// blocks[c / LM_KV_BLOCK], row c % LM_KV_BLOCK; a 16-cell chunk never straddles blocks.
// Cells a sequence removed (holes, present bit clear) are masked like cells outside the
// window. The float chain of every output depends only on the cells' positions, never on
// where the blocks lie or what else shares the batch.
//
// Only the chain of float operations behind each output is fixed; the loops around the
// chains are free and are arranged for speed:
//   - the query heads sharing a KV head are done together (up to LM_ATTN_MAX_HEADS), so
//     each K and V row is loaded and converted from f16 once for all of them;
//   - horizontal sums are done 16 at a time: as a transpose applying
//     _mm512_reduce_add_ps's add tree to 16 vectors (lm_reduce_add16), and for p.v as the
//     same tree of vertical adds, 16 output dims per vector (attn_tree16);
//   - the p.v accumulators of ggml's 64 slots (cell % 64) live in registers, a tile of
//     (head, slot) pairs at a time, instead of a (64, hd_v) array in memory that was
//     cleared, read and written per cell and then gathered lane by lane.
// Gemma 3 270M, 512-token prefill, 1 thread: lm_op_attention 21.7% -> 9.0% of the perf
// profile; one layer over a full 512-cell window, 512 tokens: 50 -> 15.5 ms.

// The same tree over 16 rows (stride floats apart) with vertical adds: lane d of the
// result is _mm512_reduce_add_ps of (x[0][d], ..., x[15][d]).
static inline __m512 attn_tree16(const float *x, int64_t stride) {
    __m512 s[8];
    for (int i = 0; i < 8; i++)
        s[i] = _mm512_add_ps(_mm512_loadu_ps(x + stride * (i + 8)), _mm512_loadu_ps(x + stride * i));
    for (int i = 0; i < 4; i++) s[i] = _mm512_add_ps(s[i + 4], s[i]);
    return _mm512_add_ps(_mm512_add_ps(s[0], s[2]), _mm512_add_ps(s[1], s[3]));
}

// exp(x) as ggml_v_expf: x = n*ln2 + b, 2^n * poly(b), with the same constants.
static inline __m512 expf_512(__m512 x) {
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b,
                                        _mm512_set1_ps(0x1.573e2ep-5f)),
                        u,
                        _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b,
                                        _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
    const __m512 res = _mm512_scalef_ps(j, n);
    if (!big) return res;
    const __m512 alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ),
                                            _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
    return _mm512_mask_blend_ps(big, res, alt);
}

// One unit of attention work: nh query heads of one token that share a KV head.
struct attn_job {
    const uint8_t *kb, *vb;   // pool base + this layer's K / V offset + this KV head's columns
    size_t block_bytes;       // pool bytes per block
    const int32_t *blocks;    // the sequence's block table
    const uint64_t *present;  // the sequence's held cells (bit per cell), NULL: all in window
    size_t kstride, vstride;  // elements from one row to the next
    int32_t p0, p, base, end; // window [p0, p]; cells [base, end) 16-aligned around it
    int64_t hdk, hdv;
    const float *qf;          // (nh, hdk) queries rounded to f16
    float *e;                 // (nh, e_stride) scores, then exp, then p; by cell - base
    size_t e_stride;
    float *xbuf;              // (nh, 512) vectors awaiting a horizontal sum
};

// K / V rows of cell c, through the block table
static inline const lm_f16 *attn_k(const struct attn_job *j, int32_t c) {
    return (const lm_f16 *)(j->kb + (size_t)j->blocks[c >> LM_KV_BLOCK_SHIFT] * j->block_bytes) +
           (size_t)(c & (LM_KV_BLOCK - 1)) * j->kstride;
}
static inline const lm_f16 *attn_v(const struct attn_job *j, int32_t c) {
    return (const lm_f16 *)(j->vb + (size_t)j->blocks[c >> LM_KV_BLOCK_SHIFT] * j->block_bytes) +
           (size_t)(c & (LM_KV_BLOCK - 1)) * j->vstride;
}
// cells of [c0, c0 + 16) (c0 16-aligned) that are in the window and held, as a lane mask
static inline __mmask16 attn_valid16(const struct attn_job *j, int32_t c0) {
    const int lo = j->p0 > c0 ? j->p0 - c0 : 0, hi = j->p - c0 + 1 < 16 ? j->p - c0 + 1 : 16;
    uint32_t m = lo < hi ? (0xffffu >> (16 - hi)) & (0xffffu << lo) : 0;
    if (j->present) m &= (uint32_t)(j->present[c0 >> 6] >> (c0 & 63)) & 0xffffu;
    return (__mmask16)m;
}

// Scores of cells [c0, c0 + 16) of nh heads into e (-inf outside the window), each
// dot_f16_ggml(K row, q); mx[h] takes the lane-wise max of head h's scores.
static inline __attribute__((always_inline)) void attn_scores16(const struct attn_job *j,
                                                                 const int nh, int32_t c0,
                                                                 __m512 *mx) {
    const int64_t hdk = j->hdk, np = hdk & ~(int64_t)63;
    const __mmask16 valid = attn_valid16(j, c0);
    for (int l = 0; l < 16; l++) {
        float *xr = j->xbuf + 16 * lm_reduce16_slot(l); // (nh, 16 rows, 16)
        if (!((valid >> l) & 1)) { // masked lanes: keep lm_reduce_add16's inputs finite
            for (int h = 0; h < nh; h++) _mm512_storeu_ps(xr + 256 * h, _mm512_setzero_ps());
            continue;
        }
        const lm_f16 *kr = attn_k(j, c0 + l);
        // p.v reads V rows by slot, 64 rows apart, which hardware prefetchers do not
        // follow; stream each row into L2 now, as K is read in order (decode, whose window
        // comes from memory; cold-cache, 512 cells, 2 heads: 42.6 -> 18.5 us per layer)
        const lm_f16 *vr = attn_v(j, c0 + l);
        for (int64_t o = 0; o < j->hdv; o += 32) _mm_prefetch((const char *)(vr + o), _MM_HINT_T1);
        __m512 acc[LM_ATTN_MAX_HEADS][4];
#pragma GCC unroll 4
        for (int h = 0; h < nh; h++)
#pragma GCC unroll 4
            for (int a = 0; a < 4; a++) acc[h][a] = _mm512_setzero_ps();
        for (int64_t i = 0; i < np; i += 64)
#pragma GCC unroll 4
            for (int a = 0; a < 4; a++) {
                const __m512 kv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(kr + i + 16 * a)));
#pragma GCC unroll 4
                for (int h = 0; h < nh; h++)
                    acc[h][a] = _mm512_fmadd_ps(kv, _mm512_loadu_ps(j->qf + h * hdk + i + 16 * a), acc[h][a]);
            }
#pragma GCC unroll 4
        for (int h = 0; h < nh; h++)
            _mm512_storeu_ps(xr + 256 * h, _mm512_add_ps(_mm512_add_ps(acc[h][0], acc[h][2]),
                                                         _mm512_add_ps(acc[h][1], acc[h][3])));
    }
    for (int h = 0; h < nh; h++) {
        __m512 s = lm_reduce_add16(j->xbuf + 256 * h);
        if (np < hdk) { // the dot product's tail, in double
            float sv[16];
            _mm512_storeu_ps(sv, s);
            for (int l = 0; l < 16; l++) {
                if (!((valid >> l) & 1)) continue;
                const lm_f16 *kr = attn_k(j, c0 + l);
                double sum = (double)sv[l];
                for (int64_t i = np; i < hdk; i++)
                    sum += (double)(lm_f16_to_f32(kr[i]) * j->qf[h * hdk + i]);
                sv[l] = (float)sum;
            }
            s = _mm512_loadu_ps(sv);
        }
        s = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), valid, s);
        _mm512_storeu_ps(j->e + h * j->e_stride + (c0 - j->base), s);
        mx[h] = _mm512_max_ps(s, mx[h]); // a NaN score is skipped, as "if (s > mx)" did
    }
}

// the first n < 16 halves at x, then zeros (AVX512F alone has no masked 16-bit load)
static inline __m256i attn_load_part(const lm_f16 *x, int n) {
    lm_f16 t[16] = {0};
    memcpy(t, x, (size_t)n * sizeof(lm_f16));
    return _mm256_loadu_si256((const __m256i *)t);
}

// p.v of nh heads for output dims [d, d + 16 (td - 1) + vn) over the accumulator slots 16m + l0 + t, t < tl, of quarters m (slot = cell % 64: ggml's 4
// accumulators x 16 lanes): all four if nq == 4, else m0 and m0 + 2. Each slot sums its
// cells in order. Slots the window reaches start at -0.0, the identity of addition, so
// their first fma equals the plain product bit for bit; the others stay +0.0, as a
// zeroed accumulator. xbuf (nh, 16 lanes, 32 dims) receives x = (acc0 + acc2) +
// (acc1 + acc3) of each lane: in one tile if nq == 4, else acc0 + acc2 from the m0 = 0
// tile, then + (acc1 + acc3) from the m0 = 1 tile.
static inline __attribute__((always_inline)) void
attn_pv_tile(const struct attn_job *j, const int nh, const int td, const int nq, const int tl,
             int l0, int m0, int64_t d, int vn) {
    __m512 acc[LM_ATTN_MAX_HEADS][2][4][2]; // [head][lane t][quarter][dims]; <= 16 used
    const uint32_t nwin = (uint32_t)(j->p - j->p0 + 1);
    const int mstep = nq == 4 ? 1 : 2;
#pragma GCC unroll 4
    for (int t = 0; t < tl; t++)
#pragma GCC unroll 4
        for (int qi = 0; qi < nq; qi++) {
            const uint32_t slot = (uint32_t)(16 * (m0 + qi * mstep) + l0 + t);
            const bool reached = nwin >= 64 || ((slot - (uint32_t)j->p0) & 63) < nwin;
            const __m512 init = reached ? _mm512_set1_ps(-0.0f) : _mm512_setzero_ps();
#pragma GCC unroll 4
            for (int h = 0; h < nh; h++)
#pragma GCC unroll 2
                for (int v = 0; v < td; v++) acc[h][t][qi][v] = init;
        }
    for (int32_t k = j->p0 >> 6; k <= j->p >> 6; k++) {
        const int32_t c64 = 64 * k;
        // a chunk inside the window with every cell held: no per-cell checks
        const bool full = c64 >= j->p0 && c64 + 63 <= j->p && (!j->present || j->present[k] == ~0ull);
#pragma GCC unroll 4
        for (int qi = 0; qi < nq; qi++) {
            const int32_t cq = c64 + 16 * (m0 + qi * mstep); // a 16-cell quarter: one block
            const int32_t bq = j->blocks[cq >> LM_KV_BLOCK_SHIFT];
            if (bq < 0) continue; // a hole released the whole block
            const lm_f16 *vq = (const lm_f16 *)(j->vb + (size_t)bq * j->block_bytes) +
                               (size_t)(cq & (LM_KV_BLOCK - 1)) * j->vstride + d;
#pragma GCC unroll 4
            for (int t = 0; t < tl; t++) {
                const int32_t c = cq + l0 + t;
                if (!full && (c < j->p0 || c > j->p ||
                              (j->present && !((j->present[c >> 6] >> (c & 63)) & 1))))
                    continue;
                const lm_f16 *vr = vq + (size_t)(l0 + t) * j->vstride;
                __m512 vv[2];
#pragma GCC unroll 2
                for (int v = 0; v < td; v++)
                    vv[v] = _mm512_cvtph_ps(vn == 16 || v < td - 1
                                                ? _mm256_loadu_si256((const __m256i *)(vr + 16 * v))
                                                : attn_load_part(vr + 16 * v, vn));
#pragma GCC unroll 4
                for (int h = 0; h < nh; h++) {
                    const __m512 pb = _mm512_set1_ps(j->e[h * j->e_stride + (c - j->base)]);
#pragma GCC unroll 2
                    for (int v = 0; v < td; v++)
                        acc[h][t][qi][v] = _mm512_fmadd_ps(vv[v], pb, acc[h][t][qi][v]);
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < nh; h++)
#pragma GCC unroll 2
        for (int t = 0; t < tl; t++)
#pragma GCC unroll 2
            for (int v = 0; v < td; v++) {
                float *x = j->xbuf + 512 * h + 32 * (l0 + t) + 16 * v;
                if (nq == 4)
                    _mm512_storeu_ps(x, _mm512_add_ps(_mm512_add_ps(acc[h][t][0][v], acc[h][t][2][v]),
                                                      _mm512_add_ps(acc[h][t][1][v], acc[h][t][3][v])));
                else if (m0 == 0)
                    _mm512_storeu_ps(x, _mm512_add_ps(acc[h][t][0][v], acc[h][t][1][v]));
                else
                    _mm512_storeu_ps(x, _mm512_add_ps(_mm512_loadu_ps(x),
                                                      _mm512_add_ps(acc[h][t][0][v], acc[h][t][1][v])));
            }
}

// out[h][d, d + 16 (td - 1) + vn) of nh heads: the p.v tiles over all
// 64 slots (16 accumulators each: 2 quarters x 1 lane for 3-4 heads, 4 quarters x 1 lane
// for 2 heads, 4 quarters x 2 lanes for 1), then the sums over the 16 lanes.
static inline __attribute__((always_inline)) void attn_pv(const struct attn_job *j, const int nh,
                                                           const int td, int64_t d, int vn,
                                                           float *out) {
    if (nh >= 3) {
        for (int l0 = 0; l0 < 16; l0++) {
            attn_pv_tile(j, nh, td, 2, 1, l0, 0, d, vn);
            attn_pv_tile(j, nh, td, 2, 1, l0, 1, d, vn);
        }
    } else if (nh == 2) {
        for (int l0 = 0; l0 < 16; l0++) attn_pv_tile(j, 2, td, 4, 1, l0, 0, d, vn);
    } else {
        for (int l0 = 0; l0 < 16; l0 += 2) attn_pv_tile(j, 1, td, 4, 2, l0, 0, d, vn);
    }
    for (int h = 0; h < nh; h++)
        for (int v = 0; v < td; v++)
            _mm512_mask_storeu_ps(out + h * j->hdv + d + 16 * v,
                                  v < td - 1 || vn == 16 ? 0xffff : (__mmask16)((1u << vn) - 1),
                                  attn_tree16(j->xbuf + 512 * h + 16 * v, 32));
}

// Attention of nh heads (a compile-time constant after inlining) -> out (nh, hdv).
static inline __attribute__((always_inline)) void attn_heads(const struct attn_job *j,
                                                              const int nh, float *out) {
    // scores, with masked cells of the first/last chunk as -inf
    __m512 mx[LM_ATTN_MAX_HEADS];
    for (int h = 0; h < nh; h++) mx[h] = _mm512_set1_ps(-INFINITY);
    for (int32_t c0 = j->base; c0 < j->end; c0 += 16) attn_scores16(j, nh, c0, mx);
    // softmax; p rounded to f16
    for (int h = 0; h < nh; h++) {
        float *e = j->e + h * j->e_stride;
        const __m512 vmx = _mm512_set1_ps(_mm512_reduce_max_ps(mx[h]));
        double sum = 0.0;
        for (int32_t c = 0; c < j->end - j->base; c += 16) {
            const __m512 x = _mm512_loadu_ps(e + c);
            const __mmask16 valid = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
            const __m512 ex = _mm512_maskz_mov_ps(valid, expf_512(_mm512_sub_ps(x, vmx)));
            _mm512_storeu_ps(e + c, ex);
            sum += (double)_mm512_reduce_add_ps(ex);
        }
        const __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
        for (int32_t c = 0; c < j->end - j->base; c += 16)
            _mm512_storeu_ps(e + c, _mm512_cvtph_ps(_mm512_cvtps_ph(
                                        _mm512_mul_ps(_mm512_loadu_ps(e + c), inv),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    }
    // p.v, 32 output dims at a time, then 16 and the remainder
    int64_t d = 0;
    for (; d + 32 <= j->hdv; d += 32) attn_pv(j, nh, 2, d, 16, out);
    if (d + 16 <= j->hdv) {
        attn_pv(j, nh, 1, d, 16, out);
        d += 16;
    }
    if (d < j->hdv) attn_pv(j, nh, 1, d, (int)(j->hdv - d), out);
}

void lm_op_attention(struct lm_context *c, int il, int ith, int nth) {
    const struct lm_hparams *hp = &c->m->hp;
    const struct lm_layer *L = &c->m->layers[il];
    struct lm_kv_cache *kv = &c->kv;
    const int64_t hdk = hp->head_dim_k, hdv = hp->head_dim_v;
    const int64_t n_head = hp->n_head, n_kv = hp->n_head_kv, group = n_head / n_kv;
    float *qf = c->qtmp + (size_t)ith * LM_ATTN_MAX_HEADS * hdk;
    struct attn_job j = {
        .block_bytes = kv->block_bytes,
        .kstride = (size_t)kv->kv_dim_k, .vstride = (size_t)kv->kv_dim_v,
        .hdk = hdk, .hdv = hdv, .qf = qf, .e_stride = (size_t)c->n_ctx + 64,
        .e = c->scores + (size_t)ith * LM_ATTN_MAX_HEADS * ((size_t)c->n_ctx + 64),
        .xbuf = c->attn_acc + (size_t)ith * LM_ATTN_MAX_HEADS * 512,
    };
    // Work items: (token, KV head, subset of its query heads). The heads are split into
    // subsets only when there are too few (token, KV head) pairs to share evenly among
    // the threads (decode: one token, so 2 threads take 2 of Gemma 3's 4 heads each).
    const int64_t units = (int64_t)c->n_tokens * n_kv;
    int64_t nsub = 1;
    if (units < 4 * nth) {
        nsub = group;
        for (int64_t s = 1; s < group; s++)
            if (units * s % nth == 0) { nsub = s; break; }
    }
    const int64_t hsub = (group + nsub - 1) / nsub; // heads per item
    nsub = (group + hsub - 1) / hsub;
    // Items go round-robin: causal windows grow along a prefill batch, so contiguous
    // ranges would give the last thread most of the work.
    for (int64_t it = ith; it < units * nsub; it += nth) {
        const int64_t i = it / (n_kv * nsub), g = it / nsub % n_kv;
        const int64_t hb = g * group + it % nsub * hsub;
        const int64_t he = hb + hsub < (g + 1) * group ? hb + hsub : (g + 1) * group;
        const struct lm_batch_entry *b = &c->batch[i];
        j.p = b->pos;
        j.p0 = 0;
        if (L->swa && hp->n_swa > 0 && j.p - hp->n_swa + 1 > 0) j.p0 = j.p - hp->n_swa + 1;
        j.base = j.p0 & ~15; // 16-cell chunk alignment of the softmax sums
        j.end = (j.p + 16) & ~15;
        const struct lm_kv_seq *sq = &kv->seqs[b->seq];
        j.blocks = sq->blocks;
        j.present = sq->first_hole <= j.p ? sq->present : NULL;
        j.kb = kv->base + kv->k_off[il] + (size_t)g * hdk * sizeof(lm_f16);
        j.vb = kv->base + kv->v_off[il] + (size_t)g * hdv * sizeof(lm_f16);
        for (int64_t h0 = hb; h0 < he; h0 += LM_ATTN_MAX_HEADS) {
            const int nh = he - h0 < LM_ATTN_MAX_HEADS ? (int)(he - h0) : LM_ATTN_MAX_HEADS;
            // q rounded to f16, as llama.cpp's f16 K dot product does
            const float *q = c->q + (i * n_head + h0) * hdk;
            for (int64_t d = 0; d < nh * hdk; d += 16) {
                const __mmask16 mk = nh * hdk - d >= 16 ? 0xffff : (__mmask16)((1u << (nh * hdk - d)) - 1);
                _mm512_mask_storeu_ps(qf + d, mk, _mm512_cvtph_ps(_mm512_cvtps_ph(
                                                      _mm512_maskz_loadu_ps(mk, q + d),
                                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
            }
            float *out = c->att + (i * n_head + h0) * hdv;
            switch (nh) {
            case 1: attn_heads(&j, 1, out); break;
            case 2: attn_heads(&j, 2, out); break;
            case 3: attn_heads(&j, 3, out); break;
            default: attn_heads(&j, 4, out); break;
            }
        }
    }
}
#else
void lm_op_attention(struct lm_context *c, int il, int ith, int nth) {
    const struct lm_hparams *hp = &c->m->hp;
    const struct lm_layer *L = &c->m->layers[il];
    struct lm_kv_cache *kv = &c->kv;
    const int64_t hdk = hp->head_dim_k, hdv = hp->head_dim_v;
    const int64_t n_head = hp->n_head, group = hp->n_head / hp->n_head_kv;
    float *scores = c->scores + (size_t)ith * (c->n_ctx + 64);
    float *qf = c->qtmp + (size_t)ith * hdk;
    int64_t s, e;
    split((int64_t)c->n_tokens * n_head, ith, nth, &s, &e);
    for (int64_t t = s; t < e; t++) {
        const int64_t i = t / n_head, h = t % n_head, g = h / group;
        const struct lm_batch_entry *b = &c->batch[i];
        const int32_t p = b->pos;
        int32_t p0 = 0;
        if (L->swa && hp->n_swa > 0 && p - hp->n_swa + 1 > 0) p0 = p - hp->n_swa + 1;
        const struct lm_kv_seq *sq = &kv->seqs[b->seq];
        // q is rounded to f16 as llama.cpp's f16 K dot product does
        const float *q = c->q + (i * n_head + h) * hdk;
        for (int64_t d = 0; d < hdk; d++) qf[d] = lm_f16_to_f32(lm_f32_to_f16(q[d]));
        float mx = -INFINITY;
        const int32_t n = p - p0 + 1;
        for (int32_t j = 0; j < n; j++) {
            const int32_t cell = p0 + j;
            if (!((sq->present[cell >> 6] >> (cell & 63)) & 1)) { // a hole
                scores[j] = -INFINITY;
                continue;
            }
            const lm_f16 *K = lm_kv_k(kv, sq->blocks[cell >> LM_KV_BLOCK_SHIFT], il) +
                              (size_t)(cell & (LM_KV_BLOCK - 1)) * kv->kv_dim_k;
            const float sc = dot_f16_f32(K + g * hdk, qf, hdk);
            scores[j] = sc;
            if (sc > mx) mx = sc;
        }
        double sum = 0.0;
        for (int32_t j = 0; j < n; j++) {
            const float ex = scores[j] == -INFINITY ? 0.0f : expf(scores[j] - mx);
            scores[j] = ex;
            sum += ex;
        }
        const float inv = (float)(1.0 / sum);
        float *out = c->att + (i * n_head + h) * hdv;
        memset(out, 0, (size_t)hdv * sizeof(float));
        for (int32_t j = 0; j < n; j++) {
            const int32_t cell = p0 + j;
            if (scores[j] == 0.0f) continue; // a hole (or an exact zero)
            // probabilities rounded to f16, as llama.cpp's f16 V x kq product does
            const float pj = lm_f16_to_f32(lm_f32_to_f16(scores[j] * inv));
            const lm_f16 *V = lm_kv_v(kv, sq->blocks[cell >> LM_KV_BLOCK_SHIFT], il) +
                              (size_t)(cell & (LM_KV_BLOCK - 1)) * kv->kv_dim_v;
            axpy_f16(out, pj, V + g * hdv, hdv);
        }
    }
}

#endif

// ================================================================ fused, barrier-free chains

static void geglu_span(float *g, const float *u, int64_t n);
static void swiglu_span(float *g, const float *u, int64_t a, int64_t b, int64_t F);
static void gelu_table_ensure(void);

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
    for (int64_t i = 0; i < n_rows; i++) {
        float *g = gate + i * F;
        const float *u = up + i * F;
        if (act == 0)
            geglu_span(g + a, u + a, b - a);
        else
            swiglu_span(g, u, a, b, F);
    }
}

void lm_op_rope_cache(struct lm_context *c, int ith, int nth) {
    const int64_t n_rot = c->m->hp.n_rot;
    int64_t s, e;
    split(c->n_tokens, ith, nth, &s, &e);
    for (int sl = 0; sl < c->n_rope_slots; sl++) {
        const float theta_scale = powf(c->rope_base[sl], -2.0f / (float)n_rot);
        const float scale = c->rope_scale[sl];
        for (int64_t i = s; i < e; i++)
            rope_angles(c->rope_cs[sl] + i * n_rot, c->batch[i].pos, n_rot, theta_scale, scale,
                        c->m->rope_freqs);
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
                for (int64_t h = 0; h < nh; h++) rmsnorm_row(c->q + (i * nh + h) * hd, c->q + (i * nh + h) * hd, qw, hd, hp->rms_eps);
            if (kw)
                for (int64_t h = 0; h < nkv; h++) rmsnorm_row(c->k + (i * nkv + h) * hd, c->k + (i * nkv + h) * hd, kw, hd, hp->rms_eps);
        }
    if (lm_prof_on()) { const uint64_t t1 = lm_prof_ticks(); lm_prof_op(ith, LM_OP_QK_NORM, il, *t, t1); *t = t1; }
    // rope, then q *= attn_scale (after rope, as llama.cpp)
    for (int64_t i = s; i < e; i++) {
        const float *cs = cs0 + i * hp->n_rot;
        for (int64_t h = 0; h < nh; h++) {
            float *v = c->q + (i * nh + h) * hd;
            rope_row(v, cs, hp->n_rot, hp->rope_type);
            for (int64_t d = 0; d < hd; d++) v[d] *= hp->attn_scale;
        }
        for (int64_t h = 0; h < nkv; h++) rope_row(c->k + (i * nkv + h) * hd, cs, hp->n_rot, hp->rope_type);
    }
    if (lm_prof_on()) { const uint64_t t1 = lm_prof_ticks(); lm_prof_op(ith, LM_OP_ROPE, il, *t, t1); *t = t1; }
    lm_op_kv_write(c, il, ith, nth);
}

// ================================================================ activations

static float g_gelu_table[65536];
static int g_gelu_ready;

// GELU (tanh approximation) tabulated over all f16 inputs, as ggml does by default
// (GGML_GELU_FP16): the input is rounded to f16, the result too.
static void gelu_table_init(void) {
    for (int i = 0; i < 65536; i++) {
        const float x = lm_f16_to_f32((lm_f16)i);
        const float y = 0.5f * x * (1.0f + tanhf(0.79788456080286535587989211986876f * x *
                                                 (1.0f + 0.044715f * x * x)));
        g_gelu_table[i] = lm_f16_to_f32(lm_f32_to_f16(y));
    }
    __atomic_store_n(&g_gelu_ready, 1, __ATOMIC_RELEASE);
}

void lm_ops_init(void) { gelu_table_ensure(); }

static void gelu_table_ensure(void) {
    if (!__atomic_load_n(&g_gelu_ready, __ATOMIC_ACQUIRE)) {
        // first use: one thread builds the table, others wait (rare, at warm-up)
        static int building;
        if (__atomic_exchange_n(&building, 1, __ATOMIC_ACQ_REL) == 0) gelu_table_init();
        while (!__atomic_load_n(&g_gelu_ready, __ATOMIC_ACQUIRE)) { }
    }
}

// g[j] = gelu(g[j]) * u[j] for j < n: f16 table lookups, 16 at a time with a gather
static void geglu_span(float *g, const float *u, int64_t n) {
    gelu_table_ensure();
    int64_t j = 0;
#if defined(__AVX512F__)
    const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
    for (; j + 16 <= n; j += 16) {
        const __m512 x = _mm512_loadu_ps(g + j);
        const __m512i idx = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m512 y = _mm512_i32gather_ps(idx, g_gelu_table, 4);
        y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ), x);
        y = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_GT_OQ), y);
        _mm512_storeu_ps(g + j, _mm512_mul_ps(y, _mm512_loadu_ps(u + j)));
    }
#endif
    for (; j < n; j++) {
        const float x = g[j];
        float y;
        if (x <= -10.0f) y = 0.0f;
        else if (x >= 10.0f) y = x;
        else y = g_gelu_table[lm_f32_to_f16(x)];
        g[j] = y * u[j];
    }
}

// SiLU gating as llama.cpp's ggml_vec_swiglu_f32 computes it, element j of a row of F: the
// first F - F % 16 elements by the vector formula (x / (1 + exp(0 - x)) with ggml_v_expf,
// times g), the rest as x / (1 + expf(-x)) * g. Lane-wise, so any span [a, b) of the row
// gives the same values (masked lanes at the span's edges).
static void swiglu_span(float *g, const float *u, int64_t a, int64_t b, int64_t F) {
    int64_t j = a;
#if defined(__AVX512F__)
    const int64_t vend = F - F % 16, ve = b < vend ? b : vend;
    for (; j < ve; j += 16) {
        const __mmask16 m = ve - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (ve - j)) - 1);
        const __m512 x = _mm512_maskz_loadu_ps(m, g + j);
        const __m512 e = expf_512(_mm512_sub_ps(_mm512_setzero_ps(), x));
        const __m512 silu = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_mask_storeu_ps(g + j, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, u + j)));
    }
#endif
    for (; j < b; j++) g[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
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
    split(c->n_out, ith, nth, &s, &e);
    for (int64_t r = s; r < e; r++)
        rmsnorm_row(c->xn + r * d, x + (int64_t)c->out_rows[r] * d,
                    (const float *)m->output_norm.data, d, m->hp.rms_eps);
}

// a separate call, not a side effect of the output norm: the caller owns the barrier that
// orders it before every thread's first claim
void lm_op_lm_head_reset(struct lm_context *c, int ith) {
    if (ith == 0) atomic_store_explicit(&c->head_next, 0, memory_order_relaxed);
}

// the smallest claim of lm_head rows: 128 groups, ~1.4 MB of Gemma's q8_0 head
#define LM_HEAD_CHUNK 2048

// logits (n_out, n_vocab) = lm_head(xn rows), then the optional final soft-capping
// The head is the largest matmul of a step (Gemma 3: 72% of the bytes read per token).
// A static half per thread left one thread waiting 0.5-2.7 ms at the next barrier whenever
// the other was slowed (shared machine); claiming chunks lets the faster thread do more.
// Guided claims (first 1/4 of the head each at 2 threads, then shrinking) against fixed
// 2048-row ones: Gemma decode at 2 threads, head time per token faster in 6 of 6
// alternating runs (3.78-5.72 vs 4.11-6.24 ms): fewer restarts of the read streams.
void lm_op_lm_head(struct lm_context *c, int ith, int nth) {
    const struct lm_model *m = c->m;
    const struct lm_weight *W = &m->output;
    if (nth > 1 && W->n_out % LM_MATMUL_ROW_ALIGN == 0 && W->n_out > 2 * LM_HEAD_CHUNK) {
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
            lm_matmul_rows(&p, 0, c->logits, a, b);
        }
    } else {
        lm_op_matmul(c, c->logits, c->xn, W, c->n_out, ith, nth);
    }
    if (m->hp.final_softcap > 0.0f) {
        lm_pool_barrier(c->pool);
        const float cap = m->hp.final_softcap;
        int64_t s, e;
        split((int64_t)c->n_out * m->hp.n_vocab, ith, nth, &s, &e);
        for (int64_t i = s; i < e; i++) c->logits[i] = tanhf(c->logits[i] / cap) * cap;
    }
}

