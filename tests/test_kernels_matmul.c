// kernels/matmul.h: the path each dtype / layout / batch size takes on each kernel table
// (the small-batch u8 GEMM included, which the profiler used to label per_row or
// multitoken), the decision's label, the workspace's fit and size query, and matmuls through
// plan / quantize / rows: against a float64 reference within test_kernels_dot.c's per-dtype
// tolerances (plus test_kernels_il.c's 1e-5 on il layouts), and bit-identical whatever
// the batch size, the row split and the number of threads; the AMX path the same bits as
// the VNNI one.
// LM_TEST_LABELS: unit
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/matmul.h"
#include "lm_test.h"

static uint64_t rng_u64(void) {
    static int seeded;
    if (!seeded) { lm_test_rng_state = 0x51ed270b27a3c0f1ull; seeded = 1; } // this file's stream
    return lm_test_rng_u64();
}
static float rng_sym(void) { return (float)((rng_u64() >> 40) * (2.0 / 16777216.0) - 1.0); }

#define MAX_ROWS 17  // widest batch tested
#define MAX_IN 768   // widest input tested
#define N_THREADS 2

static struct lm_matmul_ws g_ws;

// ============================================================================
// weights: random valid rows, optionally packed into the il layout
// ============================================================================

struct test_weight {
    struct lm_weight w;
    void *data, *il; // owned
};

static void random_rows(enum lm_dtype t, uint8_t *w, int64_t n_out, int64_t n_in) {
    const size_t row = lm_dtype_row_size(t, n_in);
    if (t == LM_DTYPE_F32 || t == LM_DTYPE_F16 || t == LM_DTYPE_BF16) {
        for (int64_t i = 0; i < n_out * n_in; i++) {
            const float v = 0.5f * rng_sym() * (rng_u64() % 64 == 0 ? 20.0f : 1.0f);
            if (t == LM_DTYPE_F32) ((float *)w)[i] = v;
            else if (t == LM_DTYPE_F16) ((lm_f16 *)w)[i] = lm_f32_to_f16(v);
            else ((lm_bf16 *)w)[i] = lm_f32_to_bf16(v);
        }
        return;
    }
    for (size_t i = 0; i < (size_t)n_out * row; i++) w[i] = (uint8_t)rng_u64(); // any quants are valid
    const size_t bs = lm_dtype_traits(t)->type_size;
    for (size_t b = 0; b < (size_t)n_out * row / bs; b++) { // then sane scales
        uint8_t *blk = w + b * bs;
        const lm_f16 d = lm_f32_to_f16(0.02f * rng_sym()), m = lm_f32_to_f16(0.01f * rng_sym());
        const lm_f16 dk = lm_f32_to_f16(0.0005f + 0.002f * (rng_sym() + 1) / 2);
        const lm_f16 dm = lm_f32_to_f16(0.0005f + 0.002f * (rng_sym() + 1) / 2);
        switch (t) {
        case LM_DTYPE_Q4_0: case LM_DTYPE_Q5_0: case LM_DTYPE_Q8_0: memcpy(blk, &d, 2); break;
        case LM_DTYPE_Q4_1: case LM_DTYPE_Q5_1: memcpy(blk, &d, 2); memcpy(blk + 2, &m, 2); break;
        case LM_DTYPE_Q2_K: ((struct lm_block_q2_K *)blk)->d = dk; ((struct lm_block_q2_K *)blk)->dmin = dm; break;
        case LM_DTYPE_Q3_K: ((struct lm_block_q3_K *)blk)->d = dk; break;
        case LM_DTYPE_Q4_K: ((struct lm_block_q4_K *)blk)->d = dk; ((struct lm_block_q4_K *)blk)->dmin = dm; break;
        case LM_DTYPE_Q5_K: ((struct lm_block_q5_K *)blk)->d = dk; ((struct lm_block_q5_K *)blk)->dmin = dm; break;
        case LM_DTYPE_Q6_K: ((struct lm_block_q6_K *)blk)->d = dk; break;
        case LM_DTYPE_IQ4_NL: memcpy(blk, &d, 2); break;
        case LM_DTYPE_IQ4_XS: ((struct lm_block_iq4_xs *)blk)->d = dk; break;
        case LM_DTYPE_MXFP4: blk[0] = (uint8_t)(118 + rng_u64() % 8); break; // 2^-10..2^-3
        default: break;
        }
    }
}

