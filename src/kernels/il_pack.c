// Row-interleaved ("il") weights at load and at run time, ISA-independent: which weights have
// an il layout, the group sizes, packing 16 ggml rows into one group (layouts in il_layout.h),
// and the activation rows the il kernels read, made from the vec_dot activation row.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include <string.h>

#include "base/status.h"
#include "kernels/il_layout.h"
#include "kernels/kernels_internal.h"

bool lm_il_supported(enum lm_dtype t, int64_t n_out, int64_t n_in) {
    if (n_out <= 0 || n_out % LM_IL_ROWS != 0 || n_in <= 0) return false;
    switch (t) {
    case LM_DTYPE_Q8_0:
    case LM_DTYPE_Q5_0:
    case LM_DTYPE_Q4_0:
    case LM_DTYPE_Q4_1:
    case LM_DTYPE_Q5_1:
    case LM_DTYPE_IQ4_NL:
    case LM_DTYPE_MXFP4: return n_in % 32 == 0;
    case LM_DTYPE_Q4_K:
    case LM_DTYPE_Q5_K:
    case LM_DTYPE_Q6_K:
    case LM_DTYPE_Q2_K:
    case LM_DTYPE_Q3_K:
    case LM_DTYPE_IQ4_XS: return n_in % LM_QK_K == 0;
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
    case LM_DTYPE_Q4_0:
    case LM_DTYPE_IQ4_NL: return (size_t)(n_in / 32) * LM_IL_Q4_0_REC;
    case LM_DTYPE_Q4_1: return (size_t)(n_in / 32) * LM_IL_Q4_1_REC;
    case LM_DTYPE_Q5_1: return (size_t)(n_in / 32) * LM_IL_Q5_1_REC;
    case LM_DTYPE_Q4_K: return (size_t)(n_in / LM_QK_K) * sizeof(struct lm_il_q4_K_sb);
    case LM_DTYPE_Q5_K: return (size_t)(n_in / LM_QK_K) * sizeof(struct lm_il_q5_K_sb);
    case LM_DTYPE_Q6_K: return (size_t)(n_in / LM_QK_K) * sizeof(struct lm_il_q6_K_sb);
    case LM_DTYPE_Q2_K: return (size_t)(n_in / LM_QK_K) * sizeof(struct lm_il_q2_K_sb);
    case LM_DTYPE_Q3_K: return (size_t)(n_in / LM_QK_K) * sizeof(struct lm_il_q3_K_sb);
    case LM_DTYPE_IQ4_XS: return (size_t)(n_in / LM_QK_K) * sizeof(struct lm_il_iq4_xs_sb);
    case LM_DTYPE_MXFP4: return (size_t)(n_in / 32) * LM_IL_MXFP4_REC;
    case LM_DTYPE_F16: return (size_t)LM_IL_ROWS * (size_t)n_in * sizeof(lm_f16);
    default: LM_ASSERT(!"no il layout"); return 0;
    }
}

// ---- packing

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

// the 16 quant bytes of a q5_0 / q4_0 block (same nibble order) -> row r's bytes of the
// record's 4 nibble vectors q
static void pack_nibbles(uint8_t *q, const uint8_t *qs, int r) {
    // byte kk of vector j: low nibble = low 4 bits of element 8j + kk, high nibble =
    // of element 8j + 4 + kk; ggml keeps element e < 16 in the low nibble of qs[e]
    // and e >= 16 in the high nibble of qs[e - 16]: 4 bytes at a time
    for (int j = 0; j < 4; j++) {
        uint32_t a, c;
        memcpy(&a, qs + 8 * (j % 2), 4);
        memcpy(&c, qs + 8 * (j % 2) + 4, 4);
        const int sh = j < 2 ? 0 : 4;
        const uint32_t v = ((a >> sh) & 0x0f0f0f0fu) | ((c >> sh) & 0x0f0f0f0fu) << 4;
        memcpy(q + j * 64 + r * 4, &v, 4);
    }
}

