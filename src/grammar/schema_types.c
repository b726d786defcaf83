// JSON Schema -> GBNF, the keywords of each type: objects (required, optional subsets,
// additional keys outside a trie of the named ones), arrays (prefix and items with counts),
// strings (lengths, pattern, format) and numbers (bounds).
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timer.h"
#include "grammar/regex.h"
#include "grammar/schema_conv.h"

// ---------------------------------------------------------------- objects

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// Keys (JSON-encoded, without quotes) not equal to any of keys[0..n), sorted, sharing the
// first d bytes: a trie walk that may leave the trie at any node by a raw character that
// no key continues with (escapes only along the trie: a sound subset).
static void not_keys(struct lm_strbuf *b, char **keys, const size_t *lens, int n, size_t d) {
    lm_strbuf_puts(b, "(");
    bool ends_here = false, first = true;
    char *excl = malloc(4 * (size_t)n + 1); // the raw first characters of the children
    size_t ne = 0;
    if (!excl) {
        b->nomem = true;
        return;
    }
    for (int i = 0; i < n;) {
        size_t len = lens[i];
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
        while (j < n && lens[j] >= d + cl && !memcmp(keys[j] + d, p, cl)) j++;
        if (!first) lm_strbuf_puts(b, " | ");
        first = false;
        lm_gbnf_lit(b, (const char *)p, cl);
        lm_strbuf_puts(b, " ");
        not_keys(b, keys + i, lens + i, j - i, d + cl);
        if (*p != '\\') memcpy(excl + ne, p, cl), ne += cl; // escapes never leave the trie
        i = j;
    }
    if (!first) lm_strbuf_puts(b, " | ");
    lm_strbuf_puts(b, "[^\"\\\\\\x00-\\x1F");
    for (size_t i = 0; i < ne; i++) {
        unsigned char ch = (unsigned char)excl[i];
        if (ch == ']' || ch == '-' || ch == '^' || ch == '[' || ch == '\\') lm_strbuf_printf(b, "\\x%02X", ch);
        else lm_strbuf_put(b, &excl[i], 1);
    }
    lm_strbuf_puts(b, "] char* \"\\\"\"");
    if (!ends_here) lm_strbuf_puts(b, " | \"\\\"\"");
    lm_strbuf_puts(b, ")");
    free(excl);
}

// The object's keys in order: required first, then optional, each in the schema's order;
// required keys without a property take the additionalProperties schema. Fills keys, vals
// and is_req (room for every property and required name); false on failure.
static bool object_keys(struct conv *c, json_t *props, json_t *req, json_t *addl, const char **keys, json_t **vals,
                        bool *is_req, size_t *n_out) {
    size_t np = props ? json_object_size(props) : 0, nr = req ? json_array_size(req) : 0;
    size_t n = 0;
    const char *k;
    json_t *v;
    json_t *req_set = json_object(); // required names, for lookups in constant time
    if (!req_set) return sc_nomem(c);
    for (size_t i = 0; i < nr; i++) json_object_set(req_set, json_string_value(json_array_get(req, i)), json_true());
    if (props) json_object_foreach(props, k, v) {
            keys[n] = k, vals[n] = v, is_req[n] = json_object_get(req_set, k) != NULL;
            n++;
        }
    json_decref(req_set);
    for (size_t i = 0; i < nr; i++) {
        const char *rk = json_string_value(json_array_get(req, i));
        if (props && json_object_get(props, rk)) continue;
        bool dup = false; // listed twice in required
        for (size_t j = np; j < n && !dup; j++) dup = !strcmp(keys[j], rk);
        if (dup) continue;
        if (json_is_false(addl))
            return sc_fail(c, "required property '%.100s' is neither in 'properties' nor allowed by "
                           "'additionalProperties'", rk);
        keys[n] = rk, vals[n] = json_is_object(addl) ? addl : json_true(), is_req[n] = true, n++;
    }
    *n_out = n;
    return true;
}