// il: pack into the il layout (as lm_model_repack_il does; f16 uses the rows in place)
static void weight_make(struct test_weight *tw, enum lm_dtype t, int64_t n_out, int64_t n_in, bool il) {
    memset(tw, 0, sizeof *tw);
    struct lm_weight *w = &tw->w;
    snprintf(w->name, sizeof w->name, "blk.0.test_%s.weight", lm_dtype_name(t));
    w->type = t;
    w->n_in = n_in;
    w->n_out = n_out;
    w->row_bytes = lm_dtype_row_size(t, n_in);
    tw->data = malloc((size_t)n_out * w->row_bytes);
    random_rows(t, tw->data, n_out, n_in);
    w->data = tw->data;
    if (!il) return;
    LM_ASSERT(lm_il_supported(t, n_out, n_in));
    w->il_group_bytes = lm_il_group_bytes(t, n_in);
    if (lm_il_in_place(t, w->row_bytes, n_in)) {
        w->il = w->data;
        return;
    }
    tw->il = malloc(w->il_group_bytes * (size_t)(n_out / LM_IL_ROWS));
    for (int64_t g = 0; g < n_out / LM_IL_ROWS; g++)
        lm_il_pack_group(t, (char *)tw->il + (size_t)g * w->il_group_bytes,
                         (const char *)w->data + (size_t)g * LM_IL_ROWS * w->row_bytes, w->row_bytes, n_in);
    w->il = tw->il;
}

static void weight_free(struct test_weight *tw) { free(tw->data); free(tw->il); }

// ============================================================================
// running a plan on simulated threads
// ============================================================================

// [s, e) of n for thread ith of nth, in whole multiples of align
static void split_aligned(int64_t n, int64_t align, int ith, int nth, int64_t *s, int64_t *e) {
    if (n % align != 0) align = 1;
    const int64_t units = n / align, per = (units + nth - 1) / nth;
    *s = per * ith < units ? per * ith : units;
    *e = *s + per < units ? *s + per : units;
    *s *= align;
    *e *= align;
}

// Ys[j] (n_rows, n_out_j) = X @ Ws[j]^T on table k, as nth threads would compute it (each
// thread's plan on its own buffers; shared quantization split, then every thread's rows).
static void run(const struct lm_kernels *k, const struct lm_weight *const *Ws, int n_w, const float *X,
                int64_t n_rows, int nth, float *const *Ys, struct lm_matmul_decision *d) {
    struct lm_matmul_plan p[N_THREADS];
    for (int ith = 0; ith < nth; ith++) lm_matmul_plan(&p[ith], k, &g_ws, Ws, n_w, X, n_rows, ith);
    for (int ith = 0; ith < nth; ith++) {
        int64_t s = 0, e = n_rows;
        if (p[ith].shared) split_aligned(n_rows, 1, ith, nth, &s, &e);
        lm_matmul_quantize(&p[ith], s, e);
    }
    for (int ith = 0; ith < nth; ith++)
        for (int j = 0; j < n_w; j++) {
            int64_t a, b;
            split_aligned(Ws[j]->n_out, LM_MATMUL_ROW_ALIGN, ith, nth, &a, &b);
            if (a < b) lm_matmul_rows(&p[ith], j, Ys[j], a, b);
        }
    if (d) *d = p[0].d;
}

// ============================================================================
// float64 reference (on the activations as the dot product sees them)
// ============================================================================

static void dequant_act(enum lm_dtype at, const void *xq, float *y, int64_t n) {
    if (at == LM_DTYPE_Q8_1) {
        const struct lm_block_q8_1 *b = xq;
        for (int64_t i = 0; i < n; i++) y[i] = lm_f16_to_f32(b[i / 32].d) * b[i / 32].qs[i % 32];
    } else if (at == LM_DTYPE_Q8_K) {
        const struct lm_block_q8_K *b = xq;
        for (int64_t i = 0; i < n; i++) y[i] = b[i / 256].d * b[i / 256].qs[i % 256];
    } else {
        lm_kernels_generic()->dequant[at](xq, y, n);
    }
}

