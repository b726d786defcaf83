// Chat templates: turn a list of {role, content} messages into prompt text, matching
// llama.cpp's built-in llm_chat_apply_template (src/llama-chat.cpp) byte for byte.
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

struct sbuf {
    char *s;
    size_t n, cap;
    bool oom;
};

static void sb_put(struct sbuf *b, const char *p, size_t n) {
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
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void sb_str(struct sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

// isspace() in the C locale, as llama-chat.cpp's trim() sees it
static bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static void sb_trimmed(struct sbuf *b, const char *s) {
    size_t n = strlen(s), i = 0;
    while (i < n && is_space(s[i])) i++;
    while (n > i && is_space(s[n - 1])) n--;
    sb_put(b, s + i, n - i);
}

enum lm_status lm_chat_apply(enum lm_chat_template tmpl, const struct lm_chat_msg *msgs, size_t n,
                             bool add_generation_prompt, char **out, size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    if (tmpl != LM_CHAT_TEMPLATE_GEMMA)
        return lm_error_set(LM_ERR_UNSUPPORTED, "lm_chat_apply: unknown template %d", (int)tmpl);
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return lm_error_set(LM_ERR_ARG, "lm_chat_apply: message %zu has a NULL role or content", i);
    struct sbuf b = {0};
    struct sbuf sys = {0}; // pending system prompt (concatenated, each trimmed)
    sb_put(&b, "", 0);
    for (size_t i = 0; i < n; i++) {
        const char *role = msgs[i].role;
        if (strcmp(role, "system") == 0) {
            sb_trimmed(&sys, msgs[i].content);
            continue;
        }
        if (strcmp(role, "assistant") == 0) role = "model";
        sb_str(&b, "<start_of_turn>");
        sb_str(&b, role);
        sb_str(&b, "\n");
        if (sys.n > 0 && strcmp(role, "model") != 0) {
            sb_put(&b, sys.s, sys.n);
            sb_str(&b, "\n\n");
            sys.n = 0;
        }
        sb_trimmed(&b, msgs[i].content);
        sb_str(&b, "<end_of_turn>\n");
    }
    if (add_generation_prompt) sb_str(&b, "<start_of_turn>model\n");
    bool oom = b.oom || sys.oom;
    free(sys.s);
    if (oom) {
        free(b.s);
        return lm_error_set(LM_ERR_NOMEM, "lm_chat_apply: out of memory");
    }
    *out = b.s;
    *n_out = b.n;
    return LM_OK;
}
