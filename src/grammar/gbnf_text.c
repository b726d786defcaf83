// The text the JSON Schema converter writes (regex.c, schema*.c): GBNF string literals and
// the JSON encoding of one code point, appended to the library's lm_strbuf.
#include "grammar/gbnf_text.h"

#include <stdio.h>
#include <string.h>

#include "base/utf8.h"

void lm_gbnf_lit(struct lm_strbuf *b, const char *s, size_t n) {
    lm_strbuf_put(b, "\"", 1);
    size_t run = 0; // bytes copied as they are, flushed in one put
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char hex[8];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c < 0x20 || c == 0x7f) {
            snprintf(hex, sizeof hex, "\\x%02X", c);
            esc = hex;
        }
        if (!esc) {
            run++;
            continue;
        }
        lm_strbuf_put(b, s + i - run, run);
        run = 0;
        lm_strbuf_puts(b, esc);
    }
    lm_strbuf_put(b, s + n - run, run);
    lm_strbuf_put(b, "\"", 1);
}

size_t lm_json_encode_cp(uint32_t c, char out[8]) {
    static const char *const short_esc[0x20] = {
        [0x08] = "\\b", [0x09] = "\\t", [0x0A] = "\\n", [0x0C] = "\\f", [0x0D] = "\\r"};
    if (c == '"' || c == '\\') {
        out[0] = '\\';
        out[1] = (char)c;
        return 2;
    }
    if (c < 0x20) {
        if (short_esc[c]) {
            memcpy(out, short_esc[c], 2);
            return 2;
        }
        snprintf(out, 8, "\\u%04x", (unsigned)c);
        return 6;
    }
    return lm_utf8_put(c, out);
}
