// The reasoning fields of a chat request (llama-server's names): reasoning_format, enable_thinking
// (also inside chat_template_kwargs) and thinking_budget_tokens (docs/server.md, "Reasoning").
#include <string.h>

#include "api_internal.h"

static bool parse_enable(json_t *o, const char *field, struct api_request *r, struct api_error *e) {
    json_t *v = api_field(o, "enable_thinking");
    if (!v) return true;
    if (!json_is_boolean(v)) return api_wrong_type(e, field, "a boolean", v);
    r->enable_thinking = json_is_true(v) ? 1 : -1;
    return true;
}

bool api_parse_reasoning(json_t *o, struct api_request *r, struct api_error *e) {
    json_t *f = api_field(o, "reasoning_format");
    if (f && !json_is_string(f)) return api_wrong_type(e, "reasoning_format", "a string", f);
    if (f) {
        const char *v = json_string_value(f);
        if (!strcmp(v, "none")) r->reasoning_format = 2;
        else if (!strcmp(v, "auto") || !strcmp(v, "deepseek")) r->reasoning_format = 1;
        else
            return api_bad_request(e, "invalid_value", "reasoning_format", "'reasoning_format' must be 'auto', "
                                   "'deepseek' or 'none' (got '%.40s')", v);
    }
    json_t *kw = api_field(o, "chat_template_kwargs");
    if (kw && !json_is_object(kw)) return api_wrong_type(e, "chat_template_kwargs", "an object", kw);
    if (kw && !parse_enable(kw, "chat_template_kwargs.enable_thinking", r, e)) return false;
    if (!parse_enable(o, "enable_thinking", r, e)) return false; // the top-level field wins
    long long b = -1;
    bool given = false;
    if (!api_get_int(o, "thinking_budget_tokens", -1, 1 << 24, &b, &given, e)) return false;
    if (given) {
        r->think_budget_given = true;
        r->think_budget = (int32_t)b;
    }
    return true;
}
