// Request parsing of a chat's messages (content parts, assistant tool calls, tool results)
// and its tools and tool_choice (api_internal.h; called by api_parse_generate in api.c).
#include "api.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"

// content: a string, null (assistant only), or an array of {"type": "text", "text": str} parts (joined
// with "\n"; other part types are refused: lumen serves text models).
static bool parse_content(json_t *c, size_t i, char **out, struct api_error *e) {
    char param[48];
    snprintf(param, sizeof param, "messages[%zu].content", i);
    if (!c || json_is_null(c)) {
        *out = api_dup_n("", 0);
        return *out ? true : api_oom(e);
    }
    if (json_is_string(c)) {
        *out = api_dup_n(json_string_value(c), json_string_length(c));
        return *out ? true : api_oom(e);
    }
    if (!json_is_array(c)) return api_wrong_type(e, param, "a string or an array of content parts", c);
    size_t total = 0;
    const size_t k = json_array_size(c);
    for (size_t j = 0; j < k; j++) {
        json_t *part = json_array_get(c, j);
        json_t *type = json_is_object(part) ? json_object_get(part, "type") : NULL;
        json_t *text = json_is_object(part) ? json_object_get(part, "text") : NULL;
        if (!json_is_object(part) || !json_is_string(type))
            return api_bad_request(e, "invalid_type", param, "'%s'[%zu] must be an object with a string "
                               "'type'", param, j);
        if (strcmp(json_string_value(type), "text") != 0)
            return api_bad_request(e, "unsupported", param, "'%s'[%zu] has type '%.40s'; only 'text' "
                               "parts are supported", param, j, json_string_value(type));
        if (!json_is_string(text))
            return api_bad_request(e, "invalid_type", param, "'%s'[%zu].text must be a string", param, j);
        total += json_string_length(text) + 1;
    }
    char *s = malloc(total + 1);
    if (!s) return api_oom(e);
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

bool api_valid_name(const char *s, size_t n) {
    if (n == 0 || n > 64 || strlen(s) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '_' || s[i] == '-'))
            return false;
    return true;
}

// An assistant message's tool_calls ([{"id", "type": "function", "function": {"name",
// "arguments"}}]) and a tool message's tool_call_id.
static bool parse_msg_tools(json_t *msg, size_t i, bool assistant, bool tool, struct api_message *m,
                            struct api_error *e) {
    char param[80];
    json_t *tc = json_object_get(msg, "tool_calls");
    if (tc && !json_is_null(tc)) {
        snprintf(param, sizeof param, "messages[%zu].tool_calls", i);
        if (!assistant) return api_bad_request(e, "invalid_value", param, "only an assistant message has 'tool_calls'");
        if (!json_is_array(tc)) return api_wrong_type(e, param, "an array of tool calls", tc);
        const size_t k = json_array_size(tc);
        if (k > API_MAX_TOOL_CALLS)
            return api_bad_request(e, "invalid_value", param, "'%s' has %zu entries (at most %d)", param, k,
                               API_MAX_TOOL_CALLS);
        m->calls = calloc(k ? k : 1, sizeof *m->calls);
        if (!m->calls) return api_oom(e);
        for (size_t j = 0; j < k; j++) {
            json_t *c = json_array_get(tc, j);
            snprintf(param, sizeof param, "messages[%zu].tool_calls[%zu]", i, j);
            json_t *fn = json_is_object(c) ? json_object_get(c, "function") : NULL;
            json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
            json_t *args = json_is_object(fn) ? json_object_get(fn, "arguments") : NULL;
            json_t *id = json_is_object(c) ? json_object_get(c, "id") : NULL;
            if (!json_is_string(name) || !api_valid_name(json_string_value(name), json_string_length(name)))
                return api_bad_request(e, "invalid_value", param, "'%s' must be {\"id\", \"type\": \"function\", "
                                   "\"function\": {\"name\", \"arguments\"}} with a name of 1 to 64 letters, digits, "
                                   "'_' or '-'", param);
            if (args && !json_is_null(args) && !json_is_string(args) && !json_is_object(args))
                return api_bad_request(e, "invalid_type", param, "'%s.function.arguments' must be a string of JSON",
                                   param);
            if (id && !json_is_null(id) && !json_is_string(id))
                return api_bad_request(e, "invalid_type", param, "'%s.id' must be a string", param);
            struct api_tool_call *out = &m->calls[j];
            m->n_calls = j + 1;
            out->name = api_dup_n(json_string_value(name), json_string_length(name));
            out->arguments = json_is_string(args) ? api_dup_n(json_string_value(args), json_string_length(args))
                           : json_is_object(args) ? api_dump(args) : api_dup_n("{}", 2);
            out->id = json_is_string(id) ? api_dup_n(json_string_value(id), json_string_length(id)) : NULL;
            if (!out->name || !out->arguments || (json_is_string(id) && !out->id)) return api_oom(e);
        }
    }
    json_t *tid = json_object_get(msg, "tool_call_id");
    if (tool && tid && !json_is_null(tid)) {
        snprintf(param, sizeof param, "messages[%zu].tool_call_id", i);
        if (!json_is_string(tid)) return api_wrong_type(e, param, "a string", tid);
        m->tool_call_id = api_dup_n(json_string_value(tid), json_string_length(tid));
        if (!m->tool_call_id) return api_oom(e);
    }
    return true;
}

