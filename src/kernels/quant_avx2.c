// AVX2 conversions between float rows and the block formats: the hot dequantizers (f16,
// q8_0, q5_0, q4_K, q6_K) and the activation quantizers (q8_0, q8_K, f16), each bit-identical
// to quant_generic.c's. The AVX-512 table uses these too.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h: d*q - m must not become an FMA

#include "kernels/kernels_internal.h"

#if defined(__x86_64__) || defined(__i386__)

#include <string.h>

#include "kernels/simd_avx2.h"

// ============================================================================
// dequantize: one weight row of n elements -> y (n floats)
// ============================================================================

void lm_dequant_f16_avx2(const void *x, float *y, int64_t n) {
    const lm_f16 *h = x;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) y[i] = f16_to_f32(h[i]);
}

// f32 -> f16 by F16C (round to nearest even, as lm_f32_to_f16; test_kernels_dot checks)
void lm_quant_f16_avx2(const float *x, void *y, int64_t n) {
    lm_f16 *h = y;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) h[i] = lm_f32_to_f16(x[i]);
}

void lm_dequant_q8_0_avx2(const void *x, float *y, int64_t n) {
    const struct lm_block_q8_0 *b = x;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        __m256 d = _mm256_set1_ps(f16_to_f32(b[i].d));
        for (int j = 0; j < 32; j += 8) {
            __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b[i].qs + j)));
            _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
        }
    }
}

void lm_dequant_q5_0_avx2(const void *x, float *y, int64_t n) {
    const struct lm_block_q5_0 *b = x;
    int8_t q[32];
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        __m256 d = _mm256_set1_ps(f16_to_f32(b[i].d));
        _mm256_storeu_si256((__m256i *)q, _mm256_sub_epi8(unpack_q5(b[i].qs, b[i].qh), _mm256_set1_epi8(16)));
        for (int j = 0; j < 32; j += 8) {
            __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + j)));
            _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_cvtepi32_ps(v), d));
        }
    }
}

void lm_dequant_q4_K_avx2(const void *x, float *y, int64_t n) {
    const struct lm_block_q4_K *b = x;
    uint8_t q[64];
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        const float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
        for (int c = 0; c < 4; c++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * c));
            _mm256_storeu_si256((__m256i *)q, _mm256_and_si256(raw, _mm256_set1_epi8(0x0f)));
            _mm256_storeu_si256((__m256i *)(q + 32),
                                _mm256_and_si256(_mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0f)));
            for (int h = 0; h < 2; h++) {
                uint8_t sc, mn;
                lm_q4_K_scale_min(b[i].scales, 2 * c + h, &sc, &mn);
                __m256 dl = _mm256_set1_ps(d * (float)sc), ml = _mm256_set1_ps(dmin * (float)mn);
                for (int j = 0; j < 32; j += 8, y += 8) {
                    __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(q + 32 * h + j)));
                    _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(dl, _mm256_cvtepi32_ps(v)), ml));
                }
            }
        }
    }
}

void lm_dequant_q6_K_avx2(const void *x, float *y, int64_t n) {
    const struct lm_block_q6_K *b = x;
    int8_t q[128];
    const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(3), k32 = _mm256_set1_epi8(32);
    for (int64_t i = 0; i < n / LM_QK_K; i++) {
        const float d = f16_to_f32(b[i].d);
        for (int h = 0; h < 2; h++) {
            __m256i ql0 = _mm256_loadu_si256((const __m256i *)(b[i].ql + 64 * h));
            __m256i ql1 = _mm256_loadu_si256((const __m256i *)(b[i].ql + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(b[i].qh + 32 * h));
            __m256i lo[4] = {_mm256_and_si256(ql0, m4), _mm256_and_si256(ql1, m4),
                             _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4)};
            for (int k = 0; k < 4; k++) {
                __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m3), 4);
                _mm256_storeu_si256((__m256i *)(q + 32 * k), _mm256_sub_epi8(_mm256_or_si256(lo[k], hi), k32));
            }
            for (int g = 0; g < 8; g++) {
                __m256 dl = _mm256_set1_ps(d * (float)b[i].scales[8 * h + g]);
                for (int j = 0; j < 16; j += 8, y += 8) {
                    __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + 16 * g + j)));
                    _mm256_storeu_ps(y, _mm256_mul_ps(dl, _mm256_cvtepi32_ps(v)));
                }
            }
        }
    }
}

// ============================================================================
// quantize: one activation row x (n floats) -> y
// ============================================================================

void lm_quant_q8_0_avx2(const float *x, void *vy, int64_t n) {
    struct lm_block_q8_0 *y = vy;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        __m256 v[4], m = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[k]));
        }
        const float amax = hmax_f32x8(m);
        const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[i].d = (lm_f16)_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], _mm256_set1_ps(id))); // half to even
        store_i32x32_as_i8(y[i].qs, q[0], q[1], q[2], q[3]);
    }
}

void lm_quant_q8_K_avx2(const float *x, void *vy, int64_t n) {
    struct lm_block_q8_K *y = vy;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / LM_QK_K; i++, x += LM_QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < LM_QK_K; j += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
        const float amax = hmax_f32x8(m);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        // max: the first element of largest magnitude (the reference scans with a strict >)
        float max = amax;
        for (int j = 0; j < LM_QK_K; j += 8) {
            __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j));
            int mask = _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (mask) {
                max = x[j + __builtin_ctz((unsigned)mask)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        const __m256i cap = _mm256_set1_epi32(127);
        for (int j = 0; j < LM_QK_K; j += 32) {
            __m256i q[4];
            for (int k = 0; k < 4; k++) // cvtps rounds half to even, as nearest_int
                q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + j + 8 * k))), cap);
            y[i].bsums[j / 16] = (int16_t)hsum_i32x8(_mm256_add_epi32(q[0], q[1]));
            y[i].bsums[j / 16 + 1] = (int16_t)hsum_i32x8(_mm256_add_epi32(q[2], q[3]));
            store_i32x32_as_i8(y[i].qs + j, q[0], q[1], q[2], q[3]);
        }
        y[i].d = 1.0f / iscale;
    }
}

#endif
