// Tool calls parsed from model output (src/server/tools.c) in the three formats, whole and fed
// piece by piece (a stream: the content and arguments only ever grow, and what is sent equals
// the whole answer), malformed output, and the GBNF rule prefixing of structured.c.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_test.h"
#include "tools.h"

struct want {
    const char *content; // NULL: null (calls only)
    int n_calls;
    const char *names[3];
    const char *args[3];
};

// Parses text whole, then again in pieces of every size 1..7: the same content and calls, the
// content and each call's arguments growing only.
// Auto mode (tools_parser_declare) when set: the tools the request declared.
static const struct api_tool *g_decl;
static int32_t g_n_decl;

static void check(enum lm_chat_tool_format fmt, bool parallel, const char *text, const struct want *w) {
    struct tools_parser p;
    tools_parser_init(&p, fmt, parallel, 42);
    if (g_decl) tools_parser_declare(&p, g_decl, g_n_decl);
    tools_parser_feed(&p, text, strlen(text), true);
    const bool null_ok = w->content ? !p.content_null && p.content.n == strlen(w->content) &&
                                          (!p.content.n || memcmp(p.content.p, w->content, p.content.n) == 0)
                                    : p.content_null;
    CHECKF(null_ok, "fmt %d: content '%.*s' (null %d) for %s", (int)fmt, (int)p.content.n, p.content.p ? p.content.p : "",
           p.content_null, text);
    CHECKF(p.n_calls == w->n_calls, "fmt %d: %d calls, want %d, for %s", (int)fmt, p.n_calls, w->n_calls, text);
    for (int k = 0; k < p.n_calls && k < w->n_calls; k++) {
        CHECKF(p.calls[k].name.p && !strcmp(p.calls[k].name.p, w->names[k]), "call %d name '%s'", k, p.calls[k].name.p);
        CHECKF(p.calls[k].args.p && !strcmp(p.calls[k].args.p, w->args[k]), "call %d args '%s' want '%s'", k,
               p.calls[k].args.p, w->args[k]);
        CHECK(strncmp(p.calls[k].id, "call_", 5) == 0 && strlen(p.calls[k].id) == 29);
    }
    for (size_t step = 1; step <= 7; step++) {
        struct tools_parser q;
        tools_parser_init(&q, fmt, parallel, 42);
        if (g_decl) tools_parser_declare(&q, g_decl, g_n_decl);
        struct sbuf sent = {0}; // the content as a stream would have sent it
        size_t n = strlen(text);
        for (size_t i = 0; i < n; i += step) {
            const size_t k = i + step < n ? step : n - i;
            tools_parser_feed(&q, text + i, k, false);
            CHECK(q.content.n >= sent.n && memcmp(q.content.p ? q.content.p : "", sent.p ? sent.p : "", sent.n) == 0);
            sbuf_append(&sent, q.content.p + sent.n, q.content.n - sent.n);
        }
        tools_parser_feed(&q, "", 0, true);
        CHECKF(q.content.n == p.content.n && (!q.content.n || !memcmp(q.content.p, p.content.p, q.content.n)),
               "step %zu: streamed content '%s' != whole '%s'", step, q.content.p, p.content.p);
        CHECKF(q.n_calls == p.n_calls, "step %zu: %d calls streamed, %d whole", step, q.n_calls, p.n_calls);
        for (int c = 0; c < q.n_calls && c < p.n_calls; c++) {
            CHECK(!strcmp(q.calls[c].id, p.calls[c].id));
            CHECKF(q.calls[c].args.p && !strcmp(q.calls[c].args.p, p.calls[c].args.p), "step %zu call %d: '%s' vs '%s'",
                   step, c, q.calls[c].args.p, p.calls[c].args.p);
        }
        sbuf_free(&sent);
        tools_parser_free(&q);
    }
    tools_parser_free(&p);
}

