// Row-interleaved q4_K / q6_K: packing 16 ggml rows into one group (layout structs in
// il_kq.h) and the scalar GEMM on it, the oracle for the ISA versions. Per row and token
// the arithmetic is vec_dot_q4_K / vec_dot_q6_K's: exact int32 per super-block, then the
// same float steps in the same order, so results are bit-identical.
#pragma GCC optimize("fp-contract=off") // see kernels_generic.c

#include "kernels/il_kq.h"

#include <string.h>

#include "base/status.h"

// ============================================================================
// packing
// ============================================================================

size_t lm_il_group_bytes_q4_K(int64_t n_in) {
    return (size_t)(n_in / LM_QK_K) * sizeof(struct lm_il_q4_K_sb);
}

size_t lm_il_group_bytes_q6_K(int64_t n_in) {
    return (size_t)(n_in / LM_QK_K) * sizeof(struct lm_il_q6_K_sb);
}

void lm_il_pack_q4_K(void *dst, const void *src, size_t row_bytes, int64_t n_in) {
    LM_ASSERT(n_in % LM_QK_K == 0);
    // row by row: the group's rows are one sequential read stream (see kernels_il.c)
    for (int r = 0; r < LM_IL_ROWS; r++) {
        for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
            struct lm_il_q4_K_sb *o = (struct lm_il_q4_K_sb *)dst + i;
            const struct lm_block_q4_K *b = (const struct lm_block_q4_K *)((const char *)src + r * row_bytes) + i;
            o->d[r] = b->d;
            o->dmin[r] = b->dmin;
            int8_t q[LM_QK_K];
            uint8_t sc[8], mn[8];
            lm_q4_K_unpack(b, q, sc, mn);
            for (int j = 0; j < 8; j++) {
                o->sc[j][r] = sc[j];
                o->mn[j / 2][r][j % 2] = mn[j];
            }
            for (int j = 0; j < 8; j++) // 4 columns at a time (values < 16: no carries)
                for (int v = 0; v < 4; v++) {
                    uint32_t lo, hi;
                    memcpy(&lo, q + 32 * j + 4 * v, 4);
                    memcpy(&hi, q + 32 * j + 16 + 4 * v, 4);
                    lo |= hi << 4;
                    memcpy(&o->qs[j][v][4 * r], &lo, 4);
                }
        }
    }
}

void lm_il_pack_q6_K(void *dst, const void *src, size_t row_bytes, int64_t n_in) {
    LM_ASSERT(n_in % LM_QK_K == 0);
    // row by row: the group's rows are one sequential read stream (see kernels_il.c)
    for (int r = 0; r < LM_IL_ROWS; r++) {
        for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
            struct lm_il_q6_K_sb *o = (struct lm_il_q6_K_sb *)dst + i;
            const struct lm_block_q6_K *b = (const struct lm_block_q6_K *)((const char *)src + r * row_bytes) + i;
            o->d[r] = lm_f16_to_f32(b->d);
            int8_t w[LM_QK_K];
            lm_q6_K_unpack(b, w);
            uint8_t qv[LM_QK_K]; // the stored 6-bit values
            for (int e = 0; e < LM_QK_K; e++) qv[e] = (uint8_t)(w[e] + 32);
            for (int p = 0; p < 8; p++) {
                o->sc[p][r][0] = b->scales[2 * p];
                o->sc[p][r][1] = b->scales[2 * p + 1];
                struct lm_il_q6_K_pair *q = &o->q[p];
                const uint8_t *c = qv + 32 * p;
                for (int v = 0; v < 4; v++) { // runs v (low nibble) and v + 4 (high nibble)
                    uint32_t a, h;
                    memcpy(&a, c + 4 * v, 4);
                    memcpy(&h, c + 16 + 4 * v, 4);
                    a = (a & 0x0f0f0f0fu) | (h & 0x0f0f0f0fu) << 4;
                    memcpy(&q->ql[v][4 * r], &a, 4);
                }
                for (int hh = 0; hh < 2; hh++) { // bits 2s..2s+1: q >> 4 of run 4hh + s
                    uint32_t acc = 0;
                    for (int s = 0; s < 4; s++) {
                        uint32_t t;
                        memcpy(&t, c + 16 * hh + 4 * s, 4);
                        acc |= ((t >> 4) & 0x03030303u) << (2 * s);
                    }
                    memcpy(&q->qh[hh][4 * r], &acc, 4);
                }
            }
        }
    }
}

// ============================================================================
// generic GEMM: W group (16, n_in) @ X (nt, n_in) q8_K -> y[t * ys + r]
// ============================================================================

static const struct lm_block_q8_K *q8K_row(const void *xa, size_t xas, int t) {
    return (const struct lm_block_q8_K *)((const char *)xa + (size_t)t * xas);
}

// The generic kernels mirror the vector ones: a super-block's quants are decoded once into
// "runs" q[u][4r + kk] (column 4u + kk of row r, u = 0..63), then per token each run adds
// 4 products into the row's int32 lane.

