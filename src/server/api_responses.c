// Request parsing for OpenAI's Responses API (POST /v1/responses): input items, instructions,
// function tools, text.format and sampling become the same struct api_request as a chat
// completion (dialect API_DIALECT_RESPONSES), so one generation path serves every API.
// Stateless: previous_response_id is a named 400. Pure functions of the body (fuzz target).
#include "api.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "strbuf.h"

// ================================================================ input items

static bool is_str(json_t *v) { return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v); }

static struct api_message *push(struct api_request *r, const char *role, struct api_error *e) {
    struct api_message *m = &r->msgs[r->n_msgs++];
    m->role = api_dup_n(role, strlen(role));
    if (!m->role) api_oom(e);
    return m->role ? m : NULL;
}

// A message's content: a string, or parts input_text / output_text (joined with "\n");
// images, files and audio named (lumen serves text models).
static bool item_content(json_t *c, const char *param, char **out, struct api_error *e) {
    if (json_is_string(c)) return (*out = api_dup_n(json_string_value(c), json_string_length(c))) ? true : api_oom(e);
    if (!json_is_array(c))
        return c ? api_wrong_type(e, param, "a string or an array of content parts", c)
                 : api_bad_request(e, "missing_field", param, "'%s' is required", param);
    struct sbuf b = {0};
    char pp[128];
    for (size_t j = 0; j < json_array_size(c); j++) {
        json_t *p = json_array_get(c, j), *t = json_is_object(p) ? json_object_get(p, "type") : NULL;
        snprintf(pp, sizeof pp, "%s[%zu]", param, j);
        const char *ts = is_str(t) ? json_string_value(t) : NULL;
        json_t *text = ts ? json_object_get(p, "text") : NULL;
        bool ok = true;
        if (!ts) ok = api_bad_request(e, "invalid_type", pp, "'%s' must be an object with a string 'type'", pp);
        else if (!strcmp(ts, "input_image") || !strcmp(ts, "input_file") || !strcmp(ts, "input_audio"))
            ok = api_bad_request(e, "unsupported", pp, "'%s' is an '%s' part; lumen serves text models (no images, "
                                 "files or audio)", pp, ts);
        else if (strcmp(ts, "input_text") && strcmp(ts, "output_text") && strcmp(ts, "text") && strcmp(ts, "refusal"))
            ok = api_bad_request(e, "invalid_value", pp, "'%s.type' is '%.40s'; it must be 'input_text' or "
                                 "'output_text'", pp, ts);
        else if (!strcmp(ts, "refusal")) text = json_object_get(p, "refusal");
        if (ok && !json_is_string(text))
            ok = api_bad_request(e, "invalid_type", pp, "'%s.%s' must be a string", pp,
                                 !strcmp(ts, "refusal") ? "refusal" : "text");
        if (!ok) {
            sbuf_free(&b);
            return false;
        }
        if (b.n) sbuf_append(&b, "\n", 1);
        sbuf_append(&b, json_string_value(text), json_string_length(text));
    }
    *out = b.oom ? NULL : api_dup_n(b.p ? b.p : "", b.n);
    sbuf_free(&b);
    return *out ? true : api_oom(e);
}

// {"type": "message"?, "role", "content"}; developer is read as system.
static bool item_message(json_t *it, const char *param, struct api_request *r, struct api_error *e) {
    json_t *role = json_object_get(it, "role");
    const char *rs = is_str(role) ? json_string_value(role) : "";
    if (!strcmp(rs, "developer")) rs = "system";
    if (strcmp(rs, "user") && strcmp(rs, "assistant") && strcmp(rs, "system"))
        return api_bad_request(e, "invalid_value", param, "'%s.role' must be 'user', 'assistant', 'system' or "
                               "'developer'", param);
    char cp[96];
    snprintf(cp, sizeof cp, "%s.content", param);
    struct api_message *m = push(r, rs, e);
    return m && item_content(json_object_get(it, "content"), cp, &m->content, e);
}

