// Kernel tests: every ISA table against the generic one (dequant and activation quantizers
// bit-exact, dot products within tolerance), generic dots against a float64 reference with a
// per-dtype tolerance table, the q8 quantizers' rounding rules, f16 conversions against F16C
// (exhaustive for halves), and ISA selection (LUMEN_FORCE_GENERIC / LUMEN_ISA).
// LM_TEST_LABELS: unit
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "lm_test.h"

// ============================================================================
// random numbers
// ============================================================================

static uint64_t rng_u64(void) {
    static int seeded;
    if (!seeded) { lm_test_rng_state = 0x9e3779b97f4a7c15ull; seeded = 1; } // this file's stream
    return lm_test_rng_u64();
}
static float rng_uniform(void) { return (float)((rng_u64() >> 40) * (1.0 / 16777216.0)); } // [0, 1)
static float rng_normal(void) {
    float s = 0;
    for (int i = 0; i < 4; i++) s += rng_uniform();
    return (s - 2.0f) * 1.7320508f;
}
// activations: normal with occasional outliers, as hidden states have
static float rng_act(void) { return (rng_u64() % 64 == 0) ? 20.0f * rng_normal() : rng_normal(); }

// ============================================================================
// test-side weight quantizers (simple, valid blocks; not llama.cpp's optimizing ones)
// ============================================================================

static lm_f16 f16(float f) { return lm_f32_to_f16(f); }

