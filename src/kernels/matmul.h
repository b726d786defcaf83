// Matmul of weights that share one input, as one call that also names its path: the
// activation-quantization plan, the kernel path per weight dtype and layout, the row-range
// compute, and the workspace of activation buffers. No threads here: callers split rows.
#ifndef LM_KERNELS_MATMUL_H
#define LM_KERNELS_MATMUL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "kernels/kernels.h"
#include "tensor/weight.h"

// Weights one plan takes (fused QKV: 3).
#define LM_MATMUL_MAX_W 4
// Batches up to this many rows quantize their activations per thread (redundantly, into
// the thread's own buffers) instead of splitting the work and waiting at a barrier:
// cheaper for decode.
#define LM_PRIVATE_QUANT_ROWS 4
// lm_matmul_rows takes row ranges in multiples of this whenever the weight's n_out is one
// (il groups stay whole).
#define LM_MATMUL_ROW_ALIGN LM_IL_ROWS

// ---------------------------------------------------------------- paths

// How one weight's rows are computed (lm_matmul_path_name: the profiler's label).
enum lm_matmul_path {
    LM_MATMUL_IL16 = 0,   // "il16": il layout, groups of 16 rows x tiles of up to 16 tokens (il_gemm)
    LM_MATMUL_IL_GEMV,    // "il_gemv": il layout that is the file's (f16), <= LM_IL_GEMV_MAX_NT
                          //   tokens: il_gemv streams the row range
    LM_MATMUL_GEMM_U8,    // "gemm_u8": file layout, q8_0 activations repacked to u8
                          //   (vec_dot_n_u8): blocks of 16 rows x tiles of 8 tokens, any batch
    LM_MATMUL_MULTITOKEN, // "multitoken": file layout, > LM_PRIVATE_QUANT_ROWS tokens: blocks
                          //   of 16 rows x tiles of 8 tokens (vec_dot_n)
    LM_MATMUL_PER_ROW_N,  // "per_row_n": file layout, 2..LM_PRIVATE_QUANT_ROWS tokens: one
                          //   vec_dot_n per row over all tokens
    LM_MATMUL_PER_ROW,    // "per_row": one vec_dot per (row, token)
    LM_MATMUL_IL_AMX,     // "il_amx": il layout, >= LM_IL_AMX_MIN_NT tokens on AMX tiles
                          //   (il_gemm_amx): the row range in one call, activations as records
    LM_MATMUL_PATH_COUNT
};
const char *lm_matmul_path_name(enum lm_matmul_path p);

// The decision of one matmul call: what the profiler reports (lm_matmul_decision_label).
struct lm_matmul_decision {
    const char *kern; // kernel table name ("avx512", "avx2", "generic")
    int n_w;
    int64_t n_rows;   // activation rows (tokens)
    const struct lm_weight *w[LM_MATMUL_MAX_W];
    enum lm_matmul_path path[LM_MATMUL_MAX_W];
    const char *name[LM_MATMUL_MAX_W]; // lm_matmul_path_name(path[j])
};
// "<dtypes>_<kern>_<paths>": the distinct dtypes and paths in weight order, joined by '+'
// ("q5_0+q8_0_avx512_il16", "f16_avx512_il_gemv"). Returns the length (truncated to n - 1).
size_t lm_matmul_decision_label(const struct lm_matmul_decision *d, char *buf, size_t n);

// ---------------------------------------------------------------- workspace

