// Kernel dispatch table: dequantize, activation quantization and dot products per
// weight dtype. One table per ISA (generic, avx2, avx512); the best one the CPU
// supports is chosen once at start-up; LUMEN_FORCE_GENERIC=1 forces the scalar one.
#ifndef LM_KERNELS_KERNELS_H
#define LM_KERNELS_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor/dtype.h"

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
// (kernels_il.c); each table's il_gemm computes on them. Numerics per dtype:
//   q8_0, q5_0: exact int32 per 32-block, then acc = fma(d_w * d_x, (float)isum, acc) over
//               the blocks in order, acc starting at 0 (ggml's reference order)
//   q4_K, q6_K: bit-identical to vec_dot of the same dtype (exact int32 per super-block,
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

// Decode helper for in-place il layouts (lm_il_in_place): rows [0, n_rows) of the weight
// starting at w (file rows, n_in elements each) against nt <= LM_IL_GEMV_MAX_NT activation
// rows -> y[t * ys + r]. Same results as il_gemm on the same rows; free to visit the rows
// in any order (e.g. several far-apart streams). NULL in a table: loop il_gemm over groups.
#define LM_IL_GEMV_MAX_NT 2
typedef void (*lm_il_gemv_fn)(int64_t n_in, int64_t n_rows, int nt, float *y, size_t ys,
                              const void *w, const void *xa, size_t xas);

struct lm_kernels {
    const char *name;                      // "generic", "avx2", "avx512", "avx512_vnni"
    lm_dequant_fn dequant[LM_DTYPE_COUNT]; // indexed by the weight dtype
    lm_quant_fn quant[LM_DTYPE_COUNT];     // indexed by the activation dtype produced
    lm_vec_dot_fn vec_dot[LM_DTYPE_COUNT]; // indexed by the weight dtype
    lm_vec_dot_n_fn vec_dot_n[LM_DTYPE_COUNT]; // multi-token variants (may be NULL)
    lm_vec_dot_n_u8_fn vec_dot_n_u8[LM_DTYPE_COUNT]; // on repacked q8_0 activations (may be NULL)
    lm_il_gemm_fn il_gemm[LM_DTYPE_COUNT]; // on il weights (set for every lm_il_supported dtype)
    lm_il_gemv_fn il_gemv[LM_DTYPE_COUNT]; // decode on in-place il weights (may be NULL)
};

// True if weight (n_out, n_in) of dtype t has an il layout: q8_0, q5_0, q4_K, q6_K, f16 with
// n_out % LM_IL_ROWS == 0 (and n_in a whole number of blocks).
bool lm_il_supported(enum lm_dtype t, int64_t n_out, int64_t n_in);
// True if t's il layout is the file layout (f16 with contiguous rows): no copy needed.
bool lm_il_in_place(enum lm_dtype t, size_t row_bytes, int64_t n_in);
// Bytes of one group (LM_IL_ROWS rows of n_in elements) in t's il layout.
size_t lm_il_group_bytes(enum lm_dtype t, int64_t n_in);
// LM_IL_ROWS consecutive rows at src (row_bytes apart, ggml layout) -> one group at dst.
void lm_il_pack_group(enum lm_dtype t, void *dst, const void *src, size_t row_bytes, int64_t n_in);
// Activation rows for t's il kernels, made from the lm_vec_dot_type(t) row xq (n_in elements):
// q8_0/q5_0 -> "xq8" rows (layout in kernels_il.c); f16 -> f32 rows; k-quants -> the q8_K
// row itself.
size_t lm_il_act_row_bytes(enum lm_dtype t, int64_t n_in);
void lm_il_act_from(enum lm_dtype t, const void *xq, int64_t n_in, void *xa);

// q8_0 row (n elements) -> xu (n bytes, q + 128) and dyv ((n/64 rounded up) x 16 floats;
// a lone last block gets zero scales for its missing partner).
void lm_q8_0_repack_u8(const void *xq, int64_t n, uint8_t *xu, float *dyv);

// Activation dtype the dot product of weight dtype t consumes (as llama.cpp's CPU
// backend does, so numerics match): q4_0/q5_0/q8_0 -> q8_0, q4_1/q5_1 -> q8_1,
// k-quants -> q8_K, f16 -> f16, bf16 -> bf16, f32 -> f32.
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