// dot(W row r, x) in float64 and sum |w_i x_i| (the scale of rounding errors)
static double ref_dot(const struct lm_weight *W, int64_t r, const float *x, double *scale) {
    const int64_t n = W->n_in;
    const enum lm_dtype at = lm_vec_dot_type(W->type);
    const void *wr = (const char *)W->data + (size_t)r * W->row_bytes;
    float *wd = malloc(sizeof(float) * (size_t)n), *xd = malloc(sizeof(float) * (size_t)n);
    void *xq = malloc(lm_dtype_row_size(at == LM_DTYPE_F32 ? LM_DTYPE_F32 : at, n));
    lm_kernels_generic()->dequant[W->type](wr, wd, n);
    if (at == LM_DTYPE_F32) {
        memcpy(xd, x, sizeof(float) * (size_t)n);
    } else {
        lm_kernels_generic()->quant[at](x, xq, n);
        dequant_act(at, xq, xd, n);
    }
    double ref = 0;
    *scale = 0;
    for (int64_t i = 0; i < n; i++) {
        ref += (double)wd[i] * xd[i];
        *scale += fabs((double)wd[i] * xd[i]);
    }
    if (at == LM_DTYPE_Q8_1) { // the min term uses the stored f16 s = d*sum(q), as ggml does
        ref = 0;
        const struct lm_block_q8_1 *yb = xq;
        for (int64_t b = 0; b < n / 32; b++) {
            lm_f16 mh;
            memcpy(&mh, (const uint8_t *)wr + (size_t)b * lm_dtype_traits(W->type)->type_size + 2, 2);
            const double m = lm_f16_to_f32(mh);
            for (int j = 0; j < 32; j++) ref += ((double)wd[32 * b + j] - m) * xd[32 * b + j];
            ref += m * lm_f16_to_f32(yb[b].s);
        }
    }
    if (*scale == 0) *scale = 1e-30;
    free(wd); free(xd); free(xq);
    return ref;
}

// tolerances relative to sum |w_i x_i|: test_kernels_dot.c's generic-vs-reference (tol_ref)
// and ISA-vs-generic (tol_isa) per dtype; il q8_0 / q5_0 accumulate in their own order,
// within test_kernels_il.c's 1e-5 of vec_dot
static double tolerance(const struct lm_kernels *k, enum lm_dtype t, bool il) {
    const bool plain = t == LM_DTYPE_F32 || t == LM_DTYPE_F16 || t == LM_DTYPE_BF16;
    const bool kq = t == LM_DTYPE_Q2_K || t == LM_DTYPE_Q3_K || t == LM_DTYPE_Q4_K || t == LM_DTYPE_Q5_K ||
                    t == LM_DTYPE_Q6_K;
    double tol = plain ? 5e-7 : 1e-6;
    if (k != lm_kernels_generic() && !kq) tol += 1e-6;
    if (il) tol += 1e-5;
    return tol;
}

// ============================================================================
// tests
// ============================================================================

static const enum lm_dtype k_dtypes[] = {
    LM_DTYPE_F32, LM_DTYPE_F16, LM_DTYPE_BF16, LM_DTYPE_Q4_0, LM_DTYPE_Q4_1, LM_DTYPE_Q5_0, LM_DTYPE_Q5_1,
    LM_DTYPE_Q8_0, LM_DTYPE_Q2_K, LM_DTYPE_Q3_K, LM_DTYPE_Q4_K, LM_DTYPE_Q5_K, LM_DTYPE_Q6_K,
    LM_DTYPE_IQ4_NL, LM_DTYPE_IQ4_XS,
    LM_DTYPE_MXFP4,
};
static const int64_t k_rows[] = {1, 2, 3, 4, 5, 8, 9, 17};
#define N_ROWS (sizeof k_rows / sizeof k_rows[0])

static double g_max_err[LM_DTYPE_COUNT];

