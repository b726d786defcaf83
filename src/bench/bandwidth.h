// The read-bandwidth probe: the denominator of the decode roofline. A STREAM-like sum over a
// buffer much larger than the caches, on lumen's own thread pool, best of 3 passes.
#ifndef LM_BENCH_BANDWIDTH_H
#define LM_BENCH_BANDWIDTH_H

#include <stdio.h>

#include "lumen.h"

struct lm_bench_bw {
    int threads;
    double gbps; // bytes / s / 1e9; < 0 when the pool could not be started
};

// Reads a buffer of mib MiB with 1 thread, then with each count of threads[0, n) not measured
// yet, in that order: out (room for n + 1 entries) gets *n_out results. With log, a line per
// measurement ("lumen bench: read bandwidth 2 threads: 9.81 GB/s"). LM_ERR_NOMEM (with a
// message) when the buffer cannot be allocated.
enum lm_status lm_bench_bw_measure(int mib, const int *threads, int n, FILE *log,
                                   struct lm_bench_bw *out, int *n_out);
// The result for `threads`, else the one with the most threads measured; 0 if none.
double lm_bench_bw_for(const struct lm_bench_bw *bw, int n_bw, int threads);

#endif
