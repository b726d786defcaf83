// q2_K / q3_K kernels beyond vec_dot (test_kernels_dot.c checks those): the multi-token dots
// (vec_dot_n) bit-identical to vec_dot on every table, and the row-interleaved layouts:
// pack 16 rows, run the generic, AVX2 and AVX-512 il GEMMs for every token count, and require each
// y bit-identical to vec_dot of every table on the original rows. Random valid blocks and
// saturated extremes (all bits set: largest quants and scales; all clear: q3_K's most
// negative scales and quants).
// LM_TEST_LABELS: unit
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_internal.h" // the il_gemm kernels of each ISA
#include "lm_test.h"

static uint64_t rng_u64(void) { return lm_test_rng_u64(); }
static float rng_uniform(void) { return (float)((rng_u64() >> 40) * (1.0 / 16777216.0)); } // [0, 1)
static float rng_sym(void) { return 2.0f * rng_uniform() - 1.0f; }                     // [-1, 1)

static const struct lm_kernels *tabs[3];
static int n_tabs;

// n_rows rows (n elements) of dtype t, row_bytes apart. fill: 0 random bytes, 1 all 0xff,
// 2 all 0x00; then d (and dmin) from [-0.01, 0.01]
static void fill_rows(enum lm_dtype t, uint8_t *w, size_t row_bytes, int n_rows, int64_t n, int fill) {
    for (int r = 0; r < n_rows; r++)
        for (int64_t b = 0; b < n / LM_QK_K; b++) {
            if (t == LM_DTYPE_Q2_K) {
                struct lm_block_q2_K *k = (struct lm_block_q2_K *)(w + r * row_bytes) + b;
                for (size_t i = 0; i < sizeof *k; i++) ((uint8_t *)k)[i] = fill == 1 ? 0xff : fill == 2 ? 0 : (uint8_t)rng_u64();
                k->d = lm_f32_to_f16(0.01f * rng_sym());
                k->dmin = lm_f32_to_f16(0.01f * rng_sym());
            } else {
                struct lm_block_q3_K *k = (struct lm_block_q3_K *)(w + r * row_bytes) + b;
                for (size_t i = 0; i < sizeof *k; i++) ((uint8_t *)k)[i] = fill == 1 ? 0xff : fill == 2 ? 0 : (uint8_t)rng_u64();
                k->d = lm_f32_to_f16(0.01f * rng_sym());
            }
        }
}

// nt q8_K activation rows xas bytes apart. extreme: +-big constants (q = +-127).
static void fill_act(uint8_t *xa, size_t xas, int nt, int64_t n, int extreme) {
    float *xf = malloc((size_t)n * sizeof(float));
    for (int t = 0; t < nt; t++) {
        for (int64_t i = 0; i < n; i++)
            xf[i] = extreme ? (t % 2 ? -3.0f : 3.0f) : (rng_u64() % 64 == 0 ? 20.0f : 1.0f) * rng_sym();
        lm_kernels_generic()->quant[LM_DTYPE_Q8_K](xf, xa + (size_t)t * xas, n);
    }
    free(xf);
}

// vec_dot_n of every table that has one == its vec_dot, row by row
static void test_dot_n(enum lm_dtype t, int64_t n) {
    const size_t wrow = lm_dtype_row_size(t, n), xas = lm_dtype_row_size(LM_DTYPE_Q8_K, n) + 32;
    uint8_t *w = malloc(wrow), *xa = malloc(LM_VEC_DOT_MAX_NT * xas);
    for (int fill = 0; fill < 3; fill++) {
        fill_rows(t, w, wrow, 1, n, fill);
        fill_act(xa, xas, LM_VEC_DOT_MAX_NT, n, fill == 1);
        for (int k = 0; k < n_tabs; k++) {
            if (!tabs[k]->vec_dot_n[t]) continue;
            for (int nt = 1; nt <= LM_VEC_DOT_MAX_NT; nt++) {
                float s[LM_VEC_DOT_MAX_NT * 3];
                tabs[k]->vec_dot_n[t](n, nt, s, 3, w, xa, xas);
                int bad = 0;
                for (int i = 0; i < nt; i++) {
                    float want;
                    lm_kernels_generic()->vec_dot[t](n, &want, w, xa + i * xas);
                    bad += memcmp(&want, &s[3 * i], 4) != 0;
                }
                CHECKF(bad == 0, "%s vec_dot_n %s n %lld nt %d fill %d: %d of %d differ from vec_dot", tabs[k]->name,
                       lm_dtype_name(t), (long long)n, nt, fill, bad, nt);
            }
        }
    }
    free(w);
    free(xa);
}

