// Attention at depth (kernels.h, LM_ATTN_CHUNK: long windows in chunks, one merge): windows of
// 1, 127, 128, 4097 and 16385 cells and sliding windows across chunk and block boundaries,
// holes and released blocks, f16 and q8_0 K/V, 1-4 query heads. Every table matches the
// generic one bit for bit, the generic one matches a float64 reference, and the chunks
// computed one by one in any order (as threads share them) then merged give the same bits;
// merged with an attention sink per head, they match the float64 softmax with the sink.
// Prefill tiles (lm_attn_tile): rows at consecutive positions whose windows cross the chunk
// and block boundaries, sliding windows, sinks and holes give each row the bits of its job alone
// (head sizes 32-128, 80 and 96 with a tail past 64: the AVX-512 tile kernel's cells-in-lanes chain).
// Blocks head-major (the pool's layout, rows hd apart) and rows of two heads (a wider stride) in turn.
// LM_TEST_LABELS: unit
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "lm_test.h"

#define N_CELLS 16400
#define N_KV 2 // KV heads: the jobs read head 1's
#define N_BLK (N_CELLS / 16 + 1)
#define POOL_BLOCKS (N_BLK + 8)

static float rng_sym(void) { return (float)((lm_test_rng_u64() >> 40) * (2.0 / 16777216.0) - 1.0); }

struct pool {
    bool kq, vq;
    int64_t hdk, hdv;
    bool hm;                        // head-major blocks (the pool's, kv_cache.h: a head's 16 rows
                                    // together), else rows of both heads (a wider stride)
    size_t kfull, vfull, block_bytes; // bytes of a cell's K / V values (both heads); of a block
    size_t krow, vrow;              // bytes from one cell's row to the next
    size_t koff, voff;              // head 1's K / V in block 0 (from mem)
    uint8_t *mem;
    int32_t blocks[N_BLK], all[N_BLK];
    uint64_t present[N_CELLS / 64 + 1];
};

static size_t row_bytes(bool q8, int64_t n) { return q8 ? (size_t)n / 32 * 34 : (size_t)n * 2; }

static void fill_row(const struct lm_kernels *g, uint8_t *dst, bool q8, int64_t n) {
    float x[N_KV * 128];
    for (int64_t i = 0; i < n; i++) x[i] = rng_sym();
    if (q8) g->quant[LM_DTYPE_Q8_0](x, dst, n);
    else for (int64_t i = 0; i < n; i++) ((lm_f16 *)dst)[i] = lm_f32_to_f16(x[i]);
}

static void pool_init(struct pool *P, const struct lm_kernels *g, bool kq, bool vq, int64_t hdk, int64_t hdv,
                      bool hm) {
    P->kq = kq; P->vq = vq; P->hdk = hdk; P->hdv = hdv; P->hm = hm;
    P->kfull = row_bytes(kq, N_KV * hdk);
    P->vfull = row_bytes(vq, N_KV * hdv);
    P->krow = hm ? row_bytes(kq, hdk) : P->kfull;
    P->vrow = hm ? row_bytes(vq, hdv) : P->vfull;
    P->koff = hm ? 16 * P->krow : row_bytes(kq, hdk);
    P->voff = (P->kfull << 4) + (hm ? 16 * P->vrow : row_bytes(vq, hdv));
    P->block_bytes = (((P->kfull + P->vfull) << 4) + 63) & ~(size_t)63;
    P->mem = aligned_alloc(64, P->block_bytes * POOL_BLOCKS);
    memset(P->mem, 0, P->block_bytes * POOL_BLOCKS);
    for (int b = 0; b < POOL_BLOCKS; b++)
        for (int r = 0; r < 16; r++) {
            uint8_t *blk = P->mem + (size_t)b * P->block_bytes;
            // (q8_0 blocks of 34 bytes lie at the same offsets in either layout)
            fill_row(g, blk + (size_t)r * P->kfull, kq, N_KV * hdk);
            fill_row(g, blk + (P->kfull << 4) + (size_t)r * P->vfull, vq, N_KV * hdv);
        }
    static int32_t perm[POOL_BLOCKS];
    for (int i = 0; i < POOL_BLOCKS; i++) perm[i] = i;
    for (int i = POOL_BLOCKS - 1; i > 0; i--) {
        const int k = (int)(lm_test_rng_u64() % (uint64_t)(i + 1));
        const int32_t t = perm[i]; perm[i] = perm[k]; perm[k] = t;
    }
    for (int i = 0; i < N_BLK; i++) P->all[i] = perm[i];
}

