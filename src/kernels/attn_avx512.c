// AVX-512 attention (kernels.h, lm_attn_fn; the table's attn and attn_q8): one token's query
// heads sharing a KV head over its window of f16 or q8_0 K/V cells read through a block table,
// in llama.cpp's float order, with the loops arranged for speed (register tiles, prefetch).
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include <math.h>
#include <string.h>

#include "kernels/kernels_internal.h"

#if defined(__x86_64__)
#include "kernels/simd_avx512.h"

// ---- why this order
// Gemma 3 amplifies rounding differences chaotically (a 1e-5 change in one attention
// sum can move a logit by 0.3 a few layers later; llama.cpp itself differs by ~0.2
// between its batch sizes). To remove one source of such differences, attention
// reproduces the float operation order of llama.cpp's CPU single-token path. This does NOT
// make lumen agree with llama.cpp token for token: other sums still run in another order
// (the first difference found by layer dumps is one ulp in a Q4_K matmul, where llama.cpp
// runs a repacked 8-row GEMV), so lumen reproduces llama.cpp's logits only at position 0
// of a sequence (to 2e-5); from position 1-2 on they differ by 0.1-0.7 (mean |d| 0.20 over
// the golden prompts' top-20, top-1 97%), as much as llama.cpp's own n_ubatch 1 and 512
// paths differ from each other. The tolerances are in tests/test_model_gemma3_golden.c;
// against the float64 reference both engines are equally far from exact
// (tests/test_model_ref_forward.sh, docs/accuracy.md). The order followed:
//   q.k      ggml_vec_dot_f16: 4 accumulators x 16 lanes over 64-element steps,
//            (acc0+acc2)+(acc1+acc3), horizontal _mm512_reduce_add_ps, tail in double
//   softmax  exp(x - max) by the same range-reduced polynomial as ggml_v_expf, summed
//            per 16 cells with _mm512_reduce_add_ps into a double; p = e * (float)(1/sum)
//   p.v      p rounded to f16, then ggml_vec_dot_f16 over the cells as above
// (kernels.h states the order exactly; attn_generic.c computes it one float at a time.)
// Cells are positions (a fresh llama.cpp cache places position i in cell i); masked
// cells contribute exact zeros, so only the valid window is visited. A cell's K/V row is
// found through the sequence's block table (runtime/kv_cache.h): cell c lives in block
// blocks[c >> sh], row c & (2^sh - 1); a 16-cell chunk never straddles blocks.
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
//     cleared, read and written per cell and then gathered lane by lane (one Gemma 3 270M
//     layer over a full 512-cell window, 512 tokens: 15.5 ms against 50 that way).
//
// q8_0 rows (a Q8_0 KV cache; K and V typed independently) run the same loops, one copy per
// (K, V) type pair through the compile-time flags kq / vq: only the row read changes. A q8_0
// value d * q is exact in float (11 + 8 significant bits), so converting 16 quants and
// multiplying by the block's d gives the generic kernel's dequantized floats, and the fmas
// after it see the same inputs. q stays float for a q8_0 K (kernels.h).

// The same tree over 16 rows (stride floats apart) with vertical adds: lane d of the
// result is _mm512_reduce_add_ps of (x[0][d], ..., x[15][d]).
static inline __m512 attn_tree16(const float *x, int64_t stride) {
    __m512 s[8];
    for (int i = 0; i < 8; i++)
        s[i] = _mm512_add_ps(_mm512_loadu_ps(x + stride * (i + 8)), _mm512_loadu_ps(x + stride * i));
    for (int i = 0; i < 4; i++) s[i] = _mm512_add_ps(s[i + 4], s[i]);
    return _mm512_add_ps(_mm512_add_ps(s[0], s[2]), _mm512_add_ps(s[1], s[3]));
}

