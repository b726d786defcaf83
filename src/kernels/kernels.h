// Kernel dispatch table: dequantize, activation quantization and dot products per
// weight dtype, and the forward pass's row kernels (norms, RoPE, activations, attention).
// One table per ISA (generic, avx2, avx512; kernels.c fills them from the <concern>_<isa>.c
// files); the best one the CPU supports is chosen once at start-up; LUMEN_FORCE_GENERIC=1
// forces the scalar one.
#ifndef LM_KERNELS_KERNELS_H
#define LM_KERNELS_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor/blocks.h"

// x: one row of n elements of the table's dtype -> y (n floats); n % block_size == 0
typedef void (*lm_dequant_fn)(const void *x, float *y, int64_t n);
// x (n floats) -> y: one row quantized to an activation type (q8_0, q8_1, q8_K, f16, bf16, f32)
typedef void (*lm_quant_fn)(const float *x, void *y, int64_t n);
// *s = dot(w, xq): w one weight row of n elements, xq the activation row already
// quantized to lm_vec_dot_type(weight dtype); n % block_size == 0
typedef void (*lm_vec_dot_fn)(int64_t n, float *s, const void *w, const void *xq);

// s[t * ss] = dot(w, xq + t * xs) for t in [0, nt), 1 <= nt <= LM_VEC_DOT_MAX_NT: one weight
// row against several activation rows (prefill), each weight block decoded once. Results
// are bit-identical to vec_dot on each row. NULL in a table: callers loop over vec_dot.
#define LM_VEC_DOT_MAX_NT 8
typedef void (*lm_vec_dot_n_fn)(int64_t n, int nt, float *s, size_t ss, const void *w,
                                const void *xq, size_t xs);

// Multi-token dot against q8_0 activations repacked for VNNI (lm_q8_0_repack_u8): xu rows of
// unsigned bytes (q + 128, row stride xus bytes) and per block pair a 16-float scale vector
// {d(2p) x8, d(2p+1) x8} (row stride dys floats). Same results as vec_dot_n / vec_dot.
typedef void (*lm_vec_dot_n_u8_fn)(int64_t n, int nt, float *s, size_t ss, const void *w,
                                   const uint8_t *xu, size_t xus, const float *dyv, size_t dys);

// ---- Row-interleaved ("il") weights: matmul weights repacked at load into groups of
// LM_IL_ROWS output rows whose bytes the kernels stream linearly, every weight decoded
// once per group and reused for up to LM_IL_MAX_NT tokens. Layouts are ISA-independent
// (il_layout.h); each table's il_gemm computes on them. Numerics per dtype:
//   q8_0, q5_0, q4_0: exact int32 per 32-block, then acc = fma(d_w * d_x, (float)isum, acc) over
//               the blocks in order, acc starting at 0 (ggml's reference order)
//   q4_1, q5_1: exact int32 of the raw quants per 32-block, then acc = fma(d_w * d_x,
//               (float)isum, acc) and acc = fma(m_w, s_x, acc) over the blocks in order
//               (s_x the q8_1 block's f16 sum), acc starting at 0
//   iq4_nl:     q8_0's order, and bit-identical to vec_dot[IQ4_NL] of every table, which
//               follows it too
//   iq4_xs:     bit-identical to vec_dot[IQ4_XS] (exact int32 per super-block, one fma chain)
//   mxfp4:      q8_0's order with d_w = lm_e8m0_half(e) (acc = fma(d_x * d_w, (float)isum,
//               acc)), bit-identical to vec_dot[MXFP4] and vec_dot_n[MXFP4] of every table
//   q2_K..q6_K: bit-identical to vec_dot of the same dtype (exact int32 per super-block,
//               then the single-row float steps)
//   f16:        one accumulator of 16 float lanes per output, lane l taking the elements
//               k = l mod 16 as acc = fma(w[k], x[k], acc) in k order (x the f16-rounded
//               activation), then _mm512_reduce_add_ps's add tree (lm_tree16); the same
//               as vec_dot[F16] of every table, which follows it too (llamafile's sgemm
//               order, which llama.cpp runs for f16). The layout is the file's own.
// Same results for any nt, any table, any thread split.
#define LM_IL_ROWS 16
#define LM_IL_MAX_NT 16
// wg: one group in the dtype's il layout; xa: nt activation rows in the dtype's il activation
// layout (lm_il_act_*), xas bytes apart -> y[t * ys + r] for r < LM_IL_ROWS, t < nt.
typedef void (*lm_il_gemm_fn)(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                              const void *xa, size_t xas);

