// The library's growable text (chat templates, GBNF text): appends that never fail loudly;
// the caller checks `nomem` (and `over`, with a limit) once at the end.
#ifndef LM_BASE_STRBUF_H
#define LM_BASE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

// NUL-terminated once anything was appended (p stays NULL until then). `over` is set once n
// would pass `limit` (0: no limit), `nomem` once realloc fails; after either, appends do
// nothing. Zero-initialise; free(p) (or lm_strbuf_free) when done.
struct lm_strbuf {
    char *p;
    size_t n, cap, limit;
    bool over, nomem;
};

void lm_strbuf_put(struct lm_strbuf *b, const char *s, size_t n);
void lm_strbuf_puts(struct lm_strbuf *b, const char *s);
void lm_strbuf_printf(struct lm_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void lm_strbuf_free(struct lm_strbuf *b);

// isspace() in the C locale (what llama.cpp's trims see), whatever the process's locale.
static inline bool lm_is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

#endif