bool api_parse_messages(json_t *o, struct api_request *r, struct api_error *e) {
    json_t *m = api_field(o, "messages");
    if (!m) return api_bad_request(e, "missing_field", "messages", "'messages' is required");
    if (!json_is_array(m)) return api_wrong_type(e, "messages", "an array of messages", m);
    const size_t k = json_array_size(m);
    if (k == 0) return api_bad_request(e, "invalid_value", "messages", "'messages' is empty");
    if (k > API_MAX_MESSAGES)
        return api_bad_request(e, "invalid_value", "messages", "'messages' has %zu entries (at most %d)", k,
                           API_MAX_MESSAGES);
    r->msgs = calloc(k, sizeof *r->msgs);
    if (!r->msgs) return api_oom(e);
    r->n_msgs = k;
    for (size_t i = 0; i < k; i++) {
        json_t *msg = json_array_get(m, i);
        char param[48];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(msg)) return api_wrong_type(e, param, "an object", msg);
        json_t *role = json_object_get(msg, "role");
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!role) return api_bad_request(e, "missing_field", param, "'%s' is required", param);
        if (!json_is_string(role)) return api_wrong_type(e, param, "a string", role);
        const char *rs = json_string_value(role);
        const size_t rl = json_string_length(role);
        static const char *const roles[] = {"system", "developer", "user", "assistant", "tool", "function"};
        bool known = strlen(rs) == rl;
        if (known) {
            known = false;
            for (size_t k = 0; k < sizeof roles / sizeof *roles; k++) known |= !strcmp(rs, roles[k]);
        }
        if (!known) // as OpenAI: one of its roles
            return api_bad_request(e, "invalid_value", param, "'%s' must be one of 'system', 'developer', "
                               "'user', 'assistant', 'tool', 'function'", param);
        r->msgs[i].role = !strcmp(rs, "developer") ? api_dup_n("system", 6) : api_dup_n(rs, rl);
        if (!r->msgs[i].role) return api_oom(e);
        json_t *content = json_object_get(msg, "content");
        if ((!content || json_is_null(content)) && strcmp(rs, "assistant") != 0) { // as OpenAI
            snprintf(param, sizeof param, "messages[%zu].content", i);
            return api_bad_request(e, "missing_field", param, "'%s' is required (only an assistant message "
                               "may have none)", param);
        }
        if (!parse_content(content, i, &r->msgs[i].content, e)) return false;
        if (!parse_msg_tools(msg, i, !strcmp(rs, "assistant"), !strcmp(rs, "tool"), &r->msgs[i], e)) return false;
        json_t *rc = json_object_get(msg, "reasoning_content"); // an earlier answer's (llama-server's name)
        if (rc && !json_is_null(rc) && !strcmp(rs, "assistant")) {
            snprintf(param, sizeof param, "messages[%zu].reasoning_content", i);
            if (!json_is_string(rc)) return api_wrong_type(e, param, "a string", rc);
            if (!(r->msgs[i].reasoning = api_dup_n(json_string_value(rc), json_string_length(rc)))) return api_oom(e);
        }
    }
    return true;
}

// ================================================================ tools

