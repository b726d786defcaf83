// Scalar attention (kernels.h, lm_attn_fn): the statement of the float operations and their
// order that every table's attention reproduces (llama.cpp's single-token f16-KV path, the
// order attn_avx512.c explains), one float at a time, on f16 or q8_0 K/V rows (the generic
// table's attn and attn_q8). Also the scratch size of any table, and prefill's tiles of rows
// (lm_attn_tile: long windows chunk-major).
#pragma GCC optimize("fp-contract=off") // kernels_internal.h: only the fmaf written here fuse

#include <math.h>
#include <string.h>

#include "base/status.h"
#include "kernels/kernels_internal.h"

static inline int64_t round16(int64_t n) { return (n + 15) & ~(int64_t)15; }

// the scratch of one job over a window of at most LM_ATTN_CHUNK cells (or one chunk)
static int64_t kern_floats(int64_t hdk, int64_t hdv, int64_t n_cells) {
    const int64_t hk = round16(hdk), hv = round16(hdv), row = hk > hv ? hk : hv;
    const int64_t e = LM_ATTN_MAX_HEADS * round16(n_cells + 16); // chunks of 16 around the window
    // attn_avx512.c: (heads, 512) horizontal-sum buffer; generic: a K/V row and (heads, 64 slots, hdv)
    const int64_t avx512 = LM_ATTN_MAX_HEADS * 512, generic = row + LM_ATTN_MAX_HEADS * 64 * hv;
    return LM_ATTN_MAX_HEADS * hk + e + (avx512 > generic ? avx512 : generic);
}

// a long window's partials (lm_attn_chunked) after kern_floats(.., LM_ATTN_CHUNK + 16): the
// chunks' struct lm_attn_part, then their o (nh, hdv) each
static int64_t part_floats(int64_t n_chunks) {
    return round16(n_chunks * (int64_t)(sizeof(struct lm_attn_part) / sizeof(float)));
}

size_t lm_attn_scratch_floats(int64_t hdk, int64_t hdv, int64_t n_cells) {
    if (n_cells <= LM_ATTN_CHUNK) return (size_t)kern_floats(hdk, hdv, n_cells);
    const int64_t nch = n_cells / LM_ATTN_CHUNK + 1;
    return (size_t)(kern_floats(hdk, hdv, LM_ATTN_CHUNK + 16) + part_floats(nch) +
                    nch * LM_ATTN_MAX_HEADS * round16(hdv));
}

int32_t lm_attn_chunks(const struct lm_attn_job *j, int32_t *first) {
    *first = j->p0 / LM_ATTN_CHUNK;
    if (j->p - j->p0 + 1 <= LM_ATTN_CHUNK) return 1;
    return j->p / LM_ATTN_CHUNK - *first + 1;
}

void lm_attn_chunked(const struct lm_attn_job *j, lm_attn_fn fn) {
    int32_t k0;
    const int32_t n = lm_attn_chunks(j, &k0);
    float *tail = j->scratch + kern_floats(j->hdk, j->hdv, LM_ATTN_CHUNK + 16);
    struct lm_attn_part *part = (struct lm_attn_part *)tail;
    float *o = tail + part_floats(n);
    const size_t os = (size_t)j->nh * (size_t)j->hdv;
    struct lm_attn_job c = *j;
    for (int32_t k = 0; k < n; k++) {
        c.part = part + k;
        c.chunk = k0 + k;
        c.out = o + (size_t)k * os;
        fn(&c);
    }
    lm_attn_merge(j->nh, j->hdv, n, part, o, os, j->sinks, j->out);
}

// one tile row's partials (lm_attn_tile): n_chunks struct lm_attn_part, then their o, each
// (LM_ATTN_MAX_HEADS, round16(hdv)) floats
static int64_t tile_row_floats(int64_t hdv, int64_t n_chunks) {
    return part_floats(n_chunks) + n_chunks * LM_ATTN_MAX_HEADS * round16(hdv);
}

size_t lm_attn_tile_chunk_floats(int64_t hdk, int nr) {
    return (size_t)(16 * round16(hdk) + nr * LM_ATTN_MAX_HEADS * (round16(hdk) + LM_ATTN_CHUNK));
}

