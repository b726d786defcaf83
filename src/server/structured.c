// The grammar (GBNF text) a request's output must follow: response_format json_object /
// json_schema and llama-server's json_schema (through lm_json_schema_to_gbnf), its grammar
// field as given, and tool calls in the family's format with each tool's arguments schema
// (rules prefixed per tool), lazy for tool_choice auto (docs/structured.md).
#include "tools.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

void gbnf_prefix_rules(const char *g, size_t n, const char *prefix, struct sbuf *out) {
    for (size_t i = 0; i < n;) {
        const char c = g[i];
        size_t j = i + 1;
        if (c == '#') { // a comment, to the end of the line
            while (j < n && g[j] != '\n') j++;
        } else if (c == '"' || c == '[') { // a literal or a character class, escapes inside
            const char close = c == '"' ? '"' : ']';
            while (j < n && g[j] != close) j += g[j] == '\\' ? 2 : 1;
            if (j < n) j++;
            if (j > n) j = n;
        } else if (c == '{') { // a repetition count {m,n}
            while (j < n && g[j] != '}') j++;
            if (j < n) j++;
        } else if (word_char(c)) {
            while (j < n && word_char(g[j])) j++;
            sbuf_puts(out, prefix);
        }
        sbuf_append(out, g + i, j - i);
        i = j;
    }
}

static bool schema_gbnf(const char *schema, size_t len, const char *param, char **g, size_t *n, struct api_error *e) {
    if (lm_json_schema_to_gbnf(schema, len, g, n) == LM_OK) return true;
    return api_fail(e, 400, "invalid_request_error", "invalid_schema", param, "%s", lm_error_msg());
}

// One call in the family's format with tool i's arguments rule (prefix "t<i>-").
static void call_rule(struct sbuf *b, enum lm_chat_tool_format fmt, int32_t i, const char *name) {
    sbuf_printf(b, "call-%d ::= ", (int)i);
    if (fmt == LM_CHAT_TOOLS_QWEN)
        sbuf_printf(b, "\"<tool_call>\\n{\\\"name\\\": \\\"%s\\\", \\\"arguments\\\": \" t%d-root \"}\\n</tool_call>\"\n", name,
                    (int)i);
    else if (fmt == LM_CHAT_TOOLS_LLAMA3)
        sbuf_printf(b, "\"{\\\"name\\\": \\\"%s\\\", \\\"parameters\\\": \" t%d-root \"}\"\n", name, (int)i);
    else
        sbuf_printf(b, "\"{\\\"name\\\": \\\"%s\\\", \\\"arguments\\\": \" t%d-root \"}\"\n", name, (int)i);
}

// Tool i's arguments rule, prefixed "t<i>-" and appended to b.
static bool args_rule(const struct api_request *q, int32_t i, struct sbuf *b, struct api_error *e) {
    char *g = NULL, param[64], prefix[24];
    size_t n = 0;
    snprintf(param, sizeof param, "tools[%d].function.parameters", (int)i);
    if (!schema_gbnf(q->tools[i].parameters, strlen(q->tools[i].parameters), param, &g, &n, e)) return false;
    snprintf(prefix, sizeof prefix, "t%d-", (int)i);
    gbnf_prefix_rules(g, n, prefix, b);
    if (n && g[n - 1] != '\n') sbuf_puts(b, "\n");
    free(g);
    return true;
}

static bool tool_grammar(const struct api_request *q, enum lm_chat_tool_format fmt, struct sbuf *b, struct api_error *e) {
    const int32_t lo = q->tool_choice == API_TOOLS_NAMED ? q->tool_named : 0;
    const int32_t hi = q->tool_choice == API_TOOLS_NAMED ? q->tool_named + 1 : q->n_tools;
    const char *sep = fmt == LM_CHAT_TOOLS_GENERIC ? "\", \"" : "\"\\n\"";
    if (fmt == LM_CHAT_TOOLS_GENERIC) sbuf_puts(b, "root ::= \"{\\\"tool_calls\\\": [\" call");
    else sbuf_puts(b, "root ::= call");
    if (q->parallel_tool_calls && q->tool_choice != API_TOOLS_NAMED) sbuf_printf(b, " (%s call)*", sep);
    sbuf_puts(b, fmt == LM_CHAT_TOOLS_GENERIC ? " \"]}\"\ncall ::= " : "\ncall ::= ");
    for (int32_t i = lo; i < hi; i++) sbuf_printf(b, "%scall-%d", i > lo ? " | " : "", (int)i);
    sbuf_puts(b, "\n");
    for (int32_t i = lo; i < hi; i++) {
        call_rule(b, fmt, i, q->tools[i].name);
        if (!args_rule(q, i, b, e)) return false;
    }
    return true;
}

