// JSON Schema -> GBNF, the keywords across types: `type` itself, enum/const, anyOf/oneOf,
// allOf, and the merge of schemas that must both hold (keywords beside anyOf, oneOf, $ref).
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timer.h"
#include "grammar/schema_conv.h"

// ---------------------------------------------------------------- combinators

const char *const sc_type_names[] = {"null", "boolean", "object", "array", "number", "string", "integer"};

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
bool sc_get_types(struct conv *c, json_t *s, unsigned *out) {
    json_t *t = json_object_get(s, "type");
    *out = 0;
    if (!t) return true;
    size_t n = json_is_array(t) ? json_array_size(t) : 1;
    if (!json_is_array(t) && !json_is_string(t))
        return sc_fail(c, "'type' must be a string or an array of strings");
    if (n == 0) return sc_fail(c, "'type' is an empty array");
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_is_array(t) ? json_array_get(t, i) : t;
        if (!json_is_string(x)) return sc_fail(c, "'type' must be a string or an array of strings");
        unsigned bit = 0;
        for (int k = 0; k < 7; k++)
            if (!strcmp(json_string_value(x), sc_type_names[k])) bit = 1u << k;
        if (!bit) return sc_fail(c, "unknown type '%.60s'", json_string_value(x));
        *out |= bit;
    }
    if (*out & T_NUMBER) *out &= ~(unsigned)T_INTEGER; // number covers integer
    return true;
}

const char *sc_visit_enum(struct conv *c, json_t *s, const char *hint, unsigned types) {
    json_t *cst = json_object_get(s, "const"), *en = json_object_get(s, "enum");
    static const char *const ok[] = {"type", "enum", "const", NULL};
    if (!sc_only_keywords(c, s, ok, "'enum'/'const'")) return NULL;
    if (en && !json_is_array(en)) return sc_fail(c, "'enum' must be an array"), NULL;
    struct lm_strbuf b;
    sc_buf_init(&b);
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
        if (n++) lm_strbuf_puts(&b, " | ");
        sc_put_literal(&b, v);
    }
    if (!n) {
        free(b.p);
        return sc_fail(c, "no value of 'enum'/'const' satisfies the schema"), NULL;
    }
    const char *r = sc_rule_for(c, hint, &b);
    free(b.p);
    return r;
}

// Both a and b must hold: one schema with the keywords of both (a new reference; NULL after
// fail). Exact where the keywords are independent: a keyword on one side is copied, `required`
// unites, `type` intersects, bounds take the tighter, `properties` merge per key; keywords that
// read each other (`additionalProperties` beside `properties`, `items` beside `prefixItems`)
// may not be split across the two, and two different values of any other keyword are refused.
json_t *sc_merge_schemas(struct conv *c, json_t *a, json_t *b, int depth) {
    static const char *const pairs[][2] = {{"properties", "additionalProperties"},
                                           {"prefixItems", "items"},
                                           {"items", "additionalItems"}};
    static const char *const lower[] = {"minimum", "exclusiveMinimum", "minLength", "minItems", NULL};
    static const char *const upper[] = {"maximum", "exclusiveMaximum", "maxLength", "maxItems", NULL};
    if (depth > 16) return sc_fail(c, "schemas merged deeper than 16"), NULL;
    if (lm_now_ns() > c->deadline) // merges copy: many of them must not outlast the bound
        return sc_fail(c, "conversion exceeds %d ms (LM_SCHEMA_MAX_MS)", LM_SCHEMA_MAX_MS), NULL;
    if (json_is_true(b)) return json_incref(a);
    if (json_is_true(a)) return json_incref(b);
    if (!json_is_object(a) || !json_is_object(b)) return sc_fail(c, "a schema that must hold beside another is false or not a schema"), NULL;
    if (json_object_get(a, "$ref") || json_object_get(b, "$ref"))
        return sc_fail(c, "'$ref' in a schema merged with its siblings is not supported"), NULL;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        for (int side = 0; side < 2; side++) {
            json_t *x = side ? b : a, *y = side ? a : b;
            if (json_object_get(x, pairs[i][0]) && json_object_get(y, pairs[i][1]) && !json_object_get(x, pairs[i][1]))
                return sc_fail(c, "'%s' and '%s' from two schemas that must both hold are not supported",
                            pairs[i][0], pairs[i][1]), NULL;
        }
    json_t *m = json_copy(a);
    if (!m) return sc_nomem(c), NULL;
    const char *k;
    json_t *v;
    json_object_foreach(b, k, v) {
        json_t *have = json_object_get(m, k);
        if (sc_in_list(sc_annotations, k) && have) continue;
        if (!have) {
            if (json_object_set(m, k, v)) goto oom;
        } else if (json_equal(have, v)) {
        } else if (!strcmp(k, "required") && json_is_array(have) && json_is_array(v)) {
            json_t *r = json_copy(have);
            if (!r || json_array_extend(r, v) || json_object_set_new(m, k, r)) goto oom;
        } else if (!strcmp(k, "type")) {
            unsigned ta = 0, tb = 0;
            json_t *ta_s = json_object(), *tb_s = json_object();
            if (!ta_s || !tb_s) goto oom;
            json_object_set(ta_s, "type", have), json_object_set(tb_s, "type", v);
            bool ok = sc_get_types(c, ta_s, &ta) && sc_get_types(c, tb_s, &tb);
            json_decref(ta_s), json_decref(tb_s);
            if (!ok) goto failed;
            if ((ta & T_NUMBER) && (tb & T_INTEGER)) ta |= T_INTEGER; // number meets integer
            if ((tb & T_NUMBER) && (ta & T_INTEGER)) tb |= T_INTEGER;
            unsigned t = ta & tb;
            if (!t) {
                sc_fail(c, "no value has the types of two schemas that must both hold");
                goto failed;
            }
            json_t *arr = json_array();
            if (!arr) goto oom;
            for (int i = 0; i < 7; i++)
                if (t & (1u << i)) json_array_append_new(arr, json_string(sc_type_names[i]));
            if (json_object_set_new(m, k, arr)) goto oom;
        } else if ((sc_in_list(lower, k) || sc_in_list(upper, k)) && json_is_number(have) && json_is_number(v)) {
            bool lo = sc_in_list(lower, k);
            double x = json_number_value(have), y = json_number_value(v);
            if (lo ? y > x : y < x) json_object_set(m, k, v);
        } else if (!strcmp(k, "properties") && json_is_object(have) && json_is_object(v)) {
            json_t *p = json_copy(have);
            if (!p) goto oom;
            const char *pk;
            json_t *pv;
            json_object_foreach(v, pk, pv) {
                json_t *ph = json_object_get(p, pk);
                json_t *mm = ph ? sc_merge_schemas(c, ph, pv, depth + 1) : json_incref(pv);
                if (!mm || json_object_set_new(p, pk, mm)) {
                    json_decref(p);
                    if (c->failed) goto failed;
                    goto oom;
                }
            }
            if (json_object_set_new(m, k, p)) goto oom;
        } else {
            sc_fail(c, "keyword '%.60s' with different values in two schemas that must both hold is not supported", k);
            goto failed;
        }
    }
    return m;
oom:
    sc_nomem(c);
failed:
    json_decref(m);
    return NULL;
}

