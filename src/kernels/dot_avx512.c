// AVX-512 (F/BW/VL/DQ + VNNI) dot products (vec_dot): f32 / f16 on 16 lanes with masked
// tails; int8 blocks with vpdpbusd (unsigned x signed, 4 products per i32 lane) in place of
// AVX2's maddubs + madd; q5_0 and the k-quants 64 quants per zmm. q8_0 and q4_0 run
// dot_avx2.c's bodies (dot_blocks32_x86.h); the k-quants and f16 keep dot_generic.c's float
// steps; the multi-token versions in gemm_avx512.c repeat these steps per token.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include "kernels/kernels_internal.h"

#if defined(__x86_64__)

#include <string.h>

#include "kernels/dot_blocks32_x86.h"
#include "kernels/simd_avx512.h"

// Each: *s = w (n) . xq (n), w one weight row, xq one activation row of lm_vec_dot_type(dtype)

// w (n) . x (n), f32; 4 accumulators of 16, masked tail
void lm_vec_dot_f32_avx512(int64_t n, float *s, const void *w, const void *xq) {
    const float *a = w, *b = xq;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16 * k), _mm512_loadu_ps(b + i + 16 * k), acc[k]);
    for (; i + 16 <= n; i += 16) acc[0] = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc[0]);
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        acc[1] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc[1]);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

// the f16 contract (kernels.h): one accumulator of 16 lanes, a masked last block, then
// _mm512_reduce_add_ps. A single fma chain: rows in bulk go through il_gemm[F16] instead.
void lm_vec_dot_f16_avx512(int64_t n, float *s, const void *w, const void *xq) {
    const lm_f16 *a = w, *b = xq;
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        acc = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i))),
                              _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + i))), acc);
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        acc = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a + i)),
                              _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, b + i)), acc);
    }
    *s = _mm512_reduce_add_ps(acc);
}

// q8_0 and q4_0: dot_avx2.c's bodies (dot_blocks32_x86.h) with vpdpbusd for the int8 step

// w (n) q8_0 . x (n) q8_0
void lm_vec_dot_q8_0_avx512(int64_t n, float *s, const void *w, const void *xq) {
    lm_dot_q8_0_ymm(n, s, w, xq, dot_i8i8_vnni);
}

// w (n) q4_0 . x (n) q8_0
void lm_vec_dot_q4_0_avx512(int64_t n, float *s, const void *w, const void *xq) {
    lm_dot_q4_0_ymm(n, s, w, xq, dot_i8i8_vnni);
}

// w (n) q5_0 . x (n) q8_0, two blocks per zmm: nibbles of blocks i and i+1 unpacked into
// 64 bytes, the 5th bits applied from a 64-bit mask (no byte shuffles), |w| and sign(w)*y
// from a sign mask, one vpdpbusd; lanes 0-7 accumulate even blocks, 8-15 odd ones.
// gemm_avx512.c repeats exactly these steps per token (bit-identical batches).
void lm_vec_dot_q5_0_avx512(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q5_0 *x = w;
    const struct lm_block_q8_0 *y = xq;
    const int64_t nb = n / 32;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i += 2) {
        const int two = i + 1 < nb;
        const struct lm_block_q5_0 *x1 = two ? &x[i + 1] : &x[i];
        const struct lm_block_q8_0 *y1 = two ? &y[i + 1] : &y[i];
        __m512i qx;
        __mmask64 neg;
        lm_q5_0_pair_avx512(&x[i], x1, &qx, &neg);
        const __m512i yy = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y[i].qs)),
                                              _mm256_loadu_si256((const __m256i *)y1->qs), 1);
        const __m512i sy = _mm512_mask_sub_epi8(yy, neg, _mm512_setzero_si512(), yy);
        const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(qx), sy);
        const float d0 = f16_to_f32(x[i].d) * f16_to_f32(y[i].d);
        const float d1 = two ? f16_to_f32(x1->d) * f16_to_f32(y1->d) : 0.0f;
        const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(d0), _mm256_set1_ps(d1), 1);
        acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc);
    }
    *s = hsum_f32x8(_mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1)));
}

// K-quants: 64 quants per zmm (two 32-element sub-blocks), vpdpbusd per sub-block, lanes
// scaled with vpmulld; exact int32 per super-block, then the generic kernel's float steps
// (bit-identical to generic).

