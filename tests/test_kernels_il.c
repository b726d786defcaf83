// Multi-token dots (vec_dot_n) bit-identical to vec_dot. Row-interleaved (il) q8_0 / q5_0 / q4_0 weights: packing + the generic, AVX2 and AVX-512 kernels against
// the contract computed here from the original ggml rows (exact int32 per block, then
// acc = fmaf(d_w * d_x, isum, acc) block by block: bit-exact), and against the flat-layout
// vec_dot within float tolerance; every tile width 1..LM_IL_MAX_NT; layout queries.
// LM_TEST_LABELS: unit
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "lm_test.h"

static uint64_t rng_u64(void) { return lm_test_rng_u64(); }
static float rng_sym(void) { return (float)((rng_u64() >> 40) * (2.0 / 16777216.0) - 1.0); }

#define N_OUT 32 // two groups

// bytes of one ggml block
static size_t blk_bytes(enum lm_dtype t) { return t == LM_DTYPE_Q8_0 ? 34 : t == LM_DTYPE_Q5_0 ? 22 : 18; }

// random but valid weight rows: any bit pattern of quants is a valid block
static void random_rows(enum lm_dtype t, uint8_t *w, size_t row_bytes, int64_t n_in) {
    for (int r = 0; r < N_OUT; r++)
        for (int64_t b = 0; b < n_in / 32; b++) {
            uint8_t *blk = w + (size_t)r * row_bytes + (size_t)b * blk_bytes(t);
            const lm_f16 d = lm_f32_to_f16(0.02f * rng_sym());
            memcpy(blk, &d, 2);
            for (int i = 2; i < (int)blk_bytes(t); i++) blk[i] = (uint8_t)rng_u64();
            if (t == LM_DTYPE_Q8_0 && rng_u64() % 8 == 0) memset(blk + 2, 0x80, 32); // all -128
        }
}

// element k of block b of row r, as the signed quant
static int quant_at(enum lm_dtype t, const uint8_t *row, int64_t b, int k) {
    if (t == LM_DTYPE_Q8_0) {
        const struct lm_block_q8_0 *x = (const struct lm_block_q8_0 *)row + b;
        return x->qs[k];
    }
    if (t == LM_DTYPE_Q4_0) {
        const struct lm_block_q4_0 *x = (const struct lm_block_q4_0 *)row + b;
        return (k < 16 ? x->qs[k] & 0x0f : x->qs[k - 16] >> 4) - 8;
    }
    const struct lm_block_q5_0 *x = (const struct lm_block_q5_0 *)row + b;
    uint32_t qh;
    memcpy(&qh, x->qh, 4);
    const int lo = k < 16 ? x->qs[k] & 0x0f : x->qs[k - 16] >> 4;
    return (lo | (int)((qh >> k) & 1) << 4) - 16;
}

static float contract_dot(enum lm_dtype t, const uint8_t *row, const struct lm_block_q8_0 *y,
                          int64_t n_in, double *mag) {
    float acc = 0.0f;
    *mag = 0.0;
    for (int64_t b = 0; b < n_in / 32; b++) {
        int32_t isum = 0, iabs = 0;
        for (int k = 0; k < 32; k++) {
            isum += quant_at(t, row, b, k) * y[b].qs[k];
            iabs += abs(quant_at(t, row, b, k) * y[b].qs[k]);
        }
        const lm_f16 dw16 = ((const lm_f16 *)(row + (size_t)b * blk_bytes(t)))[0];
        const float dw = lm_f16_to_f32(dw16), dx = lm_f16_to_f32(y[b].d);
        acc = fmaf(dw * dx, (float)isum, acc);
        *mag += fabs((double)dw * dx) * iabs; // sum of |terms|: the scale of rounding errors
    }
    return acc;
}

