// Helpers of the AVX2 kernel files (*_avx2.c, compiled with -mavx2 -mfma -mf16c -mbmi2):
// horizontal sums, int8 dot steps, f16 loads and the unpacking of 32-element blocks into one
// ymm. The AVX-512 files use them too (simd_avx512.h includes this header). Include it from
// ISA files only: the helpers must be compiled, and inlined, with those files' flags.
#ifndef LM_KERNELS_SIMD_AVX2_H
#define LM_KERNELS_SIMD_AVX2_H

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "simd_avx2.h: for files compiled with the AVX2 flags (*_avx2.c, *_avx512.c; CMakeLists.txt)"
#endif

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tensor/blocks.h"

// For kernel bodies whose compile-time arguments (token counts, tile sizes) must be folded.
#define AI static inline __attribute__((always_inline))

// ---- floats

// one half -> float by F16C (the same value as lm_f16_to_f32)
static inline float f16_to_f32(lm_f16 h) { return _cvtsh_ss(h); }

// 8 floats -> their sum: lanes i + (i + 4), then (0 + 2) and (1 + 3), then those two
static inline float hsum_f32x8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int hsum_i32x8(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

static inline float hmax_f32x8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

// 16 lane sums as two ymm (lo = lanes 0..7, hi = 8..15) -> the float of _mm512_reduce_add_ps
// (lm_tree16): hi + lo, 128-bit halves, then (0+2) + (1+3)
static inline float tree16_ymm(__m256 lo, __m256 hi) {
    const __m256 t3 = _mm256_add_ps(hi, lo);
    const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    const __m128 t8 = _mm_add_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_cvtss_f32(_mm_add_ss(t8, _mm_shuffle_ps(t8, t8, _MM_SHUFFLE(1, 1, 1, 1))));
}

// 16 halves from p (m < 16 valid, the rest zero) -> two ymm of floats
static inline void load16_f16(const lm_f16 *p, int64_t m, __m256 *lo, __m256 *hi) {
    if (m >= 16) {
        *lo = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
        *hi = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 8)));
        return;
    }
    lm_f16 t[16] = {0};
    memcpy(t, p, (size_t)m * sizeof(lm_f16));
    *lo = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)t));
    *hi = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(t + 8)));
}

// ---- int8 dot steps

// unsigned bytes xu (0..127) * signed bytes y -> 8 x i32, each the sum of 4 products
static inline __m256i dot_u8i8(__m256i xu, __m256i y) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(xu, y), _mm256_set1_epi16(1));
}

// signed x signed: move x's sign onto y so maddubs sees |x| (unsigned) * (y * sign(x))
static inline __m256i dot_i8i8(__m256i x, __m256i y) {
    return dot_u8i8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

// 32 i32 (four ymm, values within int8) -> 32 int8 at dst, in order
static inline void store_i32x32_as_i8(int8_t *dst, __m256i i0, __m256i i1, __m256i i2, __m256i i3) {
    i0 = _mm256_packs_epi32(i0, i1); // 0-3 8-11 4-7 12-15
    i2 = _mm256_packs_epi32(i2, i3); // 16-19 24-27 20-23 28-31
    i0 = _mm256_packs_epi16(i0, i2); // 0-3 8-11 16-19 24-27 4-7 12-15 20-23 28-31
    i0 = _mm256_permutevar8x32_epi32(i0, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)dst, i0);
}

// ---- 32-element blocks (q4_0, q4_1, q5_0, q5_1) in one ymm, in element order

// 32 bits -> 32 bytes, 0xff where the bit is set (byte i <- bit i)
static inline __m256i bits_to_bytes(uint32_t bits) {
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

// q4_0 / q4_1 block: 16 bytes -> 32 nibbles in element order (low nibbles first)
static inline __m256i unpack_nibbles32(const uint8_t *qs) {
    __m128i t = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0f));
}

// q5_0 / q5_1 block: unsigned 5-bit values 0..31 (lm_q5_unpack's)
static inline __m256i unpack_q5(const uint8_t *qs, const uint8_t *qh4) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    __m256i hb = _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(unpack_nibbles32(qs), hb);
}

// ---- exp

// lm_expf_ggml (kernels_internal.h) on 8 lanes, bit for bit: its fmas as vfmadd, and its
// ldexpf(j, n) as two products (j 2^e1) 2^e2 with e1 = n clamped to [-100, 100], so the first is
// exact (j in [0.7, 1.5): normal) and the second the one correctly rounded step (subnormal
// results and overflow included); |n| > 192: 0 or inf as the scalar form
static inline __m256 lm_expf_ggml_256(__m256 x) {
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
    const __m256 n1 = _mm256_min_ps(_mm256_max_ps(n, _mm256_set1_ps(-100.0f)), _mm256_set1_ps(100.0f));
    const __m256i e1 = _mm256_cvtps_epi32(n1), e2 = _mm256_cvtps_epi32(_mm256_sub_ps(n, n1));
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e2, bias), 23));
    const __m256 y = _mm256_mul_ps(_mm256_mul_ps(j, s1), s2);
    const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 big = _mm256_cmp_ps(an, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 ovf = _mm256_and_ps(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_GT_OQ),
                                     _mm256_set1_ps(INFINITY));
    const __m256 nan = _mm256_cmp_ps(n, n, _CMP_UNORD_Q);
    return _mm256_blendv_ps(_mm256_blendv_ps(y, ovf, big), j, nan);
}

#endif