static void pack_q4_0(uint8_t *dst, const void *src, size_t row_bytes, int64_t n_in) {
    for (int r = 0; r < LM_IL_ROWS; r++) {
        const struct lm_block_q4_0 *x = (const struct lm_block_q4_0 *)((const char *)src + (size_t)r * row_bytes);
        for (int64_t b = 0; b < n_in / 32; b++) {
            uint8_t *rec = dst + (size_t)b * LM_IL_Q4_0_REC;
            memcpy(rec + 2 * r, &x[b].d, 2);
            pack_nibbles(rec + 32, x[b].qs, r);
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
            pack_nibbles(q, x[b].qs, r);
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


// row r of one q4_K-style super-block: d, dmin, the decoded scales and mins, and the low
// 4 bits of the quants q (0..15 for q4_K, 0..31 for q5_K)
static void pack_q4_K_row(struct lm_il_q4_K_sb *o, int r, lm_f16 d, lm_f16 dmin, const int8_t *q,
                          const uint8_t *sc, const uint8_t *mn) {
    o->d[r] = d;
    o->dmin[r] = dmin;
    for (int j = 0; j < 8; j++) {
        o->sc[j][r] = sc[j];
        o->mn[j / 2][r][j % 2] = mn[j];
    }
    for (int j = 0; j < 8; j++) // 4 columns at a time
        for (int v = 0; v < 4; v++) {
            uint32_t lo, hi;
            memcpy(&lo, q + 32 * j + 4 * v, 4);
            memcpy(&hi, q + 32 * j + 16 + 4 * v, 4);
            lo = (lo & 0x0f0f0f0fu) | (hi & 0x0f0f0f0fu) << 4;
            memcpy(&o->qs[j][v][4 * r], &lo, 4);
        }
}

static void pack_q4_K(void *dst, const void *src, size_t row_bytes, int64_t n_in) {
    LM_ASSERT(n_in % LM_QK_K == 0);
    for (int r = 0; r < LM_IL_ROWS; r++) {
        for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
            const struct lm_block_q4_K *b = (const struct lm_block_q4_K *)((const char *)src + r * row_bytes) + i;
            int8_t q[LM_QK_K];
            uint8_t sc[8], mn[8];
            lm_q4_K_unpack(b, q, sc, mn);
            pack_q4_K_row((struct lm_il_q4_K_sb *)dst + i, r, b->d, b->dmin, q, sc, mn);
        }
    }
}

static void pack_q5_K(void *dst, const void *src, size_t row_bytes, int64_t n_in) {
    LM_ASSERT(n_in % LM_QK_K == 0);
    for (int64_t i = 0; i < n_in / LM_QK_K; i++) memset(((struct lm_il_q5_K_sb *)dst)[i].qh, 0, 512);
    for (int r = 0; r < LM_IL_ROWS; r++) {
        for (int64_t i = 0; i < n_in / LM_QK_K; i++) {
            struct lm_il_q5_K_sb *o = (struct lm_il_q5_K_sb *)dst + i;
            const struct lm_block_q5_K *b = (const struct lm_block_q5_K *)((const char *)src + r * row_bytes) + i;
            int8_t q[LM_QK_K]; // 0..31
            uint8_t sc[8], mn[8];
            lm_q5_K_unpack(b, q, sc, mn);
            pack_q4_K_row(&o->lo, r, b->d, b->dmin, q, sc, mn);
            for (int j = 0; j < 8; j++)
                for (int u = 0; u < 8; u++) { // run u: columns 32j + 4u + kk
                    uint64_t h = 0;
                    for (int kk = 0; kk < 4; kk++) h |= (uint64_t)((q[32 * j + 4 * u + kk] >> 4) & 1) << kk;
                    o->qh[j][u] |= h << (4 * r);
                }
        }
    }
}

static void pack_q6_K(void *dst, const void *src, size_t row_bytes, int64_t n_in) {
    LM_ASSERT(n_in % LM_QK_K == 0);
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

void lm_il_pack_group(enum lm_dtype t, void *dst, const void *src, size_t row_bytes, int64_t n_in) {
    switch (t) {
    case LM_DTYPE_Q8_0: pack_q8_0(dst, src, row_bytes, n_in); break;
    case LM_DTYPE_Q5_0: pack_q5_0(dst, src, row_bytes, n_in); break;
    case LM_DTYPE_Q4_0:
    case LM_DTYPE_IQ4_NL: pack_q4_0(dst, src, row_bytes, n_in); break; // same block bytes
    case LM_DTYPE_Q4_1:
    case LM_DTYPE_Q5_1: lm_il_pack_q1(t, dst, src, row_bytes, n_in); break;
    case LM_DTYPE_Q4_K: pack_q4_K(dst, src, row_bytes, n_in); break;
    case LM_DTYPE_Q5_K: pack_q5_K(dst, src, row_bytes, n_in); break;
    case LM_DTYPE_Q6_K: pack_q6_K(dst, src, row_bytes, n_in); break;
    case LM_DTYPE_Q2_K: lm_il_pack_q2_K(dst, src, row_bytes, n_in); break;
    case LM_DTYPE_Q3_K: lm_il_pack_q3_K(dst, src, row_bytes, n_in); break;
    case LM_DTYPE_IQ4_XS: lm_il_pack_iq4_xs(dst, src, row_bytes, n_in); break; // iq4_generic.c
    case LM_DTYPE_MXFP4: lm_il_pack_mxfp4(dst, src, row_bytes, n_in); break; // mxfp4_generic.c
    case LM_DTYPE_F16:
        for (int r = 0; r < LM_IL_ROWS; r++)
            memcpy((char *)dst + (size_t)r * (size_t)n_in * sizeof(lm_f16),
                   (const char *)src + (size_t)r * row_bytes, (size_t)n_in * sizeof(lm_f16));
        break;
    default: LM_ASSERT(!"no il layout");
    }
}


// ---- activation rows

size_t lm_il_act_row_bytes(enum lm_dtype t, int64_t n_in) {
    if (lm_vec_dot_type(t) == LM_DTYPE_Q8_0) return (size_t)(n_in / 32) * LM_IL_XQ8_BLOCK;
    if (lm_vec_dot_type(t) == LM_DTYPE_Q8_1) return (size_t)(n_in / 32) * LM_IL_XQ81_BLOCK;
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
    if (lm_vec_dot_type(t) == LM_DTYPE_Q8_1) {
        lm_il_act_q81(xq, n_in, xa);
        return;
    }
    if (lm_vec_dot_type(t) != LM_DTYPE_Q8_0) {
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

size_t lm_il_act_amx_bytes(int64_t n_rows, int64_t n_in) {
    return (size_t)((n_rows + 15) / 16) * (size_t)(n_in / LM_QK_K) * LM_IL_AMX_REC;
}

void lm_il_act_amx(const void *xq, int64_t n_in, int64_t t, void *xt) {
    const struct lm_block_q8_K *x = xq;
    const int64_t nsb = n_in / LM_QK_K;
    for (int64_t i = 0; i < nsb; i++) {
        char *rec = (char *)xt + (size_t)((t / 16) * nsb + i) * LM_IL_AMX_REC;
        for (int s = 0; s < 4; s++) {
            if (x) memcpy(rec + 1024 * s + 64 * (t % 16), x[i].qs + 64 * s, 64);
            else memset(rec + 1024 * s + 64 * (t % 16), 0, 64);
        }
        const float d = x ? x[i].d : 0.0f;
        memcpy(rec + 4096 + sizeof(float) * (size_t)(t % 16), &d, sizeof d);
        if (x) memcpy(rec + 4096 + 64 + 32 * (t % 16), x[i].bsums, 32);
        else memset(rec + 4096 + 64 + 32 * (t % 16), 0, 32);
    }
}
