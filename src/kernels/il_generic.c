// Scalar GEMMs on the row-interleaved layouts (il_layout.h), one group of 16 weight rows
// against up to LM_IL_MAX_NT activation rows: the statement of kernels.h's il numerics per
// dtype and the oracle of il_avx2.c, il_kq_avx2.c and il_avx512.c. Plain loops: clarity over speed.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h: only the fmaf written here fuse

#include <math.h>
#include <string.h>

#include "base/status.h"
#include "kernels/il_layout.h"
#include "kernels/kernels_internal.h"

// ============================================================================
// q8_0 / q5_0 / q4_0: W group (16, n_in) @ X (nt, n_in) xq8 -> y[t * ys + r]
// ============================================================================

// a block's 16 x 32 weights are decoded once (unsigned: q8_0 q + 128, q5_0 the raw 0..31,
// q4_0 the raw 0..15) and reused for every token; the offsets come back through the
// activation sums (corr; q4_0's -8 sum is half of the -16 sum)
enum il_q8_kind { IL_Q8_0, IL_Q5_0, IL_Q4_0 };

static void il_q8_generic(enum il_q8_kind kind, int64_t n_in, int nt, float *y, size_t ys,
                          const void *wg, const void *xa, size_t xas) {
    const int64_t nb = n_in / 32;
    const size_t rec_bytes = kind == IL_Q8_0 ? LM_IL_Q8_0_REC : kind == IL_Q5_0 ? LM_IL_Q5_0_REC : LM_IL_Q4_0_REC;
    float acc[LM_IL_MAX_NT][LM_IL_ROWS] = {{0}};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *rec = (const uint8_t *)wg + (size_t)b * rec_bytes;
        const lm_f16 *d = (const lm_f16 *)rec;
        const uint8_t *q = rec + 32;
        uint64_t hb[8] = {0};
        if (kind == IL_Q5_0) memcpy(hb, q + 256, sizeof hb);
        int32_t w[LM_IL_ROWS][32];
        for (int g = 0; g < 8; g++) // elements 4g..4g+3 of every row
            for (int r = 0; r < LM_IL_ROWS; r++)
                for (int kk = 0; kk < 4; kk++) {
                    const int lane = r * 4 + kk;
                    if (kind != IL_Q8_0) {
                        const uint8_t byte = q[(g / 2) * 64 + lane];
                        w[r][4 * g + kk] = (g % 2 ? byte >> 4 : byte & 0x0f) | (int)((hb[g] >> lane) & 1) << 4;
                    } else {
                        w[r][4 * g + kk] = q[g * 64 + lane];
                    }
                }
        for (int t = 0; t < nt; t++) {
            const int8_t *xq = (const int8_t *)((const char *)xa + (size_t)t * xas);
            const float *xd = (const float *)(xq + nb * 32);
            const int32_t *c16 = (const int32_t *)(xd + nb), *c128 = c16 + nb;
            const int32_t corr = kind == IL_Q8_0 ? c128[b] : kind == IL_Q5_0 ? c16[b] : c16[b] / 2;
            for (int r = 0; r < LM_IL_ROWS; r++) {
                int32_t isum = corr;
                for (int k = 0; k < 32; k++) isum += w[r][k] * xq[b * 32 + k];
                acc[t][r] = fmaf(lm_f16_to_f32(d[r]) * xd[b], (float)isum, acc[t][r]);
            }
        }
    }
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < LM_IL_ROWS; r++) y[(size_t)t * ys + r] = acc[t][r];
}

void lm_il_gemm_q8_0_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas) {
    il_q8_generic(IL_Q8_0, n_in, nt, y, ys, wg, xa, xas);
}

void lm_il_gemm_q5_0_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas) {
    il_q8_generic(IL_Q5_0, n_in, nt, y, ys, wg, xa, xas);
}

void lm_il_gemm_q4_0_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas) {
    il_q8_generic(IL_Q4_0, n_in, nt, y, ys, wg, xa, xas);
}

// ============================================================================
// q4_K / q5_K / q6_K: W group (16, n_in) @ X (nt, n_in) q8_K -> y[t * ys + r]
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

// q4_K (q5: 0) or q5_K (q5: 1): the same integer and float steps (vec_dot_q4_K = _q5_K's),
// q5_K's runs taking bit 4 from qh
static void il_q45_K_generic(int q5, int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas) {
    LM_ASSERT(n_in % LM_QK_K == 0 && nt >= 1 && nt <= LM_IL_MAX_NT);
    const size_t sb_bytes = q5 ? sizeof(struct lm_il_q5_K_sb) : sizeof(struct lm_il_q4_K_sb);
    float sum[LM_IL_MAX_NT][LM_IL_ROWS] = {{0}};
    uint8_t q[64][4 * LM_IL_ROWS];
    for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
        const struct lm_il_q4_K_sb *b = (const struct lm_il_q4_K_sb *)((const char *)wg + (size_t)i * sb_bytes);
        il_q4_K_runs(b, q);
        if (q5) { // run 8j + u is columns 32j + 4u..: fifth bit from qh[j][u]
            const struct lm_il_q5_K_sb *b5 = (const struct lm_il_q5_K_sb *)b;
            for (int u = 0; u < 64; u++)
                for (int l = 0; l < 4 * LM_IL_ROWS; l++) q[u][l] |= (uint8_t)(((b5->qh[u / 8][u % 8] >> l) & 1) << 4);
        }
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

void lm_il_gemm_q4_K_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas) {
    il_q45_K_generic(0, n_in, nt, y, ys, wg, xa, xas);
}

void lm_il_gemm_q5_K_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas) {
    il_q45_K_generic(1, n_in, nt, y, ys, wg, xa, xas);
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

// ============================================================================
// f16: W group (16, n_in) f16 @ X (nt, n_in) f32 -> y[t * ys + r]
// ============================================================================

// f16: per token and row, 16 lane sums (lane l takes the elements k = l mod 16, fmaf in
// order), then the tree of _mm512_reduce_add_ps
void lm_il_gemm_f16_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                            const void *xa, size_t xas) {
    for (int t = 0; t < nt; t++) {
        const float *x = (const float *)((const char *)xa + (size_t)t * xas);
        for (int r = 0; r < LM_IL_ROWS; r++) {
            const lm_f16 *w = (const lm_f16 *)wg + (size_t)r * (size_t)n_in;
            float acc[16] = {0};
            for (int64_t k = 0; k < n_in; k++) acc[k % 16] = fmaf(lm_f16_to_f32(w[k]), x[k], acc[k % 16]);
            y[(size_t)t * ys + r] = lm_tree16(acc);
        }
    }
}
