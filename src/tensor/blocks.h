// GGML's quantized block formats: the block structs (the on-disk layout, sizes
// static_assert'ed) and the facts of each format as scalar inline functions (the q4_K / q5_K
// scale and min packing, the q5 high bits, the quants of each k-quant block), so that every
// kernel and packer decodes a format the same way.
#ifndef LM_TENSOR_BLOCKS_H
#define LM_TENSOR_BLOCKS_H

#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "tensor/dtype.h"

// ================================================================ block layouts

#define LM_QK4_0 32
#define LM_QK4_1 32
#define LM_QK5_0 32
#define LM_QK5_1 32
#define LM_QK8_0 32
#define LM_QK8_1 32
#define LM_QK_K 256
#define LM_K_SCALE_SIZE 12

// Each block: the weights y[e] of LM_QK* consecutive elements from small integer quants q
// and f16 scales (the dequant kernels state the float steps):
//   q4_0: d (q - 8)   q4_1: d q + m   q5_0: d (q - 16)   q5_1: d q + m   q8_0: d q
//   q2_K, q4_K, q5_K: (d sc) q - (dmin mn), sc / mn per 16 (q2_K) or 32 elements
//   q3_K, q6_K: (d sc) q, sc per 16 elements
struct lm_block_q4_0 { lm_f16 d; uint8_t qs[LM_QK4_0 / 2]; };
struct lm_block_q4_1 { lm_f16 d; lm_f16 m; uint8_t qs[LM_QK4_1 / 2]; };
struct lm_block_q5_0 { lm_f16 d; uint8_t qh[4]; uint8_t qs[LM_QK5_0 / 2]; };
struct lm_block_q5_1 { lm_f16 d; lm_f16 m; uint8_t qh[4]; uint8_t qs[LM_QK5_1 / 2]; };
struct lm_block_q8_0 { lm_f16 d; int8_t qs[LM_QK8_0]; };
// q8_1: d = scale, s = d * sum(qs) (the activation type of q4_1 / q5_1 weights)
struct lm_block_q8_1 { lm_f16 d; lm_f16 s; int8_t qs[LM_QK8_1]; };
struct lm_block_q2_K {
    uint8_t scales[LM_QK_K / 16]; uint8_t qs[LM_QK_K / 4]; lm_f16 d; lm_f16 dmin;
};
struct lm_block_q3_K {
    uint8_t hmask[LM_QK_K / 8]; uint8_t qs[LM_QK_K / 4]; uint8_t scales[12]; lm_f16 d;
};
struct lm_block_q4_K {
    lm_f16 d; lm_f16 dmin; uint8_t scales[LM_K_SCALE_SIZE]; uint8_t qs[LM_QK_K / 2];
};
struct lm_block_q5_K {
    lm_f16 d; lm_f16 dmin; uint8_t scales[LM_K_SCALE_SIZE]; uint8_t qh[LM_QK_K / 8];
    uint8_t qs[LM_QK_K / 2];
};
struct lm_block_q6_K {
    uint8_t ql[LM_QK_K / 2]; uint8_t qh[LM_QK_K / 4]; int8_t scales[LM_QK_K / 16]; lm_f16 d;
};
// q8_K: the activation type of k-quant weights: float scale, int8 quants, sums of each 16
struct lm_block_q8_K { float d; int8_t qs[LM_QK_K]; int16_t bsums[LM_QK_K / 16]; };

static_assert(sizeof(struct lm_block_q4_0) == 18, "q4_0 block size");
static_assert(sizeof(struct lm_block_q4_1) == 20, "q4_1 block size");
static_assert(sizeof(struct lm_block_q5_0) == 22, "q5_0 block size");
static_assert(sizeof(struct lm_block_q5_1) == 24, "q5_1 block size");
static_assert(sizeof(struct lm_block_q8_0) == 34, "q8_0 block size");
static_assert(sizeof(struct lm_block_q8_1) == 36, "q8_1 block size");
static_assert(sizeof(struct lm_block_q2_K) == 84, "q2_K block size");
static_assert(sizeof(struct lm_block_q3_K) == 110, "q3_K block size");
static_assert(sizeof(struct lm_block_q4_K) == 144, "q4_K block size");
static_assert(sizeof(struct lm_block_q5_K) == 176, "q5_K block size");
static_assert(sizeof(struct lm_block_q6_K) == 210, "q6_K block size");
static_assert(sizeof(struct lm_block_q8_K) == 292, "q8_K block size");

