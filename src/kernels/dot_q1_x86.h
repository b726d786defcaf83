// The q4_1 / q5_1 dot bodies (weights x q8_1 activations) that the AVX2 and AVX-512 tables
// share, single-row (vec_dot, NT = 1) and multi-token (vec_dot_n): each ISA file passes its
// unsigned x signed int8 dot step (maddubs + madd, or vpdpbusd). Bit-identical to
// dot_generic.c: per block an exact int32 isum, then ggml's reference float steps
//   sum = sum + ((float)isum * (d_w * d_x) + m_w * s_x)     block by block, in order
// with the int32 sums of 8 blocks gathered into one vector (exact), their float terms
// computed 8 lanes at a time (the same roundings: products and the add, nothing fused), and
// only the running sum scalar.
#ifndef LM_KERNELS_DOT_Q1_X86_H
#define LM_KERNELS_DOT_Q1_X86_H

#include "kernels/simd_avx2.h"

// unsigned x signed int8 (32 each) -> 8 x i32, each the sum of 4 products (no saturation
// for the 0..31 weights). Passed as a constant to the always-inline bodies below.
typedef __m256i (*lm_dot_u8i8_fn)(__m256i xu, __m256i y);

// block b of a q4_1 (Q5 = 0) or q5_1 row: 32 unsigned quants; d at byte 0, m at byte 2 of
// both block types
AI const uint8_t *q1_block(const int Q5, const void *w, int64_t b) {
    return (const uint8_t *)w + (size_t)b * (Q5 ? sizeof(struct lm_block_q5_1) : sizeof(struct lm_block_q4_1));
}
AI __m256i q1_quants(const int Q5, const uint8_t *blk) {
    if (Q5) {
        const struct lm_block_q5_1 *x = (const struct lm_block_q5_1 *)blk;
        return unpack_q5(x->qs, x->qh);
    }
    return unpack_nibbles32(((const struct lm_block_q4_1 *)blk)->qs);
}

// 8 halves, stride bytes apart from p -> 8 floats
AI __m256 q1_ld8_f16(const uint8_t *p, size_t stride) {
    lm_f16 h[8];
    for (int k = 0; k < 8; k++) memcpy(&h[k], p + (size_t)k * stride, 2);
    return _mm256_cvtph_ps(_mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], (short)h[4],
                                          (short)h[5], (short)h[6], (short)h[7]));
}

// lane k = the sum of the 8 lanes of p[k] (exact int32)
AI __m256i q1_hsum8(const __m256i p[8]) {
    const __m256i a = _mm256_hadd_epi32(p[0], p[1]), b = _mm256_hadd_epi32(p[2], p[3]);
    const __m256i c = _mm256_hadd_epi32(p[4], p[5]), d = _mm256_hadd_epi32(p[6], p[7]);
    const __m256i ab = _mm256_hadd_epi32(a, b), cd = _mm256_hadd_epi32(c, d);
    return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20), _mm256_permute2x128_si256(ab, cd, 0x31));
}