// AMX (prefill): il groups n_groups x any number of tokens on AMX-INT8 tiles, for CPUs and
// kernels that grant them. Rows [0, 16 n_groups) of the weight's il layout (groups
// group_bytes apart from wg) against nt tokens in AMX activation records (lm_il_act_amx)
// -> y[t * ys + r]. Same results as il_gemm on the same rows.
typedef void (*lm_il_gemm_amx_fn)(int64_t n_in, int64_t n_groups, size_t group_bytes, int64_t nt,
                                  float *y, size_t ys, const void *wg, const void *xt);
// Token counts from which matmul takes il_gemm_amx (lm_matmul_plan): below, the per-call
// weight split (il_amx.c) is not paid back. Measured with `bench/ab.py --parts parallel`
// (Llama 3.2 1B Q4_K_M, 2 threads, batched decode of N streams = N-token matmuls), AMX
// from N tokens against VNNI: N = 8 0.44x, N = 16 0.72x, N = 32 1.10x.
#define LM_IL_AMX_MIN_NT 32

// Decode helper for in-place il layouts (lm_il_in_place): rows [0, n_rows) of the weight
// starting at w (file rows, n_in elements each) against nt <= LM_IL_GEMV_MAX_NT activation
// rows -> y[t * ys + r]. Same results as il_gemm on the same rows; free to visit the rows
// in any order (e.g. several far-apart streams). NULL in a table: loop il_gemm over groups.
#define LM_IL_GEMV_MAX_NT 2
typedef void (*lm_il_gemv_fn)(int64_t n_in, int64_t n_rows, int nt, float *y, size_t ys,
                              const void *w, const void *xa, size_t xas);

// ---- Row kernels of the forward pass: norms, RoPE, gated activations, f16 rows, attention.
// Each one's _generic version (rows_generic.c, attn_generic.c) is the statement of its float
// operations and their order: the ISA versions compute the same operations (16-lane
// accumulators, _mm512_reduce_add_ps's tree as lm_tree16, the ggml_v_expf polynomial as
// lm_expf_ggml, the same f16 roundings), so every table gives the same bits. The orders
// are those of llama.cpp's CPU backend where lumen agrees with it (see each entry).

// y (n) = x (n) * s [* w], s = 1 / sqrtf((float)(ss / n) + eps); y may be x; w may be NULL.
// ss: the float squares x[j] * x[j] widened to double, for j < n - n % 16 in 16 double lanes
// (lane j % 16), lanes l and l + 8 added, then _mm512_reduce_add_pd's tree (l + 4, then
// l + 2, then l + 1); then the rest one by one. ggml adds them one by one in double: 16
// lanes move the sum by ~1e-16 relative, far below the float rounding of s.
typedef void (*lm_rmsnorm_fn)(float *y, const float *x, const float *w, int64_t n, float eps);

// RoPE of n_rows rows (stride floats apart), dims [0, n_rot) of each, by cs: n_rot / 2
// (cos, sin) pairs. Pair i is (x[i], x[i + n_rot/2]) if neox, else (x[2i], x[2i + 1]):
//   x0' = fmaf(x0, cos, -(x1 * sin)),  x1' = fmaf(x0, sin, x1 * cos)
// the contraction GCC made of ggml's "x0*cos - x1*sin, x0*sin + x1*cos" in the loops this
// replaced (-march=native; scalar and vectorized alike), kept so that logits keep their bits.
typedef void (*lm_rope_fn)(float *x, int64_t n_rows, int64_t stride, const float *cs,
                           int64_t n_rot, bool neox);

