// Request parsing for Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens):
// the body becomes the same struct api_request as a chat completion (system, text / tool_use /
// tool_result blocks as messages, tools, tool_choice, sampling), so one generation path serves
// both; and Anthropic's error shape. Pure functions of the body (fuzz/fuzz_server_messages.c).
#include "api.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "strbuf.h"

// ================================================================ errors

char *api_error_json_anthropic(const struct api_error *e) {
    const char *type = "invalid_request_error"; // 400, 405, 415, 422
    switch (e->status) {
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503: type = "overloaded_error"; break; // loading, draining, busy: lumen's 503 (a balancer retries it)
    case 529: type = "overloaded_error"; break;
    default:
        if (e->status >= 500) type = "api_error";
    }
    // Anthropic's shape has no "param": the message names the field (a tool's schema by
    // Anthropic's name for it) unless it does already
    char msg[sizeof e->message + 96], param[sizeof e->param + 16];
    int tool = -1, end = 0;
    if (sscanf(e->param, "tools[%d].function.parameters%n", &tool, &end) == 1 && end > 0 && !e->param[end])
        snprintf(param, sizeof param, "tools[%d].input_schema", tool);
    else
        snprintf(param, sizeof param, "%s", e->param);
    if (param[0] && !strstr(e->message, param) && !strstr(e->message, e->param))
        snprintf(msg, sizeof msg, "%s: %s", param, e->message);
    else
        snprintf(msg, sizeof msg, "%s", e->message);
    json_t *err = json_object();
    json_object_set_new(err, "type", json_string(type));
    json_object_set_new(err, "message", json_string(msg));
    json_t *root = json_object();
    json_object_set_new(root, "type", json_string("error"));
    json_object_set_new(root, "error", err);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

// ================================================================ content blocks

// A block type the route does not take: images and documents named as such (lumen serves
// text models), anything else with the types allowed there.
static bool bad_block(struct api_error *e, const char *param, const char *type, const char *allowed) {
    if (!strcmp(type, "image") || !strcmp(type, "document"))
        return api_bad_request(e, "unsupported", param, "'%s' is an '%s' block; lumen serves text models (no "
                               "images or documents)", param, type);
    return api_bad_request(e, "invalid_value", param, "'%s' has type '%.40s'; it must be %s", param, type, allowed);
}

// A block's "type" (NULL with e filled when the block is not an object with a string type).
static const char *block_type(json_t *b, const char *param, struct api_error *e) {
    json_t *t = json_is_object(b) ? json_object_get(b, "type") : NULL;
    if (!json_is_string(t) || strlen(json_string_value(t)) != json_string_length(t)) {
        api_bad_request(e, "invalid_type", param, "'%s' must be an object with a string 'type'", param);
        return NULL;
    }
    return json_string_value(t);
}

// A text block's text appended to *b (joined to earlier text with "\n").
static bool add_text(json_t *blk, const char *param, struct sbuf *b, bool *any, struct api_error *e) {
    json_t *t = json_object_get(blk, "text");
    if (!json_is_string(t)) return api_bad_request(e, "invalid_type", param, "'%s.text' must be a string", param);
    if (*any) sbuf_append(b, "\n", 1);
    sbuf_append(b, json_string_value(t), json_string_length(t));
    *any = true;
    return b->oom ? api_oom(e) : true;
}

static bool take_text(struct sbuf *b, char **out, struct api_error *e) {
    *out = api_dup_n(b->p ? b->p : "", b->n);
    sbuf_free(b);
    return *out ? true : api_oom(e);
}

// "system" and a tool_result's content: a string, or an array of text blocks.
static bool text_content(json_t *c, const char *param, char **out, struct api_error *e) {
    if (!c || json_is_null(c)) return (*out = api_dup_n("", 0)) ? true : api_oom(e);
    if (json_is_string(c))
        return (*out = api_dup_n(json_string_value(c), json_string_length(c))) ? true : api_oom(e);
    if (!json_is_array(c)) return api_wrong_type(e, param, "a string or an array of text blocks", c);
    struct sbuf b = {0};
    bool any = false;
    char bp[128];
    for (size_t j = 0; j < json_array_size(c); j++) {
        json_t *blk = json_array_get(c, j);
        snprintf(bp, sizeof bp, "%s[%zu]", param, j);
        const char *type = block_type(blk, bp, e);
        bool ok = type != NULL;
        if (ok && strcmp(type, "text") != 0) ok = bad_block(e, bp, type, "'text'");
        if (ok) ok = add_text(blk, bp, &b, &any, e);
        if (!ok) {
            sbuf_free(&b);
            return false;
        }
    }
    return take_text(&b, out, e);
}

// ================================================================ messages

// The next message of r->msgs (room was counted before), its role set.
static struct api_message *push(struct api_request *r, const char *role, struct api_error *e) {
    struct api_message *m = &r->msgs[r->n_msgs++];
    m->role = api_dup_n(role, strlen(role));
    if (!m->role) api_oom(e);
    return m->role ? m : NULL;
}

// Some earlier assistant message holds a tool_use with this id.
static bool known_call(const struct api_request *r, const char *id) {
    for (size_t i = 0; i < r->n_msgs; i++)
        for (size_t j = 0; j < r->msgs[i].n_calls; j++)
            if (r->msgs[i].calls[j].id && !strcmp(r->msgs[i].calls[j].id, id)) return true;
    return false;
}

// {"type": "tool_use", "id", "name", "input": {...}} into m's calls (room for every block).
static bool add_tool_use(json_t *blk, const char *param, struct api_message *m, struct api_error *e) {
    json_t *id = json_object_get(blk, "id"), *name = json_object_get(blk, "name");
    json_t *input = json_object_get(blk, "input");
    if (!json_is_string(id) || json_string_length(id) == 0 || strlen(json_string_value(id)) != json_string_length(id))
        return api_bad_request(e, "invalid_value", param, "'%s.id' must be a non-empty string", param);
    if (!json_is_string(name) || !api_valid_name(json_string_value(name), json_string_length(name)))
        return api_bad_request(e, "invalid_value", param, "'%s.name' must be a string of 1 to 64 letters, digits, "
                               "'_' or '-'", param);
    if (!json_is_object(input)) return api_wrong_type(e, "tool_use.input", "an object", input ? input : json_null());
    struct api_tool_call *c = &m->calls[m->n_calls++];
    c->id = api_dup_n(json_string_value(id), json_string_length(id));
    c->name = api_dup_n(json_string_value(name), json_string_length(name));
    c->arguments = api_dump(input);
    return c->id && c->name && c->arguments ? true : api_oom(e);
}

// {"type": "tool_result", "tool_use_id", "content"?, "is_error"?}: a "tool" message answering
// an earlier tool_use.
static bool add_tool_result(json_t *blk, const char *param, struct api_request *r, struct api_error *e) {
    json_t *id = json_object_get(blk, "tool_use_id");
    if (!json_is_string(id) || strlen(json_string_value(id)) != json_string_length(id))
        return api_bad_request(e, "invalid_value", param, "'%s.tool_use_id' must be a string", param);
    if (!known_call(r, json_string_value(id)))
        return api_bad_request(e, "invalid_value", param, "'%s.tool_use_id' is '%.64s', which no earlier tool_use "
                               "block has as its id", param, json_string_value(id));
    bool is_error = false;
    if (!api_get_bool(blk, "is_error", &is_error, e)) return false; // accepted: the content says what failed
    char cp[128];
    snprintf(cp, sizeof cp, "%s.content", param);
    struct api_message *m = push(r, "tool", e);
    if (!m) return false;
    m->tool_call_id = api_dup_n(json_string_value(id), json_string_length(id));
    if (!m->tool_call_id) return api_oom(e);
    return text_content(api_field(blk, "content"), cp, &m->content, e);
}

// A thinking block's text ({"type": "thinking", "thinking", "signature"?}) joined to the message's
// reasoning.
static bool add_thinking(json_t *blk, const char *bp, struct api_message *am, struct api_error *e) {
    json_t *t = api_field(blk, "thinking");
    char param[128];
    snprintf(param, sizeof param, "%s.thinking", bp);
    if (!json_is_string(t)) return api_wrong_type(e, param, "a string", t);
    struct sbuf b = {0};
    if (am->reasoning) sbuf_puts(&b, am->reasoning);
    sbuf_append(&b, json_string_value(t), json_string_length(t));
    if (b.oom) {
        sbuf_free(&b);
        return api_oom(e);
    }
    free(am->reasoning);
    am->reasoning = b.p ? b.p : api_dup_n("", 0);
    return am->reasoning != NULL || api_oom(e);
}

// One message's blocks: user text and tool_result blocks (each result its own "tool"
// message, the text after them as one user message); assistant text and tool_use blocks
// (thinking blocks: the message's reasoning, joined; the template keeps or drops it).
static bool parse_blocks(json_t *c, size_t i, bool assistant, struct api_request *r, struct api_error *e) {
    struct api_message *am = NULL;
    if (assistant) {
        if (!(am = push(r, "assistant", e))) return false;
        am->calls = calloc(json_array_size(c) ? json_array_size(c) : 1, sizeof *am->calls);
        if (!am->calls) return api_oom(e);
    }
    struct sbuf text = {0};
    bool any = false, results = false, ok = true;
    char bp[96];
    for (size_t j = 0; ok && j < json_array_size(c); j++) {
        json_t *blk = json_array_get(c, j);
        snprintf(bp, sizeof bp, "messages[%zu].content[%zu]", i, j);
        const char *type = block_type(blk, bp, e);
        if (!type) ok = false;
        else if (!strcmp(type, "text")) ok = add_text(blk, bp, &text, &any, e);
        else if (assistant && !strcmp(type, "tool_use")) ok = add_tool_use(blk, bp, am, e);
        else if (assistant && !strcmp(type, "thinking")) ok = add_thinking(blk, bp, am, e);
        else if (assistant && !strcmp(type, "redacted_thinking")) continue; // nothing lumen can read
        else if (!assistant && !strcmp(type, "tool_result")) ok = results = add_tool_result(blk, bp, r, e);
        else ok = bad_block(e, bp, type, assistant ? "'text', 'tool_use', 'thinking' or 'redacted_thinking' in "
                            "an assistant message" : "'text' or 'tool_result' in a user message");
    }
    if (!ok) {
        sbuf_free(&text);
        return false;
    }
    if (assistant) return take_text(&text, &am->content, e);
    if (results && !any) return true; // only results: no user turn of its own
    struct api_message *um = push(r, "user", e);
    if (!um) {
        sbuf_free(&text);
        return false;
    }
    return take_text(&text, &um->content, e);
}

// "system" (a string or text blocks) and "messages" ([{"role": "user" | "assistant",
// "content": string | blocks}]) as chat messages.
static bool parse_msgs(json_t *o, struct api_request *r, struct api_error *e) {
    json_t *m = api_field(o, "messages");
    if (!m) return api_bad_request(e, "missing_field", "messages", "'messages' is required");
    if (!json_is_array(m)) return api_wrong_type(e, "messages", "an array of messages", m);
    const size_t k = json_array_size(m);
    if (k == 0) return api_bad_request(e, "invalid_value", "messages", "'messages' is empty");
    size_t cap = 1; // the system message; then each message, and each of its blocks may be a tool result
    for (size_t i = 0; i < k && cap <= API_MAX_MESSAGES + 1; i++) {
        json_t *c = json_is_object(json_array_get(m, i)) ? json_object_get(json_array_get(m, i), "content") : NULL;
        cap += 1 + (json_is_array(c) ? json_array_size(c) : 0);
    }
    if (cap > API_MAX_MESSAGES + 1)
        return api_bad_request(e, "invalid_value", "messages", "'messages' holds more than %d messages and blocks",
                               API_MAX_MESSAGES);
    r->msgs = calloc(cap, sizeof *r->msgs);
    if (!r->msgs) return api_oom(e);
    json_t *sys = api_field(o, "system");
    if (sys) {
        struct api_message *sm = push(r, "system", e);
        if (!sm || !text_content(sys, "system", &sm->content, e)) return false;
    }
    char param[48];
    for (size_t i = 0; i < k; i++) {
        json_t *msg = json_array_get(m, i);
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(msg)) return api_wrong_type(e, param, "an object", msg);
        json_t *role = json_object_get(msg, "role");
        snprintf(param, sizeof param, "messages[%zu].role", i);
        const char *rs = json_is_string(role) ? json_string_value(role) : "";
        const bool assistant = !strcmp(rs, "assistant");
        if (!assistant && strcmp(rs, "user") != 0)
            return api_bad_request(e, "invalid_value", param, "'%s' must be 'user' or 'assistant' (the system "
                                   "prompt is the top-level 'system')", param);
        json_t *c = json_object_get(msg, "content");
        snprintf(param, sizeof param, "messages[%zu].content", i);
        if (json_is_string(c)) {
            struct api_message *mm = push(r, rs, e);
            if (!mm) return false;
            mm->content = api_dup_n(json_string_value(c), json_string_length(c));
            if (!mm->content) return api_oom(e);
        } else if (json_is_array(c)) {
            if (!parse_blocks(c, i, assistant, r, e)) return false;
        } else {
            return c ? api_wrong_type(e, param, "a string or an array of content blocks", c)
                     : api_bad_request(e, "missing_field", param, "'%s' is required", param);
        }
    }
    return true;
}

