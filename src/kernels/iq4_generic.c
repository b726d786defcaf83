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

// ================================================================ il (iq4_xs)

void lm_il_pack_iq4_xs(void *dst, const void *src, size_t row_bytes, int64_t n_in) {
    for (int r = 0; r < LM_IL_ROWS; r++) {
        const struct lm_block_iq4_xs *x = (const struct lm_block_iq4_xs *)((const char *)src + (size_t)r * row_bytes);
        for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
            struct lm_il_iq4_xs_sb *o = (struct lm_il_iq4_xs_sb *)dst + i;
            o->d[r] = x[i].d;
            for (int j = 0; j < 8; j++) {
                o->sc[j][r] = (int8_t)lm_iq4_xs_scale(&x[i], j);
                // the file's byte 16j + 4v + kk holds idx 32j + 4v + kk (low) and + 16 (high):
                // the il bytes are the file's, 4 at a time
                for (int v = 0; v < 4; v++) memcpy(&o->qs[j][v][4 * r], x[i].qs + 16 * j + 4 * v, 4);
            }
        }
    }
}

// W group (16, n_in) @ X (nt, n_in) q8_K rows -> y[t * ys + r]: per super-block and row,
// isum = sum_j sc[j] * (sum (kv + 128) x - 128 (bsums[2j] + bsums[2j + 1])), then vec_dot's fmaf
void lm_il_gemm_iq4_xs_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                               const void *xa, size_t xas) {
    float acc[LM_IL_MAX_NT][LM_IL_ROWS] = {{0}};
    for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
        const struct lm_il_iq4_xs_sb *b = (const struct lm_il_iq4_xs_sb *)wg + i;
        for (int t = 0; t < nt; t++) {
            const struct lm_block_q8_K *yb = (const struct lm_block_q8_K *)((const char *)xa + (size_t)t * xas) + i;
            for (int r = 0; r < LM_IL_ROWS; r++) {
                int32_t isum = 0;
                for (int j = 0; j < 8; j++) {
                    int32_t sub = -128 * (yb->bsums[2 * j] + yb->bsums[2 * j + 1]);
                    for (int v = 0; v < 4; v++)
                        for (int kk = 0; kk < 4; kk++) {
                            const uint8_t byte = b->qs[j][v][4 * r + kk];
                            sub += (lm_kvalues_iq4nl[byte & 0x0f] + 128) * yb->qs[32 * j + 4 * v + kk];
                            sub += (lm_kvalues_iq4nl[byte >> 4] + 128) * yb->qs[32 * j + 16 + 4 * v + kk];
                        }
                    isum += b->sc[j][r] * sub;
                }
                acc[t][r] = fmaf(lm_f16_to_f32(b->d[r]) * yb->d, (float)isum, acc[t][r]);
            }
        }
    }
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < LM_IL_ROWS; r++) y[(size_t)t * ys + r] = acc[t][r];
}
