// GBNF parser (syntax of llama.cpp's grammars/README.md) and the compile-time checks: the
// recursive descent builds one element vector per rule, repetitions become helper rules
// (S{m,n} -> S..S S'(n-m), S'(k) ::= S S'(k-1) |), then the rules are flattened and checked.
#define _POSIX_C_SOURCE 200809L
#include "grammar/gbnf.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/timer.h"

struct vec { struct gb_elem *v; uint32_t n, cap; };

struct sym {
    char *name;
    struct vec body;        // alternatives, each ended by GB_END
    bool defined;
    uint32_t line, col;     // first mention (or definition)
};

struct parser {
    const char *s, *end, *p;
    struct gb_limits lim;
    struct sym *syms;
    uint32_t n_syms, cap_syms;
    uint32_t *ht, ht_mask;  // name -> symbol id + 1 (open addressing)
    uint32_t *ranges;       // lo, hi pairs of all classes
    uint32_t n_ranges, cap_ranges;
    struct gb_class *classes;
    uint32_t n_classes, cap_classes;
    uint32_t ascii_class[128]; // class id + 1 of the single-character classes
    size_t n_elems;
    int depth;              // groups open (recursion of the parser)
    enum lm_status st;      // first failure (LM_OK while fine)
    const char *wpos;       // where(): last position asked, its line and column
    uint32_t wline, wcol;
};

// Line and column (code points, from 1) of text position at; resumes from the last answer.
static void where(struct parser *ps, const char *at, uint32_t *line, uint32_t *col) {
    if (!ps->wpos || at < ps->wpos) ps->wpos = ps->s, ps->wline = 1, ps->wcol = 1;
    for (; ps->wpos < at && ps->wpos < ps->end; ps->wpos++) {
        if (*ps->wpos == '\n') ps->wline++, ps->wcol = 1;
        else if (((unsigned char)*ps->wpos & 0xC0) != 0x80) ps->wcol++;
    }
    *line = ps->wline, *col = ps->wcol;
}

// Records the first error: "gbnf:LINE:COL: msg" at text position at.
static bool fail(struct parser *ps, const char *at, const char *msg, const char *arg) {
    if (ps->st != LM_OK) return false;
    uint32_t l, c;
    where(ps, at, &l, &c);
    ps->st = lm_error_set(LM_ERR_ARG, "gbnf:%u:%u: %s%s%s", l, c, msg, arg ? arg : "",
                          arg ? "'" : "");
    return false;
}

static bool nomem(struct parser *ps) {
    if (ps->st == LM_OK) ps->st = lm_error_set(LM_ERR_NOMEM, "gbnf: out of memory");
    return false;
}

static bool grow(struct parser *ps, void **v, uint32_t *cap, uint32_t need, size_t size) {
    if (need <= *cap) return true;
    uint32_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *n = realloc(*v, (size_t)c * size);
    if (!n) return nomem(ps);
    *v = n, *cap = c;
    return true;
}

static bool push(struct parser *ps, struct vec *v, uint32_t kind, uint32_t arg) {
    if (++ps->n_elems > ps->lim.max_elems)
        return fail(ps, ps->p, "grammar too large: more than the limit of elements after expanding repetitions", NULL);
    if (!grow(ps, (void **)&v->v, &v->cap, v->n + 1, sizeof *v->v)) return false;
    v->v[v->n++] = (struct gb_elem){.kind = kind, .arg = arg};
    return true;
}

static bool append(struct parser *ps, struct vec *v, const struct gb_elem *e, uint32_t n) {
    ps->n_elems += n;
    if (ps->n_elems > ps->lim.max_elems)
        return fail(ps, ps->p, "grammar too large: more than the limit of elements after expanding repetitions", NULL);
    if (!grow(ps, (void **)&v->v, &v->cap, v->n + n, sizeof *v->v)) return false;
    memmove(v->v + v->n, e, n * sizeof *e);
    v->n += n;
    return true;
}