size_t lm_attn_tile_scratch_floats(int64_t hdk, int64_t hdv, int64_t n_cells, int nr) {
    const int64_t nch = n_cells / LM_ATTN_CHUNK + 1;
    return (size_t)(kern_floats(hdk, hdv, LM_ATTN_CHUNK + 16) + (int64_t)lm_attn_tile_chunk_floats(hdk, nr) +
                    nr * tile_row_floats(hdv, nch));
}

// the generic table's tile chunk: each row's chunk job on its own (the oracle of every table's)
void lm_attn_tile_chunk_generic(const struct lm_attn_job *rows, int nr, float *tile) {
    (void)tile;
    for (int r = 0; r < nr; r++) lm_attn_generic(&rows[r]);
}

void lm_attn_tile(const struct lm_attn_job *rows, int nr, lm_attn_fn fn, lm_attn_tile_fn tfn, float *scratch) {
    LM_ASSERT(nr >= 1 && nr <= LM_ATTN_TILE);
    int32_t first[LM_ATTN_TILE], n[LM_ATTN_TILE], kmin = INT32_MAX, kmax = -1, nmax = 1;
    for (int r = 0; r < nr; r++) {
        LM_ASSERT(rows[r].hdk == rows[0].hdk && rows[r].hdv == rows[0].hdv);
        n[r] = lm_attn_chunks(&rows[r], &first[r]);
        if (n[r] == 1) { // a short window: whole, as fn alone
            struct lm_attn_job w = rows[r];
            w.scratch = scratch;
            w.part = NULL;
            fn(&w);
            continue;
        }
        if (first[r] < kmin) kmin = first[r];
        if (first[r] + n[r] - 1 > kmax) kmax = first[r] + n[r] - 1;
        if (n[r] > nmax) nmax = n[r];
    }
    if (kmax < 0) return;
    const int64_t hdv = rows[0].hdv, os = LM_ATTN_MAX_HEADS * round16(hdv), rs = tile_row_floats(hdv, nmax);
    // scratch: the rows' kernel scratch, the tile chunk's (tfn), then each row's partials
    float *tile = scratch + kern_floats(rows[0].hdk, hdv, LM_ATTN_CHUNK + 16);
    float *tail = tile + lm_attn_tile_chunk_floats(rows[0].hdk, nr);
    for (int32_t k = kmin; k <= kmax; k++) { // chunk-major: chunk k's cells stay in L2 across rows
        struct lm_attn_job c[LM_ATTN_TILE];
        int m = 0;
        for (int r = 0; r < nr; r++) {
            if (n[r] == 1 || k < first[r] || k >= first[r] + n[r]) continue;
            float *t = tail + r * rs;
            c[m] = rows[r];
            c[m].scratch = scratch;
            c[m].part = (struct lm_attn_part *)t + (k - first[r]);
            c[m].chunk = k;
            c[m].out = t + part_floats(nmax) + (k - first[r]) * os;
            m++;
        }
        if (tfn) tfn(c, m, tile);
        else for (int r = 0; r < m; r++) fn(&c[r]);
    }
    for (int r = 0; r < nr; r++) {
        if (n[r] == 1) continue;
        const float *t = tail + r * rs;
        lm_attn_merge(rows[r].nh, hdv, n[r], (const struct lm_attn_part *)t, t + part_floats(nmax), (size_t)os,
                      rows[r].sinks, rows[r].out);
    }
}

void lm_attn_merge(int nh, int64_t hdv, int n, const struct lm_attn_part *part, const float *o,
                   size_t o_stride, const float *sinks, float *out) {
    for (int h = 0; h < nh; h++) {
        float M = sinks ? sinks[h] : -INFINITY;
        for (int k = 0; k < n; k++)
            if (part[k].m[h] > M) M = part[k].m[h];
        float *oh = out + (size_t)h * hdv;
        for (int64_t d = 0; d < hdv; d++) oh[d] = 0.0f;
        double S = 0.0;
        for (int k = 0; k < n; k++) {
            if (!(part[k].m[h] > -INFINITY)) continue; // no held cell (or NaN scores only)
            const float w = lm_expf_ggml(part[k].m[h] - M);
            const float *ok = o + (size_t)k * o_stride + (size_t)h * hdv;
            S += part[k].s[h] * (double)w;
            for (int64_t d = 0; d < hdv; d++) oh[d] = fmaf(ok[d], w, oh[d]);
        }
        if (sinks) S += (double)lm_expf_ggml(sinks[h] - M);
        const float inv = (float)(1.0 / S);
        for (int64_t d = 0; d < hdv; d++) oh[d] = oh[d] * inv;
    }
}