static void test_qwen(void) {
    const enum lm_chat_tool_format Q = LM_CHAT_TOOLS_QWEN;
    check(Q, true, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>",
          &(struct want){NULL, 1, {"get_weather"}, {"{\"city\":\"Paris\",\"days\":2}"}});
    check(Q, true, "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": \"1 2\"}}\n</tool_call>\n"
                   "<tool_call>\n{\"arguments\": {}, \"name\": \"b\"}\n</tool_call>",
          &(struct want){"Let me check.", 2, {"a", "b"}, {"{\"x\":\"1 2\"}", "{}"}});
    // parallel_tool_calls false: the first call only
    check(Q, false, "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>",
          &(struct want){NULL, 1, {"a"}, {"{}"}});
    // plain text, with a '<' that is not a marker and trailing white space
    check(Q, true, "a < b <tool and done.\n", &(struct want){"a < b <tool and done.\n", 0, {0}, {0}});
    // arguments written as a string of JSON
    check(Q, true, "<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"k\\\": [1, 2]}\"}</tool_call>",
          &(struct want){NULL, 1, {"a"}, {"{\"k\":[1,2]}"}});
    // cut short (max_tokens): the arguments so far
    check(Q, true, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"q\": \"hel",
          &(struct want){NULL, 1, {"a"}, {"{\"q\":\"hel"}});
    // malformed: no name, not an object
    check(Q, true, "<tool_call>\n{\"arguments\": {}}\n</tool_call>", &(struct want){"", 0, {0}, {0}});
    check(Q, true, "x<tool_call>[1]</tool_call>", &(struct want){"x", 0, {0}, {0}});
}

static void test_llama3(void) {
    const enum lm_chat_tool_format L = LM_CHAT_TOOLS_LLAMA3;
    check(L, true, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
          &(struct want){NULL, 1, {"get_weather"}, {"{\"city\":\"Paris\"}"}});
    check(L, true, "{\"type\": \"function\", \"name\": \"f\", \"parameters\": {\"a\": [1, {\"b\": null}]}}; {\"name\": \"g\", \"arguments\": {}}",
          &(struct want){NULL, 2, {"f", "g"}, {"{\"a\":[1,{\"b\":null}]}", "{}"}});
    check(L, true, "Use {x} here", &(struct want){"Use {x} here", 0, {0}, {0}});
    check(L, true, "Sure: {\"name\": \"f\", \"parameters\": {}}", &(struct want){"Sure:", 1, {"f"}, {"{}"}});
}