const char *sc_visit_any_of(struct conv *c, json_t *s, const char *hint, const char *kw) {
    json_t *alts = json_object_get(s, kw);
    if (!json_is_array(alts) || !json_array_size(alts))
        return sc_fail(c, "'%s' must be a non-empty array of schemas", kw), NULL;
    if (json_object_get(s, "anyOf") && json_object_get(s, "oneOf"))
        return sc_fail(c, "'anyOf' beside 'oneOf' is not supported"), NULL;
    // sibling keywords hold in every alternative: merged into each
    json_t *sib = json_object();
    if (!sib) return sc_nomem(c), NULL;
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        if (strcmp(k, kw) && !sc_in_list(sc_annotations, k)) json_object_set(sib, k, v);
    }
    struct lm_strbuf b;
    sc_buf_init(&b);
    for (size_t i = 0; i < json_array_size(alts); i++) {
        char h[96];
        snprintf(h, sizeof h, "%.40s-%zu", hint, i);
        json_t *a = json_array_get(alts, i), *merged = NULL;
        if (json_is_false(a)) continue;
        if (json_object_size(sib)) {
            size_t old = sc_path_push(c, kw);
            sc_path_push_i(c, (size_t)i);
            merged = sc_merge_schemas(c, sib, a, 0);
            sc_path_pop(c, old);
            if (!merged) {
                free(b.p);
                json_decref(sib);
                return NULL;
            }
            a = merged;
        }
        const char *r = sc_visit_child(c, a, kw, (long)i, h, false);
        json_decref(merged);
        if (!r) {
            free(b.p);
            json_decref(sib);
            return NULL;
        }
        if (b.n) lm_strbuf_puts(&b, " | ");
        lm_strbuf_puts(&b, r);
    }
    json_decref(sib);
    if (!b.n) {
        free(b.p);
        return sc_fail(c, "every alternative of '%s' is false", kw), NULL;
    }
    const char *r = sc_rule_for(c, hint, &b);
    free(b.p);
    return r;
}