static bool known_call(const struct api_request *r, const char *id) {
    for (size_t i = 0; i < r->n_msgs; i++)
        for (size_t j = 0; j < r->msgs[i].n_calls; j++)
            if (r->msgs[i].calls[j].id && !strcmp(r->msgs[i].calls[j].id, id)) return true;
    return false;
}

// {"type": "function_call", "call_id", "name", "arguments"}: a call of the assistant turn
// (consecutive calls share one assistant message; run: how many follow from this one).
static bool item_call(json_t *it, const char *param, size_t run, bool join, struct api_request *r,
                      struct api_error *e) {
    json_t *id = json_object_get(it, "call_id"), *name = json_object_get(it, "name");
    json_t *args = json_object_get(it, "arguments");
    if (!is_str(id) || json_string_length(id) == 0)
        return api_bad_request(e, "invalid_value", param, "'%s.call_id' must be a non-empty string", param);
    if (!json_is_string(name) || !api_valid_name(json_string_value(name), json_string_length(name)))
        return api_bad_request(e, "invalid_value", param, "'%s.name' must be a string of 1 to 64 letters, digits, "
                               "'_' or '-'", param);
    if (!json_is_string(args))
        return api_wrong_type(e, "function_call.arguments", "a string (JSON text)", args ? args : json_null());
    struct api_message *m = join ? &r->msgs[r->n_msgs - 1] : NULL;
    if (!m) {
        if (!(m = push(r, "assistant", e))) return false;
        if (!(m->content = api_dup_n("", 0))) return api_oom(e);
    }
    if (!m->calls) {
        m->calls = calloc(run, sizeof *m->calls);
        if (!m->calls) return api_oom(e);
    }
    struct api_tool_call *c = &m->calls[m->n_calls++];
    c->id = api_dup_n(json_string_value(id), json_string_length(id));
    c->name = api_dup_n(json_string_value(name), json_string_length(name));
    c->arguments = api_dup_n(json_string_value(args), json_string_length(args));
    return c->id && c->name && c->arguments ? true : api_oom(e);
}

// {"type": "function_call_output", "call_id", "output": string | text parts}: a "tool" message.
static bool item_output(json_t *it, const char *param, struct api_request *r, struct api_error *e) {
    json_t *id = json_object_get(it, "call_id");
    if (!is_str(id)) return api_bad_request(e, "invalid_value", param, "'%s.call_id' must be a string", param);
    if (!known_call(r, json_string_value(id)))
        return api_bad_request(e, "invalid_value", param, "'%s.call_id' is '%.64s', which no earlier function_call "
                               "item has as its call_id", param, json_string_value(id));
    char cp[96];
    snprintf(cp, sizeof cp, "%s.output", param);
    struct api_message *m = push(r, "tool", e);
    if (!m) return false;
    m->tool_call_id = api_dup_n(json_string_value(id), json_string_length(id));
    if (!m->tool_call_id) return api_oom(e);
    return item_content(json_object_get(it, "output"), cp, &m->content, e);
}

// An item's type: "message" when it has a role and no type (EasyInputMessage).
static const char *item_type(json_t *it) {
    json_t *t = json_object_get(it, "type");
    if (!t && json_object_get(it, "role")) return "message";
    return is_str(t) ? json_string_value(t) : NULL;
}


// A reasoning item ({"type": "reasoning", "content": [{"type": "reasoning_text", "text"}], "summary":
// [{"text"}]}): its text (content's, else the summary's) becomes the reasoning of the assistant
// message or call right after it, when there is one (the template keeps or drops it).
static bool attach_reasoning(struct api_request *r, json_t *it, struct api_error *e) {
    struct api_message *last = r->n_msgs ? &r->msgs[r->n_msgs - 1] : NULL;
    if (!last || strcmp(last->role, "assistant") != 0 || last->reasoning) return true;
    struct sbuf b = {0};
    json_t *parts = json_object_get(it, "content");
    if (!json_is_array(parts) || json_array_size(parts) == 0) parts = json_object_get(it, "summary");
    for (size_t j = 0; json_is_array(parts) && j < json_array_size(parts); j++) {
        json_t *tx = json_object_get(json_array_get(parts, j), "text");
        if (json_is_string(tx)) sbuf_append(&b, json_string_value(tx), json_string_length(tx));
    }
    if (b.oom) {
        sbuf_free(&b);
        return api_oom(e);
    }
    last->reasoning = b.p; // NULL: no text
    return true;
}

