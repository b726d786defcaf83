// Request parsing's errors and typed JSON fields (api_internal.h): every field type- and
// range-checked with a 400 that names it; the error body of every answer (api_error_json).
#include "api.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "utf8.h"

// ================================================================ errors

bool api_fail(struct api_error *e, int status, const char *type, const char *code,
              const char *param, const char *fmt, ...) {
    e->status = status;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    // messages quote client text: keep them valid UTF-8 for the JSON answer
    e->message[utf8_valid_prefix(e->message, strlen(e->message))] = 0;
    return false;
}

char *api_error_json(const struct api_error *e) {
    json_t *err = json_object();
    json_object_set_new(err, "message", json_string(e->message));
    json_object_set_new(err, "type", json_string(e->type ? e->type : "invalid_request_error"));
    json_object_set_new(err, "param", e->param[0] ? json_string(e->param) : json_null());
    json_object_set_new(err, "code", e->code ? json_string(e->code) : json_null());
    json_t *root = json_object();
    json_object_set_new(root, "error", err);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

bool api_bad_request(struct api_error *e, const char *code, const char *param, const char *fmt, ...) {
    char msg[sizeof e->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return api_fail(e, 400, "invalid_request_error", code, param, "%s", msg);
}

const char *api_json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

bool api_wrong_type(struct api_error *e, const char *field, const char *want, const json_t *v) {
    return api_bad_request(e, "invalid_type", field, "'%s' must be %s (got %s)", field, want, api_json_kind(v));
}

// ================================================================ typed fields
// Each getter leaves *out alone when the field is absent or null (OpenAI's optional
// fields may be sent as null) and sets *given.

json_t *api_field(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return v && !json_is_null(v) ? v : NULL;
}

bool api_get_number(json_t *o, const char *key, double lo, double hi, double *out, bool *given,
                       struct api_error *e) {
    json_t *v = api_field(o, key);
    if (given) *given = v != NULL;
    if (!v) return true;
    if (!json_is_number(v)) return api_wrong_type(e, key, "a number", v);
    const double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return api_bad_request(e, "invalid_value", key, "'%s' is %g; it must be in [%g, %g]", key, x, lo, hi);
    *out = x;
    return true;
}

bool api_get_int(json_t *o, const char *key, long long lo, long long hi, long long *out,
                    bool *given, struct api_error *e) {
    json_t *v = api_field(o, key);
    if (given) *given = v != NULL;
    if (!v) return true;
    long long x;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
               fabs(json_real_value(v)) < 9e15) { // 16.0 from a JavaScript client
        x = (long long)json_real_value(v);
    } else {
        return api_wrong_type(e, key, "an integer", v);
    }
    if (x < lo || x > hi)
        return api_bad_request(e, "invalid_value", key, "'%s' is %lld; it must be in [%lld, %lld]", key, x,
                           lo, hi);
    *out = x;
    return true;
}

bool api_get_bool(json_t *o, const char *key, bool *out, struct api_error *e) {
    json_t *v = api_field(o, key);
    if (!v) return true;
    if (!json_is_boolean(v)) return api_wrong_type(e, key, "a boolean", v);
    *out = json_is_true(v);
    return true;
}

char *api_dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

bool api_oom(struct api_error *e) {
    return api_fail(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
}


// A JSON value as compact text (malloc'd), or NULL when out of memory.
char *api_dump(const json_t *v) { return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY); }

// ================================================================ shared request parts

bool api_parse_tool_list(json_t *o, api_tool_reader read, struct api_request *r, struct api_error *e) {
    json_t *t = api_field(o, "tools");
    if (!t) return true;
    if (!json_is_array(t)) return api_wrong_type(e, "tools", "an array of tools", t);
    const size_t k = json_array_size(t);
    if (k > API_MAX_TOOLS)
        return api_bad_request(e, "invalid_value", "tools", "'tools' has %zu entries (at most %d)", k, API_MAX_TOOLS);
    if (k == 0) return true;
    r->tools = calloc(k, sizeof *r->tools);
    json_t *fns = json_array();
    bool ok = r->tools && fns ? true : api_oom(e);
    char param[64];
    for (size_t i = 0; ok && i < k; i++) {
        snprintf(param, sizeof param, "tools[%zu]", i);
        struct api_tool_fields f = {0};
        ok = read(json_array_get(t, i), param, &f, &r->tools[i], e);
        for (size_t j = 0; ok && j < i; j++)
            if (!strcmp(r->tools[j].name, json_string_value(f.name)))
                ok = api_bad_request(e, "invalid_value", param, "two tools are named '%s'", json_string_value(f.name));
        if (!ok) break;
        r->n_tools = (int32_t)i + 1;
        r->tools[i].name = api_dup_n(json_string_value(f.name), json_string_length(f.name));
        r->tools[i].parameters = f.params ? api_dump(f.params) : api_dup_n("{\"type\":\"object\"}", 17);
        // name, description, parameters: chat's order, so the same tools make the same prompt
        json_t *fn = json_object();
        if (fn && (json_object_set(fn, "name", f.name) || (f.desc && json_object_set(fn, "description", f.desc)) ||
                   (f.params && json_object_set(fn, "parameters", f.params)))) {
            json_decref(fn);
            fn = NULL;
        }
        if (!r->tools[i].name || !r->tools[i].parameters || !fn ||
            json_array_append_new(fns, json_pack("{s:s,s:o}", "type", "function", "function", fn)) != 0)
            ok = api_oom(e);
    }
    if (ok && !(r->tools_json = api_dump(fns))) ok = api_oom(e);
    if (ok) r->tools_len = strlen(r->tools_json);
    json_decref(fns);
    return ok;
}

bool api_parse_sampling_basic(json_t *o, double temperature_hi, bool top_k, struct api_request *r,
                              struct api_error *e) {
    struct lm_sampler_params *sp = &r->sampling;
    double x = sp->temperature;
    if (!api_get_number(o, "temperature", 0.0, temperature_hi, &x, NULL, e)) return false;
    sp->temperature = (float)x;
    x = sp->top_p;
    if (!api_get_number(o, "top_p", 0.0, 1.0, &x, NULL, e)) return false;
    sp->top_p = (float)x;
    long long v = sp->top_k;
    if (top_k && !api_get_int(o, "top_k", 0, INT32_MAX, &v, NULL, e)) return false;
    sp->top_k = (int32_t)v;
    v = 0;
    if (!api_get_int(o, "seed", INT64_MIN, INT64_MAX, &v, &r->seed_given, e)) return false; // lumen's
    sp->seed = (uint64_t)v;
    return true;
}

bool api_tool_choice_named(struct api_request *r, const char *name, const char *kind, struct api_error *e) {
    for (int32_t i = 0; i < r->n_tools; i++)
        if (!strcmp(r->tools[i].name, name)) {
            r->tool_choice = API_TOOLS_NAMED;
            r->tool_named = i;
            r->parallel_tool_calls = false; // a named tool: exactly one call (as OpenAI, Anthropic and vLLM)
            return true;
        }
    return api_bad_request(e, "invalid_value", "tool_choice", "'tool_choice' names the %s '%.64s', which is not in "
                           "'tools'", kind, name);
}