// One weight: every batch size of k_rows on 1 and 2 threads, against the reference and
// bit-identical to its single-row, single-thread results.
static void test_weight(const struct lm_kernels *k, enum lm_dtype t, int64_t n_out, int64_t n_in, bool il) {
    struct test_weight tw;
    weight_make(&tw, t, n_out, n_in, il);
    const struct lm_weight *W = &tw.w;
    float *X = malloc(sizeof(float) * MAX_ROWS * (size_t)n_in);
    for (int64_t i = 0; i < MAX_ROWS * n_in; i++) X[i] = rng_sym() * (rng_u64() % 64 == 0 ? 20.0f : 1.0f);
    memset(X + 3 * n_in, 0, sizeof(float) * (size_t)n_in); // an all-zero row
    // single rows: the reference bits
    float *one = malloc(sizeof(float) * MAX_ROWS * (size_t)n_out), *Y = malloc(sizeof(float) * MAX_ROWS * (size_t)n_out);
    for (int64_t i = 0; i < MAX_ROWS; i++) {
        float *y = one + i * n_out;
        run(k, &W, 1, X + i * n_in, 1, 1, &y, NULL);
    }
    const double tol = tolerance(k, t, il);
    int bad_ref = 0, bad_bits = 0;
    for (int64_t i = 0; i < MAX_ROWS; i++)
        for (int64_t r = 0; r < n_out; r++) {
            double scale;
            const double ref = ref_dot(W, r, X + i * n_in, &scale), e = fabs(one[i * n_out + r] - ref) / scale;
            if (e > g_max_err[t]) g_max_err[t] = e;
            if (e > tol && bad_ref++ < 3)
                fprintf(stderr, "%s %s%s n_out %lld n_in %lld token %lld row %lld: %.9g vs ref %.9g (rel %.3g > %.3g)\n",
                        k->name, lm_dtype_name(t), il ? " il" : "", (long long)n_out, (long long)n_in, (long long)i,
                        (long long)r, one[i * n_out + r], ref, e, tol);
        }
    for (size_t ni = 0; ni < N_ROWS; ni++)
        for (int nth = 1; nth <= N_THREADS; nth++) {
            const int64_t n = k_rows[ni];
            memset(Y, 0xff, sizeof(float) * MAX_ROWS * (size_t)n_out);
            run(k, &W, 1, X, n, nth, &Y, NULL);
            for (int64_t i = 0; i < n * n_out; i++)
                if (memcmp(&Y[i], &one[i], 4) != 0 && bad_bits++ < 3)
                    fprintf(stderr, "%s %s%s n_out %lld n_in %lld: %lld tokens on %d threads, token %lld row %lld: %.9g != %.9g alone\n",
                            k->name, lm_dtype_name(t), il ? " il" : "", (long long)n_out, (long long)n_in, (long long)n, nth,
                            (long long)(i / n_out), (long long)(i % n_out), Y[i], one[i]);
        }
    CHECKF(bad_ref == 0, "%s %s%s n_in %lld: %d results off the float64 reference", k->name, lm_dtype_name(t),
           il ? " il" : "", (long long)n_in, bad_ref);
    CHECKF(bad_bits == 0, "%s %s%s n_in %lld: %d results depend on the batch or thread split", k->name,
           lm_dtype_name(t), il ? " il" : "", (long long)n_in, bad_bits);
    free(X); free(one); free(Y);
    weight_free(&tw);
}

// the name of the path weight (t, il) takes for n rows alone on table k
static const char *path_of(const struct lm_kernels *k, enum lm_dtype t, bool il, int64_t n) {
    static struct test_weight tw[LM_DTYPE_COUNT][2];
    static float X[MAX_ROWS * 256];
    if (!tw[t][il].data) weight_make(&tw[t][il], t, 32, 256, il);
    const struct lm_weight *W = &tw[t][il].w;
    struct lm_matmul_plan p;
    lm_matmul_plan(&p, k, &g_ws, &W, 1, X, n, 0);
    CHECK(p.d.n_w == 1 && p.d.n_rows == n && p.d.w[0] == W && !strcmp(p.d.kern, k->name));
    CHECK(p.d.name[0] == lm_matmul_path_name(p.d.path[0]));
    CHECK(p.shared == (n > LM_PRIVATE_QUANT_ROWS && t != LM_DTYPE_F32));
    return p.d.name[0];
}

#define PATH(k, t, il, n, want)                                                                    \
    do {                                                                                           \
        const char *got_ = path_of(k, t, il, n);                                                   \
        CHECKF(!strcmp(got_, want), "%s %s%s, %d rows: path %s, want %s", (k)->name, lm_dtype_name(t), \
               (il) ? " il" : "", (int)(n), got_, want);                                            \
    } while (0)