// g[j] = gelu(g[j]) * u[j] for j < n, GELU by table as ggml's GGML_GELU_FP16: x >= 10 -> x;
// x > -10 -> table[f16 bits of x, rounded to nearest even]; else (and NaN) 0. table: 65536
// floats (the runtime builds it).
typedef void (*lm_geglu_fn)(float *g, const float *u, int64_t n, const float *table);
// g[j] = silu(g[j]) * u[j] for j in [a, b) of a row of F, as ggml_vec_swiglu_f32: the first
// F - F % 16 elements as (x / (1 + lm_expf_ggml(0 - x))) * u, the rest as
// (x / (1 + expf(-x))) * u. Element-wise, so any split of the row gives the same values.
typedef void (*lm_swiglu_fn)(float *g, const float *u, int64_t a, int64_t b, int64_t F);
// gpt-oss's clamped SwiGLU (ggml_swiglu_oai) for j in [a, b): x = min(g[j], limit),
// y = clamp(u[j], -limit, limit), g[j] = (x / (1 + expf(alpha * -x))) * (y + 1), libm expf as
// ggml's CPU op (scalar there too). Element-wise: any split gives the same values. Every
// table holds the generic one (no vector form: ggml has none to match).
typedef void (*lm_swiglu_oai_fn)(float *g, const float *u, int64_t a, int64_t b, float alpha,
                                 float limit);
// Encoders (bert): y (n) = ((x - mean) * s) * w + b, ggml_norm then ggml_mul and ggml_add:
// mean = (float)(double sum of x) / n, d = x - mean (float), var = (float)(double sum of the
// float d * d / n), s = 1 / sqrtf(var + eps); each product and sum rounded (no fma). y may
// be x; w, b may be NULL. The sum of x: j < n - n % 16 in 16 double lanes and rmsnorm's tree
// (above), then the rest one by one (ggml adds them one by one: ~1e-16 relative); the sum of
// the squares: each 16-chunk's floats by lm_tree16, widened and added in chunk order, then the
// rest one by one (ggml_vec_cvar_f32's AVX-512 order). Generic, AVX2 and AVX-512 versions.
typedef void (*lm_layernorm_fn)(float *y, const float *x, const float *w, const float *b,
                                int64_t n, float eps);
// g[j] = gelu(g[j]) for j < n (no gate), the table and ranges of lm_geglu_fn (ggml_gelu).
// Generic, AVX2 and AVX-512 versions.
typedef void (*lm_gelu_fn)(float *g, int64_t n, const float *table);
// y (n halves) = x (n floats) rounded to nearest even (lm_f32_to_f16, F16C's rounding)
typedef void (*lm_f32_to_f16_fn)(lm_f16 *y, const float *x, int64_t n);

