// OpenAI-compatible request parsing (JSON body -> engine parameters) and the error
// shape. Pure functions of the body: no socket, no model (the fuzz target calls them).
#ifndef LM_SERVER_API_H
#define LM_SERVER_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lumen.h"

enum api_kind { API_COMPLETION, API_CHAT };
// The API shape a request came in (and is answered) in. Every dialect parses into the same
// struct api_request and runs the same generation; only parsing and rendering differ.
enum api_dialect { API_DIALECT_OPENAI, API_DIALECT_ANTHROPIC, API_DIALECT_RESPONSES };

#define API_MAX_STOP 16       // stop strings per request
#define API_MAX_STOP_LEN 512  // bytes of one stop string
#define API_MAX_MESSAGES 4096
#define API_MAX_LOGIT_BIAS 1024 // logit_bias entries
#define API_MAX_TOP_LOGPROBS LM_MAX_TOP_LOGPROBS

// Bounds on a body's JSON checked before jansson builds its tree (a body of "[{},{},...]"
// costs ~70 bytes of heap per 3 body bytes as a tree): values (every string, number,
// literal, object and array, keys included) and nesting depth.
struct api_limits {
    size_t max_values;
    int max_depth;
};
#define API_MAX_DEPTH 64 // nesting of a body (JSON Schemas in response_format and tools nest deepest)

// An error answer: HTTP status and OpenAI's {"error": {"message", "type", "param", "code"}}.
struct api_error {
    int status;
    const char *type;  // "invalid_request_error", "authentication_error", ...
    const char *code;  // "invalid_json", "invalid_type", "invalid_value", ...
    char param[64];    // the offending field ("" = none)
    char message[512];
};