// tool_choice auto (Qwen and Llama 3 families): free text until a call opens, then a call to a
// declared tool in the form that opening begins (tools.c's parse_auto reads the same forms):
// the families' markers, or JSON whose "name" is a declared tool, bare, in an array or in a
// fenced block (the trigger holds the tool's name, so JSON that names no tool, such as an
// example the answer shows, stays free).
static const char *const k_markers[] = {"<tool_call>", "<|python_tag|>", "[TOOL_CALLS]"};
static const char *const k_name_forms[] = {"{\"name\": \"%s\"", "{\"name\":\"%s\"", "{ \"name\": \"%s\"",
                                           "{\n\"name\": \"%s\"", "{\n  \"name\": \"%s\"", "{\n    \"name\": \"%s\""};

// The triggers as one malloc'd block: a NULL-terminated array of pointers, then the strings:
// the markers and each tool's name forms, and the generic format's own opening.
static char **auto_triggers(const struct api_request *q, bool generic) {
    const size_t nf = sizeof k_name_forms / sizeof *k_name_forms, nm = sizeof k_markers / sizeof *k_markers;
    const size_t nt = nm + nf * (size_t)q->n_tools + generic;
    const size_t cap = (nt + 1) * sizeof(char *) + nt * (64 + 32) /* a name: at most 64 bytes */;
    char **t = malloc(cap);
    if (!t) return NULL;
    char *at = (char *)(t + nt + 1), *end = (char *)t + cap;
    size_t k = 0;
    if (generic) t[k++] = strcpy(at, "{\"tool_calls\""), at += strlen(at) + 1;
    for (size_t i = 0; i < nm; i++, at += strlen(at) + 1) t[k++] = strcpy(at, k_markers[i]);
    for (int32_t i = 0; i < q->n_tools; i++)
        for (size_t f = 0; f < nf; f++) {
            t[k++] = at;
            at += snprintf(at, (size_t)(end - at), k_name_forms[f], q->tools[i].name) + 1;
        }
    t[k] = NULL;
    return t;
}

static bool auto_grammar(const struct api_request *q, bool generic, struct sbuf *b, struct api_error *e) {
    const bool par = q->parallel_tool_calls;
    if (generic) // its own answer, as the prompt shows it (tokenizer/chat_tools.c)
        sbuf_puts(b, "tc-gen ::= \"{\" tc-ws \"\\\"tool_calls\\\"\" tc-ws \":\" tc-ws tc-arr tc-ws \"}\"\n");
    sbuf_printf(b, "root ::= tc-any tc-ws\ntc-any ::= \"<tool_call>\" tc-ws tc-call tc-ws \"</tool_call>\"%s"
                   " | \"<|python_tag|>\" tc-ws tc-call%s | \"[TOOL_CALLS]\" tc-ws (tc-arr | tc-mis%s)"
                   " | tc-call%s (tc-ws \"]\")? (tc-ws \"```\")?%s\n",
                par ? " (tc-ws \"<tool_call>\" tc-ws tc-call tc-ws \"</tool_call>\")*" : "",
                par ? " (tc-ws \";\" tc-ws tc-call)*" : "", par ? " (tc-ws \"[TOOL_CALLS]\" tc-mis)*" : "",
                par ? " (tc-ws [,;] tc-ws tc-call)*" : "", generic ? " | tc-gen" : "");
    sbuf_printf(b, "tc-arr ::= \"[\" tc-ws tc-call%s tc-ws \"]\"\n", par ? " (tc-ws \",\" tc-ws tc-call)*" : "");
    sbuf_puts(b, "tc-ws ::= [ \\t\\n]{0,8}\ntc-key ::= \"\\\"arguments\\\"\" | \"\\\"parameters\\\"\"\ntc-call ::= ");
    for (int32_t i = 0; i < q->n_tools; i++) sbuf_printf(b, "%stca-%d", i ? " | " : "", (int)i);
    sbuf_puts(b, "\ntc-mis ::= "); // Mistral's NAME[ARGS]{...}
    for (int32_t i = 0; i < q->n_tools; i++)
        sbuf_printf(b, "%s\"%s[ARGS]\" t%d-root", i ? " | " : "", q->tools[i].name, (int)i);
    sbuf_puts(b, "\n");
    for (int32_t i = 0; i < q->n_tools; i++) {
        sbuf_printf(b, "tca-%d ::= \"{\" tc-ws \"\\\"name\\\"\" tc-ws \":\" tc-ws \"\\\"%s\\\"\" tc-ws \",\" tc-ws tc-key tc-ws "
                       "\":\" tc-ws t%d-root tc-ws \"}\"\n", (int)i, q->tools[i].name, (int)i);
        if (!args_rule(q, i, b, e)) return false;
    }
    return true;
}

