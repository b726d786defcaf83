// Attention on a Q8_0 KV cache (kernels.h, attn_q8): every table against the generic one
// bit for bit, and the generic one against a float64 reference on the dequantized K/V rows,
// for q8_0 K and V, q8_0 K with f16 V and f16 K with q8_0 V, over a paged pool: head sizes
// 32 to 256, 1-4 query heads, odd windows crossing blocks, sliding windows, holes and
// released blocks, 16- and 32-cell blocks, learned sinks (gpt-oss). Also: other blocks, same
// bits; f16 jobs given to attn_q8 give attn's bits.
// LM_TEST_LABELS: unit
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "lm_test.h"

#define N_CELLS 600
#define N_KV 2 // KV heads in a row: the job reads head 1's columns
#define POOL_BLOCKS 48

static float rng_sym(void) { return (float)((lm_test_rng_u64() >> 40) * (2.0 / 16777216.0) - 1.0); }

struct pool {
    int shift;
    bool kq, vq;
    int64_t hdk, hdv;
    size_t krow, vrow, block_bytes; // bytes of a cell's K / V row (both heads)
    uint8_t *mem;
    int32_t blocks[N_CELLS / 16 + 1], all[N_CELLS / 16 + 1];
    uint64_t present[N_CELLS / 64 + 1];
};

static size_t row_bytes(bool q8, int64_t n) { return q8 ? (size_t)n / 32 * 34 : (size_t)n * 2; }

// one row of n random values (magnitudes varying per 32-block) stored as q8_0 or f16
static void fill_row(const struct lm_kernels *g, uint8_t *dst, bool q8, int64_t n) {
    float x[N_KV * 256];
    for (int64_t i = 0; i < n; i += 32) {
        const float sc = 0.25f + 2.0f * (float)(lm_test_rng_u64() % 8) / 8.0f;
        for (int64_t k = i; k < i + 32 && k < n; k++) x[k] = rng_sym() * sc;
    }
    if (q8) g->quant[LM_DTYPE_Q8_0](x, dst, n);
    else for (int64_t i = 0; i < n; i++) ((lm_f16 *)dst)[i] = lm_f32_to_f16(x[i]);
}

static void pool_init(struct pool *P, const struct lm_kernels *g, int shift, bool kq, bool vq,
                      int64_t hdk, int64_t hdv) {
    P->shift = shift; P->kq = kq; P->vq = vq; P->hdk = hdk; P->hdv = hdv;
    P->krow = row_bytes(kq, N_KV * hdk);
    P->vrow = row_bytes(vq, N_KV * hdv);
    P->block_bytes = (((P->krow + P->vrow) << shift) + 63) & ~(size_t)63;
    P->mem = aligned_alloc(64, P->block_bytes * POOL_BLOCKS);
    memset(P->mem, 0, P->block_bytes * POOL_BLOCKS);
    for (int b = 0; b < POOL_BLOCKS; b++)
        for (int r = 0; r < 1 << shift; r++) {
            uint8_t *blk = P->mem + (size_t)b * P->block_bytes;
            fill_row(g, blk + (size_t)r * P->krow, kq, N_KV * hdk);
            fill_row(g, blk + (P->krow << shift) + (size_t)r * P->vrow, vq, N_KV * hdv);
        }
    int32_t perm[POOL_BLOCKS];
    for (int i = 0; i < POOL_BLOCKS; i++) perm[i] = i;
    for (int i = POOL_BLOCKS - 1; i > 0; i--) {
        const int k = (int)(lm_test_rng_u64() % (uint64_t)(i + 1));
        const int32_t t = perm[i]; perm[i] = perm[k]; perm[k] = t;
    }
    const int nb = (N_CELLS + (1 << shift) - 1) >> shift;
    for (int i = 0; i < nb; i++) P->all[i] = perm[i];
    memcpy(P->blocks, P->all, sizeof P->all);
}