static void test_generic(void) {
    const enum lm_chat_tool_format G = LM_CHAT_TOOLS_GENERIC;
    check(G, true, "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": {\"s\": \"} ]\"}}]}",
          &(struct want){NULL, 2, {"f", "g"}, {"{\"a\":1}", "{\"s\":\"} ]\"}"}});
    check(G, true, "{\"response\": \"Hello \\\"you\\\" \\u00e9\\ud83d\\ude00\\n\"}", &(struct want){"Hello \"you\" \xc3\xa9\xf0\x9f\x98\x80\n", 0, {0}, {0}});
    check(G, true, "{\"tool_call\": {\"name\": \"f\", \"arguments\": {}}}", &(struct want){NULL, 1, {"f"}, {"{}"}});
    check(G, true, "Just text {\"tool_calls\": 1}", &(struct want){"Just text {\"tool_calls\": 1}", 0, {0}, {0}});
    check(G, true, "{\"other\": 1}", &(struct want){"{\"other\": 1}", 0, {0}, {0}});
    check(G, false, "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"arguments\": {}}]}",
          &(struct want){NULL, 1, {"f"}, {"{}"}});
}

// Auto mode on outputs recorded from real models (Qwen2.5-Coder 0.5B / 1.5B Instruct wrote the
// bare and fenced forms with tool_choice auto; the markers are their families' documented ones).
static void test_auto(void) {
    static const struct api_tool decl[] = {{"get_weather", "{}", false}, {"search_code", "{}", false}};
    g_decl = decl;
    g_n_decl = 2;
    const enum lm_chat_tool_format Q = LM_CHAT_TOOLS_QWEN, L = LM_CHAT_TOOLS_LLAMA3;
    const char *w1 = "{\"city\":\"Paris\",\"unit\":\"celsius\"}";
    // bare JSON (Qwen2.5-Coder-1.5B)
    check(Q, true, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}",
          &(struct want){NULL, 1, {"get_weather"}, {w1}});
    // a fenced ```json block (Qwen2.5-Coder-0.5B), and the same with text before it
    check(Q, true, "```json\n{\n  \"name\": \"get_weather\",\n  \"arguments\": {\n    \"city\": \"Paris\",\n    \"unit\": \"celsius\"\n  }\n}\n```",
          &(struct want){NULL, 1, {"get_weather"}, {w1}});
    check(Q, true, "I'll check the weather.\n\n```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n```\n",
          &(struct want){"I'll check the weather.", 1, {"get_weather"}, {w1}});
    // an array of calls; parallel false keeps the first
    const char *arr = "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, {\"name\": \"search_code\", \"arguments\": {\"query\": \"fn main\"}}]";
    check(Q, true, arr, &(struct want){NULL, 2, {"get_weather", "search_code"}, {"{\"city\":\"Oslo\"}", "{\"query\":\"fn main\"}"}});
    check(Q, false, arr, &(struct want){NULL, 1, {"get_weather"}, {"{\"city\":\"Oslo\"}"}});
    // JSON that names no declared tool, and other code blocks, stay text
    check(Q, true, "{\"name\": \"Alice\", \"age\": 3}", &(struct want){"{\"name\": \"Alice\", \"age\": 3}", 0, {0}, {0}});
    check(Q, true, "Try:\n```python\nd = {\"name\": \"x\"}\n```\nDone [1].", &(struct want){"Try:\n```python\nd = {\"name\": \"x\"}\n```\nDone [1].", 0, {0}, {0}});
    check(Q, true, "```json\n{\"a\": 1}\n```", &(struct want){"```json\n{\"a\": 1}\n```", 0, {0}, {0}});
    // the families' markers: Qwen, Llama 3.x's python tag, Mistral's
    check(Q, true, "Sure.\n<tool_call>\n{\"name\": \"search_code\", \"arguments\": {\"query\": \"x\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>",
          &(struct want){"Sure.", 2, {"search_code", "get_weather"}, {"{\"query\":\"x\"}", "{}"}});
    check(L, true, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}",
          &(struct want){NULL, 1, {"get_weather"}, {"{\"city\":\"Rome\"}"}});
    check(L, true, "[TOOL_CALLS] [{\"name\": \"search_code\", \"arguments\": {\"query\": \"y\"}}]",
          &(struct want){NULL, 1, {"search_code"}, {"{\"query\":\"y\"}"}});
    // Mistral's newer form, one call or two; a name that is no declared tool stays text
    check(L, true, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}[TOOL_CALLS]search_code[ARGS]{\"query\": \"z\"}",
          &(struct want){NULL, 2, {"get_weather", "search_code"}, {"{\"city\":\"Rome\"}", "{\"query\":\"z\"}"}});
    check(L, true, "[TOOL_CALLS]other[ARGS]{}", &(struct want){"[TOOL_CALLS]other[ARGS]{}", 0, {0}, {0}});
    // text, then a bare call (the text stays content)
    check(Q, true, "The weather in Paris: {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
          &(struct want){"The weather in Paris:", 1, {"get_weather"}, {"{\"city\":\"Paris\"}"}});
    check(Q, true, "a < b and `x` [see] {} done", &(struct want){"a < b and `x` [see] {} done", 0, {0}, {0}});
    // the generic format (Gemma 3 and others): its own answers, and the same forms as the others
    const enum lm_chat_tool_format G = LM_CHAT_TOOLS_GENERIC;
    check(G, true, "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]}",
          &(struct want){NULL, 1, {"get_weather"}, {"{\"city\":\"Paris\"}"}});
    check(G, true, "{\"response\": \"Hi there\"}", &(struct want){"Hi there", 0, {0}, {0}});
    check(G, true, " {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
          &(struct want){NULL, 1, {"get_weather"}, {"{\"city\":\"Paris\"}"}});
    check(G, true, "Sure.\n```json\n{\"name\": \"search_code\", \"arguments\": {\"query\": \"q\"}}\n```",
          &(struct want){"Sure.", 1, {"search_code"}, {"{\"query\":\"q\"}"}});
    check(G, true, "{\"name\": \"Bob\"} is JSON.", &(struct want){"{\"name\": \"Bob\"} is JSON.", 0, {0}, {0}});
    check(G, true, "Plain text.", &(struct want){"Plain text.", 0, {0}, {0}});
    // Gemma's ```tool_code form (its function-calling guide's): Python calls with literals
    check(G, true, "```tool_code\nget_weather(city=\"Paris\", unit='celsius')\n```",
          &(struct want){NULL, 1, {"get_weather"}, {w1}});
    check(G, true, "I'll look.\n\n```tool_code\nsearch_code(query=\"fn main\", limit=5, exact=True, "
                   "paths=['src', \"li\\\"b\"], opts={'a': None, \"b\": -1.5e3, 'c': (1, False)},)\n```\n",
          &(struct want){"I'll look.", 1, {"search_code"},
                         {"{\"query\":\"fn main\",\"limit\":5,\"exact\":true,\"paths\":[\"src\",\"li\\\"b\"],"
                          "\"opts\":{\"a\":null,\"b\":-1.5e3,\"c\":[1,false]}}"}});
    const char *two = "```tool_code\nget_weather(city='Oslo')\nsearch_code(query=\"x\\ny\")\n```";
    check(Q, true, two, &(struct want){NULL, 2, {"get_weather", "search_code"},
                                       {"{\"city\":\"Oslo\"}", "{\"query\":\"x\\ny\"}"}});
    check(Q, false, two, &(struct want){NULL, 1, {"get_weather"}, {"{\"city\":\"Oslo\"}"}});
    check(G, true, "```tool_code\nget_weather()\n```", &(struct want){NULL, 1, {"get_weather"}, {"{}"}});
    // not a call: an undeclared name, positional arguments, an expression, a call cut short
    const char *nots[] = {"```tool_code\nprint(get_weather(city='Paris'))\n```", "```tool_code\nget_weather('Paris')\n```",
                          "Run:\n```tool_code\nget_weather(city=x + 1)\n```", "```tool_code\nget_weather(city='Par"};
    for (size_t i = 0; i < sizeof nots / sizeof *nots; i++) check(G, true, nots[i], &(struct want){nots[i], 0, {0}, {0}});
    g_decl = NULL;
    g_n_decl = 0;
}

