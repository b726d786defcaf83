// Tool calls in the model's output: its text parsed into content and calls in the family's
// format (lm_chat_tool_format), whole or while it streams, and the grammar text that
// constrains a request's output (response_format, json_schema, grammar, tool_choice).
#ifndef LM_SERVER_TOOLS_H
#define LM_SERVER_TOOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "lumen.h"
#include "strbuf.h"

// One call found in the output. Its arguments are the model's JSON text without the
// whitespace between tokens (the same bytes whole or streamed).
struct tool_call {
    char id[32];       // "call_" + 24 random letters and digits
    struct sbuf name;  // complete once known (name_done)
    struct sbuf args;  // arguments so far
    bool name_done, args_done;
    bool announced;    // a stream sent its first chunk (id, name)
    size_t args_sent;  // bytes of args a stream sent
};

// The output so far, parsed again at every feed (answers are short; a re-parse of a few KB
// costs microseconds beside a token's forward pass).
struct tools_parser {
    enum lm_chat_tool_format fmt;
    bool parallel;     // more than one call is kept
    uint64_t seed;     // ids: srv_splitmix(seed + call index)
    struct sbuf text;  // everything generated
    struct sbuf content; // the content so far: only ever grows (a stream sends it as it grows)
    size_t content_sent; // bytes of content a stream sent
    bool content_null; // the answer has calls and no content
    struct tool_call *calls;
    int32_t n_calls, cap;
    const struct api_tool *tools; // auto mode (tools_parser_declare): the declared tools
    int32_t n_tools;
    bool oom;
    // LM_CHAT_TOOLS_HARMONY (gpt-oss): the analysis channel, apart from content (harmony.c)
    struct sbuf reasoning; // only ever grows
    size_t reasoning_sent; // bytes of reasoning a stream sent
    bool drop_calls;       // the request asked for no calls: a harmony answer's calls are dropped
};

void tools_parser_init(struct tools_parser *p, enum lm_chat_tool_format fmt, bool parallel, uint64_t seed);
void tools_parser_free(struct tools_parser *p);
// tool_choice auto: calls are also recognised without the family's markers (what real models
// write: a bare JSON object or array whose "name" is one of tools, a fenced ```json block,
// <tool_call>, <|python_tag|>, [TOOL_CALLS], Gemma's ```tool_code NAME(key=value) calls);
// tools must outlive the parser.
void tools_parser_declare(struct tools_parser *p, const struct api_tool *tools, int32_t n_tools);
// Appends s[0, n) to the text and parses it again; final: the generation has ended (nothing
// is held back as the possible start of a call marker any more).
void tools_parser_feed(struct tools_parser *p, const char *s, size_t n, bool final);

// The grammar (GBNF) that constrains the request's output, or *gbnf NULL when none
// (malloc'd). For tool_choice auto the grammar is lazy: *triggers (a NULL-terminated list in
// one malloc'd block: free(*triggers)) are the openings of a call, and the grammar matches
// from the first one written. False with e filled (400:
// a schema the converter refuses, with its message).
bool tools_grammar(const struct api_request *q, enum lm_chat_tool_format fmt, char **gbnf, size_t *n,
                   char ***triggers, struct api_error *e);

// Compiled grammars of recent requests, by their text and trigger: an agent sends the same
// tools or schema every turn; compiling two tools' grammar takes ~8 ms on the default model
// (measured on this 2-core host), and a grammar's mask caches warm as it is used.
#define GCACHE_ENTRIES 8
struct gcache;
struct gcache *gcache_new(void); // NULL when out of memory
void gcache_free(struct gcache *c); // drops the cache's references; NULL is fine
// The grammar of gbnf[0, n) with triggers (NULL-terminated; NULL: none) for tok: the cached one (+1 reference)
// or compiled now and kept (the least recently used entry goes). Any thread. Failure: as
// lm_grammar_compile (nothing is kept).
enum lm_status gcache_get(struct gcache *c, const struct lm_tokenizer *tok, const char *gbnf, size_t n,
                          const char *const *triggers, struct lm_grammar **out);

// gbnf[0, n) with every rule name prefixed (rule references too; strings, character classes,
// repetition counts and comments untouched), appended to out.
void gbnf_prefix_rules(const char *gbnf, size_t n, const char *prefix, struct sbuf *out);

// Gemma's ```tool_code call at s[i, n): NAME(key=value, ...) with Python literals
// (tools_pycall.c). DONE: *name_end past NAME, *end past ')' and the keyword arguments appended
// to args as a compact JSON object; MORE: the text ends before the call does; BAD: not such a
// call (positional arguments, expressions, a newline inside a string).
enum pycall { PYCALL_BAD, PYCALL_MORE, PYCALL_DONE };
enum pycall tools_pycall(const char *s, size_t n, size_t i, size_t *name_end, size_t *end, struct sbuf *args);

#endif
