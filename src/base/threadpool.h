// Fixed pthread pool: lm_pool_run() runs one function on every thread (the caller
// is thread 0) and returns when all are done; inside it, lm_pool_barrier() syncs.
// Waits spin first (short ops between barriers), then sleep on a condition variable.
#ifndef LM_BASE_THREADPOOL_H
#define LM_BASE_THREADPOOL_H

#include <stdint.h>

struct lm_pool;

typedef void (*lm_pool_fn)(void *arg, int ith, int nth);

struct lm_pool *lm_pool_create(int n_threads); // NULL on failure (lm_error_msg set)
void lm_pool_free(struct lm_pool *p);
int lm_pool_size(const struct lm_pool *p);
void lm_pool_run(struct lm_pool *p, lm_pool_fn fn, void *arg);
// All nth threads of the current lm_pool_run must call it the same number of times.
void lm_pool_barrier(struct lm_pool *p);

// Per-thread accounting (ns spent waiting in barriers, number of barriers) since
// the last reset; for the profiler and bench.
struct lm_pool_stats {
    uint64_t wait_ns;
    uint64_t n_barriers;
};
void lm_pool_stats_get(const struct lm_pool *p, int ith, struct lm_pool_stats *out);
void lm_pool_stats_reset(struct lm_pool *p);

// Number of physical cores (falls back to online CPUs).
int lm_cpu_physical_cores(void);

#endif
