// A request's prompt tokens: a completions prompt (text with special tokens parsed, as
// llama-server; or ids as given), or chat messages through the chat template, where the
// special tokens are the template's only: "<start_of_turn>" typed in a message is text,
// so a user cannot forge turn markers (unless --parse-special-in-messages).
#include "srv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOMEM(e) api_fail(e, 500, "server_error", "out_of_memory", NULL, "out of memory")

bool srv_prompt_init(struct server *s) {
    // control tokens: no text of their own unless rendered (<bos>, <start_of_turn>, ...)
    const size_t cap = lm_tokenizer_max_piece(s->tok) + 8;
    char *buf = malloc(cap);
    s->is_control = calloc((size_t)s->n_vocab, 1);
    if (!buf || !s->is_control) {
        free(buf);
        return false;
    }
    for (int32_t id = 0; id < s->n_vocab; id++)
        s->is_control[id] = lm_token_to_piece(s->tok, id, buf, cap, false) == 0 &&
                            lm_token_to_piece(s->tok, id, buf, cap, true) > 0;
    free(buf);
    // whether the template trims contents (Gemma's and Llama 3's do, ChatML's does not)
    const struct lm_chat_msg probe = {.role = "user", .content = " \tx\n"};
    char *text = NULL;
    size_t len = 0;
    if (lm_chat_apply(s->tmpl, &probe, 1, true, &text, &len) != LM_OK) return false;
    s->tmpl_trims = !strstr(text, " \tx\n");
    free(text);
    return true;
}

static bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static bool tokenize(struct server *s, const char *text, size_t len, bool add_special, bool parse_special,
                     int32_t **ids, size_t *n, struct api_error *e) {
    const enum lm_status st = lm_tokenize(s->tok, text, len, add_special, parse_special, ids, n);
    if (st == LM_OK) return true;
    if (st == LM_ERR_NOMEM) return NOMEM(e); // the server's failure, not the request's
    return api_fail(e, 400, "invalid_request_error", "invalid_value", "messages", "%s", lm_error_msg());
}

// The generation prompt's thinking part, as the family's template writes it: QwQ's opening
// "<think>\n" after ChatML's; thinking switched off (srv_think_off): Qwen3's empty span, or the
// end of the span that R1's or QwQ's opened. *opens (may be NULL): the prompt ends inside a span.
static bool think_suffix(struct server *s, const struct api_request *q, char **text, size_t *len, bool *opens,
                         struct api_error *e) {
    const bool off = srv_think_off(s, q);
    const char *k_empty = s->tmpl == LM_CHAT_TEMPLATE_DEEPSEEK_R1 ? (off ? "</think>" : "")
                          : s->think_prefill                      ? (off ? "<think>\n</think>" : "<think>\n")
                          : off                                   ? "<think>\n\n</think>\n\n"
                                                                  : "";
    if (*k_empty) {
        const size_t k = strlen(k_empty);
        char *t = realloc(*text, *len + k + 1);
        if (!t) return NOMEM(e);
        memcpy(t + *len, k_empty, k + 1);
        *text = t;
        *len += k;
    }
    if (opens) *opens = reason_prompt_opens(s->reason_kind, *text, *len);
    return true;
}

// Qwen3's template keeps an assistant's reasoning after the last user message (a tool loop):
// "<think>\n" + reasoning + "\n</think>\n\n" + content; NULL when the message keeps none.
static char *kept_reasoning(const struct server *s, const struct api_request *q, size_t i, const char *reason,
                            const char *content) {
    if (!reason || strcmp(q->msgs[i].role, "assistant") != 0) return NULL;
    size_t rl = strlen(reason), cl = strlen(content);
    while (rl > 0 && reason[rl - 1] == '\n') rl--; // the template strips the reasoning's newlines
    while (*reason == '\n' && rl > 0) reason++, rl--;
    while (*content == '\n') content++, cl--;
    char *w = malloc(rl + cl + 32);
    if (w) snprintf(w, rl + cl + 32, "<think>\n%.*s\n</think>\n\n%s", (int)rl, reason, content);
    return w;
}

static bool apply_template(struct server *s, const struct api_request *q, char *const *contents,
                           char *const *reasons, char **text, size_t *len, bool *opens, struct api_error *e);

