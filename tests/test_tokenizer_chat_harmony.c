// The harmony chat format (LM_CHAT_TEMPLATE_HARMONY, gpt-oss): prompts against gpt-oss's own
// template rendered by jinja2 (tests/golden/chat_harmony/, tools/gen_golden_chat_harmony.py:
// system and developer messages, the tools as TypeScript, reasoning effort, tool calls and
// results, prior analysis dropped), detection, and clean errors for what the template refuses.
// LM_TEST_LABELS: unit
#include "lm_test.h"
#include "lm_test_file.h"

#include "lumen.h"

#define MAXM 6

struct hcase {
    const char *name, *effort;
    bool tools;
    struct lm_chat_msg msgs[MAXM];
    struct lm_chat_msg_tools parts[MAXM];
    const char *reasoning[MAXM];
    size_t n;
};

static const struct lm_chat_tool_call k_paris2[] = {{"call_1", "get_weather", "{\"city\":\"Paris\",\"days\":2}"}};
static const struct lm_chat_tool_call k_paris[] = {{"call_1", "get_weather", "{ \"city\" : \"Paris\" }"}};

// the same cases as tools/gen_golden_chat_harmony.py's CASES
static const struct hcase k_cases[] = {
    {"plain", NULL, false, {{"user", "Hi there"}}, {{0}}, {0}, 1},
    {"edge", NULL, true, {{"user", "x"}}, {{0}}, {0}, 1}, // with tools_edge.json
    {"system", "high", true, {{"system", "You are terse."}, {"user", "Weather in Paris?"}}, {{0}}, {0}, 2},
    {"history", "low", false,
     {{"developer", "Answer in French."}, {"user", "Hello"}, {"assistant", "Bonjour"}, {"user", "\xc3\x87" "a va?"}},
     {{0}}, {NULL, NULL, "The user greets me.", NULL}, 4},
    {"call", NULL, true,
     {{"user", "Weather in Paris?"}, {"assistant", ""}, {"tool", "{\"temp\": 21}"}},
     {{0}, {.tool_calls = k_paris2, .n_tool_calls = 1}, {.tool_call_id = "call_1"}},
     {NULL, "Need the weather tool.", NULL},
     3},
    {"call_done", "medium", true,
     {{"user", "Weather in Paris?"}, {"assistant", "Let me check."}, {"tool", "sunny \"and\" warm"},
      {"assistant", "Sunny."}, {"user", "Thanks"}},
     {{0}, {.tool_calls = k_paris, .n_tool_calls = 1}, {.tool_call_id = "call_1"}, {0}, {0}}, {0}, 5},
};

static void test_goldens(const char *tools, const char *tools_edge) {
    for (size_t c = 0; c < sizeof k_cases / sizeof *k_cases; c++) {
        const struct hcase *k = &k_cases[c];
        char rel[128];
        snprintf(rel, sizeof rel, "tests/golden/chat_harmony/%s.txt", k->name);
        char *want = lm_test_read_file(lm_test_path(rel), NULL);
        CHECKF(want != NULL, "cannot read %s", rel);
        if (!want) continue;
        const struct lm_chat_harmony_opts o = {.reasoning_effort = k->effort, .date = "2026-01-15",
                                               .reasoning = k->reasoning};
        char *out = NULL;
        size_t n = 0;
        const char *tl = !k->tools ? NULL : strcmp(k->name, "edge") == 0 ? tools_edge : tools;
        const enum lm_status st =
            lm_chat_apply_harmony(&o, k->msgs, k->parts, k->n, tl, tl ? strlen(tl) : 0, true, &out, &n);
        CHECKF(st == LM_OK, "%s: %s", rel, lm_error_msg());
        CHECKF(out && n == strlen(want) && strcmp(out, want) == 0, "%s differs; lumen wrote:\n%s", rel, out ? out : "");
        free(out);
        free(want);
    }
}

// Through the generic entry points: today's date, "medium", the same turns.
static void test_defaults(const char *tools) {
    struct lm_chat_msg m[] = {{"user", "Hi there"}};
    char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_HARMONY, m, 1, true, &a, &na) == LM_OK);
    CHECK(a && strstr(a, "Reasoning: medium\n\n") && strstr(a, "Current date: 20") &&
          strstr(a, "<|start|>user<|message|>Hi there<|end|><|start|>assistant") && !strstr(a, "developer"));
    CHECK(lm_chat_apply_tools(LM_CHAT_TEMPLATE_HARMONY, m, NULL, 1, tools, strlen(tools), false, &b, &nb) == LM_OK);
    CHECK(b && strstr(b, "namespace functions {") && strstr(b, "type noop = () => any;") &&
          strstr(b, "Hi there<|end|>") && !strstr(b, "<|start|>assistant"));
    CHECK(lm_chat_tool_format(LM_CHAT_TEMPLATE_HARMONY) == LM_CHAT_TOOLS_HARMONY);
    free(a);
    free(b);
}

