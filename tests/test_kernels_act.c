// Gated activations (kernels.h): GELU by f16 table (geglu), SiLU (swiglu) and gpt-oss's clamped
// SwiGLU (swiglu_oai) over spans of a
// row, every table against the generic one bit for bit on odd sizes and odd spans (any
// split of a row gives the same values), against float64 within the tolerance stated at
// each check; the ggml_v_expf polynomial (lm_expf_ggml) against exp() and, where the
// compiler and CPU have AVX-512, against its vector form over a sweep of all floats.
// LM_TEST_LABELS: unit
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_internal.h" // lm_expf_ggml
#include "lm_test.h"

// the AVX-512 form of the exp, where this file is compiled with the flags it needs (-march=native)
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && \
    defined(__AVX512VNNI__)
#define TEST_AVX512 1
#include "kernels/simd_avx512.h"
#endif

static float rng_sym(void) { return (float)((lm_test_rng_u64() >> 40) * (2.0 / 16777216.0) - 1.0); }

static const struct lm_kernels *tabs[3];
static int n_tabs;

static const int64_t k_sizes[] = {1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 255,
                                  256, 257, 511, 1023, 1024, 1025, 2048, 2049};
#define N_SIZES (sizeof k_sizes / sizeof k_sizes[0])
#define MAXN 2049

static double gelu64(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * x * (1.0 + 0.044715 * x * x))); }

// values across the table's range, both cut-offs, their neighbours, NaN now and then
static float act_value(void) {
    const uint64_t r = lm_test_rng_u64();
    switch (r % 16) {
    case 0: return 10.0f;
    case 1: return -10.0f;
    case 2: return nextafterf(10.0f, 0.0f);
    case 3: return nextafterf(-10.0f, 0.0f);
    case 4: return rng_sym() * 200.0f; // exp under- and overflow in SiLU
    default: return rng_sym() * 12.0f;
    }
}

static void test_geglu(void) {
    static float table[65536];
    for (int i = 0; i < 65536; i++) table[i] = lm_f16_to_f32(lm_f32_to_f16((float)gelu64(lm_f16_to_f32((lm_f16)i))));
    float *g = malloc(sizeof(float) * MAXN), *u = malloc(sizeof(float) * MAXN);
    float *y0 = malloc(sizeof(float) * MAXN), *y = malloc(sizeof(float) * MAXN);
    int bad_bits = 0, bad_ref = 0;
    for (size_t si = 0; si < N_SIZES; si++) {
        const int64_t n = k_sizes[si];
        for (int64_t j = 0; j < n; j++) { g[j] = act_value(); u[j] = rng_sym() * 2.0f; }
        if (n > 5) g[n / 2] = NAN; // NaN gates to 0 (the vector compare)
        for (int t = 0; t < n_tabs; t++) {
            float *o = t ? y : y0;
            memcpy(o, g, sizeof(float) * (size_t)n);
            tabs[t]->geglu(o, u, n, table);
            if (t && memcmp(y, y0, sizeof(float) * (size_t)n) && bad_bits++ < 5)
                fprintf(stderr, "geglu %s != generic: n %lld\n", tabs[t]->name, (long long)n);
        }
        // float64: x and gelu(x) rounded to f16 (2^-11 each); gelu' <= 1.13: 2^-9 (|x| + 2^-14) |u|
        for (int64_t j = 0; j < n; j++) {
            const double x = g[j], r = isnan(x) ? 0.0 : x <= -10 ? 0.0 : x >= 10 ? x : gelu64(x);
            const double lim = ((isnan(x) ? 0.0 : fabs(x)) + 0x1p-14) * fabs(u[j]) * 0x1p-9;
            if (!(fabs(y0[j] - r * u[j]) <= lim) && bad_ref++ < 5)
                fprintf(stderr, "geglu vs float64: x %g: %g vs %g\n", x, y0[j], r * u[j]);
        }
    }
    CHECKF(bad_bits == 0, "geglu: %d cases differ between tables", bad_bits);
    CHECKF(bad_ref == 0, "geglu: %d values beyond the float64 limit", bad_ref);
    free(g); free(u); free(y0); free(y);
}

