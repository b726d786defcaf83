// libFuzzer target for gpt-oss's harmony format: the model's answer read back through the
// server's parser (src/server/harmony.c via tools.c's LM_CHAT_TOOLS_HARMONY; the first byte picks
// the size of the pieces, parallel calls and drop_calls), and the prompt side (chat_harmony.c,
// json_tree.c) with the input as the "tools" array, a call's arguments and a reasoning text.
// Reasoning, content and arguments only grow; nothing reads past its input. The reasoning
// splitter's harmony form (common/reasoning_harmony.c) on the same pieces gives the parser's
// reasoning, and its markup content read by the parser the same content and calls.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harmony.h"
#include "reasoning.h"
#include "tools.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const char *text = (const char *)data + 1;
    const size_t len = size - 1, step = 1 + (data[0] >> 3) % 16;
    struct tools_parser p;
    tools_parser_init(&p, LM_CHAT_TOOLS_HARMONY, data[0] & 1, 7);
    p.drop_calls = data[0] & 2;
    size_t last_c = 0, last_r = 0;
    for (size_t i = 0; i < len; i += step) {
        tools_parser_feed(&p, text + i, i + step < len ? step : len - i, false);
        if (p.content.n < last_c || p.reasoning.n < last_r) __builtin_trap();
        last_c = p.content.n;
        last_r = p.reasoning.n;
    }
    tools_parser_feed(&p, "", 0, true);
    if (p.content.n < last_c || p.reasoning.n < last_r || (p.n_calls > 0 && (data[0] & 2)) ||
        (p.n_calls > 1 && !(data[0] & 1)))
        __builtin_trap();
    for (int32_t k = 0; k < p.n_calls; k++)
        if (!p.calls[k].name_done || strlen(p.calls[k].id) != 29) __builtin_trap();
    tools_parser_free(&p);

    for (int markup = 0; markup < 2; markup++) { // the splitter against the parser
        struct reason_split sp;
        struct sbuf r = {0}, c = {0};
        reason_split_init(&sp, REASON_HARMONY, false);
        sp.markup = markup;
        for (size_t i = 0; i < len; i += step) reason_split_feed(&sp, text + i, i + step < len ? step : len - i, &r, &c);
        reason_split_finish(&sp, &r, &c);
        struct harmony_out whole = {0}, again = {0};
        harmony_parse(text, len, true, &whole);
        harmony_parse(markup ? (c.p ? c.p : "") : "", markup ? c.n : 0, true, &again);
        const struct sbuf *content = markup ? &again.content : &c;
        const bool same = !sp.oom && !whole.oom && r.n == whole.reasoning.n && content->n == whole.content.n &&
                          (r.n == 0 || !memcmp(r.p, whole.reasoning.p, r.n)) &&
                          (content->n == 0 || !memcmp(content->p, whole.content.p, content->n)) &&
                          (!markup || (again.n_calls == whole.n_calls && again.reasoning.n == 0));
        if (!same) __builtin_trap();
        harmony_out_free(&whole);
        harmony_out_free(&again);
        reason_split_free(&sp);
        sbuf_free(&r);
        sbuf_free(&c);
    }

    char *z = malloc(len + 1); // NUL-terminated: the prompt side's strings
    if (!z) return 0;
    memcpy(z, text, len);
    z[len] = 0;
    const struct lm_chat_msg msgs[] = {{"system", "be brief"}, {"user", "hi"}, {"assistant", ""}, {"tool", z},
                                       {"assistant", "ok"}};
    const struct lm_chat_tool_call call = {"c1", "f", z};
    const struct lm_chat_msg_tools parts[] = {{0}, {0}, {.tool_calls = &call, .n_tool_calls = 1}, {0}, {0}};
    const char *reasoning[] = {NULL, NULL, z, NULL, z};
    const struct lm_chat_harmony_opts o = {.reasoning_effort = "low", .date = "2026-01-01", .reasoning = reasoning};
    for (int agp = 0; agp < 2; agp++) {
        char *out = NULL;
        size_t n = 0;
        if (lm_chat_apply_harmony(&o, msgs, parts, 5, z, len, agp, &out, &n) == LM_OK && strlen(out) > n)
            __builtin_trap();
        free(out);
    }
    free(z);
    return 0;
}
