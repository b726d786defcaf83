// Chat prompts with tools against the official templates' output (tests/golden/chat_tools/,
// written by tools/gen_golden_chat_tools.py from Qwen 3's, Qwen 2.5's and Llama 3.1's Jinja
// templates), the generic format (Gemma) against hand-checked text, and malformed input.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_test.h"
#include "lm_test_file.h"
#include "lumen.h"

// The goldens' tools, written with other spacing and escapes (the output is json.dumps').
static const char k_tools[] =
    "[ {\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather now in a "
    "city \\u2014 \\u00b0C, \\\"quoted\\\"\\\\path\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":"
    "{\"type\":\"string\",\"description\":\"the city\"},\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\""
    ":7}},\"required\":[\"city\"],\"additionalProperties\":false}}},\n {\"type\":\"function\",\"function\":{"
    "\"name\":\"noop\",\"description\":\"does nothing\",\"parameters\":{\"type\":\"object\",\"properties\":{ }}}} ]";

struct tcase {
    const char *name;
    struct lm_chat_msg msgs[8];
    struct lm_chat_msg_tools parts[8];
    size_t n;
    bool tools;
};

static const struct lm_chat_tool_call k_call1[] = {{"call_1", "get_weather", "{\"city\":\"Paris\",\n \"days\": 2}"}};
static const struct lm_chat_tool_call k_call2[] = {{"call_a", "get_weather", "{\"city\": \"Paris\"}"},
                                                   {"call_b", "get_weather", "{ \"city\" : \"Rome\" }"}};
static const struct lm_chat_tool_call k_call3[] = {{"call_1", "get_weather", "{\"city\":\"Paris\"}"}};

static const struct tcase k_cases[] = {
    {"system", {{"system", "You are terse."}, {"user", "Weather in Paris?"}}, {{0}}, 2, true},
    {"call",
     {{"user", "Weather in Paris?"}, {"assistant", ""}, {"tool", "{\"temp\": 21}"}},
     {{0}, {k_call1, 1, NULL}, {NULL, 0, "call_1"}},
     3, true},
    {"parallel",
     {{"system", "Be brief."}, {"user", "Paris and Rome?"}, {"assistant", "Checking both."}, {"tool", "sunny"},
      {"tool", "rain"}, {"assistant", "Paris sunny, Rome rain."}, {"user", "Thanks"}},
     {{0}, {0}, {k_call2, 2, NULL}, {NULL, 0, "call_a"}, {NULL, 0, "call_b"}, {0}, {0}},
     7, true},
    {"history",
     {{"user", "Weather in Paris?"}, {"assistant", ""}, {"tool", "sunny"}, {"user", "ok"}},
     {{0}, {k_call3, 1, NULL}, {NULL, 0, "call_1"}, {0}},
     4, false},
};

static void test_goldens(void) {
    static const struct {
        const char *prefix;
        enum lm_chat_template t;
    } fams[] = {{"qwen3", LM_CHAT_TEMPLATE_CHATML}, {"qwen25", LM_CHAT_TEMPLATE_CHATML}, {"llama31", LM_CHAT_TEMPLATE_LLAMA3}};
    int compared = 0;
    for (size_t c = 0; c < sizeof k_cases / sizeof *k_cases; c++)
        for (size_t f = 0; f < sizeof fams / sizeof *fams; f++) {
            char rel[128];
            snprintf(rel, sizeof rel, "tests/golden/chat_tools/%s_%s.txt", fams[f].prefix, k_cases[c].name);
            char *want = lm_test_read_file(lm_test_path(rel), NULL);
            if (!want) continue; // a case the generator does not render for this family
            const struct tcase *tc = &k_cases[c];
            char *out = NULL;
            size_t n = 0;
            const enum lm_status st = lm_chat_apply_tools(fams[f].t, tc->msgs, tc->parts, tc->n, tc->tools ? k_tools : NULL,
                                                          tc->tools ? strlen(k_tools) : 0, true, &out, &n);
            CHECKF(st == LM_OK, "%s: %s", rel, lm_error_msg());
            CHECKF(out && n == strlen(want) && strcmp(out, want) == 0, "%s differs; lumen wrote:\n%s", rel, out ? out : "");
            compared++;
            free(out);
            free(want);
        }
    CHECKF(compared == 8, "compared %d goldens (tools/gen_golden_chat_tools.py writes 8)", compared);
}

