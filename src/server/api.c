// Request parsing for the OpenAI routes (/v1/completions, /v1/chat/completions) and
// llama-server's /tokenize and /detokenize: JSON body -> struct api_request, every field
// type- and range-checked with a message naming it. No socket, no model: the fuzz target
// (fuzz/fuzz_server_api.c) drives these functions directly.
#include "api.h"
#include "utf8.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static bool bad_request(struct api_error *e, const char *code, const char *param, const char *fmt,
                        ...) __attribute__((format(printf, 4, 5)));
static bool bad_request(struct api_error *e, const char *code, const char *param, const char *fmt,
                        ...) {
    char msg[sizeof e->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return api_fail(e, 400, "invalid_request_error", code, param, "%s", msg);
}

static const char *json_kind(const json_t *v) {
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

static bool wrong_type(struct api_error *e, const char *field, const char *want, const json_t *v) {
    return bad_request(e, "invalid_type", field, "'%s' must be %s (got %s)", field, want, json_kind(v));
}

// ================================================================ typed fields
// Each getter leaves *out alone when the field is absent or null (OpenAI's optional
// fields may be sent as null) and sets *given.

static json_t *field(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return v && !json_is_null(v) ? v : NULL;
}

static bool get_number(json_t *o, const char *key, double lo, double hi, double *out, bool *given,
                       struct api_error *e) {
    json_t *v = field(o, key);
    if (given) *given = v != NULL;
    if (!v) return true;
    if (!json_is_number(v)) return wrong_type(e, key, "a number", v);
    const double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return bad_request(e, "invalid_value", key, "'%s' is %g; it must be in [%g, %g]", key, x, lo, hi);
    *out = x;
    return true;
}

static bool get_int(json_t *o, const char *key, long long lo, long long hi, long long *out,
                    bool *given, struct api_error *e) {
    json_t *v = field(o, key);
    if (given) *given = v != NULL;
    if (!v) return true;
    long long x;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
               fabs(json_real_value(v)) < 9e15) { // 16.0 from a JavaScript client
        x = (long long)json_real_value(v);
    } else {
        return wrong_type(e, key, "an integer", v);
    }
    if (x < lo || x > hi)
        return bad_request(e, "invalid_value", key, "'%s' is %lld; it must be in [%lld, %lld]", key, x,
                           lo, hi);
    *out = x;
    return true;
}

static bool get_bool(json_t *o, const char *key, bool *out, struct api_error *e) {
    json_t *v = field(o, key);
    if (!v) return true;
    if (!json_is_boolean(v)) return wrong_type(e, key, "a boolean", v);
    *out = json_is_true(v);
    return true;
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

static bool oom(struct api_error *e) {
    return api_fail(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
}

// ================================================================ prompt, messages

// A token id array: every element an integer id in [0, n_vocab).
static bool parse_ids(json_t *a, const char *key, int32_t n_vocab, int32_t **ids, int32_t *n,
                      struct api_error *e) {
    const size_t k = json_array_size(a);
    if (k > (size_t)INT32_MAX / 2) return bad_request(e, "invalid_value", key, "'%s' is too long", key);
    int32_t *v = malloc((k ? k : 1) * sizeof *v);
    if (!v) return oom(e);
    for (size_t i = 0; i < k; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_integer(x)) {
            free(v);
            return bad_request(e, "invalid_type", key, "'%s'[%zu] must be an integer token id (got %s)",
                               key, i, json_kind(x));
        }
        const json_int_t id = json_integer_value(x);
        if (id < 0 || id >= n_vocab) {
            free(v);
            return bad_request(e, "invalid_value", key, "'%s'[%zu] is token %lld, outside the "
                               "vocabulary [0, %d)", key, i, (long long)id, n_vocab);
        }
        v[i] = (int32_t)id;
    }
    *ids = v;
    *n = (int32_t)k;
    return true;
}

static bool parse_prompt(json_t *o, int32_t n_vocab, struct api_request *r, struct api_error *e) {
    json_t *p = field(o, "prompt");
    if (!p) return bad_request(e, "missing_field", "prompt", "'prompt' is required");
    if (json_is_string(p)) {
        r->prompt_len = json_string_length(p);
        r->prompt = dup_n(json_string_value(p), r->prompt_len);
        return r->prompt ? true : oom(e);
    }
    if (!json_is_array(p)) return wrong_type(e, "prompt", "a string or an array of token ids", p);
    const size_t k = json_array_size(p);
    if (k == 0) return bad_request(e, "invalid_value", "prompt", "'prompt' is an empty array");
    json_t *first = json_array_get(p, 0);
    if (json_is_integer(first)) {
        r->has_prompt_ids = true;
        return parse_ids(p, "prompt", n_vocab, &r->prompt_ids, &r->n_prompt_ids, e);
    }
    // a batch of prompts: only a batch of one is served (one choice per request)
    if (k > 1)
        return bad_request(e, "unsupported", "prompt", "'prompt' holds %zu prompts; lumen serves one "
                           "prompt per request (send one request each)", k);
    if (json_is_string(first)) {
        r->prompt_len = json_string_length(first);
        r->prompt = dup_n(json_string_value(first), r->prompt_len);
        return r->prompt ? true : oom(e);
    }
    if (json_is_array(first)) {
        r->has_prompt_ids = true;
        return parse_ids(first, "prompt", n_vocab, &r->prompt_ids, &r->n_prompt_ids, e);
    }
    return wrong_type(e, "prompt", "a string or an array of token ids", first);
}

// content: a string, null (assistant only), or an array of {"type": "text", "text": str} parts (joined
// with "\n"; other part types are refused: lumen serves text models).
static bool parse_content(json_t *c, size_t i, char **out, struct api_error *e) {
    char param[48];
    snprintf(param, sizeof param, "messages[%zu].content", i);
    if (!c || json_is_null(c)) {
        *out = dup_n("", 0);
        return *out ? true : oom(e);
    }
    if (json_is_string(c)) {
        *out = dup_n(json_string_value(c), json_string_length(c));
        return *out ? true : oom(e);
    }
    if (!json_is_array(c)) return wrong_type(e, param, "a string or an array of content parts", c);
    size_t total = 0;
    const size_t k = json_array_size(c);
    for (size_t j = 0; j < k; j++) {
        json_t *part = json_array_get(c, j);
        json_t *type = json_is_object(part) ? json_object_get(part, "type") : NULL;
        json_t *text = json_is_object(part) ? json_object_get(part, "text") : NULL;
        if (!json_is_object(part) || !json_is_string(type))
            return bad_request(e, "invalid_type", param, "'%s'[%zu] must be an object with a string "
                               "'type'", param, j);
        if (strcmp(json_string_value(type), "text") != 0)
            return bad_request(e, "unsupported", param, "'%s'[%zu] has type '%.40s'; only 'text' "
                               "parts are supported", param, j, json_string_value(type));
        if (!json_is_string(text))
            return bad_request(e, "invalid_type", param, "'%s'[%zu].text must be a string", param, j);
        total += json_string_length(text) + 1;
    }
    char *s = malloc(total + 1);
    if (!s) return oom(e);
    size_t n = 0;
    for (size_t j = 0; j < k; j++) {
        json_t *text = json_object_get(json_array_get(c, j), "text");
        if (j) s[n++] = '\n';
        memcpy(s + n, json_string_value(text), json_string_length(text));
        n += json_string_length(text);
    }
    s[n] = 0;
    *out = s;
    return true;
}

static bool valid_name(const char *s, size_t n) {
    if (n == 0 || n > 64 || strlen(s) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '_' || s[i] == '-'))
            return false;
    return true;
}

// A JSON value as compact text (malloc'd), or NULL when out of memory.
static char *dump(const json_t *v) { return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY); }

