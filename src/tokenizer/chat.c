// Chat templates: turn a list of {role, content} messages into prompt text, matching
// llama.cpp's built-in llm_chat_apply_template (src/llama-chat.cpp) byte for byte, and pick
// the template from a model's metadata as llm_chat_detect_template does. Tools (definitions,
// assistant tool calls, tool results) are rendered as each family's official template does
// (chat_tools.c).
#include <stdlib.h>
#include <string.h>

#include "tokenizer/chat_internal.h"
#include "tokenizer/tokenizer.h"

// Llama 3: every message trimmed, no BOS (the tokenizer adds it).
static void apply_llama3(struct lm_strbuf *b, const struct lm_chat_msg *msgs, size_t n, bool add_generation_prompt) {
    for (size_t i = 0; i < n; i++) {
        lm_strbuf_puts(b, "<|start_header_id|>");
        lm_strbuf_puts(b, msgs[i].role);
        lm_strbuf_puts(b, "<|end_header_id|>\n\n");
        sb_trimmed(b, msgs[i].content);
        lm_strbuf_puts(b, "<|eot_id|>");
    }
    if (add_generation_prompt) lm_strbuf_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// ChatML: contents verbatim.
static void apply_chatml(struct lm_strbuf *b, const struct lm_chat_msg *msgs, size_t n, bool add_generation_prompt) {
    for (size_t i = 0; i < n; i++) {
        lm_strbuf_puts(b, "<|im_start|>");
        lm_strbuf_puts(b, msgs[i].role);
        lm_strbuf_puts(b, "\n");
        lm_strbuf_puts(b, msgs[i].content);
        lm_strbuf_puts(b, "<|im_end|>\n");
    }
    if (add_generation_prompt) lm_strbuf_puts(b, "<|im_start|>assistant\n");
}

// Phi-3 (llama.cpp's LLM_CHAT_TEMPLATE_PHI_3, which Phi-4-mini's template is detected as too):
// contents verbatim.
static void apply_phi3(struct lm_strbuf *b, const struct lm_chat_msg *msgs, size_t n, bool add_generation_prompt) {
    for (size_t i = 0; i < n; i++) {
        lm_strbuf_puts(b, "<|");
        lm_strbuf_puts(b, msgs[i].role);
        lm_strbuf_puts(b, "|>\n");
        lm_strbuf_puts(b, msgs[i].content);
        lm_strbuf_puts(b, "<|end|>\n");
    }
    if (add_generation_prompt) lm_strbuf_puts(b, "<|assistant|>\n");
}

// IBM Granite 3.x: contents verbatim; llama.cpp's role "assistant_tool_call" opens with
// <|tool_call|>.
static void apply_granite(struct lm_strbuf *b, const struct lm_chat_msg *msgs, size_t n, bool add_generation_prompt) {
    for (size_t i = 0; i < n; i++) {
        lm_strbuf_puts(b, "<|start_of_role|>");
        lm_strbuf_puts(b, msgs[i].role);
        lm_strbuf_puts(b, "<|end_of_role|>");
        if (strcmp(msgs[i].role, "assistant_tool_call") == 0) lm_strbuf_puts(b, "<|tool_call|>");
        lm_strbuf_puts(b, msgs[i].content);
        lm_strbuf_puts(b, "<|end_of_text|>\n");
    }
    if (add_generation_prompt) lm_strbuf_puts(b, "<|start_of_role|>assistant<|end_of_role|>");
}

// DeepSeek-R1 distills (Qwen and Llama), as their official template renders (not llama.cpp's
// built-in deepseek3, which lacks the <think> opening): the last system message's text first,
// contents verbatim, an assistant's text after its last </think>; BOS is the tokenizer's.
#define R1_USER "<\xef\xbd\x9c" "User\xef\xbd\x9c>"
#define R1_ASSISTANT "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"
#define R1_EOS "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
static void apply_deepseek_r1(struct lm_strbuf *b, const struct lm_chat_msg *msgs, size_t n,
                              bool add_generation_prompt) {
    const char *sys = "";
    for (size_t i = 0; i < n; i++)
        if (strcmp(msgs[i].role, "system") == 0) sys = msgs[i].content;
    lm_strbuf_puts(b, sys);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(msgs[i].role, "user") == 0) {
            lm_strbuf_puts(b, R1_USER);
            lm_strbuf_puts(b, msgs[i].content);
        } else if (strcmp(msgs[i].role, "assistant") == 0) {
            const char *c = msgs[i].content;
            for (const char *p = strstr(c, "</think>"); p; p = strstr(p + 1, "</think>")) c = p + 8;
            lm_strbuf_puts(b, R1_ASSISTANT);
            lm_strbuf_puts(b, c);
            lm_strbuf_puts(b, R1_EOS);
        }
    }
    if (add_generation_prompt) lm_strbuf_puts(b, R1_ASSISTANT "<think>\n");
}