// The chat template on the messages with these contents and reasonings (marks, or empty ones).
static bool apply(struct server *s, const struct api_request *q, char *const *contents, char *const *reasons,
                  char **text, size_t *len, bool *opens, struct api_error *e) {
    if (s->think_keep) { // the user messages after i decide whether i keeps its reasoning
        char **wrapped = calloc(q->n_msgs, sizeof *wrapped), **c2 = calloc(q->n_msgs, sizeof *c2);
        bool ok = wrapped && c2;
        for (size_t i = 0; ok && i < q->n_msgs; i++) {
            bool later_user = false;
            for (size_t j = i + 1; j < q->n_msgs; j++) later_user |= !strcmp(q->msgs[j].role, "user");
            wrapped[i] = later_user ? NULL : kept_reasoning(s, q, i, reasons[i], contents[i]);
            ok = !(reasons[i] && !later_user && !strcmp(q->msgs[i].role, "assistant") && !wrapped[i]);
            c2[i] = wrapped[i] ? wrapped[i] : contents[i];
        }
        ok = ok ? apply_template(s, q, c2, reasons, text, len, opens, e) : NOMEM(e);
        for (size_t i = 0; wrapped && i < q->n_msgs; i++) free(wrapped[i]);
        free(wrapped);
        free(c2);
        return ok;
    }
    return apply_template(s, q, contents, reasons, text, len, opens, e);
}

static bool apply_template(struct server *s, const struct api_request *q, char *const *contents,
                           char *const *reasons, char **text, size_t *len, bool *opens, struct api_error *e) {
    struct lm_chat_msg *msgs = calloc(q->n_msgs, sizeof *msgs);
    struct lm_chat_msg_tools *parts = calloc(q->n_msgs, sizeof *parts);
    size_t n_calls = 0;
    for (size_t i = 0; i < q->n_msgs; i++) n_calls += q->msgs[i].n_calls;
    struct lm_chat_tool_call *calls = calloc(n_calls ? n_calls : 1, sizeof *calls);
    if (!msgs || !parts || !calls) {
        free(msgs);
        free(parts);
        free(calls);
        return NOMEM(e);
    }
    for (size_t i = 0, c = 0; i < q->n_msgs; i++) {
        msgs[i] = (struct lm_chat_msg){.role = q->msgs[i].role, .content = contents[i]};
        parts[i] = (struct lm_chat_msg_tools){.tool_calls = calls + c, .n_tool_calls = q->msgs[i].n_calls,
                                              .tool_call_id = q->msgs[i].tool_call_id};
        for (size_t j = 0; j < q->msgs[i].n_calls; j++, c++)
            calls[c] = (struct lm_chat_tool_call){q->msgs[i].calls[j].id, q->msgs[i].calls[j].name,
                                                  q->msgs[i].calls[j].arguments};
    }
    const struct lm_chat_harmony_opts ho = {.reasoning_effort = srv_reason_effort(q),
                                            .reasoning = (const char *const *)reasons};
    const enum lm_status st =
        s->tmpl == LM_CHAT_TEMPLATE_HARMONY
            ? lm_chat_apply_harmony(&ho, msgs, parts, q->n_msgs, q->tools_json, q->tools_len, true, text, len)
            : lm_chat_apply_tools(s->tmpl, msgs, parts, q->n_msgs, q->tools_json, q->tools_len, true, text, len);
    free(msgs);
    free(parts);
    free(calls);
    if (st == LM_ERR_NOMEM) return NOMEM(e);
    if (st != LM_OK)
        return api_fail(e, 400, "invalid_request_error", "invalid_value", "messages", "%s", lm_error_msg());
    return think_suffix(s, q, text, len, opens, e);
}

// The control tokens of ids[0, n) in order equal those of ref[0, m).
static bool same_controls(const struct server *s, const int32_t *ids, size_t n, const int32_t *ref, size_t m) {
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (!s->is_control[ids[i]]) continue;
        while (j < m && !s->is_control[ref[j]]) j++;
        if (j == m || ref[j] != ids[i]) return false;
        j++;
    }
    while (j < m && !s->is_control[ref[j]]) j++;
    return j == m;
}

static bool append(int32_t **v, size_t *n, size_t *cap, const int32_t *src, size_t k) {
    if (*n + k > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *n + k) c *= 2;
        int32_t *p = realloc(*v, c * sizeof *p);
        if (!p) return false;
        *v = p;
        *cap = c;
    }
    memcpy(*v + *n, src, k * sizeof *src);
    *n += k;
    return true;
}

