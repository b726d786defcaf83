// AVX2 dot products (vec_dot) of q2_K and q3_K weights with q8_K activations: 32 quants per
// ymm (two 16-element sub-blocks), maddubs into int16 pairs, madd by the two sub-blocks'
// scales; exact int32 per super-block, then dot_generic.c's float steps (bit-identical).
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include "kernels/kernels_internal.h"

#if defined(__x86_64__) || defined(__i386__)

#include <string.h>

#include "kernels/simd_avx2.h"

// ymm of elements 128h + 32k..+31 (sub-blocks 8h + 2k, 8h + 2k + 1) against y: pair sums
// (|.| <= 2 * 7 * 128 fits int16) scaled by (sc[a] x 8 words, sc[b] x 8 words)
static inline __m256i scaled32(__m256i q, const int8_t *yq, int sa, int sb) {
    const __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)yq));
    return _mm256_madd_epi16(p, _mm256_set_m128i(_mm_set1_epi16((short)sb), _mm_set1_epi16((short)sa)));
}

// w (n) q2_K . x (n) q8_K
void lm_vec_dot_q2_K_avx2(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q2_K *x = w;
    const struct lm_block_q8_K *y = xq;
    const __m256i m3 = _mm256_set1_epi8(3);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        int summs = 0;
        for (int j = 0; j < 16; j++) summs += (x[i].scales[j] >> 4) * y[i].bsums[j];
        __m256i acc = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
            for (int k = 0; k < 4; k++) {
                const int j = 8 * h + 2 * k;
                const __m256i q = _mm256_and_si256(_mm256_srli_epi16(raw, 2 * k), m3);
                acc = _mm256_add_epi32(acc, scaled32(q, y[i].qs + 128 * h + 32 * k, x[i].scales[j] & 0x0f,
                                                     x[i].scales[j + 1] & 0x0f));
            }
        }
        const int isum = hsum_i32x8(acc);
        sum += (f16_to_f32(x[i].d) * y[i].d) * (float)isum - (f16_to_f32(x[i].dmin) * y[i].d) * (float)summs;
    }
    *s = sum;
}

// w (n) q3_K . x (n) q8_K; quants unsigned (low 2 bits + 4 * high bit), the -4 through bsums
void lm_vec_dot_q3_K_avx2(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q3_K *x = w;
    const struct lm_block_q8_K *y = xq;
    const __m256i m3 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        int8_t sc[16];
        lm_q3_K_scales(x[i].scales, sc);
        int corr = 0;
        for (int j = 0; j < 16; j++) corr += sc[j] * y[i].bsums[j];
        const __m256i hm = _mm256_loadu_si256((const __m256i *)x[i].hmask);
        __m256i acc = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
            for (int k = 0; k < 4; k++) { // high bit of element 128h + 32k + l: bit 4h + k of hmask[l]
                const int j = 8 * h + 2 * k;
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + k), m1);
                const __m256i q = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 2 * k), m3),
                                                  _mm256_slli_epi16(hb, 2));
                acc = _mm256_add_epi32(acc, scaled32(q, y[i].qs + 128 * h + 32 * k, sc[j], sc[j + 1]));
            }
        }
        const int isum = hsum_i32x8(acc) - 4 * corr;
        sum += (f16_to_f32(x[i].d) * y[i].d) * (float)isum;
    }
    *s = sum;
}

#endif