static void quantize_weights(enum lm_dtype t, const float *x, void *out, int64_t n) {
    switch (t) {
    case LM_DTYPE_F32: memcpy(out, x, (size_t)n * 4); break;
    case LM_DTYPE_F16:
        for (int64_t i = 0; i < n; i++) ((lm_f16 *)out)[i] = f16(x[i]);
        break;
    case LM_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++) ((lm_bf16 *)out)[i] = lm_f32_to_bf16(x[i]);
        break;
    case LM_DTYPE_Q4_0:
    case LM_DTYPE_Q5_0: {
        int nq = t == LM_DTYPE_Q4_0 ? 16 : 32;
        for (int64_t b = 0; b < n / 32; b++) {
            const float *v = x + 32 * b;
            float amax = 0, max = 0;
            for (int j = 0; j < 32; j++)
                if (fabsf(v[j]) > amax) { amax = fabsf(v[j]); max = v[j]; }
            float d = max / (float)(-nq / 2), id = d ? 1.0f / d : 0.0f;
            uint8_t q[32];
            for (int j = 0; j < 32; j++) {
                int qi = (int)(v[j] * id + (float)(nq / 2) + 0.5f);
                q[j] = (uint8_t)(qi < 0 ? 0 : qi > nq - 1 ? nq - 1 : qi);
            }
            if (t == LM_DTYPE_Q4_0) {
                struct lm_block_q4_0 *o = (struct lm_block_q4_0 *)out + b;
                o->d = f16(d);
                for (int j = 0; j < 16; j++) o->qs[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
            } else {
                struct lm_block_q5_0 *o = (struct lm_block_q5_0 *)out + b;
                o->d = f16(d);
                uint32_t qh = 0;
                for (int j = 0; j < 16; j++) o->qs[j] = (uint8_t)((q[j] & 15) | ((q[j + 16] & 15) << 4));
                for (int j = 0; j < 32; j++) qh |= (uint32_t)(q[j] >> 4) << j;
                memcpy(o->qh, &qh, 4);
            }
        }
        break;
    }
    case LM_DTYPE_Q4_1:
    case LM_DTYPE_Q5_1: {
        int nq = t == LM_DTYPE_Q4_1 ? 16 : 32;
        for (int64_t b = 0; b < n / 32; b++) {
            const float *v = x + 32 * b;
            float mn = v[0], mx = v[0];
            for (int j = 1; j < 32; j++) { mn = fminf(mn, v[j]); mx = fmaxf(mx, v[j]); }
            float d = (mx - mn) / (float)(nq - 1), id = d ? 1.0f / d : 0.0f;
            uint8_t q[32];
            for (int j = 0; j < 32; j++) {
                int qi = (int)((v[j] - mn) * id + 0.5f);
                q[j] = (uint8_t)(qi < 0 ? 0 : qi > nq - 1 ? nq - 1 : qi);
            }
            if (t == LM_DTYPE_Q4_1) {
                struct lm_block_q4_1 *o = (struct lm_block_q4_1 *)out + b;
                o->d = f16(d), o->m = f16(mn);
                for (int j = 0; j < 16; j++) o->qs[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
            } else {
                struct lm_block_q5_1 *o = (struct lm_block_q5_1 *)out + b;
                o->d = f16(d), o->m = f16(mn);
                uint32_t qh = 0;
                for (int j = 0; j < 16; j++) o->qs[j] = (uint8_t)((q[j] & 15) | ((q[j + 16] & 15) << 4));
                for (int j = 0; j < 32; j++) qh |= (uint32_t)(q[j] >> 4) << j;
                memcpy(o->qh, &qh, 4);
            }
        }
        break;
    }
    case LM_DTYPE_Q8_0: lm_kernels_generic()->quant[LM_DTYPE_Q8_0](x, out, n); break;
    default: { // K-quants: random valid blocks, then small positive f16 d / dmin
        size_t bs = lm_dtype_traits(t)->type_size;
        uint8_t *o = out;
        for (size_t i = 0; i < (size_t)(n / LM_QK_K) * bs; i++) o[i] = (uint8_t)rng_u64();
        for (int64_t b = 0; b < n / LM_QK_K; b++) {
            uint8_t *blk = o + (size_t)b * bs;
            lm_f16 d = f16(0.0005f + 0.002f * rng_uniform()), dmin = f16(0.0005f + 0.002f * rng_uniform());
            switch (t) {
            case LM_DTYPE_Q2_K: {
                struct lm_block_q2_K *k = (void *)blk; k->d = d; k->dmin = dmin; break; }
            case LM_DTYPE_Q3_K: { struct lm_block_q3_K *k = (void *)blk; k->d = d; break; }
            case LM_DTYPE_Q4_K: { struct lm_block_q4_K *k = (void *)blk; k->d = d; k->dmin = dmin; break; }
            case LM_DTYPE_Q5_K: { struct lm_block_q5_K *k = (void *)blk; k->d = d; k->dmin = dmin; break; }
            case LM_DTYPE_Q6_K: { struct lm_block_q6_K *k = (void *)blk; k->d = d; break; }
            default: break;
            }
        }
    }
    }
}

// activation row (quantized) -> floats, for the float64 reference
static void dequant_act(enum lm_dtype at, const void *xq, float *y, int64_t n) {
    switch (at) {
    case LM_DTYPE_Q8_1: {
        const struct lm_block_q8_1 *b = xq;
        for (int64_t i = 0; i < n; i++) y[i] = lm_f16_to_f32(b[i / 32].d) * b[i / 32].qs[i % 32];
        break;
    }
    case LM_DTYPE_Q8_K: {
        const struct lm_block_q8_K *b = xq;
        for (int64_t i = 0; i < n; i++) y[i] = b[i / 256].d * b[i / 256].qs[i % 256];
        break;
    }
    default: lm_kernels_generic()->dequant[at](xq, y, n);
    }
}

// ============================================================================
// per-dtype dot-product tests
// ============================================================================

struct dtype_case {
    enum lm_dtype t;
    double tol_ref;  // generic vs float64 reference, relative to sum |w_i x_i|
    double tol_isa;  // ISA vs generic, relative to sum |w_i x_i| (0: must be bit-identical)
    double max_ref, max_isa; // measured
};

static struct dtype_case cases[] = {
    {LM_DTYPE_F32, 5e-7, 1e-6, 0, 0},  {LM_DTYPE_F16, 5e-7, 1e-6, 0, 0},
    {LM_DTYPE_BF16, 5e-7, 1e-6, 0, 0}, {LM_DTYPE_Q4_0, 1e-6, 1e-6, 0, 0},
    {LM_DTYPE_Q4_1, 1e-6, 0, 0, 0},    {LM_DTYPE_Q5_0, 1e-6, 1e-6, 0, 0},
    {LM_DTYPE_Q5_1, 1e-6, 0, 0, 0}, {LM_DTYPE_Q8_0, 1e-6, 1e-6, 0, 0},
    {LM_DTYPE_Q2_K, 1e-6, 0, 0, 0},    {LM_DTYPE_Q3_K, 1e-6, 0, 0, 0},
    {LM_DTYPE_Q4_K, 1e-6, 0, 0, 0},    {LM_DTYPE_Q5_K, 1e-6, 0, 0, 0},
    {LM_DTYPE_Q6_K, 1e-6, 0, 0, 0},
};

static const struct lm_kernels *isas[3];
static int n_isas;

static void test_dtype(struct dtype_case *c) {
    const struct lm_kernels *g = lm_kernels_generic();
    const int64_t bs = lm_dtype_traits(c->t)->block_size;
    const enum lm_dtype at = lm_vec_dot_type(c->t);
    static const int64_t blocks32[] = {1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 255, 1023};
    static const int64_t blocksK[] = {1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 33};
    static const int64_t plain[] = {1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 1023, 4103};
    const int64_t *sizes = bs == 1 ? plain : bs == 32 ? blocks32 : blocksK;
    int n_sizes = bs == 1 ? 17 : bs == 32 ? 17 : 11;

    for (int si = 0; si < n_sizes; si++) {
        const int64_t n = sizes[si] * bs;
        float *xf = malloc((size_t)n * 4), *wf = malloc((size_t)n * 4), *wd = malloc((size_t)n * 4);
        float *wd2 = malloc((size_t)n * 4), *xd = malloc((size_t)n * 4);
        void *w = malloc(lm_dtype_row_size(c->t, n)), *xq = malloc(lm_dtype_row_size(at, n));
        void *xq2 = malloc(lm_dtype_row_size(at, n));
        for (int trial = 0; trial < 3; trial++) {
            float wscale = 0.02f + rng_uniform();
            for (int64_t i = 0; i < n; i++) wf[i] = wscale * rng_normal(), xf[i] = rng_act();
            quantize_weights(c->t, wf, w, n);
            g->quant[at](xf, xq, n);
            g->dequant[c->t](w, wd, n);
            dequant_act(at, xq, xd, n);
            double ref = 0, scale = 0;
            for (int64_t i = 0; i < n; i++) {
                ref += (double)wd[i] * (double)xd[i];
                scale += fabs((double)wd[i] * (double)xd[i]);
            }
            if (at == LM_DTYPE_Q8_1) {
                // q4_1/q5_1 . q8_1: the min term uses the stored fp16 s = d*sum(q), as ggml does,
                // so the reference does too: sum (w - m) x + m s per block
                ref = 0;
                const struct lm_block_q8_1 *yb = xq;
                for (int64_t b = 0; b < n / 32; b++) {
                    lm_f16 mh;
                    memcpy(&mh, (const uint8_t *)w + (size_t)b * lm_dtype_traits(c->t)->type_size + 2, 2);
                    double m = lm_f16_to_f32(mh);
                    for (int j = 0; j < 32; j++) ref += ((double)wd[32 * b + j] - m) * (double)xd[32 * b + j];
                    ref += m * lm_f16_to_f32(yb[b].s);
                }
            }
            if (scale == 0) scale = 1e-30;
            float sg;
            g->vec_dot[c->t](n, &sg, w, xq);
            double e = fabs(sg - ref) / scale;
            if (e > c->max_ref) c->max_ref = e;
            CHECKF(e <= c->tol_ref, "%s n=%lld generic %.9g ref %.9g rel err %.3g > %.3g", lm_dtype_name(c->t),
                   (long long)n, sg, ref, e, c->tol_ref);

            for (int k = 0; k < n_isas; k++) {
                const struct lm_kernels *K = isas[k];
                K->dequant[c->t](w, wd2, n);
                CHECKF(memcmp(wd, wd2, (size_t)n * 4) == 0, "%s %s dequant differs from generic n=%lld",
                       K->name, lm_dtype_name(c->t), (long long)n);
                K->quant[at](xf, xq2, n);
                CHECKF(memcmp(xq, xq2, lm_dtype_row_size(at, n)) == 0, "%s quant %s differs from generic n=%lld",
                       K->name, lm_dtype_name(at), (long long)n);
                float sk;
                K->vec_dot[c->t](n, &sk, w, xq);
                double ei = fabs((double)sk - (double)sg) / scale;
                if (ei > c->max_isa) c->max_isa = ei;
                if (c->tol_isa == 0)
                    CHECKF(sk == sg, "%s %s n=%lld vec_dot %.9g != generic %.9g", K->name, lm_dtype_name(c->t),
                           (long long)n, sk, sg);
                else
                    CHECKF(ei <= c->tol_isa, "%s %s n=%lld vec_dot %.9g generic %.9g rel %.3g", K->name,
                           lm_dtype_name(c->t), (long long)n, sk, sg, ei);
            }
        }
        free(xf), free(wf), free(wd), free(wd2), free(xd), free(w), free(xq), free(xq2);
    }
}

// ============================================================================
// activation quantizers: rounding rules and edge cases, ISA == generic
// ============================================================================

static void test_quantizers(void) {
    const struct lm_kernels *g = lm_kernels_generic();
    float x[512];
    // q8_0: amax 127 -> d = 1, id = 127/127 = 1: x*id is exact; ties round to even as
    // llama.cpp's x86 quantizer does (_mm256_round_ps nearest)
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16) + 0.5f;
    x[0] = -127.0f;
    struct lm_block_q8_0 q0[16], q0b[16];
    g->quant[LM_DTYPE_Q8_0](x, q0, 32);
    CHECK(lm_f16_to_f32(q0[0].d) == 1.0f);
    CHECK(q0[0].qs[0] == -127);
    CHECK(q0[0].qs[1] == -14); // -14.5 -> -14
    CHECK(q0[0].qs[18] == 2);  // 2.5 -> 2
    CHECK(q0[0].qs[16] == 0);  // 0.5 -> 0
    CHECK(q0[0].qs[17] == 2);  // 1.5 -> 2
    // q8_K: max = -127 -> iscale = 1; nearest_int rounds ties to even
    for (int j = 0; j < 256; j++) x[j] = (float)((j % 64) - 32) + 0.5f;
    x[5] = -127.0f;
    x[6] = 127.0f; // same magnitude later: the first one sets the sign
    struct lm_block_q8_K qk[2], qkb[2];
    g->quant[LM_DTYPE_Q8_K](x, qk, 256);
    CHECK(qk[0].d == 1.0f);
    CHECK(qk[0].qs[5] == -127 && qk[0].qs[6] == 127);
    CHECK(qk[0].qs[34] == 2); // 2.5 -> 2
    CHECK(qk[0].qs[35] == 4); // 3.5 -> 4
    CHECK(qk[0].qs[31] == 0); // -0.5 -> -0
    int bs0 = 0;
    for (int j = 0; j < 16; j++) bs0 += qk[0].qs[j];
    CHECK(qk[0].bsums[0] == bs0);
    // all-zero block: d = 0, quants and bsums 0
    memset(x, 0, sizeof x);
    g->quant[LM_DTYPE_Q8_K](x, qk, 256);
    CHECK(qk[0].d == 0.0f && qk[0].qs[100] == 0 && qk[0].bsums[3] == 0);
    g->quant[LM_DTYPE_Q8_0](x, q0, 32);
    CHECK(q0[0].d == 0 && q0[0].qs[7] == 0);

    // ISA quantizers == generic on ties, zero blocks, huge/tiny ranges, random
    for (int trial = 0; trial < 400; trial++) {
        int kind = trial % 5;
        for (int j = 0; j < 512; j++) {
            switch (kind) {
            case 0: x[j] = rng_act(); break;
            case 1: x[j] = (float)((int)(rng_u64() % 255) - 127) * 0.5f; break; // ties
            case 2: x[j] = (j / 32) % 3 == 0 ? 0.0f : rng_normal() * 1e-30f; break;
            case 3: x[j] = rng_normal() * 3e4f; break;
            default: x[j] = (float)((int)(rng_u64() % 9) - 4); break;
            }
        }
        for (int k = 0; k < n_isas; k++) {
            const struct lm_kernels *K = isas[k];
            g->quant[LM_DTYPE_Q8_0](x, q0, 512);
            K->quant[LM_DTYPE_Q8_0](x, q0b, 512);
            CHECKF(memcmp(q0, q0b, sizeof q0) == 0, "%s q8_0 quant kind %d", K->name, kind);
            g->quant[LM_DTYPE_Q8_K](x, qk, 512);
            K->quant[LM_DTYPE_Q8_K](x, qkb, 512);
            CHECKF(memcmp(qk, qkb, sizeof qk) == 0, "%s q8_K quant kind %d", K->name, kind);
        }
    }
}

