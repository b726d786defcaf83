// JSON Schema (text) -> GBNF text: one rule per subschema (identical bodies shared), $ref
// targets as named rules so recursion is a rule cycle, and bounds on depth, output size,
// $ref expansions and time. docs/structured.md lists the keywords and the output's spacing.
#include "grammar/schema.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timer.h"
#include "lumen.h"

// ---------------------------------------------------------------- state

struct rule {
    char *name, *body; // body NULL while a $ref target is being expanded
    bool dead;         // its body moved to a $ref target's rule: not written out
};

struct conv {
    json_t *doc;
    struct rule *rules;
    int n_rules, cap_rules;
    int *by_name, *by_body; // open-addressing tables of rule indices (-1 empty)
    int cap_tab;
    // $ref targets: pointer text -> rule index; edges between targets reached with no
    // character consumed (a cycle of them is left recursion)
    char **ref_ptr;
    int *ref_rule;
    int n_refs, cap_refs;
    int *edge_from, *edge_to;
    int n_edges, cap_edges;
    int cur_ref;
    int last_new; // the rule rule_for created last (-1: it reused one)
    bool guarded;
    int depth;
    long nodes;
    uint64_t deadline;
    size_t out_bytes;
    bool failed;
    char path[1024];
    size_t path_n;
};

