// The library's growable text (strbuf.h): amortised doubling from 256 bytes, a NUL kept
// after the text, failures recorded in the buffer rather than returned by each append.
#include "base/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Room for n more bytes and the NUL; false (with nomem or over set) when there is none.
static bool reserve(struct lm_strbuf *b, size_t n) {
    if (b->over || b->nomem) return false;
    if (b->limit && b->n + n > b->limit) {
        b->over = true;
        return false;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->nomem = true;
            return false;
        }
        b->p = p;
        b->cap = cap;
    }
    return true;
}

void lm_strbuf_put(struct lm_strbuf *b, const char *s, size_t n) {
    if (!reserve(b, n)) return;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void lm_strbuf_puts(struct lm_strbuf *b, const char *s) { lm_strbuf_put(b, s, strlen(s)); }

void lm_strbuf_printf(struct lm_strbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if ((size_t)k < sizeof tmp) {
        lm_strbuf_put(b, tmp, (size_t)k);
        return;
    }
    // longer than the stack copy: format again straight into the buffer
    if (!reserve(b, (size_t)k)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

void lm_strbuf_free(struct lm_strbuf *b) {
    free(b->p);
    *b = (struct lm_strbuf){0};
}
