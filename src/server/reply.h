// The text side of a generation (detokenizing, stop strings, logprobs) and the JSON of
// OpenAI's responses and stream chunks. Runs on the HTTP thread of the request.
#ifndef LM_SERVER_REPLY_H
#define LM_SERVER_REPLY_H

#include <jansson.h>

#include "api.h"
#include "strbuf.h"

// json_dumps flags of every answer: compact; 9 significant digits round-trip a float.
#define SRV_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(9))

// One generated token as the engine delivered it.
struct gen_tok {
    int32_t token;
    float logprob;
    int32_t n_top;
    const int32_t *top_tok;
    const float *top_lp;
};

struct gen {
    const struct lm_tokenizer *tok;
    const struct api_request *req;
    struct lm_detok dt;
    char *piece;
    size_t piece_cap;
    struct sbuf hold;     // decoded text not released yet: it could begin a stop string
    bool stopped;         // a stop string matched: later tokens are not part of the answer
    int32_t stop_index;   // which of req->stop matched (once stopped)
    int32_t n_tokens;     // tokens consumed (usage.completion_tokens)
    size_t tok_off;       // bytes of the pieces so far (completions' text_offset)
    size_t decoded;       // bytes the detokenizer produced so far (released + held)
    json_t *lp_pend;      // logprob entries of tokens whose text is still held back
    size_t *pend_start, *pend_end, n_pend, pend_cap; // their text's [start, end) in decoded bytes
    json_t *lp;           // released logprobs since the last gen_take_logprobs, or NULL
    json_t *lp_tokens, *lp_values, *lp_top, *lp_off; // completions' parallel arrays
    bool oom;
};

bool gen_init(struct gen *g, const struct lm_tokenizer *tok, const struct api_request *req);
void gen_free(struct gen *g);
// Consumes one token: released text is appended to out. Returns true when a stop string
// completed with this token: the text before it is released, the stop string is not,
// and later tokens are ignored (the caller cancels the request).
bool gen_token(struct gen *g, const struct gen_tok *t, struct sbuf *out);
// The generation ended without a stop string: releases what is held.
void gen_finish(struct gen *g, struct sbuf *out);
// Logprobs of the tokens released since the last call, in the route's shape (completions:
// tokens/token_logprobs/top_logprobs/text_offset; chat: content[]), or NULL when the
// request asked for none or none was released. A token's entry is released with the last
// byte of its text (never ahead of text held back as a possible stop string); when a stop
// string matches, the tokens whose text begins before it are released, the rest dropped.
json_t *gen_take_logprobs(struct gen *g);

// What every response of one request repeats.
struct reply {
    enum api_kind kind;
    char id[48];           // "cmpl-..." / "chatcmpl-..."
    const char *model;
    long long created;     // unix seconds
    bool include_usage;    // stream: "usage": null on chunks, then a usage chunk
};

json_t *reply_usage(int32_t n_prompt, int32_t n_completion, int32_t n_cached);
// A stream chunk with text (and the role, on a chat stream's first chunk), logprobs
// (stolen, may be NULL) and finish reason (NULL while streaming).
json_t *reply_chunk(const struct reply *rp, const char *text, size_t n, bool with_role,
                    json_t *logprobs, const char *finish);
// The closing chunk of a stream with include_usage: no choices, the usage (stolen).
json_t *reply_usage_chunk(const struct reply *rp, json_t *usage);
// A whole (non-stream) answer; logprobs and usage are stolen.
json_t *reply_full(const struct reply *rp, const char *text, size_t n, json_t *logprobs,
                   const char *finish, json_t *usage);
// A chat stream chunk with the given delta (stolen), logprobs (stolen, may be NULL) and
// finish reason (NULL while streaming).
json_t *reply_chunk_delta(const struct reply *rp, json_t *delta, json_t *logprobs, const char *finish);
// A whole chat answer with the given message (stolen); logprobs and usage are stolen.
json_t *reply_full_message(const struct reply *rp, json_t *message, json_t *logprobs, const char *finish,
                           json_t *usage);
// A JSON string of s[0, n) with invalid UTF-8 replaced by U+FFFD (never NULL unless OOM).
json_t *json_text(const char *s, size_t n);

#endif