static void make_holes(struct pool *P, int32_t p) {
    memset(P->present, 0xff, sizeof P->present);
    for (int k = 0; k < 1 + p / 8; k++) {
        const int32_t c = (int32_t)(lm_test_rng_u64() % (uint64_t)(p + 1));
        if (c != p) P->present[c >> 6] &= ~(1ull << (c & 63));
    }
    if (p > 40) {
        const int32_t a = (int32_t)(lm_test_rng_u64() % (uint64_t)(p - 40)), b = a + 1 + (int32_t)(lm_test_rng_u64() % 40);
        for (int32_t c = a; c < b; c++) P->present[c >> 6] &= ~(1ull << (c & 63));
        const int32_t bs = 1 << P->shift;
        for (int32_t blk = (a + bs - 1) / bs; (blk + 1) * bs <= b; blk++) P->blocks[blk] = -1;
    }
}

static bool held(const uint64_t *present, int32_t c) { return !present || ((present[c >> 6] >> (c & 63)) & 1); }

// value i of cell c's row (head 1's columns at b0)
static double val(const struct pool *P, const uint8_t *b0, size_t row, bool q8, int32_t c, int64_t i) {
    const uint8_t *r = b0 + (size_t)P->blocks[c >> P->shift] * P->block_bytes + (size_t)(c & ((1 << P->shift) - 1)) * row;
    if (!q8) return lm_f16_to_f32(((const lm_f16 *)r)[i]);
    const struct lm_block_q8_0 *b = (const struct lm_block_q8_0 *)r + i / 32;
    return (double)lm_f16_to_f32(b->d) * b->qs[i % 32];
}

// float64 softmax(q . K^T) . V on the dequantized rows, q rounded to f16 only for an f16 K
static void reference(const struct pool *P, const struct lm_attn_job *j, double *out, double *mag) {
    double *s = malloc(sizeof(double) * N_CELLS);
    for (int h = 0; h < j->nh; h++) {
        double mx = -INFINITY, sum = 0.0;
        for (int32_t c = j->p0; c <= j->p; c++) {
            if (!held(j->present, c)) continue;
            double d = 0.0;
            for (int64_t i = 0; i < j->hdk; i++) {
                const float qv = j->q[h * j->hdk + i];
                d += val(P, j->kb, P->krow, P->kq, c, i) * (P->kq ? qv : lm_f16_to_f32(lm_f32_to_f16(qv)));
            }
            s[c] = d;
            if (d > mx) mx = d;
        }
        if (j->sinks && (double)j->sinks[h] > mx) mx = j->sinks[h];
        if (j->sinks) sum += exp((double)j->sinks[h] - mx);
        for (int32_t c = j->p0; c <= j->p; c++)
            if (held(j->present, c)) { s[c] = exp(s[c] - mx); sum += s[c]; }
        for (int64_t d = 0; d < j->hdv; d++) { out[h * j->hdv + d] = 0.0; mag[h * j->hdv + d] = 0.0; }
        for (int32_t c = j->p0; c <= j->p; c++) {
            if (!held(j->present, c)) continue;
            for (int64_t d = 0; d < j->hdv; d++) {
                const double v = val(P, j->vb, P->vrow, P->vq, c, d);
                out[h * j->hdv + d] += s[c] / sum * v;
                mag[h * j->hdv + d] += s[c] / sum * fabs(v);
            }
        }
    }
    free(s);
}

static const float *g_sinks; // the next cases' sinks (NULL: none)
static const struct lm_kernels *tabs[3];
static int n_tabs, n_cases, bad_bits, bad_ref, bad_layout;
static double worst_ref;