enum lm_status chat_apply_plain(enum lm_chat_template tmpl, const struct lm_chat_msg *msgs, size_t n,
                                bool add_generation_prompt, char **out, size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    if (tmpl == LM_CHAT_TEMPLATE_HARMONY) return lm_chat_apply_harmony(NULL, msgs, NULL, n, NULL, 0, add_generation_prompt, out, n_out);
    if (tmpl != LM_CHAT_TEMPLATE_GEMMA && tmpl != LM_CHAT_TEMPLATE_LLAMA3 && tmpl != LM_CHAT_TEMPLATE_CHATML &&
        tmpl != LM_CHAT_TEMPLATE_PHI3 && tmpl != LM_CHAT_TEMPLATE_GRANITE && tmpl != LM_CHAT_TEMPLATE_DEEPSEEK_R1)
        return lm_error_set(LM_ERR_UNSUPPORTED, "lm_chat_apply: unknown template %d", (int)tmpl);
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return lm_error_set(LM_ERR_ARG, "lm_chat_apply: message %zu has a NULL role or content", i);
    struct lm_strbuf b = {0};
    struct lm_strbuf sys = {0}; // pending system prompt (concatenated, each trimmed)
    lm_strbuf_put(&b, "", 0);
    if (tmpl == LM_CHAT_TEMPLATE_LLAMA3) apply_llama3(&b, msgs, n, add_generation_prompt);
    if (tmpl == LM_CHAT_TEMPLATE_CHATML) apply_chatml(&b, msgs, n, add_generation_prompt);
    if (tmpl == LM_CHAT_TEMPLATE_PHI3) apply_phi3(&b, msgs, n, add_generation_prompt);
    if (tmpl == LM_CHAT_TEMPLATE_GRANITE) apply_granite(&b, msgs, n, add_generation_prompt);
    if (tmpl == LM_CHAT_TEMPLATE_DEEPSEEK_R1) apply_deepseek_r1(&b, msgs, n, add_generation_prompt);
    for (size_t i = 0; tmpl == LM_CHAT_TEMPLATE_GEMMA && i < n; i++) {
        const char *role = msgs[i].role;
        if (strcmp(role, "system") == 0) {
            sb_trimmed(&sys, msgs[i].content);
            continue;
        }
        if (strcmp(role, "assistant") == 0) role = "model";
        lm_strbuf_puts(&b, "<start_of_turn>");
        lm_strbuf_puts(&b, role);
        lm_strbuf_puts(&b, "\n");
        if (sys.n > 0 && strcmp(role, "model") != 0) {
            lm_strbuf_put(&b, sys.p, sys.n);
            lm_strbuf_puts(&b, "\n\n");
            sys.n = 0;
        }
        sb_trimmed(&b, msgs[i].content);
        lm_strbuf_puts(&b, "<end_of_turn>\n");
    }
    if (tmpl == LM_CHAT_TEMPLATE_GEMMA && add_generation_prompt) lm_strbuf_puts(&b, "<start_of_turn>model\n");
    bool oom = b.nomem || sys.nomem;
    free(sys.p);
    if (oom) {
        free(b.p);
        return lm_error_set(LM_ERR_NOMEM, "lm_chat_apply: out of memory");
    }
    *out = b.p;
    *n_out = b.n;
    return LM_OK;
}

// ============================================================================
// Template detection
// ============================================================================

