// The encoders' row kernels (kernels.h): LayerNorm with weight and bias, and the plain GELU:
// every table against the generic one bit for bit on odd sizes, in place and not, against
// float64 within the tolerance stated at each check; gelu equals geglu with a gate of ones.
// LM_TEST_LABELS: unit
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "lm_test.h"

static float rng_sym(void) { return (float)((lm_test_rng_u64() >> 40) * (2.0 / 16777216.0) - 1.0); }

static const struct lm_kernels *tabs[3];
static int n_tabs;
static const int64_t k_sizes[] = {1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 255, 257,
                                  383, 384, 385, 1023, 1025, 2049};
#define N_SIZES (sizeof k_sizes / sizeof k_sizes[0])
#define MAXN 2049

static void test_layernorm(void) {
    float *x = malloc(sizeof(float) * MAXN), *w = malloc(sizeof(float) * MAXN);
    float *b = malloc(sizeof(float) * MAXN), *y0 = malloc(sizeof(float) * MAXN);
    float *y = malloc(sizeof(float) * MAXN);
    int bad_bits = 0, bad_ref = 0;
    double worst = 0.0;
    for (size_t si = 0; si < N_SIZES; si++) {
        const int64_t n = k_sizes[si];
        const float off = rng_sym() * 50.0f; // a mean far from 0: the centring matters
        for (int64_t j = 0; j < n; j++) {
            x[j] = off + rng_sym() * 3.0f;
            w[j] = 1.0f + rng_sym() * 0.5f;
            b[j] = rng_sym();
        }
        for (int wb = 0; wb < 3; wb++) { // weight and bias, weight only, neither
            const float *wp = wb < 2 ? w : NULL, *bp = wb == 0 ? b : NULL;
            lm_kernels_generic()->layernorm(y0, x, wp, bp, n, 1e-12f);
            for (int t = 0; t < n_tabs; t++) {
                memcpy(y, x, sizeof(float) * (size_t)n);
                tabs[t]->layernorm(y, y, wp, bp, n, 1e-12f); // in place
                if (memcmp(y, y0, sizeof(float) * (size_t)n) && bad_bits++ < 5)
                    fprintf(stderr, "layernorm %s != generic: n %lld\n", tabs[t]->name, (long long)n);
            }
            // float64: mean and variance in double, each float step rounded (~6 roundings of
            // 2^-24 on a normalised value of magnitude <= sqrt(n)): 2^-19 (|y| + 1) (|w| + 1)
            double mu = 0.0, var = 0.0;
            for (int64_t j = 0; j < n; j++) mu += x[j];
            mu /= (double)n;
            for (int64_t j = 0; j < n; j++) var += (x[j] - mu) * (x[j] - mu);
            var /= (double)n;
            for (int64_t j = 0; j < n; j++) {
                const double z = (x[j] - mu) / sqrt(var + 1e-12);
                const double r = z * (wp ? wp[j] : 1.0) + (bp ? bp[j] : 0.0);
                const double lim = 0x1p-19 * (fabs(z) + 1.0) * (fabs(wp ? wp[j] : 1.0) + 1.0);
                if (fabs(y0[j] - r) / lim > worst) worst = fabs(y0[j] - r) / lim;
                if (!(fabs(y0[j] - r) <= lim) && bad_ref++ < 5)
                    fprintf(stderr, "layernorm vs float64: n %lld j %lld: %.9g vs %.9g\n", (long long)n,
                            (long long)j, y0[j], r);
            }
        }
    }
    // a constant row: variance 0, every value the bias (eps keeps it finite)
    for (int j = 0; j < 17; j++) x[j] = 3.25f;
    lm_kernels_generic()->layernorm(y0, x, w, b, 17, 1e-12f);
    int bad_const = 0;
    for (int j = 0; j < 17; j++) bad_const += y0[j] != b[j];
    printf("layernorm: worst error vs float64 %.3g of the limit\n", worst);
    CHECKF(bad_bits == 0, "layernorm: %d rows differ between tables", bad_bits);
    CHECKF(bad_ref == 0, "layernorm: %d values beyond the float64 limit", bad_ref);
    CHECKF(bad_const == 0, "layernorm: a constant row is not its bias (%d values)", bad_const);
    free(x); free(w); free(b); free(y0); free(y);
}