// Attention of one token for nh query heads sharing a KV head, over its sequence's cells
// [p0, p] read through a block table (runtime/kv_cache.h): cell c is row c & (2^block_shift
// - 1) of block blocks[c >> block_shift], blocks of at least 16 cells.
//   out (nh, hdv) = softmax(q (nh, hdk) . K^T) . V
// in the float order of llama.cpp's single-token f16-KV path (attn_generic.c states it):
//   q.k      q rounded to f16; per cell 4 accumulators x 16 lanes over 64-element steps
//            (fmaf, lane l of accumulator a takes element 64 i + 16 a + l), (acc0 + acc2) +
//            (acc1 + acc3), lm_tree16, then the float products of the elements past
//            the last whole 64 added in double
//   softmax  max of the scores; e = lm_expf_ggml(s - max), summed per 16-cell chunk
//            (lm_tree16, chunks aligned to 16 cells) into a double; p = f16(e * (float)(1/sum))
//   p.v      per output dim 64 slot accumulators (cell % 64; start -0.0 if the window
//            reaches the slot, else +0.0), fmaf over the slot's cells in order, then
//            (slot l + slot l+32) + (slot l+16 + slot l+48) for l < 16 and lm_tree16
// Cells outside [p0, p] and cells whose present bit is clear (holes) are skipped: they
// contribute exact zeros. Results depend only on cell positions, never on where the
// blocks lie, so a sequence's outputs do not depend on what shares its batch.
// query heads sharing a KV head done in one job: each K / V row is read and converted once
// for all of them (sizes the scratch)
#define LM_ATTN_MAX_HEADS 4
struct lm_attn_part;
struct lm_attn_job {
    const uint8_t *kb, *vb;   // block 0's K / V rows of this layer and KV head (pool base +
                              // layer offset + the head's rows: the pool is head-major, so
                              // kstride = hdk; any stride works); block b is b * block_bytes on
    size_t block_bytes;       // bytes from one block to the next
    const int32_t *blocks;    // the sequence's block table (-1: a block wholly removed)
    int block_shift;          // log2 of cells per block (>= 4)
    const uint64_t *present;  // bit per cell: held; NULL: every cell of [p0, p] is held
    size_t kstride, vstride;  // elements from one cell's K / V row to the next
    int32_t p0, p;            // the window: cells [p0, p], p >= p0 >= 0; cell p is held
    int32_t hdk, hdv;         // head sizes
    int nh;                   // query heads, 1 .. LM_ATTN_MAX_HEADS
    const float *q;           // (nh, hdk) queries
    float *out;               // (nh, hdv)
    float *scratch;           // lm_attn_scratch_floats(hdk, hdv, p + 1) floats, 64-byte aligned
    bool k_q8, v_q8;          // K / V rows are q8_0 (blocks of 32 values, 34 bytes), else f16
    const float *sinks;  // (nh) per query head, or NULL
    // sinks (gpt-oss's learned attention sinks, ggml's soft_max with sinks): one logit per
    // head that takes part in the max, and whose expf(sink - max) (libm) is added to the
    // double sum after the cells'; it has no V row, so it only scales the probabilities down.
    // A chunked window (below) leaves the sink out of its chunks' partials: the merge takes
    // it (in the max, and lm_expf_ggml(sink - M) in the sum)
    // one chunk of a long window only (below): NULL computes the whole window into out
    struct lm_attn_part *part;
    int32_t chunk;            // with part: the chunk's index (cells [chunk C, chunk C + C))
};
// A q8_0 K or V (a Q8_0 KV cache, docs/kv_cache.md) goes to the table's attn_q8, which also
// takes f16 rows. Strides stay in elements (a multiple of 32: cell row r starts
// r * stride / 32 * 34 bytes on), kb / vb point at the head's first q8_0 block, and head
// sizes are multiples of 32. The order above holds with the rows' values dequantized (d * q,
// exact in float), except that q stays float when K is q8_0: the f16 rounding of q is
// llama.cpp's f16-K dot product, whose q8_0-K path instead quantizes q to q8_0; lumen keeps
// the more accurate float. p is still rounded to f16.
typedef void (*lm_attn_fn)(const struct lm_attn_job *j);
// Floats of scratch one attention job needs (any table) for windows ending below n_cells.
size_t lm_attn_scratch_floats(int64_t hdk, int64_t hdv, int64_t n_cells);
// Long windows (flash-decoding). A window of more than LM_ATTN_CHUNK cells (p - p0 + 1 >
// LM_ATTN_CHUNK) is cut at the multiples of LM_ATTN_CHUNK (positions: never the thread count
// or the batch): chunk k is [k C, k C + C) within [p0, p]. Each chunk runs the order above on
// its cells, but its softmax stops short: m_k = its max score, e = lm_expf_ggml(s - m_k)
// summed per 16 cells into a double s_k, and p = e itself (no 1 / sum, no f16 rounding), so
// o_k (nh, hdv) = e . V unnormalised, each o_k[h][d] one fmaf chain from +0.0f over the
// chunk's held cells in order (V read once, row by row). lm_attn_merge then makes out, chunks
// in order. Windows of LM_ATTN_CHUNK cells or fewer keep the order above, unchunked (their
// results do not move). A job with part set computes
// chunk `chunk` of its window only: o_k into out, m_k and s_k into *part (a chunk with no held
// cell: m_k = -inf, s_k = 0).
#define LM_ATTN_CHUNK 512
struct lm_attn_part {
    float m[LM_ATTN_MAX_HEADS];  // the chunk's max score per head (-inf: no held cell)
    double s[LM_ATTN_MAX_HEADS]; // sum of its e
};
// The merge, the same scalar code under every table: per head, M = the largest m_k (and
// sinks[h], when sinks); each chunk with m_k > -inf has w_k = lm_expf_ggml(m_k - M); in chunk
// order, S += s_k * (double)w_k (from 0.0) and o[d] = fmaf(o_k[d], w_k, o[d]) (from 0.0f);
// then S += (double)lm_expf_ggml(sinks[h] - M) when sinks (an attention sink: a logit with no
// value, counted once for the window, never per chunk); out[d] = o[d] * (float)(1 / S).
// part[k] and o + k * o_stride (nh, hdv) are chunk k's, for n chunks; sinks (nh) or NULL;
// out (nh, hdv).
void lm_attn_merge(int nh, int64_t hdv, int n, const struct lm_attn_part *part, const float *o,
                   size_t o_stride, const float *sinks, float *out);