// The rule of one property: "\"key\": " value. *out stays NULL for a key that may not
// appear (schema false); false on failure.
static bool key_value_rule(struct conv *c, const char *hint, const char *key, json_t *val, bool req,
                           const char **out) {
    *out = NULL;
    if (json_is_false(val)) {
        if (req) return sc_fail(c, "required property '%.100s' has schema false", key);
        return true;
    }
    char h[96];
    sc_hint_join(h, sizeof h, hint, key);
    size_t old = sc_path_push(c, "properties");
    const char *vr = sc_visit_child(c, val, key, -1, h, true);
    sc_path_pop(c, old);
    if (!vr) return false;
    struct lm_strbuf b;
    sc_buf_init(&b);
    json_t *ks = json_string(key);
    if (!ks) return sc_nomem(c);
    struct lm_strbuf t;
    sc_buf_init(&t);
    sc_dump_json(&t, ks);
    json_decref(ks);
    lm_strbuf_puts(&t, ": ");
    if (t.p) lm_gbnf_lit(&b, t.p, t.n);
    free(t.p);
    lm_strbuf_printf(&b, " %s", vr);
    char hk[112];
    sc_hint_join(hk, sizeof hk, h, "kv");
    *out = sc_rule_for(c, hk, &b);
    free(b.p);
    return *out != NULL;
}

// The rule of one additional property: a key outside the trie of the n defined ones, then
// the additionalProperties value. NULL on failure.
static const char *extra_kv_rule(struct conv *c, const char *hint, json_t *addl, const char *const *keys, size_t n) {
    const char *vr = json_is_object(addl) ? sc_visit_child(c, addl, "additionalProperties", -1, hint, true)
                                          : sc_prim(c, "value");
    if (!vr) return NULL;
    char **enc = calloc(n + 1, sizeof(char *));
    if (!enc) return sc_nomem(c), NULL;
    struct lm_strbuf b;
    sc_buf_init(&b);
    lm_strbuf_puts(&b, "\"\\\"\" ");
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        json_t *ks = json_string(keys[i]);
        struct lm_strbuf t;
        sc_buf_init(&t);
        if (ks) sc_dump_json(&t, ks);
        json_decref(ks);
        ok = ks && t.p && !t.nomem;
        if (ok && t.n > 258) { // the key trie recurses per character
            free(t.p);
            for (size_t j = 0; j < i; j++) free(enc[j]);
            free(enc);
            free(b.p);
            return sc_fail(c, "property name longer than 256 bytes beside 'additionalProperties'"), NULL;
        }
        if (ok) {
            t.p[t.n - 1] = 0; // drop the closing quote
            enc[i] = strdup(t.p + 1);
            ok = enc[i] != NULL;
        }
        free(t.p);
    }
    if (ok) {
        qsort(enc, n, sizeof(char *), cmp_str);
        size_t *lens = malloc(sizeof(size_t) * (n + 1));
        if (!lens) b.nomem = true;
        for (size_t i = 0; lens && i < n; i++) lens[i] = strlen(enc[i]);
        if (n && lens) not_keys(&b, enc, lens, (int)n, 0);
        else lm_strbuf_puts(&b, "char* \"\\\"\"");
        free(lens);
        sc_prim(c, "char");
        lm_strbuf_printf(&b, " \": \" %s", vr);
    }
    for (size_t i = 0; i < n; i++) free(enc[i]);
    free(enc);
    if (!ok) {
        free(b.p);
        return sc_nomem(c), NULL;
    }
    char h[96];
    sc_hint_join(h, sizeof h, hint, "additional-kv");
    const char *r = sc_rule_for(c, h, &b);
    free(b.p);
    return r;
}