static void test_swiglu(void) {
    float *g = malloc(sizeof(float) * MAXN), *u = malloc(sizeof(float) * MAXN);
    float *y0 = malloc(sizeof(float) * MAXN), *y = malloc(sizeof(float) * MAXN);
    int bad_bits = 0, bad_split = 0, bad_ref = 0;
    double worst = 0.0;
    for (size_t si = 0; si < N_SIZES; si++) {
        const int64_t F = k_sizes[si];
        for (int64_t j = 0; j < F; j++) { g[j] = act_value(); u[j] = rng_sym() * 2.0f; }
        // the whole row with the generic kernel
        memcpy(y0, g, sizeof(float) * (size_t)F);
        lm_kernels_generic()->swiglu(y0, u, 0, F, F);
        for (int t = 0; t < n_tabs; t++)
            for (int split = 0; split < 4; split++) {
                // spans with odd edges: [0, a), [a, b), [b, F)
                int64_t a = split == 0 ? F : (int64_t)(lm_test_rng_u64() % (uint64_t)(F + 1));
                int64_t b = split == 0 ? F : a + (int64_t)(lm_test_rng_u64() % (uint64_t)(F - a + 1));
                if (split == 3 && F > 20) { a = F - F % 16 - 3; b = F - 1; } // across the vector / scalar edge
                memcpy(y, g, sizeof(float) * (size_t)F);
                tabs[t]->swiglu(y, u, 0, a, F);
                tabs[t]->swiglu(y, u, a, b, F);
                tabs[t]->swiglu(y, u, b, F, F);
                if (memcmp(y, y0, sizeof(float) * (size_t)F)) {
                    if (split == 0) bad_bits++;
                    else bad_split++;
                    if (bad_bits + bad_split < 6)
                        fprintf(stderr, "swiglu %s: F %lld spans [0,%lld) [%lld,%lld) [%lld,F) differ from the generic row\n",
                                tabs[t]->name, (long long)F, (long long)a, (long long)a, (long long)b, (long long)b);
                }
            }
        // float64: exp within ~2 ulp, 1 + e, the division and the product: 2^-21 relative
        for (int64_t j = 0; j < F; j++) {
            const double x = g[j], r = x / (1.0 + exp(-x)) * u[j];
            const double err = fabs(y0[j] - r), lim = fabs(r) * 0x1p-21 + 1e-38;
            if (err / lim > worst) worst = err / lim;
            if (!(err <= lim) && bad_ref++ < 5) fprintf(stderr, "swiglu vs float64: x %g: %g vs %g\n", x, y0[j], r);
        }
    }
    printf("swiglu: worst error vs float64 %.3g of the limit\n", worst);
    CHECKF(bad_bits == 0, "swiglu: %d rows differ between tables", bad_bits);
    CHECKF(bad_split == 0, "swiglu: %d split rows differ from the whole row", bad_split);
    CHECKF(bad_ref == 0, "swiglu: %d values beyond the float64 limit", bad_ref);
    free(g); free(u); free(y0); free(y);
}

// gpt-oss's clamped SwiGLU: every table's entry against the generic row (split anywhere), and
// against float64 of ggml's formula, across and inside the clamps (alpha 1.702, limit 7)
static void test_swiglu_oai(void) {
    enum { F = 1000 };
    static float g[F], u[F], y0[F], y[F];
    int bad_bits = 0, bad_ref = 0;
    for (int64_t j = 0; j < F; j++) { g[j] = rng_sym() * 12.0f; u[j] = rng_sym() * 12.0f; }
    g[0] = 7.0f; u[0] = -7.0f; g[1] = -90.0f; u[1] = 7.5f; // the clamps' edges, exp overflow
    memcpy(y0, g, sizeof y0);
    lm_kernels_generic()->swiglu_oai(y0, u, 0, F, 1.702f, 7.0f);
    for (int t = 0; t < n_tabs; t++) {
        const int64_t a = (int64_t)(lm_test_rng_u64() % F);
        memcpy(y, g, sizeof y);
        tabs[t]->swiglu_oai(y, u, 0, a, 1.702f, 7.0f);
        tabs[t]->swiglu_oai(y, u, a, F, 1.702f, 7.0f);
        if (memcmp(y, y0, sizeof y)) bad_bits++;
    }
    for (int64_t j = 0; j < F; j++) {
        const double x = g[j] < 7.0f ? g[j] : 7.0, v = u[j] < -7.0f ? -7.0 : u[j] > 7.0f ? 7.0 : u[j];
        // alpha * -x is rounded to float before expf: 2^-24 relative, times |alpha x| through exp
        const double r = x / (1.0 + exp(-(double)1.702f * x)) * (v + 1.0);
        const double err = fabs(y0[j] - r), lim = fabs(r) * (0x1p-20 + fabs(1.702 * x) * 0x1p-23) + 1e-30;
        if (!(err <= lim) && bad_ref++ < 5) fprintf(stderr, "swiglu_oai vs float64: %g %g: %g vs %g\n", g[j], u[j], y0[j], r);
    }
    CHECKF(y0[1] == 0.0f || y0[1] == -0.0f, "swiglu_oai: a large negative gate gives %g, not 0", y0[1]);
    CHECKF(bad_bits == 0, "swiglu_oai: %d tables differ from generic", bad_bits);
    CHECKF(bad_ref == 0, "swiglu_oai: %d values beyond the float64 limit", bad_ref);
}

