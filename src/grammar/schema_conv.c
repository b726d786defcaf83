// The JSON Schema converter's shared machinery (schema_conv.h): failure and the JSON pointer
// of the subschema at hand, the rule table (one rule per distinct body, named after a hint),
// the shared primitive rules, JSON literals, keyword lists and local $ref resolution.
#include "grammar/schema_conv.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "lumen.h"

// ---------------------------------------------------------------- state

bool sc_fail(struct conv *c, const char *fmt, ...) {
    if (c->failed) return false;
    c->failed = true;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    lm_error_set(LM_ERR_ARG, "json schema: %s: %s", c->path_n ? c->path : "(root)", msg);
    return false;
}

// Appends "/seg" (escaped as a JSON pointer) to the path; returns the old length.
size_t sc_path_push(struct conv *c, const char *seg) {
    size_t old = c->path_n;
    char tmp[256];
    size_t k = 0;
    tmp[k++] = '/';
    for (const char *p = seg; *p && k + 3 < sizeof tmp; p++) {
        if (*p == '~') tmp[k++] = '~', tmp[k++] = '0';
        else if (*p == '/') tmp[k++] = '~', tmp[k++] = '1';
        else tmp[k++] = *p;
    }
    if (c->path_n + k + 1 < sizeof c->path) {
        memcpy(c->path + c->path_n, tmp, k);
        c->path_n += k;
        c->path[c->path_n] = 0;
    }
    return old;
}
size_t sc_path_push_i(struct conv *c, size_t i) {
    char tmp[24];
    snprintf(tmp, sizeof tmp, "%zu", i);
    return sc_path_push(c, tmp);
}
void sc_path_pop(struct conv *c, size_t old) {
    c->path_n = old;
    c->path[old] = 0;
}

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool tab_grow(struct conv *c) {
    int cap = c->cap_tab ? c->cap_tab * 2 : 256;
    int *bn = malloc(sizeof(int) * (size_t)cap), *bb = malloc(sizeof(int) * (size_t)cap);
    if (!bn || !bb) {
        free(bn);
        free(bb);
        return false;
    }
    memset(bn, -1, sizeof(int) * (size_t)cap);
    memset(bb, -1, sizeof(int) * (size_t)cap);
    for (int i = 0; i < c->n_rules; i++) {
        size_t h = hash_str(c->rules[i].name) & (size_t)(cap - 1);
        while (bn[h] >= 0) h = (h + 1) & (size_t)(cap - 1);
        bn[h] = i;
        if (!c->rules[i].body) continue;
        h = hash_str(c->rules[i].body) & (size_t)(cap - 1);
        while (bb[h] >= 0) h = (h + 1) & (size_t)(cap - 1);
        bb[h] = i;
    }
    free(c->by_name);
    free(c->by_body);
    c->by_name = bn;
    c->by_body = bb;
    c->cap_tab = cap;
    return true;
}

static int find_name(struct conv *c, const char *name) {
    if (!c->cap_tab) return -1;
    size_t h = hash_str(name) & (size_t)(c->cap_tab - 1);
    for (; c->by_name[h] >= 0; h = (h + 1) & (size_t)(c->cap_tab - 1))
        if (!strcmp(c->rules[c->by_name[h]].name, name)) return c->by_name[h];
    return -1;
}

static int find_body(struct conv *c, const char *body) {
    if (!c->cap_tab) return -1;
    size_t h = hash_str(body) & (size_t)(c->cap_tab - 1);
    for (; c->by_body[h] >= 0; h = (h + 1) & (size_t)(c->cap_tab - 1)) {
        const char *b = c->rules[c->by_body[h]].body;
        if (b && !strcmp(b, body)) return c->by_body[h];
    }
    return -1;
}

static void tab_insert(int *tab, int cap, const char *key, int idx) {
    size_t h = hash_str(key) & (size_t)(cap - 1);
    while (tab[h] >= 0) h = (h + 1) & (size_t)(cap - 1);
    tab[h] = idx;
}

bool sc_nomem(struct conv *c) {
    if (c->failed) return false;
    c->failed = true;
    lm_error_set(LM_ERR_NOMEM, "json schema: out of memory");
    return false;
}

static bool charge(struct conv *c, size_t n) {
    c->out_bytes += n;
    if (c->out_bytes > LM_SCHEMA_MAX_OUTPUT)
        return sc_fail(c, "grammar exceeds %u bytes (LM_SCHEMA_MAX_OUTPUT)", LM_SCHEMA_MAX_OUTPUT);
    return true;
}

