// JSON Schema (text) -> GBNF text: one rule per subschema (identical bodies shared), $ref
// targets as named rules so recursion is a rule cycle, and bounds on depth, output size,
// $ref expansions and time. This file: the rule table, the shared rules, $ref, the dispatch
// of a subschema and the entry point (schema_types.c, schema_combine.c: the keywords).
// docs/structured.md lists the keywords and the output's spacing.
#include "grammar/schema_conv.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "base/timer.h"
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
static int rule_new(struct conv *c, const char *hint, const char *body) {
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

static void rule_set_body(struct conv *c, int i, const char *body) {
    c->rules[i].body = strdup(body);
    if (!c->rules[i].body) {
        sc_nomem(c);
        return;
    }
    if (!charge(c, strlen(body))) return;
    tab_insert(c->by_body, c->cap_tab, c->rules[i].body, i);
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
    i = rule_new(c, hint, s);
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
        i = rule_new(c, name, PRIMS[p].body);
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

// ---------------------------------------------------------------- keywords

// Ignored by design: annotations (and the containers of definitions). `discriminator` is
// OpenAPI's annotation that pydantic writes beside a tagged `oneOf`; it constrains nothing.
const char *const sc_annotations[] = {
    "title", "description", "examples", "default", "$schema", "$id", "$comment",
    "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "discriminator", NULL};
static const char *const KNOWN[] = {
    "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "properties", "required",
    "additionalProperties", "items", "prefixItems", "additionalItems", "minItems", "maxItems",
    "pattern", "minLength", "maxLength", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", NULL};
static const char *const OBJECT_KW[] = {"properties", "required", "additionalProperties", NULL};
static const char *const ARRAY_KW[] = {"items", "prefixItems", "additionalItems", "minItems",
                                       "maxItems", NULL};
static const char *const STRING_KW[] = {"pattern", "minLength", "maxLength", "format", NULL};
static const char *const NUMBER_KW[] = {"minimum", "maximum", "exclusiveMinimum",
                                        "exclusiveMaximum", NULL};

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

// A child subschema at path seg (or seg/i); guarded: inside brackets or quotes, so a $ref
// cycle through it consumes text.
const char *sc_visit_child(struct conv *c, json_t *s, const char *seg, long idx,
                               const char *hint, bool guarded) {
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

static bool push_edge(struct conv *c, int from, int to) {
    if (c->n_edges == c->cap_edges) {
        int cap = c->cap_edges ? c->cap_edges * 2 : 32;
        int *f = realloc(c->edge_from, sizeof(int) * (size_t)cap);
        if (!f) return sc_nomem(c);
        c->edge_from = f;
        int *t = realloc(c->edge_to, sizeof(int) * (size_t)cap);
        if (!t) return sc_nomem(c);
        c->edge_to = t;
        c->cap_edges = cap;
    }
    c->edge_from[c->n_edges] = from;
    c->edge_to[c->n_edges++] = to;
    return true;
}

// The rule of a $ref target, expanded once (recursion refers to the rule being expanded).
static const char *ref_rule(struct conv *c, const char *ref) {
    for (int i = 0; i < c->n_refs; i++) {
        if (strcmp(c->ref_ptr[i], ref)) continue;
        if (!c->guarded && !push_edge(c, c->cur_ref, i)) return NULL;
        return c->rules[c->ref_rule[i]].name;
    }
    json_t *target = sc_resolve(c, ref);
    if (!target) return NULL;
    if (c->n_refs >= LM_SCHEMA_MAX_REFS)
        return sc_fail(c, "more than %d $ref targets (LM_SCHEMA_MAX_REFS)", LM_SCHEMA_MAX_REFS), NULL;
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? c->cap_refs * 2 : 16;
        char **p = realloc(c->ref_ptr, sizeof(char *) * (size_t)cap);
        if (!p) return sc_nomem(c), NULL;
        c->ref_ptr = p;
        int *r = realloc(c->ref_rule, sizeof(int) * (size_t)cap);
        if (!r) return sc_nomem(c), NULL;
        c->ref_rule = r;
        c->cap_refs = cap;
    }
    const char *last = strrchr(ref, '/');
    char hint[80];
    snprintf(hint, sizeof hint, "%s%.60s", ref[1] ? "ref-" : "root", ref[1] ? last + 1 : "");
    int ri = rule_new(c, hint, NULL);
    if (ri < 0) return NULL;
    int id = c->n_refs;
    c->ref_ptr[id] = strdup(ref);
    if (!c->ref_ptr[id]) return sc_nomem(c), NULL;
    c->ref_rule[id] = ri;
    c->n_refs++;
    if (id > 0 && !c->guarded && !push_edge(c, c->cur_ref, id)) return NULL;
    // expand at the target's own path, unguarded, as the current target
    char saved_path[sizeof c->path];
    size_t saved_n = c->path_n;
    memcpy(saved_path, c->path, saved_n + 1);
    snprintf(c->path, sizeof c->path, "%s", ref + 1);
    c->path_n = strlen(c->path);
    int saved_ref = c->cur_ref;
    bool saved_g = c->guarded;
    c->cur_ref = id;
    c->guarded = false;
    char body_hint[96];
    snprintf(body_hint, sizeof body_hint, "%s", c->rules[ri].name);
    c->last_new = -1;
    const char *body = sc_visit(c, target, body_hint);
    int fresh = c->last_new;
    c->cur_ref = saved_ref;
    c->guarded = saved_g;
    memcpy(c->path, saved_path, saved_n + 1);
    c->path_n = saved_n;
    if (!body) return NULL;
    if (fresh > ri && c->rules[fresh].body && !strcmp(body, c->rules[fresh].name)) {
        // the target's own rule, made just now and referenced by nobody yet: its body
        // becomes the target's (no alias rule)
        c->rules[ri].body = c->rules[fresh].body;
        c->rules[fresh].body = NULL;
        c->rules[fresh].dead = true;
        tab_insert(c->by_body, c->cap_tab, c->rules[ri].body, ri);
        c->last_new = -1;
        return c->rules[ri].name;
    }
    rule_set_body(c, ri, body);
    c->last_new = -1;
    return c->failed ? NULL : c->rules[ri].name;
}

// A cycle among $ref targets reached without consuming text: left recursion, never a
// sentence (e.g. {"$ref": "#"}).
static bool check_ref_cycles(struct conv *c) {
    int n = c->n_refs;
    int *state = calloc((size_t)n + 1, sizeof(int)), *stack = malloc(sizeof(int) * ((size_t)n + 1));
    int *pos = calloc((size_t)n + 1, sizeof(int));
    if (!state || !stack || !pos) {
        free(state), free(stack), free(pos);
        return sc_nomem(c);
    }
    bool ok = true;
    for (int s = 0; s < n && ok; s++) {
        if (state[s]) continue;
        int sp = 0;
        stack[sp++] = s;
        state[s] = 1;
        pos[s] = 0;
        while (sp && ok) {
            int u = stack[sp - 1];
            int e = pos[u];
            while (e < c->n_edges && c->edge_from[e] != u) e++;
            if (e == c->n_edges) {
                state[u] = 2;
                sp--;
                continue;
            }
            pos[u] = e + 1;
            int v = c->edge_to[e];
            if (state[v] == 1) {
                c->path_n = 0;
                snprintf(c->path, sizeof c->path, "%s", c->ref_ptr[v] + 1);
                c->path_n = strlen(c->path);
                ok = sc_fail(c, "$ref cycle that consumes no text (left recursion) through '%s'",
                          c->ref_ptr[u]);
            } else if (!state[v]) {
                state[v] = 1;
                pos[v] = 0;
                stack[sp++] = v;
            }
        }
    }
    free(state), free(stack), free(pos);
    return ok;
}

// ---------------------------------------------------------------- one subschema

const char *sc_visit(struct conv *c, json_t *s, const char *hint) {
    if (c->failed) return NULL;
    if (++c->nodes > LM_SCHEMA_MAX_NODES)
        return sc_fail(c, "more than %d subschemas visited (LM_SCHEMA_MAX_NODES)", LM_SCHEMA_MAX_NODES), NULL;
    if (lm_now_ns() > c->deadline)
        return sc_fail(c, "conversion exceeds %d ms (LM_SCHEMA_MAX_MS)", LM_SCHEMA_MAX_MS), NULL;
    if (c->depth >= LM_SCHEMA_MAX_DEPTH)
        return sc_fail(c, "schema nested deeper than %d (LM_SCHEMA_MAX_DEPTH)", LM_SCHEMA_MAX_DEPTH), NULL;
    if (json_is_true(s)) return sc_prim(c, "value");
    if (json_is_false(s)) return sc_fail(c, "schema false accepts no value"), NULL;
    if (!json_is_object(s)) return sc_fail(c, "a schema must be an object or a boolean"), NULL;
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        if (!sc_in_list(sc_annotations, k) && !sc_in_list(KNOWN, k))
            return sc_fail(c, "unsupported keyword '%.60s'", k), NULL;
    }
    c->depth++;
    const char *r = NULL;
    unsigned types = 0;
    if (json_object_get(s, "$ref")) {
        json_t *ref = json_object_get(s, "$ref");
        static const char *const ok[] = {"$ref", NULL};
        bool plain = true;
        const char *k2;
        json_t *v2;
        json_object_foreach(s, k2, v2) plain &= !strcmp(k2, "$ref") || sc_in_list(sc_annotations, k2);
        (void)ok;
        if (!json_is_string(ref)) {
            sc_fail(c, "'$ref' must be a string");
        } else if (plain) {
            r = ref_rule(c, json_string_value(ref));
        } else { // siblings hold too (2019-09 on): merged into a copy of the target
            json_t *target = sc_resolve(c, json_string_value(ref)), *sib = json_object(), *m = NULL;
            if (!sib) sc_nomem(c);
            json_object_foreach(s, k2, v2) {
                if (sib && strcmp(k2, "$ref") && !sc_in_list(sc_annotations, k2)) json_object_set(sib, k2, v2);
            }
            if (target && sib && !c->failed) m = sc_merge_schemas(c, sib, target, 0);
            if (m) r = sc_visit(c, m, hint);
            json_decref(m);
            json_decref(sib);
        }
    } else if (json_object_get(s, "anyOf")) {
        r = sc_visit_any_of(c, s, hint, "anyOf");
    } else if (json_object_get(s, "oneOf")) {
        r = sc_visit_any_of(c, s, hint, "oneOf"); // exclusivity is not enforced
    } else if (json_object_get(s, "allOf")) {
        r = sc_visit_all_of(c, s, hint);
    } else if (!sc_get_types(c, s, &types)) {
        r = NULL;
    } else if (json_object_get(s, "enum") || json_object_get(s, "const")) {
        r = sc_visit_enum(c, s, hint, types);
    } else {
        if (!types) { // no type: the types the keywords speak of, else any value
            if (sc_has_any(s, OBJECT_KW)) types |= T_OBJECT;
            if (sc_has_any(s, ARRAY_KW)) types |= T_ARRAY;
            if (sc_has_any(s, STRING_KW)) types |= T_STRING;
            if (sc_has_any(s, NUMBER_KW)) types |= T_NUMBER;
            if (!types) types = T_NULL | T_BOOL | T_OBJECT | T_ARRAY | T_NUMBER | T_STRING;
        }
        const char *alt[7];
        int n = 0;
        for (int t = 0; t < 7 && !c->failed; t++) {
            if (!(types & (1u << t))) continue;
            char h[96];
            if (types & (types - 1)) sc_hint_join(h, sizeof h, hint, sc_type_names[t]);
            else snprintf(h, sizeof h, "%s", hint);
            const char *x = NULL;
            switch (1u << t) {
            case T_NULL: x = sc_prim(c, "null"); break;
            case T_BOOL: x = sc_prim(c, "boolean"); break;
            case T_OBJECT: x = sc_visit_object(c, s, h); break;
            case T_ARRAY: x = sc_visit_array(c, s, h); break;
            case T_STRING: x = sc_visit_string(c, s, h); break;
            case T_NUMBER: x = sc_visit_number(c, s, h, false); break;
            case T_INTEGER: x = sc_visit_number(c, s, h, true); break;
            }
            if (x) alt[n++] = x;
        }
        if (!c->failed && n == 6 && types == (T_NULL | T_BOOL | T_OBJECT | T_ARRAY | T_NUMBER | T_STRING) &&
            !strcmp(alt[2], "object") && !strcmp(alt[3], "array") && !strcmp(alt[4], "number") &&
            !strcmp(alt[5], "string")) {
            r = sc_prim(c, "value");
        } else if (!c->failed && n == 1) {
            r = alt[0];
        } else if (!c->failed) {
            struct lm_strbuf b;
            sc_buf_init(&b);
            for (int i = 0; i < n; i++) lm_strbuf_printf(&b, i ? " | %s" : "%s", alt[i]);
            r = sc_rule_for(c, hint, &b);
            free(b.p);
        }
    }
    c->depth--;
    return c->failed ? NULL : r;
}

// ---------------------------------------------------------------- entry

static void conv_free(struct conv *c) {
    for (int i = 0; i < c->n_rules; i++) free(c->rules[i].name), free(c->rules[i].body);
    for (int i = 0; i < c->n_refs; i++) free(c->ref_ptr[i]);
    free(c->rules), free(c->by_name), free(c->by_body), free(c->ref_ptr), free(c->ref_rule);
    free(c->edge_from), free(c->edge_to);
}

enum lm_status lm_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf, size_t *n_gbnf) {
    if (gbnf) *gbnf = NULL;
    if (n_gbnf) *n_gbnf = 0;
    if (!schema || !gbnf) return lm_error_set(LM_ERR_ARG, "json schema: NULL argument");
    if (len > LM_SCHEMA_MAX_INPUT)
        return lm_error_set(LM_ERR_ARG, "json schema: %zu bytes exceed %u (LM_SCHEMA_MAX_INPUT)",
                            len, LM_SCHEMA_MAX_INPUT);
    json_error_t jerr;
    json_t *doc = json_loadb(schema, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!doc)
        return lm_error_set(LM_ERR_ARG, "json schema: not valid JSON: line %d column %d: %s",
                            jerr.line, jerr.column, jerr.text);
    struct conv c;
    memset(&c, 0, sizeof c);
    c.doc = doc;
    c.deadline = lm_now_ns() + (uint64_t)LM_SCHEMA_MAX_MS * 1000000ull;
    enum lm_status st = LM_OK;
    // the document is the target "#", so {"$ref": "#"} recurses into the rule "root"
    c.guarded = false;
    const char *root = ref_rule(&c, "#");
    if (root && strcmp(root, "root")) sc_fail(&c, "internal: root rule named '%s'", root);
    if (!c.failed) check_ref_cycles(&c);
    if (c.failed) {
        st = !strncmp(lm_error_msg(), "json schema: out of memory", 26) ? LM_ERR_NOMEM : LM_ERR_ARG;
    } else {
        struct lm_strbuf out;
        memset(&out, 0, sizeof out);
        for (int i = 0; i < c.n_rules; i++) {
            if (c.rules[i].dead) continue;
            lm_strbuf_puts(&out, c.rules[i].name);
            lm_strbuf_puts(&out, " ::= ");
            lm_strbuf_puts(&out, c.rules[i].body);
            lm_strbuf_puts(&out, "\n");
        }
        if (out.nomem) {
            free(out.p);
            st = lm_error_set(LM_ERR_NOMEM, "json schema: out of memory");
        } else {
            *gbnf = out.p;
            if (n_gbnf) *n_gbnf = out.n;
        }
    }
    conv_free(&c);
    json_decref(doc);
    return st;
}