// cell c is in [p0, p] and held
static inline bool cell_valid(const struct lm_attn_job *j, int32_t c) {
    return c >= j->p0 && c <= j->p && (!j->present || ((j->present[c >> 6] >> (c & 63)) & 1));
}

// cell c's K (or V) row, converted to float (q8: q8_0 blocks, each value d * q, exact)
static void cell_row(const struct lm_attn_job *j, const uint8_t *b0, size_t stride, int32_t c,
                     int64_t n, float *out, bool q8) {
    const int32_t mask = (int32_t)((1u << j->block_shift) - 1);
    const uint8_t *blk = b0 + (size_t)j->blocks[c >> j->block_shift] * j->block_bytes;
    if (q8) {
        const struct lm_block_q8_0 *r = (const struct lm_block_q8_0 *)(blk + (size_t)(c & mask) * (stride / LM_QK8_0) * sizeof *r);
        for (int64_t i = 0; i < n; i++) out[i] = lm_f16_to_f32(r[i / LM_QK8_0].d) * (float)r[i / LM_QK8_0].qs[i % LM_QK8_0];
        return;
    }
    const lm_f16 *r = (const lm_f16 *)blk + (size_t)(c & mask) * stride;
    for (int64_t i = 0; i < n; i++) out[i] = lm_f16_to_f32(r[i]);
}

// ggml_vec_dot_f16 of a K row and a query (both as floats): 4 accumulators x 16 lanes over
// 64-element steps, (acc0 + acc2) + (acc1 + acc3), _mm512_reduce_add_ps's tree, the
// elements past the last whole 64 added in double
static float dot_ggml(const float *k, const float *q, int64_t n) {
    float acc[4][16] = {{0}};
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64)
        for (int a = 0; a < 4; a++)
            for (int l = 0; l < 16; l++) acc[a][l] = fmaf(k[i + 16 * a + l], q[i + 16 * a + l], acc[a][l]);
    float x[16];
    for (int l = 0; l < 16; l++) x[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    float s = lm_tree16(x);
    if (np < n) {
        double sum = (double)s;
        for (int64_t i = np; i < n; i++) sum += (double)(k[i] * q[i]);
        s = (float)sum;
    }
    return s;
}