// A new rule named after hint (made unique); body may be NULL (filled in later). Returns its
// index or -1.
int sc_rule_new(struct conv *c, const char *hint, const char *body) {
    if (c->failed) return -1;
    char name[96];
    size_t k = 0;
    for (const char *p = hint; *p && k < 64; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (!ok) ch = '-';
        if (ch == '-' && (k == 0 || name[k - 1] == '-')) continue;
        name[k++] = ch;
    }
    while (k && name[k - 1] == '-') k--;
    if (!k) name[k++] = 'r';
    name[k] = 0;
    if (find_name(c, name) >= 0) {
        for (int i = 1;; i++) {
            snprintf(name + k, sizeof name - k, "-%d", i);
            if (find_name(c, name) < 0) break;
        }
    }
    if ((c->n_rules + 1) * 2 > c->cap_tab && !tab_grow(c)) return sc_nomem(c), -1;
    if (c->n_rules == c->cap_rules) {
        int cap = c->cap_rules ? c->cap_rules * 2 : 64;
        struct rule *r = realloc(c->rules, sizeof *r * (size_t)cap);
        if (!r) return sc_nomem(c), -1;
        c->rules = r;
        c->cap_rules = cap;
    }
    struct rule *r = &c->rules[c->n_rules];
    r->name = strdup(name);
    r->body = body ? strdup(body) : NULL;
    r->dead = false;
    if (!r->name || (body && !r->body)) {
        free(r->name);
        free(r->body);
        return sc_nomem(c), -1;
    }
    if (!charge(c, strlen(name) + (body ? strlen(body) : 0) + 6)) {
        free(r->name);
        free(r->body);
        return -1;
    }
    tab_insert(c->by_name, c->cap_tab, r->name, c->n_rules);
    if (body) tab_insert(c->by_body, c->cap_tab, r->body, c->n_rules);
    return c->n_rules++;
}

void sc_rule_set_body(struct conv *c, int i, const char *body) {
    c->rules[i].body = strdup(body);
    if (!c->rules[i].body) {
        sc_nomem(c);
        return;
    }
    if (!charge(c, strlen(body))) return;
    tab_insert(c->by_body, c->cap_tab, c->rules[i].body, i);
}

void sc_rule_take_body(struct conv *c, int to, int from) {
    c->rules[to].body = c->rules[from].body;
    c->rules[from].body = NULL;
    c->rules[from].dead = true;
    tab_insert(c->by_body, c->cap_tab, c->rules[to].body, to);
}

// The rule for body: an existing one with the same body, or a new one named after hint;
// a bare rule name stands for itself. NULL on failure.
const char *sc_rule_for(struct conv *c, const char *hint, struct lm_strbuf *body) {
    if (c->failed) return NULL;
    if (body->nomem) return sc_nomem(c), NULL;
    if (body->over) return sc_fail(c, "grammar exceeds %u bytes (LM_SCHEMA_MAX_OUTPUT)", LM_SCHEMA_MAX_OUTPUT), NULL;
    const char *s = body->p ? body->p : "\"\"";
    c->last_new = -1;
    int i = find_name(c, s);
    if (i >= 0) return c->rules[i].name; // "string", "root-a": already a rule
    i = find_body(c, s);
    if (i >= 0) return c->rules[i].name;
    i = sc_rule_new(c, hint, s);
    c->last_new = i;
    return i < 0 ? NULL : c->rules[i].name;
}

void sc_buf_init(struct lm_strbuf *b) {
    memset(b, 0, sizeof *b);
    b->limit = LM_SCHEMA_MAX_OUTPUT;
}

const char *sc_rule_text(struct conv *c, const char *hint, const char *text) {
    struct lm_strbuf b;
    sc_buf_init(&b);
    lm_strbuf_puts(&b, text);
    const char *r = sc_rule_for(c, hint, &b);
    free(b.p);
    return r;
}

// ---------------------------------------------------------------- primitive rules

