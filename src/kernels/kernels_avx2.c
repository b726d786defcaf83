// AVX2 + FMA + F16C kernels: dot products for every weight dtype but q2_K / q3_K, the q8_0 /
// q8_K activation quantizers and the hot dequantizers. Entries not specialized here point at
// the generic table, the row kernels (norms, RoPE, activations, attention) included: no AVX2
// version of them exists yet. Dequant and quant results are bit-identical to the generic ones.
#pragma GCC optimize("fp-contract=off") // see kernels_generic.c: d*q - m must not become an FMA

#include "kernels/kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <cpuid.h>
#include <pthread.h>
#include <string.h>

#include "kernels/simd_avx2.h"

// ============================================================================
// dequantize
// ============================================================================

static void dequant_f16(const void *x, float *y, int64_t n) {
    const lm_f16 *h = x;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) y[i] = f16_to_f32(h[i]);
}

// f32 -> f16 by F16C (round to nearest even, as lm_f32_to_f16; test_kernels_dot checks)
static void quant_f16(const float *x, void *y, int64_t n) {
    lm_f16 *h = y;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) h[i] = lm_f32_to_f16(x[i]);
}

static void dequant_q8_0(const void *x, float *y, int64_t n) {
    const struct lm_block_q8_0 *b = x;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        __m256 d = _mm256_set1_ps(f16_to_f32(b[i].d));
        for (int j = 0; j < 32; j += 8) {
            __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b[i].qs + j)));
            _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
        }
    }
}

