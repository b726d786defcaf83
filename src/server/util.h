// Small helpers shared by the server's files: a growable byte buffer, the monotonic
// clock (the engine's event timestamps are CLOCK_MONOTONIC too), UTF-8 repair for JSON.
#ifndef LM_SERVER_UTIL_H
#define LM_SERVER_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct sbuf {
    char *p;    // NUL-terminated when non-NULL
    size_t n, cap;
    bool oom;   // an append failed: the content is incomplete
};

bool sbuf_append(struct sbuf *b, const char *s, size_t n);
bool sbuf_puts(struct sbuf *b, const char *s);
bool sbuf_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sbuf_consume(struct sbuf *b, size_t n); // drops the first n bytes
void sbuf_free(struct sbuf *b);

// SplitMix64's finalizer: a well-mixed 64-bit value from a counter or a seed.
static inline uint64_t srv_splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline uint64_t srv_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// Appends s[0, n) to b with every invalid UTF-8 sequence replaced by U+FFFD, so the text
// can go into a JSON string (jansson refuses invalid UTF-8; token pieces and byte-fallback
// output may hold partial characters).
bool utf8_repair_append(struct sbuf *b, const char *s, size_t n);
// Length of the longest prefix of s[0, n) that is valid UTF-8.
size_t utf8_valid_prefix(const char *s, size_t n);
// Copies the NUL-terminated s to out[cap] for a log line: control characters (C0, DEL, C1)
// and bytes that are not valid UTF-8 become \xNN, a backslash becomes two, so client text (a
// path, a field) can neither start a forged line nor hide in terminal escapes. Truncates.
void log_escape(const char *s, char *out, size_t cap);

#endif
