// Row-interleaved ("il") weight layouts: packing at load, the activation rows their kernels
// read, and the generic (scalar) kernels for q8_0 / q5_0. The k-quant layouts live in
// il_kq.c. See kernels.h for the numerics contract.
//
// q8_0 / q5_0 group (LM_IL_ROWS = 16 rows of n_in elements): one record per 32-element
// block b, records in block order:
//   d   16 x f16          the 16 rows' block scales
//   q   q8_0: 8 x 64 bytes: vector g holds elements 4g..4g+3 of every row, byte r*4 + kk =
//                (q(r, 4g + kk) + 128) as an unsigned byte
//       q5_0: 4 x 64 bytes of nibbles: vector j, byte r*4 + kk: low nibble = low 4 bits of
//                element 8j + kk, high nibble = of element 8j + 4 + kk (raw 0..15)
//             + 8 x 8 bytes of high bits: u64 g, bit r*4 + kk = bit 4 of element 4g + kk
// so one vector of 16 rows x 4 elements, unsigned (q8_0: q + 128, q5_0: the raw 0..31 =
// q + 16), meets 4 broadcast activation bytes in one vpdpbusd. The offsets come back
// through the activation sums: sum (q + c) x = sum q x + c sum x.
//
// "xq8" activation row (n_in elements, nb = n_in / 32 blocks): nb x 32 int8 quants, then nb
// floats (the q8_0 scale), nb int32 (-16 * sum of the block's quants), nb int32 (-128 * sum).
// The quants and scales are those of the q8_0 row it is made from, so results do not depend
// on whether the row came from quant[Q8_0] of the generic or an ISA table (they agree).
//
// f16 group: the file layout itself, 16 rows of n_in halves one after another (row_bytes =
// 2 n_in), so the weights are used in place and nothing is copied at load. Its activation
// rows are f32: the f16-rounded activations (the f16 row vec_dot reads) widened once, so
// the kernels broadcast or load them without a convert per use.
#pragma GCC optimize("fp-contract=off")

#include <math.h>
#include <string.h>

#include "base/status.h"
#include "kernels/il_kq.h"
#include "kernels/kernels.h"
#include "kernels/kernels_internal.h"

bool lm_il_supported(enum lm_dtype t, int64_t n_out, int64_t n_in) {
    if (n_out <= 0 || n_out % LM_IL_ROWS != 0 || n_in <= 0) return false;
    switch (t) {
    case LM_DTYPE_Q8_0:
    case LM_DTYPE_Q5_0: return n_in % 32 == 0;
    case LM_DTYPE_Q4_K:
    case LM_DTYPE_Q6_K: return n_in % LM_QK_K == 0;
    case LM_DTYPE_F16: return true;
    default: return false;
    }
}

bool lm_il_in_place(enum lm_dtype t, size_t row_bytes, int64_t n_in) {
    return t == LM_DTYPE_F16 && row_bytes == (size_t)n_in * sizeof(lm_f16);
}

size_t lm_il_group_bytes(enum lm_dtype t, int64_t n_in) {
    switch (t) {
    case LM_DTYPE_Q8_0: return (size_t)(n_in / 32) * LM_IL_Q8_0_REC;
    case LM_DTYPE_Q5_0: return (size_t)(n_in / 32) * LM_IL_Q5_0_REC;
    case LM_DTYPE_Q4_K: return lm_il_group_bytes_q4_K(n_in);
    case LM_DTYPE_Q6_K: return lm_il_group_bytes_q6_K(n_in);
    case LM_DTYPE_F16: return (size_t)LM_IL_ROWS * (size_t)n_in * sizeof(lm_f16);
    default: LM_ASSERT(!"no il layout"); return 0;
    }
}

