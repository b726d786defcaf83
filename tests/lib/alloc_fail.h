// Allocation-failure hook of the test programs linked with
// -Wl,--wrap=malloc,--wrap=calloc,... (CMakeLists.txt, tests/test_alloc_fail*.c): every
// allocation from the program's static objects (lumen_core, lumen_server) is counted, and the
// Nth one after alloc_fail_arm(N) returns NULL (once). The libraries' own allocations (libc,
// jansson, libmicrohttpd) are not counted. Under ASan __real_malloc is ASan's malloc.
// LUMEN_ALLOC_FAIL_BACKTRACE=1 prints where each injected failure happens.
#ifndef LM_TESTS_ALLOC_FAIL_H
#define LM_TESTS_ALLOC_FAIL_H

#include <errno.h>
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);

static atomic_bool af_armed;    // counting
static atomic_long af_count;    // allocations since alloc_fail_arm
static atomic_long af_at;       // the one to fail (1-based); 0: none, count only
static atomic_bool af_failed;   // it happened

// Start counting; the nth allocation from now fails (0: none fails).
static inline void alloc_fail_arm(long n) {
    atomic_store(&af_count, 0);
    atomic_store(&af_at, n);
    atomic_store(&af_failed, false);
    atomic_store(&af_armed, true);
}

// Stop counting and failing; returns the allocations counted since alloc_fail_arm.
static inline long alloc_fail_disarm(void) {
    atomic_store(&af_armed, false);
    return atomic_load(&af_count);
}

// Whether the armed failure was injected.
static inline bool alloc_fail_injected(void) { return atomic_load(&af_failed); }

static inline bool af_fail_now(void) {
    if (!atomic_load_explicit(&af_armed, memory_order_relaxed)) return false;
    const long c = atomic_fetch_add(&af_count, 1) + 1;
    if (c != atomic_load(&af_at)) return false;
    atomic_store(&af_failed, true);
    if (getenv("LUMEN_ALLOC_FAIL_BACKTRACE")) { // where the failing allocation is (debugging)
        void *pc[32];
        fprintf(stderr, "alloc_fail: allocation %ld fails here:\n", c);
        backtrace_symbols_fd(pc, backtrace(pc, 32), STDERR_FILENO);
    }
    return true;
}

void *__wrap_malloc(size_t n);
void *__wrap_malloc(size_t n) { return af_fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_calloc(size_t k, size_t n) { return af_fail_now() ? NULL : __real_calloc(k, n); }
void *__wrap_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n) { return af_fail_now() ? NULL : __real_realloc(p, n); }
void *__wrap_aligned_alloc(size_t a, size_t n);
void *__wrap_aligned_alloc(size_t a, size_t n) { return af_fail_now() ? NULL : __real_aligned_alloc(a, n); }
int __wrap_posix_memalign(void **p, size_t a, size_t n);
int __wrap_posix_memalign(void **p, size_t a, size_t n) {
    return af_fail_now() ? ENOMEM : __real_posix_memalign(p, a, n);
}
char *__wrap_strdup(const char *s);
char *__wrap_strdup(const char *s) { return af_fail_now() ? NULL : __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n);
char *__wrap_strndup(const char *s, size_t n) { return af_fail_now() ? NULL : __real_strndup(s, n); }

#endif