// "{" required ", " ... then any in-order subset of the optional ones (and extras last),
// from the n key rules kv (NULL: may not appear). NULL on failure.
static const char *object_rule(struct conv *c, const char *hint, const char *const *kv, const bool *is_req, size_t n,
                               const char *extra_kv) {
    const char **opt = malloc(sizeof(char *) * (n + 2));
    size_t no = 0;
    if (!opt) return sc_nomem(c), NULL;
    struct lm_strbuf b;
    sc_buf_init(&b);
    lm_strbuf_puts(&b, "\"{\"");
    int n_req = 0;
    for (size_t i = 0; i < n; i++) {
        if (!kv[i]) continue;
        if (is_req[i]) {
            lm_strbuf_printf(&b, n_req++ ? " \", \" %s" : " %s", kv[i]);
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
            free(opt);
            return sc_nomem(c), NULL;
        }
        for (size_t i = no; i-- > 1;) {
            struct lm_strbuf r;
            sc_buf_init(&r);
            bool star = extra_kv && i == no - 1;
            lm_strbuf_printf(&r, "(\", \" %s)%s", opt[i], star ? "*" : "?");
            if (rest[i + 1]) lm_strbuf_printf(&r, " %s", rest[i + 1]);
            char h[96];
            sc_hint_join(h, sizeof h, hint, "rest");
            rest[i] = sc_rule_for(c, h, &r);
            free(r.p);
            if (!rest[i]) break;
        }
        if (!c->failed) {
            lm_strbuf_puts(&b, n_req ? " (\", \" (" : " (");
            for (size_t i = 0; i < no; i++) {
                bool star = extra_kv && i == no - 1;
                if (i) lm_strbuf_puts(&b, " | ");
                lm_strbuf_puts(&b, opt[i]);
                if (star) lm_strbuf_printf(&b, " (\", \" %s)*", opt[i]);
                if (rest[i + 1]) lm_strbuf_printf(&b, " %s", rest[i + 1]);
            }
            lm_strbuf_puts(&b, n_req ? "))?" : ")?");
        }
        free(rest);
    }
    lm_strbuf_puts(&b, " \"}\"");
    const char *res = c->failed ? NULL : sc_rule_for(c, hint, &b);
    free(b.p);
    free(opt);
    return res;
}

const char *sc_visit_object(struct conv *c, json_t *s, const char *hint) {
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *addl = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) return sc_fail(c, "'properties' must be an object"), NULL;
    if (req && !json_is_array(req)) return sc_fail(c, "'required' must be an array of strings"), NULL;
    if (addl && !json_is_object(addl) && !json_is_boolean(addl))
        return sc_fail(c, "'additionalProperties' must be a schema"), NULL;
    for (size_t i = 0; req && i < json_array_size(req); i++)
        if (!json_is_string(json_array_get(req, i)))
            return sc_fail(c, "'required' must be an array of strings"), NULL;
    if (!props && !req && (!addl || json_is_true(addl))) return sc_prim(c, "object");
    bool extra = addl && !json_is_false(addl); // absent beside properties: none (as llama.cpp)
    if (!props && !req && !extra) return sc_rule_text(c, hint, "\"{}\"");

    size_t np = props ? json_object_size(props) : 0, nr = req ? json_array_size(req) : 0, n = 0;
    const char **keys = calloc(np + nr + 1, sizeof(char *));
    json_t **vals = calloc(np + nr + 1, sizeof(json_t *));
    bool *is_req = calloc(np + nr + 1, sizeof(bool));
    const char **kv = calloc(np + nr + 2, sizeof(char *));
    const char *res = NULL, *extra_kv = NULL;
    if (!keys || !vals || !is_req || !kv) {
        sc_nomem(c);
        goto done;
    }
    if (!object_keys(c, props, req, addl, keys, vals, is_req, &n)) goto done;
    for (size_t i = 0; i < n; i++)
        if (!key_value_rule(c, hint, keys[i], vals[i], is_req[i], &kv[i])) goto done;
    if (extra && !(extra_kv = extra_kv_rule(c, hint, addl, keys, n))) goto done;
    res = object_rule(c, hint, kv, is_req, n, extra_kv);
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
    if (d < 0 || d != floor(d)) return sc_fail(c, "'%s' must be a non-negative integer", key);
    if (d > LM_SCHEMA_MAX_REPEAT)
        return sc_fail(c, "'%s' %.0f exceeds %d (LM_SCHEMA_MAX_REPEAT)", key, d, LM_SCHEMA_MAX_REPEAT);
    *out = (long)d;
    return true;
}

static void put_rep(struct lm_strbuf *b, long mn, long mx) { // mx < 0: unbounded
    if (mn == 0 && mx < 0) lm_strbuf_puts(b, "*");
    else if (mn == 1 && mx < 0) lm_strbuf_puts(b, "+");
    else if (mx < 0) lm_strbuf_printf(b, "{%ld,}", mn);
    else if (mn == 0 && mx == 1) lm_strbuf_puts(b, "?");
    else if (mn == mx) lm_strbuf_printf(b, "{%ld}", mn);
    else lm_strbuf_printf(b, "{%ld,%ld}", mn, mx);
}