// allOf: one member is that member; several merge when they are object schemas
// (properties united, required united, additionalProperties false intersects the keys).
const char *sc_visit_all_of(struct conv *c, json_t *s, const char *hint) {
    json_t *all = json_object_get(s, "allOf");
    if (!json_is_array(all) || !json_array_size(all))
        return sc_fail(c, "'allOf' must be a non-empty array of schemas"), NULL;
    static const char *const allow_obj[] = {"allOf", "type", "properties", "required",
                                            "additionalProperties", NULL};
    static const char *const allow_one[] = {"allOf", NULL};
    if (json_array_size(all) == 1 && sc_has_any(s, allow_obj + 1) == false) {
        if (!sc_only_keywords(c, s, allow_one, "'allOf'")) return NULL;
        return sc_visit_child(c, json_array_get(all, 0), "allOf", 0, hint, false);
    }
    // members that are not object schemas: fold them with merge_schemas
    bool objects = true;
    for (size_t i = 0; i <= json_array_size(all) && objects; i++) {
        json_t *x = i < json_array_size(all) ? json_array_get(all, i) : s;
        if (!json_is_object(x) || json_object_get(x, "$ref")) continue;
        unsigned t = 0;
        json_t *ty = json_object_get(x, "type");
        if (ty && json_is_string(ty) && strcmp(json_string_value(ty), "object")) objects = false;
        const char *k;
        json_t *v;
        json_object_foreach(x, k, v) objects &= sc_in_list(sc_annotations, k) || sc_in_list(allow_obj, k);
        (void)t;
    }
    if (!objects) {
        json_t *acc = json_object();
        if (!acc) return sc_nomem(c), NULL;
        const char *k;
        json_t *v;
        json_object_foreach(s, k, v) {
            if (strcmp(k, "allOf") && !sc_in_list(sc_annotations, k)) json_object_set(acc, k, v);
        }
        for (size_t i = 0; i < json_array_size(all) && acc; i++) {
            size_t old = sc_path_push(c, "allOf");
            sc_path_push_i(c, i);
            json_t *x = json_array_get(all, i);
            for (int hop = 0; json_is_object(x) && json_object_get(x, "$ref") && hop < 16 && !c->failed; hop++) {
                json_t *ref = json_object_get(x, "$ref");
                if (json_object_size(x) != 1 || !json_is_string(ref)) {
                    sc_fail(c, "'$ref' beside other keywords in an 'allOf' member is not supported");
                    break;
                }
                x = sc_resolve(c, json_string_value(ref));
            }
            json_t *n = c->failed ? NULL : sc_merge_schemas(c, acc, x, 0);
            sc_path_pop(c, old);
            json_decref(acc);
            acc = n;
        }
        const char *r = acc ? sc_visit(c, acc, hint) : NULL;
        json_decref(acc);
        return c->failed ? NULL : r;
    }
    json_t *m = json_object(), *props = json_object(), *req = json_array();
    json_t **closed = calloc(json_array_size(all) + 1, sizeof(json_t *)); // members' closed key sets
    const char *res = NULL;
    int n_closed = 0;
    if (!m || !props || !req || !closed) {
        sc_nomem(c);
        goto done;
    }
    for (size_t i = 0; i <= json_array_size(all); i++) {
        json_t *x = i < json_array_size(all) ? json_array_get(all, i) : s;
        size_t old = sc_path_push(c, "allOf");
        if (x != s) sc_path_push_i(c, i);
        for (int hop = 0; x != s && json_is_object(x) && json_object_get(x, "$ref"); hop++) {
            json_t *ref = json_object_get(x, "$ref");
            if (hop == 16 || !json_is_string(ref)) {
                sc_fail(c, "'$ref' chain in 'allOf' too long or not a string");
                break;
            }
            if (!sc_only_keywords(c, x, (const char *const[]){"$ref", NULL}, "'$ref'")) break;
            x = sc_resolve(c, json_string_value(ref));
        }
        if (!c->failed && !json_is_object(x)) sc_fail(c, "an 'allOf' member must be an object schema");
        if (!c->failed) {
            unsigned t = 0;
            if (sc_get_types(c, x, &t) && t && t != T_OBJECT) sc_fail(c, "'allOf' merges object schemas only");
        }
        if (!c->failed) sc_only_keywords(c, x, x == s ? allow_obj : allow_obj + 1, "'allOf' (only object schemas merge)");
        json_t *p = json_object_get(x, "properties"), *r = json_object_get(x, "required");
        json_t *a = json_object_get(x, "additionalProperties");
        if (!c->failed && ((p && !json_is_object(p)) || (r && !json_is_array(r))))
            sc_fail(c, "'properties' must be an object and 'required' an array");
        if (!c->failed && a && !json_is_false(a))
            sc_fail(c, "'additionalProperties' other than false in an 'allOf' member is not supported");
        const char *k;
        json_t *v;
        if (!c->failed && p) json_object_foreach(p, k, v) {
                json_t *had = json_object_get(props, k);
                if (had && !json_equal(had, v)) {
                    sc_fail(c, "property '%.100s' is defined differently by two 'allOf' members", k);
                    break;
                }
                json_object_set(props, k, v);
            }
        for (size_t j = 0; !c->failed && r && j < json_array_size(r); j++) json_array_append(req, json_array_get(r, j));
        if (!c->failed && a) closed[n_closed++] = p; // NULL: no key allowed
        sc_path_pop(c, old);
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
    res = sc_visit_object(c, m, hint);
done:
    json_decref(m), json_decref(props), json_decref(req);
    free(closed);
    return c->failed ? NULL : res;
}
