// AVX2 GEMMs on the f16 and q8_0 / q5_0 / q4_0 row-interleaved layouts (il_layout.h). f16 (the
// file's own rows): register tiles of 1-2 rows x up to 4 tokens in kernels.h's f16 order; the
// 32-blocks: 16 rows as two ymm of 8 i32 lanes, maddubs + madd, il_generic.c's bits.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include "kernels/il_layout.h"
#include "kernels/kernels_internal.h"

#if defined(__x86_64__) || defined(__i386__)

#include <string.h>

#include "kernels/simd_avx2.h"

// Software prefetch of each record / super-block IL2_PF(nt) bytes ahead (il_avx512.c's
// distances, measured there): the hardware prefetcher alone falls behind here too. One token
// over 64 MB of groups (n_in 2048), 1 thread, this Zen 5 with LUMEN_ISA=avx2, shared and
// noisy: q4_K 12 -> 25-36 GB/s, q6_K 11 -> 24-32, q5_K 12 -> 21-28, q4_0 30 -> 21-43.
#define IL2_PF(nt) ((nt) >= 6 ? 1024 : 8192)
AI void il2_prefetch(const void *p, size_t bytes, size_t ahead) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + ahead + o, _MM_HINT_T0);
}

// R rows (n halves each, n apart) x T tokens (f32 rows, xs floats apart) -> y[t * ys + r]
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

