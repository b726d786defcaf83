// JSON Schema (text) -> GBNF text: one rule per subschema (identical bodies shared), $ref
// targets as named rules so recursion is a rule cycle, and bounds on depth, output size,
// $ref expansions and time. This file: $ref expansion, the dispatch of a subschema and the
// entry point (schema_conv.c: the rule table and shared rules; schema_types.c,
// schema_combine.c: the keywords). docs/structured.md lists the keywords and the spacing.
#include "grammar/schema_conv.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "base/timer.h"
#include "lumen.h"

// ---------------------------------------------------------------- keywords

// The keywords the converter reads (besides annotations), and those that imply each type.
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

// ---------------------------------------------------------------- $ref

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
    int ri = sc_rule_new(c, hint, NULL);
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
        sc_rule_take_body(c, ri, fresh);
        c->last_new = -1;
        return c->rules[ri].name;
    }
    sc_rule_set_body(c, ri, body);
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

// The rule of one subschema: limits, then $ref, the combinators, enum/const, or one
// alternative per type (c->visit points here; the keyword files reach it by sc_visit).
static const char *visit(struct conv *c, json_t *s, const char *hint) {
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
    c.visit = visit;
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