// The packers walk the group row by row (its 16 rows follow each other in the file, so the
// source is read as one sequential stream) and scatter into the records, which stay in
// L1/L2; block by block across the 16 rows read 16 streams at once, ~3x slower here.
static void pack_q8_0(uint8_t *dst, const void *src, size_t row_bytes, int64_t n_in) {
    for (int r = 0; r < LM_IL_ROWS; r++) {
        const struct lm_block_q8_0 *x = (const struct lm_block_q8_0 *)((const char *)src + (size_t)r * row_bytes);
        for (int64_t b = 0; b < n_in / 32; b++) {
            uint8_t *rec = dst + (size_t)b * LM_IL_Q8_0_REC;
            memcpy(rec + 2 * r, &x[b].d, 2);
            uint8_t *q = rec + 32;
            for (int g = 0; g < 8; g++) { // 4 quants at a time, + 128 = flip the sign bits
                uint32_t v;
                memcpy(&v, x[b].qs + 4 * g, 4);
                v ^= 0x80808080u;
                memcpy(q + g * 64 + r * 4, &v, 4);
            }
        }
    }
}

static void pack_q5_0(uint8_t *dst, const void *src, size_t row_bytes, int64_t n_in) {
    for (int64_t b = 0; b < n_in / 32; b++) memset(dst + (size_t)b * LM_IL_Q5_0_REC + 32 + 256, 0, 64);
    for (int r = 0; r < LM_IL_ROWS; r++) {
        const struct lm_block_q5_0 *x = (const struct lm_block_q5_0 *)((const char *)src + (size_t)r * row_bytes);
        for (int64_t b = 0; b < n_in / 32; b++) {
            uint8_t *rec = dst + (size_t)b * LM_IL_Q5_0_REC;
            memcpy(rec + 2 * r, &x[b].d, 2);
            uint8_t *q = rec + 32;
            // byte kk of vector j: low nibble = low 4 bits of element 8j + kk, high nibble =
            // of element 8j + 4 + kk; ggml keeps element e < 16 in the low nibble of qs[e]
            // and e >= 16 in the high nibble of qs[e - 16]: 4 bytes at a time
            for (int j = 0; j < 4; j++) {
                uint32_t a, c;
                memcpy(&a, x[b].qs + 8 * (j % 2), 4);
                memcpy(&c, x[b].qs + 8 * (j % 2) + 4, 4);
                const int sh = j < 2 ? 0 : 4;
                const uint32_t v = ((a >> sh) & 0x0f0f0f0fu) | ((c >> sh) & 0x0f0f0f0fu) << 4;
                memcpy(q + j * 64 + r * 4, &v, 4);
            }
            uint32_t qh;
            memcpy(&qh, x[b].qh, 4);
            for (int g = 0; g < 8; g++) { // high bits of elements 4g..4g+3 -> bits 4r.. of u64 g
                uint64_t h;
                memcpy(&h, q + 256 + 8 * g, 8);
                h |= (uint64_t)((qh >> (4 * g)) & 0x0f) << (r * 4);
                memcpy(q + 256 + 8 * g, &h, 8);
            }
        }
    }
}

void lm_il_pack_group(enum lm_dtype t, void *dst, const void *src, size_t row_bytes, int64_t n_in) {
    switch (t) {
    case LM_DTYPE_Q8_0: pack_q8_0(dst, src, row_bytes, n_in); break;
    case LM_DTYPE_Q5_0: pack_q5_0(dst, src, row_bytes, n_in); break;
    case LM_DTYPE_Q4_K: lm_il_pack_q4_K(dst, src, row_bytes, n_in); break;
    case LM_DTYPE_Q6_K: lm_il_pack_q6_K(dst, src, row_bytes, n_in); break;
    case LM_DTYPE_F16:
        for (int r = 0; r < LM_IL_ROWS; r++)
            memcpy((char *)dst + (size_t)r * (size_t)n_in * sizeof(lm_f16),
                   (const char *)src + (size_t)r * row_bytes, (size_t)n_in * sizeof(lm_f16));
        break;
    default: LM_ASSERT(!"no il layout");
    }
}