static void dequant_q5_0(const void *x, float *y, int64_t n) {
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

static void dequant_q4_K(const void *x, float *y, int64_t n) {
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

static void dequant_q6_K(const void *x, float *y, int64_t n) {
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
// activation quantizers (bit-identical to the generic ones)
// ============================================================================

static void quant_q8_0(const float *x, void *vy, int64_t n) {
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

static void quant_q8_K(const float *x, void *vy, int64_t n) {
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

// ============================================================================
// dot products
// ============================================================================

// w (n) . x (n), f32; 4 accumulators of 8
static void vec_dot_f32(int64_t n, float *s, const void *w, const void *xq) {
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

// ---- f16: the contract of kernels.h (16 lane sums, lm_tree16's tree), the 16 lanes as
// two ymm (lo = lanes 0..7, hi = 8..15); a partial last block is zero-padded

static void vec_dot_f16(int64_t n, float *s, const void *w, const void *xq) {
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

// il_gemm[F16]: R rows x T tokens per pass (f32 activation rows, xs floats apart)
static inline __attribute__((always_inline)) void f16_il_tile(const int R, const int T, int64_t n,
                                                              const lm_f16 *w, const float *x,
                                                              size_t xs, float *y, size_t ys) {
    __m256 lo[2][4], hi[2][4];
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) lo[r][t] = hi[r][t] = _mm256_setzero_ps();
    for (int64_t k = 0; k < n; k += 16) {
        __m256 wl[2], wh[2];
        for (int r = 0; r < R; r++) load16_f16(w + (size_t)r * n + k, n - k, &wl[r], &wh[r]);
        for (int t = 0; t < T; t++) {
            __m256 xl, xh;
            const float *xt = x + (size_t)t * xs + k;
            if (n - k >= 16) {
                xl = _mm256_loadu_ps(xt);
                xh = _mm256_loadu_ps(xt + 8);
            } else {
                float tmp[16] = {0};
                memcpy(tmp, xt, (size_t)(n - k) * sizeof(float));
                xl = _mm256_loadu_ps(tmp);
                xh = _mm256_loadu_ps(tmp + 8);
            }
            for (int r = 0; r < R; r++) {
                lo[r][t] = _mm256_fmadd_ps(wl[r], xl, lo[r][t]);
                hi[r][t] = _mm256_fmadd_ps(wh[r], xh, hi[r][t]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) y[(size_t)t * ys + r] = tree16_ymm(lo[r][t], hi[r][t]);
}

static void il_gemm_f16(int64_t n_in, int nt, float *y, size_t ys, const void *wg, const void *xa,
                        size_t xas) {
    const lm_f16 *w = wg;
    const size_t xs = xas / sizeof(float);
    for (int t0 = 0; t0 < nt; t0 += 4) {
        const int T = nt - t0 < 4 ? nt - t0 : 4;
        const float *x = (const float *)((const char *)xa + (size_t)t0 * xas);
        float *yt = y + (size_t)t0 * ys;
        for (int r = 0; r < LM_IL_ROWS; r += 2) {
            const lm_f16 *wr = w + (size_t)r * n_in;
            switch (T) {
            case 1: f16_il_tile(2, 1, n_in, wr, x, xs, yt + r, ys); break;
            case 2: f16_il_tile(2, 2, n_in, wr, x, xs, yt + r, ys); break;
            case 3: f16_il_tile(1, 3, n_in, wr, x, xs, yt + r, ys);
                    f16_il_tile(1, 3, n_in, wr + n_in, x, xs, yt + r + 1, ys); break;
            default: f16_il_tile(1, 4, n_in, wr, x, xs, yt + r, ys);
                     f16_il_tile(1, 4, n_in, wr + n_in, x, xs, yt + r + 1, ys); break;
            }
        }
    }
}

static void vec_dot_bf16(int64_t n, float *s, const void *w, const void *xq) {
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

// w (n) q4_0 . x (n) q8_0
static void vec_dot_q4_0(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q4_0 *x = w;
    const struct lm_block_q8_0 *y = xq;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i qx = _mm256_sub_epi8(unpack_nibbles32(x[i].qs), _mm256_set1_epi8(8));
        __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        __m256 d = _mm256_set1_ps(f16_to_f32(x[i].d) * f16_to_f32(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8i8(qx, qy)), acc);
    }
    *s = hsum_f32x8(acc);
}

// w (n) q4_1 . x (n) q8_1
static void vec_dot_q4_1(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q4_1 *x = w;
    const struct lm_block_q8_1 *y = xq;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        __m256 d = _mm256_set1_ps(f16_to_f32(x[i].d) * f16_to_f32(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_u8i8(unpack_nibbles32(x[i].qs), qy)), acc);
        summs += f16_to_f32(x[i].m) * f16_to_f32(y[i].s);
    }
    *s = hsum_f32x8(acc) + summs;
}

// w (n) q5_0 . x (n) q8_0
static void vec_dot_q5_0(int64_t n, float *s, const void *w, const void *xq) {
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

// w (n) q5_1 . x (n) q8_1
static void vec_dot_q5_1(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q5_1 *x = w;
    const struct lm_block_q8_1 *y = xq;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        __m256 d = _mm256_set1_ps(f16_to_f32(x[i].d) * f16_to_f32(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_u8i8(unpack_q5(x[i].qs, x[i].qh), qy)), acc);
        summs += f16_to_f32(x[i].m) * f16_to_f32(y[i].s);
    }
    *s = hsum_f32x8(acc) + summs;
}

// w (n) q8_0 . x (n) q8_0
static void vec_dot_q8_0(int64_t n, float *s, const void *w, const void *xq) {
    const struct lm_block_q8_0 *x = w;
    const struct lm_block_q8_0 *y = xq;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0, nb = n / 32;
    for (; i + 2 <= nb; i += 2) {
        __m256 d0 = _mm256_set1_ps(f16_to_f32(x[i].d) * f16_to_f32(y[i].d));
        __m256 d1 = _mm256_set1_ps(f16_to_f32(x[i + 1].d) * f16_to_f32(y[i + 1].d));
        __m256i p0 = dot_i8i8(_mm256_loadu_si256((const __m256i *)x[i].qs), _mm256_loadu_si256((const __m256i *)y[i].qs));
        __m256i p1 = dot_i8i8(_mm256_loadu_si256((const __m256i *)x[i + 1].qs),
                              _mm256_loadu_si256((const __m256i *)y[i + 1].qs));
        acc0 = _mm256_fmadd_ps(d0, _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(d1, _mm256_cvtepi32_ps(p1), acc1);
    }
    for (; i < nb; i++) {
        __m256 d0 = _mm256_set1_ps(f16_to_f32(x[i].d) * f16_to_f32(y[i].d));
        __m256i p0 = dot_i8i8(_mm256_loadu_si256((const __m256i *)x[i].qs), _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc0 = _mm256_fmadd_ps(d0, _mm256_cvtepi32_ps(p0), acc0);
    }
    *s = hsum_f32x8(_mm256_add_ps(acc0, acc1));
}

// K-quants: exact int32 per super-block, then the same float steps as the generic kernel,
// so these agree with generic bit for bit.

// w (n) q4_K . x (n) q8_K
static void vec_dot_q4_K(int64_t n, float *s, const void *w, const void *xq) {
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
static void vec_dot_q5_K(int64_t n, float *s, const void *w, const void *xq) {
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
static void vec_dot_q6_K(int64_t n, float *s, const void *w, const void *xq) {
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

// ============================================================================
// table
// ============================================================================

static struct lm_kernels k_avx2;
static pthread_once_t k_avx2_once = PTHREAD_ONCE_INIT;

static void avx2_init(void) {
    k_avx2 = *lm_kernels_generic();
    k_avx2.name = "avx2";
    k_avx2.dequant[LM_DTYPE_F16] = dequant_f16;
    k_avx2.dequant[LM_DTYPE_Q8_0] = dequant_q8_0;
    k_avx2.dequant[LM_DTYPE_Q5_0] = dequant_q5_0;
    k_avx2.dequant[LM_DTYPE_Q4_K] = dequant_q4_K;
    k_avx2.dequant[LM_DTYPE_Q6_K] = dequant_q6_K;
    k_avx2.quant[LM_DTYPE_Q8_0] = quant_q8_0;
    k_avx2.quant[LM_DTYPE_F16] = quant_f16;
    k_avx2.quant[LM_DTYPE_Q8_K] = quant_q8_K;
    k_avx2.vec_dot[LM_DTYPE_F32] = vec_dot_f32;
    k_avx2.vec_dot[LM_DTYPE_F16] = vec_dot_f16;
    k_avx2.il_gemm[LM_DTYPE_F16] = il_gemm_f16;
    k_avx2.vec_dot[LM_DTYPE_BF16] = vec_dot_bf16;
    k_avx2.vec_dot[LM_DTYPE_Q4_0] = vec_dot_q4_0;
    k_avx2.vec_dot[LM_DTYPE_Q4_1] = vec_dot_q4_1;
    k_avx2.vec_dot[LM_DTYPE_Q5_0] = vec_dot_q5_0;
    k_avx2.vec_dot[LM_DTYPE_Q5_1] = vec_dot_q5_1;
    k_avx2.vec_dot[LM_DTYPE_Q8_0] = vec_dot_q8_0;
    k_avx2.vec_dot[LM_DTYPE_Q4_K] = vec_dot_q4_K;
    k_avx2.vec_dot[LM_DTYPE_Q5_K] = vec_dot_q5_K;
    k_avx2.vec_dot[LM_DTYPE_Q6_K] = vec_dot_q6_K;
}

const struct lm_kernels *lm_kernels_avx2(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return NULL;
    // F16C straight from cpuid: GCC 12's __builtin_cpu_supports("f16c") reports 0 on CPUs that have it.
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_F16C)) return NULL;
    pthread_once(&k_avx2_once, avx2_init);
    return &k_avx2;
}

#else // not x86

const struct lm_kernels *lm_kernels_avx2(void) { return NULL; }

#endif
