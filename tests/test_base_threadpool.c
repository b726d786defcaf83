// Thread pool: every thread runs the job, barriers order phases, many runs in a row.
// LM_TEST_LABELS: unit;threads
#include <stdatomic.h>

#include "base/threadpool.h"
#include "lm_test.h"

struct job {
    struct lm_pool *pool;
    int n;
    int *a;
    atomic_int ran;
    atomic_long sum;
};

// phase 1: each thread writes its share; barrier; phase 2: each thread reads the
// other threads' shares (wrong without the barrier)
static void work(void *arg, int ith, int nth) {
    struct job *j = arg;
    atomic_fetch_add(&j->ran, 1);
    for (int i = ith; i < j->n; i += nth) j->a[i] = i + 1;
    lm_pool_barrier(j->pool);
    long s = 0;
    for (int i = (ith + 1) % nth; i < j->n; i += nth) s += j->a[i];
    atomic_fetch_add(&j->sum, s);
    lm_pool_barrier(j->pool);
    for (int i = ith; i < j->n; i += nth) j->a[i] = 0;
}

int main(void) {
    CHECK(lm_cpu_physical_cores() >= 1);
    for (int nt = 1; nt <= 4; nt++) {
        struct lm_pool *p = lm_pool_create(nt);
        CHECK(p != NULL);
        CHECK(lm_pool_size(p) == nt);
        int a[1000] = {0};
        for (int rep = 0; rep < 2000; rep++) {
            struct job j = {.pool = p, .n = 1000, .a = a};
            atomic_init(&j.ran, 0);
            atomic_init(&j.sum, 0);
            lm_pool_run(p, work, &j);
            if (atomic_load(&j.ran) != nt || atomic_load(&j.sum) != 1000L * 1001 / 2) {
                CHECKF(0, "nt %d rep %d: ran %d sum %ld", nt, rep, atomic_load(&j.ran),
                       atomic_load(&j.sum));
                break;
            }
        }
        struct lm_pool_stats st;
        lm_pool_stats_get(p, 0, &st);
        CHECK(nt == 1 || st.n_barriers == 4000);
        lm_pool_stats_reset(p);
        lm_pool_stats_get(p, 0, &st);
        CHECK(st.n_barriers == 0);
        lm_pool_free(p);
    }
    CHECK(lm_pool_create(100000) == NULL);
    return lm_test_finish();
}