// The sums' order: rows whose squares span a wide range (one value in 8 scaled by 64) make
// a float tree and a double sum of the same squares round to different scales in ~12% of
// rows; 48 rows per size compare every table with the generic order bit for bit.
static void test_layernorm_orders(void) {
    float *x = malloc(sizeof(float) * MAXN), *y0 = malloc(sizeof(float) * MAXN);
    float *y = malloc(sizeof(float) * MAXN), *w = malloc(sizeof(float) * MAXN);
    int bad = 0, rows = 0;
    for (size_t si = 0; si < N_SIZES; si++) {
        const int64_t n = k_sizes[si];
        for (int r = 0; r < 48; r++, rows++) {
            for (int64_t j = 0; j < n; j++) {
                x[j] = 50.0f + rng_sym() * 3.0f * (lm_test_rng_u64() % 8 == 0 ? 64.0f : 1.0f);
                w[j] = 1.0f + rng_sym() * 0.5f;
            }
            lm_kernels_generic()->layernorm(y0, x, w, w, n, 1e-5f);
            for (int t = 1; t < n_tabs; t++) {
                tabs[t]->layernorm(y, x, w, w, n, 1e-5f);
                if (memcmp(y, y0, sizeof(float) * (size_t)n) && bad++ < 5)
                    fprintf(stderr, "layernorm %s != generic: n %lld row %d\n", tabs[t]->name,
                            (long long)n, r);
            }
        }
    }
    CHECKF(bad == 0, "layernorm: %d of %d wide-range rows differ between tables", bad, rows);
    free(x); free(y0); free(y); free(w);
}

static void test_gelu(void) {
    static float table[65536];
    for (int i = 0; i < 65536; i++) { // any table: gelu and geglu must read it alike
        const double v = lm_f16_to_f32((lm_f16)i);
        table[i] = (float)(0.5 * v * (1.0 + tanh(0.7978845608028654 * v * (1.0 + 0.044715 * v * v))));
    }
    float *g = malloc(sizeof(float) * MAXN), *ones = malloc(sizeof(float) * MAXN);
    float *y0 = malloc(sizeof(float) * MAXN), *y = malloc(sizeof(float) * MAXN);
    int bad = 0;
    for (size_t si = 0; si < N_SIZES; si++) {
        const int64_t n = k_sizes[si];
        for (int64_t j = 0; j < n; j++) {
            const uint64_t r = lm_test_rng_u64() % 8;
            g[j] = r == 0 ? 10.0f : r == 1 ? -10.0f : r == 2 ? nextafterf(-10.0f, 0.0f) : rng_sym() * 14.0f;
            ones[j] = 1.0f;
        }
        if (n > 5) g[n / 2] = NAN;
        memcpy(y0, g, sizeof(float) * (size_t)n);
        lm_kernels_generic()->geglu(y0, ones, n, table); // the oracle: gelu(x) * 1
        for (int t = 0; t < n_tabs; t++) {
            memcpy(y, g, sizeof(float) * (size_t)n);
            tabs[t]->gelu(y, n, table);
            if (memcmp(y, y0, sizeof(float) * (size_t)n) && bad++ < 5)
                fprintf(stderr, "gelu %s != geglu with ones: n %lld\n", tabs[t]->name, (long long)n);
        }
    }
    CHECKF(bad == 0, "gelu: %d rows differ from geglu with a gate of ones", bad);
    free(g); free(ones); free(y0); free(y);
}

int main(void) {
    tabs[n_tabs++] = lm_kernels_generic();
    if (lm_kernels_avx2()) tabs[n_tabs++] = lm_kernels_avx2();
    if (lm_kernels_avx512()) tabs[n_tabs++] = lm_kernels_avx512();
    test_layernorm();
    test_layernorm_orders();
    test_gelu();
    return lm_test_finish();
}
