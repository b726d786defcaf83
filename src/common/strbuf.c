// The program side's growable string buffer (strbuf.h): doubling growth, a sticky oom flag.
#include "strbuf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool sbuf_reserve(struct sbuf *b, size_t extra) {
    if (b->oom) return false;
    if (b->n + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra + 1) {
        if (cap > SIZE_MAX / 2) { b->oom = true; return false; }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) { b->oom = true; return false; }
    b->p = p;
    b->cap = cap;
    return true;
}

bool sbuf_append(struct sbuf *b, const char *s, size_t n) {
    if (!sbuf_reserve(b, n)) return false;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return true;
}

bool sbuf_puts(struct sbuf *b, const char *s) { return sbuf_append(b, s, strlen(s)); }

bool sbuf_printf(struct sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char tmp[256];
    const int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0) return false;
    if ((size_t)k < sizeof tmp) return sbuf_append(b, tmp, (size_t)k);
    if (!sbuf_reserve(b, (size_t)k)) return false;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
    return true;
}

void sbuf_consume(struct sbuf *b, size_t n) {
    if (n >= b->n) {
        b->n = 0;
        if (b->p) b->p[0] = 0;
        return;
    }
    memmove(b->p, b->p + n, b->n - n);
    b->n -= n;
    b->p[b->n] = 0;
}

void sbuf_free(struct sbuf *b) {
    free(b->p);
    *b = (struct sbuf){0};
}

