// What fuzz_server_messages.c and fuzz_server_responses.c both check of a parsed request
// (bounds the server relies on, every chat template applied) and of an error's JSON answer.
#ifndef LM_FUZZ_SERVER_DIALECT_CHECKS_H
#define LM_FUZZ_SERVER_DIALECT_CHECKS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

static const struct api_limits k_lim = {.max_values = 4096, .max_depth = API_MAX_DEPTH};

// An error's status and its rendered body s (freed here; NULL: out of memory): valid JSON,
// {"type": "error", "error": {...}} when anthropic, else {"error": {...}}, each with a string
// type and message.
static void check_error_json(const struct api_error *e, char *s, bool anthropic) {
    if (e->status < 400 || e->status > 599 || !e->message[0]) __builtin_trap();
    if (!s) return; // out of memory
    json_t *j = json_loads(s, 0, NULL);
    json_t *err = json_object_get(j, "error");
    if (!j || json_object_size(j) != (anthropic ? 2 : 1) ||
        (anthropic && strcmp(json_string_value(json_object_get(j, "type")), "error") != 0) ||
        !json_is_string(json_object_get(err, "type")) || !json_is_string(json_object_get(err, "message")))
        __builtin_trap();
    json_decref(j);
    free(s);
}

// Every message has a known role and content, calls only on assistant turns, a call id on
// tool turns (system only first when system_first); every chat template takes them.
static void apply_templates(const struct api_request *r, bool system_first) {
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
        if (system_first && !strcmp(q->role, "system") && i != 0) __builtin_trap(); // only the top-level system prompt
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

// The bounds both dialects keep: max_tokens, top_p, no chat-only fields (logprobs, logit_bias),
// messages, tools and the tool choice consistent with them.
static void check_common(const struct api_request *r) {
    if (r->max_tokens_given && (r->max_tokens < 1 || r->max_tokens > (1 << 24))) __builtin_trap();
    if (!(r->sampling.top_p >= 0 && r->sampling.top_p <= 1)) __builtin_trap();
    if (r->logprobs || r->n_bias) __builtin_trap();
    if (r->n_msgs == 0 || !r->msgs || r->n_msgs > API_MAX_MESSAGES + 1) __builtin_trap();
    if (r->n_tools < 0 || r->n_tools > API_MAX_TOOLS || (r->n_tools && !r->tools)) __builtin_trap();
    for (int32_t i = 0; i < r->n_tools; i++)
        if (!r->tools[i].name || !r->tools[i].parameters) __builtin_trap();
    if (r->tool_choice == API_TOOLS_NAMED &&
        (r->tool_named < 0 || r->tool_named >= r->n_tools || r->parallel_tool_calls))
        __builtin_trap();
    if ((r->tool_choice == API_TOOLS_REQUIRED || r->tool_choice == API_TOOLS_NAMED) && !r->n_tools) __builtin_trap();
    if ((r->tools_json != NULL) != (r->tool_choice != API_TOOLS_NONE && r->n_tools > 0)) __builtin_trap();
}

#endif