const char *sc_visit_array(struct conv *c, json_t *s, const char *hint) {
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    json_t *more = json_object_get(s, "additionalItems");
    long mn, mx;
    if (!get_count(c, s, "minItems", 0, &mn) || !get_count(c, s, "maxItems", -1, &mx)) return NULL;
    if (mx >= 0 && mx < mn) return sc_fail(c, "'maxItems' is below 'minItems'"), NULL;
    const char *prefix_kw = "prefixItems";
    if (json_is_array(items) && !prefix) { // draft 4-7 tuple form
        prefix = items;
        items = more;
        prefix_kw = "items";
    } else if (more) {
        return sc_fail(c, "'additionalItems' without an array 'items' is not supported"), NULL;
    }
    if (prefix && !json_is_array(prefix)) return sc_fail(c, "'prefixItems' must be an array"), NULL;
    if (items && !json_is_object(items) && !json_is_boolean(items))
        return sc_fail(c, "'items' must be a schema"), NULL;
    size_t np = prefix ? json_array_size(prefix) : 0;
    if (np > 1024) return sc_fail(c, "more than 1024 prefixItems"), NULL;
    const char **pre = malloc(sizeof(char *) * (np + 1));
    if (!pre) return sc_nomem(c), NULL;
    char h[96];
    for (size_t i = 0; i < np; i++) {
        if (json_is_false(json_array_get(prefix, i))) { // no item may stand here
            if ((long)i < mn) {
                sc_fail(c, "%s/%zu is false below minItems", prefix_kw, i);
                free(pre);
                return NULL;
            }
            np = i;
            if (mx < 0 || mx > (long)i) mx = (long)i;
            break;
        }
        snprintf(h, sizeof h, "%.40s-%zu", hint, i);
        pre[i] = sc_visit_child(c, json_array_get(prefix, i), prefix_kw, (long)i, h, true);
        if (!pre[i]) {
            free(pre);
            return NULL;
        }
    }
    const char *rest = NULL;
    if (!items || json_is_true(items)) rest = sc_prim(c, "value");
    else if (json_is_object(items)) {
        sc_hint_join(h, sizeof h, hint, "item");
        rest = sc_visit_child(c, items, prefix_kw[0] == 'i' ? "additionalItems" : "items", -1, h, true);
    }
    if (!c->failed && !rest && (long)np < mn) sc_fail(c, "'minItems' %ld exceeds the items allowed", mn);
    if (c->failed) {
        free(pre);
        return NULL;
    }
    struct lm_strbuf b;
    sc_buf_init(&b);
    lm_strbuf_puts(&b, "\"[\"");
    // prefix items nested: item i is optional once minItems are written
    size_t depth = 0;
    for (size_t i = 0; i < np && (mx < 0 || (long)i < mx); i++) {
        bool opt = (long)i >= mn;
        if (opt) lm_strbuf_puts(&b, " ("), depth++;
        lm_strbuf_printf(&b, i ? " \", \" %s" : " %s", pre[i]);
    }
    long done = (long)np < mx || mx < 0 ? (long)np : mx; // items written by the prefix
    if (rest && (mx < 0 || done < mx)) {
        long need = mn > done ? mn - done : 0, cap = mx < 0 ? -1 : mx - done;
        if (done > 0) {
            lm_strbuf_printf(&b, " (\", \" %s)", rest);
            put_rep(&b, need, cap);
        } else if (need == 0) {
            lm_strbuf_printf(&b, " (%s (\", \" %s)", rest, rest);
            put_rep(&b, 0, cap < 0 ? -1 : cap - 1);
            lm_strbuf_puts(&b, ")?");
        } else {
            lm_strbuf_printf(&b, " %s (\", \" %s)", rest, rest);
            put_rep(&b, need - 1, cap < 0 ? -1 : cap - 1);
        }
    }
    for (size_t i = 0; i < depth; i++) lm_strbuf_puts(&b, ")?");
    lm_strbuf_puts(&b, " \"]\"");
    const char *r = sc_rule_for(c, hint, &b);
    free(b.p);
    free(pre);
    return r;
}