static void expect_error(const struct lm_chat_msg *m, const struct lm_chat_msg_tools *p, const char *const *reasoning,
                         size_t n, const char *tools, const char *needle) {
    char *out = (char *)1;
    size_t no = 1;
    const struct lm_chat_harmony_opts o = {.reasoning = reasoning};
    const enum lm_status st = lm_chat_apply_harmony(&o, m, p, n, tools, tools ? strlen(tools) : 0, true, &out, &no);
    CHECKF(st == LM_ERR_ARG && out == NULL && no == 0, "want LM_ERR_ARG for '%s', got %s", needle, lm_status_name(st));
    CHECKF(strstr(lm_error_msg(), needle) != NULL, "message '%s' lacks '%s'", lm_error_msg(), needle);
}

static void test_errors(void) {
    struct lm_chat_msg tool_first[] = {{"user", "x"}, {"tool", "r"}};
    expect_error(tool_first, NULL, NULL, 2, NULL, "no assistant tool call precedes it");
    struct lm_chat_msg tags[] = {{"user", "x"}, {"assistant", "<|channel|>final<|message|>hi"}};
    expect_error(tags, NULL, NULL, 2, NULL, "holds <|channel|> tags");
    struct lm_chat_msg both[] = {{"user", "x"}, {"assistant", "text"}};
    struct lm_chat_msg_tools bp[] = {{0}, {.tool_calls = k_paris, .n_tool_calls = 1}};
    const char *why[] = {NULL, "why"};
    expect_error(both, bp, why, 2, NULL, "both content and reasoning");
    struct lm_chat_msg one[] = {{"user", "x"}};
    expect_error(one, NULL, NULL, 1, "{\"not\": \"an array\"}", "tools is not a JSON array");
    expect_error(one, NULL, NULL, 1, "[{\"type\": \"function\"", "tools is not a JSON array");
    expect_error(one, NULL, NULL, 1, "[{\"type\": \"function\", \"function\": {\"description\": \"x\"}}]", "tools is not");
    struct lm_chat_tool_call noname = {"c", NULL, "{}"};
    struct lm_chat_msg_tools np[] = {{0}, {.tool_calls = &noname, .n_tool_calls = 1}};
    expect_error(both, np, NULL, 2, NULL, "has no name");
}

static void test_detect(void) {
    char *tmpl = lm_test_read_file(lm_test_path("tests/golden/chat_harmony/template.jinja"), NULL);
    CHECK(tmpl != NULL);
    if (tmpl) CHECK(lm_chat_template_detect(NULL, "gpt-oss", tmpl) == LM_CHAT_TEMPLATE_HARMONY);
    free(tmpl);
    CHECK(lm_chat_template_detect(NULL, NULL, "{{ '<|start|>' + role + '<|channel|>' }}") == LM_CHAT_TEMPLATE_HARMONY);
    CHECK(lm_chat_template_detect(NULL, NULL, "gpt-oss") == LM_CHAT_TEMPLATE_HARMONY);
    CHECK(lm_chat_template_detect(NULL, NULL, "<|header_start|><|header_end|><|start|><|channel|>") ==
          LM_CHAT_TEMPLATE_NONE); // llama4's markers come first in llama.cpp's order
    CHECK(lm_chat_template_from_name("harmony") == LM_CHAT_TEMPLATE_HARMONY);
    CHECK(strcmp(lm_chat_template_name(LM_CHAT_TEMPLATE_HARMONY), "harmony") == 0);
}

int main(void) {
    char *tools = lm_test_read_file(lm_test_path("tests/golden/chat_harmony/tools.json"), NULL);
    char *edge = lm_test_read_file(lm_test_path("tests/golden/chat_harmony/tools_edge.json"), NULL);
    CHECKF(tools != NULL && edge != NULL, "cannot read tests/golden/chat_harmony/tools*.json");
    if (tools && edge) {
        test_goldens(tools, edge);
        test_defaults(tools);
    }
    test_errors();
    test_detect();
    free(tools);
    free(edge);
    return lm_test_finish();
}