// An assistant message's tool_calls ([{"id", "type": "function", "function": {"name",
// "arguments"}}]) and a tool message's tool_call_id.
static bool parse_msg_tools(json_t *msg, size_t i, bool assistant, bool tool, struct api_message *m,
                            struct api_error *e) {
    char param[80];
    json_t *tc = json_object_get(msg, "tool_calls");
    if (tc && !json_is_null(tc)) {
        snprintf(param, sizeof param, "messages[%zu].tool_calls", i);
        if (!assistant) return bad_request(e, "invalid_value", param, "only an assistant message has 'tool_calls'");
        if (!json_is_array(tc)) return wrong_type(e, param, "an array of tool calls", tc);
        const size_t k = json_array_size(tc);
        if (k > API_MAX_TOOL_CALLS)
            return bad_request(e, "invalid_value", param, "'%s' has %zu entries (at most %d)", param, k,
                               API_MAX_TOOL_CALLS);
        m->calls = calloc(k ? k : 1, sizeof *m->calls);
        if (!m->calls) return oom(e);
        for (size_t j = 0; j < k; j++) {
            json_t *c = json_array_get(tc, j);
            snprintf(param, sizeof param, "messages[%zu].tool_calls[%zu]", i, j);
            json_t *fn = json_is_object(c) ? json_object_get(c, "function") : NULL;
            json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
            json_t *args = json_is_object(fn) ? json_object_get(fn, "arguments") : NULL;
            json_t *id = json_is_object(c) ? json_object_get(c, "id") : NULL;
            if (!json_is_string(name) || !valid_name(json_string_value(name), json_string_length(name)))
                return bad_request(e, "invalid_value", param, "'%s' must be {\"id\", \"type\": \"function\", "
                                   "\"function\": {\"name\", \"arguments\"}} with a name of 1 to 64 letters, digits, "
                                   "'_' or '-'", param);
            if (args && !json_is_null(args) && !json_is_string(args) && !json_is_object(args))
                return bad_request(e, "invalid_type", param, "'%s.function.arguments' must be a string of JSON",
                                   param);
            if (id && !json_is_null(id) && !json_is_string(id))
                return bad_request(e, "invalid_type", param, "'%s.id' must be a string", param);
            struct api_tool_call *out = &m->calls[j];
            m->n_calls = j + 1;
            out->name = dup_n(json_string_value(name), json_string_length(name));
            out->arguments = json_is_string(args) ? dup_n(json_string_value(args), json_string_length(args))
                           : json_is_object(args) ? dump(args) : dup_n("{}", 2);
            out->id = json_is_string(id) ? dup_n(json_string_value(id), json_string_length(id)) : NULL;
            if (!out->name || !out->arguments || (json_is_string(id) && !out->id)) return oom(e);
        }
    }
    json_t *tid = json_object_get(msg, "tool_call_id");
    if (tool && tid && !json_is_null(tid)) {
        snprintf(param, sizeof param, "messages[%zu].tool_call_id", i);
        if (!json_is_string(tid)) return wrong_type(e, param, "a string", tid);
        m->tool_call_id = dup_n(json_string_value(tid), json_string_length(tid));
        if (!m->tool_call_id) return oom(e);
    }
    return true;
}

