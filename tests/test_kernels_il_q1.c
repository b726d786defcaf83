// q4_1 / q5_1 as first-class formats: the il layout (packing + the generic, AVX2 and AVX-512 il
// kernels) against the contract computed here from the ggml rows (kernels.h: exact int32 per
// block, then acc = fmaf(d_w d_x, isum, acc), acc = fmaf(m_w, s_x, acc): bit-exact), and
// against the flat-layout vec_dot within float tolerance, every tile width 1..LM_IL_MAX_NT;
// the multi-token dots (vec_dot_n) bit-identical to vec_dot of the same table; layout queries.
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

static size_t blk_bytes(enum lm_dtype t) { return t == LM_DTYPE_Q4_1 ? 20 : 24; }

// random but valid rows: any quant bits are a valid block; d, m sane
static void random_rows(enum lm_dtype t, uint8_t *w, size_t row_bytes, int64_t n_rows, int64_t n_in) {
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t b = 0; b < n_in / 32; b++) {
            uint8_t *blk = w + (size_t)r * row_bytes + (size_t)b * blk_bytes(t);
            const lm_f16 d = lm_f32_to_f16(0.02f * rng_sym()), m = lm_f32_to_f16(0.1f * rng_sym());
            memcpy(blk, &d, 2);
            memcpy(blk + 2, &m, 2);
            for (int i = 4; i < (int)blk_bytes(t); i++) blk[i] = (uint8_t)rng_u64();
        }
}

// raw quant k (0..15 or 0..31) of block b of a row
static int quant_at(enum lm_dtype t, const uint8_t *row, int64_t b, int k) {
    if (t == LM_DTYPE_Q4_1) {
        const struct lm_block_q4_1 *x = (const struct lm_block_q4_1 *)row + b;
        return k < 16 ? x->qs[k] & 0x0f : x->qs[k - 16] >> 4;
    }
    const struct lm_block_q5_1 *x = (const struct lm_block_q5_1 *)row + b;
    uint32_t qh;
    memcpy(&qh, x->qh, 4);
    const int lo = k < 16 ? x->qs[k] & 0x0f : x->qs[k - 16] >> 4;
    return lo | (int)((qh >> k) & 1) << 4;
}

static float contract_dot(enum lm_dtype t, const uint8_t *row, const struct lm_block_q8_1 *y,
                          int64_t n_in, double *mag) {
    float acc = 0.0f;
    *mag = 0.0;
    for (int64_t b = 0; b < n_in / 32; b++) {
        int32_t isum = 0, iabs = 0;
        for (int k = 0; k < 32; k++) {
            isum += quant_at(t, row, b, k) * y[b].qs[k];
            iabs += abs(quant_at(t, row, b, k) * y[b].qs[k]);
        }
        lm_f16 dh, mh;
        memcpy(&dh, row + (size_t)b * blk_bytes(t), 2);
        memcpy(&mh, row + (size_t)b * blk_bytes(t) + 2, 2);
        const float dw = lm_f16_to_f32(dh), mw = lm_f16_to_f32(mh);
        const float dx = lm_f16_to_f32(y[b].d), sx = lm_f16_to_f32(y[b].s);
        acc = fmaf(dw * dx, (float)isum, acc);
        acc = fmaf(mw, sx, acc);
        *mag += fabs((double)dw * dx) * iabs + fabs((double)mw * sx);
    }
    return acc;
}