// "instructions" (a system message first) and "input" (a string: one user message; or items).
static bool parse_input(json_t *o, struct api_request *r, struct api_error *e) {
    json_t *ins = api_field(o, "instructions"), *in = api_field(o, "input");
    if (ins && !json_is_string(ins)) return api_wrong_type(e, "instructions", "a string", ins);
    if (!in) return api_bad_request(e, "missing_field", "input", "'input' is required");
    if (!json_is_string(in) && !json_is_array(in))
        return api_wrong_type(e, "input", "a string or an array of items", in);
    const size_t k = json_is_array(in) ? json_array_size(in) : 1;
    if (json_is_array(in) && k == 0) return api_bad_request(e, "invalid_value", "input", "'input' is empty");
    if (k > API_MAX_MESSAGES)
        return api_bad_request(e, "invalid_value", "input", "'input' holds %zu items (at most %d)", k,
                               API_MAX_MESSAGES);
    r->msgs = calloc(k + 1, sizeof *r->msgs);
    if (!r->msgs) return api_oom(e);
    if (ins) {
        struct api_message *m = push(r, "system", e);
        if (!m || !(m->content = api_dup_n(json_string_value(ins), json_string_length(ins)))) return api_oom(e);
    }
    if (json_is_string(in)) {
        struct api_message *m = push(r, "user", e);
        return m && (m->content = api_dup_n(json_string_value(in), json_string_length(in))) ? true : api_oom(e);
    }
    char param[48];
    const char *prev = NULL; // the previous item's type
    json_t *pending = NULL;  // a reasoning item not attached yet
    for (size_t i = 0; i < k; i++) {
        json_t *it = json_array_get(in, i);
        snprintf(param, sizeof param, "input[%zu]", i);
        if (!json_is_object(it)) return api_wrong_type(e, param, "an object", it);
        const char *t = item_type(it);
        bool ok;
        if (!t) {
            ok = api_bad_request(e, "invalid_type", param, "'%s' must have a string 'type'", param);
        } else if (!strcmp(t, "message")) {
            ok = item_message(it, param, r, e);
        } else if (!strcmp(t, "function_call")) {
            size_t run = 1; // this call and the calls right after it
            for (const char *nt; i + run < k && json_is_object(json_array_get(in, i + run)) &&
                                 (nt = item_type(json_array_get(in, i + run))) && !strcmp(nt, "function_call");)
                run++;
            // after an assistant message (or a call): the same assistant turn
            const struct api_message *last = r->n_msgs ? &r->msgs[r->n_msgs - 1] : NULL;
            const bool join = prev && last && !strcmp(last->role, "assistant") &&
                              (!strcmp(prev, "function_call") || (!strcmp(prev, "message") && !last->calls));
            ok = item_call(it, param, run, join, r, e);
        } else if (!strcmp(t, "function_call_output")) {
            ok = item_output(it, param, r, e);
        } else if (!strcmp(t, "reasoning")) {
            ok = true; // earlier reasoning: the next assistant message's or call's (attach_reasoning)
            pending = it;
        } else if (!strcmp(t, "item_reference")) {
            ok = api_bad_request(e, "unsupported", param, "'%s' is an item_reference; lumen's /v1/responses stores "
                                 "nothing: send the item itself", param);
        } else {
            ok = api_bad_request(e, "invalid_value", param, "'%s.type' is '%.40s'; it must be 'message', "
                                 "'function_call', 'function_call_output' or 'reasoning'", param, t);
        }
        if (!ok) return false;
        if (pending && pending != it && !attach_reasoning(r, pending, e)) return false;
        if (pending != it) pending = NULL;
        prev = t;
    }
    return true;
}