static void run_case(struct pool *P, int nh, int32_t p0, int32_t p, bool holes, float qscale) {
    const int64_t hdk = P->hdk, hdv = P->hdv;
    memcpy(P->blocks, P->all, sizeof P->all);
    if (holes) make_holes(P, p);
    float q[LM_ATTN_MAX_HEADS * 256];
    for (int64_t i = 0; i < nh * hdk; i++) q[i] = rng_sym() * qscale;
    const size_t sf = lm_attn_scratch_floats(hdk, hdv, N_CELLS);
    float *scratch = aligned_alloc(64, (sf * sizeof(float) + 63) & ~(size_t)63);
    float out[3][LM_ATTN_MAX_HEADS * 256], o2[LM_ATTN_MAX_HEADS * 256];
    const size_t ob = sizeof(float) * (size_t)(nh * hdv);
    struct lm_attn_job j = {
        .kb = P->mem + row_bytes(P->kq, hdk), // KV head 1
        .vb = P->mem + (P->krow << P->shift) + row_bytes(P->vq, hdv),
        .block_bytes = P->block_bytes, .blocks = P->blocks, .block_shift = P->shift,
        .present = holes ? P->present : NULL, .kstride = (size_t)(N_KV * hdk), .vstride = (size_t)(N_KV * hdv),
        .p0 = p0, .p = p, .hdk = (int32_t)hdk, .hdv = (int32_t)hdv, .nh = nh, .q = q,
        .scratch = scratch, .k_q8 = P->kq, .v_q8 = P->vq, .sinks = g_sinks,
    };
    for (int t = 0; t < n_tabs; t++) {
        for (size_t i = 0; i < sf; i++) scratch[i] = NAN;
        j.out = out[t];
        tabs[t]->attn_q8(&j);
        if (t > 0 && memcmp(out[t], out[0], ob) && bad_bits++ < 5)
            fprintf(stderr, "%s != generic: k%s v%s hd %lld/%lld nh %d window [%d, %d] holes %d block %d\n",
                    tabs[t]->name, P->kq ? "q8" : "f16", P->vq ? "q8" : "f16", (long long)hdk,
                    (long long)hdv, nh, p0, p, holes, 1 << P->shift);
    }
    double ref[LM_ATTN_MAX_HEADS * 256], mag[LM_ATTN_MAX_HEADS * 256];
    reference(P, &j, ref, mag);
    for (int64_t i = 0; i < nh * hdv; i++) {
        const double err = fabs((double)out[0][i] - ref[i]), lim = mag[i] / 512.0 + 1e-7;
        if (mag[i] > 1e-6 && err / mag[i] > worst_ref) worst_ref = err / mag[i];
        if (!(err <= lim) && bad_ref++ < 5)
            fprintf(stderr, "generic vs float64: k%d v%d hd %lld/%lld window [%d, %d] out %lld: %g vs %g\n",
                    P->kq, P->vq, (long long)hdk, (long long)hdv, p0, p, (long long)i, out[0][i], ref[i]);
    }
    if (p < 200) { // the same cells in other blocks
        const int nb = (p >> P->shift) + 1;
        int32_t saved[N_CELLS / 16 + 1];
        memcpy(saved, P->blocks, sizeof saved);
        for (int b = 0; b < nb; b++)
            if (saved[b] >= 0) P->blocks[b] = (saved[b] + POOL_BLOCKS / 2) % POOL_BLOCKS;
        uint8_t *copy = malloc(P->block_bytes * POOL_BLOCKS);
        memcpy(copy, P->mem, P->block_bytes * POOL_BLOCKS);
        for (int b = 0; b < nb; b++)
            if (saved[b] >= 0)
                memcpy(P->mem + (size_t)P->blocks[b] * P->block_bytes, copy + (size_t)saved[b] * P->block_bytes, P->block_bytes);
        for (int t = 0; t < n_tabs; t++) {
            j.out = o2;
            tabs[t]->attn_q8(&j);
            if (memcmp(o2, out[0], ob) && bad_layout++ < 5)
                fprintf(stderr, "%s: other blocks, other bits: window [%d, %d]\n", tabs[t]->name, p0, p);
        }
        memcpy(P->mem, copy, P->block_bytes * POOL_BLOCKS);
        memcpy(P->blocks, saved, sizeof saved);
        free(copy);
    }
    free(scratch);
    n_cases++;
}

