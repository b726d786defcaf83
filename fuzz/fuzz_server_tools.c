// libFuzzer target for the tool-call side of lumen serve: the model's output parsed into
// content and calls (src/server/tools.c; the first byte picks the format, parallel calls, the
// size of the pieces it is fed in and auto mode's declared tools), the JSON re-writing of the chat templates (the input
// as a "tools" array and as a call's arguments, chat_tools.c) and the GBNF rule prefixing
// (structured.c). Content only grows; calls' arguments only grow; nothing reads past its input.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    const enum lm_chat_tool_format fmt = (enum lm_chat_tool_format)(data[0] % 3);
    const size_t step = 1 + (data[0] >> 3) % 16;
    struct tools_parser p;
    tools_parser_init(&p, fmt, data[0] & 4, 7);
    static const struct api_tool decl[] = {{"get_weather", "{}", false}, {"f", "{}", false}};
    if (data[0] & 0x80) tools_parser_declare(&p, decl, 2); // auto mode: bare, fenced, marked calls
    size_t last = 0;
    for (size_t i = 0; i < len; i += step) {
        tools_parser_feed(&p, text + i, i + step < len ? step : len - i, false);
        if (p.content.n < last) __builtin_trap();
        last = p.content.n;
    }
    tools_parser_feed(&p, "", 0, true);
    if (p.content.n < last || p.n_calls < 0 || (p.n_calls > 1 && !(data[0] & 4))) __builtin_trap();
    for (int32_t k = 0; k < p.n_calls; k++)
        if (!p.calls[k].name_done || strlen(p.calls[k].id) != 29) __builtin_trap();
    tools_parser_free(&p);

    char *z = malloc(len + 1); // NUL-terminated copies for the template side
    if (!z) return 0;
    memcpy(z, text, len);
    z[len] = 0;
    const struct lm_chat_msg msgs[] = {{.role = "user", .content = "hi"}, {.role = "assistant", .content = ""},
                                       {.role = "tool", .content = "r"}};
    const struct lm_chat_tool_call call = {"c1", "f", z};
    const struct lm_chat_msg_tools parts[] = {{0}, {&call, 1, NULL}, {NULL, 0, "c1"}};
    for (int t = LM_CHAT_TEMPLATE_GEMMA; t <= LM_CHAT_TEMPLATE_CHATML; t++) {
        char *out = NULL;
        size_t n = 0;
        if (lm_chat_apply_tools((enum lm_chat_template)t, msgs, NULL, 1, z, strlen(z), true, &out, &n) == LM_OK &&
            strlen(out) != n)
            __builtin_trap();
        free(out);
        out = NULL;
        if (lm_chat_apply_tools((enum lm_chat_template)t, msgs, parts, 3, NULL, 0, true, &out, &n) == LM_OK &&
            strlen(out) != n)
            __builtin_trap();
        free(out);
    }
    struct sbuf g = {0};
    gbnf_prefix_rules(z, len, "t0-", &g);
    if (!g.oom && g.n < len) __builtin_trap();
    sbuf_free(&g);
    free(z);
    return 0;
}
