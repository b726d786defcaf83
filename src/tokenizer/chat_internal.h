// Internal to the chat templates (chat.c, chat_tools.c): a growing text buffer and the
// templates without tools.
#ifndef LM_TOKENIZER_CHAT_INTERNAL_H
#define LM_TOKENIZER_CHAT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lumen.h"

struct sbuf {
    char *s;
    size_t n, cap;
    bool oom;
};

static inline void sb_put(struct sbuf *b, const char *p, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (b->n + n + 1 > nc) nc *= 2;
        char *ns = realloc(b->s, nc);
        if (!ns) {
            b->oom = true;
            return;
        }
        b->s = ns;
        b->cap = nc;
    }
    if (n) memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = 0;
}

static inline void sb_str(struct sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

// isspace() in the C locale, as llama-chat.cpp's trim() sees it
static inline bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static inline void sb_trimmed(struct sbuf *b, const char *s) {
    size_t n = strlen(s), i = 0;
    while (i < n && is_space(s[i])) i++;
    while (n > i && is_space(s[n - 1])) n--;
    sb_put(b, s + i, n - i);
}

// The templates of chat.c for messages without tool calls (lm_chat_apply's contract).
enum lm_status chat_apply_plain(enum lm_chat_template tmpl, const struct lm_chat_msg *msgs, size_t n,
                                bool add_generation_prompt, char **out, size_t *n_out);

#endif
