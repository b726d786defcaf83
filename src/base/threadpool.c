// pthread pool with a sense-reversing spin-then-sleep barrier.
#include "base/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/status.h"
#include "base/timer.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LM_CPU_RELAX() _mm_pause()
#else
#define LM_CPU_RELAX() ((void)0)
#endif

// Spin iterations before sleeping (job wait) or yielding (barrier). Ops between barriers
// last microseconds during decode, so waiters almost always find work while spinning;
// but when the machine is oversubscribed (more runnable threads than cores: parallel
// tests, a shared box) a pure spin burns the time slice the descheduled partner needs:
// measured 2.4 tok/s instead of 66 with one core taken by another process. So barriers
// spin briefly, then sched_yield().
#define LM_SPIN_ITERS 20000
#define LM_BARRIER_SPIN 4000

struct lm_pool_thread {
    pthread_t tid;
    struct lm_pool *pool;
    int ith;
    struct lm_pool_stats stats;
    char pad[64];
};

struct lm_pool {
    int n;
    struct lm_pool_thread *threads;

    // job dispatch
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint job_gen; // incremented per lm_pool_run
    lm_pool_fn fn;
    void *arg;
    atomic_int n_done;
    atomic_int stop;
    atomic_int n_sleeping;

    // barrier
    atomic_int bar_count;
    atomic_uint bar_gen;
};

static _Thread_local int g_ith; // this thread's index in the pool (for barrier stats)

static void wait_for_job(struct lm_pool *p, unsigned seen) {
    for (int i = 0; i < LM_SPIN_ITERS; i++) {
        if (atomic_load_explicit(&p->job_gen, memory_order_acquire) != seen ||
            atomic_load(&p->stop))
            return;
        LM_CPU_RELAX();
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->n_sleeping, 1);
    while (atomic_load_explicit(&p->job_gen, memory_order_acquire) == seen &&
           !atomic_load(&p->stop))
        pthread_cond_wait(&p->cv, &p->mu);
    atomic_fetch_sub(&p->n_sleeping, 1);
    pthread_mutex_unlock(&p->mu);
}

static void *worker_main(void *v) {
    struct lm_pool_thread *t = v;
    struct lm_pool *p = t->pool;
    unsigned seen = 0;
    for (;;) {
        wait_for_job(p, seen);
        if (atomic_load(&p->stop)) break;
        seen = atomic_load_explicit(&p->job_gen, memory_order_acquire);
        g_ith = t->ith;
        p->fn(p->arg, t->ith, p->n);
        atomic_fetch_add_explicit(&p->n_done, 1, memory_order_acq_rel);
    }
    return NULL;
}

struct lm_pool *lm_pool_create(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 512) {
        lm_error_set(LM_ERR_ARG, "threadpool: %d threads requested (max 512)", n_threads);
        return NULL;
    }
    struct lm_pool *p = calloc(1, sizeof *p);
    if (p) p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p || !p->threads) {
        free(p);
        lm_error_set(LM_ERR_NOMEM, "threadpool: out of memory for a pool of %d threads", n_threads);
        return NULL;
    }
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    for (int i = 0; i < n_threads; i++) {
        p->threads[i].pool = p;
        p->threads[i].ith = i;
    }
    for (int i = 1; i < n_threads; i++) {
        if (pthread_create(&p->threads[i].tid, NULL, worker_main, &p->threads[i]) != 0) {
            lm_error_set(LM_ERR_NOMEM, "threadpool: pthread_create failed for thread %d", i);
            p->n = i; // only join the ones started
            lm_pool_free(p);
            return NULL;
        }
    }
    return p;
}

void lm_pool_free(struct lm_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i].tid, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->threads);
    free(p);
}

int lm_pool_size(const struct lm_pool *p) { return p->n; }

void lm_pool_run(struct lm_pool *p, lm_pool_fn fn, void *arg) {
    if (p->n == 1) {
        g_ith = 0;
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->n_done, 0);
    atomic_fetch_add_explicit(&p->job_gen, 1, memory_order_release);
    if (atomic_load(&p->n_sleeping) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    g_ith = 0;
    fn(arg, 0, p->n);
    int spins = 0;
    while (atomic_load_explicit(&p->n_done, memory_order_acquire) < p->n - 1) {
        if (++spins < LM_BARRIER_SPIN) LM_CPU_RELAX();
        else sched_yield();
    }
}

void lm_pool_barrier(struct lm_pool *p) {
    if (p->n == 1) return;
    struct lm_pool_stats *st = &p->threads[g_ith].stats;
    uint64_t t0 = lm_now_ns();
    unsigned gen = atomic_load_explicit(&p->bar_gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == p->n - 1) {
        atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->bar_gen, 1, memory_order_release);
    } else {
        int spins = 0;
        while (atomic_load_explicit(&p->bar_gen, memory_order_acquire) == gen) {
            if (++spins < LM_BARRIER_SPIN) {
                LM_CPU_RELAX();
            } else {
                sched_yield();
            }
        }
    }
    st->wait_ns += lm_now_ns() - t0;
    st->n_barriers++;
}

void lm_pool_stats_get(const struct lm_pool *p, int ith, struct lm_pool_stats *out) {
    *out = p->threads[ith].stats;
}

void lm_pool_stats_reset(struct lm_pool *p) {
    for (int i = 0; i < p->n; i++) memset(&p->threads[i].stats, 0, sizeof p->threads[i].stats);
}

int lm_cpu_physical_cores(void) {
    // Count distinct (physical id, core id) pairs in /proc/cpuinfo.
    FILE *f = fopen("/proc/cpuinfo", "r");
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online < 1) online = 1;
    if (!f) return (int)online;
    char line[256];
    int phys = -1, n = 0;
    int seen[1024][2];
    while (fgets(line, sizeof line, f)) {
        int v;
        if (sscanf(line, "physical id : %d", &v) == 1) phys = v;
        else if (sscanf(line, "core id : %d", &v) == 1) {
            int dup = 0;
            for (int i = 0; i < n; i++)
                if (seen[i][0] == phys && seen[i][1] == v) { dup = 1; break; }
            if (!dup && n < 1024) { seen[n][0] = phys; seen[n][1] = v; n++; }
        }
    }
    fclose(f);
    if (n < 1 || n > online) return (int)online;
    return n;
}