// w (n) q4_K . x (n) q8_K
void lm_vec_dot_q4_K_avx512(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q4_K *x = w;
    const struct lm_block_q8_K *y = xq;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        uint8_t sc[8], mn[8];
        int summs = 0;
        for (int j = 0; j < 8; j++) {
            lm_q4_K_scale_min(x[i].scales, j, &sc[j], &mn[j]);
            summs += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        __m512i acc = _mm512_setzero_si512();
        for (int c = 0; c < 4; c++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            // low nibbles -> elements 0..31 of the chunk, high nibbles -> 32..63
            __m512i r2 = _mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1);
            __m512i q = _mm512_and_si512(r2, m4);
            __m512i yy = _mm512_loadu_si512((const void *)(y[i].qs + 64 * c));
            __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, yy);
            __m512i scv = _mm512_inserti64x4(_mm512_set1_epi32(sc[2 * c]), _mm256_set1_epi32(sc[2 * c + 1]), 1);
            acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(p, scv));
        }
        int isum = _mm512_reduce_add_epi32(acc);
        sum += (f16_to_f32(x[i].d) * y[i].d) * (float)isum - (f16_to_f32(x[i].dmin) * y[i].d) * (float)summs;
    }
    *s = sum;
}

// w (n) q5_K . x (n) q8_K
void lm_vec_dot_q5_K_avx512(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q5_K *x = w;
    const struct lm_block_q8_K *y = xq;
    const __m512i m4 = _mm512_set1_epi8(0x0f), m1 = _mm512_set1_epi8(1);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        uint8_t sc[8], mn[8];
        int summs = 0;
        for (int j = 0; j < 8; j++) {
            lm_q4_K_scale_min(x[i].scales, j, &sc[j], &mn[j]);
            summs += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        const __m256i qh = _mm256_loadu_si256((const __m256i *)x[i].qh);
        __m512i acc = _mm512_setzero_si512();
        for (int c = 0; c < 4; c++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            __m512i r2 = _mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1);
            __m512i h2 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srli_epi16(qh, 2 * c)),
                                            _mm256_srli_epi16(qh, 2 * c + 1), 1);
            __m512i q = _mm512_or_si512(_mm512_and_si512(r2, m4), _mm512_slli_epi16(_mm512_and_si512(h2, m1), 4));
            __m512i yy = _mm512_loadu_si512((const void *)(y[i].qs + 64 * c));
            __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, yy);
            __m512i scv = _mm512_inserti64x4(_mm512_set1_epi32(sc[2 * c]), _mm256_set1_epi32(sc[2 * c + 1]), 1);
            acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(p, scv));
        }
        int isum = _mm512_reduce_add_epi32(acc);
        sum += (f16_to_f32(x[i].d) * y[i].d) * (float)isum - (f16_to_f32(x[i].dmin) * y[i].d) * (float)summs;
    }
    *s = sum;
}

// w (n) q6_K . x (n) q8_K; unsigned quants (0..63), -32 offset removed with bsums
void lm_vec_dot_q6_K_avx512(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q6_K *x = w;
    const struct lm_block_q8_K *y = xq;
    const __m512i m4 = _mm512_set1_epi8(0x0f), m3 = _mm512_set1_epi8(3);
    // i32 lane -> its group of 16 within 64 elements (4 lanes per group)
    const __m512i grp = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        int corr = 0;
        for (int j = 0; j < 16; j++) corr += x[i].scales[j] * y[i].bsums[j];
        __m512i acc = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            __m256i ql0 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h));
            __m256i ql1 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h));
            // zmm a: elements 0..63 of this half (ql0, ql1 low nibbles; qh bits 0-1, 2-3)
            // zmm b: elements 64..127 (high nibbles; qh bits 4-5, 6-7)
            __m512i l2 = _mm512_inserti64x4(_mm512_castsi256_si512(ql0), ql1, 1);
            __m512i h2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
            __m512i qa = _mm512_or_si512(_mm512_and_si512(l2, m4), _mm512_slli_epi16(_mm512_and_si512(h2, m3), 4));
            __m512i qb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l2, 4), m4),
                                         _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h2, 4), m3), 4));
            const int8_t *sc = x[i].scales + 8 * h;
            int32_t sa, sb;
            memcpy(&sa, sc, 4);
            memcpy(&sb, sc + 4, 4);
            __m512i sca = _mm512_permutexvar_epi32(grp, _mm512_castsi128_si512(_mm_cvtepi8_epi32(_mm_cvtsi32_si128(sa))));
            __m512i scb = _mm512_permutexvar_epi32(grp, _mm512_castsi128_si512(_mm_cvtepi8_epi32(_mm_cvtsi32_si128(sb))));
            __m512i ya = _mm512_loadu_si512((const void *)(y[i].qs + 128 * h));
            __m512i yb = _mm512_loadu_si512((const void *)(y[i].qs + 128 * h + 64));
            __m512i pa = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qa, ya);
            __m512i pb = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qb, yb);
            acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(pa, sca));
            acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(pb, scb));
        }
        int isum = _mm512_reduce_add_epi32(acc) - 32 * corr;
        sum += (f16_to_f32(x[i].d) * y[i].d) * (float)isum;
    }
    *s = sum;
}

#endif