// holes: random cells, and a run of 600 cells from a (whole blocks in it released, as
// kv_cache does) when the window is long; never cell p
static void make_holes(struct pool *P, int32_t p0, int32_t p) {
    memset(P->present, 0xff, sizeof P->present);
    for (int k = 0; k < 1 + (p - p0) / 8; k++) {
        const int32_t c = p0 + (int32_t)(lm_test_rng_u64() % (uint64_t)(p - p0 + 1));
        if (c != p) P->present[c >> 6] &= ~(1ull << (c & 63));
    }
    if (p - p0 > 1300) {
        const int32_t a = p0 + 100 + (int32_t)(lm_test_rng_u64() % (uint64_t)(p - p0 - 1200)), b = a + 600;
        for (int32_t c = a; c < b; c++) P->present[c >> 6] &= ~(1ull << (c & 63));
        for (int32_t blk = (a + 15) / 16; (blk + 1) * 16 <= b; blk++) P->blocks[blk] = -1;
    }
}

static bool held(const uint64_t *present, int32_t c) { return !present || ((present[c >> 6] >> (c & 63)) & 1); }

static double val(const struct pool *P, const uint8_t *b0, size_t row, bool q8, int32_t c, int64_t i) {
    const uint8_t *r = b0 + (size_t)P->blocks[c >> 4] * P->block_bytes + (size_t)(c & 15) * row;
    if (!q8) return lm_f16_to_f32(((const lm_f16 *)r)[i]);
    const struct lm_block_q8_0 *b = (const struct lm_block_q8_0 *)r + i / 32;
    return (double)lm_f16_to_f32(b->d) * b->qs[i % 32];
}

