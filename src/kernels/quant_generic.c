// Scalar conversions between float rows and the block formats, the oracle of every ISA
// table: dequantize (a weight row of any supported dtype -> floats) and quantize (an
// activation row -> q8_0 / q8_1 / q8_K / f16 / bf16, bit-exact with llama.cpp's x86
// quantize_row_q8_0 / q8_1 and quantize_row_q8_K_ref). Clarity over speed.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h: d*q - m must not become an FMA

#include <math.h>
#include <string.h>

#include "kernels/kernels_internal.h"

// ============================================================================
// dequantize: one weight row of n elements -> y (n floats)
// ============================================================================

void lm_dequant_f32_generic(const void *x, float *y, int64_t n) { memcpy(y, x, (size_t)n * sizeof(float)); }

void lm_dequant_f16_generic(const void *x, float *y, int64_t n) {
    const lm_f16 *h = x;
    for (int64_t i = 0; i < n; i++) y[i] = lm_f16_to_f32(h[i]);
}

void lm_dequant_bf16_generic(const void *x, float *y, int64_t n) {
    const lm_bf16 *h = x;
    for (int64_t i = 0; i < n; i++) y[i] = lm_bf16_to_f32(h[i]);
}

void lm_dequant_q4_0_generic(const void *x, float *y, int64_t n) {
    const struct lm_block_q4_0 *b = x;
    for (int64_t i = 0; i < n / LM_QK4_0; i++, y += 32) {
        float d = lm_f16_to_f32(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((b[i].qs[j] & 0x0f) - 8) * d;
            y[j + 16] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void lm_dequant_q4_1_generic(const void *x, float *y, int64_t n) {
    const struct lm_block_q4_1 *b = x;
    for (int64_t i = 0; i < n / LM_QK4_1; i++, y += 32) {
        float d = lm_f16_to_f32(b[i].d), m = lm_f16_to_f32(b[i].m);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(b[i].qs[j] & 0x0f) * d + m;
            y[j + 16] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

void lm_dequant_q5_0_generic(const void *x, float *y, int64_t n) {
    const struct lm_block_q5_0 *b = x;
    uint8_t q[32];
    for (int64_t i = 0; i < n / LM_QK5_0; i++, y += 32) {
        float d = lm_f16_to_f32(b[i].d);
        lm_q5_unpack(b[i].qs, b[i].qh, q);
        for (int j = 0; j < 32; j++) y[j] = (float)(q[j] - 16) * d;
    }
}

void lm_dequant_q5_1_generic(const void *x, float *y, int64_t n) {
    const struct lm_block_q5_1 *b = x;
    uint8_t q[32];
    for (int64_t i = 0; i < n / LM_QK5_1; i++, y += 32) {
        float d = lm_f16_to_f32(b[i].d), m = lm_f16_to_f32(b[i].m);
        lm_q5_unpack(b[i].qs, b[i].qh, q);
        for (int j = 0; j < 32; j++) y[j] = (float)q[j] * d + m;
    }
}

void lm_dequant_q8_0_generic(const void *x, float *y, int64_t n) {
    const struct lm_block_q8_0 *b = x;
    for (int64_t i = 0; i < n / LM_QK8_0; i++, y += 32) {
        float d = lm_f16_to_f32(b[i].d);
        for (int j = 0; j < 32; j++) y[j] = (float)b[i].qs[j] * d;
    }
}

void lm_dequant_q2_K_generic(const void *x, float *y, int64_t n) {
    const struct lm_block_q2_K *b = x;
    int8_t q[LM_QK_K];
    uint8_t sc[16], mn[16];
    for (int64_t i = 0; i < n / LM_QK_K; i++, y += LM_QK_K) {
        float d = lm_f16_to_f32(b[i].d), dmin = lm_f16_to_f32(b[i].dmin);
        lm_q2_K_unpack(&b[i], q, sc, mn);
        for (int e = 0; e < LM_QK_K; e++) {
            float dl = d * (float)sc[e / 16], ml = dmin * (float)mn[e / 16];
            y[e] = dl * (float)q[e] - ml;
        }
    }
}

void lm_dequant_q3_K_generic(const void *x, float *y, int64_t n) {
    const struct lm_block_q3_K *b = x;
    int8_t q[LM_QK_K], sc[16];
    for (int64_t i = 0; i < n / LM_QK_K; i++, y += LM_QK_K) {
        float d = lm_f16_to_f32(b[i].d);
        lm_q3_K_unpack(&b[i], q, sc);
        for (int e = 0; e < LM_QK_K; e++) y[e] = (d * (float)sc[e / 16]) * (float)q[e];
    }
}

void lm_dequant_q4_K_generic(const void *x, float *y, int64_t n) {
    const struct lm_block_q4_K *b = x;
    int8_t q[LM_QK_K];
    uint8_t sc[8], mn[8];
    for (int64_t i = 0; i < n / LM_QK_K; i++, y += LM_QK_K) {
        float d = lm_f16_to_f32(b[i].d), dmin = lm_f16_to_f32(b[i].dmin);
        lm_q4_K_unpack(&b[i], q, sc, mn);
        for (int e = 0; e < LM_QK_K; e++) {
            float dl = d * (float)sc[e / 32], ml = dmin * (float)mn[e / 32];
            y[e] = dl * (float)q[e] - ml;
        }
    }
}

void lm_dequant_q5_K_generic(const void *x, float *y, int64_t n) {
    const struct lm_block_q5_K *b = x;
    int8_t q[LM_QK_K];
    uint8_t sc[8], mn[8];
    for (int64_t i = 0; i < n / LM_QK_K; i++, y += LM_QK_K) {
        float d = lm_f16_to_f32(b[i].d), dmin = lm_f16_to_f32(b[i].dmin);
        lm_q5_K_unpack(&b[i], q, sc, mn);
        for (int e = 0; e < LM_QK_K; e++) {
            float dl = d * (float)sc[e / 32], ml = dmin * (float)mn[e / 32];
            y[e] = dl * (float)q[e] - ml;
        }
    }
}

void lm_dequant_q6_K_generic(const void *x, float *y, int64_t n) {
    const struct lm_block_q6_K *b = x;
    int8_t q[LM_QK_K];
    for (int64_t i = 0; i < n / LM_QK_K; i++, y += LM_QK_K) {
        float d = lm_f16_to_f32(b[i].d);
        lm_q6_K_unpack(&b[i], q);
        for (int e = 0; e < LM_QK_K; e++) y[e] = (d * (float)b[i].scales[e / 16]) * (float)q[e];
    }
}

// ============================================================================
// quantize: one activation row x (n floats) -> y
// ============================================================================

void lm_quant_f32_generic(const float *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * sizeof(float)); }

void lm_quant_f16_generic(const float *x, void *y, int64_t n) {
    lm_f16 *h = y;
    for (int64_t i = 0; i < n; i++) h[i] = lm_f32_to_f16(x[i]);
}

void lm_quant_bf16_generic(const float *x, void *y, int64_t n) {
    lm_bf16 *h = y;
    for (int64_t i = 0; i < n; i++) h[i] = lm_f32_to_bf16(x[i]);
}

// As llama.cpp's x86 quantize_row_q8_0 (the code its CPU backend runs here, not the _ref):
// d = amax/127, q = round-half-even(x * (127/amax)). Matching it keeps logits comparable.
void lm_quant_q8_0_generic(const float *x, void *vy, int64_t n) {
    struct lm_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / LM_QK8_0; i++, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[i].d = lm_f32_to_f16(d);
        for (int j = 0; j < 32; j++) y[i].qs[j] = (int8_t)nearbyintf(x[j] * id);
    }
}

// As llama.cpp's x86 quantize_row_q8_1: q8_0 plus s = fp16(d * sum(q)).
void lm_quant_q8_1_generic(const float *x, void *vy, int64_t n) {
    struct lm_block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / LM_QK8_1; i++, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[i].d = lm_f32_to_f16(d);
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            y[i].qs[j] = (int8_t)nearbyintf(x[j] * id);
            sum += y[i].qs[j];
        }
        y[i].s = lm_f32_to_f16((float)sum * d);
    }
}

// llama.cpp's nearest_int: adding 1.5*2^23 rounds half to even; |fval| <= 2^22.
static inline int nearest_int(float fval) {
    float val = fval + 12582912.0f;
    int32_t i;
    memcpy(&i, &val, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

// As quantize_row_q8_K_ref: iscale = -127/max where max is the first element of largest
// magnitude; q = nearest_int(iscale * x) (round half to even of the rounded product), capped at
// 127; d = 1/iscale; bsums = sums of 16 quants.
void lm_quant_q8_K_generic(const float *x, void *vy, int64_t n) {
    struct lm_block_q8_K *y = vy;
    for (int64_t i = 0; i < n / LM_QK_K; i++, x += LM_QK_K) {
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < LM_QK_K; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) { amax = ax; max = x[j]; }
        }
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < LM_QK_K; j++) {
            int v = nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < LM_QK_K / 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1.0f / iscale;
    }
}