const char *lm_chat_template_name(enum lm_chat_template tmpl) {
    switch (tmpl) {
    case LM_CHAT_TEMPLATE_GEMMA: return "gemma";
    case LM_CHAT_TEMPLATE_LLAMA3: return "llama3";
    case LM_CHAT_TEMPLATE_CHATML: return "chatml";
    case LM_CHAT_TEMPLATE_PHI3: return "phi3";
    case LM_CHAT_TEMPLATE_GRANITE: return "granite";
    case LM_CHAT_TEMPLATE_HARMONY: return "harmony";
    case LM_CHAT_TEMPLATE_DEEPSEEK_R1: return "deepseek-r1";
    default: return "none";
    }
}

enum lm_chat_template lm_chat_template_from_name(const char *name) {
    if (!name) return LM_CHAT_TEMPLATE_NONE;
    if (!strcmp(name, "gemma")) return LM_CHAT_TEMPLATE_GEMMA;
    if (!strcmp(name, "llama3")) return LM_CHAT_TEMPLATE_LLAMA3;
    if (!strcmp(name, "chatml")) return LM_CHAT_TEMPLATE_CHATML;
    if (!strcmp(name, "phi3")) return LM_CHAT_TEMPLATE_PHI3;
    if (!strcmp(name, "granite")) return LM_CHAT_TEMPLATE_GRANITE;
    if (!strcmp(name, "harmony") || !strcmp(name, "gpt-oss")) return LM_CHAT_TEMPLATE_HARMONY;
    if (!strcmp(name, "deepseek-r1")) return LM_CHAT_TEMPLATE_DEEPSEEK_R1;
    return LM_CHAT_TEMPLATE_NONE;
}

static bool has(const char *s, const char *needle) { return strstr(s, needle) != NULL; }

static bool vocab_has(const struct lm_tokenizer *t, const char *text) {
    return t && lm_tokenizer_find(t, text, strlen(text)) >= 0;
}

