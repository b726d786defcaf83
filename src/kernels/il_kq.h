// Row-interleaved ("il") layouts and GEMM kernels for q4_K and q6_K weights: 16 output
// rows per group, laid out so that one 64-byte vector holds 16 rows x 4 consecutive k
// (after a nibble unpack) and vpdpbusd does 16 rows x 4 k per instruction. Results are
// bit-identical to vec_dot of the same dtype. The layouts are the structs below.
#ifndef LM_KERNELS_IL_KQ_H
#define LM_KERNELS_IL_KQ_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

// ---- Group layouts: one struct per 256 columns (super-block) of the 16 rows, in column
// order, so a kernel streams the group front to back. r = row in the group (0..15),
// kk = column within a run of 4 (0..3); vector byte 4r + kk puts row r in i32 lane r.

// q4_K: q[r][e] in 0..15 for the super-block's columns e (0..255); sub-block j = 32 columns.
// Low nibbles of qs[j][v] give the 4 columns 32j + 4v.. and high nibbles 32j + 16 + 4v..,
// so one 64-byte load yields two vpdpbusd operands (and / shift+and).
struct lm_il_q4_K_sb {
    lm_f16 d[LM_IL_ROWS];             // super-block scale of row r (as in the ggml block)
    lm_f16 dmin[LM_IL_ROWS];          // super-block min scale of row r
    uint8_t sc[8][LM_IL_ROWS];        // sc[j][r]: 6-bit scale of sub-block j, decoded
    uint8_t mn[4][LM_IL_ROWS][2];     // mn[p][r][e]: 6-bit min of sub-block 2p + e, decoded
    uint8_t qs[8][4][4 * LM_IL_ROWS]; // qs[j][v][4r + kk]: lo = q[r][32j + 4v + kk],
                                      //                    hi = q[r][32j + 16 + 4v + kk]
};

// q6_K: q[r][e] in 0..63 (the stored value; the weight is q - 32); sub-block = 16 columns,
// pair p = sub-blocks 2p and 2p + 1 = columns 32p..32p + 31, 4-column run u = 0..7 of the
// pair = columns 32p + 4u... Low 4 bits as q4_K's nibbles, high 2 bits four runs per byte.
struct lm_il_q6_K_pair {
    uint8_t ql[4][4 * LM_IL_ROWS]; // ql[v][4r + kk]: lo = q & 15 of run v, hi = of run v + 4
    uint8_t qh[2][4 * LM_IL_ROWS]; // qh[h][4r + kk]: bits 2s..2s+1 = q >> 4 of run 4h + s
};
struct lm_il_q6_K_sb {
    float d[LM_IL_ROWS];                 // super-block scale of row r (f16 widened, exact)
    int8_t sc[8][LM_IL_ROWS][2];         // sc[p][r][e]: scale of sub-block 2p + e of row r
    struct lm_il_q6_K_pair q[8];         // column pairs in order
};

_Static_assert(sizeof(struct lm_il_q4_K_sb) == 2368, "il q4_K super-block size");
_Static_assert(sizeof(struct lm_il_q6_K_sb) == 3392, "il q6_K super-block size");

// Bytes of one group (LM_IL_ROWS rows of n_in elements); n_in % 256 == 0.
// q4_K: 2368 per 256 columns (ggml: 16 x 144 = 2304); q6_K: 3392 (ggml: 16 x 210 = 3360).
size_t lm_il_group_bytes_q4_K(int64_t n_in);
size_t lm_il_group_bytes_q6_K(int64_t n_in);

// LM_IL_ROWS ggml rows at src (row_bytes apart) -> one group at dst (lm_il_group_bytes_*).
void lm_il_pack_q4_K(void *dst, const void *src, size_t row_bytes, int64_t n_in);
void lm_il_pack_q6_K(void *dst, const void *src, size_t row_bytes, int64_t n_in);

// lm_il_gemm_fn: wg one group, xa nt q8_K rows (xas bytes apart) -> y[t * ys + r].
void lm_il_gemm_q4_K_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas);
void lm_il_gemm_q6_K_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas);
// Defined only when il_kq_avx512.c is compiled with AVX-512 VNNI (reference them from the
// avx512 table only).
void lm_il_gemm_q4_K_avx512(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                            const void *xa, size_t xas);
void lm_il_gemm_q6_K_avx512(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                            const void *xa, size_t xas);

#endif
