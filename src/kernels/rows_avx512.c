// AVX-512 row kernels (kernels.h): the float operations of rows_generic.c, 16 lanes at a
// time with masked tails (RMS norm's squares in 16 double lanes, RoPE, the f16-table GELU by
// gather, SiLU and gpt-oss's clamped SwiGLU by the ggml_v_expf polynomial, f32 -> f16 rows).
// Whole 16-lane chunks use plain loads and stores: a mask computed per chunk makes RoPE 1.5x
// slower (Gemma 3 270M, 603-token prefill).
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include "kernels/kernels_internal.h"

#if defined(__x86_64__)
#include "kernels/simd_avx512.h"

#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

void lm_rmsnorm_avx512(float *y, const float *x, const float *w, int64_t n, float eps) {
    // ggml accumulates the float squares in double, one after the other; 16 double lanes
    // change that sum by ~1e-16 relative, far below the float rounding of the scale
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    int64_t j0 = 0;
    for (; j0 + 16 <= n; j0 += 16) {
        const __m512 v = _mm512_loadu_ps(x + j0), sq = _mm512_mul_ps(v, v);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(sq, 1)));
    }
    double sum = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    for (int64_t j = j0; j < n; j++) sum += (double)(x[j] * x[j]);
    const __m512 scale = _mm512_set1_ps(1.0f / sqrtf((float)(sum / (double)n) + eps));
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + j), scale);
        if (w) v = _mm512_mul_ps(v, _mm512_loadu_ps(w + j));
        _mm512_storeu_ps(y + j, v);
    }
    if (j < n) {
        const __mmask16 m = mask_n(n - j);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + j), scale);
        if (w) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + j));
        _mm512_mask_storeu_ps(y + j, m, v);
    }
}

// the 16 pairs' cos / sin of each chunk are split once for all rows (neox), or paired
// with their swapped copy once (adjacent pairs); a masked last chunk for n_rot / 2 (or
// n_rot) not a multiple of 16
static inline __attribute__((always_inline)) void rope_neox16(float *x, int64_t n_rows, int64_t stride,
                                                              const float *cs, int64_t h, int64_t i,
                                                              __mmask16 m) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const bool full = m == 0xffff; // a constant after inlining: plain loads
    const __m512 ca = full ? _mm512_loadu_ps(cs + 2 * i) : _mm512_maskz_loadu_ps(mask_n(2 * (h - i)), cs + 2 * i);
    const __m512 cb = full ? _mm512_loadu_ps(cs + 2 * i + 16)
                           : _mm512_maskz_loadu_ps(mask_n(2 * (h - i) - 16), cs + 2 * i + 16);
    const __m512 co = _mm512_permutex2var_ps(ca, even, cb), si = _mm512_permutex2var_ps(ca, odd, cb);
    for (int64_t r = 0; r < n_rows; r++) {
        float *v = x + r * stride;
        const __m512 x0 = full ? _mm512_loadu_ps(v + i) : _mm512_maskz_loadu_ps(m, v + i);
        const __m512 x1 = full ? _mm512_loadu_ps(v + h + i) : _mm512_maskz_loadu_ps(m, v + h + i);
        const __m512 y0 = _mm512_fmsub_ps(x0, co, _mm512_mul_ps(x1, si)), y1 = _mm512_fmadd_ps(x0, si, _mm512_mul_ps(x1, co));
        if (full) {
            _mm512_storeu_ps(v + i, y0);
            _mm512_storeu_ps(v + h + i, y1);
        } else {
            _mm512_mask_storeu_ps(v + i, m, y0);
            _mm512_mask_storeu_ps(v + h + i, m, y1);
        }
    }
}

static inline __attribute__((always_inline)) void rope_adj16(float *x, int64_t n_rows, int64_t stride,
                                                             const float *cs, int64_t i, __mmask16 m) {
    // (x0, x0) * (cos, sin) -/+ (x1, x1) * (sin, cos): fmaddsub subtracts in even lanes
    const bool full = m == 0xffff; // a constant after inlining: plain loads and stores
    const __m512 c = full ? _mm512_loadu_ps(cs + i) : _mm512_maskz_loadu_ps(m, cs + i);
    const __m512 sc = _mm512_permute_ps(c, _MM_SHUFFLE(2, 3, 0, 1)); // (sin, cos) pairs
    for (int64_t r = 0; r < n_rows; r++) {
        float *v = x + r * stride;
        const __m512 xv = full ? _mm512_loadu_ps(v + i) : _mm512_maskz_loadu_ps(m, v + i);
        const __m512 y = _mm512_fmaddsub_ps(_mm512_moveldup_ps(xv), c, _mm512_mul_ps(_mm512_movehdup_ps(xv), sc));
        if (full) _mm512_storeu_ps(v + i, y);
        else _mm512_mask_storeu_ps(v + i, m, y);
    }
}