void lm_il_gemm_f16_avx2(int64_t n_in, int nt, float *y, size_t ys, const void *wg, const void *xa,
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

// ============================================================================
// q8_0 / q5_0 / q4_0 (records of one 32-element block): per token and block the exact int32
// of the 16 rows (rows 0-7 and 8-15 in two ymm), then fma(d_w * d_x, (float)isum, acc) in
// block order, as il_generic.c. No VNNI here: vpmaddubsw (unsigned weight x signed
// activation byte pairs, int16 with saturation) + vpmaddwd, kept below 2^15 per int16:
//   q4_0: raw 0..15, |pair| <= 2 * 15 * 128 = 3840: the 8 vectors of a block add up in int16
//   q5_0: raw 0..31, |pair| <= 7936: two sums of 4 vectors
//   q8_0: q + 128 (0..255) would saturate (2 * 255 * 127), so the signed q = byte ^ 0x80
//         with the sign trick: |q| (<= 128) x (x * sign(q)), |pair| <= 2 * 128 * 127 = 32512
//         (x a q8_0 quant, -127..127), each pair widened on its own; sum q x directly, so
//         the stored -128 sum x is not needed (the int32 is the same exact value)
// ============================================================================

// one group (16 rows) x nt tokens; KIND 0 q8_0, 1 q5_0, 2 q4_0 records
AI void il_q8_avx2(const int KIND, int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                   const void *xa, size_t xas) {
    const int64_t nb = n_in / 32;
    const size_t rec = KIND == 2 ? LM_IL_Q4_0_REC : KIND ? LM_IL_Q5_0_REC : LM_IL_Q8_0_REC;
    const __m256i m4 = _mm256_set1_epi8(0x0f), b16 = _mm256_set1_epi8(16), one = _mm256_set1_epi16(1);
    const __m256i s80 = _mm256_set1_epi8((char)0x80);
    __m256 acc[LM_IL_MAX_NT][2];
    for (int t = 0; t < nt; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *r = (const uint8_t *)wg + (size_t)b * rec;
        il2_prefetch(r, rec, IL2_PF(nt));
        const __m256 dw[2] = {_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)r)),
                              _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(r + 16)))};
        __m256i w[8][2], wa[8][2]; // columns 4g..4g+3, rows 0-7 / 8-15 (q8_0: signed, wa = |w|)
        if (KIND == 0) {
            for (int g = 0; g < 8; g++)
                for (int h = 0; h < 2; h++) {
                    w[g][h] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(r + 32 + 64 * g + 32 * h)), s80);
                    wa[g][h] = _mm256_abs_epi8(w[g][h]);
                }
        } else {
            for (int j = 0; j < 4; j++)
                for (int h = 0; h < 2; h++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(r + 32 + 64 * j + 32 * h));
                    w[2 * j][h] = _mm256_and_si256(v, m4);
                    w[2 * j + 1][h] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                }
            if (KIND == 1)
                for (int g = 0; g < 8; g++) {
                    uint64_t hb;
                    memcpy(&hb, r + 32 + 256 + 8 * g, 8);
                    for (int h = 0; h < 2; h++)
                        w[g][h] = _mm256_or_si256(w[g][h], _mm256_and_si256(bits_to_bytes((uint32_t)(hb >> (32 * h))), b16));
                }
        }
        for (int t = 0; t < nt; t++) {
            const int8_t *xt = (const int8_t *)((const char *)xa + (size_t)t * xas);
            const int8_t *q = xt + b * 32;
            const float dx = ((const float *)(xt + nb * 32))[b];
            const int32_t c16 = ((const int32_t *)(xt + nb * 36))[b];
            const __m256i corr = _mm256_set1_epi32(KIND == 2 ? c16 / 2 : c16); // q4_0: -8 sum x
            __m256i xb[8];
            for (int g = 0; g < 8; g++) {
                int32_t x4;
                memcpy(&x4, q + 4 * g, 4);
                xb[g] = _mm256_set1_epi32(x4);
            }
            for (int h = 0; h < 2; h++) {
                __m256i s;
                if (KIND == 0) {
                    s = _mm256_setzero_si256();
                    for (int g = 0; g < 8; g++) {
                        const __m256i m = _mm256_maddubs_epi16(wa[g][h], _mm256_sign_epi8(xb[g], w[g][h]));
                        s = _mm256_add_epi32(s, _mm256_madd_epi16(m, one));
                    }
                } else if (KIND == 2) {
                    __m256i s16 = _mm256_maddubs_epi16(w[0][h], xb[0]);
                    for (int g = 1; g < 8; g++) s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w[g][h], xb[g]));
                    s = _mm256_add_epi32(corr, _mm256_madd_epi16(s16, one));
                } else {
                    __m256i s16a = _mm256_maddubs_epi16(w[0][h], xb[0]), s16b = _mm256_maddubs_epi16(w[4][h], xb[4]);
                    for (int g = 1; g < 4; g++) {
                        s16a = _mm256_add_epi16(s16a, _mm256_maddubs_epi16(w[g][h], xb[g]));
                        s16b = _mm256_add_epi16(s16b, _mm256_maddubs_epi16(w[g + 4][h], xb[g + 4]));
                    }
                    s = _mm256_add_epi32(corr, _mm256_add_epi32(_mm256_madd_epi16(s16a, one), _mm256_madd_epi16(s16b, one)));
                }
                acc[t][h] = _mm256_fmadd_ps(_mm256_mul_ps(dw[h], _mm256_set1_ps(dx)), _mm256_cvtepi32_ps(s), acc[t][h]);
            }
        }
    }
    for (int t = 0; t < nt; t++) {
        _mm256_storeu_ps(y + (size_t)t * ys, acc[t][0]);
        _mm256_storeu_ps(y + (size_t)t * ys + 8, acc[t][1]);
    }
}

void lm_il_gemm_q8_0_avx2(int64_t n_in, int nt, float *y, size_t ys, const void *wg, const void *xa,
                          size_t xas) {
    il_q8_avx2(0, n_in, nt, y, ys, wg, xa, xas);
}

void lm_il_gemm_q5_0_avx2(int64_t n_in, int nt, float *y, size_t ys, const void *wg, const void *xa,
                          size_t xas) {
    il_q8_avx2(1, n_in, nt, y, ys, wg, xa, xas);
}

void lm_il_gemm_q4_0_avx2(int64_t n_in, int nt, float *y, size_t ys, const void *wg, const void *xa,
                          size_t xas) {
    il_q8_avx2(2, n_in, nt, y, ys, wg, xa, xas);
}

#endif