// Chunks of j's window: [first, first + count) (count 1 for windows of LM_ATTN_CHUNK cells
// or fewer: the job is not chunked).
int32_t lm_attn_chunks(const struct lm_attn_job *j, int32_t *first);
// A whole long window through fn's chunk jobs (scratch's tail holds the partials), then
// lm_attn_merge into j->out: what every table's attn does with a long window and no part.
void lm_attn_chunked(const struct lm_attn_job *j, lm_attn_fn fn);
// Prefill tiles (runtime/ops.c). The jobs of nr query rows (any windows and sequences, one
// table function fn, the same hdk / hdv) run their long windows chunk-major: for each chunk
// index, the chunk of every row that has it, rows in order; then each row's merge. A chunk's
// K / V cells (LM_ATTN_CHUNK rows of one KV head, 64-256 KB) come from memory once and from
// L2 for the tile's other rows, where one row at a time streams its whole window from memory
// (a 16k prompt re-read K / V once per query row). Each row's chunks, partials and merge are
// those of lm_attn_chunked, and a row of LM_ATTN_CHUNK cells or fewer runs whole (fn alone),
// so every row's out has exactly the bits of fn(rows[r]) alone: prefill = decode = any tile.
// The rows' own scratch and part are not used: scratch (64-byte aligned) holds
// lm_attn_tile_scratch_floats(hdk, hdv, n_cells, nr) floats for windows ending below n_cells.
// Each chunk index's rows go to tfn together (the table's attn_tile; NULL: fn row by row).
#define LM_ATTN_TILE 8
// One chunk of a tile's rows: rows[r] (nr <= LM_ATTN_TILE, part set, the same chunk) each get
// exactly the bits of the table's attn_q8 on rows[r] alone (out and *part), their scratch
// used as that would; tile (64-byte aligned) holds lm_attn_tile_chunk_floats(hdk, nr) floats.
// Generic: the rows one by one. AVX-512 (attn_tile_avx512.c): rows of one sequence (the same
// pool, block table, holes, head count, hdk a multiple of 16) read each K row once per tile,
// the 16 cells of a group in lanes, the q.k chain of kernels.h run vertically (the same bits).
typedef void (*lm_attn_tile_fn)(const struct lm_attn_job *rows, int nr, float *tile);
size_t lm_attn_tile_chunk_floats(int64_t hdk, int nr);
size_t lm_attn_tile_scratch_floats(int64_t hdk, int64_t hdv, int64_t n_cells, int nr);
void lm_attn_tile(const struct lm_attn_job *rows, int nr, lm_attn_fn fn, lm_attn_tile_fn tfn, float *scratch);

