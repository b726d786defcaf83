// Row kernels of the forward pass (kernels.h): RMS norm, RoPE (neox and adjacent pairs,
// partial rotary) and f32 -> f16 rows. Every table against the generic one bit for bit on
// odd sizes, the generic one against a float64 reference within the tolerance stated at
// each check; every table has every row kernel.
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

static const int64_t k_sizes[] = {1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128,
                                  255, 256, 257, 511, 640, 1023, 1024, 1025, 2048, 2049};
#define N_SIZES (sizeof k_sizes / sizeof k_sizes[0])
#define MAXN 2049

// ---------------------------------------------------------------- rmsnorm

static void test_rmsnorm(void) {
    float *x = malloc(sizeof(float) * MAXN), *w = malloc(sizeof(float) * MAXN);
    float *y0 = malloc(sizeof(float) * MAXN), *y = malloc(sizeof(float) * MAXN);
    int bad_bits = 0, bad_ref = 0;
    double worst = 0.0;
    for (size_t si = 0; si < N_SIZES; si++)
        for (int rep = 0; rep < 4; rep++) {
            const int64_t n = k_sizes[si];
            // magnitudes from 1e-3 to 1e3 (Gemma's residual stream reaches hundreds)
            const float mag = powf(10.0f, (float)(rep - 1) * 1.5f);
            for (int64_t j = 0; j < n; j++) { x[j] = rng_sym() * mag; w[j] = 1.0f + rng_sym(); }
            const float eps = rep % 2 ? 1e-6f : 1e-5f;
            const float *wp = rep == 3 ? NULL : w;
            for (int t = 0; t < n_tabs; t++) {
                tabs[t]->rmsnorm(t ? y : y0, x, wp, n, eps);
                if (t && memcmp(y, y0, sizeof(float) * (size_t)n) && bad_bits++ < 5)
                    fprintf(stderr, "rmsnorm %s != generic: n %lld rep %d\n", tabs[t]->name, (long long)n, rep);
                // in place: the same bits
                float *xi = malloc(sizeof(float) * (size_t)n);
                memcpy(xi, x, sizeof(float) * (size_t)n);
                tabs[t]->rmsnorm(xi, xi, wp, n, eps);
                CHECKF(!memcmp(xi, y0, sizeof(float) * (size_t)n), "rmsnorm %s in place differs: n %lld", tabs[t]->name, (long long)n);
                free(xi);
            }
            // float64: ~6 float roundings (the mean's, + eps, sqrt, 1/, two products): 1e-6 relative
            double ss = 0.0;
            for (int64_t j = 0; j < n; j++) ss += (double)x[j] * x[j];
            const double s = 1.0 / sqrt(ss / (double)n + eps);
            for (int64_t j = 0; j < n; j++) {
                const double r = x[j] * s * (wp ? wp[j] : 1.0), err = fabs(y0[j] - r) / (fabs(r) + 1e-30);
                if (err > worst) worst = err;
                if (err > 1e-6 && bad_ref++ < 5)
                    fprintf(stderr, "rmsnorm vs float64: n %lld j %lld: %g vs %g\n", (long long)n, (long long)j, y0[j], r);
            }
        }
    printf("rmsnorm: worst relative error vs float64 %.3g\n", worst);
    CHECKF(bad_bits == 0, "rmsnorm: %d cases differ between tables", bad_bits);
    CHECKF(bad_ref == 0, "rmsnorm: %d values beyond 1e-6 of float64", bad_ref);
    free(x); free(w); free(y0); free(y);
}

// ---------------------------------------------------------------- rope

static void test_rope(void) {
    enum { ROWS = 3 };
    int bad_bits = 0, bad_ref = 0, bad_rest = 0;
    double worst = 0.0;
    static const int64_t pairs[] = {1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 32, 33, 64, 128};
    for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++)
        for (int neox = 0; neox <= 1; neox++)
            for (int partial = 0; partial <= 1; partial++) {
                const int64_t n_rot = 2 * pairs[pi], hd = n_rot + (partial ? 2 * pairs[pi] + 6 : 0);
                const int64_t stride = hd + 3;
                float *cs = malloc(sizeof(float) * (size_t)n_rot), *x = malloc(sizeof(float) * ROWS * (size_t)stride);
                float *y0 = malloc(sizeof(float) * ROWS * (size_t)stride), *y = malloc(sizeof(float) * ROWS * (size_t)stride);
                for (int64_t i = 0; i < n_rot / 2; i++) { // angles of a position ~1000
                    const float t = 1000.0f * powf(10000.0f, -2.0f * (float)i / (float)n_rot) + rng_sym();
                    cs[2 * i] = cosf(t);
                    cs[2 * i + 1] = sinf(t);
                }
                for (int64_t i = 0; i < ROWS * stride; i++) x[i] = rng_sym() * 4.0f;
                for (int t = 0; t < n_tabs; t++) {
                    float *o = t ? y : y0;
                    memcpy(o, x, sizeof(float) * ROWS * (size_t)stride);
                    tabs[t]->rope(o, ROWS, stride, cs, n_rot, neox);
                    if (t && memcmp(y, y0, sizeof(float) * ROWS * (size_t)stride) && bad_bits++ < 5)
                        fprintf(stderr, "rope %s != generic: n_rot %lld neox %d\n", tabs[t]->name, (long long)n_rot, neox);
                }
                // float64: two products and an fma per value: 2^-23 of |x0 c| + |x1 s|
                for (int r = 0; r < ROWS; r++) {
                    const float *xr = x + r * stride, *yr = y0 + r * stride;
                    for (int64_t i = 0; i < n_rot / 2; i++) {
                        const int64_t a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
                        const double co = cs[2 * i], si = cs[2 * i + 1], x0 = xr[a], x1 = xr[b];
                        const double ra = x0 * co - x1 * si, rb = x0 * si + x1 * co;
                        const double lim = (fabs(x0) + fabs(x1)) * 0x1p-23;
                        const double e = fmax(fabs(yr[a] - ra), fabs(yr[b] - rb));
                        if (e / lim > worst) worst = e / lim;
                        if (e > lim && bad_ref++ < 5)
                            fprintf(stderr, "rope vs float64: n_rot %lld neox %d pair %lld\n", (long long)n_rot, neox, (long long)i);
                    }
                    for (int64_t d = n_rot; d < stride; d++) bad_rest += yr[d] != xr[d]; // untouched
                }
                free(cs); free(x); free(y0); free(y);
            }
    printf("rope: worst error vs float64 %.3g of the limit\n", worst);
    CHECKF(bad_bits == 0, "rope: %d cases differ between tables", bad_bits);
    CHECKF(bad_ref == 0, "rope: %d pairs beyond the float64 limit", bad_ref);
    CHECKF(bad_rest == 0, "rope: %d values past n_rot changed", bad_rest);
}