const char *sc_visit_string(struct conv *c, json_t *s, const char *hint) {
    json_t *pat = json_object_get(s, "pattern"), *fmt = json_object_get(s, "format");
    long mn, mx;
    if (!get_count(c, s, "minLength", 0, &mn) || !get_count(c, s, "maxLength", -1, &mx)) return NULL;
    if (mx >= 0 && mx < mn) return sc_fail(c, "'maxLength' is below 'minLength'"), NULL;
    bool lens = json_object_get(s, "minLength") || json_object_get(s, "maxLength");
    if (fmt) {
        if (!json_is_string(fmt)) return sc_fail(c, "'format' must be a string"), NULL;
        if (pat || lens) return sc_fail(c, "'format' with 'pattern', 'minLength' or 'maxLength' is not supported"), NULL;
        const char *f = json_string_value(fmt);
        static const char *const FORMATS[] = {"date", "time", "date-time", "uuid", "ipv4", NULL};
        if (!sc_in_list(FORMATS, f))
            return sc_fail(c, "unsupported format '%.60s' (supported: date, time, date-time, uuid, ipv4)", f), NULL;
        char name[32];
        snprintf(name, sizeof name, "format-%s", f);
        return sc_prim(c, name);
    }
    if (pat) {
        if (!json_is_string(pat)) return sc_fail(c, "'pattern' must be a string"), NULL;
        if (lens) return sc_fail(c, "'pattern' with 'minLength' or 'maxLength' is not supported"), NULL;
        struct lm_strbuf b;
        sc_buf_init(&b);
        lm_strbuf_puts(&b, "\"\\\"\" ");
        unsigned uses = 0;
        size_t old = sc_path_push(c, "pattern");
        char where[sizeof c->path];
        snprintf(where, sizeof where, "%s", c->path);
        sc_path_pop(c, old);
        enum lm_status st = lm_regex_to_gbnf(&b, json_string_value(pat), json_string_length(pat), where, &uses);
        if (st != LM_OK) {
            free(b.p);
            c->failed = true; // message set by the regex parser
            return NULL;
        }
        if (uses & LM_RX_USES_CHAR) sc_prim(c, "char");
        if (uses & LM_RX_USES_DOT) sc_prim(c, "regex-dot");
        lm_strbuf_puts(&b, " \"\\\"\"");
        const char *r = sc_rule_for(c, hint, &b);
        free(b.p);
        return r;
    }
    if (!lens) return sc_prim(c, "string");
    sc_prim(c, "char");
    struct lm_strbuf b;
    sc_buf_init(&b);
    lm_strbuf_puts(&b, "\"\\\"\" char");
    put_rep(&b, mn, mx);
    lm_strbuf_puts(&b, " \"\\\"\"");
    const char *r = sc_rule_for(c, hint, &b);
    free(b.p);
    return r;
}

// One bound as a double and an int64 when the JSON has an integer. Draft-4 boolean
// exclusive* flags come in through excl.
struct bound {
    bool has, excl, is_int;
    int64_t i;
    double d;
};

static bool get_bound(struct conv *c, json_t *v, const char *key, bool excl, struct bound *out) {
    if (!v) return true;
    if (json_is_integer(v)) {
        *out = (struct bound){true, excl, true, json_integer_value(v), (double)json_integer_value(v)};
        return true;
    }
    if (!json_is_real(v)) return sc_fail(c, "'%s' must be a number", key);
    double d = json_real_value(v);
    if (!(fabs(d) < 9.2e18)) return sc_fail(c, "'%s' %g is out of the supported range", key, d);
    *out = (struct bound){true, excl, d == floor(d), (int64_t)d, d};
    return true;
}

// The tighter of two bounds on one side.
static struct bound tighter(struct bound a, struct bound b, bool upper) {
    if (!a.has) return b;
    if (!b.has) return a;
    if (a.d != b.d) return (upper ? a.d < b.d : a.d > b.d) ? a : b;
    if (a.is_int && b.is_int && a.i != b.i) return (upper ? a.i < b.i : a.i > b.i) ? a : b;
    return a.excl ? a : b;
}

