// iq4_nl / iq4_xs kernels: the generic dots against a float64 reference, every table's dot
// bit-identical to the generic one (odd block counts, q8_K's -128 activations), and the il
// GEMMs (packing, every table, every token count) bit-identical to vec_dot row by row.
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

// random valid blocks: random index and scale bytes, small f16 d of either sign
static void random_weights(enum lm_dtype t, void *w, int64_t n) {
    const struct lm_dtype_traits *tr = lm_dtype_traits(t);
    uint8_t *o = w;
    const int64_t nb = n / tr->block_size;
    for (size_t i = 0; i < (size_t)nb * tr->type_size; i++) o[i] = (uint8_t)lm_test_rng_u64();
    for (int64_t b = 0; b < nb; b++) { // d is the first field of both blocks
        const lm_f16 d = lm_f32_to_f16((rng_uniform() - 0.5f) * (t == LM_DTYPE_IQ4_NL ? 0.02f : 0.002f));
        memcpy(o + (size_t)b * tr->type_size, &d, 2);
    }
}

static void dequant_act(enum lm_dtype at, const void *xq, float *y, int64_t n) {
    if (at == LM_DTYPE_Q8_K) {
        const struct lm_block_q8_K *b = xq;
        for (int64_t i = 0; i < n; i++) y[i] = b[i / 256].d * b[i / 256].qs[i % 256];
    } else {
        lm_kernels_generic()->dequant[at](xq, y, n);
    }
}

static const struct lm_kernels *tabs[3];
static int n_tabs;

static void test_dot(enum lm_dtype t) {
    const struct lm_kernels *g = lm_kernels_generic();
    const enum lm_dtype at = lm_vec_dot_type(t);
    CHECK(at == (t == LM_DTYPE_IQ4_NL ? LM_DTYPE_Q8_0 : LM_DTYPE_Q8_K));
    const int64_t bs = lm_dtype_traits(t)->block_size;
    static const int64_t blocks[] = {1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 33, 65, 127};
    int saw_m128 = 0;
    for (size_t si = 0; si < sizeof blocks / sizeof blocks[0]; si++) {
        const int64_t n = blocks[si] * bs;
        float *xf = malloc((size_t)n * 4), *wd = malloc((size_t)n * 4), *xd = malloc((size_t)n * 4);
        void *w = malloc(lm_dtype_row_size(t, n)), *xq = malloc(lm_dtype_row_size(at, n));
        for (int trial = 0; trial < 3; trial++) {
            random_weights(t, w, n);
            for (int64_t i = 0; i < n; i++) xf[i] = rng_act();
            g->quant[at](xf, xq, n);
            if (at == LM_DTYPE_Q8_K) // ggml's q8_K stays in -127..127; the kernels take -128 too
                for (int64_t i = 0; i < n; i++) {
                    int8_t *q = &((struct lm_block_q8_K *)xq)[i / 256].qs[i % 256];
                    if (lm_test_rng_u64() % 16 == 0) *q = -128, saw_m128++;
                }
            g->dequant[t](w, wd, n);
            dequant_act(at, xq, xd, n);
            double ref = 0, scale = 1e-30;
            for (int64_t i = 0; i < n; i++) ref += (double)wd[i] * xd[i], scale += fabs((double)wd[i] * xd[i]);
            float sg;
            g->vec_dot[t](n, &sg, w, xq);
            CHECKF(fabs(sg - ref) / scale <= 1e-6, "%s n=%lld generic %.9g ref %.9g", lm_dtype_name(t),
                   (long long)n, sg, ref);
            for (int k = 0; k < n_tabs; k++) {
                float sk;
                tabs[k]->vec_dot[t](n, &sk, w, xq);
                CHECKF(memcmp(&sk, &sg, 4) == 0, "%s %s n=%lld vec_dot %.9g != generic %.9g", tabs[k]->name,
                       lm_dtype_name(t), (long long)n, sk, sg);
                float *wd2 = malloc((size_t)n * 4);
                tabs[k]->dequant[t](w, wd2, n);
                CHECKF(memcmp(wd, wd2, (size_t)n * 4) == 0, "%s %s dequant n=%lld", tabs[k]->name,
                       lm_dtype_name(t), (long long)n);
                free(wd2);
            }
        }
        free(xf), free(wd), free(xd), free(w), free(xq);
    }
    if (at == LM_DTYPE_Q8_K) CHECKF(saw_m128 > 0, "no -128 activation was tested");
}