// ---- Top-k selection: the k largest logits of a row, for the sampler and for the LM head's
// row pass, which selects while each chunk of logits it wrote is still in L1 (runtime/ops.c).
// Candidates rank by logit descending, then by id ascending, NaN ranking as -inf: a strict
// total order, so the k kept and their order do not depend on how a row is cut into spans,
// in which order the spans come, or how partial selections are merged. Every table gives
// the same selection (the ISA versions of topk_span only skip values that cannot enter).
struct lm_topk_cand {
    int32_t id;
    float logit;
};
struct lm_topk {
    struct lm_topk_cand *c; // (k) a heap while pushing, the worst kept at c[0]
    int32_t k, n;           // capacity, kept so far
};
// Empties t over buf (k entries, k >= 0).
void lm_topk_reset(struct lm_topk *t, struct lm_topk_cand *buf, int32_t k);
// Offers one candidate.
void lm_topk_push(struct lm_topk *t, int32_t id, float logit);
// Offers every candidate of src (a heap or sorted) to dst.
void lm_topk_merge(struct lm_topk *dst, const struct lm_topk *src);
// Sorts the kept candidates best first (t->c[0 .. t->n)); no push after this.
void lm_topk_sort(struct lm_topk *t);
// Offers x[i] as candidate id0 + i for i < n.
typedef void (*lm_topk_span_fn)(struct lm_topk *t, const float *x, int32_t id0, int64_t n);

struct lm_kernels {
    const char *name;                      // "generic", "avx2", "avx512", "avx512_vnni"
    lm_dequant_fn dequant[LM_DTYPE_COUNT]; // indexed by the weight dtype
    lm_quant_fn quant[LM_DTYPE_COUNT];     // indexed by the activation dtype produced
    lm_vec_dot_fn vec_dot[LM_DTYPE_COUNT]; // indexed by the weight dtype
    lm_vec_dot_n_fn vec_dot_n[LM_DTYPE_COUNT]; // multi-token variants (may be NULL)
    lm_vec_dot_n_u8_fn vec_dot_n_u8[LM_DTYPE_COUNT]; // on repacked q8_0 activations (may be NULL)
    lm_il_gemm_fn il_gemm[LM_DTYPE_COUNT]; // on il weights (set for every lm_il_supported dtype
                                           // but iq4_nl / iq4_xs in the AVX2 table: NULL)
    lm_il_gemv_fn il_gemv[LM_DTYPE_COUNT]; // decode on in-place il weights (may be NULL)
    lm_il_gemm_amx_fn il_gemm_amx[LM_DTYPE_COUNT]; // on AMX tiles (NULL unless the CPU and
                                                   // OS allow AMX; LUMEN_NO_AMX=1: NULL)
    // row kernels (set in every table)
    lm_rmsnorm_fn rmsnorm;
    lm_rope_fn rope;
    lm_geglu_fn geglu;
    lm_swiglu_fn swiglu;
    lm_f32_to_f16_fn f32_to_f16;
    lm_attn_fn attn;
    lm_attn_fn attn_q8;     // jobs with k_q8 or v_q8 (and f16 ones)
    lm_topk_span_fn topk_span;
    lm_swiglu_oai_fn swiglu_oai;
    lm_layernorm_fn layernorm; // encoders (bert)
    lm_gelu_fn gelu;
    lm_attn_tile_fn attn_tile; // a prefill tile's chunk (lm_attn_tile), f16 and q8_0 rows
};

