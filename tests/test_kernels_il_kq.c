// Row-interleaved q4_K / q5_K / q6_K kernels: pack 16 rows, run the generic, AVX2 and AVX-512 il GEMMs
// for every token count, and require each y bit-identical to vec_dot of the generic and the
// AVX-512 tables on the original rows. Random valid blocks, saturated extremes, and (when
// present) the default model's k-quant tensors.
// LM_TEST_LABELS: unit
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "kernels/kernels.h"
#include "kernels/kernels_internal.h" // the il_gemm kernels of each ISA
#include "lm_test.h"

// ============================================================================
// random numbers and inputs
// ============================================================================

static uint64_t rng_u64(void) { return lm_test_rng_u64(); }
static float rng_uniform(void) { return (float)((rng_u64() >> 40) * (1.0 / 16777216.0)); } // [0, 1)
static float rng_sym(void) { return 2.0f * rng_uniform() - 1.0f; }                     // [-1, 1)

// rows (16, n) of dtype t, row_bytes apart: random bytes, then d / dmin from [-0.01, 0.01].
// extreme: every quant, scale and min at its maximum instead (largest int32 sums).
static void fill_rows(enum lm_dtype t, uint8_t *w, size_t row_bytes, int64_t n, int extreme) {
    for (int r = 0; r < LM_IL_ROWS; r++)
        for (int64_t b = 0; b < n / LM_QK_K; b++) {
            if (t == LM_DTYPE_Q4_K) {
                struct lm_block_q4_K *k = (struct lm_block_q4_K *)(w + r * row_bytes) + b;
                for (size_t i = 0; i < sizeof *k; i++) ((uint8_t *)k)[i] = extreme ? 0xff : (uint8_t)rng_u64();
                k->d = lm_f32_to_f16(0.01f * rng_sym());
                k->dmin = lm_f32_to_f16(0.01f * rng_sym());
            } else if (t == LM_DTYPE_Q5_K) {
                struct lm_block_q5_K *k = (struct lm_block_q5_K *)(w + r * row_bytes) + b;
                for (size_t i = 0; i < sizeof *k; i++) ((uint8_t *)k)[i] = extreme ? 0xff : (uint8_t)rng_u64();
                k->d = lm_f32_to_f16(0.01f * rng_sym());
                k->dmin = lm_f32_to_f16(0.01f * rng_sym());
            } else {
                struct lm_block_q6_K *k = (struct lm_block_q6_K *)(w + r * row_bytes) + b;
                for (size_t i = 0; i < sizeof *k; i++) ((uint8_t *)k)[i] = extreme ? 0xff : (uint8_t)rng_u64();
                if (extreme) memset(k->scales, 0x80, sizeof k->scales); // -128: largest |scale|
                k->d = lm_f32_to_f16(0.01f * rng_sym());
            }
        }
}

// nt activation rows -> q8_K rows xas bytes apart. extreme: +-big constants (q = +-127).
static void fill_act(uint8_t *xa, size_t xas, int nt, int64_t n, int extreme) {
    float *xf = malloc((size_t)n * sizeof(float));
    for (int t = 0; t < nt; t++) {
        for (int64_t i = 0; i < n; i++)
            xf[i] = extreme ? (t % 2 ? -3.0f : 3.0f) : (rng_u64() % 64 == 0 ? 20.0f : 1.0f) * rng_sym();
        lm_kernels_generic()->quant[LM_DTYPE_Q8_K](xf, xa + (size_t)t * xas, n);
    }
    free(xf);
}

// ============================================================================
// one group: il GEMM (every table, every nt) vs vec_dot (every table)
// ============================================================================

static const struct lm_kernels *tabs[2];
static int n_tabs;