// Symbol id of name (created undefined on first mention), or UINT32_MAX after an error.
static uint32_t hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static bool ht_add(struct parser *ps, uint32_t id) {
    if (2 * (ps->n_syms + 1) > ps->ht_mask) { // rehash at half full
        uint32_t m = ps->ht_mask ? 2 * ps->ht_mask + 1 : 255;
        uint32_t *t = calloc((size_t)m + 1, sizeof *t);
        if (!t) return nomem(ps);
        for (uint32_t i = 0; i <= ps->ht_mask && ps->ht; i++)
            if (ps->ht[i]) {
                const char *nm = ps->syms[ps->ht[i] - 1].name;
                uint32_t h = hash(nm, strlen(nm)) & m;
                while (t[h]) h = (h + 1) & m;
                t[h] = ps->ht[i];
            }
        free(ps->ht);
        ps->ht = t, ps->ht_mask = m;
    }
    const char *nm = ps->syms[id].name;
    uint32_t h = hash(nm, strlen(nm)) & ps->ht_mask;
    while (ps->ht[h]) h = (h + 1) & ps->ht_mask;
    ps->ht[h] = id + 1;
    return true;
}

static uint32_t symbol(struct parser *ps, const char *name, size_t n, const char *at) {
    if (ps->ht)
        for (uint32_t h = hash(name, n) & ps->ht_mask; ps->ht[h]; h = (h + 1) & ps->ht_mask) {
            const char *nm = ps->syms[ps->ht[h] - 1].name;
            if (strlen(nm) == n && !memcmp(nm, name, n)) return ps->ht[h] - 1;
        }
    if (ps->n_syms >= ps->lim.max_rules) {
        fail(ps, at, "grammar too large: more rules than the limit (after expanding repetitions)", NULL);
        return UINT32_MAX;
    }
    if (!grow(ps, (void **)&ps->syms, &ps->cap_syms, ps->n_syms + 1, sizeof *ps->syms)) return UINT32_MAX;
    struct sym *y = &ps->syms[ps->n_syms];
    memset(y, 0, sizeof *y);
    y->name = malloc(n + 1);
    if (!y->name) return nomem(ps), UINT32_MAX;
    memcpy(y->name, name, n);
    y->name[n] = 0;
    where(ps, at, &y->line, &y->col);
    ps->n_syms++;
    if (!ht_add(ps, ps->n_syms - 1)) return UINT32_MAX;
    return ps->n_syms - 1;
}

// A helper rule "parent#k", defined by its creator.
static uint32_t helper(struct parser *ps, uint32_t parent, const char *at) {
    char buf[96];
    int n = snprintf(buf, sizeof buf, "%.60s#%u", ps->syms[parent].name, ps->n_syms);
    uint32_t id = symbol(ps, buf, (size_t)n, at);
    if (id != UINT32_MAX) ps->syms[id].defined = true;
    return id;
}

static uint32_t add_class(struct parser *ps, const uint32_t *r, uint32_t n) {
    // sort + merge the ranges
    uint32_t *t = malloc((2 * (size_t)n + 2) * sizeof *t);
    if (!t) return nomem(ps), UINT32_MAX;
    memcpy(t, r, 2 * (size_t)n * sizeof *t);
    for (uint32_t i = 1; i < n; i++) // insertion sort: classes are short
        for (uint32_t j = i; j > 0 && t[2 * j - 2] > t[2 * j]; j--) {
            uint32_t a = t[2 * j - 2], b = t[2 * j - 1];
            t[2 * j - 2] = t[2 * j], t[2 * j - 1] = t[2 * j + 1], t[2 * j] = a, t[2 * j + 1] = b;
        }
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (m && t[2 * i] <= t[2 * m - 1] + 1) {
            if (t[2 * i + 1] > t[2 * m - 1]) t[2 * m - 1] = t[2 * i + 1];
        } else {
            t[2 * m] = t[2 * i], t[2 * m + 1] = t[2 * i + 1], m++;
        }
    }
    bool ok = grow(ps, (void **)&ps->classes, &ps->cap_classes, ps->n_classes + 1, sizeof *ps->classes) &&
              grow(ps, (void **)&ps->ranges, &ps->cap_ranges, 2 * (ps->n_ranges + m) + 2, sizeof *ps->ranges);
    if (!ok) return free(t), UINT32_MAX;
    struct gb_class *k = &ps->classes[ps->n_classes];
    memset(k, 0, sizeof *k);
    k->off = ps->n_ranges, k->n = m;
    memcpy(ps->ranges + 2 * (size_t)ps->n_ranges, t, 2 * (size_t)m * sizeof *t);
    ps->n_ranges += m;
    for (uint32_t i = 0; i < m; i++)
        for (uint32_t c = t[2 * i]; c <= t[2 * i + 1] && c < 128; c++) k->ascii[c >> 5] |= 1u << (c & 31);
    free(t);
    return ps->n_classes++;
}