static void test_paths(void) {
    const struct lm_kernels *g = lm_kernels_generic(), *a2 = lm_kernels_avx2(), *a5 = lm_kernels_avx512();
    const int64_t all[] = {1, 2, 3, 4, 5, 17};
    // scalar tables: il groups for every il dtype, otherwise one dot per (row, token)
    const struct lm_kernels *scalar[] = {g, a2};
    for (int s = 0; s < 2; s++) {
        if (!scalar[s]) continue;
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
            const int64_t n = all[i];
            PATH(scalar[s], LM_DTYPE_Q8_0, false, n, "per_row");
            PATH(scalar[s], LM_DTYPE_Q4_K, false, n, "per_row");
            PATH(scalar[s], LM_DTYPE_F16, false, n, "per_row");
            PATH(scalar[s], LM_DTYPE_Q8_0, true, n, "il16");
            PATH(scalar[s], LM_DTYPE_Q5_0, true, n, "il16");
            PATH(scalar[s], LM_DTYPE_Q6_K, true, n, "il16");
            PATH(scalar[s], LM_DTYPE_F16, true, n, "il16"); // no il_gemv in these tables
        }
    }
    if (!a5) {
        printf("no AVX-512 VNNI table on this CPU: its paths not checked\n");
        return;
    }
    // q5_0 / q8_0 in the file layout: the u8 GEMM at every batch size. The profiler used to
    // re-derive this as gemm_u8 only above LM_PRIVATE_QUANT_ROWS rows and so labelled decode
    // "per_row" (1 token) and 2-4 tokens "multitoken" (e.g. LUMEN_NO_REPACK=1 decode).
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        PATH(a5, LM_DTYPE_Q8_0, false, all[i], "gemm_u8");
        PATH(a5, LM_DTYPE_Q5_0, false, all[i], "gemm_u8");
        PATH(a5, LM_DTYPE_Q4_0, false, all[i], "per_row"); // q8_0 activations, no u8 or multi-token kernel
        PATH(a5, LM_DTYPE_F32, false, all[i], "per_row");
        PATH(a5, LM_DTYPE_Q8_0, true, all[i], "il16");
        PATH(a5, LM_DTYPE_Q4_K, true, all[i], "il16");
    }
    // multi-token dots in the file layout: one row at a time up to LM_PRIVATE_QUANT_ROWS
    // tokens, 16-row blocks x 8-token tiles beyond
    const enum lm_dtype mt[] = {LM_DTYPE_Q4_K, LM_DTYPE_Q6_K, LM_DTYPE_F16, LM_DTYPE_Q4_1, LM_DTYPE_Q5_1};
    for (size_t i = 0; i < sizeof mt / sizeof mt[0]; i++) {
        PATH(a5, mt[i], false, 1, "per_row");
        PATH(a5, mt[i], false, 2, "per_row_n");
        PATH(a5, mt[i], false, 4, "per_row_n");
        PATH(a5, mt[i], false, 5, "multitoken");
        PATH(a5, mt[i], false, 17, "multitoken");
    }
    // f16 il (the file's rows): il_gemv for decode, il groups beyond LM_IL_GEMV_MAX_NT
    PATH(a5, LM_DTYPE_F16, true, 1, "il_gemv");
    PATH(a5, LM_DTYPE_F16, true, 2, "il_gemv");
    PATH(a5, LM_DTYPE_F16, true, 3, "il16");
    PATH(a5, LM_DTYPE_F16, true, 17, "il16");
}

