// AVX-512 f16 GEMM on the f16 il layout (the file's own rows, kernels_il.c): register
// tiles of R rows x T tokens, each output one zmm accumulator whose 16 lanes take the
// elements k = l mod 16 (fma in k order), summed at the end by _mm512_reduce_add_ps's
// tree 16 rows at a time (lm_reduce_add16). Per 16 elements a tile converts R weight
// vectors from f16 once and loads T activation vectors (f32) for R x T fmas, where a
// single-row dot spends a convert and a load per fma. The numerics are those of
// vec_dot[F16] (kernels.h), so decode (one token) and prefill tiles agree bit for bit.
#pragma GCC optimize("fp-contract=off")

#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_internal.h"

#if defined(__AVX512F__) && defined(__AVX512BW__)
#include "kernels/simd_avx512.h"

// software prefetch distance within each weight row (bytes)
#define PF_DIST 512

// R rows (n halves each, gap elements apart) x T tokens (xs floats apart) -> acc[r][t], the
// 16 lane sums of output (r, t); PF: software prefetch of the rows PF_DIST bytes ahead
AI void f16_acc(const int R, const int T, const int PF, int64_t n, const lm_f16 *w, size_t gap,
                const float *x, size_t xs, __m512 acc[4][6]) {
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= n; k += 16) {
        __m512 wv[4];
        for (int r = 0; r < R; r++)
            wv[r] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + (size_t)r * gap + k)));
        if (PF && (k & 31) == 0) // a line per row every 2 blocks (past a row's end: the next row)
            for (int r = 0; r < R; r++) _mm_prefetch((const char *)(w + (size_t)r * gap + k) + PF_DIST, _MM_HINT_T0);
        for (int t = 0; t < T; t++) {
            __m512 xv = _mm512_loadu_ps(x + (size_t)t * xs + k);
            if (R > 1) __asm__("" : "+v"(xv)); // one load for R fmas: GCC would fold it into each
            for (int r = 0; r < R; r++) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
        }
    }
    if (k < n) { // masked last block: zero lanes leave their sums as they are
        const __mmask16 m = (__mmask16)((1u << (n - k)) - 1);
        for (int r = 0; r < R; r++) {
            const __m512 wv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w + (size_t)r * gap + k));
            for (int t = 0; t < T; t++)
                acc[r][t] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + (size_t)t * xs + k), acc[r][t]);
        }
    }
}

// rows w[0..R) of a group (n apart) x T tokens: the lane sums of output (r, t) ->
// lanes + 16 * lm_reduce16_slot(r0 + r) + 256 * t, reduced 16 rows at a time later
AI void f16_tile(const int R, const int T, int64_t n, const lm_f16 *w, const float *x, size_t xs,
                 float *lanes, int r0) {
    __m512 acc[4][6];
    f16_acc(R, T, T > 2, n, w, (size_t)n, x, xs, acc);
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++)
            _mm512_storeu_ps(lanes + 256 * t + 16 * lm_reduce16_slot(r0 + r), acc[r][t]);
}

// all 16 rows of the group for T tokens: tiles of 4 rows; for 1-2 tokens (decode) one row
// at a time. Rows are 2 n bytes apart, so an R-row tile reads R streams at once, and on
// this VM the read rate falls with their number (Qwen2.5 lm_head, one token, 1 thread:
// 1 row ~24 GB/s, 2 rows ~13, 8 rows ~10); with several tokens the tile is compute-bound.
AI void f16_rows(const int T, int64_t n, const lm_f16 *w, const float *x, size_t xs, float *lanes) {
    if (T <= 2) {
        for (int r0 = 0; r0 < LM_IL_ROWS; r0++) f16_tile(1, T, n, w + (size_t)r0 * n, x, xs, lanes, r0);
    } else {
        for (int r0 = 0; r0 < LM_IL_ROWS; r0 += 4) f16_tile(4, T, n, w + (size_t)r0 * n, x, xs, lanes, r0);
    }
}

void lm_il_gemm_f16_avx512(int64_t n_in, int nt, float *y, size_t ys, const void *wg,
                           const void *xa, size_t xas) {
    float lanes[6 * 256] __attribute__((aligned(64)));
    const lm_f16 *w = wg;
    const size_t xs = xas / sizeof(float);
    for (int t0 = 0; t0 < nt; t0 += 6) {
        const int T = nt - t0 < 6 ? nt - t0 : 6;
        const float *x = (const float *)((const char *)xa + (size_t)t0 * xas);
        switch (T) {
        case 1: f16_rows(1, n_in, w, x, xs, lanes); break;
        case 2: f16_rows(2, n_in, w, x, xs, lanes); break;
        case 3: f16_rows(3, n_in, w, x, xs, lanes); break;
        case 4: f16_rows(4, n_in, w, x, xs, lanes); break;
        case 5: f16_rows(5, n_in, w, x, xs, lanes); break;
        default: f16_rows(6, n_in, w, x, xs, lanes); break;
        }
        for (int t = 0; t < T; t++) _mm512_storeu_ps(y + (size_t)(t0 + t) * ys, lm_reduce_add16(lanes + 256 * t));
    }
}

// Decode: R rows gap elements apart x T tokens, each output reduced on its own
AI void f16_far(const int R, const int T, int64_t n, const lm_f16 *w, size_t gap, const float *x,
                size_t xs, float *y, size_t ys, size_t ygap) {
    __m512 acc[4][6];
    f16_acc(R, T, 0, n, w, gap, x, xs, acc);
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) y[(size_t)t * ys + (size_t)r * ygap] = _mm512_reduce_add_ps(acc[r][t]);
}

// il_gemv[F16]: the rows are cut into 4 contiguous quarters walked in lockstep, so memory
// sees 4 long sequential streams. Tiles of neighbouring rows (4 streams ~2 KB long, then a
// jump) read at ~10 GB/s on this VM where one row at a time reads ~23 and 4 far streams
// ~25 (the hardware prefetcher follows long streams only).
void lm_il_gemv_f16_avx512(int64_t n_in, int64_t n_rows, int nt, float *y, size_t ys,
                           const void *w0, const void *xa, size_t xas) {
    const lm_f16 *w = w0;
    const float *x = xa;
    const size_t xs = xas / sizeof(float);
    const int64_t q = n_rows / 4;
    for (int64_t r = 0; r < q; r++) {
        if (nt == 1) f16_far(4, 1, n_in, w + (size_t)r * n_in, (size_t)q * n_in, x, xs, y + r, ys, q);
        else f16_far(4, 2, n_in, w + (size_t)r * n_in, (size_t)q * n_in, x, xs, y + r, ys, q);
    }
    for (int64_t r = 4 * q; r < n_rows; r++) {
        if (nt == 1) f16_far(1, 1, n_in, w + (size_t)r * n_in, 0, x, xs, y + r, ys, 0);
        else f16_far(1, 2, n_in, w + (size_t)r * n_in, 0, x, xs, y + r, ys, 0);
    }
}
#endif