// ============================================================================
// f16 / bf16 conversions against F16C
// ============================================================================

__attribute__((target("f16c"))) static float hw_h2f(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) static uint16_t hw_f2h(float f) {
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void test_f16(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2")) { printf("SKIP f16 vs F16C: no AVX2/F16C\n"); return; }
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        if (fbits(lm_f16_to_f32((lm_f16)h)) != fbits(hw_h2f((uint16_t)h))) {
            if (bad++ < 5) fprintf(stderr, "f16 %04x: lm %08x hw %08x\n", h, fbits(lm_f16_to_f32((lm_f16)h)),
                                   fbits(hw_h2f((uint16_t)h)));
        }
    }
    CHECKF(bad == 0, "%d of 65536 halves convert differently from F16C", bad);
    // every half's float, and the floats at and around each rounding midpoint
    bad = 0;
    long tested = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t u = fbits(hw_h2f((uint16_t)h));
        uint32_t next = fbits(hw_h2f((uint16_t)(h + 1)));
        uint32_t mid = (h & 0x7fff) < 0x7bff ? fbits((bitsf(u) + bitsf(next)) * 0.5f) : u;
        uint32_t probes[] = {u, u + 1, u - 1, mid, mid + 1, mid - 1};
        for (int k = 0; k < 6; k++, tested++) {
            float f = bitsf(probes[k]);
            if (lm_f32_to_f16(f) != hw_f2h(f)) {
                if (bad++ < 5) fprintf(stderr, "f32 %08x: lm %04x hw %04x\n", probes[k], lm_f32_to_f16(f), hw_f2h(f));
            }
        }
    }
    for (long i = 0; i < 10000000; i++, tested++) {
        uint32_t u = (uint32_t)rng_u64();
        if (i & 1) u = (u & 0x80000000u) | (((u >> 23) % 40 + 100) << 23) | (u & 0x7fffff); // f16 range
        float f = bitsf(u);
        if (lm_f32_to_f16(f) != hw_f2h(f)) {
            if (bad++ < 5) fprintf(stderr, "f32 %08x: lm %04x hw %04x\n", u, lm_f32_to_f16(f), hw_f2h(f));
        }
    }
    CHECKF(bad == 0, "%d of %ld floats convert to f16 differently from F16C", bad, tested);
    // every table's quant[F16] (vectorized in avx2/avx512) rounds like lm_f32_to_f16
    {
        enum { NQ = 4099 }; // not a multiple of 8: the scalar tail too
        static float xs[NQ];
        static lm_f16 hq[NQ];
        for (int i = 0; i < NQ; i++) {
            uint32_t u = (uint32_t)rng_u64();
            if (i % 3) u = (u & 0x80000000u) | (((u >> 23) % 40 + 100) << 23) | (u & 0x7fffff);
            xs[i] = bitsf(u);
        }
        const struct lm_kernels *tabs[] = {lm_kernels_generic(), lm_kernels_avx2(), lm_kernels_avx512()};
        for (size_t t = 0; t < sizeof tabs / sizeof tabs[0]; t++) {
            if (!tabs[t]) continue;
            tabs[t]->quant[LM_DTYPE_F16](xs, hq, NQ);
            int qbad = 0;
            for (int i = 0; i < NQ; i++) qbad += hq[i] != lm_f32_to_f16(xs[i]);
            CHECKF(qbad == 0, "%s quant[F16]: %d of %d halves differ from lm_f32_to_f16", tabs[t]->name, qbad, NQ);
        }
    }
    // bf16: round to nearest even, NaN stays NaN
    CHECK(lm_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(lm_f32_to_bf16(bitsf(0x3f808000u)) == 0x3f80); // tie -> even
    CHECK(lm_f32_to_bf16(bitsf(0x3f818000u)) == 0x3f82); // tie -> even (up)
    CHECK(lm_f32_to_bf16(bitsf(0x3f808001u)) == 0x3f81);
    CHECK((lm_f32_to_bf16(bitsf(0x7f800001u)) & 0x7fff) > 0x7f80);
}

