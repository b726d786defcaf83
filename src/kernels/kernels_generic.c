// Scalar reference kernels: dequantization, activation quantizers (bit-exact with
// llama.cpp's quantize_row_q8_0_ref / q8_1_ref / q8_K_ref) and dot products. These are
// the test oracle for every ISA table; they favour clarity over speed.
//
// fp-contract is off in every kernel file: GCC would otherwise fuse d*q - m into an FMA
// under -march=native, and dequantized values must match llama.cpp / gguf-py (which
// round the product first) and the ISA tables bit for bit.
#pragma GCC optimize("fp-contract=off")

#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/il_kq.h"
#include "kernels/kernels_internal.h"

// llama.cpp's nearest_int: adding 1.5*2^23 rounds half to even; |fval| <= 2^22.
static inline int nearest_int(float fval) {
    float val = fval + 12582912.0f;
    int32_t i;
    memcpy(&i, &val, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

// ============================================================================
// dequantize: one row of n elements -> y (n floats)
// ============================================================================

static void dequant_f32(const void *x, float *y, int64_t n) { memcpy(y, x, (size_t)n * sizeof(float)); }

static void dequant_f16(const void *x, float *y, int64_t n) {
    const lm_f16 *h = x;
    for (int64_t i = 0; i < n; i++) y[i] = lm_f16_to_f32(h[i]);
}

static void dequant_bf16(const void *x, float *y, int64_t n) {
    const lm_bf16 *h = x;
    for (int64_t i = 0; i < n; i++) y[i] = lm_bf16_to_f32(h[i]);
}

static void dequant_q4_0(const void *x, float *y, int64_t n) {
    const struct lm_block_q4_0 *b = x;
    for (int64_t i = 0; i < n / LM_QK4_0; i++, y += 32) {
        float d = lm_f16_to_f32(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((b[i].qs[j] & 0x0f) - 8) * d;
            y[j + 16] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void dequant_q4_1(const void *x, float *y, int64_t n) {
    const struct lm_block_q4_1 *b = x;
    for (int64_t i = 0; i < n / LM_QK4_1; i++, y += 32) {
        float d = lm_f16_to_f32(b[i].d), m = lm_f16_to_f32(b[i].m);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(b[i].qs[j] & 0x0f) * d + m;
            y[j + 16] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

static void dequant_q5_0(const void *x, float *y, int64_t n) {
    const struct lm_block_q5_0 *b = x;
    uint8_t q[32];
    for (int64_t i = 0; i < n / LM_QK5_0; i++, y += 32) {
        float d = lm_f16_to_f32(b[i].d);
        lm_q5_unpack(b[i].qs, b[i].qh, q);
        for (int j = 0; j < 32; j++) y[j] = (float)(q[j] - 16) * d;
    }
}

static void dequant_q5_1(const void *x, float *y, int64_t n) {
    const struct lm_block_q5_1 *b = x;
    uint8_t q[32];
    for (int64_t i = 0; i < n / LM_QK5_1; i++, y += 32) {
        float d = lm_f16_to_f32(b[i].d), m = lm_f16_to_f32(b[i].m);
        lm_q5_unpack(b[i].qs, b[i].qh, q);
        for (int j = 0; j < 32; j++) y[j] = (float)q[j] * d + m;
    }
}

static void dequant_q8_0(const void *x, float *y, int64_t n) {
    const struct lm_block_q8_0 *b = x;
    for (int64_t i = 0; i < n / LM_QK8_0; i++, y += 32) {
        float d = lm_f16_to_f32(b[i].d);
        for (int j = 0; j < 32; j++) y[j] = (float)b[i].qs[j] * d;
    }
}

static void dequant_q2_K(const void *x, float *y, int64_t n) {
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

static void dequant_q3_K(const void *x, float *y, int64_t n) {
    const struct lm_block_q3_K *b = x;
    int8_t q[LM_QK_K], sc[16];
    for (int64_t i = 0; i < n / LM_QK_K; i++, y += LM_QK_K) {
        float d = lm_f16_to_f32(b[i].d);
        lm_q3_K_unpack(&b[i], q, sc);
        for (int e = 0; e < LM_QK_K; e++) y[e] = (d * (float)sc[e / 16]) * (float)q[e];
    }
}

static void dequant_q4_K(const void *x, float *y, int64_t n) {
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

static void dequant_q5_K(const void *x, float *y, int64_t n) {
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

static void dequant_q6_K(const void *x, float *y, int64_t n) {
    const struct lm_block_q6_K *b = x;
    int8_t q[LM_QK_K];
    for (int64_t i = 0; i < n / LM_QK_K; i++, y += LM_QK_K) {
        float d = lm_f16_to_f32(b[i].d);
        lm_q6_K_unpack(&b[i], q);
        for (int e = 0; e < LM_QK_K; e++) y[e] = (d * (float)b[i].scales[e / 16]) * (float)q[e];
    }
}

// ============================================================================
// activation quantizers (x (n floats) -> y)
// ============================================================================

static void quant_f32(const float *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * sizeof(float)); }

static void quant_f16(const float *x, void *y, int64_t n) {
    lm_f16 *h = y;
    for (int64_t i = 0; i < n; i++) h[i] = lm_f32_to_f16(x[i]);
}

static void quant_bf16(const float *x, void *y, int64_t n) {
    lm_bf16 *h = y;
    for (int64_t i = 0; i < n; i++) h[i] = lm_f32_to_bf16(x[i]);
}

// As llama.cpp's x86 quantize_row_q8_0 (the code its CPU backend runs here, not the _ref):
// d = amax/127, q = round-half-even(x * (127/amax)). Matching it keeps logits comparable.
static void quant_q8_0(const float *x, void *vy, int64_t n) {
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
static void quant_q8_1(const float *x, void *vy, int64_t n) {
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

// As quantize_row_q8_K_ref: iscale = -127/max where max is the first element of largest
// magnitude; q = nearest_int(iscale * x) (round half to even of the rounded product), capped at
// 127; d = 1/iscale; bsums = sums of 16 quants.
static void quant_q8_K(const float *x, void *vy, int64_t n) {
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

// ============================================================================
// dot products: *s = dot(w (n), xq (n))
// ============================================================================

// Plain types accumulate in double, as ggml's scalar ggml_vec_dot_f32/f16/bf16 do.
static void vec_dot_f32(int64_t n, float *s, const void *w, const void *xq) {
    const float *a = w, *b = xq;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(a[i] * b[i]);
    *s = (float)sum;
}

// the f16 contract of kernels.h: 16 lane sums (fmaf in order), then lm_tree16
static void vec_dot_f16(int64_t n, float *s, const void *w, const void *xq) {
    const lm_f16 *a = w, *b = xq;
    float acc[16] = {0};
    for (int64_t i = 0; i < n; i++) acc[i % 16] = fmaf(lm_f16_to_f32(a[i]), lm_f16_to_f32(b[i]), acc[i % 16]);
    *s = lm_tree16(acc);
}

static void vec_dot_bf16(int64_t n, float *s, const void *w, const void *xq) {
    const lm_bf16 *a = w, *b = xq;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(lm_bf16_to_f32(a[i]) * lm_bf16_to_f32(b[i]));
    *s = (float)sum;
}

// 32-blocks: exact int32 dot per block, then sum += sumi * (dw * dx) in float.
static void vec_dot_q4_0(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q4_0 *x = w;
    const struct lm_block_q8_0 *y = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            sumi += ((x[i].qs[j] & 0x0f) - 8) * y[i].qs[j];
            sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
        }
        sum += (float)sumi * (lm_f16_to_f32(x[i].d) * lm_f16_to_f32(y[i].d));
    }
    *s = sum;
}

static void vec_dot_q4_1(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q4_1 *x = w;
    const struct lm_block_q8_1 *y = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            sumi += (x[i].qs[j] & 0x0f) * y[i].qs[j];
            sumi += (x[i].qs[j] >> 4) * y[i].qs[j + 16];
        }
        sum += (float)sumi * (lm_f16_to_f32(x[i].d) * lm_f16_to_f32(y[i].d)) +
               lm_f16_to_f32(x[i].m) * lm_f16_to_f32(y[i].s);
    }
    *s = sum;
}

static void vec_dot_q5_0(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q5_0 *x = w;
    const struct lm_block_q8_0 *y = xq;
    uint8_t q[32];
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        lm_q5_unpack(x[i].qs, x[i].qh, q);
        int sumi = 0;
        for (int j = 0; j < 32; j++) sumi += (q[j] - 16) * y[i].qs[j];
        sum += (float)sumi * (lm_f16_to_f32(x[i].d) * lm_f16_to_f32(y[i].d));
    }
    *s = sum;
}

static void vec_dot_q5_1(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q5_1 *x = w;
    const struct lm_block_q8_1 *y = xq;
    uint8_t q[32];
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        lm_q5_unpack(x[i].qs, x[i].qh, q);
        int sumi = 0;
        for (int j = 0; j < 32; j++) sumi += q[j] * y[i].qs[j];
        sum += (float)sumi * (lm_f16_to_f32(x[i].d) * lm_f16_to_f32(y[i].d)) +
               lm_f16_to_f32(x[i].m) * lm_f16_to_f32(y[i].s);
    }
    *s = sum;
}

static void vec_dot_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q8_0 *x = w;
    const struct lm_block_q8_0 *y = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int sumi = 0;
        for (int j = 0; j < 32; j++) sumi += x[i].qs[j] * y[i].qs[j];
        sum += (float)sumi * (lm_f16_to_f32(x[i].d) * lm_f16_to_f32(y[i].d));
    }
    *s = sum;
}

// K-quants: exact int32 sums per super-block (sum over sub-blocks of scale * dot), then
// sum += (d * y.d) * isum - (dmin * y.d) * (sum of mins * bsums), as ggml does.
static void vec_dot_q2_K(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q2_K *x = w;
    const struct lm_block_q8_K *y = xq;
    int8_t q[LM_QK_K];
    uint8_t sc[16], mn[16];
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        lm_q2_K_unpack(&x[i], q, sc, mn);
        int isum = 0, summs = 0;
        for (int j = 0; j < 16; j++) {
            int d = 0;
            for (int l = 0; l < 16; l++) d += q[16 * j + l] * y[i].qs[16 * j + l];
            isum += sc[j] * d;
            summs += mn[j] * y[i].bsums[j];
        }
        sum += (lm_f16_to_f32(x[i].d) * y[i].d) * (float)isum -
               (lm_f16_to_f32(x[i].dmin) * y[i].d) * (float)summs;
    }
    *s = sum;
}

static void vec_dot_q3_K(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q3_K *x = w;
    const struct lm_block_q8_K *y = xq;
    int8_t q[LM_QK_K], sc[16];
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        lm_q3_K_unpack(&x[i], q, sc);
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            int d = 0;
            for (int l = 0; l < 16; l++) d += q[16 * j + l] * y[i].qs[16 * j + l];
            isum += sc[j] * d;
        }
        sum += (lm_f16_to_f32(x[i].d) * y[i].d) * (float)isum;
    }
    *s = sum;
}

static void vec_dot_q4_K(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q4_K *x = w;
    const struct lm_block_q8_K *y = xq;
    int8_t q[LM_QK_K];
    uint8_t sc[8], mn[8];
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        lm_q4_K_unpack(&x[i], q, sc, mn);
        int isum = 0, summs = 0;
        for (int j = 0; j < 8; j++) {
            int d = 0;
            for (int l = 0; l < 32; l++) d += q[32 * j + l] * y[i].qs[32 * j + l];
            isum += sc[j] * d;
            summs += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        sum += (lm_f16_to_f32(x[i].d) * y[i].d) * (float)isum -
               (lm_f16_to_f32(x[i].dmin) * y[i].d) * (float)summs;
    }
    *s = sum;
}

static void vec_dot_q5_K(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q5_K *x = w;
    const struct lm_block_q8_K *y = xq;
    int8_t q[LM_QK_K];
    uint8_t sc[8], mn[8];
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        lm_q5_K_unpack(&x[i], q, sc, mn);
        int isum = 0, summs = 0;
        for (int j = 0; j < 8; j++) {
            int d = 0;
            for (int l = 0; l < 32; l++) d += q[32 * j + l] * y[i].qs[32 * j + l];
            isum += sc[j] * d;
            summs += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        sum += (lm_f16_to_f32(x[i].d) * y[i].d) * (float)isum -
               (lm_f16_to_f32(x[i].dmin) * y[i].d) * (float)summs;
    }
    *s = sum;
}

static void vec_dot_q6_K(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q6_K *x = w;
    const struct lm_block_q8_K *y = xq;
    int8_t q[LM_QK_K];
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        lm_q6_K_unpack(&x[i], q);
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            int d = 0;
            for (int l = 0; l < 16; l++) d += q[16 * j + l] * y[i].qs[16 * j + l];
            isum += x[i].scales[j] * d;
        }
        sum += (lm_f16_to_f32(x[i].d) * y[i].d) * (float)isum;
    }
    *s = sum;
}