// The template's text with every content replaced by a marker ("\x1dLMC<nonce>:<i>\x1d"),
// tokenized piece by piece: the template's pieces with special tokens parsed, the contents
// as plain text. Only for messages that hold special-token text.
static bool tokenize_marked(struct server *s, const struct api_request *q, int32_t **out, size_t *n_out,
                            struct api_error *e) {
    char **marks = calloc(2 * q->n_msgs, sizeof *marks); // contents, then reasonings (n_msgs + i)
    if (!marks) return NOMEM(e);
    char tag[32];
    bool clash = true;
    for (int tries = 0; clash && tries < 8; tries++) { // a nonce no content holds
        snprintf(tag, sizeof tag, "\x1dLMC%016llx:", (unsigned long long)srv_next_random(s));
        clash = false;
        for (size_t i = 0; i < q->n_msgs && !clash; i++)
            clash = strstr(q->msgs[i].content, tag) || (q->msgs[i].reasoning && strstr(q->msgs[i].reasoning, tag));
    }
    bool ok = !clash;
    if (!ok) api_fail(e, 500, "server_error", "prompt_failed", NULL, "no marker free of the messages' text");
    for (size_t i = 0; ok && i < 2 * q->n_msgs; i++) {
        const char *t = i < q->n_msgs ? q->msgs[i].content : q->msgs[i - q->n_msgs].reasoning;
        if (!t) continue; // no reasoning: NULL
        marks[i] = malloc(strlen(tag) + 24);
        if (!marks[i]) ok = NOMEM(e);
        else if (!*t) marks[i][0] = 0; // empty stays empty (templates test for it)
        else snprintf(marks[i], strlen(tag) + 24, "%s%zu\x1d", tag, i);
    }
    char *text = NULL;
    size_t len = 0;
    if (ok) ok = apply(s, q, marks, marks + q->n_msgs, &text, &len, NULL, e);
    int32_t *v = NULL;
    size_t n = 0, cap = 0;
    const int32_t bos = lm_tokenizer_bos(s->tok), eos = lm_tokenizer_eos(s->tok);
    if (ok && lm_tokenizer_add_bos(s->tok) && !append(&v, &n, &cap, &bos, 1)) ok = NOMEM(e);
    const size_t tl = strlen(tag);
    for (size_t at = 0; ok && at < len;) {
        const char *m = strstr(text + at, tag);
        const size_t piece_end = m ? (size_t)(m - text) : len;
        int32_t *ids = NULL;
        size_t k = 0;
        if (piece_end > at) { // template text: its special tokens are meant
            ok = tokenize(s, text + at, piece_end - at, false, true, &ids, &k, e);
            if (ok && !append(&v, &n, &cap, ids, k)) ok = NOMEM(e);
            free(ids);
        }
        if (!ok || !m) break;
        char *endp = NULL;
        const unsigned long long i = strtoull(m + tl, &endp, 10);
        if (i >= 2 * q->n_msgs || *endp != '\x1d' || (i >= q->n_msgs && !q->msgs[i - q->n_msgs].reasoning)) {
            ok = api_fail(e, 500, "server_error", "prompt_failed", NULL, "the chat template moved a marker");
            break;
        }
        const char *c = i < q->n_msgs ? q->msgs[i].content : q->msgs[i - q->n_msgs].reasoning;
        size_t cl = strlen(c);
        if (s->tmpl_trims) {
            while (cl > 0 && is_space(*c)) c++, cl--;
            while (cl > 0 && is_space(c[cl - 1])) cl--;
        }
        if (cl > 0) { // a message's text: special-token text in it stays text
            ok = tokenize(s, c, cl, false, false, &ids, &k, e);
            if (ok && !append(&v, &n, &cap, ids, k)) ok = NOMEM(e);
            free(ids);
        }
        at = (size_t)(endp + 1 - text);
    }
    if (ok && lm_tokenizer_add_eos(s->tok) && !append(&v, &n, &cap, &eos, 1)) ok = NOMEM(e);
    for (size_t i = 0; i < 2 * q->n_msgs; i++) free(marks[i]);
    free(marks);
    free(text);
    if (!ok) {
        free(v);
        return false;
    }
    *out = v;
    *n_out = n;
    return true;
}