// one window (or one chunk's cells, with part: its partial, kernels.h)
static void attn_window(const struct lm_attn_job *j, struct lm_attn_part *part) {
    const int nh = j->nh;
    const int64_t hdk = j->hdk, hdv = j->hdv;
    const int32_t base = j->p0 & ~15, end = (j->p + 16) & ~15; // 16-cell chunks of the softmax sums
    const int64_t ew = end - base;
    // scratch (lm_attn_scratch_floats): qf (nh, hdk), e (nh, ew), a K/V row, acc (nh, 64, hdv)
    float *qf = j->scratch;
    float *e = qf + LM_ATTN_MAX_HEADS * round16(hdk);
    float *row = e + LM_ATTN_MAX_HEADS * round16(ew);
    float *acc = row + (round16(hdk) > round16(hdv) ? round16(hdk) : round16(hdv));

    // q rounded to f16, as llama.cpp's f16 K dot product does (a q8_0 K: q as it is)
    for (int64_t i = 0; i < nh * hdk; i++) qf[i] = j->k_q8 ? j->q[i] : lm_f16_to_f32(lm_f32_to_f16(j->q[i]));

    // scores; cells outside the window or removed are -inf. The max skips NaN scores (as
    // "if (s > mx)"); the sign of a zero max does not matter (x - (+-0) is the same).
    float mx[LM_ATTN_MAX_HEADS];
    for (int h = 0; h < nh; h++) mx[h] = -INFINITY;
    for (int32_t c = base; c < end; c++) {
        const bool valid = cell_valid(j, c);
        if (valid) cell_row(j, j->kb, j->kstride, c, hdk, row, j->k_q8);
        for (int h = 0; h < nh; h++) {
            const float s = valid ? dot_ggml(row, qf + h * hdk, hdk) : -INFINITY;
            e[h * ew + (c - base)] = s;
            if (s > mx[h]) mx[h] = s;
        }
    }

    // softmax: e = exp(s - max) for the cells with a score above -inf (NaN scores count as
    // masked, as the vector compare does), summed per 16-cell chunk into a double;
    // p = e * (float)(1 / sum) rounded to f16
    for (int h = 0; h < nh; h++) {
        float *eh = e + h * ew;
        if (!part && j->sinks && j->sinks[h] > mx[h]) mx[h] = j->sinks[h]; // a sink joins the max
        double sum = 0.0;
        for (int64_t c = 0; c < ew; c += 16) {
            for (int l = 0; l < 16; l++) eh[c + l] = eh[c + l] > -INFINITY ? lm_expf_ggml(eh[c + l] - mx[h]) : 0.0f;
            sum += (double)lm_tree16(eh + c);
        }
        if (part) { // a chunk: e stays as it is, the merge normalises (and takes the sink)
            part->m[h] = mx[h];
            part->s[h] = sum;
            continue;
        }
        if (j->sinks) sum += (double)expf(j->sinks[h] - mx[h]); // ggml's soft_max: libm expf
        const float inv = (float)(1.0 / sum);
        for (int64_t c = 0; c < ew; c++) eh[c] = lm_f16_to_f32(lm_f32_to_f16(eh[c] * inv));
    }

    if (part) { // a chunk's p.v: per output dim one fmaf chain over the held cells in order
        for (int64_t i = 0; i < nh * hdv; i++) j->out[i] = 0.0f;
        for (int32_t c = j->p0; c <= j->p; c++) {
            if (!cell_valid(j, c)) continue;
            cell_row(j, j->vb, j->vstride, c, hdv, row, j->v_q8);
            for (int h = 0; h < nh; h++)
                for (int64_t d = 0; d < hdv; d++)
                    j->out[h * hdv + d] = fmaf(row[d], e[h * ew + (c - base)], j->out[h * hdv + d]);
        }
        return;
    }
    // p.v: 64 slot accumulators per output dim (slot = cell % 64). A slot the window reaches
    // starts at -0.0 (the identity of addition: its first fmaf equals the product), the
    // others stay +0.0 (a zeroed accumulator that sees only masked cells).
    const uint32_t nwin = (uint32_t)(j->p - j->p0 + 1);
    for (int h = 0; h < nh; h++)
        for (uint32_t s = 0; s < 64; s++) {
            const bool reached = nwin >= 64 || ((s - (uint32_t)j->p0) & 63) < nwin;
            for (int64_t d = 0; d < hdv; d++) acc[((size_t)h * 64 + s) * hdv + d] = reached ? -0.0f : 0.0f;
        }
    for (int32_t c = j->p0; c <= j->p; c++) {
        if (!cell_valid(j, c)) continue;
        cell_row(j, j->vb, j->vstride, c, hdv, row, j->v_q8);
        for (int h = 0; h < nh; h++) {
            const float pc = e[h * ew + (c - base)];
            float *a = acc + ((size_t)h * 64 + (c & 63)) * hdv;
            for (int64_t d = 0; d < hdv; d++) a[d] = fmaf(row[d], pc, a[d]);
        }
    }
    // per dim: lane l of ggml's 4 accumulators x 16 lanes is (slot l + slot l+32) +
    // (slot l+16 + slot l+48), then the tree over the 16 lanes
    for (int h = 0; h < nh; h++)
        for (int64_t d = 0; d < hdv; d++) {
            const float *a = acc + (size_t)h * 64 * hdv + d;
            float x[16];
            for (int l = 0; l < 16; l++)
                x[l] = (a[(size_t)l * hdv] + a[(size_t)(l + 32) * hdv]) +
                       (a[(size_t)(l + 16) * hdv] + a[(size_t)(l + 48) * hdv]);
            j->out[h * hdv + d] = lm_tree16(x);
        }
}

void lm_attn_generic(const struct lm_attn_job *j) {
    int32_t k0;
    if (!j->part) {
        if (lm_attn_chunks(j, &k0) > 1) lm_attn_chunked(j, lm_attn_generic);
        else attn_window(j, NULL);
        return;
    }
    struct lm_attn_job w = *j; // the chunk's cells of the window
    const int32_t c0 = j->chunk * LM_ATTN_CHUNK;
    w.p0 = j->p0 > c0 ? j->p0 : c0;
    w.p = j->p < c0 + LM_ATTN_CHUNK - 1 ? j->p : c0 + LM_ATTN_CHUNK - 1;
    attn_window(&w, j->part);
}