// A bound of an integer: inclusive, rounded inward. False: no integer is beyond it.
static bool int_bound(struct bound bd, bool upper, int64_t *out) {
    int64_t v = bd.is_int ? bd.i : (int64_t)(upper ? floor(bd.d) : ceil(bd.d));
    bool exact = bd.is_int || bd.d == floor(bd.d);
    if (bd.excl && exact) {
        if (upper ? v == INT64_MIN : v == INT64_MAX) return false;
        v += upper ? -1 : 1;
    }
    *out = v;
    return true;
}

// A bound of a number: an exact decimal; a nonzero exclusive one becomes an inclusive one at
// the next 15-significant-digit decimal beyond it.
static bool num_bound(struct conv *c, struct bound bd, bool upper, const char *key,
                      struct lm_dec *out, bool *excl) {
    *excl = false;
    bool ok;
    if (bd.excl && bd.d != 0) {
        if (bd.is_int && fabs(bd.d) > 9007199254740992.0)
            return sc_fail(c, "'%s': an exclusive bound of a number must be within 2^53", key);
        ok = lm_dec_beyond(out, bd.d, !upper);
    } else if (bd.is_int) {
        lm_dec_from_int(out, bd.i);
        ok = true;
        *excl = bd.excl; // zero
    } else {
        ok = lm_dec_from_double(out, bd.d);
        *excl = bd.excl; // zero
    }
    if (!ok) return sc_fail(c, "'%s' %g: more than 20 fraction digits are not supported", key, bd.d);
    return true;
}

const char *sc_visit_number(struct conv *c, json_t *s, const char *hint, bool integer) {
    json_t *emin = json_object_get(s, "exclusiveMinimum"), *emax = json_object_get(s, "exclusiveMaximum");
    bool lo_ex = false, hi_ex = false;
    // draft 4: exclusiveMinimum: true makes minimum exclusive
    if (json_is_boolean(emin)) lo_ex = json_is_true(emin), emin = NULL;
    if (json_is_boolean(emax)) hi_ex = json_is_true(emax), emax = NULL;
    struct bound lo1 = {0}, lo2 = {0}, hi1 = {0}, hi2 = {0};
    if (!get_bound(c, json_object_get(s, "minimum"), "minimum", lo_ex, &lo1) ||
        !get_bound(c, emin, "exclusiveMinimum", true, &lo2) ||
        !get_bound(c, json_object_get(s, "maximum"), "maximum", hi_ex, &hi1) ||
        !get_bound(c, emax, "exclusiveMaximum", true, &hi2))
        return NULL;
    struct bound lo = tighter(lo1, lo2, false), hi = tighter(hi1, hi2, true);
    if (!lo.has && !hi.has) return sc_prim(c, integer ? "integer" : "number");
    const char *lo_key = lo.excl ? "exclusiveMinimum" : "minimum", *hi_key = hi.excl ? "exclusiveMaximum" : "maximum";
    struct lm_num_bounds nb = {0};
    if (integer) {
        int64_t v;
        if (lo.has) {
            if (!int_bound(lo, false, &v)) return sc_fail(c, "no integer satisfies the bounds"), NULL;
            nb.has_lo = true;
            lm_dec_from_int(&nb.lo, v);
        }
        if (hi.has) {
            if (!int_bound(hi, true, &v)) return sc_fail(c, "no integer satisfies the bounds"), NULL;
            nb.has_hi = true;
            lm_dec_from_int(&nb.hi, v);
        }
    } else {
        if (lo.has && !num_bound(c, lo, false, lo_key, &nb.lo, &nb.lo_excl)) return NULL;
        if (hi.has && !num_bound(c, hi, true, hi_key, &nb.hi, &nb.hi_excl)) return NULL;
        nb.has_lo = lo.has, nb.has_hi = hi.has;
    }
    struct lm_strbuf b;
    sc_buf_init(&b);
    if (!lm_schema_emit_number(&b, &nb, integer)) {
        free(b.p);
        return sc_fail(c, "no %s satisfies the bounds", integer ? "integer" : "number"), NULL;
    }
    const char *r = sc_rule_for(c, hint, &b);
    free(b.p);
    return r;
}