// ================================================================ tools

// "tools": [{"name", "description"?, "input_schema"}] (client tools; type absent or
// "custom"), kept as OpenAI's function tools: the template and the grammar take those.
static bool read_tool(json_t *tool, const char *param, struct api_tool_fields *f, struct api_tool *out,
                      struct api_error *e) {
    (void)out;
    if (!json_is_object(tool)) return api_wrong_type(e, param, "an object", tool);
    json_t *type = api_field(tool, "type");
    f->name = json_object_get(tool, "name");
    f->desc = api_field(tool, "description");
    f->params = json_object_get(tool, "input_schema");
    if (type && (!json_is_string(type) || strcmp(json_string_value(type), "custom") != 0))
        return api_bad_request(e, "unsupported", param, "'%s.type' is %s%.40s%s; lumen runs client tools only "
                               "(type 'custom' or none)", param, json_is_string(type) ? "'" : "",
                               json_is_string(type) ? json_string_value(type) : api_json_kind(type),
                               json_is_string(type) ? "'" : "");
    if (!json_is_string(f->name) || !api_valid_name(json_string_value(f->name), json_string_length(f->name)))
        return api_bad_request(e, "invalid_value", param, "'%s.name' must be a string of 1 to 64 letters, digits, "
                               "'_' or '-'", param);
    if (f->desc && !json_is_string(f->desc)) return api_wrong_type(e, "tools[].description", "a string", f->desc);
    if (!json_is_object(f->params))
        return f->params ? api_wrong_type(e, "tools[].input_schema", "a JSON Schema object", f->params)
                         : api_bad_request(e, "missing_field", param, "'%s.input_schema' is required", param);
    return true;
}