// ================================================================ tools

// "tools": [{"type": "function", "name", "description"?, "parameters"?, "strict"?}]; the
// prompt takes them in chat completions' form. Hosted tools (web_search, file_search, ...) 400.
static bool read_tool(json_t *tool, const char *param, struct api_tool_fields *f, struct api_tool *out,
                      struct api_error *e) {
    json_t *type = json_is_object(tool) ? json_object_get(tool, "type") : NULL;
    if (!json_is_object(tool) || !is_str(type))
        return api_bad_request(e, "invalid_type", param, "'%s' must be an object with a string 'type'", param);
    f->name = json_object_get(tool, "name");
    f->desc = api_field(tool, "description");
    f->params = api_field(tool, "parameters");
    if (strcmp(json_string_value(type), "function") != 0)
        return api_bad_request(e, "unsupported", param, "'%s.type' is '%.40s'; lumen runs function tools only (no "
                               "hosted tools)", param, json_string_value(type));
    if (!json_is_string(f->name) || !api_valid_name(json_string_value(f->name), json_string_length(f->name)))
        return api_bad_request(e, "invalid_value", param, "'%s.name' must be a string of 1 to 64 letters, digits, "
                               "'_' or '-'", param);
    if (f->desc && !json_is_string(f->desc)) return api_wrong_type(e, "tools[].description", "a string", f->desc);
    if (f->params && !json_is_object(f->params))
        return api_wrong_type(e, "tools[].parameters", "a JSON Schema object", f->params);
    return api_get_bool(tool, "strict", &out->strict, e);
}

// "tool_choice": "none" | "auto" | "required" | {"type": "function", "name"} (named: exactly
// one call); "parallel_tool_calls": bool (default true).
static bool parse_tool_choice(json_t *o, struct api_request *r, struct api_error *e) {
    r->parallel_tool_calls = true;
    if (!api_get_bool(o, "parallel_tool_calls", &r->parallel_tool_calls, e)) return false;
    r->tool_choice = r->n_tools ? API_TOOLS_AUTO : API_TOOLS_NONE;
    json_t *c = api_field(o, "tool_choice");
    if (!c) return true;
    if (is_str(c)) {
        const char *v = json_string_value(c);
        if (!strcmp(v, "none")) r->tool_choice = API_TOOLS_NONE;
        else if (!strcmp(v, "required")) r->tool_choice = API_TOOLS_REQUIRED;
        else if (strcmp(v, "auto") != 0)
            return api_bad_request(e, "invalid_value", "tool_choice", "'tool_choice' is '%.40s'; it must be 'none', "
                                   "'auto', 'required' or {\"type\": \"function\", \"name\": ...}", v);
        if (r->tool_choice == API_TOOLS_REQUIRED && !r->n_tools)
            return api_bad_request(e, "invalid_value", "tool_choice", "'tool_choice' is 'required' but 'tools' is "
                                   "empty");
        return true;
    }
    json_t *type = json_is_object(c) ? json_object_get(c, "type") : NULL;
    json_t *name = type ? json_object_get(c, "name") : NULL;
    if (is_str(type) && strcmp(json_string_value(type), "function") != 0)
        return api_bad_request(e, "unsupported", "tool_choice", "'tool_choice.type' is '%.40s'; lumen takes 'none', "
                               "'auto', 'required' or {\"type\": \"function\", \"name\": ...}",
                               json_string_value(type));
    if (!is_str(type) || !json_is_string(name))
        return api_bad_request(e, "invalid_value", "tool_choice", "'tool_choice' must be 'none', 'auto', 'required' or "
                               "{\"type\": \"function\", \"name\": ...}");
    return api_tool_choice_named(r, json_string_value(name), "function", e);
}

// ================================================================ text.format, reasoning

