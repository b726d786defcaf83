// JSON Schema `pattern` (a documented ECMA-262 subset) -> GBNF over the JSON-encoded string
// body. Recursive descent that writes GBNF as it parses; character classes become code point
// range sets.
#include "grammar/regex.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "grammar/gbnf_text.h"

// ---------------------------------------------------------------- code point sets

#define SET_MAX 128 // ranges per class (4 KiB of stack per set at most with 2 copies)
struct cset {
    int n;
    uint32_t lo[SET_MAX], hi[SET_MAX];
};

struct rx {
    const char *s;
    size_t n, i;
    const char *where;
    unsigned uses;
    int depth;
    bool err;
};

static void rx_fail(struct rx *r, const char *what) {
    if (r->err) return;
    r->err = true;
    lm_error_set(LM_ERR_ARG, "json schema: %s: pattern: %s at offset %zu", r->where, what, r->i);
}

static void set_add(struct rx *r, struct cset *s, uint32_t lo, uint32_t hi) {
    if (s->n == SET_MAX) {
        rx_fail(r, "character class too large");
        return;
    }
    s->lo[s->n] = lo;
    s->hi[s->n] = hi;
    s->n++;
}

static int cmp_range(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

// Sorts and merges overlapping or adjacent ranges.
static void set_norm(struct cset *s) {
    uint64_t pair[SET_MAX];
    for (int i = 0; i < s->n; i++) pair[i] = (uint64_t)s->lo[i] << 32 | s->hi[i];
    qsort(pair, (size_t)s->n, sizeof pair[0], cmp_range);
    int m = 0;
    for (int i = 0; i < s->n; i++) {
        uint32_t lo = (uint32_t)(pair[i] >> 32), hi = (uint32_t)pair[i];
        if (m && lo <= s->hi[m - 1] + 1) {
            if (hi > s->hi[m - 1]) s->hi[m - 1] = hi;
        } else {
            s->lo[m] = lo;
            s->hi[m] = hi;
            m++;
        }
    }
    s->n = m;
}

static void set_negate(struct cset *s) {
    set_norm(s);
    struct cset t;
    t.n = 0;
    uint32_t next = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->lo[i] > next) {
            t.lo[t.n] = next;
            t.hi[t.n++] = s->lo[i] - 1;
        }
        next = s->hi[i] + 1;
    }
    if (next <= 0x10FFFF) {
        t.lo[t.n] = next;
        t.hi[t.n++] = 0x10FFFF;
    }
    *s = t;
}

static bool set_has(const struct cset *s, uint32_t c) {
    for (int i = 0; i < s->n; i++)
        if (c >= s->lo[i] && c <= s->hi[i]) return true;
    return false;
}

// s minus the code points a JSON string cannot hold raw (controls, ", \, surrogates)
static void set_raw(const struct cset *s, struct cset *o) {
    static const uint32_t cut_lo[] = {0, 0x22, 0x5C, 0xD800}, cut_hi[] = {0x1F, 0x22, 0x5C, 0xDFFF};
    o->n = 0;
    for (int i = 0; i < s->n; i++) {
        uint32_t lo = s->lo[i], hi = s->hi[i];
        // split [lo, hi] around each cut (cuts sorted, disjoint)
        for (int k = 0; k < 4 && lo <= hi; k++) {
            if (cut_hi[k] < lo || cut_lo[k] > hi) continue;
            if (cut_lo[k] > lo) {
                o->lo[o->n] = lo;
                o->hi[o->n++] = cut_lo[k] - 1;
            }
            if (cut_hi[k] >= hi) {
                lo = 1, hi = 0; // consumed
                break;
            }
            lo = cut_hi[k] + 1;
        }
        if (lo <= hi) {
            o->lo[o->n] = lo;
            o->hi[o->n++] = hi;
        }
    }
}

