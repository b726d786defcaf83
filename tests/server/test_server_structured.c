// LM_TEST_LABELS: model;server
// The grammars lumen serve builds per request (src/server/structured.c), compiled for the
// default model's tokenizer: the text of a valid answer is accepted token by token and ends a
// sentence; invalid ones are refused; a lazy tool grammar lets text through until its marker.
// Requests come through the server's own parser (api_parse_generate).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "lm_test.h"
#include "tools.h"

static const struct lm_tokenizer *g_tok;

static const char k_tools[] =
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": {\"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\", "
    "\"unit\"], \"additionalProperties\": false}}}, {\"type\": \"function\", \"function\": {\"name\": \"noop\"}}]";

// Compiles the grammar of body (a chat request unless it has "prompt") for format fmt.
static struct lm_grammar *grammar_of(const char *body, enum lm_chat_tool_format fmt) {
    struct api_request q;
    struct api_error e;
    const struct api_limits lim = {100000, 64};
    const enum api_kind kind = strstr(body, "\"prompt\"") ? API_COMPLETION : API_CHAT;
    if (!api_parse_generate(body, strlen(body), kind, 1000, &lim, &q, &e)) {
        CHECKF(0, "parse: %s", e.message);
        return NULL;
    }
    char *gbnf = NULL;
    size_t n = 0;
    char **triggers = NULL;
    struct lm_grammar *g = NULL;
    if (!tools_grammar(&q, fmt, &gbnf, &n, &triggers, &e)) {
        CHECKF(0, "tools_grammar: %s", e.message);
    } else {
        struct lm_grammar_options opt = lm_grammar_options_default();
        opt.triggers = (const char *const *)triggers;
        for (opt.n_triggers = 0; triggers && triggers[opt.n_triggers];) opt.n_triggers++;
        const enum lm_status st = lm_grammar_compile(&g, g_tok, gbnf, n, &opt);
        CHECKF(st == LM_OK, "compile: %s\n%s", lm_error_msg(), gbnf);
    }
    free(gbnf);
    free(triggers);
    api_request_free(&q);
    return g;
}

// text is accepted token by token (as the tokenizer splits it) and is a sentence at its end.
static bool follows(struct lm_grammar *g, const char *text, bool *ends) {
    struct lm_grammar_matcher *m = NULL;
    if (!g || lm_grammar_matcher_init(&m, g) != LM_OK) return false;
    int32_t *ids = NULL;
    size_t n = 0;
    bool ok = lm_tokenize(g_tok, text, strlen(text), false, false, &ids, &n) == LM_OK;
    for (size_t i = 0; ok && i < n; i++) ok = lm_grammar_matcher_accept(m, ids[i]);
    *ends = ok && lm_grammar_matcher_can_end(m);
    free(ids);
    lm_grammar_matcher_free(m);
    return ok;
}

static void expect(struct lm_grammar *g, const char *text, bool accepted, bool ends) {
    bool e = false;
    const bool a = follows(g, text, &e);
    CHECKF(a == accepted && (!accepted || e == ends), "'%s': accepted %d (want %d), ends %d (want %d)", text, a,
           accepted, e, ends);
}

static void test_tools(void) {
    char body[2048];
    static const struct {
        enum lm_chat_tool_format fmt;
        const char *call, *bad_args, *prefix;
    } F[] = {
        {LM_CHAT_TOOLS_QWEN, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>",
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"k\"}}\n</tool_call>", "<tool_call>\n"},
        {LM_CHAT_TOOLS_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"c\"}}",
         "{\"name\": \"get_weather\", \"parameters\": {\"city\": 3, \"unit\": \"c\"}}", "{\"name\": "},
        {LM_CHAT_TOOLS_GENERIC, "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}]}",
         "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"c\"}}]}", "{\"tool_calls\": ["},
    };
    for (size_t f = 0; f < 3; f++) {
        snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], %s, \"tool_choice\": \"required\"}", k_tools);
        struct lm_grammar *g = grammar_of(body, F[f].fmt);
        expect(g, F[f].call, true, true);
        expect(g, F[f].bad_args, false, false);
        expect(g, "Sure, let me", false, false);       // required: a call from the first token
        expect(g, F[f].prefix, true, false);
        lm_grammar_free(g);
        // named: only noop
        snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], %s, \"tool_choice\": "
                 "{\"type\": \"function\", \"function\": {\"name\": \"noop\"}}, \"parallel_tool_calls\": false}", k_tools);
        g = grammar_of(body, F[f].fmt);
        expect(g, F[f].call, false, false);
        lm_grammar_free(g);
        // auto: free text until the marker, then a valid call
        snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], %s}", k_tools);
        g = grammar_of(body, F[f].fmt);
        char text[512];
        snprintf(text, sizeof text, "Let me look that up. %s", F[f].call);
        if (F[f].fmt != LM_CHAT_TOOLS_GENERIC) expect(g, text, true, true);
        expect(g, "Just an answer, no call.", true, true);
        expect(g, F[f].bad_args, false, false);
        lm_grammar_free(g);
    }
}

