// AVX2 + FMA + F16C dot products (vec_dot) for every weight dtype but q2_K / q3_K (those in
// dot_q23_K_avx2.c): int8 blocks by maddubs + madd, f16 in kernels.h's 16-lane order as two ymm. The
// k-quant and f16 results are bit-identical to dot_generic.c's; f32, bf16 and the 32-element
// block dtypes accumulate in 8 float lanes instead.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include "kernels/kernels_internal.h"

#if defined(__x86_64__) || defined(__i386__)

#include <string.h>

#include "kernels/dot_blocks32_x86.h"
#include "kernels/simd_avx2.h"

// Each: *s = w (n) . xq (n), w one weight row, xq one activation row of lm_vec_dot_type(dtype)

// w (n) . x (n), f32; 4 accumulators of 8
void lm_vec_dot_f32_avx2(int64_t n, float *s, const void *w, const void *xq) {
    const float *a = w, *b = xq;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * k), _mm256_loadu_ps(b + i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc[0]);
    float sum = hsum_f32x8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) sum += a[i] * b[i];
    *s = sum;
}

// f16: the contract of kernels.h (16 lane sums, lm_tree16's tree), the 16 lanes as two ymm
// (lo = lanes 0..7, hi = 8..15); a partial last block is zero-padded
void lm_vec_dot_f16_avx2(int64_t n, float *s, const void *w, const void *xq) {
    const lm_f16 *a = w, *b = xq;
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __m256 al, ah, bl, bh;
        load16_f16(a + i, n - i, &al, &ah);
        load16_f16(b + i, n - i, &bl, &bh);
        lo = _mm256_fmadd_ps(al, bl, lo);
        hi = _mm256_fmadd_ps(ah, bh, hi);
    }
    *s = tree16_ymm(lo, hi);
}

void lm_vec_dot_bf16_avx2(int64_t n, float *s, const void *w, const void *xq) {
    const lm_bf16 *a = w, *b = xq;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
#define LDB(p) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 2; k++) acc[k] = _mm256_fmadd_ps(LDB(a + i + 8 * k), LDB(b + i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(LDB(a + i), LDB(b + i), acc[0]);
#undef LDB
    float sum = hsum_f32x8(_mm256_add_ps(acc[0], acc[1]));
    for (; i < n; i++) sum += lm_bf16_to_f32(a[i]) * lm_bf16_to_f32(b[i]);
    *s = sum;
}

// w (n) q4_0 . x (n) q8_0 (the body shared with dot_avx512.c)
void lm_vec_dot_q4_0_avx2(int64_t n, float *s, const void *w, const void *xq) {
    lm_dot_q4_0_ymm(n, s, w, xq, dot_i8i8);
}

// q4_1 / q5_1: dot_q1_avx2.c

// w (n) q5_0 . x (n) q8_0
void lm_vec_dot_q5_0_avx2(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q5_0 *x = w;
    const struct lm_block_q8_0 *y = xq;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i qx = _mm256_sub_epi8(unpack_q5(x[i].qs, x[i].qh), _mm256_set1_epi8(16));
        __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        __m256 d = _mm256_set1_ps(f16_to_f32(x[i].d) * f16_to_f32(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8i8(qx, qy)), acc);
    }
    *s = hsum_f32x8(acc);
}

// w (n) q8_0 . x (n) q8_0 (the body shared with dot_avx512.c)
void lm_vec_dot_q8_0_avx2(int64_t n, float *s, const void *w, const void *xq) {
    lm_dot_q8_0_ymm(n, s, w, xq, dot_i8i8);
}

// K-quants: exact int32 per super-block, then the same float steps as the generic kernel,
// so these agree with generic bit for bit.

// w (n) q4_K . x (n) q8_K
void lm_vec_dot_q4_K_avx2(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q4_K *x = w;
    const struct lm_block_q8_K *y = xq;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        uint8_t sc[8], mn[8];
        int summs = 0;
        for (int j = 0; j < 8; j++) {
            lm_q4_K_scale_min(x[i].scales, j, &sc[j], &mn[j]);
            summs += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        __m256i acc = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            __m256i ylo = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * c));
            __m256i yhi = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * c + 32));
            __m256i plo = _mm256_maddubs_epi16(_mm256_and_si256(raw, m4), ylo);
            __m256i phi = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), yhi);
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(plo, _mm256_set1_epi16(sc[2 * c])));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(phi, _mm256_set1_epi16(sc[2 * c + 1])));
        }
        int isum = hsum_i32x8(acc);
        sum += (f16_to_f32(x[i].d) * y[i].d) * (float)isum - (f16_to_f32(x[i].dmin) * y[i].d) * (float)summs;
    }
    *s = sum;
}

// w (n) q5_K . x (n) q8_K
void lm_vec_dot_q5_K_avx2(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q5_K *x = w;
    const struct lm_block_q8_K *y = xq;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m1 = _mm256_set1_epi8(1);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        uint8_t sc[8], mn[8];
        int summs = 0;
        for (int j = 0; j < 8; j++) {
            lm_q4_K_scale_min(x[i].scales, j, &sc[j], &mn[j]);
            summs += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        const __m256i qh = _mm256_loadu_si256((const __m256i *)x[i].qh);
        __m256i acc = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            __m256i hlo = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), m1), 4);
            __m256i hhi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), m1), 4);
            __m256i qlo = _mm256_or_si256(_mm256_and_si256(raw, m4), hlo);
            __m256i qhi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), hhi);
            __m256i plo = _mm256_maddubs_epi16(qlo, _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * c)));
            __m256i phi = _mm256_maddubs_epi16(qhi, _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * c + 32)));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(plo, _mm256_set1_epi16(sc[2 * c])));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(phi, _mm256_set1_epi16(sc[2 * c + 1])));
        }
        int isum = hsum_i32x8(acc);
        sum += (f16_to_f32(x[i].d) * y[i].d) * (float)isum - (f16_to_f32(x[i].dmin) * y[i].d) * (float)summs;
    }
    *s = sum;
}

// w (n) q6_K . x (n) q8_K. Quants are used unsigned (0..63) and the -32 offset is taken
// out afterwards with the activation's bsums: sum sc*(q-32)*y = sum sc*q*y - 32*sum sc*bsum.
void lm_vec_dot_q6_K_avx2(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q6_K *x = w;
    const struct lm_block_q8_K *y = xq;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(3);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        int corr = 0;
        for (int j = 0; j < 16; j++) corr += x[i].scales[j] * y[i].bsums[j];
        __m256i acc = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i ql0 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h));
            __m256i ql1 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h));
            __m256i lo[4] = {_mm256_and_si256(ql0, m4), _mm256_and_si256(ql1, m4),
                             _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4)};
            const int8_t *sc = x[i].scales + 8 * h;
            for (int k = 0; k < 4; k++) {
                __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m3), 4);
                __m256i q = _mm256_or_si256(lo[k], hi);
                __m256i yy = _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * h + 32 * k));
                __m256i scv = _mm256_set_m128i(_mm_set1_epi16(sc[2 * k + 1]), _mm_set1_epi16(sc[2 * k]));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(q, yy), scv));
            }
        }
        int isum = hsum_i32x8(acc) - 32 * corr;
        sum += (f16_to_f32(x[i].d) * y[i].d) * (float)isum;
    }
    *s = sum;
}

#endif