// Fills e (status 400 unless set otherwise by the caller afterwards); returns false so
// parsers can `return api_fail(...)`.
bool api_fail(struct api_error *e, int status, const char *type, const char *code,
              const char *param, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
// {"error": {...}} as a malloc'd NUL-terminated string (NULL when out of memory).
char *api_error_json(const struct api_error *e);

// ---- POST /v1/embeddings (api_embed.c)
#define API_MAX_EMBED_INPUTS 2048 // inputs of one request (OpenAI's limit)
// "input" is a string, an array of strings, an array of token ids, or an array of arrays of
// token ids (each input non-empty, ids in [0, n_vocab)); "encoding_format" "float" (the
// default) or "base64"; "dimensions" >= 1 (checked against the model by the route); "model",
// "user": not used.
struct api_embed {
    int32_t n;           // inputs
    char **text;         // [n] a string input (NUL-terminated; text_len bytes), or NULL
    size_t *text_len;
    int32_t **ids;       // [n] a token input, or NULL
    int32_t *n_ids;
    bool base64;
    int32_t dimensions;  // 0: all
};
bool api_parse_embed(const char *body, size_t len, int32_t n_vocab, const struct api_limits *lim,
                     struct api_embed *q, struct api_error *e);
void api_embed_free(struct api_embed *q);

// ---- POST /v1/rerank (api_embed.c): llama-server's / Jina's / Cohere's shape
// "query" a non-empty string, "documents" a non-empty array of strings (at most
// API_MAX_EMBED_INPUTS), "top_n" >= 1 (default: all), "return_documents" a boolean; "model" not used.
struct api_rerank {
    char *query;
    size_t query_len;
    int32_t n;           // documents
    char **doc;          // [n] NUL-terminated, doc_len bytes
    size_t *doc_len;
    int32_t top_n;       // 0: all
    bool return_documents;
};
bool api_parse_rerank(const char *body, size_t len, const struct api_limits *lim, struct api_rerank *q,
                      struct api_error *e);
void api_rerank_free(struct api_rerank *q);

#define API_MAX_TOOLS 128       // tools per request
#define API_MAX_TOOL_CALLS 128  // tool calls per assistant message

struct api_tool_call {
    char *id;        // may be NULL
    char *name;
    char *arguments; // JSON text (OpenAI sends a string; an object is accepted and written compact)
};

struct api_message {
    char *role;    // "developer" is read as "system"
    char *content; // text parts joined with "\n"
    struct api_tool_call *calls; // assistant: tool_calls
    size_t n_calls;
    char *tool_call_id;          // tool: the call answered (NULL: not given)
    char *reasoning;             // assistant: its reasoning (chat's reasoning_content, Messages' thinking
                                 // blocks, Responses' reasoning items; NULL: none)
};

// A function the model may call ("tools"[i].function).
struct api_tool {
    char *name;       // [A-Za-z0-9_-]{1,64}, unique in the request
    char *parameters; // JSON Schema text of its arguments ({"type": "object"} when not given)
    bool strict;
};

enum api_tool_choice { API_TOOLS_AUTO, API_TOOLS_NONE, API_TOOLS_REQUIRED, API_TOOLS_NAMED };
// What constrains the output: response_format (json_object, json_schema), llama-server's
// "json_schema" (a schema) and "grammar" (GBNF) fields.
enum api_format { API_FORMAT_TEXT, API_FORMAT_JSON_OBJECT, API_FORMAT_JSON_SCHEMA, API_FORMAT_GRAMMAR };

// What a completion or chat request asks for. Fields the client left out keep the
// defaults noted here (api_parse_generate sets them).
struct api_request {
    enum api_kind kind;
    enum api_dialect dialect; // API_DIALECT_ANTHROPIC: /v1/messages (api_messages.c)
    // completions: prompt text, or token ids (used as given: no BOS added)
    char *prompt;
    size_t prompt_len;
    int32_t *prompt_ids;
    int32_t n_prompt_ids;
    bool has_prompt_ids;
    // chat
    struct api_message *msgs;
    size_t n_msgs;
    // chat: tools (docs/server.md "Tool calls")
    char *tools_json;        // "tools" as compact JSON text for the prompt (NULL: none, or tool_choice none)
    size_t tools_len;
    struct api_tool *tools;
    int32_t n_tools;
    enum api_tool_choice tool_choice; // default auto (none without tools)
    int32_t tool_named;      // API_TOOLS_NAMED: index in tools
    bool parallel_tool_calls; // default true
    char reasoning_effort[8]; // chat's reasoning_effort, Responses' reasoning.effort: "none" | "minimal" |
                              // "low" | "medium" | "high" ("xhigh": Responses), "" when not given
    // structured output (both routes)
    enum api_format format;
    char *schema;            // API_FORMAT_JSON_SCHEMA: the schema's JSON text
    size_t schema_len;
    char *grammar;           // API_FORMAT_GRAMMAR: GBNF text
    size_t grammar_len;

    int32_t max_tokens;      // 0: not given (completions default to 16, chat to the context)
    bool max_tokens_given;
    struct lm_sampler_params sampling; // lumen's defaults for what is not given
    bool seed_given;
    bool ignore_eos;
    char *stop[API_MAX_STOP];
    size_t stop_len[API_MAX_STOP];
    int32_t n_stop;
    int32_t *bias_tokens;    // logit_bias; -100 and below ban the token (-inf)
    float *bias_values;
    int32_t n_bias;
    bool logprobs;           // completions: logprobs given (>= 0); chat: logprobs true
    int32_t top_logprobs;    // alternatives per token (0..20)
    bool stream, include_usage;
    // speculative decoding (lumen's own fields): "lookup": bool (default: the server's
    // --lookup), "draft_max": 1..LM_DRAFT_MAX_LIMIT (default: the server's --draft-max)
    bool lookup, lookup_given;
    int32_t draft_max;       // 0: not given
    bool draft_model, draft_model_given; // "draft_model": bool (default: the server has one)
    // Anthropic's "thinking": {"type": "enabled", "budget_tokens"}: a thinking model thinks only
    // then, at most budget_tokens (reasoning_srv.c; docs/server.md "Reasoning")
    bool thinking;
    int32_t thinking_budget;
    char *metadata;          // Responses' "metadata" as compact JSON text, echoed (NULL: none)
    // reasoning (chat; api_reasoning.c, docs/server.md "Reasoning")
    int8_t reasoning_format; // "reasoning_format": 0 not given (the server's), 1 "auto"/"deepseek"
                             // (reasoning apart), 2 "none" (inline in the content)
    int8_t enable_thinking;  // "enable_thinking" or chat_template_kwargs.enable_thinking: 0 not
                             // given, 1 true, -1 false
    bool think_budget_given; // "thinking_budget_tokens" (or Anthropic's thinking.budget_tokens)
    int32_t think_budget;    // -1: no budget, 0: no thinking, N: at most N thinking tokens
};

// Counts the values and the depth of a JSON text without building anything (strings
// skipped with their escapes; a malformed text is left to the parser). False with e filled
// (413 request_too_large: too many values; 400 invalid_json: too deep) beyond lim.
bool api_json_within(const char *body, size_t len, const struct api_limits *lim, struct api_error *e);

// Parses a /v1/completions or /v1/chat/completions body (api_json_within first). n_vocab
// bounds token ids (prompt ids, logit_bias keys). On failure returns false with e filled
// (400, or 413 beyond lim) and r freed.
bool api_parse_generate(const char *body, size_t len, enum api_kind kind, int32_t n_vocab,
                        const struct api_limits *lim, struct api_request *r, struct api_error *e);
void api_request_free(struct api_request *r);

// Parses a POST /v1/messages body (Anthropic's Messages API, api_messages.c) into the same
// request as a chat completion: kind API_CHAT, dialect API_DIALECT_ANTHROPIC. count_only
// (/v1/messages/count_tokens): max_tokens is not required. Failure as api_parse_generate.
bool api_parse_messages_body(const char *body, size_t len, bool count_only, const struct api_limits *lim,
                             struct api_request *r, struct api_error *e);
// {"type": "error", "error": {"type", "message"}}: Anthropic's error shape, its type from the
// status (400 invalid_request_error, 401 authentication_error, 403 permission_error, 404
// not_found_error, 413 request_too_large, 429 rate_limit_error, 500 api_error, 503
// overloaded_error). Malloc'd, NULL when out of memory.
char *api_error_json_anthropic(const struct api_error *e);

// Parses a POST /v1/responses body (OpenAI's Responses API, api_responses.c) into the same
// request as a chat completion: kind API_CHAT, dialect API_DIALECT_RESPONSES. Stateless:
// previous_response_id, conversation and background are named 400s. Failure as api_parse_generate.
bool api_parse_responses_body(const char *body, size_t len, const struct api_limits *lim, struct api_request *r,
                              struct api_error *e);
// An error about a tool's schema named as Responses names it ("tools[i].function.parameters",
// the chat route's name, becomes "tools[i].parameters": Responses' tools are flat).
void api_responses_param(struct api_error *e);

// The request's logprob setting as lm_request_params.n_logprobs (0 = none).
int32_t api_n_logprobs(const struct api_request *r);

// POST /tokenize (llama-server's shape): {"content": str, "add_special": bool = false,
// "parse_special": bool = true, "with_pieces": bool = false}. *content is malloc'd.
struct api_tokenize {
    char *content;
    size_t len;
    bool add_special, parse_special, with_pieces;
};
bool api_parse_tokenize(const char *body, size_t len, const struct api_limits *lim, struct api_tokenize *t,
                        struct api_error *e);

// POST /detokenize: {"tokens": [int, ...]} with every id in [0, n_vocab). *ids is malloc'd.
bool api_parse_detokenize(const char *body, size_t len, int32_t n_vocab, const struct api_limits *lim,
                          int32_t **ids, int32_t *n_ids, struct api_error *e);

#endif