// The JSON the template writes from the request beside the contents (tool definitions, call
// arguments) holds no special-token text: it is not marked off as contents are (tokenize_marked),
// so "<|im_end|>" in a tool's description would become a turn marker.
static bool tool_text_plain(struct server *s, const struct api_request *q, struct api_error *e) {
    const char *what = NULL;
    bool ok = true;
    for (size_t i = 0; ok && i <= q->n_msgs; i++) {
        const size_t k = i < q->n_msgs ? q->msgs[i].n_calls : 1;
        for (size_t j = 0; ok && j < k; j++) {
            const char *t = i < q->n_msgs ? q->msgs[i].calls[j].arguments : q->tools_json;
            if (!t) continue;
            int32_t *ids = NULL;
            size_t n = 0;
            if (lm_tokenize(s->tok, t, strlen(t), false, true, &ids, &n) != LM_OK) return NOMEM(e);
            for (size_t m = 0; m < n && ok; m++) ok = !s->is_control[ids[m]];
            free(ids);
            what = i < q->n_msgs ? "a tool call's arguments" : "'tools'";
        }
    }
    if (ok) return true;
    return api_fail(e, 400, "invalid_request_error", "invalid_value", "messages", "%s hold the text of a special "
                    "token (a turn marker); lumen refuses it (--parse-special-in-messages allows it)", what);
}

// Chat: the template's text tokenized as a whole (the tokens every server computes). When
// the messages' text holds special-token text, the control tokens of that tokenization
// differ from the template's own, and the prompt is tokenized piece by piece instead.
static bool chat_tokens(struct server *s, const struct api_request *q, int32_t **ids, size_t *n, bool *opens,
                        struct api_error *e) {
    char **contents = malloc(2 * q->n_msgs * sizeof *contents); // contents, then reasonings
    if (!contents) return NOMEM(e);
    for (size_t i = 0; i < q->n_msgs; i++) {
        contents[i] = q->msgs[i].content;
        contents[q->n_msgs + i] = q->msgs[i].reasoning;
    }
    char *text = NULL;
    size_t len = 0;
    bool ok = apply(s, q, contents, contents + q->n_msgs, &text, &len, opens, e);
    free(contents);
    if (ok) ok = tokenize(s, text, len, true, true, ids, n, e);
    free(text);
    text = NULL; // the second apply may fail before it sets text
    if (!ok || s->o->parse_special_in_messages) return ok;
    // the template alone (empty contents): the control tokens it puts there itself
    char **empty = malloc(2 * q->n_msgs * sizeof *empty);
    if (!empty) {
        free(*ids);
        *ids = NULL;
        return NOMEM(e);
    }
    for (size_t i = 0; i < q->n_msgs; i++) {
        empty[i] = "";
        const char *rs = q->msgs[i].reasoning; // plain text where there is some (templates test for it)
        empty[q->n_msgs + i] = rs && *rs ? "r" : (char *)rs;
    }
    int32_t *ref = NULL;
    size_t m = 0;
    ok = apply(s, q, empty, empty + q->n_msgs, &text, &len, NULL, e);
    free(empty);
    if (ok) ok = tokenize(s, text, len, true, true, &ref, &m, e);
    free(text);
    if (ok && !same_controls(s, *ids, *n, ref, m)) {
        free(*ids);
        *ids = NULL;
        ok = tokenize_marked(s, q, ids, n, e);
    }
    free(ref);
    if (!ok) {
        free(*ids);
        *ids = NULL;
    }
    return ok;
}

bool srv_prompt_tokens(struct server *s, struct run *r, struct api_error *e) {
    const struct api_request *q = &r->req;
    int32_t *ids = NULL;
    size_t n = 0;
    if (q->kind == API_COMPLETION && q->has_prompt_ids) {
        ids = malloc((size_t)(q->n_prompt_ids ? q->n_prompt_ids : 1) * sizeof *ids);
        if (!ids) return NOMEM(e);
        memcpy(ids, q->prompt_ids, (size_t)q->n_prompt_ids * sizeof *ids);
        n = (size_t)q->n_prompt_ids;
    } else if (q->kind == API_CHAT) {
        if (!s->o->parse_special_in_messages && !tool_text_plain(s, q, e)) return false;
        srv_reason_prior_turns(s, &r->req);
        if (!chat_tokens(s, q, &ids, &n, &r->think_open, e)) return false;
    } else {
        const enum lm_status st = lm_tokenize(s->tok, q->prompt ? q->prompt : "", q->prompt_len, true, true, &ids, &n);
        if (st == LM_ERR_NOMEM) return NOMEM(e);
        if (st != LM_OK)
            return api_fail(e, 400, "invalid_request_error", "invalid_value", "prompt", "%s", lm_error_msg());
    }
    if (n > INT32_MAX / 2) {
        free(ids);
        return api_fail(e, 400, "invalid_request_error", "context_length_exceeded", "prompt",
                        "the prompt is %zu tokens", n);
    }
    r->prompt = ids;
    r->n_prompt = (int32_t)n;
    if (n == 0)
        return api_fail(e, 400, "invalid_request_error", "invalid_value", "prompt", "the prompt is empty (no tokens)");
    return true;
}