// "text": {"format": {"type": "text" | "json_object" | "json_schema" (+ "name", "schema",
// "strict")}, "verbosity"?}: the chat route's structured output.
static bool parse_text(json_t *o, struct api_request *r, struct api_error *e) {
    json_t *t = api_field(o, "text");
    if (!t) return true;
    if (!json_is_object(t)) return api_wrong_type(e, "text", "an object", t);
    json_t *f = api_field(t, "format");
    if (!f) return true;
    json_t *ft = json_is_object(f) ? json_object_get(f, "type") : NULL;
    if (!is_str(ft)) return api_wrong_type(e, "text.format", "an object with a string 'type'", f);
    const char *ts = json_string_value(ft);
    if (!strcmp(ts, "text")) return true;
    if (!strcmp(ts, "json_object")) {
        r->format = API_FORMAT_JSON_OBJECT;
    } else if (!strcmp(ts, "json_schema")) {
        json_t *nm = json_object_get(f, "name"), *sc = json_object_get(f, "schema");
        if (nm && !json_is_string(nm)) return api_wrong_type(e, "text.format.name", "a string", nm);
        bool strict = false;
        if (!api_get_bool(f, "strict", &strict, e)) return false; // always enforced by the grammar
        if (!json_is_object(sc))
            return sc ? api_wrong_type(e, "text.format.schema", "a JSON Schema object", sc)
                      : api_bad_request(e, "missing_field", "text.format.schema", "'text.format' of type 'json_schema' "
                                        "needs 'schema'");
        r->format = API_FORMAT_JSON_SCHEMA;
        if (!(r->schema = api_dump(sc))) return api_oom(e);
        r->schema_len = strlen(r->schema);
    } else {
        return api_bad_request(e, "invalid_value", "text.format", "'text.format.type' is '%.40s'; it must be 'text', "
                               "'json_object' or 'json_schema'", ts);
    }
    if (r->tool_choice != API_TOOLS_NONE)
        return api_bad_request(e, "unsupported", "text.format", "'text.format' %s together with 'tools' is not "
                               "supported (set tool_choice 'none' or leave out one of them)", ts);
    return true;
}

