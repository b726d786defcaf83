// The JSON-object-line parser of `lumen analyze` (jsonl.h): strict, one flat object per
// line, strings decoded (escapes, \uXXXX; a surrogate as U+FFFD) into the line's own buffer.
#define _GNU_SOURCE
#include "jsonl.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// UTF-8 of a \uXXXX codepoint (<= 0xFFFF): 1-3 bytes to o, returns how many. The library's
// base/utf8.h is internal (this library sees include/ only) and covers 4-byte sequences too.
static size_t utf8_put_bmp(unsigned c, char *o) {
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    o[0] = (char)(0xE0 | (c >> 12));
    o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[2] = (char)(0x80 | (c & 0x3F));
    return 3;
}

static bool jerr(struct jline *j, size_t col, const char *fmt, ...) {
    char msg[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(j->err, sizeof j->err, "column %zu: %s", col + 1, msg);
    return false;
}

static void skip_ws(const char *p, size_t *i) {
    while (p[*i] == ' ' || p[*i] == '\t' || p[*i] == '\r') (*i)++;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Parses a string at p[*i] == '"' into j->buf; returns its start or NULL.
static const char *parse_str(struct jline *j, const char *p, size_t *i) {
    size_t start = *i;
    (*i)++;
    char *out = j->buf + j->used;
    size_t o = 0;
    for (;;) {
        unsigned char c = (unsigned char)p[*i];
        if (c == 0) {
            jerr(j, start, "unterminated string");
            return NULL;
        }
        if (c < 0x20) {
            jerr(j, *i, "control character in string");
            return NULL;
        }
        (*i)++;
        if (c == '"') break;
        if (c != '\\') {
            out[o++] = (char)c;
            continue;
        }
        char e = p[(*i)++];
        switch (e) {
        case '"': out[o++] = '"'; break;
        case '\\': out[o++] = '\\'; break;
        case '/': out[o++] = '/'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u': {
            unsigned cp = 0;
            for (int k = 0; k < 4; k++) {
                int h = hexval(p[*i]);
                if (h < 0) {
                    jerr(j, *i, "bad \\u escape");
                    return NULL;
                }
                cp = cp * 16 + (unsigned)h;
                (*i)++;
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD; // no surrogate pairs in our schema
            o += utf8_put_bmp(cp, out + o);
            break;
        }
        default: jerr(j, *i - 1, "bad escape '\\%c'", e ? e : '0'); return NULL;
        }
    }
    out[o++] = 0;
    j->used += o;
    return out;
}

static bool parse_num(struct jline *j, const char *p, size_t *i, struct jfield *f) {
    size_t s = *i;
    bool is_int = true;
    if (p[*i] == '-') (*i)++;
    if (p[*i] == '0') (*i)++;
    else if (p[*i] >= '1' && p[*i] <= '9')
        while (p[*i] >= '0' && p[*i] <= '9') (*i)++;
    else return jerr(j, s, "bad number");
    if (p[*i] == '.') {
        is_int = false;
        (*i)++;
        if (!(p[*i] >= '0' && p[*i] <= '9')) return jerr(j, s, "bad number");
        while (p[*i] >= '0' && p[*i] <= '9') (*i)++;
    }
    if (p[*i] == 'e' || p[*i] == 'E') {
        is_int = false;
        (*i)++;
        if (p[*i] == '+' || p[*i] == '-') (*i)++;
        if (!(p[*i] >= '0' && p[*i] <= '9')) return jerr(j, s, "bad number");
        while (p[*i] >= '0' && p[*i] <= '9') (*i)++;
    }
    char tmp[64];
    size_t len = *i - s;
    if (len >= sizeof tmp) return jerr(j, s, "number too long");
    memcpy(tmp, p + s, len);
    tmp[len] = 0;
    f->type = JV_NUM;
    f->num = strtod(tmp, NULL);
    f->is_int = is_int;
    if (is_int) {
        errno = 0;
        f->i = strtoll(tmp, NULL, 10);
        if (errno) return jerr(j, s, "integer out of range");
    }
    return true;
}

// Parses one line (NUL-terminated, no newline) holding one flat JSON object.
bool lm_jline_parse(struct jline *j, const char *p, size_t len) {
    j->n = 0;
    j->used = 0;
    j->err[0] = 0;
    if (len + 1 > j->cap) {
        char *b = realloc(j->buf, len + 64);
        if (!b) return jerr(j, 0, "out of memory");
        j->buf = b;
        j->cap = len + 64;
    }
    size_t i = 0;
    skip_ws(p, &i);
    if (p[i] != '{') return jerr(j, i, "expected '{'");
    i++;
    skip_ws(p, &i);
    if (p[i] == '}') {
        i++;
    } else {
        for (;;) {
            skip_ws(p, &i);
            if (p[i] != '"') return jerr(j, i, "expected a key string");
            if (j->n >= JMAX_FIELDS) return jerr(j, i, "more than %d keys", JMAX_FIELDS);
            struct jfield *f = &j->f[j->n];
            memset(f, 0, sizeof *f);
            if (!(f->key = parse_str(j, p, &i))) return false;
            for (int k = 0; k < j->n; k++)
                if (!strcmp(j->f[k].key, f->key)) return jerr(j, i, "duplicate key '%s'", f->key);
            skip_ws(p, &i);
            if (p[i] != ':') return jerr(j, i, "expected ':'");
            i++;
            skip_ws(p, &i);
            char c = p[i];
            if (c == '"') {
                f->type = JV_STR;
                if (!(f->s = parse_str(j, p, &i))) return false;
            } else if (c == '-' || (c >= '0' && c <= '9')) {
                if (!parse_num(j, p, &i, f)) return false;
            } else if (!strncmp(p + i, "true", 4) || !strncmp(p + i, "false", 5)) {
                f->type = JV_BOOL;
                f->i = c == 't';
                i += c == 't' ? 4 : 5;
            } else if (!strncmp(p + i, "null", 4)) {
                f->type = JV_NULL;
                i += 4;
            } else if (c == '{' || c == '[') {
                return jerr(j, i, "nested value for key '%s' (schema v1 objects are flat)", f->key);
            } else {
                return jerr(j, i, c ? "unexpected character '%c'" : "unexpected end of line%.0s",
                            c ? c : ' ');
            }
            j->n++;
            skip_ws(p, &i);
            if (p[i] == ',') {
                i++;
                continue;
            }
            if (p[i] == '}') {
                i++;
                break;
            }
            return jerr(j, i, p[i] ? "expected ',' or '}'" : "unexpected end of line (truncated object?)");
        }
    }
    skip_ws(p, &i);
    if (i != len) return jerr(j, i, "trailing characters after the object");
    return true;
}

const struct jfield *lm_jget(const struct jline *j, const char *key) {
    for (int k = 0; k < j->n; k++)
        if (!strcmp(j->f[k].key, key)) return &j->f[k];
    return NULL;
}