// iq4_nl / iq4_xs: 4-bit indices into the fixed non-linear table lm_kvalues_iq4nl.
//   iq4_nl: d kv[q], 32 elements (q4_0's nibble order: element j low nibble of qs[j], j + 16 high)
//   iq4_xs: (d (sc - 32)) kv[q], 256 elements, sc the 6-bit scale of each 32 (low 4 bits in
//           scales_l, nibble j % 2 of byte j / 2; high 2 bits bits 2j..2j+1 of scales_h),
//           each 32 in iq4_nl's nibble order over its 16 bytes of qs
#define LM_QK4_NL 32
struct lm_block_iq4_nl { lm_f16 d; uint8_t qs[LM_QK4_NL / 2]; };
struct lm_block_iq4_xs { lm_f16 d; uint16_t scales_h; uint8_t scales_l[LM_QK_K / 64]; uint8_t qs[LM_QK_K / 2]; };
static_assert(sizeof(struct lm_block_iq4_nl) == 18, "iq4_nl block size");
static_assert(sizeof(struct lm_block_iq4_xs) == 136, "iq4_xs block size");
static const int8_t lm_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// mxfp4 (OCP microscaling FP4, ggml's block_mxfp4): 32 elements, one E8M0 scale byte e and
// 16 bytes of 4-bit E2M1 codes in q4_0's nibble order; y = lm_e8m0_half(e) kv[q], kv the
// E2M1 values doubled (so integers, ggml's kvalues_mxfp4), the scale halved to match
// (GGML_E8M0_TO_FP32_HALF). No padding: blocks are 17 bytes, byte-aligned.
#define LM_QK_MXFP4 32
struct lm_block_mxfp4 { uint8_t e; uint8_t qs[LM_QK_MXFP4 / 2]; };
static_assert(sizeof(struct lm_block_mxfp4) == 17, "mxfp4 block size");
static const int8_t lm_kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// 2^(e - 128) as a float, exact for every byte: e = 0, 1 give the subnormals 2^-128, 2^-127;
// e = 255 (NaN in the OCP spec) gives 2^127, as ggml decodes it (no NaN is produced).
static inline float lm_e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

// ================================================================ format facts
// Element order: element e of a block is y[e] of its dequantized row (lm_dequant_fn).