// One job as the loops below see it: the public job's window and rows, plus the scratch
// carved up and the 16-cell chunk range.
struct attn_ctx {
    const uint8_t *kb, *vb;   // as lm_attn_job
    size_t block_bytes;
    const int32_t *blocks;
    const uint64_t *present;
    size_t krow, vrow;        // bytes from one cell's K / V row to the next
    size_t khead, vhead;      // bytes of this head's K / V in a row
    int32_t p0, p, base, end; // window [p0, p]; cells [base, end) 16-aligned around it
    int32_t pf_p;             // K prefetches stop here: the job's p (a chunk's next cells too)
    struct lm_attn_part *part; // a chunk's partial (kernels.h), else NULL
    int64_t hdk, hdv;
    const float *qf;          // (nh, hdk) queries (rounded to f16 for an f16 K)
    float *e;                 // (nh, e_stride) scores, then exp, then p; by cell - base
    size_t e_stride;
    float *xbuf;              // (nh, 512) vectors awaiting a horizontal sum
    const float *sinks;       // (nh) or NULL (lm_attn_job)
};

// Software prefetch over long windows (decode at depth, whose K/V come from memory): K
// rows ATTN_PF_K cells ahead in the scores; in p.v, from ATTN_LONG cells on, each tile's
// V rows ATTN_PF_V chunks of 64 ahead (a tile reads 1-2 rows per chunk, too few for the
// hardware prefetchers). Into L2, sparing L1's fill buffers. Decode attention over 16384
// cells of the Llama 3.2 1B layout (8 KV heads of 64, then rows of all heads) took ~1.6x less
// time; with the pool head-major, bench/c/attn_depth_bench.c measures it.
#define ATTN_PF_K 32
#define ATTN_PF_V 16
#define ATTN_LONG 1024

// K / V rows of cell c, through the block table
// (sh: log2 of cells per block, a compile-time constant in the common case; see lm_attn_avx512)
static inline __attribute__((always_inline)) const uint8_t *attn_k(const struct attn_ctx *j, const int sh,
                                                                   int32_t c) {
    return j->kb + (size_t)j->blocks[c >> sh] * j->block_bytes + (size_t)(c & ((1 << sh) - 1)) * j->krow;
}
static inline __attribute__((always_inline)) const uint8_t *attn_v(const struct attn_ctx *j, const int sh,
                                                                   int32_t c) {
    return j->vb + (size_t)j->blocks[c >> sh] * j->block_bytes + (size_t)(c & ((1 << sh) - 1)) * j->vrow;
}

// values [i, i + 16) of a row (i a multiple of 16) as floats: f16, or q8_0 blocks (q8)
static inline __attribute__((always_inline)) __m512 attn_load16(const uint8_t *row, const bool q8,
                                                                 int64_t i) {
    if (!q8) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 2 * i)));
    const struct lm_block_q8_0 *b = (const struct lm_block_q8_0 *)row + i / LM_QK8_0;
    const __m128i qs = _mm_loadu_si128((const __m128i *)(b->qs + i % LM_QK8_0));
    const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(qs));
    return _mm512_mul_ps(q, _mm512_set1_ps(lm_f16_to_f32(b->d)));
}
// value i of a row
static inline float attn_load1(const uint8_t *row, const bool q8, int64_t i) {
    if (!q8) return lm_f16_to_f32(((const lm_f16 *)row)[i]);
    const struct lm_block_q8_0 *b = (const struct lm_block_q8_0 *)row + i / LM_QK8_0;
    return lm_f16_to_f32(b->d) * (float)b->qs[i % LM_QK8_0];
}
// byte offset of value d (a multiple of 32 for q8_0) in a row
static inline size_t attn_off(const bool q8, int64_t d) {
    return q8 ? (size_t)d / LM_QK8_0 * sizeof(struct lm_block_q8_0) : (size_t)d * sizeof(lm_f16);
}
// n bytes at r into L2, a line at a time; a q8_0 slice starts anywhere in a line (34-byte
// blocks), so the line of its last byte is fetched too
static inline __attribute__((always_inline)) void attn_prefetch(const uint8_t *r, size_t n, const bool q8) {
    for (size_t o = 0; o < n; o += 64) _mm_prefetch((const char *)(r + o), _MM_HINT_T1);
    if (q8 && n) _mm_prefetch((const char *)(r + n - 1), _MM_HINT_T1);
}
// cells of [c0, c0 + 16) (c0 16-aligned) that are in the window and held, as a lane mask
static inline __mmask16 attn_valid16(const struct attn_ctx *j, int32_t c0) {
    const int lo = j->p0 > c0 ? j->p0 - c0 : 0, hi = j->p - c0 + 1 < 16 ? j->p - c0 + 1 : 16;
    uint32_t m = lo < hi ? (0xffffu >> (16 - hi)) & (0xffffu << lo) : 0;
    if (j->present) m &= (uint32_t)(j->present[c0 >> 6] >> (c0 & 63)) & 0xffffu;
    return (__mmask16)m;
}

