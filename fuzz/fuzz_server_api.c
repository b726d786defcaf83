// libFuzzer target for lumen serve's request parsing (src/server/api.c): the first byte
// picks the route (completions, chat, tokenize, detokenize), the rest is the JSON body.
// A parsed request must satisfy every bound the server relies on; an error must come out
// as valid OpenAI-shaped JSON; chat messages (with their tool calls and the tools) go through
// every chat template; the UTF-8
// repair used for token text must always produce valid UTF-8.
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_VOCAB 262144

static const struct api_limits k_lim = {.max_values = 4096, .max_depth = API_MAX_DEPTH};

static void check_error(const struct api_error *e) {
    if (e->status < 400 || e->status > 599 || !e->message[0]) __builtin_trap();
    char *s = api_error_json(e);
    if (!s) return; // out of memory
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    if (!j || !json_is_object(json_object_get(j, "error"))) __builtin_trap();
    if (!json_is_string(json_object_get(json_object_get(j, "error"), "message"))) __builtin_trap();
    json_decref(j);
    free(s);
}

static void check_request(const struct api_request *r) {
    if (r->n_stop < 0 || r->n_stop > API_MAX_STOP) __builtin_trap();
    for (int32_t i = 0; i < r->n_stop; i++)
        if (!r->stop[i] || r->stop_len[i] == 0 || r->stop_len[i] > API_MAX_STOP_LEN) __builtin_trap();
    if (r->max_tokens_given && (r->max_tokens < 1 || r->max_tokens > (1 << 24))) __builtin_trap();
    if (r->top_logprobs < 0 || r->top_logprobs > API_MAX_TOP_LOGPROBS) __builtin_trap();
    if (api_n_logprobs(r) < 0 || api_n_logprobs(r) > LM_MAX_TOP_LOGPROBS + 1) __builtin_trap();
    for (int32_t i = 0; i < r->n_prompt_ids; i++)
        if (r->prompt_ids[i] < 0 || r->prompt_ids[i] >= N_VOCAB) __builtin_trap();
    for (int32_t i = 0; i < r->n_bias; i++)
        if (r->bias_tokens[i] < 0 || r->bias_tokens[i] >= N_VOCAB || !(r->bias_values[i] <= 100.0f))
            __builtin_trap();
    const struct lm_sampler_params *p = &r->sampling;
    if (!(p->temperature >= 0 && p->temperature <= 100) || !(p->top_p >= 0 && p->top_p <= 1) ||
        !(p->min_p >= 0 && p->min_p <= 1) || p->top_k < 0 || !(p->presence_penalty >= -2 && p->presence_penalty <= 2) ||
        !(p->frequency_penalty >= -2 && p->frequency_penalty <= 2))
        __builtin_trap();
    if (r->kind == API_COMPLETION) {
        if (!r->has_prompt_ids && !r->prompt) __builtin_trap();
    } else {
        if (r->n_msgs == 0 || !r->msgs) __builtin_trap();
        if (r->n_tools < 0 || r->n_tools > API_MAX_TOOLS || (r->n_tools && !r->tools)) __builtin_trap();
        if (r->tool_choice == API_TOOLS_NAMED && (r->tool_named < 0 || r->tool_named >= r->n_tools)) __builtin_trap();
        if ((r->tool_choice == API_TOOLS_REQUIRED || r->tool_choice == API_TOOLS_NAMED) && !r->n_tools) __builtin_trap();
        if (r->format != API_FORMAT_TEXT && r->tool_choice != API_TOOLS_NONE) __builtin_trap();
        struct lm_chat_msg *m = calloc(r->n_msgs, sizeof *m);
        struct lm_chat_msg_tools *parts = calloc(r->n_msgs, sizeof *parts);
        struct lm_chat_tool_call *calls = calloc(r->n_msgs * API_MAX_TOOL_CALLS + 1, sizeof *calls);
        if (!m || !parts || !calls) {
            free(m);
            free(parts);
            free(calls);
            return;
        }
        for (size_t i = 0, c = 0; i < r->n_msgs; i++) {
            if (!r->msgs[i].role || !r->msgs[i].content || r->msgs[i].n_calls > API_MAX_TOOL_CALLS) __builtin_trap();
            m[i] = (struct lm_chat_msg){.role = r->msgs[i].role, .content = r->msgs[i].content};
            parts[i] = (struct lm_chat_msg_tools){calls + c, r->msgs[i].n_calls, r->msgs[i].tool_call_id};
            for (size_t j = 0; j < r->msgs[i].n_calls; j++, c++)
                calls[c] = (struct lm_chat_tool_call){r->msgs[i].calls[j].id, r->msgs[i].calls[j].name,
                                                      r->msgs[i].calls[j].arguments};
        }
        for (int t = LM_CHAT_TEMPLATE_GEMMA; t <= LM_CHAT_TEMPLATE_CHATML; t++) {
            char *out = NULL;
            size_t n = 0;
            if (lm_chat_apply((enum lm_chat_template)t, m, r->n_msgs, true, &out, &n) == LM_OK &&
                (!out || strlen(out) != n))
                __builtin_trap();
            free(out);
            out = NULL;
            if (lm_chat_apply_tools((enum lm_chat_template)t, m, parts, r->n_msgs, r->tools_json, r->tools_len, true,
                                    &out, &n) == LM_OK &&
                (!out || strlen(out) != n))
                __builtin_trap();
            free(out);
        }
        free(m);
        free(parts);
        free(calls);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const char *body = (const char *)data + 1;
    const size_t len = size - 1;
    struct api_error e;
    switch (data[0] % 4) {
    case 0:
    case 1: {
        struct api_request r;
        const enum api_kind kind = data[0] % 4 == 0 ? API_COMPLETION : API_CHAT;
        if (api_parse_generate(body, len, kind, N_VOCAB, &k_lim, &r, &e)) {
            check_request(&r);
            api_request_free(&r);
        } else {
            check_error(&e);
        }
        break;
    }
    case 2: {
        struct api_tokenize t;
        if (api_parse_tokenize(body, len, &k_lim, &t, &e)) {
            if (!t.content || strlen(t.content) != t.len) __builtin_trap(); // no NUL inside
            free(t.content);
        } else {
            check_error(&e);
        }
        break;
    }
    default: {
        int32_t *ids = NULL, n = 0;
        if (api_parse_detokenize(body, len, N_VOCAB, &k_lim, &ids, &n, &e)) {
            for (int32_t i = 0; i < n; i++)
                if (ids[i] < 0 || ids[i] >= N_VOCAB) __builtin_trap();
            free(ids);
        } else {
            check_error(&e);
        }
        break;
    }
    }
    // UTF-8 repair (token text -> JSON) on the raw bytes
    struct sbuf b = {0};
    if (utf8_repair_append(&b, body, len) && !b.oom && utf8_valid_prefix(b.p, b.n) != b.n) __builtin_trap();
    sbuf_free(&b);
    return 0;
}