static void test_il(enum lm_dtype t, int64_t n_in) {
    const struct lm_kernels *tabs[] = {lm_kernels_generic(), lm_kernels_avx2(), lm_kernels_avx512()};
    const size_t row_bytes = lm_dtype_row_size(t, n_in), qrow = lm_dtype_row_size(LM_DTYPE_Q8_1, n_in);
    const size_t gb = lm_il_group_bytes(t, n_in), arow = lm_il_act_row_bytes(t, n_in) + 8; // a gap
    CHECK(gb == 16 * row_bytes); // same bytes as the ggml rows
    uint8_t *w = malloc(N_OUT * row_bytes), *il = malloc(2 * gb);
    uint8_t *xq = malloc(LM_IL_MAX_NT * qrow), *xa = malloc(LM_IL_MAX_NT * arow);
    float *x = malloc(sizeof(float) * (size_t)n_in), *y = malloc(sizeof(float) * LM_IL_MAX_NT * N_OUT);
    random_rows(t, w, row_bytes, N_OUT, n_in);
    for (int g = 0; g < 2; g++) lm_il_pack_group(t, il + g * gb, w + (size_t)g * 16 * row_bytes, row_bytes, n_in);
    for (int i = 0; i < LM_IL_MAX_NT; i++) {
        for (int64_t j = 0; j < n_in; j++) x[j] = rng_sym() * (rng_u64() % 50 == 0 ? 30.0f : 1.0f);
        if (i == 3) memset(x, 0, sizeof(float) * (size_t)n_in); // an all-zero row
        lm_kernels_generic()->quant[LM_DTYPE_Q8_1](x, xq + i * qrow, n_in);
        lm_il_act_from(t, xq + i * qrow, n_in, xa + i * arow);
    }
    int bad_exact = 0, bad_tol = 0, n_tab = 0;
    for (size_t ti = 0; ti < sizeof tabs / sizeof tabs[0]; ti++) {
        const struct lm_kernels *k = tabs[ti];
        if (!k) continue;
        CHECKF(k->il_gemm[t] != NULL, "%s: no il_gemm for %s", k->name, lm_dtype_name(t));
        if (!k->il_gemm[t]) continue;
        n_tab++;
        for (int nt = 1; nt <= LM_IL_MAX_NT; nt++) {
            memset(y, 0xff, sizeof(float) * LM_IL_MAX_NT * N_OUT);
            for (int g = 0; g < 2; g++) k->il_gemm[t](n_in, nt, y + g * 16, N_OUT, il + g * gb, xa, arow);
            for (int i = 0; i < LM_IL_MAX_NT; i++)
                for (int r = 0; r < N_OUT; r++) {
                    const float got = y[i * N_OUT + r];
                    if (i >= nt) { // untouched output columns of other tokens
                        uint32_t u;
                        memcpy(&u, &got, 4);
                        bad_exact += u != 0xffffffffu;
                        continue;
                    }
                    double mag;
                    const float want = contract_dot(t, w + (size_t)r * row_bytes,
                                                    (const struct lm_block_q8_1 *)(xq + i * qrow), n_in, &mag);
                    if (memcmp(&got, &want, 4) != 0 && bad_exact++ < 5)
                        fprintf(stderr, "%s %s n_in %lld nt %d token %d row %d: %.9g != %.9g\n", k->name,
                                lm_dtype_name(t), (long long)n_in, nt, i, r, got, want);
                    float flat;
                    lm_kernels_generic()->vec_dot[t](n_in, &flat, w + (size_t)r * row_bytes, xq + i * qrow);
                    if (fabs((double)flat - got) > 1e-5 * mag + 1e-30 && bad_tol++ < 5)
                        fprintf(stderr, "%s vs vec_dot: %.9g vs %.9g (mag %g)\n", k->name, got, flat, mag);
                }
        }
    }
    CHECKF(n_tab >= 1, "%s: no table with an il kernel", lm_dtype_name(t));
    CHECKF(bad_exact == 0, "%s n_in %lld: %d results differ from the contract", lm_dtype_name(t), (long long)n_in,
           bad_exact);
    CHECKF(bad_tol == 0, "%s n_in %lld: %d results off vec_dot", lm_dtype_name(t), (long long)n_in, bad_tol);
    free(w); free(il); free(xq); free(xa); free(x); free(y);
}