// The q.k tail (elements [np, hdk) past the last whole 64, hdk - np even) of an f16 K for the
// 16 cells of a chunk, one cell per lane: s's lanes widened, then per element the float
// products k * q widened and added into the lane's double in element order (the scalar
// chain's operations, cell by cell), rounded back to float. A chunk never straddles blocks,
// so its rows are krow bytes apart from cell c0's; element pairs come as one dword gathered
// per valid lane (masked lanes read nothing). hd 32 (bge-small, all-MiniLM) runs only this:
// one at a time with a software f16 decode, it was 87% of a bert embedding's time.
static inline __m512 attn_tail16_f16(const struct attn_ctx *j, const int sh, int32_t c0, __mmask16 valid,
                                     const float *q, int64_t np, int64_t hdk, __m512 s) {
    const uint8_t *base = attn_k(j, sh, c0);
    const __m512i rows = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32((int)j->krow));
    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(s)), hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(s, 1));
    for (int64_t i = np; i < hdk; i += 2) {
        const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid,
                                                      _mm512_add_epi32(rows, _mm512_set1_epi32((int)(2 * i))), base, 1);
        const __m512 p0 = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(g)), _mm512_set1_ps(q[i]));
        const __m512 p1 = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16))),
                                        _mm512_set1_ps(q[i + 1]));
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(p0)));
        hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(p0, 1)));
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(p1)));
        hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(p1, 1)));
    }
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
}

// Scores of cells [c0, c0 + 16) of nh heads into e (-inf outside the window), each
// dot_f16_ggml(K row, q); mx[h] takes the lane-wise max of head h's scores.
static inline __attribute__((always_inline)) void attn_scores16(const struct attn_ctx *j, const int sh,
                                                                 const int nh, const bool kq, const bool vq,
                                                                 int32_t c0, __m512 *mx) {
    const int64_t hdk = j->hdk, np = hdk & ~(int64_t)63;
    const __mmask16 valid = attn_valid16(j, c0);
    for (int l = 0; l < 16; l++) {
        float *xr = j->xbuf + 16 * lm_reduce16_slot(l); // (nh, 16 rows, 16)
        if (!((valid >> l) & 1)) { // masked lanes: keep lm_reduce_add16's inputs finite
            for (int h = 0; h < nh; h++) _mm512_storeu_ps(xr + 256 * h, _mm512_setzero_ps());
            continue;
        }
        const uint8_t *kr = attn_k(j, sh, c0 + l);
        // a head's K rows are in order within a block (the pool is head-major), but the
        // blocks lie anywhere, 2 KB of a head each (hd 64 f16), too short for the hardware
        // prefetchers to follow over a long window: fetch ATTN_PF_K cells ahead
        if (c0 + l + ATTN_PF_K <= j->pf_p) attn_prefetch(attn_k(j, sh, c0 + l + ATTN_PF_K), j->khead, kq);
        // p.v reads V rows by slot, 64 rows apart, which hardware prefetchers do not
        // follow; stream each row into L2 now, as K is read in order (decode, whose window
        // comes from memory; cold-cache, 512 cells, 2 heads: 42.6 -> 18.5 us per layer). A
        // long window's rows would leave L2 before p.v: p.v fetches those ahead itself.
        if (j->p - j->p0 < ATTN_LONG) attn_prefetch(attn_v(j, sh, c0 + l), j->vhead, vq);
        __m512 acc[LM_ATTN_MAX_HEADS][4];
#pragma GCC unroll 4
        for (int h = 0; h < nh; h++)
#pragma GCC unroll 4
            for (int a = 0; a < 4; a++) acc[h][a] = _mm512_setzero_ps();
        for (int64_t i = 0; i < np; i += 64)
#pragma GCC unroll 4
            for (int a = 0; a < 4; a++) {
                const __m512 kv = attn_load16(kr, kq, i + 16 * a);
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
        if (np < hdk && valid && !kq && !((hdk - np) & 1)) {
            s = attn_tail16_f16(j, sh, c0, valid, j->qf + h * hdk, np, hdk, s);
        } else if (np < hdk) { // the dot product's tail, in double
            float sv[16];
            _mm512_storeu_ps(sv, s);
            for (int l = 0; l < 16; l++) {
                if (!((valid >> l) & 1)) continue;
                const uint8_t *kr = attn_k(j, sh, c0 + l);
                double sum = (double)sv[l];
                for (int64_t i = np; i < hdk; i++)
                    sum += (double)(attn_load1(kr, kq, i) * j->qf[h * hdk + i]);
                sv[l] = (float)sum;
            }
            s = _mm512_loadu_ps(sv);
        }
        s = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), valid, s);
        _mm512_storeu_ps(j->e + h * j->e_stride + (c0 - j->base), s);
        mx[h] = _mm512_max_ps(s, mx[h]); // a NaN score is skipped, as "if (s > mx)" did
    }
}