static void test_dtype(enum lm_dtype t, int64_t n_in) {
    const struct lm_kernels *tabs[] = {lm_kernels_generic(), lm_kernels_avx512(), lm_kernels_best(),
                                       lm_kernels_avx2()};
    const size_t row_bytes = lm_dtype_row_size(t, n_in), qrow = lm_dtype_row_size(LM_DTYPE_Q8_0, n_in);
    const size_t gb = lm_il_group_bytes(t, n_in), arow = lm_il_act_row_bytes(t, n_in);
    uint8_t *w = malloc(N_OUT * row_bytes), *il = malloc(2 * gb);
    uint8_t *xq = malloc(LM_IL_MAX_NT * qrow), *xa = malloc(LM_IL_MAX_NT * arow);
    float *x = malloc(sizeof(float) * (size_t)n_in), *y = malloc(sizeof(float) * LM_IL_MAX_NT * N_OUT);
    random_rows(t, w, row_bytes, n_in);
    for (int g = 0; g < 2; g++) lm_il_pack_group(t, il + g * gb, w + (size_t)g * 16 * row_bytes, row_bytes, n_in);
    for (int i = 0; i < LM_IL_MAX_NT; i++) {
        for (int64_t j = 0; j < n_in; j++) x[j] = rng_sym() * (rng_u64() % 50 == 0 ? 30.0f : 1.0f);
        if (i == 3) memset(x, 0, sizeof(float) * (size_t)n_in); // an all-zero row
        lm_kernels_generic()->quant[LM_DTYPE_Q8_0](x, xq + i * qrow, n_in);
        lm_il_act_from(t, xq + i * qrow, n_in, xa + i * arow);
    }
    int bad_exact = 0, bad_tol = 0;
    for (size_t ti = 0; ti < sizeof tabs / sizeof tabs[0]; ti++) {
        const struct lm_kernels *k = tabs[ti];
        if (!k) continue;
        CHECKF(k->il_gemm[t] != NULL, "%s: no il_gemm for dtype %d", k->name, (int)t);
        if (!k->il_gemm[t]) continue;
        for (int nt = 1; nt <= LM_IL_MAX_NT; nt++) {
            memset(y, 0xff, sizeof(float) * LM_IL_MAX_NT * N_OUT);
            for (int g = 0; g < 2; g++) k->il_gemm[t](n_in, nt, y + g * 16, N_OUT, il + g * gb, xa, arow);
            for (int i = 0; i < nt; i++)
                for (int r = 0; r < N_OUT; r++) {
                    double mag;
                    const float want = contract_dot(t, w + (size_t)r * row_bytes,
                                                    (const struct lm_block_q8_0 *)(xq + i * qrow), n_in, &mag);
                    const float got = y[i * N_OUT + r];
                    if (memcmp(&got, &want, 4) != 0 && bad_exact++ < 5)
                        fprintf(stderr, "%s dtype %d n_in %lld nt %d token %d row %d: %.9g != %.9g\n", k->name,
                                (int)t, (long long)n_in, nt, i, r, got, want);
                    float flat;
                    k->vec_dot[t](n_in, &flat, w + (size_t)r * row_bytes, xq + i * qrow);
                    if (fabs((double)flat - got) > 1e-5 * mag + 1e-30 && bad_tol++ < 5)
                        fprintf(stderr, "%s vs vec_dot: %.9g vs %.9g (mag %g)\n", k->name, got, flat, mag);
                }
            // untouched output columns of other tokens
            for (int i = nt; i < LM_IL_MAX_NT; i++) {
                uint32_t u;
                memcpy(&u, &y[i * N_OUT], 4);
                CHECK(u == 0xffffffffu);
            }
        }
    }
    CHECKF(bad_exact == 0, "dtype %d n_in %lld: %d results differ from the contract", (int)t, (long long)n_in, bad_exact);
    CHECKF(bad_tol == 0, "dtype %d n_in %lld: %d results off vec_dot", (int)t, (long long)n_in, bad_tol);
    free(w); free(il); free(xq); free(xa); free(x); free(y);
}

// vec_dot_n (multi-token, file layout) must equal vec_dot row by row, bit for bit: the
// batch-vs-token invariant of the runtime rests on it. f16 and q8_0 / q5_0 (any bytes
// with a sane scale are valid blocks).
static void test_dot_n(enum lm_dtype t, int64_t n) {
    const struct lm_kernels *tabs[] = {lm_kernels_generic(), lm_kernels_avx2(), lm_kernels_avx512()};
    const enum lm_dtype vt = lm_vec_dot_type(t);
    const size_t wrow = lm_dtype_row_size(t, n), xrow = lm_dtype_row_size(vt, n);
    uint8_t *w = malloc(wrow), *xq = malloc(LM_VEC_DOT_MAX_NT * xrow);
    float *x = malloc(sizeof(float) * (size_t)n);
    if (t == LM_DTYPE_F16)
        for (int64_t j = 0; j < n; j++) ((lm_f16 *)w)[j] = lm_f32_to_f16(rng_sym());
    else
        for (int64_t b = 0; b < n / 32; b++) {
            const size_t bs = t == LM_DTYPE_Q8_0 ? 34 : 22;
            const lm_f16 d = lm_f32_to_f16(0.02f * rng_sym());
            memcpy(w + b * bs, &d, 2);
            for (size_t i = 2; i < bs; i++) w[b * bs + i] = (uint8_t)rng_u64();
        }
    for (int i = 0; i < LM_VEC_DOT_MAX_NT; i++) {
        for (int64_t j = 0; j < n; j++) x[j] = rng_sym() * 3.0f;
        lm_kernels_generic()->quant[vt](x, xq + i * xrow, n);
    }
    for (size_t ti = 0; ti < sizeof tabs / sizeof tabs[0]; ti++) {
        const struct lm_kernels *k = tabs[ti];
        if (!k || !k->vec_dot_n[t]) continue;
        for (int nt = 1; nt <= LM_VEC_DOT_MAX_NT; nt++) {
            float s[LM_VEC_DOT_MAX_NT * 3];
            k->vec_dot_n[t](n, nt, s, 3, w, xq, xrow);
            int bad = 0;
            for (int i = 0; i < nt; i++) {
                float want;
                k->vec_dot[t](n, &want, w, xq + i * xrow);
                bad += memcmp(&want, &s[3 * i], 4) != 0;
            }
            CHECKF(bad == 0, "%s vec_dot_n dtype %d n %lld nt %d: %d of %d differ from vec_dot", k->name,
                   (int)t, (long long)n, nt, bad, nt);
        }
    }
    free(w); free(xq); free(x);
}