static uint32_t char_class(struct parser *ps, uint32_t c) {
    if (c < 128 && ps->ascii_class[c]) return ps->ascii_class[c] - 1;
    uint32_t r[2] = {c, c};
    uint32_t id = add_class(ps, r, 1);
    if (c < 128 && id != UINT32_MAX) ps->ascii_class[c] = id + 1;
    return id;
}

static bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static void space(struct parser *ps, bool newline_ok) {
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
            ps->p++;
        } else if (c == '#') {
            while (ps->p < ps->end && *ps->p != '\r' && *ps->p != '\n') ps->p++;
        } else {
            break;
        }
    }
}

static bool hexval(char c, uint32_t *v) {
    if (c >= '0' && c <= '9') *v = (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f') *v = (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') *v = (uint32_t)(c - 'A' + 10);
    else return false;
    return true;
}

// One character of a literal or class (an escape or one UTF-8 sequence) -> *cp.
static bool parse_char(struct parser *ps, uint32_t *cp) {
    const char *at = ps->p;
    if (ps->p >= ps->end) return fail(ps, at, "unexpected end of input", NULL);
    unsigned char c = (unsigned char)*ps->p;
    if (c == '\\') {
        if (ps->p + 1 >= ps->end) return fail(ps, at, "unexpected end of input after '\\'", NULL);
        char e = ps->p[1];
        ps->p += 2;
        int nhex = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (nhex) {
            uint32_t v = 0;
            for (int i = 0; i < nhex; i++) {
                uint32_t d;
                if (ps->p >= ps->end || !hexval(*ps->p, &d))
                    return fail(ps, at, nhex == 2 ? "expected 2 hex digits after '\\x'" : nhex == 4 ? "expected 4 hex digits after '\\u'" : "expected 8 hex digits after '\\U'", NULL);
                v = v * 16 + d;
                ps->p++;
            }
            if (v > 0x10FFFF) return fail(ps, at, "code point above U+10FFFF", NULL);
            *cp = v;
            return true;
        }
        switch (e) {
        case 'n': *cp = '\n'; return true;
        case 'r': *cp = '\r'; return true;
        case 't': *cp = '\t'; return true;
        case '\\': case '"': case '[': case ']': case '-': case '^': *cp = (uint32_t)e; return true;
        default: return fail(ps, at, "unknown escape (expected one of \\n \\r \\t \\\\ \\\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH)", NULL);
        }
    }
    int n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!n || ps->end - ps->p < n) return fail(ps, at, "invalid UTF-8", NULL);
    uint32_t v = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    for (int i = 1; i < n; i++) {
        unsigned char d = (unsigned char)ps->p[i];
        if ((d & 0xC0) != 0x80) return fail(ps, at, "invalid UTF-8", NULL);
        v = v << 6 | (d & 0x3F);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min[n] || v > 0x10FFFF) return fail(ps, at, "invalid UTF-8", NULL);
    ps->p += n;
    *cp = v;
    return true;
}

static bool parse_alternates(struct parser *ps, uint32_t rule, struct vec *out, bool nested);