// True if weight (n_out, n_in) of dtype t has an il layout: q8_0, q5_0, q4_0, q4_1, q5_1,
// q2_K..q6_K, f16 with n_out % LM_IL_ROWS == 0 (and n_in a whole number of blocks).
bool lm_il_supported(enum lm_dtype t, int64_t n_out, int64_t n_in);
// True if t's il layout is the file layout (f16 with contiguous rows): no copy needed.
bool lm_il_in_place(enum lm_dtype t, size_t row_bytes, int64_t n_in);
// Bytes of one group (LM_IL_ROWS rows of n_in elements) in t's il layout.
size_t lm_il_group_bytes(enum lm_dtype t, int64_t n_in);
// LM_IL_ROWS consecutive rows at src (row_bytes apart, ggml layout) -> one group at dst.
void lm_il_pack_group(enum lm_dtype t, void *dst, const void *src, size_t row_bytes, int64_t n_in);
// Activation rows for t's il kernels, made from the lm_vec_dot_type(t) row xq (n_in elements):
// q8_0/q5_0/q4_0 -> "xq8" rows, q4_1/q5_1 -> "xq81" rows (layouts in il_layout.h); f16 -> f32 rows; k-quants -> the q8_K
// row itself.
size_t lm_il_act_row_bytes(enum lm_dtype t, int64_t n_in);
void lm_il_act_from(enum lm_dtype t, const void *xq, int64_t n_in, void *xa);
// q8_K activation rows as AMX tile records: record (T, i) for tokens 16T..16T+15 and
// super-block i sits LM_IL_AMX_REC bytes apart at T * (n_in / 256) + i, holding qs as
// [column step 0..3][token 0..15][64 bytes] (four 16 x 64 A tiles), then the 16 tokens' d
// (float), then their bsums ([token][16] int16). lm_il_act_amx writes token t's row xq into the records at xt; xq NULL writes
// zeros, for the rows that pad the last record past the batch (their results are dropped;
// zeros keep the kernel's float steps off stale, possibly subnormal, bytes).
#define LM_IL_AMX_REC (4096 + 64 + 512)
size_t lm_il_act_amx_bytes(int64_t n_rows, int64_t n_in);
void lm_il_act_amx(const void *xq, int64_t n_in, int64_t t, void *xt);

// q8_0 row (n elements) -> xu (n bytes, q + 128) and dyv ((n/64 rounded up) x 16 floats;
// a lone last block gets zero scales for its missing partner).
void lm_q8_0_repack_u8(const void *xq, int64_t n, uint8_t *xu, float *dyv);

// Activation dtype the dot product of weight dtype t consumes (as llama.cpp's CPU
// backend does, so numerics match): q4_0/q5_0/q8_0 -> q8_0, q4_1/q5_1 -> q8_1,
// k-quants -> q8_K, f16 -> f16, bf16 -> bf16, f32 -> f32; iq4_nl -> q8_0, iq4_xs -> q8_K,
// mxfp4 -> q8_0.
enum lm_dtype lm_vec_dot_type(enum lm_dtype t);

// Tables. lm_kernels_avx2/avx512 return NULL if not compiled in or the CPU lacks the ISA.
const struct lm_kernels *lm_kernels_generic(void);
const struct lm_kernels *lm_kernels_avx2(void);
const struct lm_kernels *lm_kernels_avx512(void);
// Best available table (cached); honours LUMEN_FORCE_GENERIC=1 and LUMEN_ISA=generic|avx2|avx512.
const struct lm_kernels *lm_kernels_best(void);
// Why lm_kernels_pick() chose its table ("cpu_feature avx512f+bw+vl+dq+vnni", "forced ...").
const char *lm_kernels_reason(void);
// The choice lm_kernels_best() makes, re-read from the environment on every call (uncached;
// for tests and tools). Unsupported LUMEN_ISA values fall back with a warning on stderr.
const struct lm_kernels *lm_kernels_pick(void);

// y[r - r0] = dot(W row r, xq) for r in [r0, r1).
// W: (n_rows, n_in) of dtype t, rows row_bytes apart; xq: activation row in lm_vec_dot_type(t).
void lm_matvec_rows(const struct lm_kernels *k, enum lm_dtype t, const void *W, size_t row_bytes,
                    int64_t n_in, const void *xq, float *y, int64_t r0, int64_t r1);

#endif
