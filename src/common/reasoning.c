// The reasoning splitter: <think> ... </think> read from the answer's text as it streams, the
// span's text to reasoning (trimmed) and the rest to content (its leading white space dropped),
// as llama-server's deepseek reasoning format separates them; nothing is decoded twice.
#define _GNU_SOURCE // memmem
#include "reasoning.h"

#include <stdlib.h>
#include <string.h>

static const char k_open[] = "<think>", k_close[] = "</think>";
#define OPEN_LEN (sizeof k_open - 1)
#define CLOSE_LEN (sizeof k_close - 1)

static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

void reason_split_init(struct reason_split *s, enum reason_kind kind, bool in_think) {
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->state = kind == REASON_NONE ? RS_ANSWER : in_think ? RS_OPEN_FORCED : RS_OPEN;
    s->thought = kind != REASON_NONE && in_think;
    if (kind == REASON_HARMONY) { // the answer begins at a message's header
        s->state = RS_OPEN;
        s->h_fresh = true;
    }
}

void reason_split_free(struct reason_split *s) {
    sbuf_free(&s->hold);
    memset(s, 0, sizeof *s);
}

static void put(struct reason_split *s, struct sbuf *to, const char *p, size_t n) {
    if (n && !sbuf_append(to, p, n)) s->oom = true;
}

// Bytes of the longest suffix of p[0, n) that is a proper prefix of marker m.
static size_t partial_suffix(const char *p, size_t n, const char *m, size_t mlen) {
    for (size_t k = mlen - 1 < n ? mlen - 1 : n; k > 0; k--)
        if (memcmp(p + n - k, m, k) == 0) return k;
    return 0;
}

// One step of the state machine on the held text; false when it needs more text.
static bool step(struct reason_split *s, struct sbuf *reason, struct sbuf *content) {
    struct sbuf *h = &s->hold;
    const char *p = h->p ? h->p : "";
    size_t i = 0;
    switch (s->state) {
    case RS_OPEN:
    case RS_OPEN_FORCED:
        while (i < h->n && is_space(p[i])) i++;
        if (i == h->n) return false;
        if (h->n - i >= OPEN_LEN && memcmp(p + i, k_open, OPEN_LEN) == 0) {
            sbuf_consume(h, i + OPEN_LEN);
            s->state = RS_LEAD;
            s->thought = true;
            return true;
        }
        if (h->n - i < OPEN_LEN && memcmp(p + i, k_open, h->n - i) == 0) return false; // "<thi": wait
        s->state = s->state == RS_OPEN ? RS_ANSWER : RS_LEAD;  // no marker: answer / thought
        return true;
    case RS_LEAD:
    case RS_AFTER:
        while (i < h->n && is_space(p[i])) i++;
        sbuf_consume(h, i);
        if (h->n == 0) return false;
        s->state = s->state == RS_LEAD ? RS_THINK : RS_ANSWER;
        return true;
    case RS_THINK: {
        const char *m = h->n >= CLOSE_LEN ? memmem(p, h->n, k_close, CLOSE_LEN) : NULL;
        if (m) {
            size_t k = (size_t)(m - p);
            while (k > 0 && is_space(p[k - 1])) k--; // the reasoning's trailing white space
            put(s, reason, p, k);
            sbuf_consume(h, (size_t)(m - p) + CLOSE_LEN);
            s->state = RS_AFTER;
            return true;
        }
        // hold a partial "</thi" and the white space before it: either may end the span
        size_t keep = partial_suffix(p, h->n, k_close, CLOSE_LEN);
        while (keep < h->n && is_space(p[h->n - keep - 1])) keep++;
        put(s, reason, p, h->n - keep);
        sbuf_consume(h, h->n - keep);
        return false;
    }
    case RS_ANSWER:
        put(s, content, p, h->n);
        sbuf_consume(h, h->n);
        return false;
    }
    return false;
}

void reason_split_feed(struct reason_split *s, const char *text, size_t n, struct sbuf *reason,
                       struct sbuf *content) {
    if (s->kind == REASON_NONE) {
        put(s, content, text, n);
        return;
    }
    if (n && !sbuf_append(&s->hold, text, n)) {
        s->oom = true;
        return;
    }
    if (s->kind == REASON_HARMONY) {
        reason_harmony_feed(s, reason, content);
        return;
    }
    while (step(s, reason, content)) {
    }
}

void reason_split_finish(struct reason_split *s, struct sbuf *reason, struct sbuf *content) {
    struct sbuf *h = &s->hold;
    if (s->kind == REASON_HARMONY) {
        reason_harmony_finish(s, reason, content);
        return;
    }
    if (s->kind == REASON_NONE || h->n == 0) return;
    if (s->state == RS_OPEN) { // white space or a partial "<thi": the answer's text
        put(s, content, h->p, h->n);
    } else if (s->state == RS_THINK) { // an unclosed span: reasoning, trimmed
        size_t k = h->n;
        while (k > 0 && is_space(h->p[k - 1])) k--;
        put(s, reason, h->p, k);
    } else if (s->state == RS_OPEN_FORCED) { // a partial "<thi" inside the span
        size_t i = 0;
        while (i < h->n && is_space(h->p[i])) i++;
        put(s, reason, h->p + i, h->n - i);
    }
    sbuf_consume(h, h->n);
}

enum reason_kind reason_kind_detect(const char *template_text, bool vocab_has_think) {
    if (template_text && strstr(template_text, "<|channel|>") && strstr(template_text, "<|message|>"))
        return REASON_HARMONY; // gpt-oss's
    if (template_text && strstr(template_text, k_open) && strstr(template_text, k_close)) return REASON_THINK_TAGS;
    if (template_text && *template_text) return REASON_NONE; // a template that never thinks
    return vocab_has_think ? REASON_THINK_TAGS : REASON_NONE;
}

bool reason_prompt_opens(enum reason_kind kind, const char *prompt, size_t n) {
    if (kind != REASON_THINK_TAGS) return false;
    while (n > 0 && is_space(prompt[n - 1])) n--;
    return n >= OPEN_LEN && memcmp(prompt + n - OPEN_LEN, k_open, OPEN_LEN) == 0;
}

static const char k_h_open[] = "<|channel|>analysis<|message|>",
                  k_h_close[] = "<|end|><|start|>assistant<|channel|>final<|message|>";

const char *reason_end_marker(enum reason_kind kind) {
    return kind == REASON_THINK_TAGS ? k_close : kind == REASON_HARMONY ? k_h_close : NULL;
}

const char *reason_start_marker(enum reason_kind kind) {
    return kind == REASON_THINK_TAGS ? k_open : kind == REASON_HARMONY ? k_h_open : NULL;
}

// harmony: <|end|><|start|>assistant (its tokens: "assistant" is one in gpt-oss's vocabulary,
// several in others); the grammar then sees the next message from its header's <|channel|> or
// " to=" on, as it does when the answer has no analysis
const char *reason_close_marker(enum reason_kind kind) {
    return kind == REASON_HARMONY ? "<|end|><|start|>assistant" : NULL;
}