// The generic format (no official template): hand-checked.
static void test_generic(void) {
    const struct tcase *tc = &k_cases[1];
    char *out = NULL;
    size_t n = 0;
    const char *tools = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {}}}]";
    CHECK(lm_chat_apply_tools(LM_CHAT_TEMPLATE_GEMMA, tc->msgs, tc->parts, tc->n, tools, strlen(tools), true, &out, &n) == LM_OK);
    const char *want =
        "<start_of_turn>user\nYou can call the following tools. Each is a JSON object with the tool's name, what it "
        "does, and the JSON Schema of its arguments (\"parameters\"):\n"
        "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {}}}\n"
        "\nAnswer with one JSON object and nothing else. To call one or more tools:\n"
        "{\"tool_calls\": [{\"name\": \"<tool name>\", \"arguments\": {<the arguments>}}]}\n"
        "To answer the user directly:\n{\"response\": \"<your answer>\"}\n\nWeather in Paris?<end_of_turn>\n"
        "<start_of_turn>model\n{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
        "\"days\": 2}}]}<end_of_turn>\n"
        "<start_of_turn>user\nResult of the tool call get_weather:\n{\"temp\": 21}<end_of_turn>\n"
        "<start_of_turn>model\n";
    CHECKF(out && strcmp(out, want) == 0, "generic gave:\n%s", out ? out : "");
    free(out);
}

static void test_malformed(void) {
    const struct lm_chat_msg m[] = {{"user", "hi"}, {"assistant", ""}};
    static const char *const bad_tools[] = {"{}", "[", "[{]", "[1,]", "[\"\\x\"]", "[01]", "[1] x", "[\"\x01\"]", "[-]",
                                            "[1e]", "[1.]", "[tru]", "[{\"a\" 1}]", "[\"\\ud800\"]"};
    for (size_t i = 0; i < sizeof bad_tools / sizeof *bad_tools; i++)
        for (int t = 0; t < 3; t++) {
            char *out = (char *)1;
            size_t n = 9;
            const enum lm_status st = lm_chat_apply_tools((enum lm_chat_template)t, m, NULL, 1, bad_tools[i],
                                                          strlen(bad_tools[i]), true, &out, &n);
            const bool ok_input = strcmp(bad_tools[i], "[\"\\ud800\"]") == 0; // a lone surrogate is kept
            CHECKF(ok_input ? st == LM_OK : (st == LM_ERR_ARG && out == NULL && n == 0), "tools '%s' template %d: %d",
                   bad_tools[i], t, (int)st);
            if (st == LM_OK) free(out);
        }
    // arguments that are not JSON (cut by max_tokens) are written as they are
    const struct lm_chat_tool_call cut_call = {"c", "f", "{\"a\": \"x"};
    const struct lm_chat_msg_tools parts[] = {{0}, {&cut_call, 1, NULL}};
    for (int t = 0; t < 3; t++) {
        char *out = NULL;
        size_t n = 0;
        CHECK(lm_chat_apply_tools((enum lm_chat_template)t, m, parts, 2, NULL, 0, true, &out, &n) == LM_OK);
        CHECKF(out && strstr(out, "{\"a\": \"x}") != NULL, "%s", out ? out : "");
        free(out);
    }
    const struct lm_chat_tool_call nameless = {"c", NULL, "{}"};
    const struct lm_chat_msg_tools parts2[] = {{0}, {&nameless, 1, NULL}};
    char *out = NULL;
    size_t n = 0;
    CHECK(lm_chat_apply_tools(LM_CHAT_TEMPLATE_CHATML, m, parts2, 2, NULL, 0, true, &out, &n) == LM_ERR_ARG);
    // without tool parts, lm_chat_apply_tools is lm_chat_apply
    char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_GEMMA, m, 2, true, &a, &na) == LM_OK);
    CHECK(lm_chat_apply_tools(LM_CHAT_TEMPLATE_GEMMA, m, NULL, 2, "", 0, true, &b, &nb) == LM_OK);
    CHECK(a && b && na == nb && strcmp(a, b) == 0);
    free(a);
    free(b);
    CHECK(lm_chat_tool_format(LM_CHAT_TEMPLATE_CHATML) == LM_CHAT_TOOLS_QWEN);
    CHECK(lm_chat_tool_format(LM_CHAT_TEMPLATE_LLAMA3) == LM_CHAT_TOOLS_LLAMA3);
    CHECK(lm_chat_tool_format(LM_CHAT_TEMPLATE_GEMMA) == LM_CHAT_TOOLS_GENERIC);
}

int main(void) {
    test_goldens();
    test_generic();
    test_malformed();
    return lm_test_finish();
}
