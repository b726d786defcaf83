// Multi-token dot products (AVX-512 VNNI) on the file layout, for prefill and batched decode
// when a weight has no il layout: one weight row against up to 8 activation rows
// (vec_dot_n; vec_dot_n_u8 on q8_0 activations repacked to u8), each weight block decoded
// once for every token. Per token the float operations are exactly those of dot_avx512.c's
// single-row vec_dot (so batch results are bit-identical to token-by-token ones); the oracle
// is dot_generic.c's vec_dot, row by row.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h: the single-row kernels' steps exactly

#include <string.h>

#include "kernels/kernels_internal.h"

#if defined(__x86_64__)
#include "kernels/simd_avx512.h"

// ============================================================================
// q8_0 / q5_0 weights x q8_0 activations
// ============================================================================

// W row (n) q8_0 . X rows (nt, n) q8_0 -> s[t * ss]; 2 accumulators per token (even / odd
// blocks) as the single-row kernel
AI void q8_0_n(const int NT, int64_t n, float *s, size_t ss, const void *w, const void *xq,
               size_t xs) {
    const struct lm_block_q8_0 *x = w;
    __m256 acc0[8], acc1[8];
    for (int t = 0; t < NT; t++) acc0[t] = acc1[t] = _mm256_setzero_ps();
    const int64_t nb = n / 32;
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)x[i].qs);
        const __m256i w1 = _mm256_loadu_si256((const __m256i *)x[i + 1].qs);
        const __m256i a0 = _mm256_sign_epi8(w0, w0), a1 = _mm256_sign_epi8(w1, w1);
        const float dw0 = f16_to_f32(x[i].d), dw1 = f16_to_f32(x[i + 1].d);
        for (int t = 0; t < NT; t++) {
            const struct lm_block_q8_0 *y = (const struct lm_block_q8_0 *)((const char *)xq + t * xs);
            const __m256i p0 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), a0,
                _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y[i].qs), w0));
            const __m256i p1 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), a1,
                _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y[i + 1].qs), w1));
            acc0[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw0 * f16_to_f32(y[i].d)), _mm256_cvtepi32_ps(p0), acc0[t]);
            acc1[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw1 * f16_to_f32(y[i + 1].d)), _mm256_cvtepi32_ps(p1), acc1[t]);
        }
    }
    for (; i < nb; i++) {
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)x[i].qs);
        const __m256i a0 = _mm256_sign_epi8(w0, w0);
        const float dw0 = f16_to_f32(x[i].d);
        for (int t = 0; t < NT; t++) {
            const struct lm_block_q8_0 *y = (const struct lm_block_q8_0 *)((const char *)xq + t * xs);
            const __m256i p0 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), a0,
                _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y[i].qs), w0));
            acc0[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw0 * f16_to_f32(y[i].d)), _mm256_cvtepi32_ps(p0), acc0[t]);
        }
    }
    for (int t = 0; t < NT; t++) s[t * ss] = hsum_f32x8(_mm256_add_ps(acc0[t], acc1[t]));
}

// W row (n) q5_0 . X rows (nt, n) q8_0 -> s[t * ss]; the single-row kernel's steps (two
// blocks per zmm) with the weight pair decoded once for all tokens
AI void q5_0_n(const int NT, int64_t n, float *s, size_t ss, const void *w, const void *xq,
               size_t xs) {
    const struct lm_block_q5_0 *x = w;
    const int64_t nb = n / 32;
    __m512 acc[8];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i += 2) {
        const int two = i + 1 < nb;
        const struct lm_block_q5_0 *x1 = two ? &x[i + 1] : &x[i];
        __m512i qx;
        __mmask64 neg;
        lm_q5_0_pair_avx512(&x[i], x1, &qx, &neg);
        const __m512i ax = _mm512_abs_epi8(qx);
        const float dw0 = f16_to_f32(x[i].d), dw1 = f16_to_f32(x1->d);
        for (int t = 0; t < NT; t++) {
            const struct lm_block_q8_0 *y = (const struct lm_block_q8_0 *)((const char *)xq + t * xs);
            const struct lm_block_q8_0 *y1 = two ? &y[i + 1] : &y[i];
            const __m512i yy = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y[i].qs)),
                                                  _mm256_loadu_si256((const __m256i *)y1->qs), 1);
            const __m512i sy = _mm512_mask_sub_epi8(yy, neg, _mm512_setzero_si512(), yy);
            const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ax, sy);
            const float d0 = dw0 * f16_to_f32(y[i].d);
            const float d1 = two ? dw1 * f16_to_f32(y1->d) : 0.0f;
            const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(d0), _mm256_set1_ps(d1), 1);
            acc[t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++)
        s[t * ss] = hsum_f32x8(_mm256_add_ps(_mm512_castps512_ps256(acc[t]), _mm512_extractf32x8_ps(acc[t], 1)));
}

// ============================================================================
// k-quants x q8_K: exact int32 per super-block, then the single-row float steps
// ============================================================================

