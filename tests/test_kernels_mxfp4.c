// mxfp4 kernels: the format's facts (E8M0 half scale for every byte, the E2M1 table), the
// generic dequant against gguf-py's decoder (tests/golden/mxfp4_dequant.txt), the generic dot
// against a float64 reference, every table's dot and multi-token dot bit-identical to the
// generic one (odd block counts, -128 activations, edge scales), and the il GEMMs (packing,
// every table that has one, every token count) bit-identical to vec_dot row by row.
// LM_TEST_LABELS: unit
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "lm_test.h"

static float rng_uniform(void) { return (float)((lm_test_rng_u64() >> 40) * (1.0 / 16777216.0)); }
static float rng_normal(void) {
    float s = 0;
    for (int i = 0; i < 4; i++) s += rng_uniform();
    return (s - 2.0f) * 1.7320508f;
}
// activations: normal with occasional outliers
static float rng_act(void) { return (lm_test_rng_u64() % 64 == 0) ? 20.0f * rng_normal() : rng_normal(); }

// random blocks: random codes, scale bytes around 2^-7 (as trained experts' are); mode 1 mixes
// in the extremes whose products stay finite, mode 2 has only the smallest scales (0..3: the
// subnormal halves, so subnormal products), mode 3 only large ones
static void random_weights(void *w, int64_t n, int mode) {
    struct lm_block_mxfp4 *b = w;
    for (int64_t i = 0; i < n / 32; i++) {
        for (int j = 0; j < 16; j++) b[i].qs[j] = (uint8_t)lm_test_rng_u64();
        const uint64_t r = lm_test_rng_u64();
        b[i].e = (uint8_t)(118 + r % 8);
        if ((mode == 1 && r % 7 == 0) || mode == 2) b[i].e = (uint8_t)((r >> 8) % 4);
        if ((mode == 1 && r % 11 == 0) || mode == 3) b[i].e = (uint8_t)(150 + (r >> 8) % 20);
    }
}

static const struct lm_kernels *tabs[3];
static int n_tabs;

// lm_e8m0_half: 2^(e - 128) for every byte, 2^127 for 255 (ggml's decoding, no NaN)
static void test_facts(void) {
    for (int e = 0; e < 256; e++) {
        const float want = e == 255 ? ldexpf(1.0f, 127) : ldexpf(1.0f, e - 128);
        CHECKF(lm_e8m0_half((uint8_t)e) == want, "e8m0_half(%d) = %g, want %g", e, lm_e8m0_half((uint8_t)e), want);
    }
    CHECK(lm_dtype_traits(LM_DTYPE_MXFP4)->supported && lm_dtype_traits(LM_DTYPE_MXFP4)->block_size == 32 &&
          lm_dtype_traits(LM_DTYPE_MXFP4)->type_size == 17);
    CHECK(lm_vec_dot_type(LM_DTYPE_MXFP4) == LM_DTYPE_Q8_0);
    char names[512];
    CHECK(strstr(lm_dtype_supported_names(names, sizeof names), "mxfp4") != NULL);
    struct lm_block_mxfp4 b = {.e = 128}; // scale 1: y = kv / 1... halved: kv * 2^0 = kv
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    lm_kernels_generic()->dequant[LM_DTYPE_MXFP4](&b, y, 32);
    CHECK(y[0] == 0.0f && y[7] == 12.0f && y[9] == -1.0f && y[15] == -12.0f && y[16] == -12.0f && y[31] == 0.0f);
}

static int hexval(char c) { return c <= '9' ? c - '0' : (c | 32) - 'a' + 10; }

// gguf-py's values for the golden blocks, bit for bit (infinities of e = 255 included)
static void test_golden(void) {
    FILE *f = fopen(lm_test_path("tests/golden/mxfp4_dequant.txt"), "r");
    CHECKF(f != NULL, "cannot open tests/golden/mxfp4_dequant.txt");
    if (!f) return;
    char line[512];
    int n = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        uint8_t blk[17];
        for (int i = 0; i < 17; i++) blk[i] = (uint8_t)(hexval(line[2 * i]) << 4 | hexval(line[2 * i + 1]));
        float y[32];
        lm_kernels_generic()->dequant[LM_DTYPE_MXFP4](blk, y, 32);
        const char *p = line + 34;
        for (int k = 0; k < 32; k++) {
            const uint32_t want = (uint32_t)strtoul(p, (char **)&p, 16);
            uint32_t got;
            memcpy(&got, &y[k], 4);
            bad += got != want;
        }
        n++;
    }
    fclose(f);
    CHECKF(n == 40 && bad == 0, "golden: %d blocks, %d values differ from gguf-py", n, bad);
}

