// AVX-512 prefill tile chunk (kernels.h, lm_attn_tile_fn): one LM_ATTN_CHUNK chunk of up to
// LM_ATTN_TILE query rows of one sequence, each row's partial with exactly the bits of
// lm_attn_avx512 on that row's chunk job alone; K read and converted once per tile, cells in lanes.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include <math.h>
#include <string.h>

#include "base/status.h"
#include "kernels/kernels_internal.h"

#if defined(__x86_64__)
#include "kernels/simd_avx512.h"

// ---- why cells in lanes
// The single-row kernel (attn_avx512.c) puts a K row's dims in lanes: per cell and query head
// 4 fmas, 3 adds, a store, then lm_reduce_add16's transpose (shuffles) per 16 cells; and each
// row of a tile loads and converts every K row again. Here the 16 cells of a group are lanes:
// the group's K rows are converted and transposed once per tile into kt (hdk, 16), then for
// every (row, head) the same float chain runs vertically: slot s (ggml's accumulator
// s / 16, lane s % 16) is leaf(s) = fma chain over the 64-element steps i of kt[i + s] * q[i + s]
// from +0 (the scalar oracle's acc[s / 16][s % 16]); x_l = (leaf l + leaf l+32) + (leaf l+16 +
// leaf l+48); score = lm_tree16 over l as vertical adds; the elements past the last whole 64
// added in double. No horizontal sums, no shuffles but the transpose (shared by up to 32
// (row, head) pairs). Softmax and p.v run per row as the single-row chunk path does.

// values [i, i + 16) of a row (i a multiple of 16) as floats: f16, or q8_0 blocks (q8); a q8_0
// value d * q is exact in float (attn_avx512.c's attn_load16)
AI __m512 tile_load16(const uint8_t *row, const bool q8, int64_t i) {
    if (!q8) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 2 * i)));
    const struct lm_block_q8_0 *b = (const struct lm_block_q8_0 *)row + i / LM_QK8_0;
    const __m128i qs = _mm_loadu_si128((const __m128i *)(b->qs + i % LM_QK8_0));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(qs)), _mm512_set1_ps(lm_f16_to_f32(b->d)));
}
// byte offset of value d (a multiple of 32 for q8_0) in a row
static inline size_t tile_off(const bool q8, int64_t d) {
    return q8 ? (size_t)d / LM_QK8_0 * sizeof(struct lm_block_q8_0) : (size_t)d * sizeof(lm_f16);
}
// the first n < 16 halves at x, then zeros
static inline __m256i tile_load_part(const uint8_t *x, int n) {
    lm_f16 t[16] = {0};
    memcpy(t, x, (size_t)n * sizeof(lm_f16));
    return _mm256_loadu_si256((const __m256i *)t);
}

// 16 x 16 floats: r[i] lane j -> r[j] lane i
AI void tile_transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
    // now 128-bit block c of r[4a + b] is column 4c + b of rows 4a .. 4a + 3: the result's
    // vector 4c + b takes block a from r[4a + b]'s block c (a 4 x 4 transpose of blocks)
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], _MM_SHUFFLE(1, 0, 1, 0));
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], _MM_SHUFFLE(3, 2, 3, 2));
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], _MM_SHUFFLE(1, 0, 1, 0));
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], _MM_SHUFFLE(2, 0, 2, 0));
        r[i + 4] = _mm512_shuffle_f32x4(t[i], t[i + 8], _MM_SHUFFLE(3, 1, 3, 1));
        r[i + 8] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], _MM_SHUFFLE(2, 0, 2, 0));
        r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], _MM_SHUFFLE(3, 1, 3, 1));
    }
}

// The tile as the loops see it: the rows' shared layout (one sequence: the same pool, block
// table and holes) and each row's window clipped to the chunk.
struct tile_ctx {
    const uint8_t *kb, *vb;
    size_t block_bytes, krow, vrow, vhead; // bytes: block to block, row to row, a head's V slice
    const int32_t *blocks;
    const uint64_t *present;
    int64_t hdk, hdv;
    int32_t c0;                  // the chunk's first cell
    int32_t p0[LM_ATTN_TILE], p[LM_ATTN_TILE], base[LM_ATTN_TILE], end[LM_ATTN_TILE];
    float *kt;                   // (hdk, 16) the current group's K, cells in lanes
    float *qf;                   // (nr, LM_ATTN_MAX_HEADS, round16(hdk)) queries (f16-rounded for an f16 K)
    float *e;                    // (nr, LM_ATTN_MAX_HEADS, LM_ATTN_CHUNK) scores, then exp; by cell - c0
    size_t qs;                   // floats from one query vector to the next
};

