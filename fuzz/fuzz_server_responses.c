// libFuzzer target for lumen serve's OpenAI Responses parsing (src/server/api_responses.c): the
// input is the JSON body of POST /v1/responses. A parsed request must satisfy every bound the
// server relies on and go through every chat template; an error must come out as valid
// OpenAI-shaped JSON ({"error": {"message", "type", "param", "code"}}).
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct api_limits k_lim = {.max_values = 4096, .max_depth = API_MAX_DEPTH};

static void check_error(struct api_error *e) {
    if (e->status < 400 || e->status > 599 || !e->message[0]) __builtin_trap();
    api_responses_param(e);
    char *s = api_error_json(e);
    if (!s) return; // out of memory
    json_t *j = json_loads(s, 0, NULL);
    json_t *err = json_object_get(j, "error");
    if (!j || json_object_size(j) != 1 || !json_is_string(json_object_get(err, "message")) ||
        !json_is_string(json_object_get(err, "type")))
        __builtin_trap();
    json_decref(j);
    free(s);
}

static void apply_templates(const struct api_request *r) {
    struct lm_chat_msg *m = calloc(r->n_msgs, sizeof *m);
    struct lm_chat_msg_tools *parts = calloc(r->n_msgs, sizeof *parts);
    size_t n_calls = 0;
    for (size_t i = 0; i < r->n_msgs; i++) n_calls += r->msgs[i].n_calls;
    struct lm_chat_tool_call *calls = calloc(n_calls + 1, sizeof *calls);
    if (!m || !parts || !calls) goto out;
    for (size_t i = 0, c = 0; i < r->n_msgs; i++) {
        const struct api_message *q = &r->msgs[i];
        if (!q->role || !q->content) __builtin_trap();
        if (strcmp(q->role, "system") && strcmp(q->role, "user") && strcmp(q->role, "assistant") &&
            strcmp(q->role, "tool"))
            __builtin_trap();
        if (!strcmp(q->role, "tool") != (q->tool_call_id != NULL)) __builtin_trap();
        if (q->n_calls && strcmp(q->role, "assistant")) __builtin_trap();
        m[i] = (struct lm_chat_msg){.role = q->role, .content = q->content};
        parts[i] = (struct lm_chat_msg_tools){calls + c, q->n_calls, q->tool_call_id};
        for (size_t j = 0; j < q->n_calls; j++, c++) {
            if (!q->calls[j].id || !q->calls[j].name || !q->calls[j].arguments) __builtin_trap();
            calls[c] = (struct lm_chat_tool_call){q->calls[j].id, q->calls[j].name, q->calls[j].arguments};
        }
    }
    for (int t = LM_CHAT_TEMPLATE_GEMMA; t <= LM_CHAT_TEMPLATE_CHATML; t++) {
        char *out = NULL;
        size_t n = 0;
        if (lm_chat_apply_tools((enum lm_chat_template)t, m, parts, r->n_msgs, r->tools_json, r->tools_len, true, &out,
                                &n) == LM_OK &&
            (!out || strlen(out) != n))
            __builtin_trap();
        free(out);
    }
out:
    free(m);
    free(parts);
    free(calls);
}

static void check_request(const struct api_request *r) {
    if (r->kind != API_CHAT || r->dialect != API_DIALECT_RESPONSES) __builtin_trap();
    if (r->max_tokens_given && (r->max_tokens < 1 || r->max_tokens > (1 << 24))) __builtin_trap();
    const struct lm_sampler_params *p = &r->sampling;
    if (!(p->temperature >= 0 && p->temperature <= 2) || !(p->top_p >= 0 && p->top_p <= 1)) __builtin_trap();
    if (r->logprobs || r->n_bias || r->n_stop || r->format == API_FORMAT_GRAMMAR) __builtin_trap(); // not its fields
    if (r->format == API_FORMAT_JSON_SCHEMA && (!r->schema || strlen(r->schema) != r->schema_len)) __builtin_trap();
    if (r->format != API_FORMAT_TEXT && r->tool_choice != API_TOOLS_NONE) __builtin_trap();
    if (r->n_msgs == 0 || !r->msgs || r->n_msgs > API_MAX_MESSAGES + 1) __builtin_trap();
    if (r->n_tools < 0 || r->n_tools > API_MAX_TOOLS || (r->n_tools && !r->tools)) __builtin_trap();
    for (int32_t i = 0; i < r->n_tools; i++)
        if (!r->tools[i].name || !r->tools[i].parameters) __builtin_trap();
    if (r->tool_choice == API_TOOLS_NAMED &&
        (r->tool_named < 0 || r->tool_named >= r->n_tools || r->parallel_tool_calls))
        __builtin_trap();
    if ((r->tool_choice == API_TOOLS_REQUIRED || r->tool_choice == API_TOOLS_NAMED) && !r->n_tools) __builtin_trap();
    if ((r->tools_json != NULL) != (r->tool_choice != API_TOOLS_NONE && r->n_tools > 0)) __builtin_trap();
    if (r->metadata) { // echoed in the answer: an object
        json_t *md = json_loads(r->metadata, 0, NULL);
        if (md && !json_is_object(md)) __builtin_trap();
        json_decref(md);
    }
    apply_templates(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct api_request r;
    struct api_error e;
    if (api_parse_responses_body((const char *)data, size, &k_lim, &r, &e)) {
        check_request(&r);
        api_request_free(&r);
    } else {
        check_error(&e);
    }
    return 0;
}
