// Helpers of the AVX-512 kernel files (*_avx512.c, compiled with the AVX2 flags plus
// -mavx512f/bw/vl/dq/vnni/bf16): lane masks, VNNI int8 dot steps, the q5_0 block pair
// decode, _mm512_reduce_add_ps of 16 vectors at once and ggml's vector expf. The 256-bit
// helpers come from simd_avx2.h. Include it from AVX-512 files only (see simd_avx2.h).
#ifndef LM_KERNELS_SIMD_AVX512_H
#define LM_KERNELS_SIMD_AVX512_H

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || \
    !defined(__AVX512DQ__) || !defined(__AVX512VNNI__)
#error "simd_avx512.h: for files compiled with the AVX-512 flags (*_avx512.c; CMakeLists.txt)"
#endif

#include <math.h>

#include "kernels/simd_avx2.h"

// ---- lanes and broadcasts

// the first n lanes (n may be <= 0 or >= 16)
static inline __mmask16 mask_n(int64_t n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

// 4 bytes at p broadcast to the 16 lanes (a vpbroadcastd load: as cheap as an embedded
// {1to16} operand on Zen 4, measured 0.286 vs 0.288 ns per vpdpbusd)
AI __m512i bcast4(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

// ---- int8 dot steps

// signed x signed int8 -> 8 x i32 (sum of 4): vpdpbusd wants unsigned x signed, so move
// x's sign onto y: |x| * (y * sign(x)). The VNNI form of simd_avx2.h's dot_i8i8.
static inline __m256i dot_i8i8_vnni(__m256i x, __m256i y) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

// Two q5_0 blocks -> 64 signed quants (q - 16) in one zmm, and the mask of negative ones.
AI void lm_q5_0_pair_avx512(const struct lm_block_q5_0 *a, const struct lm_block_q5_0 *b, __m512i *qx,
                            __mmask64 *neg) {
    const __m256i t = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)b->qs),
                                       _mm_loadu_si128((const __m128i *)a->qs));
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i lo = _mm256_and_si256(t, m4), hi = _mm256_and_si256(_mm256_srli_epi16(t, 4), m4);
    // [lo_a, lo_b, hi_a, hi_b] -> [lo_a, hi_a, lo_b, hi_b]: element order of each block
    const __m512i z = _mm512_shuffle_i64x2(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
                                           _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
                                           _MM_SHUFFLE(3, 1, 2, 0));
    uint32_t ha, hb;
    memcpy(&ha, a->qh, 4);
    memcpy(&hb, b->qh, 4);
    const __mmask64 k = (__mmask64)ha | ((__mmask64)hb << 32);
    const __m512i q = _mm512_mask_add_epi8(_mm512_sub_epi8(z, _mm512_set1_epi8(16)), k,
                                           _mm512_sub_epi8(z, _mm512_set1_epi8(16)), _mm512_set1_epi8(16));
    *qx = q;
    *neg = _mm512_movepi8_mask(q);
}

// ---- _mm512_reduce_add_ps of 16 vectors at once (lm_tree16's tree, kernels_internal.h)

// lm_reduce_add16's lane 4k+m comes from input row 4m+k: feeding vector c in row
// lm_reduce16_slot(c) = 4(c%4) + c/4 (a transpose, its own inverse) puts the sums in order.
static inline int lm_reduce16_slot(int c) { return 4 * (c & 3) + (c >> 2); }

// x holds 16 rows of 16 floats, vector c in row lm_reduce16_slot(c); lane c of the result is
// lm_tree16 of vector c.
AI __m512 lm_reduce_add16(const float *x) {
    __m512 y[8], z[4], w[2];
    for (int k = 0; k < 8; k++) { // rows 2k, 2k+1: a[i+8] + a[i], one row per 256 bits
        const __m512 a = _mm512_loadu_ps(x + 32 * k), b = _mm512_loadu_ps(x + 32 * k + 16);
        y[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)),
                             _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)));
    }
    for (int k = 0; k < 4; k++) // s[i+4] + s[i], one row per 128 bits
        z[k] = _mm512_add_ps(_mm512_shuffle_f32x4(y[2 * k], y[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)),
                             _mm512_shuffle_f32x4(y[2 * k], y[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)));
    for (int k = 0; k < 2; k++) // (s0 + s2), (s1 + s3) of two rows per 128 bits
        w[k] = _mm512_add_ps(_mm512_shuffle_ps(z[2 * k], z[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(z[2 * k], z[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// ---- exp

// ggml_v_expf on 16 lanes; lm_expf_ggml (kernels_internal.h) is one lane of it, bit for bit
AI __m512 lm_expf_ggml_512(__m512 x) {
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b,
                                        _mm512_set1_ps(0x1.573e2ep-5f)),
                        u,
                        _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b,
                                        _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
    const __m512 res = _mm512_scalef_ps(j, n);
    if (!big) return res;
    const __m512 alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ),
                                            _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
    return _mm512_mask_blend_ps(big, res, alt);
}

#endif
