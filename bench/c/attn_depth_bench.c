// Decode attention at depth, one thread (not a ctest): one layer's window of W cells in the
// KV pool's layout (blocks of 16 cells holding every layer's K then V rows, each KV head's 16
// rows together: head-major; Llama 3.2 1B by default: 16 layers, 8 KV heads of 64, 4 query
// heads each, f16), run as runtime/ops.c's attn_split runs one thread's items: chunk-major,
// (chunk, KV head) jobs of the table's attn_q8, each chunk's partials. Layers taken in turn,
// so a window's rows come from memory.
//   pool    the pool's head-major blocks (a head's rows hd apart, 2 KB of K for hd 64 f16)
//   rows    the layout before it (row r of a block: every head's values; a head's rows
//           n_kv hd apart, 1 KB for 8 heads of 64): the kernel's own prefetch of its slices
//   read    plain loads of the same K / V bytes (the memory bound of one core)
//   hot     pool on a window that stays in cache (the compute bound)
// Rounds alternate the modes; the report gives each mode's median ns a cell and the median of
// per-round ratios to rows (issue 39, docs/scale.md).
// Args: [W (16384)] [rounds (7)] [q8: 0/1] [layers (16)] [KV heads (8)] [head dim (64)]
//       [query heads per KV head (4)] [blocks in order: 0 shuffled (default), 1 in order]
//       [odd: 1 a block an odd number of lines, as the pool (default); 0 its bytes exactly,
//        a power of two for the default shape: every block's rows on the same cache sets]
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"
#include "tensor/dtype.h"
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

enum { POOL, ROWS, READ, HOT, N_MODES };
static const char *mode_name[N_MODES] = {"pool", "rows", "read", "hot"};

struct cfg {
    int w, layers, n_kv, hd, nh;
    bool q8, in_order, odd;
    size_t head, row, layer, block; // bytes: a head's slice of a row, a row, a layer in a block, a block
    uint8_t *mem;
    int32_t *blocks;
    float *q, *scratch, *po;
    struct lm_attn_part *part;
};

// one layer's window, one thread's items in attn_split's order; hm: head-major blocks
static void run_window(const struct lm_kernels *K, struct cfg *c, int il, bool hm, int w) {
    const int nch = (w - 1) / LM_ATTN_CHUNK + 1;
    const uint8_t *kl = c->mem + (size_t)il * c->layer, *vl = kl + 16 * c->row;
    const size_t ho = hm ? 16 * c->head : c->head;                         // KV head g's start: g * ho
    const size_t stride = (size_t)(hm ? c->hd : c->n_kv * c->hd);          // elements, row to row
    for (int k = 0; k < nch; k++)
        for (int g = 0; g < c->n_kv; g++) {
            struct lm_attn_job j = {
                .kb = kl + (size_t)g * ho, .vb = vl + (size_t)g * ho, .block_bytes = c->block,
                .blocks = c->blocks, .block_shift = 4, .kstride = stride, .vstride = stride, .p0 = 0, .p = w - 1, .hdk = c->hd, .hdv = c->hd,
                .nh = c->nh, .q = c->q + (size_t)g * c->nh * c->hd, .scratch = c->scratch, .k_q8 = c->q8,
                .v_q8 = c->q8, .part = c->part + k * c->n_kv + g, .chunk = k,
                .out = c->po + ((size_t)k * c->n_kv + g) * c->nh * c->hd,
            };
            K->attn_q8(&j);
        }
}

static double read_window(struct cfg *c, int il) {
    double s = 0;
#if defined(__x86_64__) && defined(__AVX512F__)
    __m512 acc = _mm512_setzero_ps();
    for (int b = 0; b <= (c->w - 1) / 16; b++) {
        const uint8_t *p = c->mem + (size_t)c->blocks[b] * c->block + (size_t)il * c->layer;
        for (size_t o = 0; o + 64 <= 32 * c->row; o += 64)
            acc = _mm512_add_ps(acc, _mm512_castsi512_ps(_mm512_loadu_si512(p + o)));
    }
    s = _mm512_reduce_add_ps(acc);
#else
    (void)c; (void)il;
#endif
    return s;
}