// "tool_choice": {"type": "auto" | "any" | "tool" (+ "name") | "none",
// "disable_parallel_tool_use"?}. "tool" is exactly one call, "any" at least one;
// disable_parallel_tool_use: at most one.
static bool parse_tool_choice(json_t *o, struct api_request *r, struct api_error *e) {
    r->parallel_tool_calls = true;
    r->tool_choice = r->n_tools ? API_TOOLS_AUTO : API_TOOLS_NONE;
    json_t *c = api_field(o, "tool_choice");
    if (!c) return true;
    json_t *type = json_is_object(c) ? json_object_get(c, "type") : NULL;
    if (!json_is_string(type))
        return api_bad_request(e, "invalid_value", "tool_choice", "'tool_choice' must be {\"type\": \"auto\" | "
                               "\"any\" | \"tool\" | \"none\"}");
    bool one = false;
    if (!api_get_bool(c, "disable_parallel_tool_use", &one, e)) return false;
    r->parallel_tool_calls = !one;
    const char *ts = json_string_value(type);
    if (!strcmp(ts, "none")) {
        r->tool_choice = API_TOOLS_NONE;
        return true;
    }
    if (!strcmp(ts, "auto")) return true;
    if (strcmp(ts, "any") != 0 && strcmp(ts, "tool") != 0)
        return api_bad_request(e, "invalid_value", "tool_choice", "'tool_choice.type' is '%.40s'; it must be "
                               "'auto', 'any', 'tool' or 'none'", ts);
    if (!r->n_tools)
        return api_bad_request(e, "invalid_value", "tool_choice", "'tool_choice' is '%s' but 'tools' is empty", ts);
    if (!strcmp(ts, "any")) {
        r->tool_choice = API_TOOLS_REQUIRED;
        return true;
    }
    json_t *name = json_object_get(c, "name");
    if (!json_is_string(name))
        return api_bad_request(e, "invalid_value", "tool_choice", "'tool_choice' of type 'tool' needs 'name'");
    return api_tool_choice_named(r, json_string_value(name), "tool", e);
}