// S{min,max} on out[start..] (max UINT32_MAX: unbounded).
static bool repeat(struct parser *ps, uint32_t rule, struct vec *out, uint32_t start, uint32_t min,
                   uint32_t max, const char *at) {
    uint32_t n = out->n - start;
    struct gb_elem *prev = malloc((n ? n : 1) * sizeof *prev);
    if (!prev) return nomem(ps);
    memcpy(prev, out->v + start, n * sizeof *prev);
    bool ok = true;
    if (min == 0) out->n = start, ps->n_elems -= n;
    for (uint32_t i = 1; ok && i < min; i++) ok = append(ps, out, prev, n);
    uint32_t last = UINT32_MAX;
    uint32_t n_opt = max == UINT32_MAX ? 1 : max - min;
    for (uint32_t i = 0; ok && i < n_opt; i++) {
        uint32_t id = helper(ps, rule, at);
        if (id == UINT32_MAX) { ok = false; break; }
        struct vec *b = &ps->syms[id].body;
        ok = append(ps, b, prev, n) &&
             (!(i > 0 || max == UINT32_MAX) || push(ps, b, GB_REF, max == UINT32_MAX ? id : last)) &&
             push(ps, b, GB_END, id) && push(ps, b, GB_END, id);
        last = id;
    }
    if (ok && n_opt > 0) ok = push(ps, out, GB_REF, last);
    free(prev);
    return ok;
}

static bool parse_count(struct parser *ps, uint32_t *v) {
    const char *at = ps->p;
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') return fail(ps, at, "expected a number in '{}'", NULL);
    uint64_t x = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        x = x * 10 + (uint64_t)(*ps->p++ - '0');
        if (x > ps->lim.max_repeat) return fail(ps, at, "repetition count above the limit", NULL);
    }
    *v = (uint32_t)x;
    return true;
}

