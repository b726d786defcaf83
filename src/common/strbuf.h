// The program side's growable string buffer (struct sbuf): the server and the CLI build
// text and JSON in it. On the public API only (lumen_common, like bench/); the library has
// its own in src/base/.
#ifndef LM_COMMON_STRBUF_H
#define LM_COMMON_STRBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

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

#endif