AI void q4_K_n(const int NT, int64_t n, float *s, size_t ss, const void *w, const void *xq,
               size_t xs) {
    const struct lm_block_q4_K *x = w;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    float sum[8] = {0};
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; j++) lm_q4_K_scale_min(x[i].scales, j, &sc[j], &mn[j]);
        __m512i q[4], scv[4];
        for (int c = 0; c < 4; c++) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * c));
            q[c] = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(raw), _mm256_srli_epi16(raw, 4), 1), m4);
            scv[c] = _mm512_inserti64x4(_mm512_set1_epi32(sc[2 * c]), _mm256_set1_epi32(sc[2 * c + 1]), 1);
        }
        const float dx = f16_to_f32(x[i].d), dmx = f16_to_f32(x[i].dmin);
        for (int t = 0; t < NT; t++) {
            const struct lm_block_q8_K *y = (const struct lm_block_q8_K *)((const char *)xq + t * xs);
            int summs = 0;
            for (int j = 0; j < 8; j++) summs += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
            __m512i acc = _mm512_setzero_si512();
            for (int c = 0; c < 4; c++) {
                const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[c],
                                                      _mm512_loadu_si512((const void *)(y[i].qs + 64 * c)));
                acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(p, scv[c]));
            }
            const int isum = _mm512_reduce_add_epi32(acc);
            sum[t] += (dx * y[i].d) * (float)isum - (dmx * y[i].d) * (float)summs;
        }
    }
    for (int t = 0; t < NT; t++) s[t * ss] = sum[t];
}

AI void q6_K_n(const int NT, int64_t n, float *s, size_t ss, const void *w, const void *xq,
               size_t xs) {
    const struct lm_block_q6_K *x = w;
    const __m512i m4 = _mm512_set1_epi8(0x0f), m3 = _mm512_set1_epi8(3);
    const __m512i grp = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    float sum[8] = {0};
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        __m512i qa[2], qb[2], sca[2], scb[2];
        for (int h = 0; h < 2; h++) {
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h));
            const __m512i l2 = _mm512_inserti64x4(_mm512_castsi256_si512(ql0), ql1, 1);
            const __m512i h2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
            qa[h] = _mm512_or_si512(_mm512_and_si512(l2, m4), _mm512_slli_epi16(_mm512_and_si512(h2, m3), 4));
            qb[h] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l2, 4), m4),
                                    _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h2, 4), m3), 4));
            int32_t sa, sb;
            memcpy(&sa, x[i].scales + 8 * h, 4);
            memcpy(&sb, x[i].scales + 8 * h + 4, 4);
            sca[h] = _mm512_permutexvar_epi32(grp, _mm512_castsi128_si512(_mm_cvtepi8_epi32(_mm_cvtsi32_si128(sa))));
            scb[h] = _mm512_permutexvar_epi32(grp, _mm512_castsi128_si512(_mm_cvtepi8_epi32(_mm_cvtsi32_si128(sb))));
        }
        const float dx = f16_to_f32(x[i].d);
        for (int t = 0; t < NT; t++) {
            const struct lm_block_q8_K *y = (const struct lm_block_q8_K *)((const char *)xq + t * xs);
            int corr = 0;
            for (int j = 0; j < 16; j++) corr += x[i].scales[j] * y[i].bsums[j];
            __m512i acc = _mm512_setzero_si512();
            for (int h = 0; h < 2; h++) {
                const __m512i pa = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qa[h],
                                                       _mm512_loadu_si512((const void *)(y[i].qs + 128 * h)));
                const __m512i pb = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qb[h],
                                                       _mm512_loadu_si512((const void *)(y[i].qs + 128 * h + 64)));
                acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(pa, sca[h]));
                acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(pb, scb[h]));
            }
            const int isum = _mm512_reduce_add_epi32(acc) - 32 * corr;
            sum[t] += (dx * y[i].d) * (float)isum;
        }
    }
    for (int t = 0; t < NT; t++) s[t * ss] = sum[t];
}

// ============================================================================
// f16 weights x f16 activations in vec_dot_f16's order (kernels.h: one 16-lane
// accumulator per token, masked last block, _mm512_reduce_add_ps); weights converted once
// per 16 elements for up to 8 tokens
// ============================================================================

AI void f16_n(const int NT, int64_t n, float *s, size_t ss, const void *w, const void *xq,
              size_t xs) {
    const lm_f16 *a = w;
    __m512 acc[LM_VEC_DOT_MAX_NT];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 wv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i)));
        for (int t = 0; t < NT; t++) {
            const lm_f16 *b = (const lm_f16 *)((const char *)xq + t * xs);
            acc[t] = _mm512_fmadd_ps(wv, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + i))), acc[t]);
        }
    }
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        const __m512 wv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a + i));
        for (int t = 0; t < NT; t++) {
            const lm_f16 *b = (const lm_f16 *)((const char *)xq + t * xs);
            acc[t] = _mm512_fmadd_ps(wv, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, b + i)), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++) s[t * ss] = _mm512_reduce_add_ps(acc[t]);
}

// ============================================================================
// dispatch on the token count (compile-time NT so accumulators stay in registers)
// ============================================================================