// ================================================================ other fields

static bool parse_stop_sequences(json_t *o, struct api_request *r, struct api_error *e) {
    json_t *s = api_field(o, "stop_sequences");
    if (!s) return true;
    if (!json_is_array(s)) return api_wrong_type(e, "stop_sequences", "an array of strings", s);
    if (json_array_size(s) > API_MAX_STOP)
        return api_bad_request(e, "invalid_value", "stop_sequences", "'stop_sequences' has %zu strings (at most %d)",
                               json_array_size(s), API_MAX_STOP);
    for (size_t i = 0; i < json_array_size(s); i++) {
        json_t *v = json_array_get(s, i);
        if (!json_is_string(v))
            return api_bad_request(e, "invalid_type", "stop_sequences", "'stop_sequences'[%zu] must be a string (got "
                                   "%s)", i, api_json_kind(v));
        const size_t n = json_string_length(v);
        if (n == 0) continue; // would match everywhere: ignored
        if (n > API_MAX_STOP_LEN)
            return api_bad_request(e, "invalid_value", "stop_sequences", "a stop sequence has %zu bytes (at most %d)",
                                   n, API_MAX_STOP_LEN);
        r->stop[r->n_stop] = api_dup_n(json_string_value(v), n);
        if (!r->stop[r->n_stop]) return api_oom(e);
        r->stop_len[r->n_stop++] = n;
    }
    return true;
}

