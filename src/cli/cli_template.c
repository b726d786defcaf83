// The chat format of a model for `lumen run --chat` and `lumen chat`: the one forced by
// --template, the model's own, or a named fallback.
#include <stdio.h>

#include "cli.h"
#include "lumen.h"

int cli_chat_template(const char *cmd, const struct lm_model *m, const char *path, const char *forced) {
    if (forced) return lm_chat_template_from_name(forced); // validated by the caller
    const struct lm_tokenizer *tok = lm_model_tokenizer(m);
    const char *text = lm_model_chat_template(m);
    enum lm_chat_template t = LM_CHAT_TEMPLATE_NONE;
    if (text && *text && (t = lm_chat_template_detect(tok, lm_model_arch(m), text)) != LM_CHAT_TEMPLATE_NONE)
        return t;
    // no template, or one lumen does not know: the vocabulary's turn tokens, the
    // architecture, else ChatML (llama.cpp's fallback); say which, once
    const enum lm_chat_template by_vocab = lm_chat_template_detect(tok, NULL, NULL);
    const enum lm_chat_template by_arch = lm_chat_template_detect(NULL, lm_model_arch(m), NULL);
    const char *why = "llama.cpp's fallback";
    if (by_vocab != LM_CHAT_TEMPLATE_NONE) {
        t = by_vocab;
        why = "from the vocabulary's turn tokens";
    } else if (by_arch != LM_CHAT_TEMPLATE_NONE) {
        t = by_arch;
        why = "from the architecture";
    } else {
        t = LM_CHAT_TEMPLATE_CHATML;
    }
    if (text && *text)
        fprintf(stderr, "lumen %s: %s has a chat template lumen does not know; using the %s turn format (%s)\n",
                cmd, path, lm_chat_template_name(t), why);
    else
        fprintf(stderr, "lumen %s: %s has no chat template (a base model?); using the %s turn format (%s)\n",
                cmd, path, lm_chat_template_name(t), why);
    return t;
}