size_t lm_il_act_row_bytes(enum lm_dtype t, int64_t n_in) {
    if (t == LM_DTYPE_Q8_0 || t == LM_DTYPE_Q5_0) return (size_t)(n_in / 32) * LM_IL_XQ8_BLOCK;
    if (t == LM_DTYPE_F16) return (size_t)n_in * sizeof(float);
    return lm_dtype_row_size(lm_vec_dot_type(t), n_in);
}

void lm_il_act_from(enum lm_dtype t, const void *xq, int64_t n_in, void *xa) {
    if (t == LM_DTYPE_F16) {
        const lm_f16 *h = xq;
        float *f = xa;
        for (int64_t i = 0; i < n_in; i++) f[i] = lm_f16_to_f32(h[i]); // = dequant[F16]
        return;
    }
    if (t != LM_DTYPE_Q8_0 && t != LM_DTYPE_Q5_0) {
        memcpy(xa, xq, lm_dtype_row_size(lm_vec_dot_type(t), n_in));
        return;
    }
    const struct lm_block_q8_0 *y = xq;
    const int64_t nb = n_in / 32;
    int8_t *qs = xa;
    float *d = (float *)(qs + nb * 32);
    int32_t *c16 = (int32_t *)(d + nb), *c128 = c16 + nb;
    for (int64_t b = 0; b < nb; b++) {
        int32_t s = 0;
        for (int k = 0; k < 32; k++) s += y[b].qs[k];
        memcpy(qs + b * 32, y[b].qs, 32);
        d[b] = lm_f16_to_f32(y[b].d);
        c16[b] = -16 * s;
        c128[b] = -128 * s;
    }
}

// ---- generic kernels: the contract's float steps, plain loops

// a block's 16 x 32 weights are decoded once (unsigned: q8_0 q + 128, q5_0 the raw 0..31)
// and reused for every token; the offsets come back through the activation sums (corr)
static void il_q8_generic(bool q5, int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                          const void *xa, size_t xas) {
    const int64_t nb = n_in / 32;
    const size_t rec_bytes = q5 ? LM_IL_Q5_0_REC : LM_IL_Q8_0_REC;
    float acc[LM_IL_MAX_NT][LM_IL_ROWS] = {{0}};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *rec = (const uint8_t *)wg + (size_t)b * rec_bytes;
        const lm_f16 *d = (const lm_f16 *)rec;
        const uint8_t *q = rec + 32;
        uint64_t hb[8];
        if (q5) memcpy(hb, q + 256, sizeof hb);
        int32_t w[LM_IL_ROWS][32];
        for (int g = 0; g < 8; g++) // elements 4g..4g+3 of every row
            for (int r = 0; r < LM_IL_ROWS; r++)
                for (int kk = 0; kk < 4; kk++) {
                    const int lane = r * 4 + kk;
                    if (q5) {
                        const uint8_t byte = q[(g / 2) * 64 + lane];
                        w[r][4 * g + kk] = (g % 2 ? byte >> 4 : byte & 0x0f) | (int)((hb[g] >> lane) & 1) << 4;
                    } else {
                        w[r][4 * g + kk] = q[g * 64 + lane];
                    }
                }
        for (int t = 0; t < nt; t++) {
            const int8_t *xq = (const int8_t *)((const char *)xa + (size_t)t * xas);
            const float *xd = (const float *)(xq + nb * 32);
            const int32_t *corr = (const int32_t *)(xd + nb) + (q5 ? 0 : nb);
            for (int r = 0; r < LM_IL_ROWS; r++) {
                int32_t isum = corr[b];
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
    il_q8_generic(false, n_in, nt, y, ys, wg, xa, xas);
}

void lm_il_gemm_q5_0_generic(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                             const void *xa, size_t xas) {
    il_q8_generic(true, n_in, nt, y, ys, wg, xa, xas);
}

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
