// Scalar kernels of the non-linear 4-bit formats iq4_nl (32-element blocks, q8_0 activations)
// and iq4_xs (256-element super-blocks, q8_K activations): dequantize, dot, and iq4_nl's il
// GEMM. The oracle of iq4_avx2.c and iq4_avx512.c, which match these bit for bit.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h: only the fmaf written here fuse

#include <math.h>
#include <string.h>

#include "kernels/il_layout.h"
#include "kernels/kernels_internal.h"

// ================================================================ dequantize
// y = d * kv[q] (iq4_nl), y = (d * (float)sc) * kv[q] (iq4_xs): ggml's and gguf-py's order.

// x: iq4_nl row (n) -> y (n)
void lm_dequant_iq4_nl_generic(const void *x, float *y, int64_t n) {
    const struct lm_block_iq4_nl *b = x;
    for (int64_t i = 0; i < n / LM_QK4_NL; i++, y += 32) {
        const float d = lm_f16_to_f32(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)lm_kvalues_iq4nl[b[i].qs[j] & 0x0f];
            y[j + 16] = d * (float)lm_kvalues_iq4nl[b[i].qs[j] >> 4];
        }
    }
}

// x: iq4_xs row (n) -> y (n)
void lm_dequant_iq4_xs_generic(const void *x, float *y, int64_t n) {
    const struct lm_block_iq4_xs *b = x;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        const float d = lm_f16_to_f32(b[i].d);
        for (int j = 0; j < 8; j++, y += 32) {
            const float dl = d * (float)lm_iq4_xs_scale(&b[i], j);
            const uint8_t *qs = b[i].qs + 16 * j;
            for (int k = 0; k < 16; k++) {
                y[k] = dl * (float)lm_kvalues_iq4nl[qs[k] & 0x0f];
                y[k + 16] = dl * (float)lm_kvalues_iq4nl[qs[k] >> 4];
            }
        }
    }
}

// ================================================================ dot products
// iq4_nl . q8_0: exact int32 per block, then acc = fmaf(d_w * d_x, (float)isum, acc) over the
// blocks in order, acc from 0: the q8_0 il order (kernels.h), so the il GEMM and this dot give
// the same bits. iq4_xs . q8_K: isum = sum over sub-blocks of sc * (exact int32 dot), then
// acc = fmaf(d_w * x.d, (float)isum, acc) over the super-blocks in order.

void lm_vec_dot_iq4_nl_generic(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_iq4_nl *x = w;
    const struct lm_block_q8_0 *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / LM_QK4_NL; i++) {
        int32_t isum = 0;
        for (int j = 0; j < 16; j++) {
            isum += lm_kvalues_iq4nl[x[i].qs[j] & 0x0f] * y[i].qs[j];
            isum += lm_kvalues_iq4nl[x[i].qs[j] >> 4] * y[i].qs[j + 16];
        }
        acc = fmaf(lm_f16_to_f32(x[i].d) * lm_f16_to_f32(y[i].d), (float)isum, acc);
    }
    *s = acc;
}

void lm_vec_dot_iq4_xs_generic(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_iq4_xs *x = w;
    const struct lm_block_q8_K *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        int32_t isum = 0;
        for (int j = 0; j < 8; j++) {
            const uint8_t *qs = x[i].qs + 16 * j;
            const int8_t *q8 = y[i].qs + 32 * j;
            int32_t sub = 0;
            for (int k = 0; k < 16; k++) {
                sub += lm_kvalues_iq4nl[qs[k] & 0x0f] * q8[k];
                sub += lm_kvalues_iq4nl[qs[k] >> 4] * q8[k + 16];
            }
            isum += lm_iq4_xs_scale(&x[i], j) * sub;
        }
        acc = fmaf(lm_f16_to_f32(x[i].d) * y[i].d, (float)isum, acc);
    }
    *s = acc;
}

// ================================================================ il GEMM (iq4_nl)
// W group (16, n_in) in q4_0's il records (the raw indices, il_layout.h) @ X (nt, n_in) xq8
// rows -> y[t * ys + r]: each index looked up as kv + 128 (1..241, unsigned), the offset
// back through the activations' -128 sum; per block exact int32, then vec_dot's fmaf.
void lm_il_gemm_iq4_nl_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                               const void *xa, size_t xas) {
    const int64_t nb = n_in / 32;
    float acc[LM_IL_MAX_NT][LM_IL_ROWS] = {{0}};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *rec = (const uint8_t *)wg + (size_t)b * LM_IL_Q4_0_REC;
        const lm_f16 *d = (const lm_f16 *)rec;
        const uint8_t *q = rec + 32;
        int32_t wv[LM_IL_ROWS][32];
        for (int g = 0; g < 8; g++) // elements 4g..4g+3 of every row
            for (int r = 0; r < LM_IL_ROWS; r++)
                for (int kk = 0; kk < 4; kk++) {
                    const uint8_t byte = q[(g / 2) * 64 + r * 4 + kk];
                    wv[r][4 * g + kk] = lm_kvalues_iq4nl[g % 2 ? byte >> 4 : byte & 0x0f] + 128;
                }
        for (int t = 0; t < nt; t++) {
            const int8_t *xq = (const int8_t *)((const char *)xa + (size_t)t * xas);
            const float *xd = (const float *)(xq + nb * 32);
            const int32_t *c128 = (const int32_t *)(xd + nb) + nb;
            for (int r = 0; r < LM_IL_ROWS; r++) {
                int32_t isum = c128[b];
                for (int k = 0; k < 32; k++) isum += wv[r][k] * xq[b * 32 + k];
                acc[t][r] = fmaf(lm_f16_to_f32(d[r]) * xd[b], (float)isum, acc[t][r]);
            }
        }
    }
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < LM_IL_ROWS; r++) y[(size_t)t * ys + r] = acc[t][r];
}
