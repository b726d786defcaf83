// The text the JSON Schema converter writes (regex.c, schema*.c): GBNF string literals and
// the JSON encoding of one code point, appended to the library's lm_strbuf (base/strbuf.h).
#ifndef LM_GRAMMAR_GBNF_TEXT_H
#define LM_GRAMMAR_GBNF_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"

// A GBNF string literal ("...") whose text is the bytes s[0..n), escaped for GBNF.
void lm_gbnf_lit(struct lm_strbuf *b, const char *s, size_t n);
// The JSON encoding of code point c inside a string (json.dumps style, ensure_ascii off):
// \" \\ \b \f \n \r \t, \u00XX for other controls, UTF-8 otherwise. Returns the byte count.
size_t lm_json_encode_cp(uint32_t c, char out[8]);

#endif