// returns the number of mismatching floats (also counted as failures)
static int check_group(enum lm_dtype t, const uint8_t *w, size_t row_bytes, int64_t n, const char *what) {
    lm_il_gemm_fn gen = t == LM_DTYPE_Q4_K ? lm_il_gemm_q4_K_generic
                        : t == LM_DTYPE_Q5_K ? lm_il_gemm_q5_K_generic : lm_il_gemm_q6_K_generic;
    const size_t xas = (size_t)(n / LM_QK_K) * sizeof(struct lm_block_q8_K) + 64; // padded rows
    const size_t ys = LM_IL_ROWS + 3;
    uint8_t *g = aligned_alloc(64, lm_il_group_bytes(t, n) + 64);
    uint8_t *xa = malloc(xas * LM_IL_MAX_NT);
    float *y = malloc(ys * LM_IL_MAX_NT * sizeof(float));
    float ref[LM_IL_MAX_NT][LM_IL_ROWS][2];
    lm_il_pack_group(t, g, w, row_bytes, n);

    lm_il_gemm_fn fns[3] = {gen, NULL};
    const char *fn_names[3] = {"generic", "avx512", "avx2"};
#if defined(__x86_64__)
    if (lm_kernels_avx512())
        fns[1] = t == LM_DTYPE_Q4_K ? lm_il_gemm_q4_K_avx512
               : t == LM_DTYPE_Q5_K ? lm_il_gemm_q5_K_avx512 : lm_il_gemm_q6_K_avx512;
#endif
    if (lm_kernels_avx2()) fns[2] = lm_kernels_avx2()->il_gemm[t]; // the AVX2 table's (il_kq_avx2.c)
    CHECKF(!lm_kernels_avx2() || fns[2] != gen, "avx2 table: %s il_gemm is the generic one", lm_dtype_name(t));
    int bad = 0;
    for (int extreme = 0; extreme < 2; extreme++) {
        fill_act(xa, xas, LM_IL_MAX_NT, n, extreme);
        for (int tt = 0; tt < LM_IL_MAX_NT; tt++)
            for (int r = 0; r < LM_IL_ROWS; r++)
                for (int k = 0; k < n_tabs; k++)
                    tabs[k]->vec_dot[t](n, &ref[tt][r][k], w + r * row_bytes, xa + tt * xas);
        int differ = 0;
        for (int tt = 0; tt < LM_IL_MAX_NT; tt++)
            for (int r = 0; r < LM_IL_ROWS; r++)
                differ += memcmp(&ref[tt][r][0], &ref[tt][r][n_tabs - 1], sizeof(float)) != 0;
        CHECKF(differ == 0, "%s %s n=%lld: vec_dot tables disagree", lm_dtype_name(t), what, (long long)n);
        for (int f = 0; f < 3; f++) {
            if (!fns[f]) continue;
            for (int nt = 1; nt <= LM_IL_MAX_NT; nt++) {
                for (size_t i = 0; i < ys * LM_IL_MAX_NT; i++) y[i] = -12345.0f;
                fns[f](n, nt, y, ys, g, xa, xas);
                int mism = 0;
                for (int tt = 0; tt < nt; tt++) {
                    for (int r = 0; r < LM_IL_ROWS; r++)
                        for (int k = 0; k < n_tabs; k++)
                            if (memcmp(&y[tt * ys + r], &ref[tt][r][k], sizeof(float)) != 0) {
                                if (mism++ < 3)
                                    fprintf(stderr, "  %s %s %s n=%lld nt=%d t=%d r=%d: il %.9g vs %s vec_dot %.9g\n",
                                            lm_dtype_name(t), what, fn_names[f], (long long)n, nt, tt, r,
                                            y[tt * ys + r], tabs[k]->name, ref[tt][r][k]);
                            }
                    for (size_t r = LM_IL_ROWS; r < ys; r++) mism += y[tt * ys + r] != -12345.0f;
                }
                for (int tt = nt; tt < LM_IL_MAX_NT; tt++) mism += y[tt * ys] != -12345.0f;
                CHECKF(mism == 0, "%s %s %s n=%lld nt=%d extreme=%d: %d mismatches", lm_dtype_name(t), what,
                       fn_names[f], (long long)n, nt, extreme, mism);
                bad += mism;
            }
        }
    }
    free(g);
    free(xa);
    free(y);
    return bad;
}

static void test_random(enum lm_dtype t) {
    static const int64_t sizes[] = {256, 512, 2048, 2816};
    for (int si = 0; si < 4; si++) {
        const int64_t n = sizes[si];
        const size_t row_bytes = lm_dtype_row_size(t, n) + (si % 2 ? 0 : 16); // some padded
        uint8_t *w = malloc(row_bytes * LM_IL_ROWS);
        for (int extreme = 0; extreme < 2; extreme++) {
            fill_rows(t, w, row_bytes, n, extreme);
            check_group(t, w, row_bytes, n, extreme ? "max-quants" : "random");
        }
        free(w);
    }
}

// Groups of the default model's q4_K / q6_K matrices (n_in % 256 == 0), if the file is there.
static void test_model(void) {
    struct lm_gguf gg;
    if (lm_gguf_open(&gg, lm_test_model_path()) != LM_OK) {
        printf("model groups: skipped (%s)\n", lm_error_msg());
        return;
    }
    int n_groups = 0;
    for (uint64_t i = 0; i < gg.n_tensors; i++) {
        const struct lm_gguf_tensor *ti = &gg.tensors[i];
        if ((ti->type != LM_DTYPE_Q4_K && ti->type != LM_DTYPE_Q5_K && ti->type != LM_DTYPE_Q6_K) || ti->n_dims != 2 ||
            ti->ne[0] % LM_QK_K != 0 || ti->ne[1] < LM_IL_ROWS)
            continue;
        const size_t row_bytes = lm_dtype_row_size(ti->type, ti->ne[0]);
        char what[96];
        snprintf(what, sizeof what, "%.*s", (int)ti->name.len, ti->name.data);
        // first and last group of every such tensor
        const int64_t last = (ti->ne[1] / LM_IL_ROWS - 1) * LM_IL_ROWS;
        check_group(ti->type, (const uint8_t *)ti->data, row_bytes, ti->ne[0], what);
        check_group(ti->type, (const uint8_t *)ti->data + last * row_bytes, row_bytes, ti->ne[0], what);
        n_groups += 2;
    }
    printf("model groups checked: %d\n", n_groups);
    CHECK(n_groups > 0);
    lm_gguf_close(&gg);
}

int main(void) {
    tabs[n_tabs++] = lm_kernels_generic();
    if (lm_kernels_avx512()) tabs[n_tabs++] = lm_kernels_avx512();
    printf("tables: %s%s\n", tabs[0]->name, n_tabs > 1 ? " + avx512" : "");

    CHECK(lm_il_group_bytes(LM_DTYPE_Q4_K, 2048) == 8 * 2368);
    CHECK(lm_il_group_bytes(LM_DTYPE_Q6_K, 2048) == 8 * 3392);
    CHECK(lm_il_group_bytes(LM_DTYPE_Q5_K, 2048) == 8 * 2880);
    test_random(LM_DTYPE_Q4_K);
    test_random(LM_DTYPE_Q5_K);
    test_random(LM_DTYPE_Q6_K);
    test_model();
    return lm_test_finish();
}