static bool parse_messages(json_t *o, struct api_request *r, struct api_error *e) {
    json_t *m = field(o, "messages");
    if (!m) return bad_request(e, "missing_field", "messages", "'messages' is required");
    if (!json_is_array(m)) return wrong_type(e, "messages", "an array of messages", m);
    const size_t k = json_array_size(m);
    if (k == 0) return bad_request(e, "invalid_value", "messages", "'messages' is empty");
    if (k > API_MAX_MESSAGES)
        return bad_request(e, "invalid_value", "messages", "'messages' has %zu entries (at most %d)", k,
                           API_MAX_MESSAGES);
    r->msgs = calloc(k, sizeof *r->msgs);
    if (!r->msgs) return oom(e);
    r->n_msgs = k;
    for (size_t i = 0; i < k; i++) {
        json_t *msg = json_array_get(m, i);
        char param[48];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(msg)) return wrong_type(e, param, "an object", msg);
        json_t *role = json_object_get(msg, "role");
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!role) return bad_request(e, "missing_field", param, "'%s' is required", param);
        if (!json_is_string(role)) return wrong_type(e, param, "a string", role);
        const char *rs = json_string_value(role);
        const size_t rl = json_string_length(role);
        static const char *const roles[] = {"system", "developer", "user", "assistant", "tool", "function"};
        bool known = strlen(rs) == rl;
        if (known) {
            known = false;
            for (size_t k = 0; k < sizeof roles / sizeof *roles; k++) known |= !strcmp(rs, roles[k]);
        }
        if (!known) // as OpenAI: one of its roles
            return bad_request(e, "invalid_value", param, "'%s' must be one of 'system', 'developer', "
                               "'user', 'assistant', 'tool', 'function'", param);
        r->msgs[i].role = !strcmp(rs, "developer") ? dup_n("system", 6) : dup_n(rs, rl);
        if (!r->msgs[i].role) return oom(e);
        json_t *content = json_object_get(msg, "content");
        if ((!content || json_is_null(content)) && strcmp(rs, "assistant") != 0) { // as OpenAI
            snprintf(param, sizeof param, "messages[%zu].content", i);
            return bad_request(e, "missing_field", param, "'%s' is required (only an assistant message "
                               "may have none)", param);
        }
        if (!parse_content(content, i, &r->msgs[i].content, e)) return false;
        if (!parse_msg_tools(msg, i, !strcmp(rs, "assistant"), !strcmp(rs, "tool"), &r->msgs[i], e)) return false;
    }
    return true;
}

// ================================================================ tools, structured output