// f16 (kernels.h): il_gemm on the file rows, any nt, equals vec_dot[F16] of the same table
// bit for bit, and every table computes the same bits (generic = AVX2 = AVX-512), also
// against a plain restatement of the contract here.
static float f16_contract(const lm_f16 *w, const lm_f16 *x, int64_t n) {
    float acc[16] = {0};
    for (int64_t k = 0; k < n; k++) acc[k % 16] = fmaf(lm_f16_to_f32(w[k]), lm_f16_to_f32(x[k]), acc[k % 16]);
    float s8[8], s4[4];
    for (int i = 0; i < 8; i++) s8[i] = acc[i] + acc[i + 8];
    for (int i = 0; i < 4; i++) s4[i] = s8[i] + s8[i + 4];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

static void test_f16_il(int64_t n) {
    const struct lm_kernels *tabs[] = {lm_kernels_generic(), lm_kernels_avx2(), lm_kernels_avx512()};
    const size_t row = (size_t)n * sizeof(lm_f16), arow = lm_il_act_row_bytes(LM_DTYPE_F16, n) + 12;
    lm_f16 *w = malloc(N_OUT * row), *xq = malloc(LM_IL_MAX_NT * row);
    uint8_t *xa = malloc(LM_IL_MAX_NT * arow);
    float *y = malloc(sizeof(float) * LM_IL_MAX_NT * N_OUT);
    for (int64_t i = 0; i < N_OUT * n; i++) w[i] = lm_f32_to_f16(rng_sym() * (rng_u64() % 64 == 0 ? 40.0f : 0.5f));
    for (int t = 0; t < LM_IL_MAX_NT; t++) {
        for (int64_t i = 0; i < n; i++) xq[t * n + i] = lm_f32_to_f16(rng_sym() * 4.0f);
        lm_il_act_from(LM_DTYPE_F16, xq + t * n, n, xa + t * arow); // rows with a gap: arow > 4n
    }
    int bad = 0, n_tab = 0;
    for (size_t ti = 0; ti < sizeof tabs / sizeof tabs[0]; ti++) {
        const struct lm_kernels *k = tabs[ti];
        if (!k) continue;
        n_tab++;
        CHECKF(k->il_gemm[LM_DTYPE_F16] != NULL, "%s: no il_gemm for f16", k->name);
        if (!k->il_gemm[LM_DTYPE_F16]) continue;
        for (int nt = 1; nt <= LM_IL_MAX_NT; nt++) {
            memset(y, 0xff, sizeof(float) * LM_IL_MAX_NT * N_OUT);
            for (int g = 0; g < N_OUT / 16; g++)
                k->il_gemm[LM_DTYPE_F16](n, nt, y + g * 16, N_OUT, w + (size_t)g * 16 * n, xa, arow);
            for (int t = 0; t < LM_IL_MAX_NT; t++)
                for (int r = 0; r < N_OUT; r++) {
                    const float got = y[t * N_OUT + r];
                    if (t >= nt) {
                        uint32_t u;
                        memcpy(&u, &got, 4);
                        bad += u != 0xffffffffu;
                        continue;
                    }
                    float dot;
                    k->vec_dot[LM_DTYPE_F16](n, &dot, w + (size_t)r * n, xq + t * n);
                    const float want = f16_contract(w + (size_t)r * n, xq + t * n, n);
                    if ((memcmp(&got, &want, 4) != 0 || memcmp(&dot, &want, 4) != 0) && bad++ < 5)
                        fprintf(stderr, "%s f16 n %lld nt %d token %d row %d: il %.9g vec_dot %.9g contract %.9g\n",
                                k->name, (long long)n, nt, t, r, got, dot, want);
                }
        }
    }
    // il_gemv (decode, any row count): the same bits
    for (size_t ti = 0; ti < sizeof tabs / sizeof tabs[0]; ti++) {
        const struct lm_kernels *k = tabs[ti];
        if (!k || !k->il_gemv[LM_DTYPE_F16]) continue;
        const int64_t row_counts[] = {N_OUT, 19, 4, 3, 1};
        for (size_t rc = 0; rc < sizeof row_counts / sizeof row_counts[0]; rc++)
            for (int nt = 1; nt <= LM_IL_GEMV_MAX_NT; nt++) {
                const int64_t nr = row_counts[rc];
                memset(y, 0xff, sizeof(float) * LM_IL_MAX_NT * N_OUT);
                k->il_gemv[LM_DTYPE_F16](n, nr, nt, y, N_OUT, w, xa, arow);
                for (int t = 0; t < LM_IL_MAX_NT; t++)
                    for (int r = 0; r < N_OUT; r++) {
                        const float got = y[t * N_OUT + r];
                        if (t >= nt || r >= nr) {
                            uint32_t u;
                            memcpy(&u, &got, 4);
                            bad += u != 0xffffffffu;
                            continue;
                        }
                        const float want = f16_contract(w + (size_t)r * n, xq + t * n, n);
                        if (memcmp(&got, &want, 4) != 0 && bad++ < 5)
                            fprintf(stderr, "%s f16 il_gemv n %lld rows %lld nt %d token %d row %d: %.9g vs %.9g\n",
                                    k->name, (long long)n, (long long)nr, nt, t, r, got, want);
                    }
            }
    }
    CHECKF(bad == 0, "f16 il n %lld: %d results off the contract (%d tables)", (long long)n, bad, n_tab);
    free(w); free(xq); free(xa); free(y);
}

int main(void) {
    const int64_t fn[] = {16, 32, 33, 100, 896, 4864 + 5};
    for (size_t i = 0; i < sizeof fn / sizeof fn[0]; i++) test_f16_il(fn[i]);
    const int64_t dn[] = {32, 64, 96, 640, 896, 4864};
    for (size_t i = 0; i < sizeof dn / sizeof dn[0]; i++) {
        test_dot_n(LM_DTYPE_F16, dn[i]);
        test_dot_n(LM_DTYPE_F16, dn[i] + 7); // f16 rows need not be whole blocks
        test_dot_n(LM_DTYPE_Q8_0, dn[i]);
        test_dot_n(LM_DTYPE_Q5_0, dn[i]);
    }
    CHECK(lm_il_supported(LM_DTYPE_Q8_0, 64, 640));
    CHECK(lm_il_supported(LM_DTYPE_Q5_0, 4096, 32));
    CHECK(!lm_il_supported(LM_DTYPE_Q5_0, 24, 640));  // rows not a multiple of 16
    CHECK(!lm_il_supported(LM_DTYPE_Q5_0, 32, 48));   // not whole blocks
    CHECK(!lm_il_supported(LM_DTYPE_BF16, 32, 640));  // no layout
    CHECK(lm_il_group_bytes(LM_DTYPE_Q4_0, 640) == 20 * 288); // same bytes as the ggml rows
    CHECK(lm_il_supported(LM_DTYPE_F16, 32, 650));   // f16: any row length
    CHECK(!lm_il_supported(LM_DTYPE_F16, 40, 640));
    CHECK(lm_il_in_place(LM_DTYPE_F16, 1300, 650));   // the file layout is the il layout
    CHECK(!lm_il_in_place(LM_DTYPE_F16, 1344, 650));  // padded rows are not
    CHECK(!lm_il_in_place(LM_DTYPE_Q8_0, 680, 640));
    CHECK(lm_il_group_bytes(LM_DTYPE_F16, 650) == 16 * 1300);
    CHECK(!lm_il_supported(LM_DTYPE_Q8_0, 0, 640));
    CHECK(lm_il_group_bytes(LM_DTYPE_Q8_0, 640) == 20 * 544); // same bytes as the ggml rows
    CHECK(lm_il_group_bytes(LM_DTYPE_Q5_0, 640) == 20 * 352);
    const int64_t sizes[] = {32, 64, 96, 640, 2048};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        test_dtype(LM_DTYPE_Q8_0, sizes[i]);
        test_dtype(LM_DTYPE_Q5_0, sizes[i]);
        test_dtype(LM_DTYPE_Q4_0, sizes[i]);
    }
    return lm_test_finish();
}