// an f16 job through attn_q8: attn's bits
static void f16_passthrough(const struct lm_kernels *g) {
    struct pool P;
    pool_init(&P, g, 4, false, false, 64, 64);
    for (int t = 0; t < n_tabs; t++) {
        float q[2 * 64], a[2 * 64], b[2 * 64];
        for (int i = 0; i < 2 * 64; i++) q[i] = rng_sym();
        const size_t sf = lm_attn_scratch_floats(64, 64, N_CELLS);
        float *scratch = aligned_alloc(64, (sf * sizeof(float) + 63) & ~(size_t)63);
        struct lm_attn_job j = {.kb = P.mem, .vb = P.mem + (P.krow << 4), .block_bytes = P.block_bytes,
                                .blocks = P.blocks, .block_shift = 4, .kstride = 128, .vstride = 128,
                                .p0 = 0, .p = 100, .hdk = 64, .hdv = 64, .nh = 2, .q = q, .scratch = scratch};
        j.out = a;
        tabs[t]->attn(&j);
        j.out = b;
        tabs[t]->attn_q8(&j);
        CHECKF(!memcmp(a, b, sizeof a), "%s: an f16 job through attn_q8 differs from attn", tabs[t]->name);
        free(scratch);
    }
    free(P.mem);
}

int main(void) {
    tabs[n_tabs++] = lm_kernels_generic();
    if (lm_kernels_avx2()) tabs[n_tabs++] = lm_kernels_avx2();
    if (lm_kernels_avx512()) tabs[n_tabs++] = lm_kernels_avx512();
    for (int t = 0; t < n_tabs; t++) CHECKF(tabs[t]->attn_q8 != NULL, "%s: no q8_0 attention kernel", tabs[t]->name);
    static const int64_t hds[][2] = {{64, 64}, {256, 256}, {128, 128}, {32, 32}, {96, 64}, {160, 224}};
    static const bool types[][2] = {{true, true}, {true, false}, {false, true}};
    static const int32_t ends[] = {0, 1, 3, 15, 16, 17, 33, 63, 64, 65, 130, 255, 300, 599};
    static const int32_t windows[] = {1, 2, 7, 17, 64, 100, 512};
    for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
        for (size_t ti = 0; ti < 3; ti++)
            for (int shift = 4; shift <= 5; shift++) {
                if (shift == 5 && (hi + ti) % 3 != 0) continue;
                struct pool P;
                pool_init(&P, tabs[0], shift, types[ti][0], types[ti][1], hds[hi][0], hds[hi][1]);
                const float qs = 3.0f / sqrtf((float)hds[hi][0]);
                for (size_t e = 0; e < sizeof ends / sizeof ends[0]; e++) {
                    const int32_t p = ends[e];
                    const int nh = 1 + (int)((hi + e + ti) % LM_ATTN_MAX_HEADS);
                    if ((e + ti) % 2 == 0) run_case(&P, nh, 0, p, false, qs);
                    run_case(&P, 1 + (nh % 4), 0, p, true, qs);
                    const int32_t w = windows[(hi + e) % (sizeof windows / sizeof windows[0])];
                    const int32_t p0 = p - w + 1 > 0 ? p - w + 1 : 0;
                    run_case(&P, nh, p0, p, e % 2 == 0, qs);
                    if (e % 5 == 0) run_case(&P, nh, 0, p, false, 30.0f * qs);
                    float sk[LM_ATTN_MAX_HEADS]; // sinks; head 0's above every score when e is odd
                    for (int h = 0; h < LM_ATTN_MAX_HEADS; h++) sk[h] = 3.0f * rng_sym() + (h == 0 && e % 2 ? 8.0f : 0.0f);
                    g_sinks = sk;
                    run_case(&P, nh, e % 3 ? p0 : 0, p, e % 3 == 1, qs);
                    g_sinks = NULL;
                }
                free(P.mem);
            }
    f16_passthrough(tabs[0]);
    printf("%d cases, %d tables; worst |generic - float64| / sum p|v| = %.3g\n", n_cases, n_tabs, worst_ref);
    CHECKF(bad_bits == 0, "%d cases differ from generic", bad_bits);
    CHECKF(bad_ref == 0, "%d outputs outside the float64 limit", bad_ref);
    CHECKF(bad_layout == 0, "%d cases depend on where the blocks lie", bad_layout);
    return lm_test_finish();
}