// float64 softmax(q . K^T) . V over the held cells of [p0, p] (q rounded to f16 for an f16
// K), with sinks[h] one more logit in the softmax (no value) unless sinks is NULL; *mag = sum
// of p |v| per output
static void reference(const struct pool *P, const struct lm_attn_job *j, const float *sinks, double *out,
                      double *mag) {
    static double s[N_CELLS];
    for (int h = 0; h < j->nh; h++) {
        double mx = sinks ? sinks[h] : -INFINITY, sum = 0.0;
        for (int32_t c = j->p0; c <= j->p; c++) {
            if (!held(j->present, c)) continue;
            double d = 0.0;
            for (int64_t i = 0; i < j->hdk; i++) {
                const float q = j->q[h * j->hdk + i];
                d += val(P, j->kb, P->krow, P->kq, c, i) * (P->kq ? q : lm_f16_to_f32(lm_f32_to_f16(q)));
            }
            s[c] = d;
            if (d > mx) mx = d;
        }
        for (int32_t c = j->p0; c <= j->p; c++)
            if (held(j->present, c)) { s[c] = exp(s[c] - mx); sum += s[c]; }
        if (sinks) sum += exp(sinks[h] - mx);
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
}

static const struct lm_kernels *tabs[3];
static int n_tabs, n_cases, bad_bits, bad_ref, bad_order, n_sinks;
static double worst_ref;

static void run_case(struct pool *P, int nh, int32_t p0, int32_t p, bool holes) {
    const int64_t hdk = P->hdk, hdv = P->hdv, no = nh * hdv;
    memcpy(P->blocks, P->all, sizeof P->all);
    if (holes) make_holes(P, p0, p);
    float q[LM_ATTN_MAX_HEADS * 128];
    const float qs = 3.0f / sqrtf((float)hdk);
    for (int64_t i = 0; i < nh * hdk; i++) q[i] = rng_sym() * qs;
    const size_t sf = lm_attn_scratch_floats(hdk, hdv, N_CELLS);
    float *scratch = aligned_alloc(64, (sf * sizeof(float) + 63) & ~(size_t)63);
    float out[3][LM_ATTN_MAX_HEADS * 128], got[LM_ATTN_MAX_HEADS * 128];
    struct lm_attn_job j = {
        .kb = P->mem + P->koff, .vb = P->mem + P->voff, .block_bytes = P->block_bytes, // KV head 1
        .blocks = P->blocks, .block_shift = 4, .present = holes ? P->present : NULL,
        .kstride = P->hm ? (size_t)hdk : (size_t)(N_KV * hdk), .vstride = P->hm ? (size_t)hdv : (size_t)(N_KV * hdv),
        .p0 = p0, .p = p,
        .hdk = (int32_t)hdk, .hdv = (int32_t)hdv, .nh = nh, .q = q, .scratch = scratch,
        .k_q8 = P->kq, .v_q8 = P->vq,
    };
    int32_t k0;
    const int32_t nch = lm_attn_chunks(&j, &k0);
    CHECKF((nch > 1) == (p - p0 + 1 > LM_ATTN_CHUNK), "window [%d, %d]: %d chunks", p0, p, nch);
    struct lm_attn_part *part = malloc(sizeof *part * (size_t)nch);
    float *po = malloc(sizeof(float) * (size_t)(nch * no));
    for (int t = 0; t < n_tabs; t++) {
        for (size_t i = 0; i < sf; i++) scratch[i] = NAN; // nothing may read scratch it did not write
        j.out = out[t];
        j.part = NULL;
        tabs[t]->attn_q8(&j);
        if (t > 0 && memcmp(out[t], out[0], sizeof(float) * (size_t)no) && bad_bits++ < 5)
            fprintf(stderr, "%s != generic: k%s v%s nh %d window [%d, %d] holes %d\n", tabs[t]->name,
                    P->kq ? "q8" : "f16", P->vq ? "q8" : "f16", nh, p0, p, holes);
        if (nch == 1) continue;
        // the chunks one by one, last first (threads may take them in any order), each with
        // scratch it has not seen: the merge gives the whole window's bits
        for (int32_t k = nch - 1; k >= 0; k--) {
            for (size_t i = 0; i < sf; i++) scratch[i] = NAN;
            j.part = part + k;
            j.chunk = k0 + k;
            j.out = po + (size_t)k * (size_t)no;
            tabs[t]->attn_q8(&j);
        }
        lm_attn_merge(nh, hdv, nch, part, po, (size_t)no, NULL, got);
        if (memcmp(got, out[t], sizeof(float) * (size_t)no) && bad_order++ < 5)
            fprintf(stderr, "%s: chunks merged != whole window [%d, %d]\n", tabs[t]->name, p0, p);
    }
    j.part = NULL;
    double ref[LM_ATTN_MAX_HEADS * 128], mag[LM_ATTN_MAX_HEADS * 128];
    reference(P, &j, NULL, ref, mag);
    for (int64_t i = 0; i < no; i++) { // as tests/test_kernels_attn.c: ~2^-10 of sum p |v|
        const double err = fabs((double)out[0][i] - ref[i]), lim = mag[i] / 512.0 + 1e-7;
        if (err / (mag[i] + 1e-30) > worst_ref) worst_ref = err / (mag[i] + 1e-30);
        if (!(err <= lim) && bad_ref++ < 5)
            fprintf(stderr, "generic vs float64: window [%d, %d] out %lld: %g vs %g (limit %g)\n", p0, p,
                    (long long)i, out[0][i], ref[i], lim);
    }
    // an attention sink per head, merged once (kernels.h): generic's chunks and merge against
    // the float64 softmax with the sink (sinks around the scores' scale, up to dominating)
    if (nch > 1) {
        float sinks[LM_ATTN_MAX_HEADS];
        for (int h = 0; h < nh; h++) sinks[h] = 4.0f * rng_sym() + (h == 3 ? 8.0f : 0.0f);
        lm_attn_merge(nh, hdv, nch, part, po, (size_t)no, sinks, got);
        reference(P, &j, sinks, ref, mag);
        for (int64_t i = 0; i < no; i++) {
            const double err = fabs((double)got[i] - ref[i]), lim = mag[i] / 512.0 + 1e-7;
            if (!(err <= lim) && bad_ref++ < 5)
                fprintf(stderr, "merge with sinks vs float64: window [%d, %d] out %lld: %g vs %g\n", p0, p,
                        (long long)i, got[i], ref[i]);
        }
        n_sinks++;
    }
    free(part); free(po); free(scratch);
    n_cases++;
}

// A tile of nr rows at positions p .. p + nr - 1 (windows [max(0, p_r - w + 1), p_r], w = 0:
// from 0), each with its own q and (when sinks) a sink per head: lm_attn_tile on every table
// gives each row the bits of that table's attn_q8 on the row's job alone.
static int n_tiles, bad_tile;
static void run_tile(struct pool *P, int nh, int32_t p, int nr, int32_t w, bool holes, bool sinks) {
    const int64_t hdk = P->hdk, hdv = P->hdv, no = nh * hdv;
    memcpy(P->blocks, P->all, sizeof P->all);
    const int32_t plast = p + nr - 1, pfirst = w > 0 && p - w + 1 > 0 ? p - w + 1 : 0;
    if (holes) {
        make_holes(P, pfirst, plast);
        for (int32_t c = p; c <= plast; c++) P->present[c >> 6] |= 1ull << (c & 63); // each row's p
    }
    static float q[LM_ATTN_TILE][LM_ATTN_MAX_HEADS * 128], want[LM_ATTN_TILE][LM_ATTN_MAX_HEADS * 128],
        got[LM_ATTN_TILE][LM_ATTN_MAX_HEADS * 128];
    float sk[LM_ATTN_MAX_HEADS];
    for (int h = 0; h < nh; h++) sk[h] = 4.0f * rng_sym() + (h == 3 ? 8.0f : 0.0f);
    const float qs = 3.0f / sqrtf((float)hdk);
    const size_t sf = lm_attn_tile_scratch_floats(hdk, hdv, N_CELLS, LM_ATTN_TILE),
                 s1 = lm_attn_scratch_floats(hdk, hdv, N_CELLS);
    float *scratch = aligned_alloc(64, ((sf > s1 ? sf : s1) * sizeof(float) + 63) & ~(size_t)63);
    struct lm_attn_job rows[LM_ATTN_TILE];
    for (int r = 0; r < nr; r++) {
        for (int64_t i = 0; i < nh * hdk; i++) q[r][i] = rng_sym() * qs;
        const int32_t pr = p + r;
        rows[r] = (struct lm_attn_job){
            .kb = P->mem + P->koff, .vb = P->mem + P->voff,
            .block_bytes = P->block_bytes, .blocks = P->blocks, .block_shift = 4,
            .present = holes ? P->present : NULL, .kstride = P->hm ? (size_t)hdk : (size_t)(N_KV * hdk),
            .vstride = P->hm ? (size_t)hdv : (size_t)(N_KV * hdv), .p0 = w > 0 && pr - w + 1 > 0 ? pr - w + 1 : 0, .p = pr,
            .hdk = (int32_t)hdk, .hdv = (int32_t)hdv, .nh = nh, .q = q[r], .scratch = scratch,
            .k_q8 = P->kq, .v_q8 = P->vq, .sinks = sinks ? sk : NULL,
        };
    }
    for (int t = 0; t < n_tabs; t++) {
        for (int r = 0; r < nr; r++) {
            rows[r].out = want[r];
            tabs[t]->attn_q8(&rows[r]);
            rows[r].out = got[r];
        }
        for (size_t i = 0; i < sf; i++) scratch[i] = NAN; // nothing may read scratch it did not write
        lm_attn_tile(rows, nr, tabs[t]->attn_q8, tabs[t]->attn_tile, scratch);
        for (int r = 0; r < nr; r++)
            if (memcmp(got[r], want[r], sizeof(float) * (size_t)no) && bad_tile++ < 5)
                fprintf(stderr, "%s tile of %d at %d (window %d, holes %d, sinks %d): row %d differs from its job\n",
                        tabs[t]->name, nr, p, w, holes, sinks, r);
    }
    free(scratch);
    n_tiles++;
}

int main(void) {
    tabs[n_tabs++] = lm_kernels_generic();
    if (lm_kernels_avx2()) tabs[n_tabs++] = lm_kernels_avx2();
    if (lm_kernels_avx512()) tabs[n_tabs++] = lm_kernels_avx512();
    // (K q8, V q8, hdk, hdv): big windows with small heads keep the generic oracle quick
    // (tiles only, for the AVX-512 tile kernel's head sizes: 128 and 80 with a tail past 64)
    static const int kinds[][4] = {{0, 0, 64, 64}, {1, 1, 64, 64}, {1, 0, 32, 96}, {0, 1, 96, 32},
                                   {0, 0, 128, 128}, {0, 1, 80, 64}, {1, 0, 128, 80}};
    const size_t n_full = 4; // kinds run the single-job cases too
    static const int32_t ends[] = {0, 126, 127, 511, 512, 4096, 16384}; // windows of p + 1 cells
    const bool quick = getenv("LUMEN_TEST_QUICK") != NULL;
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
        struct pool P;
        pool_init(&P, tabs[0], kinds[ki][0], kinds[ki][1], kinds[ki][2], kinds[ki][3], ki % 2 == 1);
        for (size_t e = 0; ki < n_full && e < sizeof ends / sizeof ends[0]; e++) {
            const int32_t p = ends[e];
            if (p == 16384 && quick && ki > 0) continue;
            const int nh = 1 + (int)((ki + e) % LM_ATTN_MAX_HEADS);
            run_case(&P, nh, 0, p, false);
            if (p > 1000) run_case(&P, 1 + nh % 4, 0, p, true);
        }
        // sliding windows: unaligned starts, lengths on either side of the chunk
        static const int32_t sw[][2] = {{700, 1211}, {700, 1212}, {1000, 4096}, {5, 1030}, {3333, 9001}};
        for (size_t w = 0; ki < n_full && w < sizeof sw / sizeof sw[0]; w++)
            run_case(&P, 1 + (int)((ki + w) % LM_ATTN_MAX_HEADS), sw[w][0], sw[w][1], w % 2 == 1);
        // tiles: across the unchunked/chunked edge (511 -> 512 cells), chunk ends (1023 | 1024,
        // 2047 | 2048) and 16-cell blocks, odd sizes, sliding windows (700, 513), sinks, holes
        static const int32_t tl[][5] = {{505, 8, 0, 0, 0}, {1019, 8, 0, 1, 1}, {1021, 3, 0, 0, 1},
                                        {2045, 5, 0, 1, 0}, {1500, 8, 700, 0, 1}, {1533, 7, 513, 1, 0},
                                        {1, 8, 0, 0, 0}, {3000, 1, 0, 0, 1}};
        for (size_t k = 0; k < sizeof tl / sizeof tl[0]; k++)
            run_tile(&P, 1 + (int)((ki + k) % LM_ATTN_MAX_HEADS), tl[k][0], tl[k][1], tl[k][2], tl[k][3] != 0,
                     tl[k][4] != 0);
        free(P.mem);
    }
    printf("%d tiles: every row bit-identical to its job alone\n", n_tiles);
    CHECKF(bad_tile == 0, "%d tile rows differ from their jobs", bad_tile);
    printf("%d cases (%d with sinks), %d tables; worst |generic - float64| / sum p|v| = %.3g\n", n_cases, n_sinks, n_tabs, worst_ref);
    CHECKF(bad_bits == 0, "%d cases differ from generic", bad_bits);
    CHECKF(bad_ref == 0, "%d outputs outside the float64 limit", bad_ref);
    CHECKF(bad_order == 0, "%d cases: merged chunks differ from the whole window", bad_order);
    return lm_test_finish();
}