// W row (n) . X rows (nt, n), 1 <= nt <= LM_VEC_DOT_MAX_NT (lm_vec_dot_n_fn)
#define LM_DEF_N(name)                                                                         \
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
LM_DEF_N(q8_0)
LM_DEF_N(q5_0)
LM_DEF_N(q4_K)
LM_DEF_N(q6_K)
LM_DEF_N(f16)

// ============================================================================
// q5_0 / q8_0 weights x repacked activations (u8 = q + 128, scale vectors per pair)
// ============================================================================
// sum_j (y_j + 128) w_j - 128 sum_j w_j = sum_j y_j w_j exactly: the accumulator of each
// dpbusd starts at -128 * sum(w) (per i32 lane, once per weight pair), so per token the
// work is one load, one vpdpbusd, one convert, one multiply and one fma per 64 weights.

AI void pair_u8_n(const int NT, const __m512i qx, const __m512 dwv, int64_t pair, const uint8_t *xu,
                  size_t xus, const float *dyv, size_t dys, __m512 *acc) {
    const __m512i negc = _mm512_sub_epi32(_mm512_setzero_si512(),
                                          _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), qx));
    for (int t = 0; t < NT; t++) {
        const __m512i yu = _mm512_loadu_si512((const void *)(xu + t * xus + pair * 64));
        const __m512i p = _mm512_dpbusd_epi32(negc, yu, qx);
        const __m512 d = _mm512_mul_ps(dwv, _mm512_loadu_ps(dyv + t * dys + pair * 16));
        acc[t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc[t]);
    }
}

AI void q5_0_u8_n(const int NT, int64_t n, float *s, size_t ss, const void *w, const uint8_t *xu,
                  size_t xus, const float *dyv, size_t dys) {
    const struct lm_block_q5_0 *x = w;
    const int64_t nb = n / 32;
    __m512 acc[8];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i += 2) {
        const int two = i + 1 < nb;
        const struct lm_block_q5_0 *x1 = two ? &x[i + 1] : &x[i];
        __m512i qx;
        __mmask64 neg;
        lm_q5_0_pair_avx512(&x[i], x1, &qx, &neg);
        const __m512 dwv = _mm512_insertf32x8(_mm512_set1_ps(f16_to_f32(x[i].d)), _mm256_set1_ps(f16_to_f32(x1->d)), 1);
        pair_u8_n(NT, qx, dwv, i / 2, xu, xus, dyv, dys, acc);
    }
    for (int t = 0; t < NT; t++)
        s[t * ss] = hsum_f32x8(_mm256_add_ps(_mm512_castps512_ps256(acc[t]), _mm512_extractf32x8_ps(acc[t], 1)));
}

AI void q8_0_u8_n(const int NT, int64_t n, float *s, size_t ss, const void *w, const uint8_t *xu,
                  size_t xus, const float *dyv, size_t dys) {
    const struct lm_block_q8_0 *x = w;
    const int64_t nb = n / 32;
    __m512 acc[8];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i += 2) {
        const int two = i + 1 < nb;
        const struct lm_block_q8_0 *x1 = two ? &x[i + 1] : &x[i];
        const __m512i qx = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)x[i].qs)),
                                              _mm256_loadu_si256((const __m256i *)x1->qs), 1);
        const __m512 dwv = _mm512_insertf32x8(_mm512_set1_ps(f16_to_f32(x[i].d)), _mm256_set1_ps(f16_to_f32(x1->d)), 1);
        pair_u8_n(NT, qx, dwv, i / 2, xu, xus, dyv, dys, acc);
    }
    for (int t = 0; t < NT; t++)
        s[t * ss] = hsum_f32x8(_mm256_add_ps(_mm512_castps512_ps256(acc[t]), _mm512_extractf32x8_ps(acc[t], 1)));
}

// W row (n) . X rows (nt, n) as u8 + scale vectors (lm_vec_dot_n_u8_fn)
#define LM_DEF_U8(name)                                                                        \
    void lm_vec_dot_n_u8_##name##_avx512(int64_t n, int nt, float *s, size_t ss, const void *w, \
                                         const uint8_t *xu, size_t xus, const float *dyv,      \
                                         size_t dys) {                                         \
        switch (nt) {                                                                          \
        case 1: name##_u8_n(1, n, s, ss, w, xu, xus, dyv, dys); break;                        \
        case 2: name##_u8_n(2, n, s, ss, w, xu, xus, dyv, dys); break;                        \
        case 3: name##_u8_n(3, n, s, ss, w, xu, xus, dyv, dys); break;                        \
        case 4: name##_u8_n(4, n, s, ss, w, xu, xus, dyv, dys); break;                        \
        case 5: name##_u8_n(5, n, s, ss, w, xu, xus, dyv, dys); break;                        \
        case 6: name##_u8_n(6, n, s, ss, w, xu, xus, dyv, dys); break;                        \
        case 7: name##_u8_n(7, n, s, ss, w, xu, xus, dyv, dys); break;                        \
        default: name##_u8_n(8, n, s, ss, w, xu, xus, dyv, dys); break;                       \
        }                                                                                      \
    }
LM_DEF_U8(q5_0)
LM_DEF_U8(q8_0)

#endif