// temperature, top_p (Anthropic's [0, 1]), top_k, and lumen's seed; metadata; thinking.
static bool parse_sampling(json_t *o, struct api_request *r, struct api_error *e) {
    if (!api_parse_sampling_basic(o, 1.0, true, r, e)) return false;
    json_t *md = api_field(o, "metadata");
    if (md && !json_is_object(md)) return api_wrong_type(e, "metadata", "an object", md);
    json_t *uid = md ? api_field(md, "user_id") : NULL;
    if (uid && !json_is_string(uid)) return api_wrong_type(e, "metadata.user_id", "a string", uid);
    json_t *th = api_field(o, "thinking");
    if (!th) return true;
    json_t *tt = json_is_object(th) ? json_object_get(th, "type") : NULL;
    if (!json_is_string(tt) || (strcmp(json_string_value(tt), "enabled") && strcmp(json_string_value(tt), "disabled")))
        return api_bad_request(e, "invalid_value", "thinking", "'thinking' must be {\"type\": \"enabled\", "
                               "\"budget_tokens\": N} or {\"type\": \"disabled\"}");
    if (strcmp(json_string_value(tt), "enabled") != 0) return true;
    long long budget = 0;
    bool given = false;
    if (!api_get_int(th, "budget_tokens", 1024, 1 << 24, &budget, &given, e)) return false;
    if (!given)
        return api_bad_request(e, "missing_field", "thinking.budget_tokens", "'thinking' of type 'enabled' needs "
                               "'budget_tokens' (at least 1024)");
    r->thinking = true;
    r->thinking_budget = (int32_t)budget;
    return true;
}

// ================================================================ entry point

bool api_parse_messages_body(const char *body, size_t len, bool count_only, const struct api_limits *lim,
                             struct api_request *r, struct api_error *e) {
    memset(r, 0, sizeof *r);
    r->kind = API_CHAT;
    r->dialect = API_DIALECT_ANTHROPIC;
    r->sampling = lm_sampler_params_default();
    json_t *o = api_load_object(body, len, lim, e);
    if (!o) return false;
    bool ok = true;
    json_t *model = api_field(o, "model");
    if (model && !json_is_string(model)) ok = api_wrong_type(e, "model", "a string", model);
    if (ok) ok = parse_msgs(o, r, e) && api_parse_tool_list(o, read_tool, r, e) && parse_tool_choice(o, r, e);
    if (ok && r->tool_choice == API_TOOLS_NONE && r->tools_json) { // no tools in the prompt
        free(r->tools_json);
        r->tools_json = NULL;
        r->tools_len = 0;
    }
    long long mt = 0;
    if (ok) ok = api_get_int(o, "max_tokens", 1, 1 << 24, &mt, &r->max_tokens_given, e);
    if (ok && !r->max_tokens_given && !count_only)
        ok = api_bad_request(e, "missing_field", "max_tokens", "'max_tokens' is required");
    r->max_tokens = (int32_t)mt;
    if (ok) ok = parse_stop_sequences(o, r, e) && parse_sampling(o, r, e);
    if (ok) ok = api_parse_reasoning(o, r, e); // lumen's (chat's): reasoning_format, thinking_budget_tokens
    if (ok) ok = api_get_bool(o, "stream", &r->stream, e);
    if (ok) ok = api_get_bool(o, "ignore_eos", &r->ignore_eos, e); // lumen's (and llama-server's), as on chat
    if (ok && r->thinking && !r->think_budget_given && r->max_tokens_given && r->thinking_budget >= r->max_tokens)
        ok = api_bad_request(e, "invalid_value", "thinking.budget_tokens", "'thinking.budget_tokens' (%d) must be "
                             "below 'max_tokens' (%d)", r->thinking_budget, r->max_tokens);
    json_decref(o);
    if (!ok) api_request_free(r);
    return ok;
}
