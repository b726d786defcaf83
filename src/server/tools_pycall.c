// Gemma's ```tool_code calls (its function-calling guide's form): NAME(key=value, ...) in
// Python's call syntax, read into the name and the keyword arguments as a JSON object (tools.c's
// auto mode records them as a call). Literals only: strings, numbers, True / False / None,
// lists, tuples and dicts with string keys; anything else (positional arguments, expressions)
// is not a call.
#include <string.h>

#include "tools.h"

#define PYCALL_MAX_DEPTH 32

static size_t ws(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

static bool ident_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// A Python string at s[i] (' or "): as a JSON string into out, *i past its closing quote.
static enum pycall py_string(const char *s, size_t n, size_t *i, struct sbuf *out) {
    const char q = s[*i];
    sbuf_append(out, "\"", 1);
    for (size_t k = *i + 1; k < n; k++) {
        const unsigned char c = (unsigned char)s[k];
        if (c == (unsigned char)q) {
            *i = k + 1;
            sbuf_append(out, "\"", 1);
            return PYCALL_DONE;
        }
        if (c == '\n' || c == '\r') return PYCALL_BAD; // not in a one-line literal
        if (c == '"') {
            sbuf_append(out, "\\\"", 2);
        } else if (c < 0x20) {
            sbuf_printf(out, "\\u%04x", c);
        } else if (c != '\\') {
            sbuf_append(out, (const char *)&s[k], 1);
        } else {
            if (++k >= n) return PYCALL_MORE;
            const char e = s[k];
            if (e == '\\' || e == '"') sbuf_printf(out, "\\%c", e);
            else if (e == '\'') sbuf_append(out, "'", 1);
            else if (e == 'n' || e == 't' || e == 'r' || e == 'b' || e == 'f') sbuf_printf(out, "\\%c", e);
            else if (e == 'x' || e == 'u') { // \xHH, \uHHHH: the code point as JSON's \u escape
                const size_t nh = e == 'x' ? 2 : 4;
                if (k + nh >= n) return PYCALL_MORE;
                unsigned v = 0;
                for (size_t h = 1; h <= nh; h++) {
                    const int d = hexval(s[k + h]);
                    if (d < 0) return PYCALL_BAD;
                    v = v * 16 + (unsigned)d;
                }
                sbuf_printf(out, "\\u%04x", v);
                k += nh;
            } else {
                return PYCALL_BAD;
            }
        }
    }
    return PYCALL_MORE;
}

// A number at s[*i] in the form JSON shares with Python: -?digits(.digits)?([eE][+-]?digits)?
static enum pycall py_number(const char *s, size_t n, size_t *i, struct sbuf *out) {
    size_t k = *i;
    if (k < n && s[k] == '-') k++;
    const size_t d0 = k;
    while (k < n && s[k] >= '0' && s[k] <= '9') k++;
    if (k == d0 || (s[d0] == '0' && k - d0 > 1)) return k == n ? PYCALL_MORE : PYCALL_BAD;
    if (k < n && s[k] == '.') {
        const size_t f0 = ++k;
        while (k < n && s[k] >= '0' && s[k] <= '9') k++;
        if (k == f0) return k == n ? PYCALL_MORE : PYCALL_BAD;
    }
    if (k < n && (s[k] == 'e' || s[k] == 'E')) {
        k++;
        if (k < n && (s[k] == '+' || s[k] == '-')) k++;
        const size_t e0 = k;
        while (k < n && s[k] >= '0' && s[k] <= '9') k++;
        if (k == e0) return k == n ? PYCALL_MORE : PYCALL_BAD;
    }
    if (k == n) return PYCALL_MORE; // more digits may follow
    if (ident_char(s[k]) || s[k] == '.') return PYCALL_BAD;
    sbuf_append(out, s + *i, k - *i);
    *i = k;
    return PYCALL_DONE;
}

static enum pycall py_value(const char *s, size_t n, size_t *i, struct sbuf *out, int depth);

// The items of a list / tuple (open '[' or '(') or a dict ('{') at s[*i], up to its closing
// bracket (a trailing comma allowed), as a JSON array or object.
static enum pycall py_items(const char *s, size_t n, size_t *i, struct sbuf *out, int depth) {
    const char open = s[*i], close = open == '[' ? ']' : open == '(' ? ')' : '}';
    sbuf_append(out, open == '{' ? "{" : "[", 1);
    size_t k = ws(s, n, *i + 1);
    for (bool first = true;; first = false) {
        if (k >= n) return PYCALL_MORE;
        if (s[k] == close) break;
        if (!first) sbuf_append(out, ",", 1);
        if (open == '{') {
            if (s[k] != '"' && s[k] != '\'') return PYCALL_BAD; // JSON keys are strings
            enum pycall r = py_string(s, n, &k, out);
            if (r != PYCALL_DONE) return r;
            k = ws(s, n, k);
            if (k >= n) return PYCALL_MORE;
            if (s[k] != ':') return PYCALL_BAD;
            sbuf_append(out, ":", 1);
            k = ws(s, n, k + 1);
        }
        enum pycall r = py_value(s, n, &k, out, depth + 1);
        if (r != PYCALL_DONE) return r;
        k = ws(s, n, k);
        if (k >= n) return PYCALL_MORE;
        if (s[k] == ',') k = ws(s, n, k + 1);
        else if (s[k] != close) return PYCALL_BAD;
    }
    sbuf_append(out, open == '{' ? "}" : "]", 1);
    *i = k + 1;
    return PYCALL_DONE;
}

static enum pycall py_value(const char *s, size_t n, size_t *i, struct sbuf *out, int depth) {
    if (depth > PYCALL_MAX_DEPTH) return PYCALL_BAD;
    if (*i >= n) return PYCALL_MORE;
    const char c = s[*i];
    if (c == '"' || c == '\'') return py_string(s, n, i, out);
    if (c == '-' || (c >= '0' && c <= '9')) return py_number(s, n, i, out);
    if (c == '[' || c == '(' || c == '{') return py_items(s, n, i, out, depth);
    static const char *const py[] = {"True", "False", "None"}, *const js[] = {"true", "false", "null"};
    size_t e = *i;
    while (e < n && ident_char(s[e])) e++;
    for (int k = 0; k < 3; k++) {
        const size_t l = strlen(py[k]);
        if (e - *i > l || memcmp(s + *i, py[k], e - *i) != 0) continue;
        if (e == n) return PYCALL_MORE; // a prefix of the word, or the word and more letters may follow
        if (e - *i < l) break;
        sbuf_puts(out, js[k]);
        *i = e;
        return PYCALL_DONE;
    }
    return PYCALL_BAD;
}

enum pycall tools_pycall(const char *s, size_t n, size_t i, size_t *name_end, size_t *end, struct sbuf *args) {
    size_t k = i;
    while (k < n && (ident_char(s[k]) || s[k] == '-')) k++;
    if (k == n) return PYCALL_MORE;
    if (k == i || s[k] != '(') return PYCALL_BAD;
    *name_end = k;
    sbuf_append(args, "{", 1);
    k = ws(s, n, k + 1);
    for (bool first = true;; first = false) {
        if (k >= n) return PYCALL_MORE;
        if (s[k] == ')') break;
        const size_t a = k;
        while (k < n && ident_char(s[k])) k++;
        if (k == n) return PYCALL_MORE;
        if (k == a || (s[a] >= '0' && s[a] <= '9')) return PYCALL_BAD; // positional: no name to give it
        const size_t b = k;
        k = ws(s, n, k);
        if (k >= n) return PYCALL_MORE;
        if (s[k] != '=') return PYCALL_BAD;
        sbuf_printf(args, "%s\"%.*s\":", first ? "" : ",", (int)(b - a), s + a);
        k = ws(s, n, k + 1);
        enum pycall r = py_value(s, n, &k, args, 0);
        if (r != PYCALL_DONE) return r;
        k = ws(s, n, k);
        if (k >= n) return PYCALL_MORE;
        if (s[k] == ',') k = ws(s, n, k + 1);
        else if (s[k] != ')') return PYCALL_BAD;
    }
    sbuf_append(args, "}", 1);
    *end = k + 1;
    return PYCALL_DONE;
}
