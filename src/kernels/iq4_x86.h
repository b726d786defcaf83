// The 256-bit dot-product bodies of iq4_nl and iq4_xs that iq4_avx2.c and iq4_avx512.c share:
// each ISA file passes its signed int8 dot step (dot_i8i8: maddubs + madd; dot_i8i8_vnni:
// vpdpbusd). The table lookup is one vpshufb of the 4-bit indices into lm_kvalues_iq4nl.
#ifndef LM_KERNELS_IQ4_X86_H
#define LM_KERNELS_IQ4_X86_H

#include "kernels/dot_blocks32_x86.h"
#include "kernels/simd_avx2.h"

// The dot step takes the activation as its first operand: its |q| (0..128, q8_K's -128
// included) is the unsigned side, the table values (|kv| <= 127) take its sign. With the
// weights first, a -128 activation under a negative weight would stay -128 (vpsignb), and
// maddubs's pair sums stay below 2 * 128 * 127 < 2^15 either way.
AI __m256i iq4_lookup32(const uint8_t *qs, __m256i tbl) {
    return _mm256_shuffle_epi8(tbl, unpack_nibbles32(qs));
}

AI __m256i iq4_table_ymm(void) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lm_kvalues_iq4nl));
}

// w (n) iq4_nl . x (n) q8_0: iq4_generic.c's order (exact int32 per block, one fmaf chain)
AI void lm_dot_iq4_nl_ymm(int64_t n, float *s, const void *w, const void *xq, lm_dot_i8i8_fn dot) {
    const struct lm_block_iq4_nl *x = w;
    const struct lm_block_q8_0 *y = xq;
    const __m256i tbl = iq4_table_ymm();
    float acc = 0.0f;
    int64_t i = 0, nb = n / 32;
    for (; i + 2 <= nb; i += 2) { // two blocks' sums in one reduction
        __m256i p0 = dot(_mm256_loadu_si256((const __m256i *)y[i].qs), iq4_lookup32(x[i].qs, tbl));
        __m256i p1 = dot(_mm256_loadu_si256((const __m256i *)y[i + 1].qs), iq4_lookup32(x[i + 1].qs, tbl));
        __m256i p01 = _mm256_hadd_epi32(p0, p1); // i i i+1 i+1 | i i i+1 i+1
        __m128i h = _mm_add_epi32(_mm256_castsi256_si128(p01), _mm256_extracti128_si256(p01, 1));
        h = _mm_hadd_epi32(h, h); // i, i+1, i, i+1
        const float d0 = f16_to_f32(x[i].d) * f16_to_f32(y[i].d);
        const float d1 = f16_to_f32(x[i + 1].d) * f16_to_f32(y[i + 1].d);
        acc = fmaf(d0, (float)_mm_cvtsi128_si32(h), acc);
        acc = fmaf(d1, (float)_mm_extract_epi32(h, 1), acc);
    }
    for (; i < nb; i++) {
        __m256i p = dot(_mm256_loadu_si256((const __m256i *)y[i].qs), iq4_lookup32(x[i].qs, tbl));
        acc = fmaf(f16_to_f32(x[i].d) * f16_to_f32(y[i].d), (float)hsum_i32x8(p), acc);
    }
    *s = acc;
}

// w (n) iq4_xs . x (n) q8_K: per super-block the 8 sub-block dots times their scales in i32
// lanes (exact), one reduction, then iq4_generic.c's fmaf
AI void lm_dot_iq4_xs_ymm(int64_t n, float *s, const void *w, const void *xq, lm_dot_i8i8_fn dot) {
    const struct lm_block_iq4_xs *x = w;
    const struct lm_block_q8_K *y = xq;
    const __m256i tbl = iq4_table_ymm();
    float acc = 0.0f;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        __m256i isum = _mm256_setzero_si256();
        for (int j = 0; j < 8; j++) {
            __m256i p = dot(_mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * j)), iq4_lookup32(x[i].qs + 16 * j, tbl));
            isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(p, _mm256_set1_epi32(lm_iq4_xs_scale(&x[i], j))));
        }
        acc = fmaf(f16_to_f32(x[i].d) * y[i].d, (float)hsum_i32x8(isum), acc);
    }
    *s = acc;
}

#endif