static inline int64_t tile_round16(int64_t n) { return (n + 15) & ~(int64_t)15; }

// cells of [c, c + 16) (16-aligned) in row r's window and held, as a lane mask
static inline __mmask16 tile_valid16(const struct tile_ctx *t, int r, int32_t c) {
    const int lo = t->p0[r] > c ? t->p0[r] - c : 0, hi = t->p[r] - c + 1 < 16 ? t->p[r] - c + 1 : 16;
    uint32_t m = lo < hi ? (0xffffu >> (16 - hi)) & (0xffffu << lo) : 0;
    if (t->present) m &= (uint32_t)(t->present[c >> 6] >> (c & 63)) & 0xffffu;
    return (__mmask16)m;
}

// Scores of Q query vectors q[0 .. Q) against the group in kt, cells in lanes: the chain of
// dot_ggml (attn_generic.c) vertically. leaf(s): slot s's fma chain over the 64-steps.
AI void tile_leaf(const float *kt, const float *const *q, const int Q, int s, int64_t np, __m512 *v) {
#pragma GCC unroll 4
    for (int k = 0; k < Q; k++) v[k] = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int64_t i = 0; i < np; i += 64) {
        const __m512 kv = _mm512_load_ps(kt + 16 * (i + s));
#pragma GCC unroll 4
        for (int k = 0; k < Q; k++) v[k] = _mm512_fmadd_ps(kv, _mm512_set1_ps(q[k][i + s]), v[k]);
    }
}
// x_l = (acc0 + acc2) + (acc1 + acc3) at lane l: slots l, l + 32, l + 16, l + 48
AI void tile_x(const float *kt, const float *const *q, const int Q, int l, int64_t np, __m512 *x) {
    __m512 a[4], b[4], c[4], d[4];
    tile_leaf(kt, q, Q, l, np, a);
    tile_leaf(kt, q, Q, l + 32, np, b);
    tile_leaf(kt, q, Q, l + 16, np, c);
    tile_leaf(kt, q, Q, l + 48, np, d);
#pragma GCC unroll 4
    for (int k = 0; k < Q; k++) {
        x[k] = _mm512_add_ps(_mm512_add_ps(a[k], b[k]), _mm512_add_ps(c[k], d[k]));
        __asm__ volatile("" : "+v"(x[k])::"memory"); // as T4_X below
    }
}
// lm_tree16 over x_0 .. x_15: s8[i] = x[i + 8] + x[i], s4[i] = s8[i + 4] + s8[i],
// (s4[0] + s4[2]) + (s4[1] + s4[3]); evaluated depth first to keep few registers live
AI void tile_s8(const float *kt, const float *const *q, const int Q, int i, int64_t np, __m512 *y) {
    __m512 a[4], b[4];
    tile_x(kt, q, Q, i + 8, np, a);
    tile_x(kt, q, Q, i, np, b);
#pragma GCC unroll 4
    for (int k = 0; k < Q; k++) y[k] = _mm512_add_ps(a[k], b[k]);
}
AI void tile_s4(const float *kt, const float *const *q, const int Q, int i, int64_t np, __m512 *y) {
    __m512 a[4], b[4];
    tile_s8(kt, q, Q, i + 4, np, a);
    tile_s8(kt, q, Q, i, np, b);
#pragma GCC unroll 4
    for (int k = 0; k < Q; k++) y[k] = _mm512_add_ps(a[k], b[k]);
}
AI void tile_dot(const float *kt, const float *const *qv, const int Q, const int64_t np, int64_t hdk, __m512 *s) {
    const float *q[4];
#pragma GCC unroll 4
    for (int k = 0; k < Q; k++) q[k] = qv[k];
    __m512 a[4], b[4], c[4], d[4];
    tile_s4(kt, q, Q, 0, np, a);
    tile_s4(kt, q, Q, 2, np, b);
    tile_s4(kt, q, Q, 1, np, c);
    tile_s4(kt, q, Q, 3, np, d);
#pragma GCC unroll 4
    for (int k = 0; k < Q; k++) s[k] = _mm512_add_ps(_mm512_add_ps(a[k], b[k]), _mm512_add_ps(c[k], d[k]));
}
// the elements past the last whole 64 in double (dot_ggml's tail): each float product widened
// and added in order
static inline void tile_tail(const float *kt, const float *q, int64_t np, int64_t hdk, __m512 *s) {
    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(*s)), hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(*s, 1));
    for (int64_t i = np; i < hdk; i++) {
        const __m512 p = _mm512_mul_ps(_mm512_load_ps(kt + 16 * i), _mm512_set1_ps(q[i]));
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(p)));
        hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(p, 1)));
    }
    *s = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
}

