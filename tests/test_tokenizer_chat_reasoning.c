// The reasoning families' chat formats against their own templates rendered by jinja2
// (tests/golden/chat_reasoning/, tools/gen_golden_chat_reasoning.py): DeepSeek-R1 distills
// (LM_CHAT_TEMPLATE_DEEPSEEK_R1: the generation prompt opens <think>, earlier answers lose their
// span), Qwen3 and QwQ (ChatML, plus what the server appends: QwQ's opening "<think>\n");
// enable_thinking false as the server renders it (R1's template with the switch and QwQ's:
// "</think>" after the opening; Qwen3's: an empty span); detection of each template text and
// the name round trip; R1 with tools through the generic tool prompt.
// LM_TEST_LABELS: unit
#include "lm_test.h"
#include "lm_test_file.h"

#include "lumen.h"

struct rcase {
    const char *name;
    struct lm_chat_msg msgs[4];
    size_t n;
};

// the same cases as tools/gen_golden_chat_reasoning.py's CASES
static const struct rcase k_cases[] = {
    {"system", {{"system", "You are terse."}, {"user", "Hi there"}}, 2},
    {"turns", {{"user", "What is 2+2?"}, {"assistant", "<think>\nadd them\n</think>\n\n4"}, {"user", "  and 3+3?\n"}}, 3},
    {"off", {{"user", "caf\xc3\xa9 <b>\n\nline"}}, 1},
};

// fam's golden of case c: lumen's rendering plus the suffix the server appends (on_suffix, or
// off_suffix for "off")
static void check_golden(const char *fam, enum lm_chat_template tmpl, size_t c, const char *on_suffix,
                         const char *off_suffix) {
    char rel[128];
    snprintf(rel, sizeof rel, "tests/golden/chat_reasoning/%s_%s.txt", fam, k_cases[c].name);
    char *want = lm_test_read_file(lm_test_path(rel), NULL);
    CHECKF(want != NULL, "cannot read %s", rel);
    if (!want) return;
    char *out = NULL;
    size_t n = 0;
    const enum lm_status st = lm_chat_apply(tmpl, k_cases[c].msgs, k_cases[c].n, true, &out, &n);
    CHECKF(st == LM_OK, "%s: %s", rel, lm_error_msg());
    const char *suffix = strcmp(k_cases[c].name, "off") == 0 ? off_suffix : on_suffix;
    const size_t ns = strlen(suffix), nw = strlen(want);
    CHECKF(out && n + ns == nw && memcmp(out, want, n) == 0 && memcmp(want + n, suffix, ns) == 0,
           "%s differs; lumen wrote:\n%s", rel, out ? out : "");
    free(out);
    free(want);
}

static void test_goldens(void) {
    for (size_t c = 0; c < sizeof k_cases / sizeof *k_cases; c++) {
        check_golden("r1_qwen", LM_CHAT_TEMPLATE_DEEPSEEK_R1, c, "", "</think>"); // its template has the switch
        check_golden("r1_llama", LM_CHAT_TEMPLATE_DEEPSEEK_R1, c, "", "");        // its template has none
        if (strcmp(k_cases[c].name, "turns") == 0) continue; // the server drops earlier spans before ChatML
        check_golden("qwen3", LM_CHAT_TEMPLATE_CHATML, c, "", "<think>\n\n</think>\n\n");
        check_golden("qwq", LM_CHAT_TEMPLATE_CHATML, c, "<think>\n", "<think>\n</think>");
    }
}

static void test_detect_and_names(void) {
    static const struct {
        const char *file;
        enum lm_chat_template want;
    } k[] = {{"r1_qwen.jinja", LM_CHAT_TEMPLATE_DEEPSEEK_R1},
             {"r1_llama.jinja", LM_CHAT_TEMPLATE_DEEPSEEK_R1},
             {"qwen3.jinja", LM_CHAT_TEMPLATE_CHATML},
             {"qwq.jinja", LM_CHAT_TEMPLATE_CHATML}};
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "tests/golden/chat_reasoning/%s", k[i].file);
        char *t = lm_test_read_file(lm_test_path(rel), NULL);
        CHECKF(t && lm_chat_template_detect(NULL, NULL, t) == k[i].want, "%s", rel);
        free(t);
    }
    CHECK(lm_chat_template_detect(NULL, NULL, "deepseek-r1") == LM_CHAT_TEMPLATE_DEEPSEEK_R1);
    CHECK(strcmp(lm_chat_template_name(LM_CHAT_TEMPLATE_DEEPSEEK_R1), "deepseek-r1") == 0);
    CHECK(lm_chat_template_from_name("deepseek-r1") == LM_CHAT_TEMPLATE_DEEPSEEK_R1);
    // DeepSeek V3's template (no <think>) stays unknown to lumen, as before
    CHECK(lm_chat_template_detect(NULL, NULL, "<\xef\xbd\x9c" "User\xef\xbd\x9c><\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"
                                              "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>") ==
          LM_CHAT_TEMPLATE_NONE);
    // without the generation prompt: no opening span
    char *out = NULL;
    size_t n = 0;
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_DEEPSEEK_R1, k_cases[0].msgs, 2, false, &out, &n) == LM_OK);
    CHECK(out && strcmp(out, "You are terse.<\xef\xbd\x9c" "User\xef\xbd\x9c>Hi there") == 0);
    free(out);
}

// R1 with tools (issue 35): its official templates declare none, so the generic tool prompt: the
// tools in the system text (which R1 writes first), an earlier call as {"tool_calls": [...]}, its
// result as a user turn; the generation prompt still opens the span
#define R1U "<\xef\xbd\x9c" "User\xef\xbd\x9c>"
#define R1A "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"
#define R1E "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
static void test_r1_tools(void) {
    static const char tools[] = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                                "\"parameters\": {\"type\": \"object\"}}}]";
    const struct lm_chat_msg msgs[] = {{"system", "You are terse."}, {"user", "Weather?"}, {"assistant", ""},
                                       {"tool", "sunny"}};
    const struct lm_chat_tool_call call = {"call_1", "get_weather", "{\"city\": \"Paris\"}"};
    const struct lm_chat_msg_tools parts[] = {{0}, {0}, {&call, 1, NULL}, {NULL, 0, "call_1"}};
    char *out = NULL;
    size_t n = 0;
    CHECKF(lm_chat_apply_tools(LM_CHAT_TEMPLATE_DEEPSEEK_R1, msgs, parts, 4, tools, strlen(tools), true, &out, &n) ==
               LM_OK, "%s", lm_error_msg());
    static const char tail[] = R1U "Weather?" R1A "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": "
                               "{\"city\": \"Paris\"}}]}" R1E R1U "Result of the tool call get_weather:\nsunny" R1A
                               "<think>\n";
    CHECKF(out && !strncmp(out, "You are terse.\n\nYou can call the following tools.", 48) &&
               strstr(out, "\"get_weather\"") && n > sizeof tail && !strcmp(out + n - (sizeof tail - 1), tail),
           "lumen wrote:\n%s", out ? out : "");
    free(out);
}

int main(void) {
    test_goldens();
    test_detect_and_names();
    test_r1_tools();
    return lm_test_finish();
}
