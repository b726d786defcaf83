// Read-bandwidth probe on lumen's thread pool (bandwidth.h).
#include "bandwidth.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#define BW_MAX_THREADS 256

double lm_bench_bw_for(const struct lm_bench_bw *bw, int n_bw, int threads) {
    double best = 0;
    int best_t = -1;
    for (int i = 0; i < n_bw; i++) {
        if (bw[i].threads == threads && bw[i].gbps > 0) return bw[i].gbps;
        if (bw[i].gbps > 0 && bw[i].threads > best_t) { best_t = bw[i].threads; best = bw[i].gbps; }
    }
    return best;
}

struct bw_job {
    const uint64_t *p;
    size_t n;
    uint64_t sums[BW_MAX_THREADS * 8]; // one cache line per thread
};

// Plain reduction: the compiler vectorizes it (integer adds are associative); one
// vector add per 32-64 bytes is far above what DRAM delivers per core.
static uint64_t sum_u64(const uint64_t *p, size_t n) {
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++) s += p[i];
    return s;
}

static void bw_worker(void *arg, int ith, int nth) {
    struct bw_job *j = arg;
    const size_t per = j->n / (size_t)nth;
    const size_t i0 = per * (size_t)ith, i1 = ith == nth - 1 ? j->n : i0 + per;
    j->sums[ith * 8] = sum_u64(j->p + i0, i1 - i0);
}

// Best of 3 timed passes (after one untimed) over buf with n threads; GB/s, -1 without a pool.
static double bw_probe(const uint64_t *buf, size_t n, int threads) {
    struct lm_threadpool *pool = NULL;
    if (threads > BW_MAX_THREADS || lm_threadpool_create(&pool, threads) != LM_OK) return -1;
    static struct bw_job job; // 16 KiB of sums: off the stack
    job.p = buf;
    job.n = n;
    double best = 0;
    volatile uint64_t sink = 0;
    for (int pass = 0; pass < 4; pass++) {
        const uint64_t t0 = lm_time_ns();
        lm_threadpool_run(pool, bw_worker, &job);
        const uint64_t dt = lm_time_ns() - t0;
        for (int i = 0; i < threads; i++) sink += job.sums[i * 8];
        const double gbps = (double)(n * sizeof *buf) / (double)dt;
        if (pass > 0 && gbps > best) best = gbps;
    }
    (void)sink;
    lm_threadpool_free(pool);
    return best;
}

enum lm_status lm_bench_bw_measure(int mib, const int *threads, int n, FILE *log,
                                   struct lm_bench_bw *out, int *n_out) {
    *n_out = 0;
    const size_t n_words = (size_t)mib * (1 << 20) / sizeof(uint64_t);
    uint64_t *buf = malloc(n_words * sizeof *buf);
    if (!buf) return lm_error_set(LM_ERR_NOMEM, "cannot allocate %d MiB for the bandwidth probe", mib);
    for (size_t i = 0; i < n_words; i++) buf[i] = i; // first touch: the pages exist before timing
    for (int i = -1; i < n; i++) { // 1 thread first
        const int t = i < 0 ? 1 : threads[i];
        bool dup = false;
        for (int k = 0; k < *n_out; k++) dup |= out[k].threads == t;
        if (dup) continue;
        out[*n_out] = (struct lm_bench_bw){.threads = t, .gbps = bw_probe(buf, n_words, t)};
        if (log)
            fprintf(log, "lumen bench: read bandwidth %d threads: %.2f GB/s\n", out[*n_out].threads,
                    out[*n_out].gbps);
        (*n_out)++;
    }
    free(buf);
    return LM_OK;
}
