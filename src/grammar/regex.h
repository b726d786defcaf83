// A string builder for GBNF text, and the regex subset of JSON Schema's `pattern` -> a GBNF
// expression over the *JSON-encoded* characters of a string (between its quotes).
#ifndef LM_GRAMMAR_REGEX_H
#define LM_GRAMMAR_REGEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

// Growable text; `over` is set (and appends stop) once n would pass `limit` or malloc fails.
struct lm_gbnf_buf {
    char *p;
    size_t n, cap, limit;
    bool over, nomem;
};
void lm_gbnf_buf_put(struct lm_gbnf_buf *b, const char *s, size_t n);
void lm_gbnf_buf_puts(struct lm_gbnf_buf *b, const char *s);
void lm_gbnf_buf_printf(struct lm_gbnf_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
// A GBNF string literal ("...") whose text is the bytes s[0..n), escaped for GBNF.
void lm_gbnf_buf_lit(struct lm_gbnf_buf *b, const char *s, size_t n);
// The JSON encoding of code point c inside a string (json.dumps style, ensure_ascii off):
// \" \\ \b \f \n \r \t, \u00XX for other controls, UTF-8 otherwise. Returns the byte count.
size_t lm_json_encode_cp(uint32_t c, char out[8]);

// Helper rules an emitted expression may refer to; the caller defines them.
enum {
    LM_RX_USES_CHAR = 1, // `char`: any JSON string character (raw or escaped)
    LM_RX_USES_DOT = 2,  // `regex-dot`: any character but a newline
};
#define LM_RX_MAX_REPEAT 10000 // largest count of {m,n}
#define LM_RX_MAX_LEN 4096     // longest pattern

// Appends to out a GBNF expression matching exactly the JSON-encoded strings (one encoding
// per character, as lm_json_encode_cp) whose text matches `pattern` as JSON Schema reads it
// (ECMA-262, unanchored unless ^/$). The subset: literals, escapes \d \w \s \D \W \S \n \t
// \r \f \v \xHH \uHHHH and escaped punctuation, classes [...] [^...], ., groups (...) (?:...)
// (?<name>...), alternation, ? * + {m} {m,} {m,n} (lazy forms too), ^ at the start and $ at
// the end of a top-level alternative. LM_ERR_ARG ("json schema: <where>: pattern ...: what
// at offset N") for backreferences, lookaround, word boundaries, flags, and anything else.
enum lm_status lm_regex_to_gbnf(struct lm_gbnf_buf *out, const char *pattern, size_t len,
                                const char *where, unsigned *uses);

#endif
