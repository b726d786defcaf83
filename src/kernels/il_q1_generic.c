// Scalar GEMM on the q4_1 / q5_1 il layouts (il_layout.h): one group of 16 weight rows against
// up to LM_IL_MAX_NT xq81 activation rows; the statement of kernels.h's q4_1 / q5_1 il
// numerics and the oracle of il_q1_avx512.c. Plain loops: clarity over speed.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h: only the fmaf written here fuse

#include <math.h>
#include <string.h>

#include "kernels/il_layout.h"
#include "kernels/kernels_internal.h"

// W group (16, n_in) @ X (nt, n_in) xq81 -> y[t * ys + r]; per block b, token t, row r:
//   isum = sum_k q[r][k] x[k] (exact int32, q the raw unsigned quants)
//   acc  = fmaf(d_w * d_x, (float)isum, acc);  acc = fmaf(m_w, s_x, acc)
static void il_q1_generic(int q5, int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                          const void *xa, size_t xas) {
    const int64_t nb = n_in / 32;
    const size_t rec_bytes = q5 ? LM_IL_Q5_1_REC : LM_IL_Q4_1_REC;
    float acc[LM_IL_MAX_NT][LM_IL_ROWS] = {{0}};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *rec = (const uint8_t *)wg + (size_t)b * rec_bytes;
        const lm_f16 *d = (const lm_f16 *)rec, *m = (const lm_f16 *)(rec + 32);
        const uint8_t *q = rec + 64;
        uint64_t hb[8] = {0};
        if (q5) memcpy(hb, q + 256, sizeof hb);
        int32_t w[LM_IL_ROWS][32];
        for (int g = 0; g < 8; g++) // elements 4g..4g+3 of every row
            for (int r = 0; r < LM_IL_ROWS; r++)
                for (int kk = 0; kk < 4; kk++) {
                    const int lane = r * 4 + kk;
                    const uint8_t byte = q[(g / 2) * 64 + lane];
                    w[r][4 * g + kk] = (g % 2 ? byte >> 4 : byte & 0x0f) | (int)((hb[g] >> lane) & 1) << 4;
                }
        for (int t = 0; t < nt; t++) {
            const int8_t *xq = (const int8_t *)((const char *)xa + (size_t)t * xas);
            const float *xd = (const float *)(xq + nb * 32), *xs = xd + nb;
            for (int r = 0; r < LM_IL_ROWS; r++) {
                int32_t isum = 0;
                for (int k = 0; k < 32; k++) isum += w[r][k] * xq[b * 32 + k];
                acc[t][r] = fmaf(lm_f16_to_f32(d[r]) * xd[b], (float)isum, acc[t][r]);
                acc[t][r] = fmaf(lm_f16_to_f32(m[r]), xs[b], acc[t][r]);
            }
        }
    }
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < LM_IL_ROWS; r++) y[(size_t)t * ys + r] = acc[t][r];
}

void lm_il_gemm_q4_1_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas) {
    il_q1_generic(0, n_in, nt, y, ys, wg, xa, xas);
}

void lm_il_gemm_q5_1_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas) {
    il_q1_generic(1, n_in, nt, y, ys, wg, xa, xas);
}