// Activation buffers for matmuls of up to n_rows rows of up to n_in elements, sized once
// (no allocation in the hot path): shared rows for large batches, and LM_PRIVATE_QUANT_ROWS
// rows per thread for small ones.
struct lm_matmul_ws_params {
    int n_threads;
    int64_t n_rows; // the widest batch
    int64_t n_in;   // the widest matmul input
    bool f16_il;    // some f16 weight runs on its il layout (wider il activation rows)
    bool q81_il;    // some q4_1 / q5_1 weight has an il layout ("xq81" rows, xil81)
    bool amx;       // some k-quant weight has an il layout (AMX activation records, if
                    // the kernel table has il_gemm_amx)
};
struct lm_matmul_ws {
    struct lm_matmul_ws_params p;
    // activations quantized to each activation dtype (q8_0, q8_1, q8_K, f16, bf16):
    // xq[dtype] (n_rows, row bytes of n_in); xq_priv[ith * LM_DTYPE_COUNT + dtype]
    // (LM_PRIVATE_QUANT_ROWS, row bytes)
    void *xq[LM_DTYPE_COUNT];
    void **xq_priv;
    // q8_0 rows repacked for the VNNI multi-token kernels (lm_q8_0_repack_u8): xu8 (n_rows,
    // xu8_stride bytes), xdyv (n_rows, xdyv_stride floats); _priv: per thread
    uint8_t *xu8, *xu8_priv;
    float *xdyv, *xdyv_priv;
    size_t xu8_stride, xdyv_stride;
    // rows for the il kernels (lm_il_act_from): "xq8" rows of q8_0 / q5_0 weights, f32 rows
    // of f16 ones: xil (n_rows, xil_stride bytes), xil_priv per thread
    uint8_t *xil, *xil_priv;
    size_t xil_stride;
    // "xq81" rows of q4_1 / q5_1 il weights (lm_il_act_from), if p.q81_il: their own buffer,
    // so they can meet q8_0 / q5_0 / f16 il weights in one call: xil81 (n_rows,
    // xil81_stride bytes), xil81_priv per thread
    uint8_t *xil81, *xil81_priv;
    size_t xil81_stride;
    // q8_K rows as AMX tile records (lm_il_act_amx), if p.amx: (n_rows, n_in)
    uint8_t *xamx;
    uint64_t bytes; // allocated
};
// Widens p to fit matmuls on weight w: its input, and the il activation rows its layout
// reads. Call it for every matmul weight a workspace serves.
void lm_matmul_ws_fit(struct lm_matmul_ws_params *p, const struct lm_weight *w);
// Bytes lm_matmul_ws_init allocates for p.
uint64_t lm_matmul_ws_bytes(const struct lm_matmul_ws_params *p);
enum lm_status lm_matmul_ws_init(struct lm_matmul_ws *ws, const struct lm_matmul_ws_params *p);
void lm_matmul_ws_free(struct lm_matmul_ws *ws);

// ---------------------------------------------------------------- plan + compute
// One thread's view of one call. Every thread of a parallel matmul plans the same call
// (same decision; its own private buffers for small batches), quantizes the rows
// [r0, r1) it is given, waits at a barrier if p.shared, then computes its output rows:
//
//   lm_matmul_plan(&p, k, ws, Ws, n_w, X, n_rows, ith);
//   lm_matmul_quantize(&p, r0, r1);    // all rows if !p.shared, else this thread's split
//   if (p.shared) barrier;
//   lm_matmul_rows(&p, j, Ys[j], a, b); // any row ranges of any weight, any order
//
// Results do not depend on n_rows, the row split or the thread count (kernels.h).

struct lm_matmul_quant { // one activation dtype to produce
    enum lm_dtype vt;
    char *buf;     // rows of qrow bytes
    size_t qrow;
    bool widen;    // f16 rows also widened to f32 il rows
    bool u8;       // q8_0 rows also repacked for vec_dot_n_u8
    bool xq8;      // q8_0 rows also made "xq8" il rows
    bool xq81;     // q8_1 rows also made "xq81" il rows
    bool amx;      // q8_K rows also made AMX tile records
};
struct lm_matmul_plan {
    struct lm_matmul_decision d;
    bool shared; // activations in buffers shared by all threads: quantize splits the rows,
                 // then a barrier before lm_matmul_rows
    // internals
    const struct lm_kernels *k;
    const float *X;
    int64_t n_in;
    const char *xa[LM_MATMUL_MAX_W]; // weight j's activation rows, xrow[j] bytes apart
    size_t xrow[LM_MATMUL_MAX_W];
    uint8_t *xu;  // u8 rows (xu_stride bytes) and their scales (xdy_stride floats)
    float *xdy;
    size_t xu_stride, xdy_stride;
    uint8_t *xil; // il rows, xil_stride bytes apart
    size_t xil_stride;
    uint8_t *xil81; // xq81 rows, xil81_stride bytes apart
    size_t xil81_stride;
    uint8_t *xamx; // AMX activation records (lm_il_act_amx)
    int n_q;
    struct lm_matmul_quant q[LM_MATMUL_MAX_W];
};

// Ws[j] (n_out_j, n_in) @ X (n_rows, n_in) for j < n_w, all with the same n_in, computed
// with kernel table k on thread ith's buffers of ws: the decision and the activation plan.
// q8_0 / q5_0 and f16 weights on il layouts meeting in one call: the one il activation
// buffer holds one kind of row, so the f16 ones take their file-layout path (same numerics,
// kernels.h).
void lm_matmul_plan(struct lm_matmul_plan *p, const struct lm_kernels *k,
                    const struct lm_matmul_ws *ws, const struct lm_weight *const *Ws, int n_w,
                    const float *X, int64_t n_rows, int ith);
// Quantizes activation rows [r0, r1) of X into the planned buffers.
void lm_matmul_quantize(const struct lm_matmul_plan *p, int64_t r0, int64_t r1);
// Y (n_rows, n_out) columns [a, b) = rows [a, b) of weight j for every token; a and b are
// multiples of LM_MATMUL_ROW_ALIGN when n_out is.
void lm_matmul_rows(const struct lm_matmul_plan *p, int j, float *Y, int64_t a, int64_t b);

#endif