// gpt-oss (harmony): free text (the analysis, the answer) until a call's header to a declared
// tool ends with <|message|>, then that tool's arguments; the call's <|call|> ends the generation.
// Lazy for every tool_choice: while a grammar is active the control tokens that open the
// channels are masked, so "required" cannot force a call after the analysis (docs/server.md).
static const char *const k_harmony_forms[] = {
    "to=functions.%s <|constrain|>json<|message|>", "to=functions.%s<|constrain|>json<|message|>",
    "to=functions.%s<|channel|>commentary <|constrain|>json<|message|>",
    "to=functions.%s<|channel|>commentary json<|message|>"};
#define N_HARMONY_FORMS (sizeof k_harmony_forms / sizeof *k_harmony_forms)

static bool harmony_grammar(const struct api_request *q, char **gbnf, size_t *n, char ***triggers,
                            struct api_error *e) {
    const int32_t lo = q->tool_choice == API_TOOLS_NAMED ? q->tool_named : 0;
    const int32_t hi = q->tool_choice == API_TOOLS_NAMED ? q->tool_named + 1 : q->n_tools;
    const size_t nt = N_HARMONY_FORMS * (size_t)(hi - lo);
    const size_t cap = (nt + 1) * sizeof(char *) + nt * (64 + 80) /* a name: at most 64 bytes */;
    char **t = malloc(cap);
    struct sbuf b = {0};
    if (!t) return api_fail(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
    char *at = (char *)(t + nt + 1), *end = (char *)t + cap;
    size_t k = 0;
    sbuf_puts(&b, "root ::= ");
    for (int32_t i = lo; i < hi; i++) sbuf_printf(&b, "%sh-%d", i > lo ? " | " : "", (int)i);
    sbuf_puts(&b, "\n");
    for (int32_t i = lo; i < hi; i++) {
        sbuf_printf(&b, "h-%d ::= (", (int)i);
        for (size_t f = 0; f < N_HARMONY_FORMS; f++) {
            t[k++] = at;
            at += snprintf(at, (size_t)(end - at), k_harmony_forms[f], q->tools[i].name) + 1;
            sbuf_printf(&b, "%s\"%s\"", f ? " | " : "", t[k - 1]);
        }
        sbuf_printf(&b, ") t%d-root\n", (int)i);
        if (!args_rule(q, i, &b, e)) {
            sbuf_free(&b);
            free(t);
            return false;
        }
    }
    t[k] = NULL;
    if (b.oom) {
        sbuf_free(&b);
        free(t);
        return api_fail(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
    }
    *gbnf = b.p;
    *n = b.n;
    *triggers = t;
    return true;
}

// gpt-oss with response_format: the analysis stays free (the engine's grammar waits for the
// answer after the span), the final channel's message follows the schema, as llama.cpp's
// gpt-oss format writes it (<|channel|>final, an optional " <|constrain|>json" or " json", then
// <|message|>); <|return|> or <|call|> ends it (end-of-generation tokens, allowed once complete).
static bool harmony_format_grammar(const struct api_request *q, char **gbnf, size_t *n, struct api_error *e) {
    static const char obj[] = "{\"type\": \"object\"}";
    const bool schema = q->format == API_FORMAT_JSON_SCHEMA;
    char *g = NULL;
    size_t gn = 0;
    if (!schema_gbnf(schema ? q->schema : obj, schema ? q->schema_len : sizeof obj - 1, "response_format", &g, &gn, e))
        return false;
    struct sbuf b = {0};
    sbuf_puts(&b, "root ::= \"<|channel|>final\" (\" <|constrain|>json\" | \"<|constrain|>json\" | \" json\")? "
                  "\"<|message|>\" rf-root\n");
    gbnf_prefix_rules(g, gn, "rf-", &b);
    free(g);
    if (b.oom) {
        sbuf_free(&b);
        return api_fail(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
    }
    *gbnf = b.p;
    *n = b.n;
    return true;
}

bool tools_grammar(const struct api_request *q, enum lm_chat_tool_format fmt, char **gbnf, size_t *n,
                   char ***triggers, struct api_error *e) {
    *gbnf = NULL;
    *n = 0;
    *triggers = NULL;
    // gpt-oss: a call's arguments are constrained once its header is written (harmony_grammar); a
    // GBNF grammar constrains the whole answer after the analysis (channels and markers included);
    // a JSON format the final channel's message (api.c refuses one with tools in play)
    if (fmt == LM_CHAT_TOOLS_HARMONY && q->kind == API_CHAT && q->format != API_FORMAT_GRAMMAR) {
        if (q->format != API_FORMAT_TEXT) return harmony_format_grammar(q, gbnf, n, e);
        if (q->tool_choice == API_TOOLS_NONE || q->n_tools == 0) return true;
        return harmony_grammar(q, gbnf, n, triggers, e);
    }
    if (q->format == API_FORMAT_GRAMMAR) {
        *gbnf = malloc(q->grammar_len + 1);
        if (!*gbnf) return api_fail(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
        memcpy(*gbnf, q->grammar, q->grammar_len + 1);
        *n = q->grammar_len;
        return true;
    }
    if (q->format == API_FORMAT_JSON_OBJECT) {
        static const char obj[] = "{\"type\": \"object\"}";
        return schema_gbnf(obj, sizeof obj - 1, "response_format", gbnf, n, e);
    }
    if (q->format == API_FORMAT_JSON_SCHEMA)
        return schema_gbnf(q->schema, q->schema_len, q->kind == API_CHAT ? "response_format" : "json_schema", gbnf, n, e);
    if (q->tool_choice == API_TOOLS_NONE || q->n_tools == 0) return true;
    struct sbuf b = {0};
    const bool loose = q->tool_choice == API_TOOLS_AUTO, generic = fmt == LM_CHAT_TOOLS_GENERIC;
    if (!(loose ? auto_grammar(q, generic, &b, e) : tool_grammar(q, fmt, &b, e))) {
        sbuf_free(&b);
        return false;
    }
    if (b.oom) {
        sbuf_free(&b);
        return api_fail(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
    }
    if (loose && !(*triggers = auto_triggers(q, generic))) {
        sbuf_free(&b);
        return api_fail(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
    }
    *gbnf = b.p;
    *n = b.n;
    return true;
}

// ================================================================ compiled grammars

struct gentry {
    char *key;  // gbnf, NUL, trigger
    size_t n;
    struct lm_grammar *g;
    uint64_t used;
};

struct gcache {
    pthread_mutex_t mu;
    struct gentry e[GCACHE_ENTRIES];
    uint64_t tick;
};

struct gcache *gcache_new(void) {
    struct gcache *c = calloc(1, sizeof *c);
    if (c) pthread_mutex_init(&c->mu, NULL);
    return c;
}

void gcache_free(struct gcache *c) {
    if (!c) return;
    for (int i = 0; i < GCACHE_ENTRIES; i++) {
        free(c->e[i].key);
        lm_grammar_free(c->e[i].g);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

enum lm_status gcache_get(struct gcache *c, const struct lm_tokenizer *tok, const char *gbnf, size_t n,
                          const char *const *triggers, struct lm_grammar **out) {
    *out = NULL;
    size_t kn = n + 1;
    int32_t nt = 0;
    for (; triggers && triggers[nt]; nt++) kn += strlen(triggers[nt]) + 1;
    char *key = malloc(kn);
    if (!key) return lm_error_set(LM_ERR_NOMEM, "gcache_get: out of memory");
    memcpy(key, gbnf, n);
    key[n] = 0;
    for (size_t at = n + 1, i = 0; i < (size_t)nt; i++) { // each trigger and a NUL
        const size_t l = strlen(triggers[i]) + 1;
        memcpy(key + at, triggers[i], l);
        at += l;
    }
    if (c) {
        pthread_mutex_lock(&c->mu);
        for (int i = 0; i < GCACHE_ENTRIES; i++)
            if (c->e[i].g && c->e[i].n == kn && memcmp(c->e[i].key, key, kn) == 0) {
                c->e[i].used = ++c->tick;
                *out = lm_grammar_ref(c->e[i].g);
                break;
            }
        pthread_mutex_unlock(&c->mu);
    }
    if (*out) {
        free(key);
        return LM_OK;
    }
    struct lm_grammar_options opt = lm_grammar_options_default();
    opt.triggers = triggers;
    opt.n_triggers = nt;
    const enum lm_status st = lm_grammar_compile(out, tok, gbnf, n, &opt); // outside the lock
    if (st != LM_OK || !c) {
        free(key);
        return st;
    }
    pthread_mutex_lock(&c->mu);
    int v = 0; // the least recently used entry (an empty one first)
    for (int i = 1; i < GCACHE_ENTRIES && c->e[v].g; i++)
        if (!c->e[i].g || c->e[i].used < c->e[v].used) v = i;
    struct gentry old = c->e[v];
    c->e[v] = (struct gentry){key, kn, lm_grammar_ref(*out), ++c->tick};
    pthread_mutex_unlock(&c->mu);
    free(old.key);
    lm_grammar_free(old.g);
    return LM_OK;
}