// Fused calls: several weights on one input, their paths and label, results equal to each
// weight alone (and within tolerance of the reference through test_weight's runs).
static void test_multi(const struct lm_kernels *k) {
    struct mix {
        enum lm_dtype t[3];
        bool il[3];
        int n_w;
    } mixes[] = {
        {{LM_DTYPE_Q5_0, LM_DTYPE_Q5_0, LM_DTYPE_Q8_0}, {true, true, true}, 3},  // Gemma QKV
        {{LM_DTYPE_Q4_K, LM_DTYPE_Q4_K, LM_DTYPE_Q6_K}, {true, true, true}, 3},  // llama QKV
        {{LM_DTYPE_Q8_0, LM_DTYPE_F16, LM_DTYPE_F16}, {true, true, false}, 3},   // q8 il rows take xil
        {{LM_DTYPE_Q4_0, LM_DTYPE_Q8_0, LM_DTYPE_Q5_0}, {false, true, false}, 3}, // flat + il q8_0 activations
        {{LM_DTYPE_F32, LM_DTYPE_Q4_1, LM_DTYPE_Q8_0}, {false, false, false}, 3},
        {{LM_DTYPE_F16, LM_DTYPE_F16}, {true, true}, 2},
    };
    const int64_t n_in = 512, n_out = 48;
    float *X = malloc(sizeof(float) * MAX_ROWS * n_in);
    for (int64_t i = 0; i < MAX_ROWS * n_in; i++) X[i] = rng_sym();
    for (size_t mi = 0; mi < sizeof mixes / sizeof mixes[0]; mi++) {
        const struct mix *m = &mixes[mi];
        struct test_weight tw[3];
        const struct lm_weight *Ws[3];
        float *Ys[3], *alone[3];
        for (int j = 0; j < m->n_w; j++) {
            weight_make(&tw[j], m->t[j], n_out, n_in, m->il[j]);
            Ws[j] = &tw[j].w;
            Ys[j] = malloc(sizeof(float) * MAX_ROWS * n_out);
            alone[j] = malloc(sizeof(float) * MAX_ROWS * n_out);
        }
        for (size_t ni = 0; ni < N_ROWS; ni++) {
            const int64_t n = k_rows[ni];
            struct lm_matmul_decision d;
            run(k, Ws, m->n_w, X, n, N_THREADS, Ys, &d);
            CHECK(d.n_w == m->n_w && d.n_rows == n);
            for (int j = 0; j < m->n_w; j++) {
                struct lm_matmul_decision dj;
                // alone, with the layout the fused call gave it
                struct lm_weight wj = *Ws[j];
                if (d.path[j] != LM_MATMUL_IL16 && d.path[j] != LM_MATMUL_IL_GEMV) wj.il = NULL;
                const struct lm_weight *pw = &wj;
                run(k, &pw, 1, X, n, 1, &alone[j], &dj);
                CHECKF(dj.path[0] == d.path[j], "%s mix %zu weight %d: path %s fused, %s alone", k->name, mi, j,
                       d.name[j], dj.name[0]);
                CHECKF(memcmp(Ys[j], alone[j], sizeof(float) * (size_t)(n * n_out)) == 0,
                       "%s mix %zu weight %d (%s %s), %lld rows: fused results differ from alone", k->name, mi, j,
                       lm_dtype_name(m->t[j]), d.name[j], (long long)n);
                for (int64_t i = 0; i < n; i++) { // spot check against the reference
                    double scale;
                    const double ref = ref_dot(Ws[j], 7, X + i * n_in, &scale);
                    const double e = fabs(Ys[j][i * n_out + 7] - ref) / scale;
                    CHECKF(e <= tolerance(k, m->t[j], d.path[j] == LM_MATMUL_IL16 || d.path[j] == LM_MATMUL_IL_GEMV),
                           "%s mix %zu weight %d (%s %s) token %lld: %.9g vs ref %.9g", k->name, mi, j,
                           lm_dtype_name(m->t[j]), d.name[j], (long long)i, Ys[j][i * n_out + 7], ref);
                }
            }
            // q8_0 il rows and f16 il rows share one buffer: f16 takes its file layout then
            if (mi == 2) CHECK(d.path[1] != LM_MATMUL_IL16 && d.path[1] != LM_MATMUL_IL_GEMV);
            if (mi == 5 && k->il_gemv[LM_DTYPE_F16]) CHECK(d.path[0] == (n <= 2 ? LM_MATMUL_IL_GEMV : LM_MATMUL_IL16));
            if (mi == 0 && n == 1) {
                char label[64];
                lm_matmul_decision_label(&d, label, sizeof label);
                char want[64];
                snprintf(want, sizeof want, "q5_0+q8_0_%s_il16", k->name);
                CHECKF(!strcmp(label, want), "label %s, want %s", label, want);
            }
            if (mi == 2 && n == 1 && k == lm_kernels_avx512()) {
                char label[64];
                lm_matmul_decision_label(&d, label, sizeof label);
                CHECKF(!strcmp(label, "q8_0+f16_avx512_il16+per_row"), "label %s", label);
            }
        }
        for (int j = 0; j < m->n_w; j++) { weight_free(&tw[j]); free(Ys[j]); free(alone[j]); }
    }
    free(X);
}