static void class_cp(struct lm_strbuf *b, uint32_t c) {
    if (c > 0x20 && c < 0x7F && !strchr("]\\^-[\"", (int)c)) {
        char ch = (char)c;
        lm_strbuf_put(b, &ch, 1);
    } else if (c < 0x100) {
        lm_strbuf_printf(b, "\\x%02X", (unsigned)c);
    } else if (c < 0x10000) {
        lm_strbuf_printf(b, "\\u%04X", (unsigned)c);
    } else {
        lm_strbuf_printf(b, "\\U%08X", (unsigned)c);
    }
}

static void class_ranges(struct lm_strbuf *b, const struct cset *s) {
    for (int i = 0; i < s->n; i++) {
        class_cp(b, s->lo[i]);
        if (s->hi[i] != s->lo[i]) {
            if (s->hi[i] > s->lo[i] + 1) lm_strbuf_put(b, "-", 1);
            class_cp(b, s->hi[i]);
        }
    }
}

// Emits the set as one GBNF primary: its raw characters as a class ([...] or [^...], the
// shorter) and the characters JSON escapes as literals, in one group.
static void set_emit(struct rx *r, struct lm_strbuf *b, struct cset *s) {
    set_norm(s);
    if (s->n == 0) {
        rx_fail(r, "empty character class");
        return;
    }
    struct cset raw, comp;
    set_raw(s, &raw);
    int n_alt = raw.n ? 1 : 0;
    uint32_t special[34];
    int n_special = 0;
    for (uint32_t c = 0; c < 0x20; c++)
        if (set_has(s, c)) special[n_special++] = c;
    if (set_has(s, 0x22)) special[n_special++] = 0x22;
    if (set_has(s, 0x5C)) special[n_special++] = 0x5C;
    n_alt += n_special;
    if (raw.n == 1 && raw.lo[0] == raw.hi[0] && n_special == 0) { // one character: a literal
        char enc[8];
        size_t k = lm_json_encode_cp(raw.lo[0], enc);
        lm_gbnf_lit(b, enc, k);
        return;
    }
    if (n_alt > 1) lm_strbuf_puts(b, "(");
    if (raw.n) {
        // [^X] with X = what the raw set leaves out (controls, ", \ and the rest; surrogates
        // never occur in UTF-8 so they may be left out of X)
        comp = raw;
        set_negate(&comp);
        struct cset x;
        x.n = 0;
        for (int i = 0; i < comp.n; i++) {
            if (comp.lo[i] >= 0xD800 && comp.hi[i] <= 0xDFFF) continue;
            x.lo[x.n] = comp.lo[i];
            x.hi[x.n++] = comp.hi[i];
        }
        if (x.n < raw.n) {
            lm_strbuf_puts(b, "[^");
            class_ranges(b, &x);
        } else {
            lm_strbuf_puts(b, "[");
            class_ranges(b, &raw);
        }
        lm_strbuf_puts(b, "]");
    }
    for (int i = 0; i < n_special; i++) {
        char enc[8];
        size_t k = lm_json_encode_cp(special[i], enc);
        if (raw.n || i) lm_strbuf_puts(b, " | ");
        lm_gbnf_lit(b, enc, k);
    }
    if (n_alt > 1) lm_strbuf_puts(b, ")");
}

// ---------------------------------------------------------------- parser

static bool at_end(const struct rx *r) { return r->i >= r->n; }
static int peek(const struct rx *r) { return at_end(r) ? -1 : (unsigned char)r->s[r->i]; }

