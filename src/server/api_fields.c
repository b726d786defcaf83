// Request parsing's errors and typed JSON fields (api_internal.h): every field type- and
// range-checked with a 400 that names it; the error body of every answer (api_error_json).
#include "api.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
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
