// The server's clock and id mixing: monotonic nanoseconds (the engine's event timestamps
// are CLOCK_MONOTONIC too) and SplitMix64 for request ids, salts and seeds.
#ifndef LM_SERVER_CLOCK_H
#define LM_SERVER_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t srv_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// SplitMix64's finalizer: a well-mixed 64-bit value from a counter or a seed.
static inline uint64_t srv_splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

#endif
