// IBM Granite 3.x's chat format (tokenizer/chat.c) against llama.cpp's built-in template
// (llama_chat_apply_template of the pinned llama-cpp-python, "granite" and a template text
// holding <|start_of_role|>; its output copied below), and detection: Granite 3.x from the
// template text or its name, Granite 4.x (tools in <tool_call> / <tools> tags) refused as
// llama.cpp gives it another format.
// LM_TEST_LABELS: unit
#include <stdlib.h>
#include <string.h>

#include "lm_test.h"
#include "lumen.h"

static const struct lm_chat_msg k_msgs[] = {
    {"system", "You are Granite."}, {"user", " Hello\n"}, {"assistant", "Hi."},
    {"assistant_tool_call", "[{\"name\": \"f\"}]"}, {"tool", "{\"ok\": 1}"}, {"user", "Bye"},
};

// llama.cpp's output for k_msgs without the generation prompt
static const char k_want[] =
    "<|start_of_role|>system<|end_of_role|>You are Granite.<|end_of_text|>\n"
    "<|start_of_role|>user<|end_of_role|> Hello\n<|end_of_text|>\n"
    "<|start_of_role|>assistant<|end_of_role|>Hi.<|end_of_text|>\n"
    "<|start_of_role|>assistant_tool_call<|end_of_role|><|tool_call|>[{\"name\": \"f\"}]<|end_of_text|>\n"
    "<|start_of_role|>tool<|end_of_role|>{\"ok\": 1}<|end_of_text|>\n"
    "<|start_of_role|>user<|end_of_role|>Bye<|end_of_text|>\n";

static void test_apply(void) {
    const size_t n_msgs = sizeof k_msgs / sizeof k_msgs[0];
    char *out = NULL;
    size_t n = 0;
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_GRANITE, k_msgs, n_msgs, false, &out, &n) == LM_OK);
    CHECKF(out && n == strlen(k_want) && !memcmp(out, k_want, n), "granite: got '%s'", out ? out : "");
    free(out);
    out = NULL;
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_GRANITE, k_msgs, n_msgs, true, &out, &n) == LM_OK);
    const char *gen = "<|start_of_role|>assistant<|end_of_role|>";
    CHECKF(out && n == strlen(k_want) + strlen(gen) && !memcmp(out, k_want, strlen(k_want)) &&
               !strcmp(out + strlen(k_want), gen),
           "granite + generation prompt: got '%s'", out ? out : "");
    free(out);
    out = NULL;
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_GRANITE, k_msgs, 0, true, &out, &n) == LM_OK);
    CHECK(out && !strcmp(out, gen));
    free(out);
}

static void test_detect(void) {
    // a Granite 3.x template's markers (its tool calls are <|tool_call|>, not <tool_call>)
    const char *g3 = "{%- for message in messages %}{{- '<|start_of_role|>' + message['role'] + "
                     "'<|end_of_role|>' + message['content'] + '<|end_of_text|>\\n' }}"
                     "{%- if message['role'] == 'assistant_tool_call' %}<|tool_call|>{%- endif %}";
    CHECK(lm_chat_template_detect(NULL, "granite", g3) == LM_CHAT_TEMPLATE_GRANITE);
    CHECK(lm_chat_template_detect(NULL, NULL, "granite") == LM_CHAT_TEMPLATE_GRANITE);
    CHECK(lm_chat_template_detect(NULL, NULL, "<|start_of_role|> <tool_call>") == LM_CHAT_TEMPLATE_NONE);
    CHECK(lm_chat_template_detect(NULL, NULL, "<|start_of_role|> <tools>") == LM_CHAT_TEMPLATE_NONE);
    // llama.cpp's earlier checks win: a ChatML or Llama 3 text that mentions the marker
    CHECK(lm_chat_template_detect(NULL, NULL, "<|im_start|><|start_of_role|>") == LM_CHAT_TEMPLATE_CHATML);
    CHECK(lm_chat_template_detect(NULL, NULL, "<|start_header_id|><|end_header_id|><|start_of_role|>") ==
          LM_CHAT_TEMPLATE_LLAMA3);
    CHECK(lm_chat_template_detect(NULL, NULL, "[gMASK]sop <|start_of_role|>") == LM_CHAT_TEMPLATE_NONE);
    CHECK(lm_chat_template_detect(NULL, NULL, "rwkv-world <|start_of_role|>") == LM_CHAT_TEMPLATE_NONE);
    CHECK(!strcmp(lm_chat_template_name(LM_CHAT_TEMPLATE_GRANITE), "granite"));
    CHECK(lm_chat_template_from_name("granite") == LM_CHAT_TEMPLATE_GRANITE);
}

int main(void) {
    test_apply();
    test_detect();
    return lm_test_finish();
}