// generic dot vs float64 of the dequantized rows; every table's vec_dot, vec_dot_n (nt 1..8)
// and dequant == generic's bits
static void test_dot(void) {
    const struct lm_kernels *g = lm_kernels_generic();
    static const int64_t blocks[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 65, 127};
    const int NT = LM_VEC_DOT_MAX_NT;
    int saw_m128 = 0;
    for (size_t si = 0; si < sizeof blocks / sizeof blocks[0]; si++) {
        const int64_t n = blocks[si] * 32;
        const size_t qb = lm_dtype_row_size(LM_DTYPE_Q8_0, n);
        float *xf = malloc((size_t)n * 4), *wd = malloc((size_t)n * 4), *xd = malloc((size_t)n * 4);
        float *wd2 = malloc((size_t)n * 4);
        uint8_t *w = malloc(lm_dtype_row_size(LM_DTYPE_MXFP4, n)), *xq = malloc(qb * NT);
        for (int trial = 0; trial < 4; trial++) {
            random_weights(w, n, trial);
            for (int t = 0; t < NT; t++) {
                for (int64_t i = 0; i < n; i++) xf[i] = rng_act();
                g->quant[LM_DTYPE_Q8_0](xf, xq + t * qb, n);
                struct lm_block_q8_0 *yb = (struct lm_block_q8_0 *)(xq + t * qb);
                for (int64_t i = 0; i < n; i++) // the kernels take q8_0's -128 too
                    if (lm_test_rng_u64() % 32 == 0) yb[i / 32].qs[i % 32] = -128, saw_m128++;
            }
            g->dequant[LM_DTYPE_MXFP4](w, wd, n);
            float want[LM_VEC_DOT_MAX_NT];
            for (int t = 0; t < NT; t++) {
                g->dequant[LM_DTYPE_Q8_0](xq + t * qb, xd, n);
                double ref = 0, scale = 1e-30;
                for (int64_t i = 0; i < n; i++) ref += (double)wd[i] * xd[i], scale += fabs((double)wd[i] * xd[i]);
                g->vec_dot[LM_DTYPE_MXFP4](n, &want[t], w, xq + t * qb);
                CHECKF(fabs(want[t] - ref) / scale <= 1e-6, "n=%lld generic %.9g ref %.9g", (long long)n, want[t], ref);
            }
            for (int k = 0; k < n_tabs; k++) {
                const struct lm_kernels *K = tabs[k];
                float sk;
                K->vec_dot[LM_DTYPE_MXFP4](n, &sk, w, xq);
                CHECKF(memcmp(&sk, &want[0], 4) == 0, "%s n=%lld vec_dot %.9g != generic %.9g", K->name,
                       (long long)n, sk, want[0]);
                K->dequant[LM_DTYPE_MXFP4](w, wd2, n);
                CHECKF(memcmp(wd, wd2, (size_t)n * 4) == 0, "%s dequant n=%lld", K->name, (long long)n);
                CHECKF(K->vec_dot_n[LM_DTYPE_MXFP4] != NULL, "%s: no vec_dot_n[mxfp4]", K->name);
                if (!K->vec_dot_n[LM_DTYPE_MXFP4]) continue;
                for (int nt = 1; nt <= NT; nt++) {
                    float got[2 * LM_VEC_DOT_MAX_NT];
                    K->vec_dot_n[LM_DTYPE_MXFP4](n, nt, got, 2, w, xq, qb);
                    int bad = 0;
                    for (int t = 0; t < nt; t++) bad += memcmp(&got[2 * t], &want[t], 4) != 0;
                    CHECKF(bad == 0, "%s vec_dot_n n=%lld nt=%d: %d differ", K->name, (long long)n, nt, bad);
                }
            }
        }
        free(xf), free(wd), free(xd), free(wd2), free(w), free(xq);
    }
    CHECKF(saw_m128 > 0, "no -128 activation was tested");
}