// ---------------------------------------------------------------- f32 -> f16

// y is the nearest half to x (ties to even), inf past the largest half + half an ulp
static bool nearest_half(float x, lm_f16 y) {
    if (isnan(x)) return (y & 0x7c00) == 0x7c00 && (y & 0x3ff);
    if (fabsf(x) >= 65520.0f) return y == (x > 0 ? 0x7c00 : 0xfc00);
    const double d = fabs((double)x - lm_f16_to_f32(y));
    for (int k = -1; k <= 1; k += 2) {
        const lm_f16 n = (lm_f16)(y + k);
        if ((n & 0x7c00) == 0x7c00 || ((y & 0x7fff) == 0 && k < 0)) continue; // past inf / below zero
        const double dn = fabs((double)x - lm_f16_to_f32(n));
        if (dn < d || (dn == d && (y & 1))) return false;
    }
    return true;
}

static void test_f16_rows(void) {
    enum { N = 4099 };
    float *x = malloc(sizeof(float) * N);
    lm_f16 *y0 = malloc(sizeof(lm_f16) * N), *y = malloc(sizeof(lm_f16) * N);
    int bad_bits = 0, bad_ref = 0;
    for (int rep = 0; rep < 8; rep++) {
        for (int i = 0; i < N; i++) {
            const uint64_t r = lm_test_rng_u64();
            switch (r % 8) {
            case 0: { uint32_t u = (uint32_t)(r >> 32); memcpy(&x[i], &u, 4); break; } // any bits
            case 1: x[i] = lm_f16_to_f32((lm_f16)(r >> 20)) + ldexpf(1.0f, -25) * (float)((int)(r >> 50) % 3 - 1); break;
            case 2: { lm_f16 h = (lm_f16)(r >> 20); // a tie: halfway between two halves
                      x[i] = (float)(((double)lm_f16_to_f32(h) + lm_f16_to_f32((lm_f16)(h + 1))) / 2); break; }
            case 3: x[i] = rng_sym() * 1e-5f; break; // half subnormals
            case 4: x[i] = rng_sym() * 70000.0f; break; // overflow
            default: x[i] = rng_sym() * 8.0f; break;
            }
            if (!isfinite(x[i]) && r % 5) x[i] = 1.0f;
        }
        x[0] = INFINITY; x[1] = -INFINITY; x[2] = 65519.99f; x[3] = 65520.0f; x[4] = -0.0f;
        for (size_t si = 0; si < N_SIZES; si++) {
            const int64_t n = k_sizes[si] + rep * 257 > N ? N : k_sizes[si] + rep * 257;
            for (int t = 0; t < n_tabs; t++) {
                memset(t ? y : y0, 0xa5, sizeof(lm_f16) * N);
                tabs[t]->f32_to_f16(t ? y : y0, x, n);
                if (t && memcmp(y, y0, sizeof(lm_f16) * N) && bad_bits++ < 5) // also: nothing past n written
                    fprintf(stderr, "f32_to_f16 %s != generic: n %lld\n", tabs[t]->name, (long long)n);
            }
            if (si == N_SIZES - 1)
                for (int64_t i = 0; i < n; i++)
                    if (!nearest_half(x[i], y0[i]) && bad_ref++ < 5)
                        fprintf(stderr, "f32_to_f16: %a -> 0x%04x is not the nearest half\n", x[i], y0[i]);
        }
    }
    CHECKF(bad_bits == 0, "f32_to_f16: %d cases differ between tables", bad_bits);
    CHECKF(bad_ref == 0, "f32_to_f16: %d values not rounded to the nearest half", bad_ref);
    free(x); free(y0); free(y);
}

int main(void) {
    tabs[n_tabs++] = lm_kernels_generic();
    if (lm_kernels_avx2()) tabs[n_tabs++] = lm_kernels_avx2();
    if (lm_kernels_avx512()) tabs[n_tabs++] = lm_kernels_avx512();
    for (int t = 0; t < n_tabs; t++) {
        const struct lm_kernels *k = tabs[t];
        CHECKF(k->rmsnorm && k->rope && k->geglu && k->swiglu && k->f32_to_f16 && k->attn,
               "%s: a row kernel is missing", k->name);
    }
    test_rmsnorm();
    test_rope();
    test_f16_rows();
    return lm_test_finish();
}
