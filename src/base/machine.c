// The machine as include/lumen.h offers it to programs: the clock of the engine's event
// timestamps, the core count, and the thread pool lm_decode runs on (base/threadpool.h).
#include <stdlib.h>

#include "base/status.h"
#include "base/threadpool.h"
#include "base/timer.h"
#include "lumen.h"

uint64_t lm_time_ns(void) { return lm_now_ns(); }

// The public handle owns the internal pool (a distinct type: the internal one has more
// operations, barriers and statistics, that only the forward pass uses).
struct lm_threadpool {
    struct lm_pool *pool;
};

enum lm_status lm_threadpool_create(struct lm_threadpool **out, int32_t n_threads) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 512)
        return lm_error_set(LM_ERR_ARG, "lm_threadpool_create: %d threads (1 to 512)", n_threads);
    struct lm_threadpool *p = malloc(sizeof *p);
    if (!p) return lm_error_set(LM_ERR_NOMEM, "lm_threadpool_create: out of memory");
    p->pool = lm_pool_create(n_threads);
    if (!p->pool) {
        free(p);
        return lm_error_set(LM_ERR_NOMEM, "lm_threadpool_create: cannot start %d threads", n_threads);
    }
    *out = p;
    return LM_OK;
}

void lm_threadpool_run(struct lm_threadpool *p, void (*fn)(void *arg, int ith, int nth), void *arg) {
    lm_pool_run(p->pool, fn, arg);
}

void lm_threadpool_free(struct lm_threadpool *p) {
    if (!p) return;
    lm_pool_free(p->pool);
    free(p);
}
