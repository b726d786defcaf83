// The Phi-3 chat format (LM_CHAT_TEMPLATE_PHI3, llama.cpp's LLM_CHAT_TEMPLATE_PHI_3): prompts
// against Phi-3.5-mini-instruct's own template rendered by jinja2 (tests/golden/chat_phi3/,
// tools/gen_golden_chat_phi3.py), detection of that template text and of the name, tools
// through the generic format, and the name round trip.
// LM_TEST_LABELS: unit
#include "lm_test.h"
#include "lm_test_file.h"

#include "lumen.h"

struct pcase {
    const char *name;
    struct lm_chat_msg msgs[4];
    size_t n;
};

// the same cases as tools/gen_golden_chat_phi3.py's CASES
static const struct pcase k_cases[] = {
    {"system", {{"system", "You are terse."}, {"user", "Hi there"}}, 2},
    {"turns", {{"user", "What is 2+2?"}, {"assistant", "4"}, {"user", "  and 3+3?\n"}}, 3},
    {"user", {{"user", "caf\xc3\xa9 <b>\n\nline"}}, 1},
};

static void test_goldens(void) {
    for (size_t c = 0; c < sizeof k_cases / sizeof *k_cases; c++) {
        char rel[128];
        snprintf(rel, sizeof rel, "tests/golden/chat_phi3/%s.txt", k_cases[c].name);
        char *want = lm_test_read_file(lm_test_path(rel), NULL);
        CHECKF(want != NULL, "cannot read %s", rel);
        if (!want) continue;
        char *out = NULL;
        size_t n = 0;
        const enum lm_status st = lm_chat_apply(LM_CHAT_TEMPLATE_PHI3, k_cases[c].msgs, k_cases[c].n, true, &out, &n);
        CHECKF(st == LM_OK, "%s: %s", rel, lm_error_msg());
        CHECKF(out && n == strlen(want) && strcmp(out, want) == 0, "%s differs; lumen wrote:\n%s", rel, out ? out : "");
        free(out);
        free(want);
    }
}

static void test_detect_and_names(void) {
    char *tmpl = lm_test_read_file(lm_test_path("tests/golden/chat_phi3/template.jinja"), NULL);
    CHECK(tmpl != NULL);
    if (tmpl) CHECK(lm_chat_template_detect(NULL, "phi3", tmpl) == LM_CHAT_TEMPLATE_PHI3);
    free(tmpl);
    // Phi-4-mini's template has the same markers (llama.cpp detects it as Phi-3 too)
    CHECK(lm_chat_template_detect(NULL, NULL, "{{ '<|' + message['role'] + '|>' + message['content'] + "
                                              "'<|end|>' }}{{ '<|assistant|>' }}") == LM_CHAT_TEMPLATE_PHI3);
    CHECK(lm_chat_template_detect(NULL, NULL, "phi3") == LM_CHAT_TEMPLATE_PHI3);
    CHECK(strcmp(lm_chat_template_name(LM_CHAT_TEMPLATE_PHI3), "phi3") == 0);
    CHECK(lm_chat_template_from_name("phi3") == LM_CHAT_TEMPLATE_PHI3);
    CHECK(lm_chat_tool_format(LM_CHAT_TEMPLATE_PHI3) == LM_CHAT_TOOLS_GENERIC);
    // without the generation prompt: the turns only (llama.cpp's built-in adds no EOS)
    char *out = NULL;
    size_t n = 0;
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_PHI3, k_cases[0].msgs, 2, false, &out, &n) == LM_OK);
    CHECK(out && strcmp(out, "<|system|>\nYou are terse.<|end|>\n<|user|>\nHi there<|end|>\n") == 0);
    free(out);
    // tools: the generic format, then the Phi-3 turns
    const char *tools = "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}]";
    out = NULL;
    CHECK(lm_chat_apply_tools(LM_CHAT_TEMPLATE_PHI3, k_cases[2].msgs, NULL, 1, tools, strlen(tools), true, &out, &n) ==
          LM_OK);
    CHECK(out && strstr(out, "<|user|>\n") && strstr(out, "\"f\"") && n > 14 &&
          strcmp(out + n - 14, "<|assistant|>\n") == 0);
    free(out);
}

int main(void) {
    test_goldens();
    test_detect_and_names();
    return lm_test_finish();
}