// one group: il GEMM (generic, AVX-512 and AVX2, every nt) vs vec_dot of every table
static void check_group(enum lm_dtype t, const uint8_t *w, size_t row_bytes, int64_t n, int fill) {
    const size_t xas = lm_dtype_row_size(LM_DTYPE_Q8_K, n) + 64; // padded rows
    const size_t ys = LM_IL_ROWS + 3;
    uint8_t *g = aligned_alloc(64, (lm_il_group_bytes(t, n) + 127) / 64 * 64); // a multiple of 64
    uint8_t *xa = malloc(xas * LM_IL_MAX_NT);
    float *y = malloc(ys * LM_IL_MAX_NT * sizeof(float));
    float ref[LM_IL_MAX_NT][LM_IL_ROWS];
    lm_il_pack_group(t, g, w, row_bytes, n);
    lm_il_gemm_fn fns[3] = {t == LM_DTYPE_Q2_K ? lm_il_gemm_q2_K_generic : lm_il_gemm_q3_K_generic, NULL};
    const char *fn_names[3] = {"generic", "avx512", "avx2"};
#if defined(__x86_64__)
    if (lm_kernels_avx512()) fns[1] = t == LM_DTYPE_Q2_K ? lm_il_gemm_q2_K_avx512 : lm_il_gemm_q3_K_avx512;
#endif
    if (lm_kernels_avx2()) fns[2] = lm_kernels_avx2()->il_gemm[t]; // the AVX2 table's (il_q23_K_avx2.c)
    for (int k = 0; k < n_tabs; k++)
        CHECKF(tabs[k]->il_gemm[t] != NULL, "%s: no il_gemm for %s", tabs[k]->name, lm_dtype_name(t));
    for (int extreme = 0; extreme < 2; extreme++) {
        fill_act(xa, xas, LM_IL_MAX_NT, n, extreme);
        int differ = 0;
        for (int tt = 0; tt < LM_IL_MAX_NT; tt++)
            for (int r = 0; r < LM_IL_ROWS; r++) {
                lm_kernels_generic()->vec_dot[t](n, &ref[tt][r], w + r * row_bytes, xa + tt * xas);
                for (int k = 1; k < n_tabs; k++) {
                    float v;
                    tabs[k]->vec_dot[t](n, &v, w + r * row_bytes, xa + tt * xas);
                    differ += memcmp(&v, &ref[tt][r], 4) != 0;
                }
            }
        CHECKF(differ == 0, "%s n=%lld fill %d: vec_dot tables disagree (%d)", lm_dtype_name(t), (long long)n, fill, differ);
        for (int f = 0; f < 3; f++) {
            if (!fns[f]) continue;
            for (int nt = 1; nt <= LM_IL_MAX_NT; nt++) {
                for (size_t i = 0; i < ys * LM_IL_MAX_NT; i++) y[i] = -12345.0f;
                fns[f](n, nt, y, ys, g, xa, xas);
                int mism = 0;
                for (int tt = 0; tt < nt; tt++) {
                    for (int r = 0; r < LM_IL_ROWS; r++)
                        if (memcmp(&y[tt * ys + r], &ref[tt][r], sizeof(float)) != 0 && mism++ < 3)
                            fprintf(stderr, "  %s %s n=%lld nt=%d t=%d r=%d: il %.9g vs vec_dot %.9g\n", lm_dtype_name(t),
                                    fn_names[f], (long long)n, nt, tt, r, y[tt * ys + r], ref[tt][r]);
                    for (size_t r = LM_IL_ROWS; r < ys; r++) mism += y[tt * ys + r] != -12345.0f;
                }
                for (int tt = nt; tt < LM_IL_MAX_NT; tt++) mism += y[tt * ys] != -12345.0f;
                CHECKF(mism == 0, "%s %s n=%lld nt=%d fill=%d extreme=%d: %d mismatches", lm_dtype_name(t), fn_names[f],
                       (long long)n, nt, fill, extreme, mism);
            }
        }
    }
    free(g);
    free(xa);
    free(y);
}

static void test_il(enum lm_dtype t) {
    static const int64_t sizes[] = {256, 512, 2816};
    for (int si = 0; si < 3; si++) {
        const int64_t n = sizes[si];
        const size_t row_bytes = lm_dtype_row_size(t, n) + (si % 2 ? 0 : 16); // some padded
        uint8_t *w = malloc(row_bytes * LM_IL_ROWS);
        for (int fill = 0; fill < 3; fill++) {
            fill_rows(t, w, row_bytes, LM_IL_ROWS, n, fill);
            check_group(t, w, row_bytes, n, fill);
        }
        free(w);
    }
}

int main(void) {
    tabs[n_tabs++] = lm_kernels_generic();
    if (lm_kernels_avx2()) tabs[n_tabs++] = lm_kernels_avx2();
    if (lm_kernels_avx512()) tabs[n_tabs++] = lm_kernels_avx512();
    printf("tables:");
    for (int k = 0; k < n_tabs; k++) printf(" %s", tabs[k]->name);
    printf("\n");

    CHECK(lm_il_supported(LM_DTYPE_Q2_K, 32, 512) && lm_il_supported(LM_DTYPE_Q3_K, 16, 256));
    CHECK(!lm_il_supported(LM_DTYPE_Q2_K, 24, 512));  // rows not a multiple of 16
    CHECK(!lm_il_supported(LM_DTYPE_Q3_K, 32, 384));  // not whole super-blocks
    CHECK(lm_il_group_bytes(LM_DTYPE_Q2_K, 2048) == 8 * 1344); // = the file's 16 x 84 per 256
    CHECK(lm_il_group_bytes(LM_DTYPE_Q3_K, 2048) == 8 * 1824);
    static const int64_t dn[] = {256, 768, 2816};
    for (int i = 0; i < 3; i++) {
        test_dot_n(LM_DTYPE_Q2_K, dn[i]);
        test_dot_n(LM_DTYPE_Q3_K, dn[i]);
    }
    test_il(LM_DTYPE_Q2_K);
    test_il(LM_DTYPE_Q3_K);
    return lm_test_finish();
}