// {"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}
bool api_parse_tools(json_t *o, struct api_request *r, struct api_error *e) {
    json_t *t = api_field(o, "tools");
    if (!t) return true;
    if (!json_is_array(t)) return api_wrong_type(e, "tools", "an array of tools", t);
    const size_t k = json_array_size(t);
    if (k > API_MAX_TOOLS)
        return api_bad_request(e, "invalid_value", "tools", "'tools' has %zu entries (at most %d)", k, API_MAX_TOOLS);
    if (k == 0) return true;
    r->tools = calloc(k, sizeof *r->tools);
    if (!r->tools) return api_oom(e);
    char param[64];
    for (size_t i = 0; i < k; i++) {
        json_t *tool = json_array_get(t, i);
        snprintf(param, sizeof param, "tools[%zu]", i);
        if (!json_is_object(tool)) return api_wrong_type(e, param, "an object", tool);
        json_t *type = json_object_get(tool, "type");
        if (!json_is_string(type) || strcmp(json_string_value(type), "function") != 0)
            return api_bad_request(e, "invalid_value", param, "'%s.type' must be 'function'", param);
        json_t *fn = json_object_get(tool, "function");
        snprintf(param, sizeof param, "tools[%zu].function", i);
        if (!json_is_object(fn)) return fn ? api_wrong_type(e, param, "an object", fn)
                                           : api_bad_request(e, "missing_field", param, "'%s' is required", param);
        json_t *name = json_object_get(fn, "name");
        snprintf(param, sizeof param, "tools[%zu].function.name", i);
        if (!json_is_string(name) || !api_valid_name(json_string_value(name), json_string_length(name)))
            return api_bad_request(e, "invalid_value", param, "'%s' must be a string of 1 to 64 letters, digits, "
                               "'_' or '-'", param);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(r->tools[j].name, json_string_value(name)))
                return api_bad_request(e, "invalid_value", param, "two tools are named '%s'", json_string_value(name));
        json_t *desc = json_object_get(fn, "description");
        snprintf(param, sizeof param, "tools[%zu].function.description", i);
        if (desc && !json_is_null(desc) && !json_is_string(desc)) return api_wrong_type(e, param, "a string", desc);
        json_t *params = json_object_get(fn, "parameters");
        snprintf(param, sizeof param, "tools[%zu].function.parameters", i);
        if (params && !json_is_null(params) && !json_is_object(params))
            return api_wrong_type(e, param, "a JSON Schema object", params);
        snprintf(param, sizeof param, "tools[%zu].function", i);
        if (!api_get_bool(fn, "strict", &r->tools[i].strict, e)) return false;
        r->n_tools = (int32_t)i + 1;
        r->tools[i].name = api_dup_n(json_string_value(name), json_string_length(name));
        r->tools[i].parameters = params && json_is_object(params) ? api_dump(params) : api_dup_n("{\"type\":\"object\"}", 17);
        if (!r->tools[i].name || !r->tools[i].parameters) return api_oom(e);
    }
    r->tools_json = api_dump(t);
    if (!r->tools_json) return api_oom(e);
    r->tools_len = strlen(r->tools_json);
    return true;
}

// tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name"}};
// parallel_tool_calls: bool (default true).
bool api_parse_tool_choice(json_t *o, struct api_request *r, struct api_error *e) {
    json_t *eff = api_field(o, "reasoning_effort"); // gpt-oss's "Reasoning: ..."; none/minimal: no thinking
    if (eff && !json_is_null(eff)) {
        const char *v = json_is_string(eff) ? json_string_value(eff) : NULL;
        if (!v || (strcmp(v, "none") && strcmp(v, "minimal") && strcmp(v, "low") && strcmp(v, "medium") &&
                   strcmp(v, "high")))
            return api_bad_request(e, "invalid_value", "reasoning_effort",
                                   "'reasoning_effort' must be 'none', 'minimal', 'low', 'medium' or 'high'");
        snprintf(r->reasoning_effort, sizeof r->reasoning_effort, "%s", v);
    }
    r->parallel_tool_calls = true;
    if (!api_get_bool(o, "parallel_tool_calls", &r->parallel_tool_calls, e)) return false;
    r->tool_choice = r->n_tools ? API_TOOLS_AUTO : API_TOOLS_NONE;
    json_t *c = api_field(o, "tool_choice");
    if (!c) return true;
    if (json_is_string(c)) {
        const char *v = json_string_value(c);
        if (!strcmp(v, "none")) r->tool_choice = API_TOOLS_NONE;
        else if (!strcmp(v, "auto")) r->tool_choice = r->n_tools ? API_TOOLS_AUTO : API_TOOLS_NONE;
        else if (!strcmp(v, "required")) r->tool_choice = API_TOOLS_REQUIRED;
        else
            return api_bad_request(e, "invalid_value", "tool_choice", "'tool_choice' is '%.40s'; it must be 'none', "
                               "'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}", v);
        if (r->tool_choice == API_TOOLS_REQUIRED && !r->n_tools)
            return api_bad_request(e, "invalid_value", "tool_choice", "'tool_choice' is 'required' but 'tools' is empty");
        return true;
    }
    json_t *fn = json_is_object(c) ? json_object_get(c, "function") : NULL;
    json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
    json_t *type = json_is_object(c) ? json_object_get(c, "type") : NULL;
    if (!json_is_string(name) || (type && (!json_is_string(type) || strcmp(json_string_value(type), "function"))))
        return api_bad_request(e, "invalid_value", "tool_choice", "'tool_choice' must be 'none', 'auto', 'required' "
                           "or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    return api_tool_choice_named(r, json_string_value(name), "function", e);
}