void lm_rope_avx512(float *x, int64_t n_rows, int64_t stride, const float *cs, int64_t n_rot,
                    bool neox) {
    const int64_t h = n_rot / 2, n = neox ? h : n_rot; // pairs (neox) or floats per row
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        if (neox) rope_neox16(x, n_rows, stride, cs, h, i, 0xffff);
        else rope_adj16(x, n_rows, stride, cs, i, 0xffff);
    }
    if (i < n) {
        if (neox) rope_neox16(x, n_rows, stride, cs, h, i, mask_n(n - i));
        else rope_adj16(x, n_rows, stride, cs, i, mask_n(n - i));
    }
}

// g[j] = gelu(g[j]) * u[j] for j < n: f16 table lookups, 16 at a time with a gather
void lm_geglu_avx512(float *g, const float *u, int64_t n, const float *table) {
    const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512 x = _mm512_loadu_ps(g + j);
        const __m512i idx = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, RNE));
        __m512 y = _mm512_i32gather_ps(idx, table, 4);
        y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ), x);
        y = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_GT_OQ), y);
        _mm512_storeu_ps(g + j, _mm512_mul_ps(y, _mm512_loadu_ps(u + j)));
    }
    if (j < n) lm_geglu_generic(g + j, u + j, n - j, table);
}

// SiLU gating (kernels.h): the vector formula on 16 lanes up to F - F % 16, masked at the
// span's edges, then the scalar formula (the generic kernel's) for the row's last F % 16
void lm_swiglu_avx512(float *g, const float *u, int64_t a, int64_t b, int64_t F) {
    int64_t j = a;
    const int64_t vend = F - F % 16, ve = b < vend ? b : vend;
    for (; j < ve; j += 16) {
        const __mmask16 m = mask_n(ve - j);
        const __m512 x = _mm512_maskz_loadu_ps(m, g + j);
        const __m512 e = lm_expf_ggml_512(_mm512_sub_ps(_mm512_setzero_ps(), x));
        const __m512 silu = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_mask_storeu_ps(g + j, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, u + j)));
    }
    // the loop ends past ve when ve - a is not a multiple of 16: the scalar part starts at
    // ve (the loop this replaced went on from j and skipped [ve, j) when F % 16 != 0)
    if (ve > a) j = ve;
    if (j < b) lm_swiglu_generic(g, u, j, b, F);
}

// gpt-oss's clamped SwiGLU (kernels.h) for j in [a, b): lm_swiglu_oai_generic's operations
// 16 lanes at a time (the clamps as its compares, so NaNs go the same way), masked tail
void lm_swiglu_oai_avx512(float *g, const float *u, int64_t a, int64_t b, float alpha, float limit) {
    const __m512 lim = _mm512_set1_ps(limit), nlim = _mm512_set1_ps(-limit);
    const __m512 va = _mm512_set1_ps(alpha), one = _mm512_set1_ps(1.0f), sign = _mm512_set1_ps(-0.0f);
    for (int64_t j = a; j < b; j += 16) {
        const __mmask16 m = mask_n(b - j);
        const __m512 gv = _mm512_maskz_loadu_ps(m, g + j), uv = _mm512_maskz_loadu_ps(m, u + j);
        const __m512 x = _mm512_mask_mov_ps(lim, _mm512_cmp_ps_mask(gv, lim, _CMP_LT_OQ), gv);
        __m512 y = _mm512_mask_mov_ps(uv, _mm512_cmp_ps_mask(lim, uv, _CMP_LT_OQ), lim);
        y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(uv, nlim, _CMP_LT_OQ), nlim);
        const __m512 e = lm_expf_ggml_512(_mm512_mul_ps(va, _mm512_xor_ps(x, sign)));
        const __m512 glu = _mm512_div_ps(x, _mm512_add_ps(one, e));
        _mm512_mask_storeu_ps(g + j, m, _mm512_mul_ps(glu, _mm512_add_ps(y, one)));
    }
}

void lm_f32_to_f16_avx512(lm_f16 *y, const float *x, int64_t n) {
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        _mm256_storeu_si256((__m256i *)(y + j), _mm512_cvtps_ph(_mm512_loadu_ps(x + j), RNE));
    if (j < n) {
        const __mmask16 m = mask_n(n - j);
        _mm256_mask_storeu_epi16(y + j, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + j), RNE));
    }
}

#endif