static void test_label_and_ws(void) {
    // labels: truncation keeps a terminated string
    struct test_weight tw;
    weight_make(&tw, LM_DTYPE_Q8_0, 32, 64, false);
    const struct lm_weight *W = &tw.w;
    float X[64] = {0};
    struct lm_matmul_plan p;
    lm_matmul_plan(&p, lm_kernels_generic(), &g_ws, &W, 1, X, 1, 1);
    char buf[64];
    CHECK(lm_matmul_decision_label(&p.d, buf, sizeof buf) == strlen("q8_0_generic_per_row"));
    CHECK(!strcmp(buf, "q8_0_generic_per_row"));
    CHECK(lm_matmul_decision_label(&p.d, buf, 6) == 5 && !strcmp(buf, "q8_0_"));
    CHECK(lm_matmul_decision_label(&p.d, buf, 1) == 0 && buf[0] == 0);
    weight_free(&tw);
    CHECK(!strcmp(lm_matmul_path_name(LM_MATMUL_GEMM_U8), "gemm_u8"));
    CHECK(!strcmp(lm_matmul_path_name(LM_MATMUL_PATH_COUNT), "?"));
    // fit: the widest input, and f32 il rows only for f16 weights on their il layout
    struct lm_matmul_ws_params f = {.n_threads = 1, .n_rows = 1};
    struct test_weight a, h;
    weight_make(&a, LM_DTYPE_Q8_0, 32, 640, true);
    weight_make(&h, LM_DTYPE_F16, 32, 96, false);
    lm_matmul_ws_fit(&f, &a.w);
    lm_matmul_ws_fit(&f, &h.w);
    CHECK(f.n_in == 640 && !f.f16_il);
    h.w.il = h.w.data;
    lm_matmul_ws_fit(&f, &h.w);
    CHECK(f.n_in == 640 && f.f16_il);
    weight_free(&a);
    weight_free(&h);
    // the size query is what init allocates
    CHECK(lm_matmul_ws_bytes(&g_ws.p) == g_ws.bytes && g_ws.bytes > 0);
    struct lm_matmul_ws_params q = g_ws.p;
    q.f16_il = false;
    CHECK(lm_matmul_ws_bytes(&q) <= g_ws.bytes);
    q.n_threads = 0;
    struct lm_matmul_ws ws;
    CHECK(lm_matmul_ws_init(&ws, &q) == LM_ERR_ARG && strstr(lm_error_msg(), "matmul: workspace"));
}

// AMX (il_gemm_amx, where the CPU and OS allow it): q4_K / q5_K / q6_K il weights take
// il_amx from LM_IL_AMX_MIN_NT tokens, with the same bits as the same table's il16 path
// without AMX: partial and whole 16-token tiles, super-block counts around il_amx.c's panel
// of 4, one and two threads, and fused calls (q8_0 il16 + two il_amx weights on one q8_K
// quantization).
static void test_amx(void) {
    const struct lm_kernels *a5 = lm_kernels_avx512();
    if (!a5 || !a5->il_gemm_amx[LM_DTYPE_Q6_K]) {
        printf("no AMX-INT8 on this CPU (or LUMEN_NO_AMX): il_amx not checked\n");
        return;
    }
    struct lm_kernels noamx = *a5;
    memset(noamx.il_gemm_amx, 0, sizeof noamx.il_gemm_amx);
    const struct lm_matmul_ws saved = g_ws;
    enum { R = 100, IN = 2304 };
    const struct lm_matmul_ws_params wp = {.n_threads = N_THREADS, .n_rows = R, .n_in = IN, .amx = true};
    CHECK(lm_matmul_ws_init(&g_ws, &wp) == LM_OK);
    CHECK(g_ws.xamx != NULL && lm_matmul_ws_bytes(&wp) == g_ws.bytes);
    float *X = malloc(sizeof(float) * R * IN);
    for (int64_t i = 0; i < (int64_t)R * IN; i++) X[i] = rng_sym();
    const enum lm_dtype types[] = {LM_DTYPE_Q6_K, LM_DTYPE_Q5_K, LM_DTYPE_Q4_K};
    const int64_t shapes[][2] = {{48, 256}, {64, 2304}, {32, 1024}};
    const int64_t rows[] = {LM_IL_AMX_MIN_NT - 1, LM_IL_AMX_MIN_NT, 33, 47, 48, R};
    float *Y = malloc(sizeof(float) * R * 64), *Y0 = malloc(sizeof(float) * R * 64);
    float *F[3] = {malloc(sizeof(float) * R * 32), malloc(sizeof(float) * R * 64), malloc(sizeof(float) * R * 32)};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const enum lm_dtype t = types[ti];
            const char *tn = lm_dtype_name(t);
            struct test_weight w, q8, q6;
            weight_make(&w, t, shapes[si][0], shapes[si][1], true);
            weight_make(&q8, LM_DTYPE_Q8_0, 32, shapes[si][1], true);
            weight_make(&q6, LM_DTYPE_Q6_K, 32, shapes[si][1], true);
            for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
                const int64_t n = rows[ri];
                const size_t bytes = sizeof(float) * (size_t)(n * shapes[si][0]);
                const enum lm_matmul_path want = n >= LM_IL_AMX_MIN_NT ? LM_MATMUL_IL_AMX : LM_MATMUL_IL16;
                const struct lm_weight *W = &w.w;
                struct lm_matmul_decision d;
                run(&noamx, &W, 1, X, n, 1, &Y0, &d);
                CHECK(d.path[0] == LM_MATMUL_IL16);
                for (int nth = 1; nth <= N_THREADS; nth++) {
                    memset(Y, 0xff, bytes);
                    run(a5, &W, 1, X, n, nth, &Y, &d);
                    CHECKF(d.path[0] == want, "%s %lld x %lld, %lld rows: path %s", tn, (long long)shapes[si][0],
                           (long long)shapes[si][1], (long long)n, d.name[0]);
                    CHECKF(memcmp(Y, Y0, bytes) == 0, "%s %lld x %lld, %lld rows, %d threads: il_amx differs from il16",
                           tn, (long long)shapes[si][0], (long long)shapes[si][1], (long long)n, nth);
                }
                if (n == LM_IL_AMX_MIN_NT && si == 0) {
                    char label[64], lwant[64];
                    lm_matmul_decision_label(&d, label, sizeof label);
                    snprintf(lwant, sizeof lwant, "%s_avx512_il_amx", tn);
                    CHECKF(!strcmp(label, lwant), "label %s, want %s", label, lwant);
                }
                // fused: each weight as alone on the table without AMX
                const struct lm_weight *Ws[3] = {&q8.w, &w.w, &q6.w};
                run(a5, Ws, 3, X, n, N_THREADS, F, &d);
                CHECK(d.path[0] == LM_MATMUL_IL16 && d.path[1] == want && d.path[2] == want);
                CHECKF(memcmp(F[1], Y0, bytes) == 0, "%s fused, %lld rows: differs", tn, (long long)n);
                for (int j = 0; j < 3; j += 2) {
                    run(&noamx, &Ws[j], 1, X, n, 1, &Y0, NULL);
                    CHECKF(memcmp(F[j], Y0, sizeof(float) * (size_t)(n * 32)) == 0, "%s fused with %s, %lld rows: differs",
                           lm_dtype_name(Ws[j]->type), tn, (long long)n);
                }
            }
            weight_free(&w);
            weight_free(&q8);
            weight_free(&q6);
        }
    free(Y);
    free(Y0);
    for (int j = 0; j < 3; j++) free(F[j]);
    free(X);
    lm_matmul_ws_free(&g_ws);
    g_ws = saved;
}

