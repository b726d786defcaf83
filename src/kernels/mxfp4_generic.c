// Scalar kernels of mxfp4 (32-element blocks of E2M1 codes under one E8M0 scale, q8_0
// activations): dequantize, dot, and the il GEMM. The oracle of mxfp4_avx2.c and
// mxfp4_avx512.c, which match these bit for bit.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h: only the fmaf written here fuse

#include <math.h>
#include <string.h>

#include "kernels/il_layout.h"
#include "kernels/kernels_internal.h"

// ================================================================ dequantize
// y = kv[q] * d, d = lm_e8m0_half(e): ggml's dequantize_row_mxfp4 (and gguf-py's) values;
// every product is exact (a small integer times a power of two) unless it underflows.

// x: mxfp4 row (n) -> y (n)
void lm_dequant_mxfp4_generic(const void *x, float *y, int64_t n) {
    const struct lm_block_mxfp4 *b = x;
    for (int64_t i = 0; i < n / LM_QK_MXFP4; i++, y += 32) {
        const float d = lm_e8m0_half(b[i].e);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)lm_kvalues_mxfp4[b[i].qs[j] & 0x0f] * d;
            y[j + 16] = (float)lm_kvalues_mxfp4[b[i].qs[j] >> 4] * d;
        }
    }
}

// ================================================================ dot product
// mxfp4 . q8_0: exact int32 per block, then acc = fmaf(d_x * d_w, (float)isum, acc) over the
// blocks in order, acc from 0 (d_w = lm_e8m0_half(e); the product is ggml's d): iq4_nl's
// order, so the il GEMM, the multi-token dots and this dot give the same bits.

void lm_vec_dot_mxfp4_generic(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_mxfp4 *x = w;
    const struct lm_block_q8_0 *y = xq;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / LM_QK_MXFP4; i++) {
        int32_t isum = 0;
        for (int j = 0; j < 16; j++) {
            isum += lm_kvalues_mxfp4[x[i].qs[j] & 0x0f] * y[i].qs[j];
            isum += lm_kvalues_mxfp4[x[i].qs[j] >> 4] * y[i].qs[j + 16];
        }
        acc = fmaf(lm_f16_to_f32(y[i].d) * lm_e8m0_half(x[i].e), (float)isum, acc);
    }
    *s = acc;
}

// ================================================================ il (il_layout.h's mxfp4 record)

// 16 mxfp4 rows at src (row_bytes apart) -> one group: per block the 16 rows' e bytes, then
// q4_0's 4 x 64 bytes of nibbles (vector j, byte 4r + kk: low nibble element 8j + kk, high
// nibble element 8j + 4 + kk, the raw codes)
void lm_il_pack_mxfp4(void *dst, const void *src, size_t row_bytes, int64_t n_in) {
    for (int r = 0; r < LM_IL_ROWS; r++) {
        const struct lm_block_mxfp4 *x = (const struct lm_block_mxfp4 *)((const char *)src + (size_t)r * row_bytes);
        for (int64_t b = 0; b < n_in / 32; b++) {
            uint8_t *rec = (uint8_t *)dst + (size_t)b * LM_IL_MXFP4_REC;
            rec[r] = x[b].e;
            for (int j = 0; j < 4; j++) // elements 8j.. live in qs[(8j) % 16 ..], nibble 8j / 16
                for (int kk = 0; kk < 4; kk++) {
                    const int e0 = 8 * j + kk, e1 = e0 + 4, sh = j < 2 ? 0 : 4;
                    const uint8_t lo = (uint8_t)((x[b].qs[e0 % 16] >> sh) & 0x0f);
                    const uint8_t hi = (uint8_t)((x[b].qs[e1 % 16] >> sh) & 0x0f);
                    rec[16 + 64 * j + 4 * r + kk] = (uint8_t)(lo | hi << 4);
                }
        }
    }
}

// W group (16, n_in) in mxfp4 il records @ X (nt, n_in) xq8 rows -> y[t * ys + r]: each code
// looked up as kv + 128 (116..140, unsigned), the offset back through the activations' -128
// sum; per block exact int32, then vec_dot's fmaf.
void lm_il_gemm_mxfp4_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                              const void *xa, size_t xas) {
    const int64_t nb = n_in / 32;
    float acc[LM_IL_MAX_NT][LM_IL_ROWS] = {{0}};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *rec = (const uint8_t *)wg + (size_t)b * LM_IL_MXFP4_REC;
        const uint8_t *q = rec + 16;
        int32_t wv[LM_IL_ROWS][32];
        for (int g = 0; g < 8; g++) // elements 4g..4g+3 of every row
            for (int r = 0; r < LM_IL_ROWS; r++)
                for (int kk = 0; kk < 4; kk++) {
                    const uint8_t byte = q[(g / 2) * 64 + r * 4 + kk];
                    wv[r][4 * g + kk] = lm_kvalues_mxfp4[g % 2 ? byte >> 4 : byte & 0x0f] + 128;
                }
        for (int t = 0; t < nt; t++) {
            const int8_t *xq = (const int8_t *)((const char *)xa + (size_t)t * xas);
            const float *xd = (const float *)(xq + nb * 32);
            const int32_t *c128 = (const int32_t *)(xd + nb) + nb;
            for (int r = 0; r < LM_IL_ROWS; r++) {
                int32_t isum = c128[b];
                for (int k = 0; k < 32; k++) isum += wv[r][k] * xq[b * 32 + k];
                acc[t][r] = fmaf(xd[b] * lm_e8m0_half(rec[r]), (float)isum, acc[t][r]);
            }
        }
    }
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < LM_IL_ROWS; r++) y[(size_t)t * ys + r] = acc[t][r];
}