// W row (n) q4_1 / q5_1 . X rows (NT, n) q8_1 (xs bytes apart) -> s[t * ss]; 1 <= NT <= 8
AI void lm_dot_q1_n(const int NT, const int Q5, int64_t n, float *s, size_t ss, const void *w,
                    const void *xq, size_t xs, lm_dot_u8i8_fn dot) {
    const size_t bw = Q5 ? sizeof(struct lm_block_q5_1) : sizeof(struct lm_block_q4_1);
    const size_t by = sizeof(struct lm_block_q8_1);
    const int64_t nb = n / 32;
    float sum[8] = {0};
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) { // 8 blocks: the weights decoded once for every token
        __m256i qx[8];
        for (int k = 0; k < 8; k++) qx[k] = q1_quants(Q5, q1_block(Q5, w, b + k));
        const uint8_t *w0 = q1_block(Q5, w, b);
        const __m256 dw = q1_ld8_f16(w0, bw), mw = q1_ld8_f16(w0 + 2, bw);
        for (int t = 0; t < NT; t++) {
            const struct lm_block_q8_1 *y = (const struct lm_block_q8_1 *)((const char *)xq + (size_t)t * xs) + b;
            __m256i p[8];
            for (int k = 0; k < 8; k++) p[k] = dot(qx[k], _mm256_loadu_si256((const __m256i *)y[k].qs));
            const __m256 isum = _mm256_cvtepi32_ps(q1_hsum8(p));
            const __m256 dy = q1_ld8_f16((const uint8_t *)y, by), sy = q1_ld8_f16((const uint8_t *)y + 2, by);
            const __m256 term = _mm256_add_ps(_mm256_mul_ps(isum, _mm256_mul_ps(dw, dy)), _mm256_mul_ps(mw, sy));
            float v[8];
            _mm256_storeu_ps(v, term);
            for (int k = 0; k < 8; k++) sum[t] += v[k];
        }
    }
    for (; b < nb; b++) { // the last blocks one at a time, the same steps
        const uint8_t *blk = q1_block(Q5, w, b);
        const __m256i qx = q1_quants(Q5, blk);
        lm_f16 dh, mh;
        memcpy(&dh, blk, 2);
        memcpy(&mh, blk + 2, 2);
        const float dw = f16_to_f32(dh), mw = f16_to_f32(mh);
        for (int t = 0; t < NT; t++) {
            const struct lm_block_q8_1 *y = (const struct lm_block_q8_1 *)((const char *)xq + (size_t)t * xs) + b;
            const int isum = hsum_i32x8(dot(qx, _mm256_loadu_si256((const __m256i *)y->qs)));
            sum[t] += (float)isum * (dw * f16_to_f32(y->d)) + mw * f16_to_f32(y->s);
        }
    }
    for (int t = 0; t < NT; t++) s[(size_t)t * ss] = sum[t];
}

// vec_dot (NT = 1) and vec_dot_n (a switch on nt, so that NT is a constant) of one ISA
#define LM_DEF_DOT_Q1(isa, dotfn)                                                              \
    void lm_vec_dot_q4_1_##isa(int64_t n, float *s, const void *w, const void *xq) {           \
        lm_dot_q1_n(1, 0, n, s, 1, w, xq, 0, dotfn);                                           \
    }                                                                                          \
    void lm_vec_dot_q5_1_##isa(int64_t n, float *s, const void *w, const void *xq) {           \
        lm_dot_q1_n(1, 1, n, s, 1, w, xq, 0, dotfn);                                           \
    }                                                                                          \
    LM_DEF_DOT_Q1_N(isa, q4_1, 0, dotfn)                                                       \
    LM_DEF_DOT_Q1_N(isa, q5_1, 1, dotfn)
#define LM_DEF_DOT_Q1_N(isa, name, q5, dotfn)                                                  \
    void lm_vec_dot_n_##name##_##isa(int64_t n, int nt, float *s, size_t ss, const void *w,    \
                                     const void *xq, size_t xs) {                              \
        switch (nt) {                                                                          \
        case 1: lm_dot_q1_n(1, q5, n, s, ss, w, xq, xs, dotfn); break;                         \
        case 2: lm_dot_q1_n(2, q5, n, s, ss, w, xq, xs, dotfn); break;                         \
        case 3: lm_dot_q1_n(3, q5, n, s, ss, w, xq, xs, dotfn); break;                         \
        case 4: lm_dot_q1_n(4, q5, n, s, ss, w, xq, xs, dotfn); break;                         \
        case 5: lm_dot_q1_n(5, q5, n, s, ss, w, xq, xs, dotfn); break;                         \
        case 6: lm_dot_q1_n(6, q5, n, s, ss, w, xq, xs, dotfn); break;                         \
        case 7: lm_dot_q1_n(7, q5, n, s, ss, w, xq, xs, dotfn); break;                         \
        default: lm_dot_q1_n(8, q5, n, s, ss, w, xq, xs, dotfn); break;                        \
        }                                                                                      \
    }

#endif