// ============================================================================
// table
// ============================================================================

static const struct lm_kernels k_generic = {
    .name = "generic",
    .dequant = {
        [LM_DTYPE_F32] = dequant_f32, [LM_DTYPE_F16] = dequant_f16, [LM_DTYPE_BF16] = dequant_bf16,
        [LM_DTYPE_Q4_0] = dequant_q4_0, [LM_DTYPE_Q4_1] = dequant_q4_1,
        [LM_DTYPE_Q5_0] = dequant_q5_0, [LM_DTYPE_Q5_1] = dequant_q5_1,
        [LM_DTYPE_Q8_0] = dequant_q8_0, [LM_DTYPE_Q2_K] = dequant_q2_K,
        [LM_DTYPE_Q3_K] = dequant_q3_K, [LM_DTYPE_Q4_K] = dequant_q4_K,
        [LM_DTYPE_Q5_K] = dequant_q5_K, [LM_DTYPE_Q6_K] = dequant_q6_K,
    },
    .quant = {
        [LM_DTYPE_F32] = quant_f32, [LM_DTYPE_F16] = quant_f16, [LM_DTYPE_BF16] = quant_bf16,
        [LM_DTYPE_Q8_0] = quant_q8_0, [LM_DTYPE_Q8_1] = quant_q8_1, [LM_DTYPE_Q8_K] = quant_q8_K,
    },
    .vec_dot = {
        [LM_DTYPE_F32] = vec_dot_f32, [LM_DTYPE_F16] = vec_dot_f16, [LM_DTYPE_BF16] = vec_dot_bf16,
        [LM_DTYPE_Q4_0] = vec_dot_q4_0, [LM_DTYPE_Q4_1] = vec_dot_q4_1,
        [LM_DTYPE_Q5_0] = vec_dot_q5_0, [LM_DTYPE_Q5_1] = vec_dot_q5_1,
        [LM_DTYPE_Q8_0] = vec_dot_q8_0, [LM_DTYPE_Q2_K] = vec_dot_q2_K,
        [LM_DTYPE_Q3_K] = vec_dot_q3_K, [LM_DTYPE_Q4_K] = vec_dot_q4_K,
        [LM_DTYPE_Q5_K] = vec_dot_q5_K, [LM_DTYPE_Q6_K] = vec_dot_q6_K,
    },
    .il_gemm = {
        [LM_DTYPE_Q8_0] = lm_il_gemm_q8_0_generic, [LM_DTYPE_Q5_0] = lm_il_gemm_q5_0_generic,
        [LM_DTYPE_Q4_K] = lm_il_gemm_q4_K_generic, [LM_DTYPE_Q6_K] = lm_il_gemm_q6_K_generic,
        [LM_DTYPE_F16] = lm_il_gemm_f16_generic,
    },
    .rmsnorm = lm_rmsnorm_generic, .rope = lm_rope_generic, .geglu = lm_geglu_generic,
    .swiglu = lm_swiglu_generic, .f32_to_f16 = lm_f32_to_f16_generic, .attn = lm_attn_generic,
    .topk_span = lm_topk_span_generic,
};

const struct lm_kernels *lm_kernels_generic(void) { return &k_generic; }
