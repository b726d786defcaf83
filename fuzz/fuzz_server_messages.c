// libFuzzer target for lumen serve's Anthropic Messages parsing (src/server/api_messages.c):
// the first byte picks the route (even: /v1/messages, odd: /v1/messages/count_tokens), the
// rest is the JSON body. A parsed request must satisfy every bound the server relies on and
// go through every chat template; an error must come out as valid Anthropic-shaped JSON.
#include "server_dialect_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_request(const struct api_request *r, bool count_only) {
    if (r->kind != API_CHAT || r->dialect != API_DIALECT_ANTHROPIC) __builtin_trap();
    if (!count_only && !r->max_tokens_given) __builtin_trap();
    check_common(r);
    if (r->n_stop < 0 || r->n_stop > API_MAX_STOP) __builtin_trap();
    for (int32_t i = 0; i < r->n_stop; i++)
        if (!r->stop[i] || r->stop_len[i] == 0 || r->stop_len[i] > API_MAX_STOP_LEN) __builtin_trap();
    const struct lm_sampler_params *p = &r->sampling;
    if (!(p->temperature >= 0 && p->temperature <= 1) || p->top_k < 0) __builtin_trap();
    if (r->format != API_FORMAT_TEXT) __builtin_trap(); // not a Messages field
    if (r->thinking && (r->thinking_budget < 1024 || (r->max_tokens_given && r->thinking_budget >= r->max_tokens)))
        __builtin_trap();
    apply_templates(r, true);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const bool count_only = data[0] & 1;
    struct api_request r;
    struct api_error e;
    if (api_parse_messages_body((const char *)data + 1, size - 1, count_only, &k_lim, &r, &e)) {
        check_request(&r, count_only);
        api_request_free(&r);
    } else {
        check_error_json(&e, api_error_json_anthropic(&e), true);
    }
    return 0;
}
