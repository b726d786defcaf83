// AVX2 GEMM on the f16 row-interleaved layout (the file's own rows, il_layout.h): register
// tiles of 1-2 rows x up to 4 tokens in kernels.h's f16 order (16 lane sums as two ymm, then
// lm_tree16's tree), each weight vector converted once per tile. The only il kernel of the
// AVX2 table; the int8 il layouts run on il_generic.c there.
#pragma GCC optimize("fp-contract=off") // kernels_internal.h

#include "kernels/kernels_internal.h"

#if defined(__x86_64__) || defined(__i386__)

#include <string.h>

#include "kernels/simd_avx2.h"

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

#endif
