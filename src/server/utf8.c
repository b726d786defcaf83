// UTF-8 validation and repair for JSON, log-line escaping (utf8.h).
#include "utf8.h"

#include <stdio.h>
#include <string.h>

// Bytes of the valid UTF-8 sequence starting at s[0], or 0 (RFC 3629: no overlongs, no
// surrogates, nothing above U+10FFFF, no NUL, which JSON strings in jansson refuse).
static size_t utf8_seq(const unsigned char *s, size_t n) {
    const unsigned char c = s[0];
    if (c == 0) return 0;
    if (c < 0x80) return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if (n < len) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return len;
}

size_t utf8_valid_prefix(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        const size_t k = utf8_seq(u + i, n - i);
        if (!k) break;
        i += k;
    }
    return i;
}

bool utf8_repair_append(struct sbuf *b, const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        const size_t ok = utf8_valid_prefix(s + i, n - i);
        if (ok && !sbuf_append(b, s + i, ok)) return false;
        i += ok;
        if (i < n) { // one invalid byte (or a NUL) -> U+FFFD
            if (!sbuf_append(b, "\xEF\xBF\xBD", 3)) return false;
            i++;
        }
    }
    if (!b->p) return sbuf_append(b, "", 0);
    return true;
}

void log_escape(const char *s, char *out, size_t cap) {
    if (cap == 0) return;
    const size_t n = strlen(s);
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        const unsigned char ch = (unsigned char)s[i];
        size_t k = ch >= 0x80 ? utf8_seq((const unsigned char *)s + i, n - i) : 1;
        if (k == 2 && ch == 0xC2 && (unsigned char)s[i + 1] < 0xA0) k = 0; // C1 controls (U+0080..9F)
        if (ch >= 0x20 && ch != 0x7f && ch != '\\' && k > 0) { // printable ASCII or a valid sequence
            if (o + k >= cap) break;
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
            continue;
        }
        if (o + 4 >= cap) break;
        if (ch == '\\') {
            out[o++] = '\\';
            out[o++] = '\\';
        } else {
            snprintf(out + o, cap - o, "\\x%02x", ch);
            o += 4;
        }
        i++;
    }
    out[o] = 0;
}
