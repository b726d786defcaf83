// Minimal test harness: CHECK macros that count failures, and a closing line
// "N passed, N failed" that CI reads.
#ifndef LM_TEST_H
#define LM_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int lm_test_pass, lm_test_fail;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (cond) {                                                                  \
            lm_test_pass++;                                                          \
        } else {                                                                     \
            lm_test_fail++;                                                          \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);          \
        }                                                                            \
    } while (0)

#define CHECKF(cond, ...)                                                            \
    do {                                                                             \
        if (cond) {                                                                  \
            lm_test_pass++;                                                          \
        } else {                                                                     \
            lm_test_fail++;                                                          \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);          \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
        }                                                                            \
    } while (0)

// xorshift64: deterministic random bits for test data (one stream per test program)
static uint64_t lm_test_rng_state = 0x2545f4914f6cdd1dull;
static inline uint64_t lm_test_rng_u64(void) {
    lm_test_rng_state ^= lm_test_rng_state << 13;
    lm_test_rng_state ^= lm_test_rng_state >> 7;
    lm_test_rng_state ^= lm_test_rng_state << 17;
    return lm_test_rng_state;
}

static inline int lm_test_finish(void) {
    printf("%d passed, %d failed\n", lm_test_pass, lm_test_fail);
    return lm_test_fail ? 1 : 0;
}

// Path of a file under the source tree (tests run with cwd = source dir too).
static inline const char *lm_test_path(const char *rel) {
    static char buf[4][1024];
    static int i;
    i = (i + 1) & 3;
    const char *root = getenv("LUMEN_SOURCE_DIR");
#ifdef LM_SOURCE_DIR
    if (!root) root = LM_SOURCE_DIR;
#endif
    if (!root) root = ".";
    snprintf(buf[i], sizeof buf[i], "%s/%s", root, rel);
    return buf[i];
}

// Default model path; tests labelled "model" skip (exit 0 with a SKIP line) when absent
// only if LUMEN_ALLOW_SKIP=1, otherwise fail: CI must have it.
static inline const char *lm_test_model_path(void) {
    const char *p = getenv("LUMEN_MODEL");
    return p ? p : lm_test_path("models/gemma-3-270m-q4_k_m.gguf");
}

#endif