// q5_0 / q5_1: q[e] in 0..31 (the weight before offset or scale); the low 4 bits are in qs
// (element j the low nibble of qs[j], j + 16 the high one), bit 4 is bit e of qh.
static inline void lm_q5_unpack(const uint8_t qs[16], const uint8_t qh4[4], uint8_t q[32]) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    for (int j = 0; j < 16; j++) {
        q[j] = (uint8_t)((qs[j] & 0x0f) | (((qh >> j) & 1) << 4));
        q[j + 16] = (uint8_t)((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
    }
}

// q4_K / q5_K: the 6-bit scale and min of sub-block j (0..7, 32 elements each), packed in
// the block's 12 scale bytes.
static inline void lm_q4_K_scale_min(const uint8_t *s, int j, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

// q2_K: q[256] in 0..3, sc / mn[16] the 4-bit scale and min of each 16 elements.
static inline void lm_q2_K_unpack(const struct lm_block_q2_K *b, int8_t q[LM_QK_K], uint8_t sc[16],
                                  uint8_t mn[16]) {
    for (int e = 0; e < LM_QK_K; e++) {
        int half = e / 128, r = e % 128;
        q[e] = (int8_t)((b->qs[32 * half + r % 32] >> (2 * (r / 32))) & 3);
    }
    for (int j = 0; j < 16; j++) {
        sc[j] = b->scales[j] & 0x0f;
        mn[j] = b->scales[j] >> 4;
    }
}

// q3_K: q[256] in -4..3, sc[16] the signed 6-bit scales of each 16 elements (already - 32).
static inline void lm_q3_K_unpack(const struct lm_block_q3_K *b, int8_t q[LM_QK_K], int8_t sc[16]) {
    for (int e = 0; e < LM_QK_K; e++) {
        int half = e / 128, r = e % 128, l = r % 32;
        int v = (b->qs[32 * half + l] >> (2 * (r / 32))) & 3;
        q[e] = (int8_t)(v - ((b->hmask[l] >> (e / 32)) & 1 ? 0 : 4));
    }
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? (b->scales[j] & 0x0f) : (b->scales[j - 8] >> 4);
        int hi = (b->scales[8 + j % 4] >> (2 * (j / 4))) & 3;
        sc[j] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

// q3_K: the 16 signed 6-bit scales (already - 32) from the block's 12 scale bytes, four at a
// time as ggml unpacks them (the same values as lm_q3_K_unpack's sc).
static inline void lm_q3_K_scales(const uint8_t s12[12], int8_t sc[16]) {
    uint32_t a[4], t;
    memcpy(a, s12, 12);
    t = a[2];
    a[2] = ((a[0] >> 4) & 0x0f0f0f0fu) | (((t >> 4) & 0x03030303u) << 4);
    a[3] = ((a[1] >> 4) & 0x0f0f0f0fu) | (((t >> 6) & 0x03030303u) << 4);
    a[0] = (a[0] & 0x0f0f0f0fu) | (((t >> 0) & 0x03030303u) << 4);
    a[1] = (a[1] & 0x0f0f0f0fu) | (((t >> 2) & 0x03030303u) << 4);
    memcpy(sc, a, 16);
    for (int j = 0; j < 16; j++) sc[j] = (int8_t)(sc[j] - 32);
}

// q4_K: q[256] in 0..15 (64-element chunks of 32 bytes, low nibbles first), sc / mn[8] of
// each 32 elements.
static inline void lm_q4_K_unpack(const struct lm_block_q4_K *b, int8_t q[LM_QK_K], uint8_t sc[8],
                                  uint8_t mn[8]) {
    for (int e = 0; e < LM_QK_K; e++) {
        int c = e / 64, r = e % 64;
        uint8_t byte = b->qs[32 * c + r % 32];
        q[e] = (int8_t)(r < 32 ? byte & 0x0f : byte >> 4);
    }
    for (int j = 0; j < 8; j++) lm_q4_K_scale_min(b->scales, j, &sc[j], &mn[j]);
}

// q5_K: q[256] in 0..31 (q4_K's nibbles, bit 4 from qh), sc / mn[8] of each 32 elements.
static inline void lm_q5_K_unpack(const struct lm_block_q5_K *b, int8_t q[LM_QK_K], uint8_t sc[8],
                                  uint8_t mn[8]) {
    for (int e = 0; e < LM_QK_K; e++) {
        int c = e / 64, r = e % 64, l = r % 32;
        uint8_t byte = b->qs[32 * c + l];
        int v = r < 32 ? byte & 0x0f : byte >> 4;
        q[e] = (int8_t)(v | (((b->qh[l] >> (e / 32)) & 1) << 4));
    }
    for (int j = 0; j < 8; j++) lm_q4_K_scale_min(b->scales, j, &sc[j], &mn[j]);
}

// q6_K: q[256] in -32..31 (the stored 6-bit value - 32: low 4 bits in ql, high 2 in qh);
// the scales are b->scales[16], one per 16 elements.
static inline void lm_q6_K_unpack(const struct lm_block_q6_K *b, int8_t q[LM_QK_K]) {
    for (int e = 0; e < LM_QK_K; e++) {
        int h = e / 128, r = e % 128, k = r / 32, l = r % 32;
        uint8_t lo = b->ql[64 * h + l + (k & 1) * 32];
        int v = (k < 2 ? lo & 0x0f : lo >> 4) | (((b->qh[32 * h + l] >> (2 * k)) & 3) << 4);
        q[e] = (int8_t)(v - 32);
    }
}

// iq4_xs: the signed scale (sc - 32, in -32..31) of sub-block j (0..7, 32 elements).
static inline int lm_iq4_xs_scale(const struct lm_block_iq4_xs *b, int j) {
    const int ls = ((b->scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) | (((b->scales_h >> (2 * j)) & 3) << 4);
    return ls - 32;
}

#endif
