// Scalar dot products of one weight row with one activation row (vec_dot), per weight
// dtype: the oracle of dot_avx2.c, dot_avx512.c and the multi-token gemm_avx512.c (bit for
// bit for the k-quants and f16, within rounding for the others: tests/test_kernels_dot.c's
// table). A table with no vec_dot_n runs these row by row.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h: only the fmaf written here fuse

#include <math.h>

#include "kernels/kernels_internal.h"

// Each: *s = w (n) . xq (n), w one weight row, xq one activation row of lm_vec_dot_type(dtype)

// Plain types accumulate in double, as ggml's scalar ggml_vec_dot_f32/f16/bf16 do.
void lm_vec_dot_f32_generic(int64_t n, float *s, const void *w, const void *xq) {
    const float *a = w, *b = xq;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(a[i] * b[i]);
    *s = (float)sum;
}

// the f16 contract of kernels.h: 16 lane sums (fmaf in order), then lm_tree16
void lm_vec_dot_f16_generic(int64_t n, float *s, const void *w, const void *xq) {
    const lm_f16 *a = w, *b = xq;
    float acc[16] = {0};
    for (int64_t i = 0; i < n; i++) acc[i % 16] = fmaf(lm_f16_to_f32(a[i]), lm_f16_to_f32(b[i]), acc[i % 16]);
    *s = lm_tree16(acc);
}

void lm_vec_dot_bf16_generic(int64_t n, float *s, const void *w, const void *xq) {
    const lm_bf16 *a = w, *b = xq;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(lm_bf16_to_f32(a[i]) * lm_bf16_to_f32(b[i]));
    *s = (float)sum;
}

// 32-blocks: exact int32 dot per block, then sum += sumi * (dw * dx) in float.
void lm_vec_dot_q4_0_generic(int64_t n, float *s, const void *w, const void *xq) {
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

void lm_vec_dot_q4_1_generic(int64_t n, float *s, const void *w, const void *xq) {
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

void lm_vec_dot_q5_0_generic(int64_t n, float *s, const void *w, const void *xq) {
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

void lm_vec_dot_q5_1_generic(int64_t n, float *s, const void *w, const void *xq) {
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

void lm_vec_dot_q8_0_generic(int64_t n, float *s, const void *w, const void *xq) {
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
void lm_vec_dot_q2_K_generic(int64_t n, float *s, const void *w, const void *xq) {
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

void lm_vec_dot_q3_K_generic(int64_t n, float *s, const void *w, const void *xq) {
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

void lm_vec_dot_q4_K_generic(int64_t n, float *s, const void *w, const void *xq) {
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

void lm_vec_dot_q5_K_generic(int64_t n, float *s, const void *w, const void *xq) {
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

void lm_vec_dot_q6_K_generic(int64_t n, float *s, const void *w, const void *xq) {
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