static bool parse_sequence(struct parser *ps, uint32_t rule, struct vec *out, bool nested) {
    uint32_t last = UINT32_MAX; // start of the last symbol (what a repetition applies to)
    while (ps->p < ps->end && ps->st == LM_OK) {
        const char *at = ps->p;
        char c = *ps->p;
        if (c == '"') {
            ps->p++;
            last = out->n;
            while (ps->p < ps->end && *ps->p != '"') {
                uint32_t cp, k;
                if (!parse_char(ps, &cp) || (k = char_class(ps, cp)) == UINT32_MAX || !push(ps, out, GB_CHAR, k)) return false;
            }
            if (ps->p >= ps->end) return fail(ps, at, "unterminated string literal (expected '\"')", NULL);
            ps->p++;
        } else if (c == '[') {
            ps->p++;
            last = out->n;
            bool neg = ps->p < ps->end && *ps->p == '^';
            if (neg) ps->p++;
            uint32_t *r = NULL, nr = 0, cap = 0;
            while (ps->p < ps->end && *ps->p != ']') {
                uint32_t lo, hi;
                const char *at2 = ps->p;
                if (!parse_char(ps, &lo)) return free(r), false;
                hi = lo;
                if (ps->end - ps->p >= 2 && ps->p[0] == '-' && ps->p[1] != ']') {
                    ps->p++;
                    if (!parse_char(ps, &hi)) return free(r), false;
                    if (hi < lo) return free(r), fail(ps, at2, "character range end below its start", NULL);
                }
                if (!grow(ps, (void **)&r, &cap, 2 * nr + 2, sizeof *r)) return free(r), false;
                r[2 * nr] = lo, r[2 * nr + 1] = hi, nr++;
            }
            if (ps->p >= ps->end) return free(r), fail(ps, at, "unterminated character class (expected ']')", NULL);
            ps->p++;
            uint32_t k = add_class(ps, r, nr);
            free(r);
            if (k == UINT32_MAX) return false;
            if (neg) { // complement of the merged ranges within [0, 0x10FFFF]
                struct gb_class kc = ps->classes[k];
                uint32_t *t = malloc((2 * (size_t)kc.n + 2) * sizeof *t), m = 0, from = 0;
                if (!t) return nomem(ps);
                for (uint32_t i = 0; i < kc.n; i++) {
                    uint32_t lo = ps->ranges[2 * (kc.off + i)], hi = ps->ranges[2 * (kc.off + i) + 1];
                    if (lo > from) t[2 * m] = from, t[2 * m + 1] = lo - 1, m++;
                    from = hi + 1;
                }
                if (from <= 0x10FFFF) t[2 * m] = from, t[2 * m + 1] = 0x10FFFF, m++;
                ps->n_classes--, ps->n_ranges -= kc.n;
                k = add_class(ps, t, m);
                free(t);
                if (k == UINT32_MAX) return false;
            }
            if (!push(ps, out, GB_CHAR, k)) return false;
        } else if (c == '.') {
            ps->p++;
            last = out->n;
            uint32_t r[2] = {0, 0x10FFFF}, k = add_class(ps, r, 1);
            if (k == UINT32_MAX || !push(ps, out, GB_CHAR, k)) return false;
        } else if (is_word(c)) {
            const char *b = ps->p;
            while (ps->p < ps->end && is_word(*ps->p)) ps->p++;
            uint32_t id = symbol(ps, b, (size_t)(ps->p - b), b);
            last = out->n;
            if (id == UINT32_MAX || !push(ps, out, GB_REF, id)) return false;
        } else if (c == '(') {
            if (ps->depth >= 256) return fail(ps, at, "groups nested deeper than 256", NULL);
            ps->p++;
            space(ps, true);
            uint32_t id = helper(ps, rule, at);
            if (id == UINT32_MAX) return false;
            struct vec body = {0};
            ps->depth++;
            bool ok = parse_alternates(ps, id, &body, true);
            ps->depth--;
            if (!ok) return free(body.v), false;
            ps->syms[id].body = body;
            if (ps->p >= ps->end || *ps->p != ')') return fail(ps, ps->p, "expected ')' closing the group", NULL);
            ps->p++;
            last = out->n;
            if (!push(ps, out, GB_REF, id)) return false;
        } else if (c == '<') {
            return fail(ps, at, "token references (<...>) are not supported", NULL);
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last == UINT32_MAX) return fail(ps, at, "expected an item before the repetition operator", NULL);
            uint32_t min = 0, max = UINT32_MAX;
            ps->p++;
            if (c == '+') min = 1;
            else if (c == '?') max = 1;
            else if (c == '{') {
                space(ps, nested);
                if (!parse_count(ps, &min)) return false;
                space(ps, nested);
                max = min;
                if (ps->p < ps->end && *ps->p == ',') {
                    ps->p++;
                    space(ps, nested);
                    max = UINT32_MAX;
                    if (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
                        if (!parse_count(ps, &max)) return false;
                        space(ps, nested);
                        if (max < min) return fail(ps, at, "repetition {m,n} with n below m", NULL);
                    }
                }
                if (ps->p >= ps->end || *ps->p != '}') return fail(ps, ps->p, "expected '}' closing the repetition", NULL);
                ps->p++;
            }
            if (!repeat(ps, rule, out, last, min, max, at)) return false;
            last = UINT32_MAX;
        } else {
            break;
        }
        space(ps, nested);
    }
    return ps->st == LM_OK;
}

static bool parse_alternates(struct parser *ps, uint32_t rule, struct vec *out, bool nested) {
    if (!parse_sequence(ps, rule, out, nested) || !push(ps, out, GB_END, rule)) return false;
    while (ps->p < ps->end && *ps->p == '|') {
        ps->p++;
        space(ps, true);
        if (!parse_sequence(ps, rule, out, nested) || !push(ps, out, GB_END, rule)) return false;
    }
    return true;
}