// q4_K super-block -> runs, 0..15
static void il_q4_K_runs(const struct lm_il_q4_K_sb *b, uint8_t q[64][4 * LM_IL_ROWS]) {
    for (int j = 0; j < 8; j++)
        for (int v = 0; v < 4; v++)
            for (int i = 0; i < 4 * LM_IL_ROWS; i++) {
                q[8 * j + v][i] = b->qs[j][v][i] & 0x0f;
                q[8 * j + 4 + v][i] = b->qs[j][v][i] >> 4;
            }
}

// q6_K super-block -> runs, weights -32..31
static void il_q6_K_runs(const struct lm_il_q6_K_sb *b, int8_t q[64][4 * LM_IL_ROWS]) {
    for (int p = 0; p < 8; p++)
        for (int u = 0; u < 8; u++)
            for (int i = 0; i < 4 * LM_IL_ROWS; i++) {
                int lo = (b->q[p].ql[u % 4][i] >> (4 * (u / 4))) & 15;
                int hi = (b->q[p].qh[u / 4][i] >> (2 * (u % 4))) & 3;
                q[8 * p + u][i] = (int8_t)((lo | hi << 4) - 32);
            }
}

// dot[r] += sum over runs u0..u0+n-1 of the run's 4 products with x (the q8_K quants)
static void runs_dot(int32_t dot[LM_IL_ROWS], const void *q, int is_signed, int u0, int n,
                     const int8_t *x) {
    for (int u = u0; u < u0 + n; u++)
        for (int r = 0; r < LM_IL_ROWS; r++)
            for (int kk = 0; kk < 4; kk++) {
                int w = is_signed ? ((const int8_t *)q)[u * 64 + 4 * r + kk]
                                  : ((const uint8_t *)q)[u * 64 + 4 * r + kk];
                dot[r] += w * x[4 * u + kk];
            }
}

void lm_il_gemm_q4_K_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas) {
    LM_ASSERT(n_in % LM_QK_K == 0 && nt >= 1 && nt <= LM_IL_MAX_NT);
    const struct lm_il_q4_K_sb *w = wg;
    float sum[LM_IL_MAX_NT][LM_IL_ROWS] = {{0}};
    uint8_t q[64][4 * LM_IL_ROWS];
    for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
        const struct lm_il_q4_K_sb *b = &w[i];
        il_q4_K_runs(b, q);
        for (int t = 0; t < nt; t++) {
            const struct lm_block_q8_K *yb = q8K_row(xa, xas, t) + i;
            int32_t isum[LM_IL_ROWS] = {0}, summs[LM_IL_ROWS] = {0};
            for (int j = 0; j < 8; j++) {
                int32_t dot[LM_IL_ROWS] = {0};
                runs_dot(dot, q, 0, 8 * j, 8, yb->qs);
                const int bs = yb->bsums[2 * j] + yb->bsums[2 * j + 1];
                for (int r = 0; r < LM_IL_ROWS; r++) {
                    isum[r] += b->sc[j][r] * dot[r];
                    summs[r] += b->mn[j / 2][r][j % 2] * bs;
                }
            }
            // vec_dot_q4_K's float steps, in its order
            for (int r = 0; r < LM_IL_ROWS; r++)
                sum[t][r] += (lm_f16_to_f32(b->d[r]) * yb->d) * (float)isum[r] -
                             (lm_f16_to_f32(b->dmin[r]) * yb->d) * (float)summs[r];
        }
    }
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < LM_IL_ROWS; r++) y[(size_t)t * ys + r] = sum[t][r];
}

void lm_il_gemm_q6_K_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas) {
    LM_ASSERT(n_in % LM_QK_K == 0 && nt >= 1 && nt <= LM_IL_MAX_NT);
    const struct lm_il_q6_K_sb *w = wg;
    float sum[LM_IL_MAX_NT][LM_IL_ROWS] = {{0}};
    int8_t q[64][4 * LM_IL_ROWS];
    for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
        const struct lm_il_q6_K_sb *b = &w[i];
        il_q6_K_runs(b, q);
        for (int t = 0; t < nt; t++) {
            const struct lm_block_q8_K *yb = q8K_row(xa, xas, t) + i;
            int32_t isum[LM_IL_ROWS] = {0};
            for (int j = 0; j < 16; j++) { // sub-block j = runs 4j..4j+3 = columns 16j..
                int32_t dot[LM_IL_ROWS] = {0};
                runs_dot(dot, q, 1, 4 * j, 4, yb->qs);
                for (int r = 0; r < LM_IL_ROWS; r++) isum[r] += b->sc[j / 2][r][j % 2] * dot[r];
            }
            for (int r = 0; r < LM_IL_ROWS; r++)
                sum[t][r] += (b->d[r] * yb->d) * (float)isum[r]; // vec_dot_q6_K's float step
        }
    }
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < LM_IL_ROWS; r++) y[(size_t)t * ys + r] = sum[t][r];
}
