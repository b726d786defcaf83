// AVX-512 VNNI dot products of q2_K and q3_K weights with q8_K activations on the file layout:
// one weight row against one activation row (vec_dot) or up to 8 (vec_dot_n), each super-block
// decoded once into 4 zmm of unsigned 2- or 3-bit quants for every token. Exact int32 per
// super-block, then dot_generic.c's float steps: bit-identical to the generic kernels.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include "kernels/kernels_internal.h"

#if defined(__x86_64__)

#include <string.h>

#include "kernels/simd_avx512.h"

// A super-block's 256 quants as 4 zmm: zmm c holds elements 64c..64c+63, so i32 lane i of a
// vpdpbusd sums elements 64c + 4i..+3, all in sub-block 4c + i / 4 (16 elements each). The
// quant bytes: element 128h + 32k + l is bits 2k..2k+1 of qs[32h + l].
AI void q2_bits(const uint8_t *qs, __m512i q[4]) {
    const __m512i m3 = _mm512_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * h));
        q[2 * h] = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 2), 1), m3);
        q[2 * h + 1] = _mm512_and_si512(
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srli_epi16(raw, 4)), _mm256_srli_epi16(raw, 6), 1), m3);
    }
}

// 16 int32 scales (one per sub-block) -> per zmm c the scale of each lane's sub-block
AI void lane_scales(__m512i s32, __m512i scv[4]) {
    const __m512i grp = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    for (int c = 0; c < 4; c++) scv[c] = _mm512_permutexvar_epi32(_mm512_add_epi32(grp, _mm512_set1_epi32(4 * c)), s32);
}

// sum over zmm c of scv[c] * (q[c] . y[64c..]) in the 16 lanes (exact int32)
AI __m512i scaled_dots(const __m512i q[4], const __m512i scv[4], const int8_t *yq) {
    __m512i acc = _mm512_setzero_si512();
    for (int c = 0; c < 4; c++) {
        const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[c], _mm512_loadu_si512((const void *)(yq + 64 * c)));
        acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(p, scv[c]));
    }
    return acc;
}

// sum_j w16[j] * bsums[j] (16 int16 each, exact int32)
AI int dot16_i16(__m256i w16, const int16_t *bsums) {
    return hsum_i32x8(_mm256_madd_epi16(w16, _mm256_loadu_si256((const __m256i *)bsums)));
}

// ---- q2_K: per super-block isum = sum_j sc[j] dot_j, summs = sum_j mn[j] bsums[j];
// sum += (d * y.d) * isum - (dmin * y.d) * summs (vec_dot_q2_K_generic's steps)
AI void q2_K_n(const int NT, int64_t n, float *s, size_t ss, const void *w, const void *xq, size_t xs) {
    const struct lm_block_q2_K *x = w;
    float sum[LM_VEC_DOT_MAX_NT] = {0};
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        __m512i q[4], scv[4];
        q2_bits(x[i].qs, q);
        const __m128i raw = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m128i m4 = _mm_set1_epi8(0x0f);
        lane_scales(_mm512_cvtepu8_epi32(_mm_and_si128(raw, m4)), scv);
        const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), m4));
        const float dx = f16_to_f32(x[i].d), dmx = f16_to_f32(x[i].dmin);
        for (int t = 0; t < NT; t++) {
            const struct lm_block_q8_K *y = (const struct lm_block_q8_K *)((const char *)xq + t * xs) + i;
            const int summs = dot16_i16(mn16, y->bsums);
            const int isum = _mm512_reduce_add_epi32(scaled_dots(q, scv, y->qs));
            sum[t] += (dx * y->d) * (float)isum - (dmx * y->d) * (float)summs;
        }
    }
    for (int t = 0; t < NT; t++) s[t * ss] = sum[t];
}

// ---- q3_K: quants taken unsigned, u = low 2 bits + 4 * high bit (0..7, the weight u - 4), so
// isum = sum_j sc[j] dot(u, y)_j - 4 sum_j sc[j] bsums[j]; sum += (d * y.d) * isum
AI void q3_K_n(const int NT, int64_t n, float *s, size_t ss, const void *w, const void *xq, size_t xs) {
    const struct lm_block_q3_K *x = w;
    const __m512i b4 = _mm512_set1_epi8(4);
    float sum[LM_VEC_DOT_MAX_NT] = {0};
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        __m512i q[4], scv[4];
        q2_bits(x[i].qs, q);
        // element 128h + 32k + l has its high bit at bit 4h + k of hmask[l]: zmm c = 2h + k / 2
        // takes bit 2c in its low 32 bytes and bit 2c + 1 in its high 32
        const __m256i hm = _mm256_loadu_si256((const __m256i *)x[i].hmask);
        const __m512i hm2 = _mm512_inserti64x4(_mm512_castsi256_si512(hm), hm, 1);
        for (int c = 0; c < 4; c++) {
            const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * c))),
                                                   _mm256_set1_epi8((char)(1 << (2 * c + 1))), 1);
            q[c] = _mm512_mask_add_epi8(q[c], _mm512_test_epi8_mask(hm2, bit), q[c], b4);
        }
        int8_t sc[16];
        lm_q3_K_scales(x[i].scales, sc);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)sc);
        lane_scales(_mm512_cvtepi8_epi32(sc8), scv);
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        const float dx = f16_to_f32(x[i].d);
        for (int t = 0; t < NT; t++) {
            const struct lm_block_q8_K *y = (const struct lm_block_q8_K *)((const char *)xq + t * xs) + i;
            const int corr = dot16_i16(sc16, y->bsums);
            const int isum = _mm512_reduce_add_epi32(scaled_dots(q, scv, y->qs)) - 4 * corr;
            sum[t] += (dx * y->d) * (float)isum;
        }
    }
    for (int t = 0; t < NT; t++) s[t * ss] = sum[t];
}

// ---- entries: vec_dot is the one-token case of the same body

void lm_vec_dot_q2_K_avx512(int64_t n, float *s, const void *w, const void *xq) { q2_K_n(1, n, s, 1, w, xq, 0); }
void lm_vec_dot_q3_K_avx512(int64_t n, float *s, const void *w, const void *xq) { q3_K_n(1, n, s, 1, w, xq, 0); }

#define LM_DEF_N23(name)                                                                       \
    void lm_vec_dot_n_##name##_avx512(int64_t n, int nt, float *s, size_t ss, const void *w,   \
                                      const void *xq, size_t xs) {                             \
        switch (nt) {                                                                          \
        case 1: name##_n(1, n, s, ss, w, xq, xs); break;                                       \
        case 2: name##_n(2, n, s, ss, w, xq, xs); break;                                       \
        case 3: name##_n(3, n, s, ss, w, xq, xs); break;                                       \
        case 4: name##_n(4, n, s, ss, w, xq, xs); break;                                       \
        case 5: name##_n(5, n, s, ss, w, xq, xs); break;                                       \
        case 6: name##_n(6, n, s, ss, w, xq, xs); break;                                       \
        case 7: name##_n(7, n, s, ss, w, xq, xs); break;                                       \
        default: name##_n(8, n, s, ss, w, xq, xs); break;                                      \
        }                                                                                      \
    }
LM_DEF_N23(q2_K)
LM_DEF_N23(q3_K)

#endif
