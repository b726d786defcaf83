// Reasoning kept apart from the answer (the server and the CLI share it): a streaming splitter
// that reads the answer's text as it is released and yields reasoning and content deltas (one
// pass over the text, whole and streamed answers equal). Each family's form is a kind;
// docs/server.md, "Reasoning".
#ifndef LM_COMMON_REASONING_H
#define LM_COMMON_REASONING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strbuf.h"

// How a family marks its thinking span. A new form (gpt-oss's harmony channels) is one more
// value here and one more branch in reason_split_feed / _finish with its own states.
enum reason_kind {
    REASON_NONE = 0,       // no reasoning span: everything is content (also --reasoning-format none)
    REASON_THINK_TAGS = 1, // <think> ... </think> (Qwen3, QwQ, DeepSeek-R1 distills)
    REASON_HARMONY = 2,    // gpt-oss's channels: analysis bodies (reasoning_harmony.c); the text
                           // holds the control tokens as their text (<|channel|>, <|message|>, ...)
};

// Where a harmony message's body goes, from its header (the text before <|message|>).
enum reason_dest { REASON_DEST_REASON, REASON_DEST_CONTENT, REASON_DEST_CALL, REASON_DEST_DROP };

// The splitter's state (THINK_TAGS). OPEN and OPEN_FORCED: nothing but white space seen yet;
// OPEN's answer may begin with <think>, OPEN_FORCED's prompt opened the span already (the
// generation prompt ends with "<think>", as R1's does), so a repeated <think> is skipped and
// anything else is thought. LEAD: inside, before the first non-space byte (reasoning is
// trimmed, as llama.cpp trims it); THINK: inside; AFTER: past </think>, before the answer's
// first non-space byte; ANSWER: the rest is content.
enum reason_state { RS_OPEN, RS_OPEN_FORCED, RS_LEAD, RS_THINK, RS_AFTER, RS_ANSWER };

struct reason_split {
    enum reason_kind kind;
    enum reason_state state;
    struct sbuf hold;  // text not given out yet: it may begin a marker or end the reasoning
    bool thought;      // a thinking span was opened
    bool oom;
    // HARMONY: markup keeps headers, markers and non-analysis bodies in content (the server's
    // tool-call reader parses them); without it content is the plain text of final and
    // commentary bodies addressed to nobody (calls and other recipients dropped). Set after init.
    bool markup;
    bool h_fresh, h_role; // a header may begin here (plain text instead: content); after <|start|>
    uint8_t h_state;      // reasoning_harmony.c: in a header, in a body, past <|return|>
    uint8_t h_dest;       // the body's enum reason_dest
};

// in_think: the prompt's generation prompt opened the span already (reason_prompt_opens).
void reason_split_init(struct reason_split *s, enum reason_kind kind, bool in_think);
void reason_split_free(struct reason_split *s);
// Consumes text[0, n): reasoning bytes are appended to reason, answer bytes to content. What
// could still begin a marker (or trailing white space inside the span) is held back.
void reason_split_feed(struct reason_split *s, const char *text, size_t n, struct sbuf *reason,
                       struct sbuf *content);
// The text ended: releases what is held (an unclosed span is reasoning, as llama-server reads it).
void reason_split_finish(struct reason_split *s, struct sbuf *reason, struct sbuf *content);
// The splitter is inside the thinking span (or may still open one at the start).
static inline bool reason_split_thinking(const struct reason_split *s) {
    if (s->kind == REASON_HARMONY) return s->h_state == 1 /* a body */ && s->h_dest == REASON_DEST_REASON;
    return s->kind != REASON_NONE && s->state != RS_ANSWER && s->state != RS_AFTER &&
           (s->state != RS_OPEN || s->thought);
}

// The form a model's chat template and vocabulary mark (template text may be NULL): HARMONY when
// the template writes <|channel|> and <|message|>; THINK_TAGS when it writes <think> or the
// vocabulary has <think> and </think> tokens.
enum reason_kind reason_kind_detect(const char *template_text, bool vocab_has_think);
// The rendered prompt ends with the span's opening marker (and white space): the answer
// begins inside the span (R1 distills; Qwen3 when a prompt forces thinking).
bool reason_prompt_opens(enum reason_kind kind, const char *prompt, size_t n);
// The end marker's text (what a thinking budget inserts), or NULL for NONE.
const char *reason_end_marker(enum reason_kind kind);
// The span's opening marker's text (NULL for NONE), and the text of the end marker's first
// tokens that end the span when the model writes them (NULL: all of it); its token count is
// lm_request_params.n_think_close.
const char *reason_start_marker(enum reason_kind kind);
const char *reason_close_marker(enum reason_kind kind);

// HARMONY (reasoning_harmony.c): a header's destination; a call's NAME (of to=functions.NAME)
// into name / name_n when not NULL. The splitter's steps for the kind.
enum reason_dest reason_harmony_dest(const char *h, size_t n, const char **name, size_t *name_n);
void reason_harmony_feed(struct reason_split *s, struct sbuf *reason, struct sbuf *content);
void reason_harmony_finish(struct reason_split *s, struct sbuf *reason, struct sbuf *content);

#endif