// {"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}
static bool parse_tools(json_t *o, struct api_request *r, struct api_error *e) {
    json_t *t = field(o, "tools");
    if (!t) return true;
    if (!json_is_array(t)) return wrong_type(e, "tools", "an array of tools", t);
    const size_t k = json_array_size(t);
    if (k > API_MAX_TOOLS)
        return bad_request(e, "invalid_value", "tools", "'tools' has %zu entries (at most %d)", k, API_MAX_TOOLS);
    if (k == 0) return true;
    r->tools = calloc(k, sizeof *r->tools);
    if (!r->tools) return oom(e);
    char param[64];
    for (size_t i = 0; i < k; i++) {
        json_t *tool = json_array_get(t, i);
        snprintf(param, sizeof param, "tools[%zu]", i);
        if (!json_is_object(tool)) return wrong_type(e, param, "an object", tool);
        json_t *type = json_object_get(tool, "type");
        if (!json_is_string(type) || strcmp(json_string_value(type), "function") != 0)
            return bad_request(e, "invalid_value", param, "'%s.type' must be 'function'", param);
        json_t *fn = json_object_get(tool, "function");
        snprintf(param, sizeof param, "tools[%zu].function", i);
        if (!json_is_object(fn)) return fn ? wrong_type(e, param, "an object", fn)
                                           : bad_request(e, "missing_field", param, "'%s' is required", param);
        json_t *name = json_object_get(fn, "name");
        snprintf(param, sizeof param, "tools[%zu].function.name", i);
        if (!json_is_string(name) || !valid_name(json_string_value(name), json_string_length(name)))
            return bad_request(e, "invalid_value", param, "'%s' must be a string of 1 to 64 letters, digits, "
                               "'_' or '-'", param);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(r->tools[j].name, json_string_value(name)))
                return bad_request(e, "invalid_value", param, "two tools are named '%s'", json_string_value(name));
        json_t *desc = json_object_get(fn, "description");
        snprintf(param, sizeof param, "tools[%zu].function.description", i);
        if (desc && !json_is_null(desc) && !json_is_string(desc)) return wrong_type(e, param, "a string", desc);
        json_t *params = json_object_get(fn, "parameters");
        snprintf(param, sizeof param, "tools[%zu].function.parameters", i);
        if (params && !json_is_null(params) && !json_is_object(params))
            return wrong_type(e, param, "a JSON Schema object", params);
        snprintf(param, sizeof param, "tools[%zu].function", i);
        if (!get_bool(fn, "strict", &r->tools[i].strict, e)) return false;
        r->n_tools = (int32_t)i + 1;
        r->tools[i].name = dup_n(json_string_value(name), json_string_length(name));
        r->tools[i].parameters = params && json_is_object(params) ? dump(params) : dup_n("{\"type\":\"object\"}", 17);
        if (!r->tools[i].name || !r->tools[i].parameters) return oom(e);
    }
    r->tools_json = dump(t);
    if (!r->tools_json) return oom(e);
    r->tools_len = strlen(r->tools_json);
    return true;
}

// tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name"}};
// parallel_tool_calls: bool (default true).
static bool parse_tool_choice(json_t *o, struct api_request *r, struct api_error *e) {
    r->parallel_tool_calls = true;
    if (!get_bool(o, "parallel_tool_calls", &r->parallel_tool_calls, e)) return false;
    r->tool_choice = r->n_tools ? API_TOOLS_AUTO : API_TOOLS_NONE;
    json_t *c = field(o, "tool_choice");
    if (!c) return true;
    if (json_is_string(c)) {
        const char *v = json_string_value(c);
        if (!strcmp(v, "none")) r->tool_choice = API_TOOLS_NONE;
        else if (!strcmp(v, "auto")) r->tool_choice = r->n_tools ? API_TOOLS_AUTO : API_TOOLS_NONE;
        else if (!strcmp(v, "required")) r->tool_choice = API_TOOLS_REQUIRED;
        else
            return bad_request(e, "invalid_value", "tool_choice", "'tool_choice' is '%.40s'; it must be 'none', "
                               "'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}", v);
        if (r->tool_choice == API_TOOLS_REQUIRED && !r->n_tools)
            return bad_request(e, "invalid_value", "tool_choice", "'tool_choice' is 'required' but 'tools' is empty");
        return true;
    }
    json_t *fn = json_is_object(c) ? json_object_get(c, "function") : NULL;
    json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
    json_t *type = json_is_object(c) ? json_object_get(c, "type") : NULL;
    if (!json_is_string(name) || (type && (!json_is_string(type) || strcmp(json_string_value(type), "function"))))
        return bad_request(e, "invalid_value", "tool_choice", "'tool_choice' must be 'none', 'auto', 'required' "
                           "or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    for (int32_t i = 0; i < r->n_tools; i++)
        if (!strcmp(r->tools[i].name, json_string_value(name))) {
            r->tool_choice = API_TOOLS_NAMED;
            r->tool_named = i;
            return true;
        }
    return bad_request(e, "invalid_value", "tool_choice", "'tool_choice' names the function '%.64s', which is not "
                       "in 'tools'", json_string_value(name));
}

// response_format, llama-server's json_schema and grammar: at most one constraint.
static bool parse_format(json_t *o, struct api_request *r, struct api_error *e) {
    json_t *rf = field(o, "response_format");
    json_t *js = field(o, "json_schema");
    json_t *gr = field(o, "grammar");
    const char *given = NULL; // the field that set r->format
    if (rf) {
        json_t *t = json_is_object(rf) ? json_object_get(rf, "type") : NULL;
        if (!json_is_string(t)) return wrong_type(e, "response_format", "an object with a string 'type'", rf);
        const char *ts = json_string_value(t);
        if (!strcmp(ts, "json_object")) {
            r->format = API_FORMAT_JSON_OBJECT;
        } else if (!strcmp(ts, "json_schema")) {
            json_t *w = json_object_get(rf, "json_schema");
            if (!json_is_object(w))
                return bad_request(e, "invalid_value", "response_format", "response_format type 'json_schema' "
                                   "needs 'json_schema': {\"name\", \"schema\", \"strict\"}");
            json_t *nm = json_object_get(w, "name");
            if (nm && !json_is_string(nm)) return wrong_type(e, "response_format.json_schema.name", "a string", nm);
            bool strict = false;
            if (!get_bool(w, "strict", &strict, e)) return false;
            json_t *sc = field(w, "schema");
            if (sc && !json_is_object(sc) && !json_is_boolean(sc))
                return wrong_type(e, "response_format.json_schema.schema", "a JSON Schema object", sc);
            r->format = API_FORMAT_JSON_SCHEMA;
            r->schema = sc ? dump(sc) : dup_n("{}", 2);
            if (!r->schema) return oom(e);
            r->schema_len = strlen(r->schema);
        } else if (strcmp(ts, "text") != 0) {
            return bad_request(e, "invalid_value", "response_format", "response_format type '%.40s' is not one of "
                               "'text', 'json_object', 'json_schema'", ts);
        }
        if (r->format != API_FORMAT_TEXT) given = "response_format";
    }
    if (js) {
        if (!json_is_object(js) && !json_is_boolean(js)) return wrong_type(e, "json_schema", "a JSON Schema object", js);
        if (given)
            return bad_request(e, "invalid_value", "json_schema", "'json_schema' and '%s' both constrain the output; "
                               "give one", given);
        r->format = API_FORMAT_JSON_SCHEMA;
        r->schema = dump(js);
        if (!r->schema) return oom(e);
        r->schema_len = strlen(r->schema);
        given = "json_schema";
    }
    if (gr) {
        if (!json_is_string(gr)) return wrong_type(e, "grammar", "a string (GBNF)", gr);
        if (json_string_length(gr) == 0) return true; // llama-server: an empty grammar is none
        if (given)
            return bad_request(e, "invalid_value", "grammar", "'grammar' and '%s' both constrain the output; give one",
                               given);
        r->format = API_FORMAT_GRAMMAR;
        r->grammar = dup_n(json_string_value(gr), json_string_length(gr));
        if (!r->grammar) return oom(e);
        r->grammar_len = json_string_length(gr);
        given = "grammar";
    }
    if (given && r->tool_choice != API_TOOLS_NONE)
        return bad_request(e, "unsupported", given, "'%s' together with 'tools' is not supported (the tool-call "
                           "format constrains the output; set tool_choice 'none' or leave out one of them)", given);
    return true;
}

// ================================================================ sampling fields

static bool parse_stop(json_t *o, struct api_request *r, struct api_error *e) {
    json_t *s = field(o, "stop");
    if (!s) return true;
    json_t *one[1] = {s};
    json_t **items = one;
    size_t k = 1;
    if (json_is_array(s)) {
        k = json_array_size(s);
        if (k > API_MAX_STOP)
            return bad_request(e, "invalid_value", "stop", "'stop' has %zu strings (at most %d)", k,
                               API_MAX_STOP);
        items = NULL;
    } else if (!json_is_string(s)) {
        return wrong_type(e, "stop", "a string or an array of strings", s);
    }
    for (size_t i = 0; i < k; i++) {
        json_t *v = items ? items[i] : json_array_get(s, i);
        if (!json_is_string(v))
            return bad_request(e, "invalid_type", "stop", "'stop'[%zu] must be a string (got %s)", i,
                               json_kind(v));
        const size_t n = json_string_length(v);
        if (n == 0) continue; // an empty stop string would match everywhere: ignored
        if (n > API_MAX_STOP_LEN)
            return bad_request(e, "invalid_value", "stop", "a stop string has %zu bytes (at most %d)", n,
                               API_MAX_STOP_LEN);
        r->stop[r->n_stop] = dup_n(json_string_value(v), n);
        if (!r->stop[r->n_stop]) return oom(e);
        r->stop_len[r->n_stop++] = n;
    }
    return true;
}

// A logit_bias key: a token id in canonical decimal ("0", "17"; not "017", "+17", " 17" or
// "1e1", which would name the same token twice), below n_vocab. -1 when it is not one.
static long long bias_key(const char *key, int32_t n_vocab) {
    const size_t n = strlen(key);
    if (n == 0 || n > 10 || (key[0] == '0' && n > 1)) return -1;
    long long id = 0;
    for (size_t i = 0; i < n; i++) {
        if (key[i] < '0' || key[i] > '9') return -1;
        id = id * 10 + (key[i] - '0');
    }
    return id < n_vocab ? id : -1;
}

// logit_bias: {"token id": bias in [-100, 100]}; -100 bans the token (as OpenAI documents).
// Keys are canonical decimal ids (the body's duplicate keys are refused by the JSON load),
// at most API_MAX_LOGIT_BIAS of them.
static bool parse_logit_bias(json_t *o, int32_t n_vocab, struct api_request *r, struct api_error *e) {
    json_t *b = field(o, "logit_bias");
    if (!b) return true;
    if (!json_is_object(b)) return wrong_type(e, "logit_bias", "an object of token id: bias", b);
    const size_t k = json_object_size(b);
    if (k == 0) return true;
    if (k > API_MAX_LOGIT_BIAS)
        return bad_request(e, "invalid_value", "logit_bias", "'logit_bias' has %zu entries (at most %d)", k,
                           API_MAX_LOGIT_BIAS);
    r->bias_tokens = malloc(k * sizeof *r->bias_tokens);
    r->bias_values = malloc(k * sizeof *r->bias_values);
    if (!r->bias_tokens || !r->bias_values) return oom(e);
    const char *key;
    json_t *v;
    json_object_foreach(b, key, v) {
        const long long id = bias_key(key, n_vocab);
        if (id < 0)
            return bad_request(e, "invalid_value", "logit_bias", "logit_bias key '%.40s' is not a token id "
                               "in [0, %d) written in decimal without sign, spaces or leading zeros", key,
                               n_vocab);
        if (!json_is_number(v))
            return bad_request(e, "invalid_type", "logit_bias", "logit_bias['%s'] must be a number (got "
                               "%s)", key, json_kind(v));
        const double x = json_number_value(v);
        if (!(x >= -100.0 && x <= 100.0))
            return bad_request(e, "invalid_value", "logit_bias", "logit_bias['%s'] is %g; it must be in "
                               "[-100, 100]", key, x);
        r->bias_tokens[r->n_bias] = (int32_t)id;
        r->bias_values[r->n_bias++] = x <= -100.0 ? -INFINITY : (float)x;
    }
    return true;
}

static bool parse_sampling(json_t *o, int32_t n_vocab, struct api_request *r, struct api_error *e) {
    struct lm_sampler_params *sp = &r->sampling;
    double x = sp->temperature;
    if (!get_number(o, "temperature", 0.0, 100.0, &x, NULL, e)) return false;
    sp->temperature = (float)x;
    x = sp->top_p;
    if (!get_number(o, "top_p", 0.0, 1.0, &x, NULL, e)) return false;
    sp->top_p = (float)x;
    x = sp->min_p;
    if (!get_number(o, "min_p", 0.0, 1.0, &x, NULL, e)) return false;
    sp->min_p = (float)x;
    x = sp->repeat_penalty;
    if (!get_number(o, "repeat_penalty", 0.01, 100.0, &x, NULL, e)) return false;
    sp->repeat_penalty = (float)x;
    x = 0.0;
    if (!get_number(o, "presence_penalty", -2.0, 2.0, &x, NULL, e)) return false;
    sp->presence_penalty = (float)x;
    x = 0.0;
    if (!get_number(o, "frequency_penalty", -2.0, 2.0, &x, NULL, e)) return false;
    sp->frequency_penalty = (float)x;
    long long v = sp->top_k;
    if (!get_int(o, "top_k", -1, INT32_MAX, &v, NULL, e)) return false;
    sp->top_k = v < 0 ? 0 : (int32_t)v; // -1 (llama-server's "off") and 0 both mean off
    v = 0;
    if (!get_int(o, "seed", LLONG_MIN, LLONG_MAX, &v, &r->seed_given, e)) return false;
    sp->seed = (uint64_t)v;
    return parse_stop(o, r, e) && parse_logit_bias(o, n_vocab, r, e);
}

// Fields that would change what is computed and that lumen does not implement: refused
// with a clear message rather than silently ignored.
static bool parse_unsupported(json_t *o, enum api_kind kind, struct api_error *e) {
    long long n = 1;
    if (!get_int(o, "n", 1, INT32_MAX, &n, NULL, e)) return false;
    if (n != 1)
        return bad_request(e, "unsupported", "n", "'n' is %lld; lumen returns one choice per request "
                           "(n must be 1; send n requests)", n);
    if (kind == API_COMPLETION) {
        long long best_of = 1;
        if (!get_int(o, "best_of", 1, INT32_MAX, &best_of, NULL, e)) return false;
        if (best_of != 1)
            return bad_request(e, "unsupported", "best_of", "'best_of' must be 1 (got %lld)", best_of);
        bool echo = false;
        if (!get_bool(o, "echo", &echo, e)) return false;
        if (echo) return bad_request(e, "unsupported", "echo", "'echo' is not supported");
        json_t *suffix = field(o, "suffix");
        if (suffix && !json_is_string(suffix)) return wrong_type(e, "suffix", "a string", suffix);
        if (suffix && json_string_length(suffix) > 0)
            return bad_request(e, "unsupported", "suffix", "'suffix' (insertion) is not supported");
    } else {
        json_t *fns = field(o, "functions");
        if (fns && (!json_is_array(fns) || json_array_size(fns) > 0))
            return bad_request(e, "unsupported", "functions", "'functions' is not supported");
    }
    return true;
}

// ================================================================ entry points

bool api_json_within(const char *p, size_t n, const struct api_limits *lim, struct api_error *e) {
    size_t values = 0;
    int depth = 0;
    bool in_token = false; // inside a number or literal
    for (size_t i = 0; i < n; i++) {
        const char ch = p[i];
        if (ch == '"') { // a string (or a key): one value; skip to its end
            values++;
            in_token = false;
            for (i++; i < n && p[i] != '"'; i++)
                if (p[i] == '\\') i++;
        } else if (ch == '{' || ch == '[') {
            values++;
            in_token = false;
            if (++depth > lim->max_depth)
                return bad_request(e, "invalid_json", NULL, "the JSON body nests deeper than %d levels",
                                   lim->max_depth);
        } else if (ch == '}' || ch == ']' || ch == ',' || ch == ':' || ch == ' ' || ch == '\t' ||
                   ch == '\n' || ch == '\r') {
            if (ch == '}' || ch == ']') depth--;
            in_token = false;
        } else if (!in_token) { // a number or a literal starts
            values++;
            in_token = true;
        }
        if (values > lim->max_values)
            return api_fail(e, 413, "invalid_request_error", "request_too_large", NULL, "the JSON body holds "
                            "more than %zu values (strings, numbers, objects, arrays)", lim->max_values);
    }
    return true;
}

static json_t *load_object(const char *body, size_t len, const struct api_limits *lim, struct api_error *e) {
    if (lim && !api_json_within(body ? body : "", len, lim, e)) return NULL;
    json_error_t je;
    // duplicate keys are refused: two parsers (a proxy's and ours) must not read one body two ways
    json_t *root = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        bad_request(e, "invalid_json", NULL, "malformed JSON body: %s (line %d, column %d)", je.text,
                    je.line, je.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        wrong_type(e, "body", "a JSON object", root);
        json_decref(root);
        return NULL;
    }
    return root;
}

bool api_parse_generate(const char *body, size_t len, enum api_kind kind, int32_t n_vocab,
                        const struct api_limits *lim, struct api_request *r, struct api_error *e) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->sampling = lm_sampler_params_default();
    json_t *o = load_object(body, len, lim, e);
    if (!o) return false;
    bool ok = true;
    json_t *model = field(o, "model");
    if (model && !json_is_string(model)) ok = wrong_type(e, "model", "a string", model);
    if (ok) ok = kind == API_COMPLETION ? parse_prompt(o, n_vocab, r, e) : parse_messages(o, r, e);
    if (ok) ok = parse_unsupported(o, kind, e);
    if (ok && kind == API_CHAT) ok = parse_tools(o, r, e) && parse_tool_choice(o, r, e);
    if (ok && kind == API_COMPLETION) { // tools are a chat thing
        json_t *t = field(o, "tools");
        if (t && (!json_is_array(t) || json_array_size(t) > 0))
            ok = bad_request(e, "unsupported", "tools", "'tools' needs /v1/chat/completions");
        r->tool_choice = API_TOOLS_NONE;
    }
    if (ok) ok = parse_format(o, r, e);
    // without tools in the prompt, none of them is called
    if (ok && r->tool_choice == API_TOOLS_NONE && r->tools_json) {
        free(r->tools_json);
        r->tools_json = NULL;
        r->tools_len = 0;
    }
    long long mt = 0, mct = 0;
    bool mt_given = false, mct_given = false;
    if (ok) ok = get_int(o, "max_tokens", 1, 1 << 24, &mt, &mt_given, e);
    if (ok) ok = get_int(o, "max_completion_tokens", 1, 1 << 24, &mct, &mct_given, e);
    if (ok && (mt_given || mct_given)) {
        r->max_tokens_given = true;
        r->max_tokens = (int32_t)(mct_given ? mct : mt); // max_completion_tokens supersedes
    }
    if (ok) ok = parse_sampling(o, n_vocab, r, e);
    if (ok) ok = get_bool(o, "ignore_eos", &r->ignore_eos, e);
    if (ok) ok = get_bool(o, "stream", &r->stream, e);
    if (ok) {
        r->lookup_given = field(o, "lookup") != NULL;
        ok = get_bool(o, "lookup", &r->lookup, e);
    }
    if (ok) {
        r->draft_model_given = field(o, "draft_model") != NULL;
        ok = get_bool(o, "draft_model", &r->draft_model, e);
    }
    if (ok) {
        long long dm = 0;
        ok = get_int(o, "draft_max", 1, LM_DRAFT_MAX_LIMIT, &dm, NULL, e);
        r->draft_max = (int32_t)dm;
    }
    if (ok) {
        json_t *so = field(o, "stream_options");
        if (so && !json_is_object(so)) ok = wrong_type(e, "stream_options", "an object", so);
        else if (so) ok = get_bool(so, "include_usage", &r->include_usage, e);
    }
    if (ok && kind == API_COMPLETION) { // logprobs: alternatives per token, 0..20
        long long lp = 0;
        ok = get_int(o, "logprobs", 0, API_MAX_TOP_LOGPROBS, &lp, &r->logprobs, e);
        r->top_logprobs = (int32_t)lp;
    } else if (ok) { // logprobs: bool, top_logprobs: 0..20 alternatives
        ok = get_bool(o, "logprobs", &r->logprobs, e);
        long long tl = 0;
        bool tl_given = false;
        if (ok) ok = get_int(o, "top_logprobs", 0, API_MAX_TOP_LOGPROBS, &tl, &tl_given, e);
        if (ok && tl_given && tl > 0 && !r->logprobs)
            ok = bad_request(e, "invalid_value", "top_logprobs", "'top_logprobs' needs 'logprobs': true");
        r->top_logprobs = (int32_t)tl;
    }
    json_decref(o);
    if (!ok) api_request_free(r);
    return ok;
}