// bits i * step of the float space through lm_expf_ggml vs exp() (and the AVX-512 form)
static void test_expf(void) {
    const uint32_t step = 251; // ~17M floats
    int bad_ref = 0, bad_vec = 0;
    double worst_ulp = 0.0;
#if TEST_AVX512
    __builtin_cpu_init();
    const bool vec = __builtin_cpu_supports("avx512f");
    float xs[16], ys[16];
    int nx = 0;
#endif
    for (uint64_t b = 0; b < 0x100000000ull; b += step) {
        const uint32_t u32 = (uint32_t)b;
        float x;
        memcpy(&x, &u32, 4);
        const float y = lm_expf_ggml(x);
        if (isnan(x) ? !isnan(y) : x < -104.0f ? y != 0.0f : x > 88.8f ? y != INFINITY : false) {
            if (bad_ref++ < 5) fprintf(stderr, "lm_expf_ggml(%a) = %a\n", x, y);
        } else if (x > -87.0f && x < 88.7f) { // normal results: within 2.5 ulp (measured 2.18)
            const double r = exp((double)x);
            const double ulp = fabs(y - r) / (ldexp(1.0, ilogb(r) - 23));
            if (ulp > worst_ulp) worst_ulp = ulp;
            if (ulp > 2.5 && bad_ref++ < 5) fprintf(stderr, "lm_expf_ggml(%a) = %a, exp %a (%.2f ulp)\n", x, y, r, ulp);
        }
#if TEST_AVX512
        if (vec) {
            xs[nx++] = x;
            if (nx == 16) {
                _mm512_storeu_ps(ys, lm_expf_ggml_512(_mm512_loadu_ps(xs)));
                for (int l = 0; l < 16; l++) {
                    const float s = lm_expf_ggml(xs[l]);
                    if (memcmp(&s, &ys[l], 4) && !(isnan(s) && isnan(ys[l])) && bad_vec++ < 5)
                        fprintf(stderr, "expf at %a: scalar %a, AVX-512 %a\n", xs[l], s, ys[l]);
                }
                // the AVX2 form (simd_avx2.h), 8 lanes twice
                _mm256_storeu_ps(ys, lm_expf_ggml_256(_mm256_loadu_ps(xs)));
                _mm256_storeu_ps(ys + 8, lm_expf_ggml_256(_mm256_loadu_ps(xs + 8)));
                for (int l = 0; l < 16; l++) {
                    const float s = lm_expf_ggml(xs[l]);
                    if (memcmp(&s, &ys[l], 4) && !(isnan(s) && isnan(ys[l])) && bad_vec++ < 5)
                        fprintf(stderr, "expf at %a: scalar %a, AVX2 %a\n", xs[l], s, ys[l]);
                }
                nx = 0;
            }
        }
#endif
    }
    printf("lm_expf_ggml: worst %.3f ulp vs exp()\n", worst_ulp);
    CHECKF(bad_ref == 0, "lm_expf_ggml: %d values off exp()", bad_ref);
    CHECKF(bad_vec == 0, "lm_expf_ggml: %d values differ from the AVX-512 / AVX2 forms", bad_vec);
}

int main(void) {
    tabs[n_tabs++] = lm_kernels_generic();
    if (lm_kernels_avx2()) tabs[n_tabs++] = lm_kernels_avx2();
    if (lm_kernels_avx512()) tabs[n_tabs++] = lm_kernels_avx512();
    test_geglu();
    test_swiglu();
    test_swiglu_oai();
    test_expf();
    return lm_test_finish();
}