static bool fail(struct conv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(struct conv *c, const char *fmt, ...) {
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
static size_t path_push(struct conv *c, const char *seg) {
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
static size_t path_push_i(struct conv *c, size_t i) {
    char tmp[24];
    snprintf(tmp, sizeof tmp, "%zu", i);
    return path_push(c, tmp);
}
static void path_pop(struct conv *c, size_t old) {
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

static bool nomem(struct conv *c) {
    if (c->failed) return false;
    c->failed = true;
    lm_error_set(LM_ERR_NOMEM, "json schema: out of memory");
    return false;
}

static bool charge(struct conv *c, size_t n) {
    c->out_bytes += n;
    if (c->out_bytes > LM_SCHEMA_MAX_OUTPUT)
        return fail(c, "grammar exceeds %u bytes (LM_SCHEMA_MAX_OUTPUT)", LM_SCHEMA_MAX_OUTPUT);
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
    if ((c->n_rules + 1) * 2 > c->cap_tab && !tab_grow(c)) return nomem(c), -1;
    if (c->n_rules == c->cap_rules) {
        int cap = c->cap_rules ? c->cap_rules * 2 : 64;
        struct rule *r = realloc(c->rules, sizeof *r * (size_t)cap);
        if (!r) return nomem(c), -1;
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
        return nomem(c), -1;
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
        nomem(c);
        return;
    }
    if (!charge(c, strlen(body))) return;
    tab_insert(c->by_body, c->cap_tab, c->rules[i].body, i);
}

// The rule for body: an existing one with the same body, or a new one named after hint;
// a bare rule name stands for itself. NULL on failure.
static const char *rule_for(struct conv *c, const char *hint, struct lm_gbnf_buf *body) {
    if (c->failed) return NULL;
    if (body->nomem) return nomem(c), NULL;
    if (body->over) return fail(c, "grammar exceeds %u bytes (LM_SCHEMA_MAX_OUTPUT)", LM_SCHEMA_MAX_OUTPUT), NULL;
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

static void buf_init(struct lm_gbnf_buf *b) {
    memset(b, 0, sizeof *b);
    b->limit = LM_SCHEMA_MAX_OUTPUT;
}

static const char *rule_text(struct conv *c, const char *hint, const char *text) {
    struct lm_gbnf_buf b;
    buf_init(&b);
    lm_gbnf_buf_puts(&b, text);
    const char *r = rule_for(c, hint, &b);
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
};
#define N_PRIMS (int)(sizeof PRIMS / sizeof PRIMS[0])

static const char *const PRIM_DEPS[][4] = {
    [1] = {"char"},       [6] = {"object", "array", "string", "number"},
    [7] = {"string", "value"}, [8] = {"value"},
    [10] = {"year", "leap-year", "month-day"}, [15] = {"date", "time"},
    [17] = {"date"}, [18] = {"time"}, [19] = {"date-time"}, [20] = {"uuid"},
};

// The primitive rule `name` (and the ones it uses), added once.
static const char *prim(struct conv *c, const char *name) {
    if (c->failed) return NULL;
    int i = find_name(c, name);
    if (i >= 0) return c->rules[i].name;
    for (int p = 0; p < N_PRIMS; p++) {
        if (strcmp(PRIMS[p].name, name)) continue;
        i = rule_new(c, name, PRIMS[p].body);
        if (i < 0) return NULL;
        for (int d = 0; d < 4 && PRIM_DEPS[p][d]; d++)
            if (!prim(c, PRIM_DEPS[p][d])) return NULL;
        if (p == 6) prim(c, "boolean"), prim(c, "null");
        return c->rules[i].name;
    }
    LM_ASSERT(0 && "unknown primitive");
    return NULL;
}

// ---------------------------------------------------------------- JSON literals

// Appends v serialized as the grammar spaces JSON (", " and ": ", json.dumps style).
static void dump_json(struct lm_gbnf_buf *b, json_t *v) {
    char tmp[40];
    switch (json_typeof(v)) {
    case JSON_NULL: lm_gbnf_buf_puts(b, "null"); break;
    case JSON_TRUE: lm_gbnf_buf_puts(b, "true"); break;
    case JSON_FALSE: lm_gbnf_buf_puts(b, "false"); break;
    case JSON_INTEGER: lm_gbnf_buf_printf(b, "%lld", (long long)json_integer_value(v)); break;
    case JSON_REAL: {
        double d = json_real_value(v);
        for (int prec = 15; prec <= 17; prec++) { // the shortest text that reads back as d
            snprintf(tmp, sizeof tmp, "%.*g", prec, d);
            if (strtod(tmp, NULL) == d) break;
        }
        lm_gbnf_buf_puts(b, tmp);
        if (!strpbrk(tmp, ".eEn")) lm_gbnf_buf_puts(b, ".0");
        break;
    }
    case JSON_STRING: {
        const unsigned char *s = (const unsigned char *)json_string_value(v);
        size_t n = json_string_length(v), i = 0;
        lm_gbnf_buf_put(b, "\"", 1);
        while (i < n) {
            uint32_t cp = s[i];
            int k = cp < 0x80 ? 0 : cp >= 0xF0 ? 3 : cp >= 0xE0 ? 2 : 1;
            if (k) cp &= 0x3F >> k;
            i++;
            for (int j = 0; j < k && i < n; j++) cp = cp << 6 | (s[i++] & 0x3F);
            char enc[8];
            lm_gbnf_buf_put(b, enc, lm_json_encode_cp(cp, enc));
        }
        lm_gbnf_buf_put(b, "\"", 1);
        break;
    }
    case JSON_ARRAY: {
        lm_gbnf_buf_put(b, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) lm_gbnf_buf_puts(b, ", ");
            dump_json(b, json_array_get(v, i));
        }
        lm_gbnf_buf_put(b, "]", 1);
        break;
    }
    case JSON_OBJECT: {
        const char *k;
        json_t *x;
        int first = 1;
        lm_gbnf_buf_put(b, "{", 1);
        json_object_foreach(v, k, x) {
            if (!first) lm_gbnf_buf_puts(b, ", ");
            first = 0;
            json_t *ks = json_string(k);
            if (ks) dump_json(b, ks);
            else b->nomem = true;
            json_decref(ks);
            lm_gbnf_buf_puts(b, ": ");
            dump_json(b, x);
        }
        lm_gbnf_buf_put(b, "}", 1);
        break;
    }
    }
}

// v serialized, as one GBNF string literal
static void put_literal(struct lm_gbnf_buf *b, json_t *v) {
    struct lm_gbnf_buf t;
    buf_init(&t);
    dump_json(&t, v);
    if (t.nomem) b->nomem = true;
    if (t.over) b->over = true;
    if (t.p) lm_gbnf_buf_lit(b, t.p, t.n);
    free(t.p);
}

// ---------------------------------------------------------------- keywords

static const char *const ANNOTATIONS[] = {
    "title", "description", "examples", "default", "$schema", "$id", "$comment",
    "deprecated", "readOnly", "writeOnly", "$defs", "definitions", NULL};
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

static bool in_list(const char *const *l, const char *k) {
    for (; *l; l++)
        if (!strcmp(*l, k)) return true;
    return false;
}
static bool has_any(json_t *s, const char *const *l) {
    for (; *l; l++)
        if (json_object_get(s, *l)) return true;
    return false;
}

// Every keyword of s other than annotations and `allowed` is refused with its name.
static bool only_keywords(struct conv *c, json_t *s, const char *const *allowed, const char *why) {
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        if (in_list(ANNOTATIONS, k) || (allowed && in_list(allowed, k))) continue;
        return fail(c, "keyword '%s' beside %s is not supported", k, why);
    }
    return true;
}

static const char *visit(struct conv *c, json_t *s, const char *hint);

// A child subschema at path seg (or seg/i); guarded: inside brackets or quotes, so a $ref
// cycle through it consumes text.
static const char *visit_child(struct conv *c, json_t *s, const char *seg, long idx,
                               const char *hint, bool guarded) {
    size_t old = path_push(c, seg);
    if (idx >= 0) path_push_i(c, (size_t)idx);
    bool g = c->guarded;
    if (guarded) c->guarded = true;
    const char *r = visit(c, s, hint);
    c->guarded = g;
    path_pop(c, old);
    return r;
}

static void hint_join(char *out, size_t cap, const char *a, const char *b) {
    snprintf(out, cap, "%.40s-%.40s", a, b);
}

// ---------------------------------------------------------------- $ref

// Resolves a local reference ("#", "#/a/b~1c/0") in the document.
static json_t *resolve(struct conv *c, const char *ref) {
    if (ref[0] != '#') return fail(c, "$ref '%.200s': only local references (#/...) are supported", ref), NULL;
    json_t *v = c->doc;
    const char *p = ref + 1;
    while (*p) {
        if (*p != '/') return fail(c, "$ref '%.200s': not a JSON pointer", ref), NULL;
        p++;
        char seg[256];
        size_t k = 0;
        while (*p && *p != '/') {
            char ch = *p++;
            if (ch == '~') {
                ch = *p == '1' ? '/' : *p == '0' ? '~' : 0;
                if (!ch) return fail(c, "$ref '%.200s': bad ~ escape", ref), NULL;
                p++;
            } else if (ch == '%' && p[0] && p[1]) {
                char hx[3] = {p[0], p[1], 0};
                char *end;
                long x = strtol(hx, &end, 16);
                if (*end || x <= 0) return fail(c, "$ref '%.200s': bad %% escape", ref), NULL;
                ch = (char)x;
                p += 2;
            }
            if (k + 1 >= sizeof seg) return fail(c, "$ref '%.200s': segment too long", ref), NULL;
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
        if (!v) return fail(c, "$ref '%.200s' points at nothing", ref), NULL;
    }
    return v;
}

static bool push_edge(struct conv *c, int from, int to) {
    if (c->n_edges == c->cap_edges) {
        int cap = c->cap_edges ? c->cap_edges * 2 : 32;
        int *f = realloc(c->edge_from, sizeof(int) * (size_t)cap);
        if (!f) return nomem(c);
        c->edge_from = f;
        int *t = realloc(c->edge_to, sizeof(int) * (size_t)cap);
        if (!t) return nomem(c);
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
    json_t *target = resolve(c, ref);
    if (!target) return NULL;
    if (c->n_refs >= LM_SCHEMA_MAX_REFS)
        return fail(c, "more than %d $ref targets (LM_SCHEMA_MAX_REFS)", LM_SCHEMA_MAX_REFS), NULL;
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? c->cap_refs * 2 : 16;
        char **p = realloc(c->ref_ptr, sizeof(char *) * (size_t)cap);
        if (!p) return nomem(c), NULL;
        c->ref_ptr = p;
        int *r = realloc(c->ref_rule, sizeof(int) * (size_t)cap);
        if (!r) return nomem(c), NULL;
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
    if (!c->ref_ptr[id]) return nomem(c), NULL;
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
    hint_join(body_hint, sizeof body_hint, c->rules[ri].name, "body");
    c->last_new = -1;
    const char *body = visit(c, target, body_hint);
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
        return nomem(c);
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
                ok = fail(c, "$ref cycle that consumes no text (left recursion) through '%s'",
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

// ---------------------------------------------------------------- objects

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// Keys (JSON-encoded, without quotes) not equal to any of keys[0..n), sorted, sharing the
// first d bytes: a trie walk that may leave the trie at any node by a raw character that
// no key continues with (escapes only along the trie: a sound subset).
static void not_keys(struct lm_gbnf_buf *b, char **keys, int n, size_t d) {
    lm_gbnf_buf_puts(b, "(");
    bool ends_here = false, first = true;
    char excl[1024];
    size_t ne = 0;
    for (int i = 0; i < n;) {
        size_t len = strlen(keys[i]);
        if (len == d) {
            ends_here = true;
            i++;
            continue;
        }
        // the code point at d and the keys sharing it
        const unsigned char *p = (const unsigned char *)keys[i] + d;
        // one character of the key: a UTF-8 sequence or a whole escape (\" or \u00XX)
        size_t cl = *p < 0x80 ? 1 : *p >= 0xF0 ? 4 : *p >= 0xE0 ? 3 : 2;
        if (*p == '\\') cl = p[1] == 'u' ? 6 : 2;
        int j = i + 1;
        while (j < n && strlen(keys[j]) >= d + cl && !memcmp(keys[j] + d, p, cl)) j++;
        if (!first) lm_gbnf_buf_puts(b, " | ");
        first = false;
        lm_gbnf_buf_lit(b, (const char *)p, cl);
        lm_gbnf_buf_puts(b, " ");
        not_keys(b, keys + i, j - i, d + cl);
        if (*p == '\\') { // escapes never leave the trie, so nothing to exclude
        } else if (ne + cl + 1 < sizeof excl) {
            memcpy(excl + ne, p, cl), ne += cl;
        } else {
            b->over = true;
        }
        i = j;
    }
    if (!first) lm_gbnf_buf_puts(b, " | ");
    lm_gbnf_buf_puts(b, "[^\"\\\\\\x00-\\x1F");
    for (size_t i = 0; i < ne; i++) {
        unsigned char ch = (unsigned char)excl[i];
        if (ch == ']' || ch == '-' || ch == '^' || ch == '[' || ch == '\\') lm_gbnf_buf_printf(b, "\\x%02X", ch);
        else lm_gbnf_buf_put(b, &excl[i], 1);
    }
    lm_gbnf_buf_puts(b, "] char* \"\\\"\"");
    if (!ends_here) lm_gbnf_buf_puts(b, " | \"\\\"\"");
    lm_gbnf_buf_puts(b, ")");
}

static const char *visit_object(struct conv *c, json_t *s, const char *hint) {
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *addl = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) return fail(c, "'properties' must be an object"), NULL;
    if (req && !json_is_array(req)) return fail(c, "'required' must be an array of strings"), NULL;
    if (addl && !json_is_object(addl) && !json_is_boolean(addl))
        return fail(c, "'additionalProperties' must be a schema"), NULL;
    for (size_t i = 0; req && i < json_array_size(req); i++)
        if (!json_is_string(json_array_get(req, i)))
            return fail(c, "'required' must be an array of strings"), NULL;
    if (!props && !req && (!addl || json_is_true(addl))) return prim(c, "object");
    bool extra = addl && !json_is_false(addl); // absent beside properties: none (as llama.cpp)
    if (!props && !req && !extra) return rule_text(c, hint, "\"{}\"");

    // keys in order: required first, then optional, each in the schema's order; required
    // keys without a property take the additionalProperties schema
    size_t np = props ? json_object_size(props) : 0, nr = req ? json_array_size(req) : 0;
    const char **keys = calloc(np + nr + 1, sizeof(char *));
    json_t **vals = calloc(np + nr + 1, sizeof(json_t *));
    bool *is_req = calloc(np + nr + 1, sizeof(bool));
    const char **kv = calloc(np + nr + 2, sizeof(char *));
    const char *res = NULL;
    if (!keys || !vals || !is_req || !kv) {
        nomem(c);
        goto done;
    }
    size_t n = 0;
    const char *k;
    json_t *v;
    if (props) json_object_foreach(props, k, v) {
            keys[n] = k, vals[n] = v;
            for (size_t i = 0; i < nr; i++)
                if (!strcmp(json_string_value(json_array_get(req, i)), k)) is_req[n] = true;
            n++;
        }
    for (size_t i = 0; i < nr; i++) {
        const char *rk = json_string_value(json_array_get(req, i));
        bool found = false;
        for (size_t j = 0; j < n; j++) found |= !strcmp(keys[j], rk);
        if (found) continue;
        if (!extra) {
            fail(c, "required property '%.100s' is neither in 'properties' nor allowed by "
                    "'additionalProperties'", rk);
            goto done;
        }
        keys[n] = rk, vals[n] = json_is_object(addl) ? addl : json_true(), is_req[n] = true, n++;
    }
    // one rule per key: "\"key\": " value
    for (size_t i = 0; i < n; i++) {
        if (json_is_false(vals[i])) { // may not appear
            if (is_req[i]) {
                fail(c, "required property '%.100s' has schema false", keys[i]);
                goto done;
            }
            kv[i] = NULL;
            continue;
        }
        char h[96];
        hint_join(h, sizeof h, hint, keys[i]);
        size_t old = path_push(c, "properties");
        const char *vr = visit_child(c, vals[i], keys[i], -1, h, true);
        path_pop(c, old);
        if (!vr) goto done;
        struct lm_gbnf_buf b;
        buf_init(&b);
        json_t *ks = json_string(keys[i]);
        if (!ks) {
            nomem(c);
            goto done;
        }
        struct lm_gbnf_buf t;
        buf_init(&t);
        dump_json(&t, ks);
        json_decref(ks);
        lm_gbnf_buf_puts(&t, ": ");
        if (t.p) lm_gbnf_buf_lit(&b, t.p, t.n);
        free(t.p);
        lm_gbnf_buf_printf(&b, " %s", vr);
        char hk[112];
        hint_join(hk, sizeof hk, h, "kv");
        kv[i] = rule_for(c, hk, &b);
        free(b.p);
        if (!kv[i]) goto done;
    }
    // additional properties: a key outside the trie of defined ones, then the value
    const char *extra_kv = NULL;
    if (extra) {
        const char *vr = json_is_object(addl) ? visit_child(c, addl, "additionalProperties", -1, hint, true)
                                              : prim(c, "value");
        if (!vr) goto done;
        char **enc = calloc(n + 1, sizeof(char *));
        if (!enc) {
            nomem(c);
            goto done;
        }
        struct lm_gbnf_buf b;
        buf_init(&b);
        lm_gbnf_buf_puts(&b, "\"\\\"\" ");
        bool ok = true;
        for (size_t i = 0; i < n && ok; i++) {
            json_t *ks = json_string(keys[i]);
            struct lm_gbnf_buf t;
            buf_init(&t);
            if (ks) dump_json(&t, ks);
            json_decref(ks);
            ok = ks && t.p && !t.nomem;
            if (ok) {
                t.p[t.n - 1] = 0; // drop the closing quote
                enc[i] = strdup(t.p + 1);
                ok = enc[i] != NULL;
            }
            free(t.p);
        }
        if (ok) {
            qsort(enc, n, sizeof(char *), cmp_str);
            if (n) not_keys(&b, enc, (int)n, 0);
            else lm_gbnf_buf_puts(&b, "char* \"\\\"\"");
            prim(c, "char");
            lm_gbnf_buf_printf(&b, " \": \" %s", vr);
        }
        for (size_t i = 0; i < n; i++) free(enc[i]);
        free(enc);
        if (!ok) {
            free(b.p);
            nomem(c);
            goto done;
        }
        char h[96];
        hint_join(h, sizeof h, hint, "additional-kv");
        extra_kv = rule_for(c, h, &b);
        free(b.p);
        if (!extra_kv) goto done;
    }
    // "{" required ", " ... then any in-order subset of the optional ones (and extras last)
    const char **opt = malloc(sizeof(char *) * (n + 2));
    size_t no = 0;
    if (!opt) {
        nomem(c);
        goto done;
    }
    struct lm_gbnf_buf b;
    buf_init(&b);
    lm_gbnf_buf_puts(&b, "\"{\"");
    int n_req = 0;
    for (size_t i = 0; i < n; i++) {
        if (!kv[i]) continue;
        if (is_req[i]) {
            lm_gbnf_buf_printf(&b, n_req++ ? " \", \" %s" : " %s", kv[i]);
        } else {
            opt[no++] = kv[i];
        }
    }
    if (extra_kv) opt[no++] = extra_kv;
    if (no) {
        // rest[i]: any in-order subset of opt[i..], each preceded by ", "
        const char **rest = calloc(no + 1, sizeof(char *));
        if (!rest) {
            free(b.p);
            nomem(c);
            goto done;
        }
        for (size_t i = no; i-- > 1;) {
            struct lm_gbnf_buf r;
            buf_init(&r);
            bool star = extra_kv && i == no - 1;
            lm_gbnf_buf_printf(&r, "(\", \" %s)%s", opt[i], star ? "*" : "?");
            if (rest[i + 1]) lm_gbnf_buf_printf(&r, " %s", rest[i + 1]);
            char h[96];
            hint_join(h, sizeof h, hint, "rest");
            rest[i] = rule_for(c, h, &r);
            free(r.p);
            if (!rest[i]) break;
        }
        if (!c->failed) {
            lm_gbnf_buf_puts(&b, n_req ? " (\", \" (" : " (");
            for (size_t i = 0; i < no; i++) {
                bool star = extra_kv && i == no - 1;
                if (i) lm_gbnf_buf_puts(&b, " | ");
                lm_gbnf_buf_puts(&b, opt[i]);
                if (star) lm_gbnf_buf_printf(&b, " (\", \" %s)*", opt[i]);
                if (rest[i + 1]) lm_gbnf_buf_printf(&b, " %s", rest[i + 1]);
            }
            lm_gbnf_buf_puts(&b, n_req ? "))?" : ")?");
        }
        free(rest);
    }
    lm_gbnf_buf_puts(&b, " \"}\"");
    if (!c->failed) res = rule_for(c, hint, &b);
    free(b.p);
    free(opt);
done:
    free(keys), free(vals), free(is_req), free(kv);
    return c->failed ? NULL : res;
}

// ---------------------------------------------------------------- arrays, strings, numbers

// A count keyword (minItems, maxLength, ...): absent -> dflt; else a non-negative integer
// no larger than LM_SCHEMA_MAX_REPEAT.
static bool get_count(struct conv *c, json_t *s, const char *key, long dflt, long *out) {
    json_t *v = json_object_get(s, key);
    *out = dflt;
    if (!v) return true;
    double d = json_is_integer(v) ? (double)json_integer_value(v) : json_is_real(v) ? json_real_value(v) : -1;
    if (d < 0 || d != floor(d)) return fail(c, "'%s' must be a non-negative integer", key);
    if (d > LM_SCHEMA_MAX_REPEAT)
        return fail(c, "'%s' %.0f exceeds %d (LM_SCHEMA_MAX_REPEAT)", key, d, LM_SCHEMA_MAX_REPEAT);
    *out = (long)d;
    return true;
}

static void put_rep(struct lm_gbnf_buf *b, long mn, long mx) { // mx < 0: unbounded
    if (mn == 0 && mx < 0) lm_gbnf_buf_puts(b, "*");
    else if (mn == 1 && mx < 0) lm_gbnf_buf_puts(b, "+");
    else if (mx < 0) lm_gbnf_buf_printf(b, "{%ld,}", mn);
    else if (mn == 0 && mx == 1) lm_gbnf_buf_puts(b, "?");
    else if (mn == mx) lm_gbnf_buf_printf(b, "{%ld}", mn);
    else lm_gbnf_buf_printf(b, "{%ld,%ld}", mn, mx);
}

static const char *visit_array(struct conv *c, json_t *s, const char *hint) {
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    json_t *more = json_object_get(s, "additionalItems");
    long mn, mx;
    if (!get_count(c, s, "minItems", 0, &mn) || !get_count(c, s, "maxItems", -1, &mx)) return NULL;
    if (mx >= 0 && mx < mn) return fail(c, "'maxItems' is below 'minItems'"), NULL;
    const char *prefix_kw = "prefixItems";
    if (json_is_array(items) && !prefix) { // draft 4-7 tuple form
        prefix = items;
        items = more;
        prefix_kw = "items";
    } else if (more) {
        return fail(c, "'additionalItems' without an array 'items' is not supported"), NULL;
    }
    if (prefix && !json_is_array(prefix)) return fail(c, "'prefixItems' must be an array"), NULL;
    if (items && !json_is_object(items) && !json_is_boolean(items))
        return fail(c, "'items' must be a schema"), NULL;
    size_t np = prefix ? json_array_size(prefix) : 0;
    if (np > 1024) return fail(c, "more than 1024 prefixItems"), NULL;
    const char **pre = malloc(sizeof(char *) * (np + 1));
    if (!pre) return nomem(c), NULL;
    char h[96];
    for (size_t i = 0; i < np; i++) {
        if (json_is_false(json_array_get(prefix, i))) { // no item may stand here
            if ((long)i < mn) {
                fail(c, "%s/%zu is false below minItems", prefix_kw, i);
                free(pre);
                return NULL;
            }
            np = i;
            if (mx < 0 || mx > (long)i) mx = (long)i;
            break;
        }
        snprintf(h, sizeof h, "%.40s-%zu", hint, i);
        pre[i] = visit_child(c, json_array_get(prefix, i), prefix_kw, (long)i, h, true);
        if (!pre[i]) {
            free(pre);
            return NULL;
        }
    }
    const char *rest = NULL;
    if (!items || json_is_true(items)) rest = prim(c, "value");
    else if (json_is_object(items)) {
        hint_join(h, sizeof h, hint, "item");
        rest = visit_child(c, items, prefix_kw[0] == 'i' ? "additionalItems" : "items", -1, h, true);
    }
    if (!c->failed && !rest && (long)np < mn) fail(c, "'minItems' %ld exceeds the items allowed", mn);
    if (c->failed) {
        free(pre);
        return NULL;
    }
    struct lm_gbnf_buf b;
    buf_init(&b);
    lm_gbnf_buf_puts(&b, "\"[\"");
    // prefix items nested: item i is optional once minItems are written
    size_t depth = 0;
    for (size_t i = 0; i < np && (mx < 0 || (long)i < mx); i++) {
        bool opt = (long)i >= mn;
        if (opt) lm_gbnf_buf_puts(&b, " ("), depth++;
        lm_gbnf_buf_printf(&b, i ? " \", \" %s" : " %s", pre[i]);
    }
    long done = (long)np < mx || mx < 0 ? (long)np : mx; // items written by the prefix
    if (rest && (mx < 0 || done < mx)) {
        long need = mn > done ? mn - done : 0, cap = mx < 0 ? -1 : mx - done;
        if (done > 0) {
            lm_gbnf_buf_printf(&b, " (\", \" %s)", rest);
            put_rep(&b, need, cap);
        } else if (need == 0) {
            lm_gbnf_buf_printf(&b, " (%s (\", \" %s)", rest, rest);
            put_rep(&b, 0, cap < 0 ? -1 : cap - 1);
            lm_gbnf_buf_puts(&b, ")?");
        } else {
            lm_gbnf_buf_printf(&b, " %s (\", \" %s)", rest, rest);
            put_rep(&b, need - 1, cap < 0 ? -1 : cap - 1);
        }
    }
    for (size_t i = 0; i < depth; i++) lm_gbnf_buf_puts(&b, ")?");
    lm_gbnf_buf_puts(&b, " \"]\"");
    const char *r = rule_for(c, hint, &b);
    free(b.p);
    free(pre);
    return r;
}

static const char *visit_string(struct conv *c, json_t *s, const char *hint) {
    json_t *pat = json_object_get(s, "pattern"), *fmt = json_object_get(s, "format");
    long mn, mx;
    if (!get_count(c, s, "minLength", 0, &mn) || !get_count(c, s, "maxLength", -1, &mx)) return NULL;
    if (mx >= 0 && mx < mn) return fail(c, "'maxLength' is below 'minLength'"), NULL;
    bool lens = json_object_get(s, "minLength") || json_object_get(s, "maxLength");
    if (fmt) {
        if (!json_is_string(fmt)) return fail(c, "'format' must be a string"), NULL;
        if (pat || lens) return fail(c, "'format' with 'pattern', 'minLength' or 'maxLength' is not supported"), NULL;
        const char *f = json_string_value(fmt);
        static const char *const FORMATS[] = {"date", "time", "date-time", "uuid", NULL};
        if (!in_list(FORMATS, f))
            return fail(c, "unsupported format '%.60s' (supported: date, time, date-time, uuid)", f), NULL;
        char name[32];
        snprintf(name, sizeof name, "format-%s", f);
        return prim(c, name);
    }
    if (pat) {
        if (!json_is_string(pat)) return fail(c, "'pattern' must be a string"), NULL;
        if (lens) return fail(c, "'pattern' with 'minLength' or 'maxLength' is not supported"), NULL;
        struct lm_gbnf_buf b;
        buf_init(&b);
        lm_gbnf_buf_puts(&b, "\"\\\"\" ");
        unsigned uses = 0;
        size_t old = path_push(c, "pattern");
        char where[sizeof c->path];
        snprintf(where, sizeof where, "%s", c->path);
        path_pop(c, old);
        enum lm_status st = lm_regex_to_gbnf(&b, json_string_value(pat), json_string_length(pat), where, &uses);
        if (st != LM_OK) {
            free(b.p);
            c->failed = true; // message set by the regex parser
            return NULL;
        }
        if (uses & LM_RX_USES_CHAR) prim(c, "char");
        if (uses & LM_RX_USES_DOT) prim(c, "regex-dot");
        lm_gbnf_buf_puts(&b, " \"\\\"\"");
        const char *r = rule_for(c, hint, &b);
        free(b.p);
        return r;
    }
    if (!lens) return prim(c, "string");
    prim(c, "char");
    struct lm_gbnf_buf b;
    buf_init(&b);
    lm_gbnf_buf_puts(&b, "\"\\\"\" char");
    put_rep(&b, mn, mx);
    lm_gbnf_buf_puts(&b, " \"\\\"\"");
    const char *r = rule_for(c, hint, &b);
    free(b.p);
    return r;
}

// One bound: value (integer or real), rounded inward for integers; numbers take integral
// bounds only. Draft-4 boolean exclusive* flags come in through excl.
static bool get_bound(struct conv *c, json_t *v, const char *key, bool upper, bool integer,
                      bool *has, int64_t *out, bool *excl) {
    if (!v) return true;
    double d;
    if (json_is_integer(v)) {
        *has = true;
        *out = json_integer_value(v);
        return true;
    }
    if (!json_is_real(v)) return fail(c, "'%s' must be a number", key);
    d = json_real_value(v);
    if (!(fabs(d) < 9.2e18)) return fail(c, "'%s' %g is out of the supported range", key, d);
    if (d != floor(d)) {
        if (!integer)
            return fail(c, "'%s' %g: bounds of a number must be integers (a fractional bound "
                           "is not supported)", key, d);
        // integer x >= 2.5 <=> x >= 3; x > 2.5 <=> x >= 3 (inclusive from here on)
        d = upper ? floor(d) : ceil(d);
        *excl = false;
    }
    *has = true;
    *out = (int64_t)d;
    return true;
}

static const char *visit_number(struct conv *c, json_t *s, const char *hint, bool integer) {
    json_t *emin = json_object_get(s, "exclusiveMinimum"), *emax = json_object_get(s, "exclusiveMaximum");
    struct lm_num_bounds nb = {0};
    bool lo_ex = false, hi_ex = false;
    // draft 4: exclusiveMinimum: true makes minimum exclusive
    if (json_is_boolean(emin)) lo_ex = json_is_true(emin), emin = NULL;
    if (json_is_boolean(emax)) hi_ex = json_is_true(emax), emax = NULL;
    bool has;
    int64_t v;
    bool ex;
    has = false, ex = lo_ex;
    if (!get_bound(c, json_object_get(s, "minimum"), "minimum", false, integer, &has, &v, &ex)) return NULL;
    if (has) nb.has_lo = true, nb.lo = v, nb.lo_excl = ex;
    has = false, ex = true;
    if (!get_bound(c, emin, "exclusiveMinimum", false, integer, &has, &v, &ex)) return NULL;
    if (has && (!nb.has_lo || v > nb.lo || (v == nb.lo && ex)))
        nb.has_lo = true, nb.lo = v, nb.lo_excl = ex;
    has = false, ex = hi_ex;
    if (!get_bound(c, json_object_get(s, "maximum"), "maximum", true, integer, &has, &v, &ex)) return NULL;
    if (has) nb.has_hi = true, nb.hi = v, nb.hi_excl = ex;
    has = false, ex = true;
    if (!get_bound(c, emax, "exclusiveMaximum", true, integer, &has, &v, &ex)) return NULL;
    if (has && (!nb.has_hi || v < nb.hi || (v == nb.hi && ex)))
        nb.has_hi = true, nb.hi = v, nb.hi_excl = ex;
    if (!nb.has_lo && !nb.has_hi) return prim(c, integer ? "integer" : "number");
    // integers: exclusive integral bounds become inclusive ones
    if (integer && nb.has_lo && nb.lo_excl) {
        if (nb.lo == INT64_MAX) return fail(c, "no integer satisfies the bounds"), NULL;
        nb.lo++, nb.lo_excl = false;
    }
    if (integer && nb.has_hi && nb.hi_excl) {
        if (nb.hi == INT64_MIN) return fail(c, "no integer satisfies the bounds"), NULL;
        nb.hi--, nb.hi_excl = false;
    }
    struct lm_gbnf_buf b;
    buf_init(&b);
    if (!lm_schema_emit_number(&b, &nb, integer)) {
        free(b.p);
        return fail(c, "no %s satisfies the bounds", integer ? "integer" : "number"), NULL;
    }
    const char *r = rule_for(c, hint, &b);
    free(b.p);
    return r;
}

// ---------------------------------------------------------------- combinators

enum { T_NULL = 1, T_BOOL = 2, T_OBJECT = 4, T_ARRAY = 8, T_NUMBER = 16, T_STRING = 32, T_INTEGER = 64 };
static const char *const TYPE_NAMES[] = {"null", "boolean", "object", "array", "number", "string", "integer"};

static bool value_has_type(json_t *v, unsigned types) {
    switch (json_typeof(v)) {
    case JSON_NULL: return types & T_NULL;
    case JSON_TRUE:
    case JSON_FALSE: return types & T_BOOL;
    case JSON_OBJECT: return types & T_OBJECT;
    case JSON_ARRAY: return types & T_ARRAY;
    case JSON_STRING: return types & T_STRING;
    case JSON_INTEGER: return types & (T_NUMBER | T_INTEGER);
    case JSON_REAL: {
        double d = json_real_value(v);
        return (types & T_NUMBER) || ((types & T_INTEGER) && d == floor(d));
    }
    }
    return false;
}

// The `type` keyword as a bit set; 0 when absent.
static bool get_types(struct conv *c, json_t *s, unsigned *out) {
    json_t *t = json_object_get(s, "type");
    *out = 0;
    if (!t) return true;
    size_t n = json_is_array(t) ? json_array_size(t) : 1;
    if (!json_is_array(t) && !json_is_string(t))
        return fail(c, "'type' must be a string or an array of strings");
    if (n == 0) return fail(c, "'type' is an empty array");
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_is_array(t) ? json_array_get(t, i) : t;
        if (!json_is_string(x)) return fail(c, "'type' must be a string or an array of strings");
        unsigned bit = 0;
        for (int k = 0; k < 7; k++)
            if (!strcmp(json_string_value(x), TYPE_NAMES[k])) bit = 1u << k;
        if (!bit) return fail(c, "unknown type '%.60s'", json_string_value(x));
        *out |= bit;
    }
    if (*out & T_NUMBER) *out &= ~(unsigned)T_INTEGER; // number covers integer
    return true;
}

static const char *visit_enum(struct conv *c, json_t *s, const char *hint, unsigned types) {
    json_t *cst = json_object_get(s, "const"), *en = json_object_get(s, "enum");
    static const char *const ok[] = {"type", "enum", "const", NULL};
    if (!only_keywords(c, s, ok, "'enum'/'const'")) return NULL;
    if (en && !json_is_array(en)) return fail(c, "'enum' must be an array"), NULL;
    struct lm_gbnf_buf b;
    buf_init(&b);
    int n = 0;
    size_t ne = en ? json_array_size(en) : 0;
    for (size_t i = 0; i < (cst ? 1 : ne); i++) {
        json_t *v = cst ? cst : json_array_get(en, i);
        if (types && !value_has_type(v, types)) continue;
        if (cst && en) { // both: the const only if the enum has it
            bool found = false;
            for (size_t j = 0; j < ne && !found; j++) found = json_equal(json_array_get(en, j), cst);
            if (!found) continue;
        }
        if (n++) lm_gbnf_buf_puts(&b, " | ");
        put_literal(&b, v);
    }
    if (!n) {
        free(b.p);
        return fail(c, "no value of 'enum'/'const' satisfies the schema"), NULL;
    }
    const char *r = rule_for(c, hint, &b);
    free(b.p);
    return r;
}

static const char *visit_any_of(struct conv *c, json_t *s, const char *hint, const char *kw) {
    json_t *alts = json_object_get(s, kw);
    if (!json_is_array(alts) || !json_array_size(alts))
        return fail(c, "'%s' must be a non-empty array of schemas", kw), NULL;
    static const char *const any[] = {"anyOf", "oneOf", NULL};
    if (!only_keywords(c, s, any, "'anyOf'/'oneOf'")) return NULL;
    if (json_object_get(s, "anyOf") && json_object_get(s, "oneOf"))
        return fail(c, "'anyOf' beside 'oneOf' is not supported"), NULL;
    struct lm_gbnf_buf b;
    buf_init(&b);
    for (size_t i = 0; i < json_array_size(alts); i++) {
        char h[96];
        snprintf(h, sizeof h, "%.40s-%zu", hint, i);
        json_t *a = json_array_get(alts, i);
        if (json_is_false(a)) continue;
        const char *r = visit_child(c, a, kw, (long)i, h, false);
        if (!r) {
            free(b.p);
            return NULL;
        }
        if (b.n) lm_gbnf_buf_puts(&b, " | ");
        lm_gbnf_buf_puts(&b, r);
    }
    if (!b.n) {
        free(b.p);
        return fail(c, "every alternative of '%s' is false", kw), NULL;
    }
    const char *r = rule_for(c, hint, &b);
    free(b.p);
    return r;
}

// allOf: one member is that member; several merge when they are object schemas
// (properties united, required united, additionalProperties false intersects the keys).
static const char *visit_all_of(struct conv *c, json_t *s, const char *hint) {
    json_t *all = json_object_get(s, "allOf");
    if (!json_is_array(all) || !json_array_size(all))
        return fail(c, "'allOf' must be a non-empty array of schemas"), NULL;
    static const char *const allow_obj[] = {"allOf", "type", "properties", "required",
                                            "additionalProperties", NULL};
    static const char *const allow_one[] = {"allOf", NULL};
    if (json_array_size(all) == 1 && has_any(s, allow_obj + 1) == false) {
        if (!only_keywords(c, s, allow_one, "'allOf'")) return NULL;
        return visit_child(c, json_array_get(all, 0), "allOf", 0, hint, false);
    }
    json_t *m = json_object(), *props = json_object(), *req = json_array();
    json_t **closed = calloc(json_array_size(all) + 1, sizeof(json_t *)); // members' closed key sets
    const char *res = NULL;
    int n_closed = 0;
    if (!m || !props || !req || !closed) {
        nomem(c);
        goto done;
    }
    for (size_t i = 0; i <= json_array_size(all); i++) {
        json_t *x = i < json_array_size(all) ? json_array_get(all, i) : s;
        size_t old = path_push(c, "allOf");
        if (x != s) path_push_i(c, i);
        for (int hop = 0; x != s && json_is_object(x) && json_object_get(x, "$ref"); hop++) {
            json_t *ref = json_object_get(x, "$ref");
            if (hop == 16 || !json_is_string(ref)) {
                fail(c, "'$ref' chain in 'allOf' too long or not a string");
                break;
            }
            if (!only_keywords(c, x, (const char *const[]){"$ref", NULL}, "'$ref'")) break;
            x = resolve(c, json_string_value(ref));
        }
        if (!c->failed && !json_is_object(x)) fail(c, "an 'allOf' member must be an object schema");
        if (!c->failed) {
            unsigned t = 0;
            if (get_types(c, x, &t) && t && t != T_OBJECT) fail(c, "'allOf' merges object schemas only");
        }
        if (!c->failed) only_keywords(c, x, x == s ? allow_obj : allow_obj + 1, "'allOf' (only object schemas merge)");
        json_t *p = json_object_get(x, "properties"), *r = json_object_get(x, "required");
        json_t *a = json_object_get(x, "additionalProperties");
        if (!c->failed && ((p && !json_is_object(p)) || (r && !json_is_array(r))))
            fail(c, "'properties' must be an object and 'required' an array");
        if (!c->failed && a && !json_is_false(a))
            fail(c, "'additionalProperties' other than false in an 'allOf' member is not supported");
        const char *k;
        json_t *v;
        if (!c->failed && p) json_object_foreach(p, k, v) {
                json_t *had = json_object_get(props, k);
                if (had && !json_equal(had, v)) {
                    fail(c, "property '%.100s' is defined differently by two 'allOf' members", k);
                    break;
                }
                json_object_set(props, k, v);
            }
        for (size_t j = 0; !c->failed && r && j < json_array_size(r); j++) json_array_append(req, json_array_get(r, j));
        if (!c->failed && a) closed[n_closed++] = p; // NULL: no key allowed
        path_pop(c, old);
        if (c->failed) goto done;
    }
    if (n_closed) { // keep the keys every closed member allows
        const char *k;
        json_t *v;
        void *tmp;
        json_object_foreach_safe(props, tmp, k, v) {
            for (int i = 0; i < n_closed; i++)
                if (!closed[i] || !json_object_get(closed[i], k)) {
                    json_object_del(props, k);
                    break;
                }
        }
        json_object_set_new(m, "additionalProperties", json_false());
    }
    json_object_set_new(m, "type", json_string("object"));
    json_object_set(m, "properties", props);
    json_object_set(m, "required", req);
    res = visit_object(c, m, hint);
done:
    json_decref(m), json_decref(props), json_decref(req);
    free(closed);
    return c->failed ? NULL : res;
}

// ---------------------------------------------------------------- one subschema

static const char *visit(struct conv *c, json_t *s, const char *hint) {
    if (c->failed) return NULL;
    if (++c->nodes > LM_SCHEMA_MAX_NODES)
        return fail(c, "more than %d subschemas visited (LM_SCHEMA_MAX_NODES)", LM_SCHEMA_MAX_NODES), NULL;
    if (lm_now_ns() > c->deadline)
        return fail(c, "conversion exceeds %d ms (LM_SCHEMA_MAX_MS)", LM_SCHEMA_MAX_MS), NULL;
    if (c->depth >= LM_SCHEMA_MAX_DEPTH)
        return fail(c, "schema nested deeper than %d (LM_SCHEMA_MAX_DEPTH)", LM_SCHEMA_MAX_DEPTH), NULL;
    if (json_is_true(s)) return prim(c, "value");
    if (json_is_false(s)) return fail(c, "schema false accepts no value"), NULL;
    if (!json_is_object(s)) return fail(c, "a schema must be an object or a boolean"), NULL;
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        if (!in_list(ANNOTATIONS, k) && !in_list(KNOWN, k))
            return fail(c, "unsupported keyword '%.60s'", k), NULL;
    }
    c->depth++;
    const char *r = NULL;
    unsigned types = 0;
    if (json_object_get(s, "$ref")) {
        json_t *ref = json_object_get(s, "$ref");
        static const char *const ok[] = {"$ref", NULL};
        if (!json_is_string(ref)) fail(c, "'$ref' must be a string");
        else if (only_keywords(c, s, ok, "'$ref'")) r = ref_rule(c, json_string_value(ref));
    } else if (json_object_get(s, "anyOf")) {
        r = visit_any_of(c, s, hint, "anyOf");
    } else if (json_object_get(s, "oneOf")) {
        r = visit_any_of(c, s, hint, "oneOf"); // exclusivity is not enforced
    } else if (json_object_get(s, "allOf")) {
        r = visit_all_of(c, s, hint);
    } else if (!get_types(c, s, &types)) {
        r = NULL;
    } else if (json_object_get(s, "enum") || json_object_get(s, "const")) {
        r = visit_enum(c, s, hint, types);
    } else {
        if (!types) { // no type: the types the keywords speak of, else any value
            if (has_any(s, OBJECT_KW)) types |= T_OBJECT;
            if (has_any(s, ARRAY_KW)) types |= T_ARRAY;
            if (has_any(s, STRING_KW)) types |= T_STRING;
            if (has_any(s, NUMBER_KW)) types |= T_NUMBER;
            if (!types) types = T_NULL | T_BOOL | T_OBJECT | T_ARRAY | T_NUMBER | T_STRING;
        }
        const char *alt[7];
        int n = 0;
        for (int t = 0; t < 7 && !c->failed; t++) {
            if (!(types & (1u << t))) continue;
            char h[96];
            if (types & (types - 1)) hint_join(h, sizeof h, hint, TYPE_NAMES[t]);
            else snprintf(h, sizeof h, "%s", hint);
            const char *x = NULL;
            switch (1u << t) {
            case T_NULL: x = prim(c, "null"); break;
            case T_BOOL: x = prim(c, "boolean"); break;
            case T_OBJECT: x = visit_object(c, s, h); break;
            case T_ARRAY: x = visit_array(c, s, h); break;
            case T_STRING: x = visit_string(c, s, h); break;
            case T_NUMBER: x = visit_number(c, s, h, false); break;
            case T_INTEGER: x = visit_number(c, s, h, true); break;
            }
            if (x) alt[n++] = x;
        }
        if (!c->failed && n == 6 && types == (T_NULL | T_BOOL | T_OBJECT | T_ARRAY | T_NUMBER | T_STRING) &&
            !strcmp(alt[2], "object") && !strcmp(alt[3], "array") && !strcmp(alt[4], "number") &&
            !strcmp(alt[5], "string")) {
            r = prim(c, "value");
        } else if (!c->failed && n == 1) {
            r = alt[0];
        } else if (!c->failed) {
            struct lm_gbnf_buf b;
            buf_init(&b);
            for (int i = 0; i < n; i++) lm_gbnf_buf_printf(&b, i ? " | %s" : "%s", alt[i]);
            r = rule_for(c, hint, &b);
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
    if (root && strcmp(root, "root")) fail(&c, "internal: root rule named '%s'", root);
    if (!c.failed) check_ref_cycles(&c);
    if (c.failed) {
        st = !strncmp(lm_error_msg(), "json schema: out of memory", 26) ? LM_ERR_NOMEM : LM_ERR_ARG;
    } else {
        struct lm_gbnf_buf out;
        memset(&out, 0, sizeof out);
        for (int i = 0; i < c.n_rules; i++) {
            if (c.rules[i].dead) continue;
            lm_gbnf_buf_puts(&out, c.rules[i].name);
            lm_gbnf_buf_puts(&out, " ::= ");
            lm_gbnf_buf_puts(&out, c.rules[i].body);
            lm_gbnf_buf_puts(&out, "\n");
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