int32_t api_n_logprobs(const struct api_request *r) {
    return r->logprobs ? 1 + r->top_logprobs : 0;
}

void api_request_free(struct api_request *r) {
    free(r->prompt);
    free(r->prompt_ids);
    for (size_t i = 0; i < r->n_msgs && r->msgs; i++) {
        free(r->msgs[i].role);
        free(r->msgs[i].content);
        for (size_t j = 0; j < r->msgs[i].n_calls; j++) {
            free(r->msgs[i].calls[j].id);
            free(r->msgs[i].calls[j].name);
            free(r->msgs[i].calls[j].arguments);
        }
        free(r->msgs[i].calls);
        free(r->msgs[i].tool_call_id);
    }
    free(r->msgs);
    for (int32_t i = 0; i < r->n_tools; i++) {
        free(r->tools[i].name);
        free(r->tools[i].parameters);
    }
    free(r->tools);
    free(r->tools_json);
    free(r->schema);
    free(r->grammar);
    for (int32_t i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->bias_tokens);
    free(r->bias_values);
    const enum api_kind kind = r->kind;
    memset(r, 0, sizeof *r);
    r->kind = kind;
}

bool api_parse_tokenize(const char *body, size_t len, const struct api_limits *lim, struct api_tokenize *t,
                        struct api_error *e) {
    memset(t, 0, sizeof *t);
    t->parse_special = true;
    json_t *o = load_object(body, len, lim, e);
    if (!o) return false;
    bool ok = true;
    json_t *c = field(o, "content");
    if (!c) ok = bad_request(e, "missing_field", "content", "'content' is required");
    else if (!json_is_string(c)) ok = wrong_type(e, "content", "a string", c);
    if (ok) ok = get_bool(o, "add_special", &t->add_special, e);
    if (ok) ok = get_bool(o, "parse_special", &t->parse_special, e);
    if (ok) ok = get_bool(o, "with_pieces", &t->with_pieces, e);
    if (ok) {
        t->len = json_string_length(c);
        t->content = dup_n(json_string_value(c), t->len);
        if (!t->content) ok = oom(e);
    }
    json_decref(o);
    return ok;
}

bool api_parse_detokenize(const char *body, size_t len, int32_t n_vocab, const struct api_limits *lim,
                          int32_t **ids, int32_t *n_ids, struct api_error *e) {
    *ids = NULL;
    *n_ids = 0;
    json_t *o = load_object(body, len, lim, e);
    if (!o) return false;
    bool ok = true;
    json_t *t = field(o, "tokens");
    if (!t) ok = bad_request(e, "missing_field", "tokens", "'tokens' is required");
    else if (!json_is_array(t)) ok = wrong_type(e, "tokens", "an array of token ids", t);
    if (ok) ok = parse_ids(t, "tokens", n_vocab, ids, n_ids, e);
    json_decref(o);
    return ok;
}