// One UTF-8 code point of the pattern (a bad byte stands for itself: the schema was UTF-8
// checked by the JSON parser already).
static uint32_t next_cp(struct rx *r) {
    unsigned char c = (unsigned char)r->s[r->i++];
    if (c < 0x80) return c;
    int k = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
    uint32_t v = c & (0x3F >> k);
    for (int j = 0; j < k && !at_end(r); j++) v = v << 6 | ((unsigned char)r->s[r->i++] & 0x3F);
    return v;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool read_hex(struct rx *r, int digits, uint32_t *out) {
    uint32_t v = 0;
    for (int j = 0; j < digits; j++) {
        int h = hexval(peek(r));
        if (h < 0) {
            rx_fail(r, "bad hex escape");
            return false;
        }
        v = v << 4 | (uint32_t)h;
        r->i++;
    }
    *out = v;
    return true;
}

static void add_class_escape(struct rx *r, struct cset *s, int c) {
    int lower = c | 0x20;
    struct cset t;
    t.n = 0;
    if (lower == 'd') {
        set_add(r, &t, '0', '9');
    } else if (lower == 'w') {
        set_add(r, &t, '0', '9');
        set_add(r, &t, 'A', 'Z');
        set_add(r, &t, '_', '_');
        set_add(r, &t, 'a', 'z');
    } else { // s: ECMA-262 white space and line terminators, less U+FEFF (not space to
             // Python's re, which validators such as `jsonschema` use)
        static const uint32_t ws[][2] = {{9, 13},          {0x20, 0x20},     {0xA0, 0xA0},
                                         {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
                                         {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};
        for (size_t k = 0; k < sizeof ws / sizeof ws[0]; k++) set_add(r, &t, ws[k][0], ws[k][1]);
    }
    if (c != lower) set_negate(&t);
    for (int k = 0; k < t.n; k++) set_add(r, s, t.lo[k], t.hi[k]);
}

// After a backslash. Returns a code point, or -1 when it added a class to s (s may be NULL
// only outside classes, where the caller passes a fresh set), or -2 on error.
static int64_t parse_escape(struct rx *r, struct cset *s, bool in_class) {
    if (at_end(r)) {
        rx_fail(r, "pattern ends with a backslash");
        return -2;
    }
    int c = peek(r);
    r->i++;
    switch (c) {
    case 'd': case 'D': case 'w': case 'W': case 's': case 'S':
        add_class_escape(r, s, c);
        return -1;
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': return 0;
    case 'b':
        if (in_class) return '\b';
        rx_fail(r, "word boundary \\b is not supported");
        return -2;
    case 'B': rx_fail(r, "word boundary \\B is not supported"); return -2;
    case 'x': {
        uint32_t v;
        return read_hex(r, 2, &v) ? (int64_t)v : -2;
    }
    case 'u': {
        uint32_t v;
        if (!read_hex(r, 4, &v)) return -2;
        if (v >= 0xD800 && v <= 0xDFFF) {
            rx_fail(r, "surrogate \\u escape is not supported");
            return -2;
        }
        return v;
    }
    case 'k': rx_fail(r, "named backreference \\k is not supported"); return -2;
    case 'p': case 'P': rx_fail(r, "unicode property escape is not supported"); return -2;
    case 'c': rx_fail(r, "control escape \\c is not supported"); return -2;
    default: break;
    }
    if (c >= '1' && c <= '9') {
        rx_fail(r, "backreference is not supported");
        return -2;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        rx_fail(r, "unknown escape");
        return -2;
    }
    r->i--;
    return next_cp(r); // escaped punctuation or any other character: itself
}

static void parse_class(struct rx *r, struct lm_strbuf *b) {
    struct cset s;
    s.n = 0;
    bool neg = false;
    if (peek(r) == '^') {
        neg = true;
        r->i++;
    }
    while (!r->err) {
        if (at_end(r)) {
            rx_fail(r, "unterminated character class");
            return;
        }
        if (peek(r) == ']') break;
        int64_t lo;
        if (peek(r) == '\\') {
            r->i++;
            lo = parse_escape(r, &s, true);
            if (lo == -2) return;
            if (lo == -1) continue;
        } else {
            lo = next_cp(r);
        }
        if (peek(r) == '-' && r->i + 1 < r->n && r->s[r->i + 1] != ']') {
            r->i++;
            int64_t hi;
            if (peek(r) == '\\') {
                r->i++;
                hi = parse_escape(r, &s, true);
                if (hi == -2) return;
                if (hi == -1) {
                    rx_fail(r, "class escape as a range end");
                    return;
                }
            } else {
                hi = next_cp(r);
            }
            if (hi < lo) {
                rx_fail(r, "range out of order in character class");
                return;
            }
            set_add(r, &s, (uint32_t)lo, (uint32_t)hi);
        } else {
            set_add(r, &s, (uint32_t)lo, (uint32_t)lo);
        }
    }
    r->i++; // ]
    if (neg) set_negate(&s);
    set_emit(r, b, &s);
}

static void parse_alt(struct rx *r, struct lm_strbuf *b, bool top);

// Reads a quantifier if one follows: min, max (-1 unbounded). False when none.
static bool parse_quant(struct rx *r, long *mn, long *mx) {
    int c = peek(r);
    if (c == '?' || c == '*' || c == '+') {
        r->i++;
        *mn = c == '+';
        *mx = c == '?' ? 1 : -1;
    } else if (c == '{') {
        size_t save = r->i++;
        long a = 0, bnd = -1;
        int nd = 0;
        while (peek(r) >= '0' && peek(r) <= '9' && nd < 9) a = a * 10 + (r->s[r->i++] - '0'), nd++;
        if (!nd) {
            r->i = save; // not a quantifier: a literal '{'
            return false;
        }
        bnd = a;
        if (peek(r) == ',') {
            r->i++;
            bnd = -1;
            if (peek(r) >= '0' && peek(r) <= '9') {
                bnd = 0;
                nd = 0;
                while (peek(r) >= '0' && peek(r) <= '9' && nd < 9)
                    bnd = bnd * 10 + (r->s[r->i++] - '0'), nd++;
            }
        }
        if (peek(r) != '}') {
            r->i = save;
            return false;
        }
        r->i++;
        if (a > LM_RX_MAX_REPEAT || bnd > LM_RX_MAX_REPEAT) {
            rx_fail(r, "repetition count above 10000");
            return false;
        }
        if (bnd >= 0 && bnd < a) {
            rx_fail(r, "repetition {m,n} with n < m");
            return false;
        }
        *mn = a;
        *mx = bnd;
    } else {
        return false;
    }
    if (peek(r) == '?') r->i++; // lazy: the same language
    return true;
}

static void put_quant(struct lm_strbuf *b, long mn, long mx) {
    if (mn == 0 && mx == 1) lm_strbuf_puts(b, "?");
    else if (mn == 0 && mx < 0) lm_strbuf_puts(b, "*");
    else if (mn == 1 && mx < 0) lm_strbuf_puts(b, "+");
    else if (mx < 0) lm_strbuf_printf(b, "{%ld,}", mn);
    else if (mn == mx) lm_strbuf_printf(b, "{%ld}", mn);
    else lm_strbuf_printf(b, "{%ld,%ld}", mn, mx);
}

static void flush_lit(struct lm_strbuf *b, struct lm_strbuf *lit, int *n_items) {
    if (!lit->n) return;
    if ((*n_items)++) lm_strbuf_puts(b, " ");
    lm_gbnf_lit(b, lit->p, lit->n);
    lit->n = 0;
}

// A sequence up to '|', ')' or the end. top: a top-level alternative, where ^ may open it
// and $ close it; without them it may be preceded / followed by any characters.
static void parse_seq(struct rx *r, struct lm_strbuf *b, bool top) {
    struct lm_strbuf lit = {0}, atom = {0};
    int n_items = 0;
    bool anchored_start = false, anchored_end = false;
    if (top && peek(r) == '^') {
        anchored_start = true;
        r->i++;
    }
    if (top && !anchored_start) {
        lm_strbuf_puts(b, "char*");
        r->uses |= LM_RX_USES_CHAR;
        n_items++;
    }
    while (!r->err && !at_end(r) && peek(r) != '|' && peek(r) != ')') {
        int c = peek(r);
        if (c == '$') {
            r->i++;
            if (top && (at_end(r) || peek(r) == '|')) {
                anchored_end = true;
                break;
            }
            rx_fail(r, "anchor $ inside the pattern (only at the end of an alternative)");
            break;
        }
        if (c == '^') {
            rx_fail(r, "anchor ^ inside the pattern (only at the start of an alternative)");
            break;
        }
        atom.n = 0;
        if (atom.p) atom.p[0] = 0;
        bool is_lit = false;
        char enc[8];
        size_t n_enc = 0;
        if (c == '(') {
            r->i++;
            if (peek(r) == '?') {
                r->i++;
                int d = peek(r);
                if (d == ':') {
                    r->i++;
                } else if (d == '<' && r->i + 1 < r->n && r->s[r->i + 1] != '=' &&
                           r->s[r->i + 1] != '!') {
                    while (!at_end(r) && peek(r) != '>') r->i++; // named group: a group
                    if (at_end(r)) {
                        rx_fail(r, "unterminated group name");
                        break;
                    }
                    r->i++;
                } else if (d == '=' || d == '!' || d == '<') {
                    rx_fail(r, "lookaround is not supported");
                    break;
                } else {
                    rx_fail(r, "group flags (?...) are not supported");
                    break;
                }
            }
            if (++r->depth > 64) {
                rx_fail(r, "groups nested deeper than 64");
                break;
            }
            lm_strbuf_puts(&atom, "(");
            parse_alt(r, &atom, false);
            lm_strbuf_puts(&atom, ")");
            r->depth--;
            if (r->err) break;
            if (peek(r) != ')') {
                rx_fail(r, "unbalanced parenthesis");
                break;
            }
            r->i++;
        } else if (c == '[') {
            r->i++;
            parse_class(r, &atom);
        } else if (c == '.') {
            r->i++;
            lm_strbuf_puts(&atom, "regex-dot");
            r->uses |= LM_RX_USES_DOT;
        } else if (c == '*' || c == '+' || c == '?') {
            rx_fail(r, "nothing to repeat");
            break;
        } else if (c == '\\') {
            r->i++;
            struct cset s;
            s.n = 0;
            int64_t cp = parse_escape(r, &s, false);
            if (cp == -2) break;
            if (cp == -1) {
                set_emit(r, &atom, &s);
            } else {
                is_lit = true;
                n_enc = lm_json_encode_cp((uint32_t)cp, enc);
            }
        } else {
            is_lit = true;
            n_enc = lm_json_encode_cp(next_cp(r), enc);
        }
        if (r->err) break;
        long mn, mx;
        bool q = parse_quant(r, &mn, &mx);
        if (r->err) break;
        if (is_lit && !q) {
            lm_strbuf_put(&lit, enc, n_enc);
            continue;
        }
        flush_lit(b, &lit, &n_items);
        if (n_items++) lm_strbuf_puts(b, " ");
        if (is_lit) lm_gbnf_lit(b, enc, n_enc);
        else if (atom.p) lm_strbuf_put(b, atom.p, atom.n);
        if (q) put_quant(b, mn, mx);
        if (atom.nomem || lit.nomem) b->nomem = true;
    }
    flush_lit(b, &lit, &n_items);
    if (top && !anchored_end) {
        if (n_items++) lm_strbuf_puts(b, " ");
        lm_strbuf_puts(b, "char*");
        r->uses |= LM_RX_USES_CHAR;
    }
    if (!n_items) lm_strbuf_puts(b, "\"\"");
    if (atom.nomem || lit.nomem) b->nomem = true;
    free(lit.p);
    free(atom.p);
}

static void parse_alt(struct rx *r, struct lm_strbuf *b, bool top) {
    parse_seq(r, b, top);
    while (!r->err && peek(r) == '|') {
        r->i++;
        lm_strbuf_puts(b, " | ");
        parse_seq(r, b, top);
    }
}

enum lm_status lm_regex_to_gbnf(struct lm_strbuf *out, const char *pattern, size_t len,
                                const char *where, unsigned *uses) {
    if (len > LM_RX_MAX_LEN)
        return lm_error_set(LM_ERR_ARG, "json schema: %s: pattern longer than %d bytes", where,
                            LM_RX_MAX_LEN);
    struct rx r = {.s = pattern, .n = len, .where = where};
    lm_strbuf_puts(out, "(");
    parse_alt(&r, out, true);
    lm_strbuf_puts(out, ")");
    if (!r.err && !at_end(&r)) rx_fail(&r, "unbalanced parenthesis");
    if (r.err) return LM_ERR_ARG;
    if (out->nomem) return lm_error_set(LM_ERR_NOMEM, "json schema: %s: pattern: out of memory", where);
    *uses |= r.uses;
    return LM_OK;
}