// the first n < 16 halves at x, then zeros (AVX512F alone has no masked 16-bit load; only an
// f16 V has head sizes that are not multiples of 16)
static inline __m256i attn_load_part(const uint8_t *x, int n) {
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
attn_pv_tile(const struct attn_ctx *j, const int sh, const int nh, const bool vq, const int td, const int nq,
             const int tl, int l0, int m0, int64_t d, int vn) {
    __m512 acc[LM_ATTN_MAX_HEADS][2][4][2]; // [head][lane t][quarter][dims]; <= 16 used
    const uint32_t nwin = (uint32_t)(j->p - j->p0 + 1);
    const int mstep = nq == 4 ? 1 : 2;
    const bool pf = nwin > ATTN_LONG;
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
            const int32_t bq = j->blocks[cq >> sh];
            if (bq < 0) continue; // a hole released the whole block
            // at dim d (for q8_0 a multiple of 32: the tile's dims are one block)
            const uint8_t *vq0 = j->vb + (size_t)bq * j->block_bytes +
                                 (size_t)(cq & ((1 << sh) - 1)) * j->vrow + attn_off(vq, d);
            if (pf && cq + 64 * ATTN_PF_V <= j->p) { // this quarter's rows ATTN_PF_V chunks on
                const int32_t cn = cq + 64 * ATTN_PF_V, bn = j->blocks[cn >> sh];
                // the tile's dims of each row: one line of f16 (as many bytes as the line
                // prefetch fetches) or one 34-byte q8_0 block, which may straddle two
                const uint8_t *vn0 = j->vb + (size_t)(bn < 0 ? 0 : bn) * j->block_bytes +
                                     (size_t)(cn & ((1 << sh) - 1)) * j->vrow + attn_off(vq, d);
#pragma GCC unroll 4
                for (int t = 0; t < tl; t++)
                    attn_prefetch(vn0 + (size_t)(l0 + t) * j->vrow, vq ? sizeof(struct lm_block_q8_0) : 1,
                                  vq);
            }
#pragma GCC unroll 4
            for (int t = 0; t < tl; t++) {
                const int32_t c = cq + l0 + t;
                if (!full && (c < j->p0 || c > j->p ||
                              (j->present && !((j->present[c >> 6] >> (c & 63)) & 1))))
                    continue;
                const uint8_t *vr = vq0 + (size_t)(l0 + t) * j->vrow;
                __m512 vv[2];
#pragma GCC unroll 2
                for (int v = 0; v < td; v++)
                    vv[v] = vq || vn == 16 || v < td - 1
                                ? attn_load16(vr, vq, 16 * v)
                                : _mm512_cvtph_ps(attn_load_part(vr + 32 * v, vn));
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
static inline __attribute__((always_inline)) void attn_pv(const struct attn_ctx *j, const int sh, const int nh,
                                                           const bool vq, const int td, int64_t d, int vn,
                                                           float *out) {
    if (nh >= 3) {
        for (int l0 = 0; l0 < 16; l0++) {
            attn_pv_tile(j, sh, nh, vq, td, 2, 1, l0, 0, d, vn);
            attn_pv_tile(j, sh, nh, vq, td, 2, 1, l0, 1, d, vn);
        }
    } else if (nh == 2) {
        for (int l0 = 0; l0 < 16; l0++) attn_pv_tile(j, sh, 2, vq, td, 4, 1, l0, 0, d, vn);
    } else {
        for (int l0 = 0; l0 < 16; l0 += 2) attn_pv_tile(j, sh, 1, vq, td, 4, 2, l0, 0, d, vn);
    }
    for (int h = 0; h < nh; h++)
        for (int v = 0; v < td; v++)
            _mm512_mask_storeu_ps(out + h * j->hdv + d + 16 * v,
                                  v < td - 1 || vn == 16 ? 0xffff : (__mmask16)((1u << vn) - 1),
                                  attn_tree16(j->xbuf + 512 * h + 16 * v, 32));
}

// A chunk's p.v (kernels.h): per head and output dim one fma chain over the cells in order,
// so V is read once, row after row (16 cells of a block at a time), for every head at once:
// out[h][d, d + 16 (nvc - 1) + vn) of nh heads, nvc vectors (the last of vn dims).
static inline __attribute__((always_inline)) void attn_pv_seq(const struct attn_ctx *j, const int sh, const int nh,
                                                               const bool vq, const int nvc, int64_t d, int vn,
                                                               float *out) {
    __m512 acc[LM_ATTN_MAX_HEADS][4];
#pragma GCC unroll 4
    for (int h = 0; h < nh; h++)
#pragma GCC unroll 4
        for (int v = 0; v < nvc; v++) acc[h][v] = _mm512_setzero_ps();
    for (int32_t c0 = j->base; c0 < j->end; c0 += 16) {
        const __mmask16 valid = attn_valid16(j, c0);
        if (!valid) continue; // (a released block has no held cell)
        const uint8_t *r0 = attn_v(j, sh, c0) + attn_off(vq, d);
        const float *e = j->e + (c0 - j->base);
        for (int l = 0; l < 16; l++) {
            if (!((valid >> l) & 1)) continue;
            const uint8_t *vr = r0 + (size_t)l * j->vrow;
            __m512 vv[4];
#pragma GCC unroll 4
            for (int v = 0; v < nvc; v++)
                vv[v] = vq || vn == 16 || v < nvc - 1 ? attn_load16(vr, vq, 16 * v)
                                                      : _mm512_cvtph_ps(attn_load_part(vr + 32 * v, vn));
#pragma GCC unroll 4
            for (int h = 0; h < nh; h++) {
                const __m512 pb = _mm512_set1_ps(e[h * j->e_stride + l]);
#pragma GCC unroll 4
                for (int v = 0; v < nvc; v++) acc[h][v] = _mm512_fmadd_ps(vv[v], pb, acc[h][v]);
            }
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < nh; h++)
#pragma GCC unroll 4
        for (int v = 0; v < nvc; v++)
            _mm512_mask_storeu_ps(out + h * j->hdv + d + 16 * v,
                                  v < nvc - 1 || vn == 16 ? 0xffff : (__mmask16)((1u << vn) - 1), acc[h][v]);
}

// Attention of nh heads (a compile-time constant after inlining) -> out (nh, hdv).
static inline __attribute__((always_inline)) void attn_heads(const struct attn_ctx *j, const int sh,
                                                              const int nh, const bool kq, const bool vq,
                                                              float *out) {
    // scores, with masked cells of the first/last chunk as -inf
    __m512 mx[LM_ATTN_MAX_HEADS];
    for (int h = 0; h < nh; h++) mx[h] = _mm512_set1_ps(-INFINITY);
    for (int32_t c0 = j->base; c0 < j->end; c0 += 16) attn_scores16(j, sh, nh, kq, vq, c0, mx);
    // softmax; p rounded to f16
    for (int h = 0; h < nh; h++) {
        float *e = j->e + h * j->e_stride;
        float m = _mm512_reduce_max_ps(mx[h]);
        if (!j->part && j->sinks && j->sinks[h] > m) m = j->sinks[h]; // a sink joins the max (as the oracle)
        const __m512 vmx = _mm512_set1_ps(m);
        double sum = 0.0;
        for (int32_t c = 0; c < j->end - j->base; c += 16) {
            const __m512 x = _mm512_loadu_ps(e + c);
            const __mmask16 valid = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
            const __m512 ex = _mm512_maskz_mov_ps(valid, lm_expf_ggml_512(_mm512_sub_ps(x, vmx)));
            _mm512_storeu_ps(e + c, ex);
            sum += (double)_mm512_reduce_add_ps(ex);
        }
        if (j->part) { // a chunk: e stays as it is, the merge normalises (and takes the sink)
            j->part->m[h] = _mm512_reduce_max_ps(mx[h]);
            j->part->s[h] = sum;
            continue;
        }
        if (j->sinks) sum += (double)expf(j->sinks[h] - m);
        const __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
        for (int32_t c = 0; c < j->end - j->base; c += 16)
            _mm512_storeu_ps(e + c, _mm512_cvtph_ps(_mm512_cvtps_ph(
                                        _mm512_mul_ps(_mm512_loadu_ps(e + c), inv),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    }
    if (j->part) { // a chunk: p.v in cell order, 64 output dims at a time, then the rest
        int64_t d = 0;
        for (; d + 64 <= j->hdv; d += 64) attn_pv_seq(j, sh, nh, vq, 4, d, 16, out);
        const int64_t r = j->hdv - d; // 0 .. 63 dims left
        if (r > 48) attn_pv_seq(j, sh, nh, vq, 4, d, (int)(r - 48), out);
        else if (r > 32) attn_pv_seq(j, sh, nh, vq, 3, d, (int)(r - 32), out);
        else if (r > 16) attn_pv_seq(j, sh, nh, vq, 2, d, (int)(r - 16), out);
        else if (r > 0) attn_pv_seq(j, sh, nh, vq, 1, d, (int)r, out);
        return;
    }
    // p.v, 32 output dims at a time, then 16 and the remainder
    int64_t d = 0;
    for (; d + 32 <= j->hdv; d += 32) attn_pv(j, sh, nh, vq, 2, d, 16, out);
    if (d + 16 <= j->hdv) {
        attn_pv(j, sh, nh, vq, 1, d, 16, out);
        d += 16;
    }
    if (d < j->hdv) attn_pv(j, sh, nh, vq, 1, d, (int)(j->hdv - d), out);
}

// One (K type, V type) pair. The block size is a constant for the default 16-cell blocks:
// read from the job, its shift and mask make the attention op 13% slower (Gemma 3 270M,
// 603-token prefill). The context is copied into a local whose address stays here: through
// the caller's pointer, every store to the scratch might change it, and the loops would
// reload its fields (f16 decode at 4096 cells: 6% slower).
#define ATTN_RUN(KQ, VQ)                                                                       \
    static void attn_run_##KQ##VQ(const struct attn_ctx *jc, int shift, int nh, float *out) {  \
        const struct attn_ctx jl = *jc, *j = &jl;                                              \
        if (shift == 4) {                                                                      \
            switch (nh) {                                                                      \
            case 1: attn_heads(j, 4, 1, KQ, VQ, out); break;                                   \
            case 2: attn_heads(j, 4, 2, KQ, VQ, out); break;                                   \
            case 3: attn_heads(j, 4, 3, KQ, VQ, out); break;                                   \
            default: attn_heads(j, 4, 4, KQ, VQ, out); break;                                  \
            }                                                                                  \
        } else {                                                                               \
            switch (nh) {                                                                      \
            case 1: attn_heads(j, shift, 1, KQ, VQ, out); break;                               \
            case 2: attn_heads(j, shift, 2, KQ, VQ, out); break;                               \
            case 3: attn_heads(j, shift, 3, KQ, VQ, out); break;                               \
            default: attn_heads(j, shift, 4, KQ, VQ, out); break;                              \
            }                                                                                  \
        }                                                                                      \
    }
ATTN_RUN(0, 0)
ATTN_RUN(1, 0)
ATTN_RUN(0, 1)
ATTN_RUN(1, 1)
#undef ATTN_RUN

// The table's attn and attn_q8 both: the job's k_q8 / v_q8 pick the loops' copy. A long
// window runs chunk by chunk (lm_attn_chunked, calling back here with part set); each chunk's
// V rows then stream into L2 during its scores (ATTN_LONG), and K's prefetches run on into
// the next chunk.
void lm_attn_avx512(const struct lm_attn_job *job) {
    int32_t k0;
    if (!job->part && lm_attn_chunks(job, &k0) > 1) {
        lm_attn_chunked(job, lm_attn_avx512);
        return;
    }
    const int nh = job->nh;
    const int64_t hdk = job->hdk, hdv = job->hdv;
    const bool kq = job->k_q8, vq = job->v_q8;
    struct attn_ctx j = {
        .kb = job->kb, .vb = job->vb, .block_bytes = job->block_bytes, .blocks = job->blocks,
        .present = job->present, .krow = attn_off(kq, (int64_t)job->kstride),
        .vrow = attn_off(vq, (int64_t)job->vstride), .khead = attn_off(kq, hdk), .vhead = attn_off(vq, hdv),
        .p0 = job->p0, .p = job->p, .pf_p = job->p, .part = job->part, .hdk = hdk, .hdv = hdv,
        .sinks = job->sinks,
    };
    if (job->part) { // the chunk's cells of the window
        const int32_t c0 = job->chunk * LM_ATTN_CHUNK;
        j.p0 = job->p0 > c0 ? job->p0 : c0;
        j.p = job->p < c0 + LM_ATTN_CHUNK - 1 ? job->p : c0 + LM_ATTN_CHUNK - 1;
    }
    j.base = j.p0 & ~15; // 16-cell chunk alignment of the softmax sums
    j.end = (j.p + 16) & ~15;
    // scratch (lm_attn_scratch_floats): xbuf (LM_ATTN_MAX_HEADS, 512), qf (nh, hdk), e (nh, end - base)
    float *s = job->scratch;
    j.xbuf = s;
    s += LM_ATTN_MAX_HEADS * 512;
    float *qf = s;
    s += LM_ATTN_MAX_HEADS * ((hdk + 15) & ~(int64_t)15);
    j.qf = qf;
    j.e = s;
    j.e_stride = (size_t)(j.end - j.base);
    if (kq) {
        memcpy(qf, job->q, (size_t)(nh * hdk) * sizeof(float));
    } else { // q rounded to f16, as llama.cpp's f16 K dot product does
        for (int64_t d = 0; d < nh * hdk; d += 16) {
            const __mmask16 mk = nh * hdk - d >= 16 ? 0xffff : (__mmask16)((1u << (nh * hdk - d)) - 1);
            _mm512_mask_storeu_ps(qf + d, mk, _mm512_cvtph_ps(_mm512_cvtps_ph(
                                                  _mm512_maskz_loadu_ps(mk, job->q + d),
                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
        }
    }
    if (kq && vq) attn_run_11(&j, job->block_shift, nh, job->out);
    else if (kq) attn_run_10(&j, job->block_shift, nh, job->out);
    else if (vq) attn_run_01(&j, job->block_shift, nh, job->out);
    else attn_run_00(&j, job->block_shift, nh, job->out);
}

#endif