static bool parse_rule(struct parser *ps) {
    const char *b = ps->p;
    while (ps->p < ps->end && is_word(*ps->p)) ps->p++;
    if (ps->p == b) return fail(ps, b, "expected a rule name", NULL);
    uint32_t id = symbol(ps, b, (size_t)(ps->p - b), b);
    if (id == UINT32_MAX) return false;
    if (ps->syms[id].defined) {
        char msg[128];
        snprintf(msg, sizeof msg, "rule defined twice (first at %u:%u): '", ps->syms[id].line, ps->syms[id].col);
        return fail(ps, b, msg, ps->syms[id].name);
    }
    ps->syms[id].defined = true;
    where(ps, b, &ps->syms[id].line, &ps->syms[id].col);
    space(ps, false);
    if (ps->end - ps->p < 3 || memcmp(ps->p, "::=", 3)) return fail(ps, ps->p, "expected '::=' after the rule name", NULL);
    ps->p += 3;
    space(ps, true);
    struct vec body = {0};
    if (!parse_alternates(ps, id, &body, false)) return free(body.v), false;
    ps->syms[id].body = body;
    if (ps->p < ps->end) {
        if (*ps->p == '\r') ps->p += (ps->p + 1 < ps->end && ps->p[1] == '\n') ? 2 : 1;
        else if (*ps->p == '\n') ps->p++;
        else return fail(ps, ps->p, *ps->p == ')' ? "unexpected ')'" : "expected a newline or the end of the rule", NULL);
    }
    space(ps, true);
    return true;
}

// ---------------------------------------------------------------- checks

static enum lm_status sym_error(const struct gb_grammar *g, uint32_t r, const char *what) {
    return lm_error_set(LM_ERR_ARG, "gbnf:%u:%u: rule '%s' %s", g->rules[r].line, g->rules[r].col,
                        g->names + g->rules[r].name_off, what);
}

static bool late(const struct gb_limits *lim) { return lim->deadline_ns && lm_now_ns() > lim->deadline_ns; }