// il: 16 k rows packed, every table's il_gemm for nt = 1..16 == generic vec_dot per (row, token)
static void test_il(void) {
    const enum lm_dtype t = LM_DTYPE_MXFP4;
    const struct lm_kernels *g = lm_kernels_generic();
    const int64_t n_ins[] = {32, 96, 160, 1056};
    CHECK(!lm_il_supported(t, 24, 64) && !lm_il_supported(t, 16, 48) && lm_il_supported(t, 32, 64));
    CHECK(lm_il_group_bytes(t, 64) == 2 * (16 + 256));
    for (size_t ni = 0; ni < sizeof n_ins / sizeof n_ins[0]; ni++) {
        const int64_t n_in = n_ins[ni], n_out = 32, nt_max = LM_IL_MAX_NT;
        const size_t rb = lm_dtype_row_size(t, n_in), gb = lm_il_group_bytes(t, n_in);
        uint8_t *w = malloc(rb * (size_t)n_out), *il = malloc(gb * (size_t)(n_out / 16));
        random_weights(w, n_in * n_out, (int)(ni % 3));
        for (int64_t gi = 0; gi < n_out / 16; gi++) lm_il_pack_group(t, il + gi * gb, w + gi * 16 * rb, rb, n_in);
        const size_t qb = lm_dtype_row_size(LM_DTYPE_Q8_0, n_in), xab = lm_il_act_row_bytes(t, n_in);
        uint8_t *xq = malloc(qb * nt_max), *xa = malloc(xab * nt_max);
        float *xf = malloc((size_t)n_in * 4), *want = malloc(sizeof(float) * (size_t)(n_out * nt_max));
        float *got = malloc(sizeof(float) * (size_t)(n_out * nt_max));
        for (int tk = 0; tk < nt_max; tk++) {
            for (int64_t i = 0; i < n_in; i++) xf[i] = rng_act();
            g->quant[LM_DTYPE_Q8_0](xf, xq + tk * qb, n_in);
            lm_il_act_from(t, xq + tk * qb, n_in, xa + tk * xab);
            for (int64_t r = 0; r < n_out; r++) g->vec_dot[t](n_in, &want[tk * n_out + r], w + r * rb, xq + tk * qb);
        }
        const struct lm_kernels *all[4] = {g};
        for (int k = 0; k < n_tabs; k++) all[k + 1] = tabs[k];
        for (int k = 0; k <= n_tabs; k++) {
            CHECKF(all[k]->il_gemm[t] != NULL, "%s: il_gemm[mxfp4] missing", all[k]->name);
            if (!all[k]->il_gemm[t]) continue;
            for (int nt = 1; nt <= nt_max; nt++) {
                for (int64_t gi = 0; gi < n_out / 16; gi++)
                    all[k]->il_gemm[t](n_in, nt, got + gi * 16, (size_t)n_out, il + gi * gb, xa, xab);
                int bad = 0;
                for (int tk = 0; tk < nt; tk++)
                    for (int64_t r = 0; r < n_out; r++)
                        bad += memcmp(&got[tk * n_out + r], &want[tk * n_out + r], 4) != 0;
                CHECKF(bad == 0, "%s il_gemm mxfp4 n_in=%lld nt=%d: %d outputs differ from vec_dot",
                       all[k]->name, (long long)n_in, nt, bad);
            }
        }
        free(w), free(il), free(xq), free(xa), free(xf), free(want), free(got);
    }
}

int main(void) {
    const struct lm_kernels *c[] = {lm_kernels_avx2(), lm_kernels_avx512()};
    for (int i = 0; i < 2; i++)
        if (c[i]) tabs[n_tabs++] = c[i];
    printf("tables: generic");
    for (int i = 0; i < n_tabs; i++) printf(" %s", tabs[i]->name);
    printf("\n");
    test_facts();
    test_golden();
    test_dot();
    test_il();
    return lm_test_finish();
}
