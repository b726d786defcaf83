// libFuzzer target for lumen serve's OpenAI Responses parsing (src/server/api_responses.c): the
// input is the JSON body of POST /v1/responses. A parsed request must satisfy every bound the
// server relies on and go through every chat template; an error must come out as valid
// OpenAI-shaped JSON ({"error": {"message", "type", "param", "code"}}).
#include "server_dialect_checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_request(const struct api_request *r) {
    if (r->kind != API_CHAT || r->dialect != API_DIALECT_RESPONSES) __builtin_trap();
    check_common(r);
    if (!(r->sampling.temperature >= 0 && r->sampling.temperature <= 2)) __builtin_trap();
    if (r->n_stop || r->format == API_FORMAT_GRAMMAR) __builtin_trap(); // not its fields
    if (r->format == API_FORMAT_JSON_SCHEMA && (!r->schema || strlen(r->schema) != r->schema_len)) __builtin_trap();
    if (r->format != API_FORMAT_TEXT && r->tool_choice != API_TOOLS_NONE) __builtin_trap();
    if (r->metadata) { // echoed in the answer: an object
        json_t *md = json_loads(r->metadata, 0, NULL);
        if (md && !json_is_object(md)) __builtin_trap();
        json_decref(md);
    }
    apply_templates(r, false);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct api_request r;
    struct api_error e;
    if (api_parse_responses_body((const char *)data, size, &k_lim, &r, &e)) {
        check_request(&r);
        api_request_free(&r);
    } else {
        api_responses_param(&e);
        check_error_json(&e, api_error_json(&e), false);
    }
    return 0;
}