// vec_dot_n (multi-token, file layout) equals vec_dot row by row, bit for bit, on every table
// that has one (the runtime's batch invariance rests on it); every table's vec_dot equals
// the generic one bit for bit (dot_q1_x86.h); odd block counts exercise the tails
static void test_dot_n(enum lm_dtype t, int64_t n) {
    const struct lm_kernels *tabs[] = {lm_kernels_generic(), lm_kernels_avx2(), lm_kernels_avx512()};
    const size_t wrow = lm_dtype_row_size(t, n), xrow = lm_dtype_row_size(LM_DTYPE_Q8_1, n);
    uint8_t *w = malloc(wrow), *xq = malloc(LM_VEC_DOT_MAX_NT * xrow);
    float *x = malloc(sizeof(float) * (size_t)n);
    random_rows(t, w, wrow, 1, n);
    for (int i = 0; i < LM_VEC_DOT_MAX_NT; i++) {
        for (int64_t j = 0; j < n; j++) x[j] = rng_sym() * 3.0f;
        lm_kernels_generic()->quant[LM_DTYPE_Q8_1](x, xq + i * xrow, n);
    }
    float want[LM_VEC_DOT_MAX_NT];
    for (int i = 0; i < LM_VEC_DOT_MAX_NT; i++) lm_kernels_generic()->vec_dot[t](n, &want[i], w, xq + i * xrow);
    for (size_t ti = 0; ti < sizeof tabs / sizeof tabs[0]; ti++) {
        const struct lm_kernels *k = tabs[ti];
        if (!k) continue;
        int bad = 0;
        for (int i = 0; i < LM_VEC_DOT_MAX_NT; i++) {
            float got;
            k->vec_dot[t](n, &got, w, xq + i * xrow);
            bad += memcmp(&got, &want[i], 4) != 0;
        }
        CHECKF(bad == 0, "%s vec_dot %s n %lld: %d of %d differ from generic", k->name, lm_dtype_name(t),
               (long long)n, bad, LM_VEC_DOT_MAX_NT);
        if (!k->vec_dot_n[t]) continue;
        for (int nt = 1; nt <= LM_VEC_DOT_MAX_NT; nt++) {
            float s[LM_VEC_DOT_MAX_NT * 3];
            k->vec_dot_n[t](n, nt, s, 3, w, xq, xrow);
            bad = 0;
            for (int i = 0; i < nt; i++) bad += memcmp(&want[i], &s[3 * i], 4) != 0;
            CHECKF(bad == 0, "%s vec_dot_n %s n %lld nt %d: %d of %d differ from vec_dot", k->name,
                   lm_dtype_name(t), (long long)n, nt, bad, nt);
        }
    }
    if (lm_kernels_avx512()) CHECK(lm_kernels_avx512()->vec_dot_n[t] != NULL);
    free(w); free(xq); free(x);
}

int main(void) {
    const int64_t dn[] = {1, 2, 7, 8, 9, 15, 17, 18, 48, 63};
    for (size_t i = 0; i < sizeof dn / sizeof dn[0]; i++) {
        test_dot_n(LM_DTYPE_Q4_1, 32 * dn[i]);
        test_dot_n(LM_DTYPE_Q5_1, 32 * dn[i]);
    }
    CHECK(lm_il_supported(LM_DTYPE_Q4_1, 64, 576));
    CHECK(lm_il_supported(LM_DTYPE_Q5_1, 4096, 32));
    CHECK(!lm_il_supported(LM_DTYPE_Q4_1, 24, 640)); // rows not a multiple of 16
    CHECK(!lm_il_supported(LM_DTYPE_Q5_1, 32, 48));  // not whole blocks
    CHECK(!lm_il_in_place(LM_DTYPE_Q4_1, 360, 576));
    CHECK(lm_il_act_row_bytes(LM_DTYPE_Q4_1, 576) == 18 * 40);
    const int64_t sizes[] = {32, 64, 96, 576, 608, 1536 + 32};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        test_il(LM_DTYPE_Q4_1, sizes[i]);
        test_il(LM_DTYPE_Q5_1, sizes[i]);
    }
    return lm_test_finish();
}
