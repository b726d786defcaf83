// What the request parser's files share (internal to api*.c): the typed JSON field readers
// with their 400s (api_fields.c) and the chat parts of a request (api_chat.c).
#ifndef LM_SERVER_API_INTERNAL_H
#define LM_SERVER_API_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "api.h"

// ---- errors and typed fields (api_fields.c)

// A 400 invalid_request_error with code and param; returns false.
bool api_bad_request(struct api_error *e, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
const char *api_json_kind(const json_t *v); // "an object", "a string", ... for messages
// A 400 "'field' must be WANT (got KIND)"; returns false.
bool api_wrong_type(struct api_error *e, const char *field, const char *want, const json_t *v);
bool api_oom(struct api_error *e); // a 500 out_of_memory; returns false
// o's key, or NULL when absent or null (OpenAI's optional fields may be sent as null).
json_t *api_field(json_t *o, const char *key);
// Each getter leaves *out alone when the field is absent or null and sets *given (when
// not NULL); false (e set) when the value has the wrong type or is out of [lo, hi].
bool api_get_number(json_t *o, const char *key, double lo, double hi, double *out, bool *given,
                    struct api_error *e);
bool api_get_int(json_t *o, const char *key, long long lo, long long hi, long long *out, bool *given,
                 struct api_error *e);
bool api_get_bool(json_t *o, const char *key, bool *out, struct api_error *e);
char *api_dup_n(const char *s, size_t n); // s[0, n) NUL-terminated (malloc'd), NULL when out of memory
// A JSON value as compact text (malloc'd), or NULL when out of memory.
char *api_dump(const json_t *v);

// The body as a JSON object (api_json_within first when lim is given; duplicate keys
// refused), or NULL with e filled (400 invalid_json / wrong type, 413 beyond lim).
json_t *api_load_object(const char *body, size_t len, const struct api_limits *lim, struct api_error *e);
// A tool or call name: 1 to 64 of [A-Za-z0-9_-] (n bytes, no NUL inside).
bool api_valid_name(const char *s, size_t n);

// ---- request parts the Messages and Responses parsers share (api_fields.c)

// One entry of "tools" as its API spells it: the fields it names (borrowed from the request).
struct api_tool_fields {
    json_t *name;   // a string that passes api_valid_name
    json_t *desc;   // a string, or NULL
    json_t *params; // a JSON Schema object, or NULL ({"type": "object"})
};
// Checks tools[i] (param "tools[i]") in its API's shape and fills f (and out->strict where
// the API has it); false with e set (a 400 naming the field).
typedef bool (*api_tool_reader)(json_t *tool, const char *param, struct api_tool_fields *f, struct api_tool *out,
                                struct api_error *e);
// "tools": an array of at most API_MAX_TOOLS entries, each read by read, names unique; fills
// r->tools and r->tools_json in chat completions' form ({"type": "function", "function":
// {"name", "description"?, "parameters"?}}), so the same tools make the same prompt on every API.
bool api_parse_tool_list(json_t *o, api_tool_reader read, struct api_request *r, struct api_error *e);
// "temperature" in [0, temperature_hi], "top_p" in [0, 1], "top_k" (>= 0, when top_k) and
// lumen's "seed" into r->sampling (r->seed_given).
bool api_parse_sampling_basic(json_t *o, double temperature_hi, bool top_k, struct api_request *r,
                              struct api_error *e);
// tool_choice naming one of r->tools (`kind`: "function" or "tool", for the error): that tool,
// called once; a 400 on tool_choice when no tool has that name.
bool api_tool_choice_named(struct api_request *r, const char *name, const char *kind, struct api_error *e);

// ---- the chat parts of a request (api_chat.c)

bool api_parse_messages(json_t *o, struct api_request *r, struct api_error *e);
// "tools": [{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}]
bool api_parse_tools(json_t *o, struct api_request *r, struct api_error *e);
bool api_parse_tool_choice(json_t *o, struct api_request *r, struct api_error *e);

// ---- reasoning fields of a chat request (api_reasoning.c)

// "reasoning_format", "enable_thinking", "chat_template_kwargs": {"enable_thinking"},
// "thinking_budget_tokens" (-1 ..): defaults when absent; a 400 naming the field otherwise.
bool api_parse_reasoning(json_t *o, struct api_request *r, struct api_error *e);

#endif