// tool_choice auto in the Qwen / Llama 3 families: what real models write opens a call (a fenced
// ```json block, bare JSON, an array, the markers), each constrained once it names a declared tool; a
// named function gives one call even with parallel_tool_calls left at true.
static void test_auto_forms(void) {
    char body[2048];
    snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], %s}", k_tools);
    struct lm_grammar *g = grammar_of(body, LM_CHAT_TOOLS_QWEN);
    const char *call = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}";
    char text[512];
    snprintf(text, sizeof text, "I'll check.\n```json\n%s\n```", call);
    expect(g, text, true, true);
    snprintf(text, sizeof text, "[%s, {\"name\": \"noop\", \"arguments\": {}}]", call);
    expect(g, text, true, true);
    snprintf(text, sizeof text, "Sure: %s\n", call);
    expect(g, text, true, true);
    snprintf(text, sizeof text, "<|python_tag|>%s", call);
    expect(g, text, true, true);
    expect(g, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\", \"unit\": \"f\"}[TOOL_CALLS]noop[ARGS]{}", true, true);
    expect(g, "[TOOL_CALLS]other[ARGS]{}", false, false);
    expect(g, "Example: {\"name\": \"Alice\", \"age\": 3}", true, true); // names no tool: free text
    expect(g, "{\"name\": \"get_weather\", \"arguments\": {\"city\": 1", false, false); // a tool: its arguments
    expect(g, "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": 1", false, false); // bad arguments
    expect(g, "No call: {x} [y] `z`.", true, true);
    expect(g, "```json\n{\"name\": \"Alice\"}\n```", true, true); // a fenced example that names no tool
    lm_grammar_free(g);
    g = grammar_of(body, LM_CHAT_TOOLS_GENERIC); // the generic format: its own answer and the same forms
    snprintf(text, sizeof text, "{\"tool_calls\": [%s]}", call);
    expect(g, text, true, true);
    expect(g, call, true, true);
    expect(g, "{\"response\": \"Hello\"}", true, true);
    expect(g, "{\"tool_calls\": [{\"name\": \"nope\"", false, false);
    lm_grammar_free(g);
    snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], %s, \"tool_choice\": "
             "{\"type\": \"function\", \"function\": {\"name\": \"noop\"}}}", k_tools);
    g = grammar_of(body, LM_CHAT_TOOLS_QWEN);
    const char *one = "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>";
    expect(g, one, true, true);
    snprintf(text, sizeof text, "%s\n%s", one, one);
    expect(g, text, false, false);
    lm_grammar_free(g);
}

