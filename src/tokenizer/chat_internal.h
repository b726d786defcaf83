// Internal to the chat templates (chat.c, chat_tools.c): trimmed appends and the templates
// without tools.
#ifndef LM_TOKENIZER_CHAT_INTERNAL_H
#define LM_TOKENIZER_CHAT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "base/strbuf.h"
#include "lumen.h"

// s without its leading and trailing white space (llama-chat.cpp's trim()).
static inline void sb_trimmed(struct lm_strbuf *b, const char *s) {
    size_t n = strlen(s), i = 0;
    while (i < n && lm_is_space(s[i])) i++;
    while (n > i && lm_is_space(s[n - 1])) n--;
    lm_strbuf_put(b, s + i, n - i);
}

// The templates of chat.c for messages without tool calls (lm_chat_apply's contract).
enum lm_status chat_apply_plain(enum lm_chat_template tmpl, const struct lm_chat_msg *msgs, size_t n,
                                bool add_generation_prompt, char **out, size_t *n_out);

#endif
