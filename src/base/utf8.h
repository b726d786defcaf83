// UTF-8 encoding of one codepoint, for the tokenizer, the grammar compiler and the JSON
// readers that unescape \uXXXX. The caller passes a valid codepoint (<= 0x10FFFF); a
// surrogate (0xD800..0xDFFF) is encoded as is, which callers that read JSON map first.
#ifndef LM_BASE_UTF8_H
#define LM_BASE_UTF8_H

#include <stddef.h>
#include <stdint.h>

// Writes 1-4 bytes to o and returns how many.
static inline size_t lm_utf8_put(uint32_t c, char *o) {
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18));
    o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

#endif