// Four query vectors at once, each kt load shared by the four; written as macros over named
// locals: through arrays passed between inlined helpers GCC 12 kept every leaf in memory
// (a store and a load per fma; the q.k was slower than the per-row kernel's).
#define T4_LEAF(s, o0, o1, o2, o3)                                                              \
    do {                                                                                        \
        o0 = o1 = o2 = o3 = _mm512_setzero_ps();                                                \
        _Pragma("GCC unroll 4") for (int64_t i_ = 0; i_ < np; i_ += 64) {                       \
            const __m512 kv_ = _mm512_load_ps(kt + 16 * (i_ + (s)));                            \
            o0 = _mm512_fmadd_ps(kv_, _mm512_set1_ps(q0[i_ + (s)]), o0);                        \
            o1 = _mm512_fmadd_ps(kv_, _mm512_set1_ps(q1[i_ + (s)]), o1);                        \
            o2 = _mm512_fmadd_ps(kv_, _mm512_set1_ps(q2[i_ + (s)]), o2);                        \
            o3 = _mm512_fmadd_ps(kv_, _mm512_set1_ps(q3[i_ + (s)]), o3);                        \
        }                                                                                       \
    } while (0)
#define T4_SUM(o0, o1, o2, o3, A, B, C, D)                                                      \
    do {                                                                                        \
        o0 = _mm512_add_ps(_mm512_add_ps(A##0, B##0), _mm512_add_ps(C##0, D##0));              \
        o1 = _mm512_add_ps(_mm512_add_ps(A##1, B##1), _mm512_add_ps(C##1, D##1));              \
        o2 = _mm512_add_ps(_mm512_add_ps(A##2, B##2), _mm512_add_ps(C##2, D##2));              \
        o3 = _mm512_add_ps(_mm512_add_ps(A##3, B##3), _mm512_add_ps(C##3, D##3));              \
    } while (0)
#define T4_ADD(o0, o1, o2, o3, A, B)                                                            \
    do {                                                                                        \
        o0 = _mm512_add_ps(A##0, B##0);                                                         \
        o1 = _mm512_add_ps(A##1, B##1);                                                         \
        o2 = _mm512_add_ps(A##2, B##2);                                                         \
        o3 = _mm512_add_ps(A##3, B##3);                                                         \
    } while (0)
// x_l (tile_x)
#define T4_X(l, o0, o1, o2, o3)                                                                 \
    do {                                                                                        \
        __m512 a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3, d0, d1, d2, d3;                  \
        T4_LEAF(l, a0, a1, a2, a3);                                                             \
        T4_LEAF((l) + 32, b0, b1, b2, b3);                                                      \
        T4_LEAF((l) + 16, c0, c1, c2, c3);                                                      \
        T4_LEAF((l) + 48, d0, d1, d2, d3);                                                      \
        T4_SUM(o0, o1, o2, o3, a, b, c, d);                                                     \
        /* x here, the next leaves' loads below: else GCC expands each sum at its use and keeps */ \
        /* the leaves live (spilled) until then */                                              \
        __asm__ volatile("" : "+v"(o0), "+v"(o1), "+v"(o2), "+v"(o3)::"memory");              \
    } while (0)
#define T4_S8(i, o0, o1, o2, o3)                                                                \
    do {                                                                                        \
        __m512 e0, e1, e2, e3, f0, f1, f2, f3;                                                  \
        T4_X((i) + 8, e0, e1, e2, e3);                                                          \
        T4_X(i, f0, f1, f2, f3);                                                                \
        T4_ADD(o0, o1, o2, o3, e, f);                                                           \
    } while (0)
#define T4_S4(i, o0, o1, o2, o3)                                                                \
    do {                                                                                        \
        __m512 g0, g1, g2, g3, h0, h1, h2, h3;                                                  \
        T4_S8((i) + 4, g0, g1, g2, g3);                                                         \
        T4_S8(i, h0, h1, h2, h3);                                                               \
        T4_ADD(o0, o1, o2, o3, g, h);                                                           \
    } while (0)
AI void tile_dot4(const float *kt, const float *const *q, const int64_t np, int64_t hdk, __m512 *s) {
    const float *q0 = q[0], *q1 = q[1], *q2 = q[2], *q3 = q[3];
    __m512 w0, w1, w2, w3, x0, x1, x2, x3, y0, y1, y2, y3, z0, z1, z2, z3, r0, r1, r2, r3;
    T4_S4(0, w0, w1, w2, w3);
    T4_S4(2, x0, x1, x2, x3);
    T4_S4(1, y0, y1, y2, y3);
    T4_S4(3, z0, z1, z2, z3);
    T4_SUM(r0, r1, r2, r3, w, x, y, z);
    s[0] = r0, s[1] = r1, s[2] = r2, s[3] = r3;
    if (np < hdk)
        for (int k = 0; k < 4; k++) tile_tail(kt, q[k], np, hdk, s + k);
}

// the scores of n query vectors, 4 at a time (the group's kt loads shared), np a constant for
// head sizes 64-127 and 128-191 (the leaves' loops unrolled)
AI void tile_dots_np(const float *kt, const float *const *q, int n, const int64_t np, int64_t hdk, __m512 *s) {
    int i = 0;
    for (; i + 4 <= n; i += 4) tile_dot4(kt, q + i, np, hdk, s + i);
    for (; i < n; i++) {
        tile_dot(kt, q + i, 1, np, hdk, s + i);
        if (np < hdk) tile_tail(kt, q[i], np, hdk, s + i);
    }
}
// (one copy, not one per head count and block size as tile_run: compile time and code size)
static __attribute__((noinline)) void tile_dots(const float *kt, const float *const *q, int n, int64_t hdk, __m512 *s) {
    const int64_t np = hdk & ~(int64_t)63;
    if (np == 64) tile_dots_np(kt, q, n, 64, hdk, s);
    else if (np == 128) tile_dots_np(kt, q, n, 128, hdk, s);
    else tile_dots_np(kt, q, n, np, hdk, s);
}

// The group of cells [c, c + 16) of the chunk: its K rows (those some row's window holds) into
// kt, then the scores of every (row, head) whose chunk window [base, end) covers the group
// into e (-inf where the row does not hold the cell), mx[r][h] taking their lane-wise max.
static __attribute__((noinline)) void tile_group(const struct tile_ctx *t, int sh, bool kq, int nr, int nh, int32_t c,
                                                 __m512 mx[][LM_ATTN_MAX_HEADS]) {
    __mmask16 valid[LM_ATTN_TILE], any = 0;
    for (int r = 0; r < nr; r++) any |= valid[r] = c >= t->base[r] && c < t->end[r] ? tile_valid16(t, r, c) : 0;
    const float *q[LM_ATTN_TILE * LM_ATTN_MAX_HEADS];
    __mmask16 qm[LM_ATTN_TILE * LM_ATTN_MAX_HEADS];
    float *qe[LM_ATTN_TILE * LM_ATTN_MAX_HEADS];
    __m512 *qx[LM_ATTN_TILE * LM_ATTN_MAX_HEADS];
    int n = 0;
    for (int r = 0; r < nr; r++) {
        if (c < t->base[r] || c >= t->end[r]) continue;
        for (int h = 0; h < nh; h++) {
            float *e = t->e + ((size_t)r * LM_ATTN_MAX_HEADS + h) * LM_ATTN_CHUNK + (c - t->c0);
            if (!valid[r]) { // nothing held: -inf, as the single-row kernel stores
                _mm512_storeu_ps(e, _mm512_set1_ps(-INFINITY));
                continue;
            }
            q[n] = t->qf + (size_t)(r * LM_ATTN_MAX_HEADS + h) * t->qs;
            qm[n] = valid[r];
            qe[n] = e;
            qx[n++] = &mx[r][h];
        }
    }
    if (!any) return;
    // K rows of the group (one block: 16-cell groups never straddle blocks), converted once,
    // cells in lanes; cells no row holds read as zeros (never a released block's rows)
    const uint8_t *k0 = t->kb + (size_t)t->blocks[c >> sh] * t->block_bytes + (size_t)(c & ((1 << sh) - 1)) * t->krow;
    const uint8_t *v0 = t->vb + (size_t)t->blocks[c >> sh] * t->block_bytes + (size_t)(c & ((1 << sh) - 1)) * t->vrow;
    for (int l = 0; l < 16; l++) // the rows p.v reads next, into L2 (as the single-row chunk path)
        if ((any >> l) & 1)
            for (size_t o = 0; o < t->vhead; o += 64) _mm_prefetch((const char *)(v0 + l * t->vrow + o), _MM_HINT_T1);
    for (int64_t d = 0; d < t->hdk; d += 16) {
        __m512 r16[16];
        for (int l = 0; l < 16; l++)
            r16[l] = (any >> l) & 1 ? tile_load16(k0 + l * t->krow, kq, d) : _mm512_setzero_ps();
        tile_transpose16(r16);
        for (int i = 0; i < 16; i++) _mm512_store_ps(t->kt + 16 * (d + i), r16[i]);
    }
    __m512 sc[LM_ATTN_TILE * LM_ATTN_MAX_HEADS];
    tile_dots(t->kt, q, n, t->hdk, sc);
    for (int i = 0; i < n; i++) {
        const __m512 v = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), qm[i], sc[i]);
        _mm512_storeu_ps(qe[i], v);
        *qx[i] = _mm512_max_ps(v, *qx[i]);
    }
}

// Row r's chunk p.v (attn_avx512.c's attn_pv_seq): per head and output dim one fma chain from
// +0 over the held cells in order; out[h][d, d + 16 (nvc - 1) + vn) of nh heads.
AI void tile_pv(const struct tile_ctx *t, const int sh, const bool vq, int r, const int nh, const int nvc, int64_t d,
                int vn, float *out) {
    __m512 acc[LM_ATTN_MAX_HEADS][4];
#pragma GCC unroll 4
    for (int h = 0; h < LM_ATTN_MAX_HEADS; h++) // all (nh is not a constant for blocks other than 16 cells)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) acc[h][v] = _mm512_setzero_ps();
    const float *e = t->e + (size_t)r * LM_ATTN_MAX_HEADS * LM_ATTN_CHUNK;
    for (int32_t c = t->base[r]; c < t->end[r]; c += 16) {
        const __mmask16 valid = tile_valid16(t, r, c);
        if (!valid) continue;
        const uint8_t *r0 = t->vb + (size_t)t->blocks[c >> sh] * t->block_bytes +
                            (size_t)(c & ((1 << sh) - 1)) * t->vrow + tile_off(vq, d);
        for (int l = 0; l < 16; l++) {
            if (!((valid >> l) & 1)) continue;
            const uint8_t *vr = r0 + (size_t)l * t->vrow;
            __m512 vv[4];
#pragma GCC unroll 4
            for (int v = 0; v < nvc; v++)
                vv[v] = vq || vn == 16 || v < nvc - 1 ? tile_load16(vr, vq, 16 * v)
                                                      : _mm512_cvtph_ps(tile_load_part(vr + 32 * v, vn));
#pragma GCC unroll 4
            for (int h = 0; h < nh; h++) {
                const __m512 pb = _mm512_set1_ps(e[(size_t)h * LM_ATTN_CHUNK + (c - t->c0) + l]);
#pragma GCC unroll 4
                for (int v = 0; v < nvc; v++) acc[h][v] = _mm512_fmadd_ps(vv[v], pb, acc[h][v]);
            }
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < nh; h++)
#pragma GCC unroll 4
        for (int v = 0; v < nvc; v++)
            _mm512_mask_storeu_ps(out + h * t->hdv + d + 16 * v,
                                  v < nvc - 1 || vn == 16 ? 0xffff : (__mmask16)((1u << vn) - 1), acc[h][v]);
}

// the chunk of nr rows of nh heads (compile-time constants after inlining, as sh, kq, vq)
AI void tile_run(const struct tile_ctx *t, const int sh, const bool kq, const bool vq, const int nh,
                 const struct lm_attn_job *rows, int nr) {
    __m512 mx[LM_ATTN_TILE][LM_ATTN_MAX_HEADS];
    int32_t gb = INT32_MAX, ge = INT32_MIN;
    for (int r = 0; r < nr; r++) {
        for (int h = 0; h < nh; h++) mx[r][h] = _mm512_set1_ps(-INFINITY);
        if (t->base[r] < gb) gb = t->base[r];
        if (t->end[r] > ge) ge = t->end[r];
    }
    for (int32_t c = gb; c < ge; c += 16) {
        if (t->blocks[c >> sh] < 0) { // a released block: no row holds its cells
            for (int r = 0; r < nr; r++)
                if (c >= t->base[r] && c < t->end[r])
                    for (int h = 0; h < nh; h++)
                        _mm512_storeu_ps(t->e + ((size_t)r * LM_ATTN_MAX_HEADS + h) * LM_ATTN_CHUNK + (c - t->c0),
                                         _mm512_set1_ps(-INFINITY));
            continue;
        }
        tile_group(t, sh, kq, nr, nh, c, mx);
    }
    for (int r = 0; r < nr; r++) {
        // softmax of the chunk (attn_avx512.c): e = exp(s - max) where s > -inf, summed per
        // 16 cells into a double; e stays unnormalised, the merge normalises
        for (int h = 0; h < nh; h++) {
            float *e = t->e + ((size_t)r * LM_ATTN_MAX_HEADS + h) * LM_ATTN_CHUNK;
            const float m = _mm512_reduce_max_ps(mx[r][h]);
            const __m512 vmx = _mm512_set1_ps(m);
            double sum = 0.0;
            for (int32_t c = t->base[r]; c < t->end[r]; c += 16) {
                const __m512 x = _mm512_loadu_ps(e + (c - t->c0));
                const __mmask16 valid = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
                const __m512 ex = _mm512_maskz_mov_ps(valid, lm_expf_ggml_512(_mm512_sub_ps(x, vmx)));
                _mm512_storeu_ps(e + (c - t->c0), ex);
                sum += (double)_mm512_reduce_add_ps(ex);
            }
            rows[r].part->m[h] = m;
            rows[r].part->s[h] = sum;
        }
        int64_t d = 0;
        for (; d + 64 <= t->hdv; d += 64) tile_pv(t, sh, vq, r, nh, 4, d, 16, rows[r].out);
        const int64_t rest = t->hdv - d; // 0 .. 63 dims left
        if (rest > 48) tile_pv(t, sh, vq, r, nh, 4, d, (int)(rest - 48), rows[r].out);
        else if (rest > 32) tile_pv(t, sh, vq, r, nh, 3, d, (int)(rest - 32), rows[r].out);
        else if (rest > 16) tile_pv(t, sh, vq, r, nh, 2, d, (int)(rest - 16), rows[r].out);
        else if (rest > 0) tile_pv(t, sh, vq, r, nh, 1, d, (int)rest, rows[r].out);
    }
}

#define TILE_RUN(KQ, VQ)                                                                        \
    static void tile_run_##KQ##VQ(const struct tile_ctx *tc, int shift, int nh, const struct lm_attn_job *rows, \
                                  int nr) {                                                     \
        const struct tile_ctx tl = *tc, *t = &tl;                                               \
        if (shift == 4) {                                                                       \
            switch (nh) {                                                                       \
            case 1: tile_run(t, 4, KQ, VQ, 1, rows, nr); break;                                 \
            case 2: tile_run(t, 4, KQ, VQ, 2, rows, nr); break;                                 \
            case 3: tile_run(t, 4, KQ, VQ, 3, rows, nr); break;                                 \
            default: tile_run(t, 4, KQ, VQ, 4, rows, nr); break;                                \
            }                                                                                   \
        } else {                                                                                \
            tile_run(t, shift, KQ, VQ, nh, rows, nr);                                           \
        }                                                                                       \
    }
TILE_RUN(0, 0)
TILE_RUN(1, 0)
TILE_RUN(0, 1)
TILE_RUN(1, 1)
#undef TILE_RUN

// the rows share what the loops read once for all of them: one sequence's pool, block table
// and holes, one layout and head count; the chunk index is the same
static bool tile_shared(const struct lm_attn_job *rows, int nr) {
    const struct lm_attn_job *a = &rows[0];
    if (a->hdk % 16 != 0 || !a->part) return false;
    for (int r = 1; r < nr; r++) {
        const struct lm_attn_job *b = &rows[r];
        if (b->kb != a->kb || b->vb != a->vb || b->block_bytes != a->block_bytes || b->blocks != a->blocks ||
            b->block_shift != a->block_shift || b->present != a->present || b->kstride != a->kstride ||
            b->vstride != a->vstride || b->hdk != a->hdk || b->hdv != a->hdv || b->nh != a->nh ||
            b->k_q8 != a->k_q8 || b->v_q8 != a->v_q8 || !b->part || b->chunk != a->chunk)
            return false;
    }
    return true;
}

void lm_attn_tile_chunk_avx512(const struct lm_attn_job *rows, int nr, float *tile) {
    LM_ASSERT(nr >= 1 && nr <= LM_ATTN_TILE);
    if (!tile_shared(rows, nr)) { // rows the tile cannot share: each on its own
        for (int r = 0; r < nr; r++) lm_attn_avx512(&rows[r]);
        return;
    }
    const struct lm_attn_job *a = &rows[0];
    const bool kq = a->k_q8, vq = a->v_q8;
    const int nh = a->nh;
    const int64_t hdk = a->hdk, hk = tile_round16(hdk);
    struct tile_ctx t = {
        .kb = a->kb, .vb = a->vb, .block_bytes = a->block_bytes, .krow = tile_off(kq, (int64_t)a->kstride),
        .vrow = tile_off(vq, (int64_t)a->vstride), .vhead = tile_off(vq, a->hdv),
        .blocks = a->blocks, .present = a->present, .hdk = hdk, .hdv = a->hdv, .c0 = a->chunk * LM_ATTN_CHUNK,
        .qs = (size_t)hk,
    };
    // tile (lm_attn_tile_chunk_floats): kt (hdk, 16), qf (nr, heads, hk), e (nr, heads, chunk)
    t.kt = tile;
    t.qf = tile + 16 * hk;
    t.e = t.qf + (size_t)nr * LM_ATTN_MAX_HEADS * hk;
    for (int r = 0; r < nr; r++) {
        const struct lm_attn_job *j = &rows[r];
        t.p0[r] = j->p0 > t.c0 ? j->p0 : t.c0;
        t.p[r] = j->p < t.c0 + LM_ATTN_CHUNK - 1 ? j->p : t.c0 + LM_ATTN_CHUNK - 1;
        t.base[r] = t.p0[r] & ~15;
        t.end[r] = (t.p[r] + 16) & ~15;
        for (int h = 0; h < nh; h++) {
            float *qf = t.qf + (size_t)(r * LM_ATTN_MAX_HEADS + h) * hk;
            for (int64_t d = 0; d < hdk; d += 16) { // q rounded to f16 for an f16 K (as lm_attn_avx512)
                const __m512 x = _mm512_loadu_ps(j->q + h * hdk + d);
                _mm512_store_ps(qf + d, kq ? x : _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT |
                                                                                        _MM_FROUND_NO_EXC)));
            }
        }
    }
    if (kq && vq) tile_run_11(&t, a->block_shift, nh, rows, nr);
    else if (kq) tile_run_10(&t, a->block_shift, nh, rows, nr);
    else if (vq) tile_run_01(&t, a->block_shift, nh, rows, nr);
    else tile_run_00(&t, a->block_shift, nh, rows, nr);
}

#endif