// llm_chat_detect_template's checks in its order, up to the last template lumen has; a
// text that llama.cpp would give to another template yields NONE, never a wrong guess.
static enum lm_chat_template detect_text(const char *s) {
    if (strcmp(s, "chatml") == 0) return LM_CHAT_TEMPLATE_CHATML;
    if (strcmp(s, "llama3") == 0) return LM_CHAT_TEMPLATE_LLAMA3;
    if (strcmp(s, "gemma") == 0) return LM_CHAT_TEMPLATE_GEMMA;
    if (strcmp(s, "phi3") == 0) return LM_CHAT_TEMPLATE_PHI3;
    if (strcmp(s, "granite") == 0) return LM_CHAT_TEMPLATE_GRANITE;
    if (strcmp(s, "gpt-oss") == 0) return LM_CHAT_TEMPLATE_HARMONY;
    if (strcmp(s, "deepseek-r1") == 0) return LM_CHAT_TEMPLATE_DEEPSEEK_R1;
    if (has(s, "<|im_start|>"))
        return has(s, "<|im_sep|>") || has(s, "<end_of_utterance>") ? LM_CHAT_TEMPLATE_NONE // phi4, smolvlm
                                                                     : LM_CHAT_TEMPLATE_CHATML;
    if (strncmp(s, "mistral", 7) == 0 || has(s, "[INST]")) return LM_CHAT_TEMPLATE_NONE;
    if (has(s, "<|assistant|>") && has(s, "<|end|>")) return LM_CHAT_TEMPLATE_PHI3;
    if (has(s, "[gMASK]<sop>")) return LM_CHAT_TEMPLATE_NONE;
    if (has(s, "<|assistant|>") && has(s, "<|user|>")) return LM_CHAT_TEMPLATE_NONE;
    if (has(s, "<|{{ item['role'] }}|>") && has(s, "<|begin_of_image|>")) return LM_CHAT_TEMPLATE_NONE;
    if (has(s, "<|user|>") && has(s, "<|endoftext|>")) return LM_CHAT_TEMPLATE_NONE;
    if (has(s, "bos_token + message['role']")) return LM_CHAT_TEMPLATE_NONE;
    if (has(s, "<start_of_turn>")) return LM_CHAT_TEMPLATE_GEMMA;
    if (has(s, "'\\n\\nAssistant: ' + eos_token") || has(s, "GPT4 Correct ") ||
        (has(s, "USER: ") && has(s, "ASSISTANT: ")) || (has(s, "### Instruction:") && has(s, "<|EOT|>")) ||
        (has(s, "<|START_OF_TURN_TOKEN|>") && has(s, "<|USER_TOKEN|>")))
        return LM_CHAT_TEMPLATE_NONE;
    if (has(s, "<|start_header_id|>") && has(s, "<|end_header_id|>")) return LM_CHAT_TEMPLATE_LLAMA3;
    // llama.cpp reads R1 distills' templates as deepseek3; lumen renders them as their own
    // template does, which opens the <think> span in the generation prompt
    if (has(s, R1_ASSISTANT) && has(s, R1_USER) && has(s, R1_EOS) && has(s, "<think>"))
        return LM_CHAT_TEMPLATE_DEEPSEEK_R1;
    // the templates llama.cpp checks between llama3 and granite (chatglm3, minicpm's "<user>"
    // in Chinese, deepseek2, deepseek3's fullwidth-bar tokens, exaone, rwkv)
    if (has(s, "[gMASK]sop") || has(s, "<\xe7\x94\xa8\xe6\x88\xb7>") ||
        has(s, "'Assistant: ' + message['content'] + eos_token") ||
        (has(s, "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>") && has(s, "<\xef\xbd\x9c" "User\xef\xbd\x9c>") &&
         has(s, "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>")) ||
        (has(s, "[|system|]") && has(s, "[|assistant|]") && has(s, "[|endofturn|]")) ||
        has(s, "rwkv-world") || has(s, "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"))
        return LM_CHAT_TEMPLATE_NONE;
    if (has(s, "<|start_of_role|>")) // Granite 4.x (tools in <tool_call> tags) lumen does not render
        return has(s, "<tool_call>") || has(s, "<tools>") ? LM_CHAT_TEMPLATE_NONE : LM_CHAT_TEMPLATE_GRANITE;
    // the templates llama.cpp checks between granite and gpt-oss (bailing, seed-oss, megrez,
    // yandex, llada, llama4, smolvlm, trillion ...)
    if (has(s, "message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]") ||
        has(s, "<|role_start|>") || has(s, " \xd0\x90\xd1\x81\xd1\x81\xd0\xb8\xd1\x81\xd1\x82\xd0\xb5\xd0\xbd\xd1\x82:") ||
        has(s, "<role>ASSISTANT</role>") || (has(s, "<|header_start|>") && has(s, "<|header_end|>")) ||
        has(s, "<|endofuserprompt|>") || (has(s, "<|extra_0|>") && has(s, "<|extra_4|>")))
        return LM_CHAT_TEMPLATE_NONE;
    if (has(s, "<|start|>") && has(s, "<|channel|>")) return LM_CHAT_TEMPLATE_HARMONY;
    return LM_CHAT_TEMPLATE_NONE;
}

enum lm_chat_template lm_chat_template_detect(const struct lm_tokenizer *t, const char *arch,
                                              const char *template_text) {
    if (template_text && *template_text) return detect_text(template_text);
    if (vocab_has(t, "<|start|>") && vocab_has(t, "<|channel|>") && vocab_has(t, "<|message|>"))
        return LM_CHAT_TEMPLATE_HARMONY;
    if (vocab_has(t, "<|start_header_id|>") && vocab_has(t, "<|eot_id|>")) return LM_CHAT_TEMPLATE_LLAMA3;
    if (vocab_has(t, "<|im_start|>") && vocab_has(t, "<|im_end|>")) return LM_CHAT_TEMPLATE_CHATML;
    if (vocab_has(t, "<start_of_turn>")) return LM_CHAT_TEMPLATE_GEMMA;
    if (arch && strncmp(arch, "gemma", 5) == 0) return LM_CHAT_TEMPLATE_GEMMA;
    return LM_CHAT_TEMPLATE_NONE;
}