// dequant facts: the table, the iq4_xs scale packing
static void test_dequant_facts(void) {
    struct lm_block_iq4_nl b = {.d = lm_f32_to_f16(0.5f)};
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32];
    lm_kernels_generic()->dequant[LM_DTYPE_IQ4_NL](&b, y, 32);
    CHECK(y[0] == -63.5f && y[15] == 56.5f && y[16] == 56.5f && y[31] == -63.5f && y[8] == 0.5f);
    struct lm_block_iq4_xs x;
    memset(&x, 0, sizeof x);
    x.d = lm_f32_to_f16(1.0f);
    x.scales_l[1] = 0xf0;       // sub-block 3: low bits 15
    x.scales_h = (uint16_t)(3u << 6); // sub-block 3: high bits 3 -> 63 - 32 = 31
    CHECK(lm_iq4_xs_scale(&x, 3) == 31 && lm_iq4_xs_scale(&x, 0) == -32);
    float z[256];
    lm_kernels_generic()->dequant[LM_DTYPE_IQ4_XS](&x, z, 256);
    CHECK(z[0] == -32.0f * -127.0f && z[96] == 31.0f * -127.0f);
}

// il: 16 k rows packed, every table's il_gemm for nt = 1..16 == generic vec_dot per (row, token)
static void test_il(enum lm_dtype t) {
    const struct lm_kernels *g = lm_kernels_generic();
    const enum lm_dtype at = lm_vec_dot_type(t);
    const int64_t bs = lm_dtype_traits(t)->block_size;
    const int64_t n_ins[] = {bs, 3 * bs, 5 * bs, bs == 32 ? 1056 : 2048};
    CHECK(!lm_il_supported(t, 24, 2 * bs) && !lm_il_supported(t, 16, bs + 16) && lm_il_supported(t, 32, 2 * bs));
    for (size_t ni = 0; ni < sizeof n_ins / sizeof n_ins[0]; ni++) {
        const int64_t n_in = n_ins[ni], n_out = 32, nt_max = LM_IL_MAX_NT;
        const size_t rb = lm_dtype_row_size(t, n_in), gb = lm_il_group_bytes(t, n_in);
        uint8_t *w = malloc(rb * (size_t)n_out), *il = malloc(gb * (size_t)(n_out / 16));
        random_weights(t, w, n_in * n_out);
        for (int64_t gi = 0; gi < n_out / 16; gi++) lm_il_pack_group(t, il + gi * gb, w + gi * 16 * rb, rb, n_in);
        const size_t qb = lm_dtype_row_size(at, n_in), xab = lm_il_act_row_bytes(t, n_in);
        uint8_t *xq = malloc(qb * nt_max), *xa = malloc(xab * nt_max);
        float *xf = malloc((size_t)n_in * 4), *want = malloc(sizeof(float) * (size_t)(n_out * nt_max));
        float *got = malloc(sizeof(float) * (size_t)(n_out * nt_max));
        for (int tk = 0; tk < nt_max; tk++) {
            for (int64_t i = 0; i < n_in; i++) xf[i] = rng_act();
            g->quant[at](xf, xq + tk * qb, n_in);
            lm_il_act_from(t, xq + tk * qb, n_in, xa + tk * xab);
            for (int64_t r = 0; r < n_out; r++) g->vec_dot[t](n_in, &want[tk * n_out + r], w + r * rb, xq + tk * qb);
        }
        const struct lm_kernels *all[4] = {g};
        for (int k = 0; k < n_tabs; k++) all[k + 1] = tabs[k];
        for (int k = 0; k <= n_tabs; k++) {
            // the AVX2 table runs the IQ4 types on the file layout (kernels.c)
            const int want_il = all[k] != lm_kernels_avx2();
            CHECKF((all[k]->il_gemm[t] != NULL) == want_il, "%s: il_gemm[%s] %s", all[k]->name, lm_dtype_name(t),
                   want_il ? "missing" : "set");
            if (!all[k]->il_gemm[t]) continue;
            for (int nt = 1; nt <= nt_max; nt++) {
                for (int64_t gi = 0; gi < n_out / 16; gi++)
                    all[k]->il_gemm[t](n_in, nt, got + gi * 16, (size_t)n_out, il + gi * gb, xa, xab);
                int bad = 0;
                for (int tk = 0; tk < nt; tk++)
                    for (int64_t r = 0; r < n_out; r++)
                        bad += memcmp(&got[tk * n_out + r], &want[tk * n_out + r], 4) != 0;
                CHECKF(bad == 0, "%s il_gemm %s n_in=%lld nt=%d: %d outputs differ from vec_dot", all[k]->name,
                       lm_dtype_name(t), (long long)n_in, nt, bad);
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
    CHECK(lm_dtype_traits(LM_DTYPE_IQ4_NL)->supported && lm_dtype_traits(LM_DTYPE_IQ4_XS)->supported);
    test_dequant_facts();
    test_dot(LM_DTYPE_IQ4_NL);
    test_dot(LM_DTYPE_IQ4_XS);
    test_il(LM_DTYPE_IQ4_NL);
    test_il(LM_DTYPE_IQ4_XS);
    return lm_test_finish();
}