static enum lm_status check(struct gb_grammar *g, const struct gb_limits *lim) {
    uint32_t R = g->n_rules;
    uint8_t *nullable = calloc(R, 1), *productive = calloc(R, 1), *reach = calloc(R, 1), *color = calloc(R, 1);
    uint32_t *stack = malloc(((size_t)R + 1) * 2 * sizeof *stack);
    enum lm_status st = LM_OK;
    if (!nullable || !productive || !reach || !color || !stack) { st = lm_error_set(LM_ERR_NOMEM, "gbnf: out of memory"); goto done; }
    // reachability from root
    uint32_t sp = 0;
    stack[sp++] = g->root, reach[g->root] = 1;
    while (sp) {
        uint32_t r = stack[--sp];
        for (uint32_t a = 0; a < g->rules[r].n_alt; a++)
            for (uint32_t p = g->alts[g->rules[r].alt_off + a]; g->elem[p].kind != GB_END; p++)
                if (g->elem[p].kind == GB_REF && !reach[g->elem[p].arg]) reach[g->elem[p].arg] = 1, stack[sp++] = g->elem[p].arg;
    }
    // nullable and productive: fixpoints
    for (bool changed = true; changed;) {
        changed = false;
        if (late(lim)) { st = lm_error_set(LM_ERR_ARG, "gbnf: grammar analysis exceeds the compile time limit"); goto done; }
        for (uint32_t r = 0; r < R; r++) {
            if (nullable[r] && productive[r]) continue;
            for (uint32_t a = 0; a < g->rules[r].n_alt; a++) {
                bool nul = true, prod = true;
                for (uint32_t p = g->alts[g->rules[r].alt_off + a]; g->elem[p].kind != GB_END; p++) {
                    if (g->elem[p].kind == GB_CHAR) {
                        nul = false;
                        if (g->classes[g->elem[p].arg].n == 0) prod = false;
                    } else {
                        nul = nul && nullable[g->elem[p].arg];
                        prod = prod && productive[g->elem[p].arg];
                    }
                }
                if (nul && !nullable[r]) nullable[r] = 1, changed = true;
                if (prod && !productive[r]) productive[r] = 1, changed = true;
            }
        }
    }
    for (uint32_t r = R; r-- > 0;) // the last defined first: the root is rarely the cause
        if (reach[r] && !productive[r]) { st = sym_error(g, r, "can derive no finite string (every alternative recurses or uses an empty class)"); goto done; }
    // left recursion: a cycle through references preceded only by nullable elements (DFS)
    uint32_t *eoff = calloc((size_t)R + 1, sizeof *eoff), ne = 0, *edge = NULL;
    if (!eoff) { st = lm_error_set(LM_ERR_NOMEM, "gbnf: out of memory"); goto done; }
    for (int fill = 0; fill < 2; fill++) {
        ne = 0;
        for (uint32_t r = 0; r < R; r++) {
            if (!fill) eoff[r] = ne;
            for (uint32_t a = 0; a < g->rules[r].n_alt; a++)
                for (uint32_t p = g->alts[g->rules[r].alt_off + a]; g->elem[p].kind == GB_REF; p++) {
                    if (fill) edge[ne] = g->elem[p].arg;
                    ne++;
                    if (!nullable[g->elem[p].arg]) break;
                }
        }
        eoff[R] = ne;
        if (!fill && !(edge = malloc(((size_t)ne + 1) * sizeof *edge))) {
            free(eoff);
            st = lm_error_set(LM_ERR_NOMEM, "gbnf: out of memory");
            goto done;
        }
    }
    for (uint32_t r0 = 0; r0 < R && st == LM_OK; r0++) {
        if (!reach[r0] || color[r0]) continue;
        sp = 0;
        stack[sp++] = r0, stack[sp++] = eoff[r0], color[r0] = 1;
        while (sp) {
            uint32_t r = stack[sp - 2], k = stack[sp - 1];
            if (k == eoff[r + 1]) { color[r] = 2, sp -= 2; continue; }
            stack[sp - 1] = k + 1;
            uint32_t n = edge[k];
            if (color[n] == 1) { st = sym_error(g, n, "is left-recursive (it can reach itself without consuming input)"); break; }
            if (!color[n]) color[n] = 1, stack[sp++] = n, stack[sp++] = eoff[n];
        }
    }
    free(eoff), free(edge);
    if (st != LM_OK) goto done;
    // return positions
    for (uint32_t r = 0; r < R; r++) g->ret[r] = GB_RET_NONE;
    g->ret[g->root] = GB_RET_ROOT;
    for (uint32_t pass = 0, changed = 1; changed && pass < 2 * R + 4; pass++) {
        changed = 0;
        if (late(lim)) { st = lm_error_set(LM_ERR_ARG, "gbnf: grammar analysis exceeds the compile time limit"); goto done; }
        for (uint32_t p = 0; p < g->n_elem; p++) {
            if (g->elem[p].kind != GB_REF) continue;
            uint32_t callee = g->elem[p].arg, in = GB_RET_NONE;
            if (g->elem[p + 1].kind == GB_END) in = g->ret[g->elem[p + 1].arg];
            else in = p + 1;
            uint32_t *o = &g->ret[callee], v = *o;
            if (in == GB_RET_NONE || v == GB_RET_MANY || v == in) continue;
            *o = v == GB_RET_NONE ? in : GB_RET_MANY;
            changed = 1;
        }
    }
done:
    free(nullable), free(productive), free(reach), free(color), free(stack);
    return st;
}

// ---------------------------------------------------------------- entry

void gb_free(struct gb_grammar *g) {
    if (!g) return;
    free(g->elem), free(g->alts), free(g->rules), free(g->classes), free(g->ranges), free(g->names), free(g->ret);
    memset(g, 0, sizeof *g);
}