// "reasoning": {"effort"?, "summary"?}: the effort as chat's reasoning_effort (harmony's
// "Reasoning: ..."; none / minimal: no thinking); a thinking model's reasoning item has no
// summary (docs/server.md, "Reasoning").
static bool parse_reasoning(json_t *o, struct api_request *r, struct api_error *e) {
    json_t *rs = api_field(o, "reasoning");
    if (!rs) return true;
    if (!json_is_object(rs)) return api_wrong_type(e, "reasoning", "an object", rs);
    static const char *const efforts[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
    json_t *ef = api_field(rs, "effort");
    bool known = !ef;
    for (size_t i = 0; ef && json_is_string(ef) && i < sizeof efforts / sizeof *efforts; i++)
        known = known || !strcmp(json_string_value(ef), efforts[i]);
    if (!known)
        return api_bad_request(e, "invalid_value", "reasoning.effort", "'reasoning.effort' must be 'none', 'minimal', "
                               "'low', 'medium', 'high' or 'xhigh'");
    if (ef && json_is_string(ef)) snprintf(r->reasoning_effort, sizeof r->reasoning_effort, "%s", json_string_value(ef));
    json_t *su = api_field(rs, "summary");
    if (su && !json_is_string(su)) return api_wrong_type(e, "reasoning.summary", "a string", su);
    return true;
}

// ================================================================ other fields

// Sampling, max_output_tokens, stream, metadata; what needs server-side state refused by name.
static bool parse_rest(json_t *o, struct api_request *r, struct api_error *e) {
    static const char *const stateful[] = {"previous_response_id", "conversation", "prompt"};
    for (size_t i = 0; i < sizeof stateful / sizeof *stateful; i++)
        if (api_field(o, stateful[i]))
            return api_bad_request(e, "unsupported", stateful[i], "'%s' needs stored state; lumen's /v1/responses is "
                                   "stateless: send the whole conversation in 'input' (the prefix cache makes its "
                                   "repeated start cheap)", stateful[i]);
    bool bg = false, store = false;
    if (!api_get_bool(o, "background", &bg, e) || !api_get_bool(o, "store", &store, e)) return false;
    if (bg) return api_bad_request(e, "unsupported", "background", "'background': true is not supported (lumen "
                                   "stores no responses); stream instead");
    long long mt = 0, tl = 0;
    if (!api_get_int(o, "max_output_tokens", 1, 1 << 24, &mt, &r->max_tokens_given, e)) return false;
    r->max_tokens = (int32_t)mt;
    if (!api_get_int(o, "top_logprobs", 0, 0, &tl, NULL, e)) return false; // logprobs: not in this route yet
    if (!api_parse_sampling_basic(o, 2.0, false, r, e)) return false;
    if (!api_get_bool(o, "stream", &r->stream, e) || !api_get_bool(o, "ignore_eos", &r->ignore_eos, e)) return false;
    json_t *md = api_field(o, "metadata");
    if (md && !json_is_object(md)) return api_wrong_type(e, "metadata", "an object of strings", md);
    if (md && json_object_size(md) > 16)
        return api_bad_request(e, "invalid_value", "metadata", "'metadata' has %zu keys (at most 16)",
                               json_object_size(md));
    const char *key;
    json_t *val;
    json_object_foreach(md, key, val) {
        if (!json_is_string(val) || strlen(key) > 64 || json_string_length(val) > 512)
            return api_bad_request(e, "invalid_value", "metadata", "'metadata' takes at most 16 string values of up to "
                                   "512 characters under keys of up to 64");
    }
    if (md && !(r->metadata = api_dump(md))) return api_oom(e);
    json_t *inc = api_field(o, "include");
    if (inc && !json_is_array(inc)) return api_wrong_type(e, "include", "an array of strings", inc);
    for (size_t i = 0; inc && i < json_array_size(inc); i++) {
        json_t *s = json_array_get(inc, i);
        if (!json_is_string(s)) return api_wrong_type(e, "include[]", "a string", s);
        if (strstr(json_string_value(s), "logprobs"))
            return api_bad_request(e, "unsupported", "include", "'include' asks for '%.60s'; this route has no "
                                   "logprobs yet (use /v1/chat/completions)", json_string_value(s));
    }
    return true;
}

// ================================================================ entry point

void api_responses_param(struct api_error *e) {
    int tool = -1, end = 0;
    if (sscanf(e->param, "tools[%d].function.parameters%n", &tool, &end) == 1 && end > 0 && !e->param[end])
        snprintf(e->param, sizeof e->param, "tools[%d].parameters", tool);
}

bool api_parse_responses_body(const char *body, size_t len, const struct api_limits *lim, struct api_request *r,
                              struct api_error *e) {
    memset(r, 0, sizeof *r);
    r->kind = API_CHAT;
    r->dialect = API_DIALECT_RESPONSES;
    r->sampling = lm_sampler_params_default();
    json_t *o = api_load_object(body, len, lim, e);
    if (!o) return false;
    bool ok = true;
    json_t *model = api_field(o, "model");
    if (model && !json_is_string(model)) ok = api_wrong_type(e, "model", "a string", model);
    if (ok) ok = parse_input(o, r, e) && api_parse_tool_list(o, read_tool, r, e) && parse_tool_choice(o, r, e) && parse_text(o, r, e);
    if (ok && r->tool_choice == API_TOOLS_NONE && r->tools_json) { // no tools in the prompt
        free(r->tools_json);
        r->tools_json = NULL;
        r->tools_len = 0;
    }
    if (ok) ok = parse_reasoning(o, r, e) && parse_rest(o, r, e);
    if (ok) ok = api_parse_reasoning(o, r, e); // lumen's (chat's): reasoning_format, thinking_budget_tokens
    json_decref(o);
    if (!ok) api_request_free(r);
    return ok;
}