// ============================================================================
// dispatch
// ============================================================================

static void test_dispatch(void) {
    setenv("LUMEN_FORCE_GENERIC", "1", 1);
    setenv("LUMEN_ISA", "avx512", 1);
    const struct lm_kernels *b = lm_kernels_best();
    CHECKF(b == lm_kernels_generic(), "LUMEN_FORCE_GENERIC=1: best is %s", b->name);
    CHECK(lm_kernels_best() == b); // cached
    unsetenv("LUMEN_FORCE_GENERIC");
    setenv("LUMEN_ISA", "generic", 1);
    CHECK(lm_kernels_pick() == lm_kernels_generic());
    if (lm_kernels_avx2()) {
        setenv("LUMEN_ISA", "avx2", 1);
        CHECK(lm_kernels_pick() == lm_kernels_avx2());
    }
    unsetenv("LUMEN_ISA");
    const struct lm_kernels *p = lm_kernels_pick();
    CHECK(p == (lm_kernels_avx512() ? lm_kernels_avx512() : lm_kernels_avx2() ? lm_kernels_avx2() : lm_kernels_generic()));
    printf("best available table: %s\n", p->name);

    CHECK(lm_vec_dot_type(LM_DTYPE_Q4_0) == LM_DTYPE_Q8_0 && lm_vec_dot_type(LM_DTYPE_Q5_0) == LM_DTYPE_Q8_0);
    CHECK(lm_vec_dot_type(LM_DTYPE_Q4_1) == LM_DTYPE_Q8_1 && lm_vec_dot_type(LM_DTYPE_Q5_1) == LM_DTYPE_Q8_1);
    CHECK(lm_vec_dot_type(LM_DTYPE_Q4_K) == LM_DTYPE_Q8_K && lm_vec_dot_type(LM_DTYPE_Q6_K) == LM_DTYPE_Q8_K);
    CHECK(lm_vec_dot_type(LM_DTYPE_F16) == LM_DTYPE_F16 && lm_vec_dot_type(LM_DTYPE_BF16) == LM_DTYPE_BF16);
    CHECK(lm_vec_dot_type(LM_DTYPE_IQ2_XXS) == LM_DTYPE_COUNT);

    // every supported weight dtype has all three entries in every table
    const struct lm_kernels *all[4] = {lm_kernels_generic(), isas[0], isas[1], NULL};
    for (int k = 0; k < 1 + n_isas; k++)
        for (int t = 0; t < LM_DTYPE_COUNT; t++) {
            const struct lm_dtype_traits *tr = lm_dtype_traits(t);
            if (!tr || !tr->supported) continue;
            enum lm_dtype at = lm_vec_dot_type((enum lm_dtype)t);
            CHECKF(all[k]->dequant[t] && all[k]->vec_dot[t] && at != LM_DTYPE_COUNT && all[k]->quant[at],
                   "%s: missing kernels for %s", all[k]->name, tr->name);
        }

    // matvec_rows: W (5, 512) q4_K, rows [1, 4)
    const int64_t n = 512, rows = 5;
    size_t rb = lm_dtype_row_size(LM_DTYPE_Q4_K, n);
    uint8_t *W = malloc(rb * rows);
    float *x = malloc(n * 4), y[3];
    struct lm_block_q8_K xq[2];
    for (int i = 0; i < n; i++) x[i] = rng_act();
    quantize_weights(LM_DTYPE_Q4_K, x, W, n * rows); // random blocks; x unused
    lm_kernels_generic()->quant[LM_DTYPE_Q8_K](x, xq, n);
    lm_matvec_rows(p, LM_DTYPE_Q4_K, W, rb, n, xq, y, 1, 4);
    for (int r = 1; r < 4; r++) {
        float s;
        p->vec_dot[LM_DTYPE_Q4_K](n, &s, W + r * rb, xq);
        CHECK(s == y[r - 1]);
    }
    free(W), free(x);
}

int main(void) {
    n_isas = 0;
    if (lm_kernels_avx2()) isas[n_isas++] = lm_kernels_avx2();
    if (lm_kernels_avx512()) isas[n_isas++] = lm_kernels_avx512();
    printf("ISA tables under test:");
    for (int k = 0; k < n_isas; k++) printf(" %s", isas[k]->name);
    printf("\n");

    test_dispatch();
    test_quantizers();
    test_f16();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_dtype(&cases[i]);
    printf("%-6s %12s %12s %12s %12s\n", "dtype", "max_ref_err", "tol_ref", "max_isa_err", "tol_isa");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        printf("%-6s %12.3g %12.3g %12.3g %12.3g\n", lm_dtype_name(cases[i].t), cases[i].max_ref, cases[i].tol_ref,
               cases[i].max_isa, cases[i].tol_isa);
    return lm_test_finish();
}