static const struct {
    const char *name, *body;
} PRIMS[] = {
    {"char", "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-Ce-fE-F] "
             "[0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))"},
    {"string", "\"\\\"\" char* \"\\\"\""},
    {"integer", "\"-\"? (\"0\" | [1-9] [0-9]{0,15})"},
    {"number", "\"-\"? (\"0\" | [1-9] [0-9]{0,15}) (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?"},
    {"boolean", "\"true\" | \"false\""},
    {"null", "\"null\""},
    {"value", "object | array | string | number | boolean | null"},
    {"object", "\"{\" (string \": \" value (\", \" string \": \" value)*)? \"}\""},
    {"array", "\"[\" (value (\", \" value)*)? \"]\""},
    // ECMA-262 `.`: no line terminator (\n \r U+2028 U+2029), so no \u escapes either
    {"regex-dot", "[^\"\\\\\\x00-\\x1F\\u2028\\u2029] | \"\\\\\" [\"\\\\/bft]"},
    {"date", "year \"-\" month-day | leap-year \"-02-29\""},
    {"year", "[0-9]{3} [1-9] | [0-9]{2} [1-9] \"0\" | [0-9] [1-9] \"00\" | [1-9] \"000\""},
    {"leap-year", "[0-9]{2} (\"0\" [48] | [2468] [048] | [13579] [26]) | (\"0\" [48] | [2468] "
                  "[048] | [13579] [26]) \"00\""},
    {"month-day", "(\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01]) | "
                  "(\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | \"02-\" "
                  "(\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])"},
    {"time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? "
             "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])"},
    {"date-time", "date \"T\" time"},
    {"uuid", "[0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12}"},
    {"format-date", "\"\\\"\" date \"\\\"\""},
    {"format-time", "\"\\\"\" time \"\\\"\""},
    {"format-date-time", "\"\\\"\" date-time \"\\\"\""},
    {"format-uuid", "\"\\\"\" uuid \"\\\"\""},
    {"ipv4", "octet \".\" octet \".\" octet \".\" octet"},
    {"octet", "\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9]"},
    {"format-ipv4", "\"\\\"\" ipv4 \"\\\"\""},
};
#define N_PRIMS (int)(sizeof PRIMS / sizeof PRIMS[0])

static const char *const PRIM_DEPS[][4] = {
    [1] = {"char"},       [6] = {"object", "array", "string", "number"},
    [7] = {"string", "value"}, [8] = {"value"},
    [10] = {"year", "leap-year", "month-day"}, [15] = {"date", "time"},
    [17] = {"date"}, [18] = {"time"}, [19] = {"date-time"}, [20] = {"uuid"},
    [21] = {"octet"}, [23] = {"ipv4"},
};
_Static_assert(sizeof PRIM_DEPS / sizeof PRIM_DEPS[0] == N_PRIMS, "one PRIM_DEPS row per PRIMS entry");

// The primitive rule `name` (and the ones it uses), added once.
const char *sc_prim(struct conv *c, const char *name) {
    if (c->failed) return NULL;
    int i = find_name(c, name);
    if (i >= 0) return c->rules[i].name;
    for (int p = 0; p < N_PRIMS; p++) {
        if (strcmp(PRIMS[p].name, name)) continue;
        i = sc_rule_new(c, name, PRIMS[p].body);
        if (i < 0) return NULL;
        for (int d = 0; d < 4 && PRIM_DEPS[p][d]; d++)
            if (!sc_prim(c, PRIM_DEPS[p][d])) return NULL;
        if (p == 6) sc_prim(c, "boolean"), sc_prim(c, "null");
        return c->rules[i].name;
    }
    LM_ASSERT(0 && "unknown primitive");
    return NULL;
}

// ---------------------------------------------------------------- JSON literals

// Appends v serialized as the grammar spaces JSON (", " and ": ", json.dumps style).
void sc_dump_json(struct lm_strbuf *b, json_t *v) {
    char tmp[40];
    switch (json_typeof(v)) {
    case JSON_NULL: lm_strbuf_puts(b, "null"); break;
    case JSON_TRUE: lm_strbuf_puts(b, "true"); break;
    case JSON_FALSE: lm_strbuf_puts(b, "false"); break;
    case JSON_INTEGER: lm_strbuf_printf(b, "%lld", (long long)json_integer_value(v)); break;
    case JSON_REAL: {
        double d = json_real_value(v);
        for (int prec = 15; prec <= 17; prec++) { // the shortest text that reads back as d
            snprintf(tmp, sizeof tmp, "%.*g", prec, d);
            if (strtod(tmp, NULL) == d) break;
        }
        lm_strbuf_puts(b, tmp);
        if (!strpbrk(tmp, ".eEn")) lm_strbuf_puts(b, ".0");
        break;
    }
    case JSON_STRING: {
        const unsigned char *s = (const unsigned char *)json_string_value(v);
        size_t n = json_string_length(v), i = 0;
        lm_strbuf_put(b, "\"", 1);
        while (i < n) {
            uint32_t cp = s[i];
            int k = cp < 0x80 ? 0 : cp >= 0xF0 ? 3 : cp >= 0xE0 ? 2 : 1;
            if (k) cp &= 0x3F >> k;
            i++;
            for (int j = 0; j < k && i < n; j++) cp = cp << 6 | (s[i++] & 0x3F);
            char enc[8];
            lm_strbuf_put(b, enc, lm_json_encode_cp(cp, enc));
        }
        lm_strbuf_put(b, "\"", 1);
        break;
    }
    case JSON_ARRAY: {
        lm_strbuf_put(b, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) lm_strbuf_puts(b, ", ");
            sc_dump_json(b, json_array_get(v, i));
        }
        lm_strbuf_put(b, "]", 1);
        break;
    }
    case JSON_OBJECT: {
        const char *k;
        json_t *x;
        int first = 1;
        lm_strbuf_put(b, "{", 1);
        json_object_foreach(v, k, x) {
            if (!first) lm_strbuf_puts(b, ", ");
            first = 0;
            json_t *ks = json_string(k);
            if (ks) sc_dump_json(b, ks);
            else b->nomem = true;
            json_decref(ks);
            lm_strbuf_puts(b, ": ");
            sc_dump_json(b, x);
        }
        lm_strbuf_put(b, "}", 1);
        break;
    }
    }
}