int main(void) {
    const struct lm_matmul_ws_params wp = {.n_threads = N_THREADS, .n_rows = MAX_ROWS, .n_in = MAX_IN, .f16_il = true,
                                           .q81_il = true};
    CHECK(lm_matmul_ws_init(&g_ws, &wp) == LM_OK);
    test_paths();
    test_label_and_ws();
    test_amx();
    const struct lm_kernels *tabs[] = {lm_kernels_generic(), lm_kernels_avx2(), lm_kernels_avx512()};
    const bool quick = getenv("LUMEN_TEST_QUICK") != NULL;
    for (size_t ti = 0; ti < sizeof tabs / sizeof tabs[0]; ti++) {
        const struct lm_kernels *k = tabs[ti];
        if (!k) continue;
        for (size_t di = 0; di < sizeof k_dtypes / sizeof k_dtypes[0]; di++) {
            const enum lm_dtype t = k_dtypes[di];
            const int64_t bs = lm_dtype_traits(t)->block_size;
            const int64_t n_ins[2] = {bs == 256 ? 256 : bs == 32 ? 96 : 90, bs == 256 ? 768 : bs == 32 ? 640 : 650};
            for (int ii = 0; ii < (quick ? 1 : 2); ii++) {
                test_weight(k, t, 40, n_ins[ii], false); // not a whole number of il groups
                test_weight(k, t, 48, n_ins[ii], false);
                if (lm_il_supported(t, 48, n_ins[ii]) && k->il_gemm[t]) test_weight(k, t, 48, n_ins[ii], true);
            }
        }
        // 45 il groups: the il16 path's chunks of groups (LM_IL_CHUNK_BYTES, 24 q8_0 groups of
        // 640 columns, 39 iq4_xs groups of 768) end inside the weight and inside a thread's rows
        if (k->il_gemm[LM_DTYPE_Q8_0]) test_weight(k, LM_DTYPE_Q8_0, 720, 640, true);
        if (k->il_gemm[LM_DTYPE_IQ4_XS]) test_weight(k, LM_DTYPE_IQ4_XS, 720, 768, true);
        test_multi(k);
    }
    printf("%-6s %12s\n", "dtype", "max_rel_err");
    for (size_t di = 0; di < sizeof k_dtypes / sizeof k_dtypes[0]; di++)
        printf("%-6s %12.3g\n", lm_dtype_name(k_dtypes[di]), g_max_err[k_dtypes[di]]);
    lm_matmul_ws_free(&g_ws);
    return lm_test_finish();
}