enum lm_status gb_parse(struct gb_grammar *out, const char *text, size_t len, const char *root,
                        const struct gb_limits *lim) {
    struct parser ps = {.s = text, .end = text + len, .p = text};
    if (lim) ps.lim = *lim;
    if (!ps.lim.max_rules) ps.lim.max_rules = 10000;
    if (!ps.lim.max_elems) ps.lim.max_elems = 1u << 20;
    if (!ps.lim.max_repeat) ps.lim.max_repeat = 10000;
    if (!root) root = "root";
    if (!text && len) return lm_error_set(LM_ERR_ARG, "gbnf: NULL text");
    struct gb_grammar g = {0};
    space(&ps, true);
    while (ps.p < ps.end && ps.st == LM_OK) parse_rule(&ps);
    enum lm_status st = ps.st;
    if (st == LM_OK) {
        for (uint32_t i = 0; i < ps.n_syms; i++)
            if (!ps.syms[i].defined) {
                st = lm_error_set(LM_ERR_ARG, "gbnf:%u:%u: undefined rule '%s'", ps.syms[i].line, ps.syms[i].col, ps.syms[i].name);
                break;
            }
    }
    g.root = UINT32_MAX;
    if (st == LM_OK) {
        for (uint32_t i = 0; i < ps.n_syms; i++)
            if (!strcmp(ps.syms[i].name, root)) g.root = i;
        if (g.root == UINT32_MAX) st = lm_error_set(LM_ERR_ARG, "gbnf:1:1: no rule named '%s' (the start rule)", root);
    }
    if (st == LM_OK) { // flatten
        size_t ne = 0, na = 0, nn = 0;
        for (uint32_t i = 0; i < ps.n_syms; i++) {
            ne += ps.syms[i].body.n, nn += strlen(ps.syms[i].name) + 1;
            for (uint32_t j = 0; j < ps.syms[i].body.n; j++) na += ps.syms[i].body.v[j].kind == GB_END;
        }
        g.elem = malloc((ne + 1) * sizeof *g.elem);
        g.alts = malloc((na + 1) * sizeof *g.alts);
        g.rules = calloc(ps.n_syms, sizeof *g.rules);
        g.names = malloc(nn + 1);
        g.ret = malloc((ps.n_syms + 1) * sizeof *g.ret);
        if (!g.elem || !g.alts || !g.rules || !g.names || !g.ret) {
            st = lm_error_set(LM_ERR_NOMEM, "gbnf: out of memory");
        } else {
            g.n_rules = ps.n_syms;
            for (uint32_t i = 0; i < ps.n_syms; i++) {
                struct gb_rule *r = &g.rules[i];
                r->name_off = g.n_names;
                size_t l = strlen(ps.syms[i].name) + 1;
                memcpy(g.names + g.n_names, ps.syms[i].name, l);
                g.n_names += (uint32_t)l;
                r->line = ps.syms[i].line, r->col = ps.syms[i].col;
                r->alt_off = g.n_alts;
                uint32_t start = g.n_elem;
                for (uint32_t j = 0; j < ps.syms[i].body.n; j++) {
                    g.elem[g.n_elem++] = ps.syms[i].body.v[j];
                    if (ps.syms[i].body.v[j].kind == GB_END) g.alts[g.n_alts++] = start, start = g.n_elem, r->n_alt++;
                }
            }
            g.classes = ps.classes, g.n_classes = ps.n_classes, ps.classes = NULL;
            g.ranges = ps.ranges, g.n_ranges = ps.n_ranges, ps.ranges = NULL;
            st = check(&g, &ps.lim);
        }
    }
    for (uint32_t i = 0; i < ps.n_syms; i++) free(ps.syms[i].name), free(ps.syms[i].body.v);
    free(ps.syms), free(ps.classes), free(ps.ranges), free(ps.ht);
    if (st != LM_OK) {
        gb_free(&g);
        return st;
    }
    *out = g;
    return LM_OK;
}

int gb_class_meets(const struct gb_grammar *g, uint32_t c, uint32_t lo, uint32_t hi) {
    const struct gb_class *k = &g->classes[c];
    const uint32_t *r = g->ranges + 2 * (size_t)k->off;
    for (uint32_t i = 0; i < k->n; i++)
        if (r[2 * i] <= hi && r[2 * i + 1] >= lo) return 1;
    return 0;
}