// Random bytes and cut-up valid outputs: no crash, no read past the text (ASan), content grows.
static void test_garbage(void) {
    static const char alphabet[] = "{}[]\":,\\ \nnameargumentsparameterstool_callsresponse<tool_call></tool_call>u0d8`json[TOOL_CALLS]"
                                   "tool_code()='TrueNone-1.5e";
    for (int it = 0; it < 3000; it++) {
        char buf[96];
        const size_t n = (size_t)(lm_test_rng_u64() % sizeof buf);
        for (size_t i = 0; i < n; i++) buf[i] = alphabet[lm_test_rng_u64() % (sizeof alphabet - 1)];
        for (int f = 0; f < 4; f++) {
            struct tools_parser p;
            static const struct api_tool decl[] = {{"name", "{}", false}};
            tools_parser_init(&p, (enum lm_chat_tool_format)(f % 3), true, 1);
            if (f == 3) tools_parser_declare(&p, decl, 1); // auto mode
            size_t last = 0;
            for (size_t i = 0; i < n; i++) {
                tools_parser_feed(&p, buf + i, 1, false);
                CHECK(p.content.n >= last);
                last = p.content.n;
            }
            tools_parser_feed(&p, "", 0, true);
            CHECK(p.content.n >= last && !p.oom);
            tools_parser_free(&p);
        }
    }
}

static void test_prefix(void) {
    const char *g = "root ::= obj # the root\nobj ::= \"{\" [a-z\\]x]{1,3} ws-1 \"\\\"root\\\"\" \"}\"\nws-1 ::= [ \\t]*\n";
    struct sbuf out = {0};
    gbnf_prefix_rules(g, strlen(g), "t0-", &out);
    const char *want = "t0-root ::= t0-obj # the root\nt0-obj ::= \"{\" [a-z\\]x]{1,3} t0-ws-1 \"\\\"root\\\"\" \"}\"\n"
                       "t0-ws-1 ::= [ \\t]*\n";
    CHECKF(out.p && !strcmp(out.p, want), "prefixed: %s", out.p);
    sbuf_free(&out);
    gbnf_prefix_rules("\"abc", 4, "p-", &out); // an unterminated literal: copied, no overrun
    CHECK(out.p && !strcmp(out.p, "\"abc"));
    sbuf_free(&out);
}

int main(void) {
    test_qwen();
    test_llama3();
    test_generic();
    test_auto();
    test_garbage();
    test_prefix();
    return lm_test_finish();
}