// v serialized, as one GBNF string literal
void sc_put_literal(struct lm_strbuf *b, json_t *v) {
    struct lm_strbuf t;
    sc_buf_init(&t);
    sc_dump_json(&t, v);
    if (t.nomem) b->nomem = true;
    if (t.over) b->over = true;
    if (t.p) lm_gbnf_lit(b, t.p, t.n);
    free(t.p);
}

// ---------------------------------------------------------------- keywords and children

// Ignored by design: annotations (and the containers of definitions). `discriminator` is
// OpenAPI's annotation that pydantic writes beside a tagged `oneOf`; it constrains nothing.
const char *const sc_annotations[] = {
    "title", "description", "examples", "default", "$schema", "$id", "$comment",
    "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "discriminator", NULL};

bool sc_in_list(const char *const *l, const char *k) {
    for (; *l; l++)
        if (!strcmp(*l, k)) return true;
    return false;
}
bool sc_has_any(json_t *s, const char *const *l) {
    for (; *l; l++)
        if (json_object_get(s, *l)) return true;
    return false;
}

// Every keyword of s other than annotations and `allowed` is refused with its name.
bool sc_only_keywords(struct conv *c, json_t *s, const char *const *allowed, const char *why) {
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        if (sc_in_list(sc_annotations, k) || (allowed && sc_in_list(allowed, k))) continue;
        return sc_fail(c, "keyword '%s' beside %s is not supported", k, why);
    }
    return true;
}

// The rule of a subschema: the dispatch of schema.c, through the pointer it set (so the
// keyword files and this one do not call back up into it).
const char *sc_visit(struct conv *c, json_t *s, const char *hint) { return c->visit(c, s, hint); }

// A child subschema at path seg (or seg/i); guarded: inside brackets or quotes, so a $ref
// cycle through it consumes text.
const char *sc_visit_child(struct conv *c, json_t *s, const char *seg, long idx, const char *hint,
                           bool guarded) {
    size_t old = sc_path_push(c, seg);
    if (idx >= 0) sc_path_push_i(c, (size_t)idx);
    bool g = c->guarded;
    if (guarded) c->guarded = true;
    const char *r = sc_visit(c, s, hint);
    c->guarded = g;
    sc_path_pop(c, old);
    return r;
}

void sc_hint_join(char *out, size_t cap, const char *a, const char *b) {
    snprintf(out, cap, "%.40s-%.40s", a, b);
}

// ---------------------------------------------------------------- $ref

// Resolves a local reference ("#", "#/a/b~1c/0") in the document.
json_t *sc_resolve(struct conv *c, const char *ref) {
    if (ref[0] != '#') return sc_fail(c, "$ref '%.200s': only local references (#/...) are supported", ref), NULL;
    json_t *v = c->doc;
    const char *p = ref + 1;
    while (*p) {
        if (*p != '/') return sc_fail(c, "$ref '%.200s': not a JSON pointer", ref), NULL;
        p++;
        char seg[256];
        size_t k = 0;
        while (*p && *p != '/') {
            char ch = *p++;
            if (ch == '~') {
                ch = *p == '1' ? '/' : *p == '0' ? '~' : 0;
                if (!ch) return sc_fail(c, "$ref '%.200s': bad ~ escape", ref), NULL;
                p++;
            } else if (ch == '%' && p[0] && p[1]) {
                char hx[3] = {p[0], p[1], 0};
                char *end;
                long x = strtol(hx, &end, 16);
                if (*end || x <= 0) return sc_fail(c, "$ref '%.200s': bad %% escape", ref), NULL;
                ch = (char)x;
                p += 2;
            }
            if (k + 1 >= sizeof seg) return sc_fail(c, "$ref '%.200s': segment too long", ref), NULL;
            seg[k++] = ch;
        }
        seg[k] = 0;
        if (json_is_object(v)) {
            v = json_object_get(v, seg);
        } else if (json_is_array(v)) {
            char *end;
            unsigned long i = strtoul(seg, &end, 10);
            v = (*seg && !*end) ? json_array_get(v, i) : NULL;
        } else {
            v = NULL;
        }
        if (!v) return sc_fail(c, "$ref '%.200s' points at nothing", ref), NULL;
    }
    return v;
}

