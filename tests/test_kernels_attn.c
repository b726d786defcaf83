// Attention kernel (kernels.h, lm_attn_fn): every table against the generic one bit for bit,
// and the generic one against a float64 reference, over a paged pool: head sizes
// 32/64/80/128/256 and odd ones, 1-4 query heads, windows of odd lengths ending anywhere
// (crossing block boundaries) and long ones (prefetched), sliding windows, holes in the present bitmap and released
// blocks, 16- and 32-cell blocks, scores sharp enough to underflow exp, learned sinks (gpt-oss:
// one logit per head in the max and the sum; some above every score). Also: the same
// window laid out in other blocks gives the same bits.
// LM_TEST_LABELS: unit
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "lm_test.h"

#define N_CELLS 1400 // the longest window + 1
#define N_KV 2      // KV heads in a row: the job reads head 1's columns
#define POOL_BLOCKS 96

static float rng_sym(void) { return (float)((lm_test_rng_u64() >> 40) * (2.0 / 16777216.0) - 1.0); }

struct pool {
    int shift;            // log2 cells per block
    int64_t hdk, hdv;
    size_t kstride, vstride, block_bytes;
    uint8_t *mem;         // POOL_BLOCKS blocks: K rows (cells, kstride) then V rows (cells, vstride)
    int32_t blocks[N_CELLS / 16 + 1];  // the table a job reads
    int32_t all[N_CELLS / 16 + 1];     // the table before any block was released
    uint64_t present[N_CELLS / 64 + 1];
};

