// The 256-bit bodies of the mxfp4 dot products that mxfp4_avx2.c and mxfp4_avx512.c share:
// each ISA file passes its signed int8 dot step (dot_i8i8: maddubs + madd; dot_i8i8_vnni:
// vpdpbusd). The E2M1 lookup is one vpshufb of the 4-bit codes into lm_kvalues_mxfp4.
#ifndef LM_KERNELS_MXFP4_X86_H
#define LM_KERNELS_MXFP4_X86_H

#include "kernels/dot_blocks32_x86.h"
#include "kernels/simd_avx2.h"

// The dot step takes the activation first: its |q| (0..128) is the unsigned side and the
// table values (|kv| <= 12) take its sign, so a -128 activation is exact too.
AI __m256i mxfp4_lookup32(const uint8_t *qs, __m256i tbl) {
    return _mm256_shuffle_epi8(tbl, unpack_nibbles32(qs));
}

AI __m256i mxfp4_table_ymm(void) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lm_kvalues_mxfp4));
}

// 8 vectors of 8 i32 -> their 8 sums, lane k = sum of p[k]
AI __m256i mxfp4_hsum8(const __m256i p[8]) {
    const __m256i a = _mm256_hadd_epi32(p[0], p[1]), b = _mm256_hadd_epi32(p[2], p[3]);
    const __m256i c = _mm256_hadd_epi32(p[4], p[5]), d = _mm256_hadd_epi32(p[6], p[7]);
    const __m256i ab = _mm256_hadd_epi32(a, b), cd = _mm256_hadd_epi32(c, d);
    return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20), _mm256_permute2x128_si256(ab, cd, 0x31));
}

// W row (n) mxfp4 . X rows (NT, n) q8_0 (xs bytes apart) -> s[t * ss], 1 <= NT <= 8: each
// block's codes looked up once for every token; per token mxfp4_generic.c's order (exact
// int32 per block, then one fmaf chain over the blocks with d = d_x * d_w).
AI void lm_dot_mxfp4_n(const int NT, int64_t n, float *s, size_t ss, const void *w, const void *xq,
                       size_t xs, lm_dot_i8i8_fn dot) {
    const struct lm_block_mxfp4 *x = w;
    const __m256i tbl = mxfp4_table_ymm();
    const int64_t nb = n / 32;
    float acc[8] = {0};
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        __m256i qw[8];
        float dwa[8];
        for (int k = 0; k < 8; k++) {
            qw[k] = mxfp4_lookup32(x[b + k].qs, tbl);
            dwa[k] = lm_e8m0_half(x[b + k].e);
        }
        const __m256 dw = _mm256_loadu_ps(dwa);
        for (int t = 0; t < NT; t++) {
            const struct lm_block_q8_0 *y = (const struct lm_block_q8_0 *)((const char *)xq + (size_t)t * xs) + b;
            __m256i p[8];
            float dya[8], d[8], fs[8];
            for (int k = 0; k < 8; k++) {
                p[k] = dot(_mm256_loadu_si256((const __m256i *)y[k].qs), qw[k]);
                dya[k] = f16_to_f32(y[k].d);
            }
            _mm256_storeu_ps(fs, _mm256_cvtepi32_ps(mxfp4_hsum8(p)));
            _mm256_storeu_ps(d, _mm256_mul_ps(_mm256_loadu_ps(dya), dw));
            float a = acc[t];
            for (int k = 0; k < 8; k++) a = fmaf(d[k], fs[k], a);
            acc[t] = a;
        }
    }
    for (; b < nb; b++) { // the last blocks one at a time, the same steps
        const __m256i qw = mxfp4_lookup32(x[b].qs, tbl);
        const float dw = lm_e8m0_half(x[b].e);
        for (int t = 0; t < NT; t++) {
            const struct lm_block_q8_0 *y = (const struct lm_block_q8_0 *)((const char *)xq + (size_t)t * xs) + b;
            const int isum = hsum_i32x8(dot(_mm256_loadu_si256((const __m256i *)y->qs), qw));
            acc[t] = fmaf(f16_to_f32(y->d) * dw, (float)isum, acc[t]);
        }
    }
    for (int t = 0; t < NT; t++) s[(size_t)t * ss] = acc[t];
}

// vec_dot (NT = 1) and vec_dot_n (a switch on nt, so that NT is a constant) of one ISA
#define LM_DEF_DOT_MXFP4(isa, dotfn)                                                            \
    void lm_vec_dot_mxfp4_##isa(int64_t n, float *s, const void *w, const void *xq) {          \
        lm_dot_mxfp4_n(1, n, s, 1, w, xq, 0, dotfn);                                           \
    }                                                                                          \
    void lm_vec_dot_n_mxfp4_##isa(int64_t n, int nt, float *s, size_t ss, const void *w,       \
                                  const void *xq, size_t xs) {                                 \
        switch (nt) {                                                                          \
        case 1: lm_dot_mxfp4_n(1, n, s, ss, w, xq, xs, dotfn); break;                          \
        case 2: lm_dot_mxfp4_n(2, n, s, ss, w, xq, xs, dotfn); break;                          \
        case 3: lm_dot_mxfp4_n(3, n, s, ss, w, xq, xs, dotfn); break;                          \
        case 4: lm_dot_mxfp4_n(4, n, s, ss, w, xq, xs, dotfn); break;                          \
        case 5: lm_dot_mxfp4_n(5, n, s, ss, w, xq, xs, dotfn); break;                          \
        case 6: lm_dot_mxfp4_n(6, n, s, ss, w, xq, xs, dotfn); break;                          \
        case 7: lm_dot_mxfp4_n(7, n, s, ss, w, xq, xs, dotfn); break;                          \
        default: lm_dot_mxfp4_n(8, n, s, ss, w, xq, xs, dotfn); break;                         \
        }                                                                                      \
    }

#endif