static void test_formats(void) {
    struct lm_grammar *g = grammar_of("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": "
                                      "{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"p\", \"schema\": {\"type\": "
                                      "\"object\", \"properties\": {\"age\": {\"type\": \"integer\", \"maximum\": 130}}, "
                                      "\"required\": [\"age\"]}}}}", LM_CHAT_TOOLS_GENERIC);
    expect(g, "{\"age\": 42}", true, true);
    expect(g, "{\"age\": 420}", false, false);
    lm_grammar_free(g);
    g = grammar_of("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": {\"type\": \"json_object\"}}",
                   LM_CHAT_TOOLS_GENERIC);
    expect(g, "{\"a\": [1, true, null]}", true, true);
    expect(g, "[1]", false, false);
    lm_grammar_free(g);
    g = grammar_of("{\"prompt\": \"x\", \"grammar\": \"root ::= (\\\"yes\\\" | \\\"no\\\")\"}", LM_CHAT_TOOLS_GENERIC);
    expect(g, "yes", true, true);
    expect(g, "maybe", false, false);
    lm_grammar_free(g);
    g = grammar_of("{\"prompt\": \"x\", \"json_schema\": {\"enum\": [\"a\", \"b\"]}}", LM_CHAT_TOOLS_GENERIC);
    expect(g, "\"b\"", true, true);
    lm_grammar_free(g);
}

// The server's cache of compiled grammars: the same text and trigger give the same grammar,
// another trigger another one; the least recently used entry goes; a failure keeps nothing.
static void test_gcache(void) {
    struct gcache *c = gcache_new();
    const char *g1 = "root ::= \"a\" | \"b\"";
    static const char *const trig[] = {"a", NULL};
    struct lm_grammar *a = NULL, *b = NULL, *d = NULL;
    CHECK(gcache_get(c, g_tok, g1, strlen(g1), NULL, &a) == LM_OK);
    CHECK(gcache_get(c, g_tok, g1, strlen(g1), NULL, &b) == LM_OK && a == b);
    CHECK(gcache_get(c, g_tok, g1, strlen(g1), trig, &d) == LM_OK && d != a);
    lm_grammar_free(b);
    lm_grammar_free(d);
    for (int i = 0; i < GCACHE_ENTRIES; i++) { // evicts both
        char g[64];
        snprintf(g, sizeof g, "root ::= \"x%d\"", i);
        struct lm_grammar *x = NULL;
        CHECK(gcache_get(c, g_tok, g, strlen(g), NULL, &x) == LM_OK);
        lm_grammar_free(x);
    }
    CHECK(gcache_get(c, g_tok, g1, strlen(g1), NULL, &b) == LM_OK && b != a);
    struct lm_grammar *bad = (struct lm_grammar *)1;
    CHECK(gcache_get(c, g_tok, "root ::= nope", 13, NULL, &bad) == LM_ERR_ARG && bad == NULL);
    CHECK(gcache_get(NULL, g_tok, g1, strlen(g1), NULL, &d) == LM_OK && d); // no cache: compiled
    lm_grammar_free(a);
    lm_grammar_free(b);
    lm_grammar_free(d);
    gcache_free(c);
}

// gpt-oss's harmony: the analysis and any answer free, a call's arguments constrained once its
// header to a declared tool ends (lazy for every tool_choice); response_format: the final
// channel's message.
static void test_harmony(void) {
    char body[2048];
    static const char head[] = "<|channel|>analysis<|message|>Let me check {\"x\": 1}.<|end|><|start|>assistant";
    static const char *const calls[] = {
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>",
        " to=functions.get_weather<|channel|>commentary json<|message|>"};
    for (int tc = 0; tc < 2; tc++) {
        snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], %s%s}", k_tools,
                 tc ? ", \"tool_choice\": \"required\"" : "");
        struct lm_grammar *g = grammar_of(body, LM_CHAT_TOOLS_HARMONY);
        char text[512];
        for (int f = 0; f < 2; f++) {
            snprintf(text, sizeof text, "%s%s{\"city\": \"Paris\", \"unit\": \"c\"}", head, calls[f]);
            expect(g, text, true, true);
            snprintf(text, sizeof text, "%s%s{\"city\": \"Paris\", \"unit\": \"k\"}", head, calls[f]);
            expect(g, text, false, false);
        }
        snprintf(text, sizeof text, "%s<|channel|>final<|message|>No call: to=functions.other.", head);
        expect(g, text, true, true);
        lm_grammar_free(g);
    }
    // response_format: the final channel's message follows the schema (the analysis before it is
    // the engine's span, which the grammar never sees); the header's constraint forms are optional
    static const char fmt[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": "
                              "{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"w\", \"schema\": {\"type\": "
                              "\"object\", \"properties\": {\"t\": {\"type\": \"integer\"}}, \"required\": [\"t\"]}}}}";
    struct lm_grammar *g = grammar_of(fmt, LM_CHAT_TOOLS_HARMONY);
    expect(g, "<|channel|>final<|message|>{\"t\": 3}", true, true);
    expect(g, "<|channel|>final <|constrain|>json<|message|>{\"t\": 3}", true, true);
    expect(g, "<|channel|>final json<|message|>{\"t\": 3", true, false);
    expect(g, "<|channel|>final<|message|>{\"t\": \"3\"}", false, false);
    expect(g, "<|channel|>final<|message|>Sunny.", false, false);
    expect(g, "<|channel|>commentary<|message|>{\"t\": 3}", false, false);
    lm_grammar_free(g);
}

int main(void) {
    struct lm_model *m = NULL;
    if (lm_model_load(&m, lm_test_model_path(), NULL) != LM_OK) {
        fprintf(stderr, "FAIL: %s\n", lm_error_msg());
        return 1;
    }
    g_tok = lm_model_tokenizer(m);
    test_tools();
    test_auto_forms();
    test_formats();
    test_gcache();
    test_harmony();
    lm_model_free(m);
    return lm_test_finish();
}