int main(int argc, char **argv) {
    struct cfg c = {
        .w = argc > 1 ? atoi(argv[1]) : 16384, .q8 = argc > 3 && atoi(argv[3]) != 0,
        .layers = argc > 4 ? atoi(argv[4]) : 16, .n_kv = argc > 5 ? atoi(argv[5]) : 8,
        .hd = argc > 6 ? atoi(argv[6]) : 64, .nh = argc > 7 ? atoi(argv[7]) : 4,
        .in_order = argc > 8 && atoi(argv[8]) != 0, .odd = !(argc > 9 && atoi(argv[9]) == 0),
    };
    const int rounds = argc > 2 ? atoi(argv[2]) : 7;
    const struct lm_kernels *K = lm_kernels_avx512();
    if (!K) {
        fprintf(stderr, "attn_depth_bench: needs AVX-512 (the kernel it measures)\n");
        return 1;
    }
    if (c.w <= LM_ATTN_CHUNK || c.layers < 1 || c.n_kv < 1 || c.hd % 32 || c.hd > 256 || c.nh < 1 ||
        c.nh > LM_ATTN_MAX_HEADS || rounds < 1) {
        fprintf(stderr, "attn_depth_bench: bad arguments (W > %d, head dim a multiple of 32, 1-%d query heads)\n",
                LM_ATTN_CHUNK, LM_ATTN_MAX_HEADS);
        return 1;
    }
    c.head = c.q8 ? (size_t)c.hd / 32 * 34 : (size_t)c.hd * 2;
    c.row = c.head * (size_t)c.n_kv;
    c.layer = 2 * 16 * c.row;
    c.block = ((size_t)c.layers * c.layer + 63) & ~(size_t)63;
    if (c.odd && (c.block / 64) % 2 == 0) c.block += 64; // as kv_cache.c: an odd number of lines
    const int nb = (c.w - 1) / 16 + 1;
    c.mem = aligned_alloc(4096, (c.block * (size_t)nb + 4095) & ~(size_t)4095);
    c.blocks = malloc(sizeof(int32_t) * (size_t)nb);
    const int nch = (c.w - 1) / LM_ATTN_CHUNK + 1;
    c.q = malloc(sizeof(float) * (size_t)(c.n_kv * c.nh * c.hd));
    c.part = malloc(sizeof *c.part * (size_t)(nch * c.n_kv));
    c.po = malloc(sizeof(float) * (size_t)nch * (size_t)(c.n_kv * c.nh * c.hd));
    const size_t sf = lm_attn_scratch_floats(c.hd, c.hd, c.w + 1);
    c.scratch = aligned_alloc(64, (sf * sizeof(float) + 63) & ~(size_t)63);
    if (!c.mem || !c.blocks || !c.q || !c.part || !c.po || !c.scratch) {
        fprintf(stderr, "attn_depth_bench: out of memory\n");
        return 1;
    }
    // rows: q8_0 blocks or f16 of small values; blocks in a shuffled order (as a pool's); the
    // 34-byte q8_0 blocks lie at the same offsets in either layout
    uint64_t r = 88172645463325252ull;
    for (size_t i = 0; i < c.block * (size_t)nb; i += 2) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        const lm_f16 v = lm_f32_to_f16((float)((int)(r % 2001) - 1000) / 4000.0f);
        memcpy(c.mem + i, &v, 2);
    }
    if (c.q8) // valid scales: each 34-byte block's d a small f16
        for (size_t b = 0; b < (size_t)nb * c.layers * 32 * (size_t)c.n_kv * (size_t)(c.hd / 32); b++) {
            const size_t blk = b / ((size_t)c.layers * 32 * c.n_kv * (c.hd / 32)), rem = b % ((size_t)c.layers * 32 * c.n_kv * (c.hd / 32));
            const size_t rowi = rem / ((size_t)c.n_kv * (c.hd / 32)), bi = rem % ((size_t)c.n_kv * (c.hd / 32));
            const lm_f16 d = lm_f32_to_f16(0.01f);
            memcpy(c.mem + blk * c.block + rowi * c.row + bi * 34, &d, 2);
        }
    for (int i = 0; i < nb; i++) c.blocks[i] = i;
    for (int i = nb - 1; i > 0 && !c.in_order; i--) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        const int k = (int)(r % (uint64_t)(i + 1));
        const int32_t t = c.blocks[i]; c.blocks[i] = c.blocks[k]; c.blocks[k] = t;
    }
    for (int i = 0; i < c.n_kv * c.nh * c.hd; i++) c.q[i] = (float)((i * 37) % 101 - 50) / 400.0f;

    const int hot_w = 2 * LM_ATTN_CHUNK; // 2 chunks of one layer: ~2 MB for the default shape, cache-resident
    double *ns[N_MODES], *ratio[N_MODES];
    for (int m = 0; m < N_MODES; m++) {
        ns[m] = malloc(sizeof(double) * (size_t)rounds);
        ratio[m] = malloc(sizeof(double) * (size_t)rounds);
    }
    double sink = 0;
    int il = 0;
    for (int rd = 0; rd < rounds; rd++) {
        for (int mi = 0; mi < N_MODES; mi++) {
            const int m = rd % 2 ? N_MODES - 1 - mi : mi; // alternate the order
            const int reps = m == HOT ? 64 : c.layers;
            double t = 0;
            if (m == HOT) run_window(K, &c, 0, true, hot_w); // warm
            for (int k = 0; k < reps; k++) {
                il = (il + 1) % c.layers;
                const double t0 = now();
                if (m == READ) sink += read_window(&c, il);
                else if (m == HOT) run_window(K, &c, 0, true, hot_w);
                else run_window(K, &c, il, m == POOL, c.w);
                t += now() - t0;
            }
            ns[m][rd] = t * 1e9 / ((double)reps * (m == HOT ? hot_w : c.w));
        }
        for (int m = 0; m < N_MODES; m++) ratio[m][rd] = ns[ROWS][rd] / ns[m][rd];
        printf("round %d:", rd + 1);
        for (int m = 0; m < N_MODES; m++) printf(" %s %.1f", mode_name[m], ns[m][rd]);
        printf(" ns a cell\n");
    }
    const double bytes = 2.0 * (double)c.row; // a cell's K and V rows
    printf("W %d, %d layers, %d KV heads of %d, %d query heads each, %s K/V (%.0f bytes a cell), blocks of %zu "
           "bytes %s, %d rounds:\n", c.w, c.layers, c.n_kv, c.hd, c.nh, c.q8 ? "q8_0" : "f16", bytes, c.block,
           c.in_order ? "in order" : "shuffled", rounds);
    for (int m = 0; m < N_MODES; m++) {
        const double r2 = median(ratio[m], rounds), t = median(ns[m], rounds);
        printf("  %-6s median %6.1f ns a cell (%5.1f GB/s)   rows / %s median %.3f\n", mode_name[m], t,
               bytes / t, mode_name[m], r2);
    }
    if (sink == 12345.0) printf("%g\n", sink);
    return 0;
}