static void pool_init(struct pool *P, int shift, int64_t hdk, int64_t hdv) {
    P->shift = shift;
    P->hdk = hdk;
    P->hdv = hdv;
    P->kstride = (size_t)(N_KV * hdk);
    P->vstride = (size_t)(N_KV * hdv);
    P->block_bytes = (((P->kstride + P->vstride) << shift) * 2 + 63) & ~(size_t)63;
    P->mem = aligned_alloc(64, P->block_bytes * POOL_BLOCKS);
    for (size_t i = 0; i < P->block_bytes * POOL_BLOCKS / 2; i++)
        ((lm_f16 *)P->mem)[i] = lm_f32_to_f16(rng_sym());
    // head 1's last V dim -0.0 in every cell: its outputs are sums of -0.0 products, whose
    // sign shows how each p.v slot accumulator starts (-0.0 if the window reaches it)
    for (int b = 0; b < POOL_BLOCKS; b++)
        for (int r = 0; r < 1 << shift; r++)
            ((lm_f16 *)(P->mem + (size_t)b * P->block_bytes + (P->kstride << shift) * 2))[(size_t)r * P->vstride + 2 * hdv - 1] = 0x8000;
    // a permutation of the pool's blocks
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

// every cell held, then holes: some random cells and one random run (never cell p); a run
// covering whole blocks releases them (-1 in the table, as kv_cache does)
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

static bool held(const struct pool *P, const uint64_t *present, int32_t c) {
    return !present || ((present[c >> 6] >> (c & 63)) & 1);
}

// float64 softmax(q . K^T) . V over the held cells of [p0, p], q rounded to f16 as the
// contract says; *mag = sum of p |v| per output (the scale of the f16 rounding of p)
static void reference(const struct pool *P, const struct lm_attn_job *j, double *out, double *mag) {
    const int64_t hdk = j->hdk, hdv = j->hdv;
    const int32_t mask = (1 << P->shift) - 1;
    double *s = malloc(sizeof(double) * N_CELLS);
    for (int h = 0; h < j->nh; h++) {
        double mx = -INFINITY, sum = 0.0;
        for (int32_t c = j->p0; c <= j->p; c++) {
            if (!held(P, j->present, c)) continue;
            const lm_f16 *k = (const lm_f16 *)(j->kb + (size_t)j->blocks[c >> P->shift] * j->block_bytes) + (size_t)(c & mask) * j->kstride;
            double d = 0.0;
            for (int64_t i = 0; i < hdk; i++)
                d += (double)lm_f16_to_f32(k[i]) * (double)lm_f16_to_f32(lm_f32_to_f16(j->q[h * hdk + i]));
            s[c] = d;
            if (d > mx) mx = d;
        }
        if (j->sinks && (double)j->sinks[h] > mx) mx = j->sinks[h];
        if (j->sinks) sum += exp((double)j->sinks[h] - mx);
        for (int32_t c = j->p0; c <= j->p; c++)
            if (held(P, j->present, c)) { s[c] = exp(s[c] - mx); sum += s[c]; }
        for (int64_t d = 0; d < hdv; d++) { out[h * hdv + d] = 0.0; mag[h * hdv + d] = 0.0; }
        for (int32_t c = j->p0; c <= j->p; c++) {
            if (!held(P, j->present, c)) continue;
            const lm_f16 *v = (const lm_f16 *)(j->vb + (size_t)j->blocks[c >> P->shift] * j->block_bytes) + (size_t)(c & mask) * j->vstride;
            for (int64_t d = 0; d < hdv; d++) {
                out[h * hdv + d] += s[c] / sum * lm_f16_to_f32(v[d]);
                mag[h * hdv + d] += s[c] / sum * fabs(lm_f16_to_f32(v[d]));
            }
        }
    }
    free(s);
}

static const struct lm_kernels *tabs[3];
static int n_tabs;
static int n_cases, bad_bits, bad_ref, bad_layout;
static double worst_ref; // largest |out - ref| / (sum p |v|)

static void run_case(struct pool *P, int nh, int32_t p0, int32_t p, bool holes, float qscale,
                     const float *sinks) {
    const int64_t hdk = P->hdk, hdv = P->hdv;
    memcpy(P->blocks, P->all, sizeof P->all);
    if (holes) make_holes(P, p);
    float *q = malloc(sizeof(float) * LM_ATTN_MAX_HEADS * hdk);
    for (int64_t i = 0; i < nh * hdk; i++) q[i] = rng_sym() * qscale;
    const size_t sf = lm_attn_scratch_floats(hdk, hdv, N_CELLS);
    float *scratch = aligned_alloc(64, (sf * sizeof(float) + 63) & ~(size_t)63);
    float *out[4];
    struct lm_attn_job j = {
        .kb = P->mem + hdk * sizeof(lm_f16), // KV head 1
        .vb = P->mem + ((size_t)P->kstride << P->shift) * 2 + hdv * sizeof(lm_f16),
        .block_bytes = P->block_bytes, .blocks = P->blocks, .block_shift = P->shift,
        .present = holes ? P->present : NULL, .kstride = P->kstride, .vstride = P->vstride,
        .p0 = p0, .p = p, .hdk = (int32_t)hdk, .hdv = (int32_t)hdv, .nh = nh, .q = q,
        .scratch = scratch, .sinks = sinks,
    };
    for (int t = 0; t < n_tabs; t++) {
        out[t] = malloc(sizeof(float) * nh * hdv);
        for (size_t i = 0; i < sf; i++) scratch[i] = NAN; // nothing may read scratch it did not write
        j.out = out[t];
        tabs[t]->attn(&j);
        if (t > 0 && memcmp(out[t], out[0], sizeof(float) * nh * hdv)) {
            if (bad_bits++ < 5)
                fprintf(stderr, "%s != generic: hd %lld/%lld nh %d window [%d, %d] holes %d block %d sinks %d\n",
                        tabs[t]->name, (long long)hdk, (long long)hdv, nh, p0, p, holes, 1 << P->shift,
                        sinks != NULL);
        }
    }
    // float64 reference: p is rounded to f16 (2^-11 relative) and summed in float, so the
    // error is bounded by ~2^-10 of sum p |v|; 2^-9 leaves room for the scores' float sums
    double *ref = malloc(sizeof(double) * nh * hdv), *mag = malloc(sizeof(double) * nh * hdv);
    reference(P, &j, ref, mag);
    for (int64_t i = 0; i < nh * hdv; i++) {
        const double err = fabs((double)out[0][i] - ref[i]), lim = mag[i] / 512.0 + 1e-7;
        if (err / (mag[i] + 1e-30) > worst_ref) worst_ref = err / (mag[i] + 1e-30);
        if (!(err <= lim) && bad_ref++ < 5)
            fprintf(stderr, "generic vs float64: hd %lld/%lld window [%d, %d] out %lld: %g vs %g (limit %g)\n",
                    (long long)hdk, (long long)hdv, p0, p, (long long)i, out[0][i], ref[i], lim);
    }
    // the same cells in other blocks: same bits (each table)
    if (p < 300) {
        const int nb = (p >> P->shift) + 1;
        int32_t saved[N_CELLS / 16 + 1];
        memcpy(saved, P->blocks, sizeof saved);
        const int32_t off = POOL_BLOCKS / 2;
        for (int b = 0; b < nb; b++) {
            if (saved[b] < 0) continue;
            P->blocks[b] = (saved[b] + off) % POOL_BLOCKS; // might collide with another: copy by value below
        }
        // copy the K/V rows of each used block to its new place (after all moves are decided)
        uint8_t *copy = malloc(P->block_bytes * POOL_BLOCKS);
        memcpy(copy, P->mem, P->block_bytes * POOL_BLOCKS);
        for (int b = 0; b < nb; b++)
            if (saved[b] >= 0)
                memcpy(P->mem + (size_t)P->blocks[b] * P->block_bytes, copy + (size_t)saved[b] * P->block_bytes, P->block_bytes);
        float *o2 = malloc(sizeof(float) * nh * hdv);
        for (int t = 0; t < n_tabs; t++) {
            j.out = o2;
            tabs[t]->attn(&j);
            if (memcmp(o2, out[0], sizeof(float) * nh * hdv) && bad_layout++ < 5)
                fprintf(stderr, "%s: other blocks, other bits: window [%d, %d]\n", tabs[t]->name, p0, p);
        }
        memcpy(P->mem, copy, P->block_bytes * POOL_BLOCKS);
        memcpy(P->blocks, saved, sizeof saved);
        free(copy);
        free(o2);
    }
    for (int t = 0; t < n_tabs; t++) free(out[t]);
    free(ref); free(mag); free(q); free(scratch);
    n_cases++;
}

int main(void) {
    tabs[n_tabs++] = lm_kernels_generic();
    if (lm_kernels_avx2()) tabs[n_tabs++] = lm_kernels_avx2();
    if (lm_kernels_avx512()) tabs[n_tabs++] = lm_kernels_avx512();
    for (int t = 0; t < n_tabs; t++) CHECKF(tabs[t]->attn != NULL, "%s: no attention kernel", tabs[t]->name);

    static const int64_t hds[][2] = {{64, 64}, {80, 80}, {128, 128}, {256, 256}, {96, 64},
                                     {40, 24}, {17, 33}, {1, 1}, {144, 208}, {32, 32}};
    static const int32_t ends[] = {0, 1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 130, 255, 300, 511, 719,
                                   1399}; // beyond 1024 cells: attn_avx512's prefetching p.v
    static const int32_t windows[] = {1, 2, 3, 7, 16, 17, 64, 100, 512};
    for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++)
        for (int shift = 4; shift <= 5; shift++) {
            if (shift == 5 && hi % 3 != 0) continue; // 32-cell blocks: a few head sizes
            struct pool P;
            pool_init(&P, shift, hds[hi][0], hds[hi][1]);
            const float qs = 3.0f / sqrtf((float)hds[hi][0]); // scores of a few units
            for (size_t e = 0; e < sizeof ends / sizeof ends[0]; e++) {
                const int32_t p = ends[e];
                const int nh = 1 + (int)((hi + e) % LM_ATTN_MAX_HEADS);
                run_case(&P, nh, 0, p, false, qs, NULL);                // causal, every cell held
                run_case(&P, 1 + (nh % 4), 0, p, true, qs, NULL);       // causal with holes
                const int32_t w = windows[(hi + e) % (sizeof windows / sizeof windows[0])];
                const int32_t p0 = p - w + 1 > 0 ? p - w + 1 : 0;
                run_case(&P, nh, p0, p, e % 2 == 0, qs, NULL);          // sliding window
                if (e % 4 == 0) run_case(&P, nh, 0, p, e % 8 == 0, 40.0f * qs, NULL); // sharp: exp underflows
                // sinks: a few units, head 0's above every score when e is odd (it sets the max)
                float sk[LM_ATTN_MAX_HEADS];
                for (int h = 0; h < LM_ATTN_MAX_HEADS; h++) sk[h] = 3.0f * rng_sym() + (h == 0 && e % 2 ? 8.0f : 0.0f);
                run_case(&P, nh, e % 3 ? p0 : 0, p, e % 3 == 1, qs, sk);
            }
            free(P.mem);
        }
    printf("%d cases, %d tables; worst |generic - float64| / sum p|v| = %.3g\n", n_cases, n_tabs, worst_ref);
    CHECKF(bad_bits == 0, "%d cases differ from generic", bad_bits);
    CHECKF(bad_ref == 0, "%d outputs outside the float64 limit", bad_ref);
    CHECKF(bad_layout == 0, "%d cases depend on where the blocks lie", bad_layout);
    return lm_test_finish();
}
