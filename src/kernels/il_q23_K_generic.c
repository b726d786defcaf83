// Scalar GEMMs on the q2_K / q3_K row-interleaved layouts (il_layout.h): one group of 16 weight
// rows against up to LM_IL_MAX_NT q8_K activation rows, the statement of their il numerics
// (kernels.h: bit-identical to vec_dot of the same dtype) and the oracle of il_q23_K_avx2.c and _avx512.c.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h: only the fmaf written here fuse

#include <string.h>

#include "base/status.h"
#include "kernels/il_layout.h"
#include "kernels/kernels_internal.h"

// A super-block's quants decoded once into runs u[4j + s][4r + kk] (column 16j + 4s + kk of
// row r, unsigned: q2_K 0..3, q3_K 0..7), reused for every token.
static void q23_runs(const uint8_t qs[16][4 * LM_IL_ROWS], const uint64_t (*qh)[4], uint8_t u[64][4 * LM_IL_ROWS]) {
    for (int j = 0; j < 16; j++)
        for (int s = 0; s < 4; s++)
            for (int l = 0; l < 4 * LM_IL_ROWS; l++) {
                int v = (qs[j][l] >> (2 * s)) & 3;
                if (qh) v |= (int)((qh[j][s] >> l) & 1) << 2;
                u[4 * j + s][l] = (uint8_t)v;
            }
}

// dot[r] = sum over the 4 runs of sub-block j of run . x (the q8_K quants)
static void sub_dot(int32_t dot[LM_IL_ROWS], const uint8_t u[64][4 * LM_IL_ROWS], int j, const int8_t *x) {
    for (int r = 0; r < LM_IL_ROWS; r++) dot[r] = 0;
    for (int s = 0; s < 4; s++)
        for (int r = 0; r < LM_IL_ROWS; r++)
            for (int kk = 0; kk < 4; kk++) dot[r] += u[4 * j + s][4 * r + kk] * x[16 * j + 4 * s + kk];
}

// q2_K (q3: 0) or q3_K (q3: 1): W group (16, n_in) @ X (nt, n_in) q8_K -> y[t * ys + r]. Per
// super-block, token and row: the exact int32 sums, then vec_dot's float step in its order:
//   q2_K: isum = sum_j sc dot_j, summs = sum_j mn bsums_j;
//         sum += (d * x.d) * isum - (dmin * x.d) * summs
//   q3_K: isum = sum_j sc dot_j - 4 sum_j sc bsums_j; sum += (d * x.d) * isum
static void il_q23_K_generic(int q3, int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas) {
    LM_ASSERT(n_in % LM_QK_K == 0 && nt >= 1 && nt <= LM_IL_MAX_NT);
    const size_t sb_bytes = q3 ? sizeof(struct lm_il_q3_K_sb) : sizeof(struct lm_il_q2_K_sb);
    float sum[LM_IL_MAX_NT][LM_IL_ROWS] = {{0}};
    uint8_t u[64][4 * LM_IL_ROWS];
    for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
        const char *sb = (const char *)wg + (size_t)i * sb_bytes;
        const struct lm_il_q2_K_sb *b2 = (const struct lm_il_q2_K_sb *)sb;
        const struct lm_il_q3_K_sb *b3 = (const struct lm_il_q3_K_sb *)sb;
        if (q3) q23_runs(b3->qs, b3->qh, u);
        else q23_runs(b2->qs, NULL, u);
        for (int t = 0; t < nt; t++) {
            const struct lm_block_q8_K *yb = (const struct lm_block_q8_K *)((const char *)xa + (size_t)t * xas) + i;
            int32_t isum[LM_IL_ROWS] = {0}, summs[LM_IL_ROWS] = {0};
            for (int j = 0; j < 16; j++) {
                int32_t dot[LM_IL_ROWS];
                sub_dot(dot, u, j, yb->qs);
                for (int r = 0; r < LM_IL_ROWS; r++) {
                    if (q3) {
                        const int sc = b3->sc[j / 2][r][j % 2];
                        isum[r] += sc * dot[r] - 4 * sc * yb->bsums[j];
                    } else {
                        const int byte = b2->sc[j / 2][r][j % 2];
                        isum[r] += (byte & 0x0f) * dot[r];
                        summs[r] += (byte >> 4) * yb->bsums[j];
                    }
                }
            }
            for (int r = 0; r < LM_IL_ROWS; r++) {
                if (q3)
                    sum[t][r] += (lm_f16_to_f32(b3->d[r]) * yb->d) * (float)isum[r];
                else
                    sum[t][r] += (lm_f16_to_f32(b2->d[r]) * yb->d) * (float)isum[r] -
                                 (lm_f16_to_f32(b2->dmin[r]) * yb->d) * (float)summs[r];
            }
        }
    }
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < LM_IL_ROWS; r++) y[(size_t)t * ys + r] = sum[t][r];
}

void lm_il_gemm_q2_K_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas) {
    il_q23_K_generic(0, n_in, nt, y, ys, wg, xa, xas);
}

void lm_il_gemm_q3_K_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas) {
    il_q23_K_generic(1, n_in, nt, y, ys, wg, xa, xas);
}
