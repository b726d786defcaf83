// gpt-oss's answer in the harmony format read back: the analysis channel as reasoning, the final
// channel (and commentary preambles) as content, commentary addressed to functions.NAME as tool
// calls. A pure function of the text so far, so a stream re-reads its answer at each feed and
// whole and streamed answers are equal (docs/server.md, "Harmony").
#ifndef LM_SERVER_HARMONY_H
#define LM_SERVER_HARMONY_H

#include <stdbool.h>
#include <stddef.h>

#include "strbuf.h"

struct harmony_call {
    struct sbuf name; // NAME of "to=functions.NAME"
    struct sbuf args; // the message's text (JSON arguments) so far
    bool done;        // closed by <|call|> (or another end marker)
};

struct harmony_out {
    struct sbuf reasoning, content;
    struct harmony_call *calls;
    int n_calls, cap;
    int n_dropped;    // messages to other recipients (built-in browser / python tools) left out
    bool oom;
};

// Reads text[0, n): the model's output after the prompt's "<|start|>assistant", control tokens
// written as their text (<|channel|>, <|message|>, <|end|>, ...). Not final: a tail that may be
// the beginning of a marker is held back, so each of reasoning, content and a call's arguments
// only ever grows as the text does. final: the answer ended; a message it never closed is
// delivered as far as it went (to its channel's destination), without a marker cut short at the
// very end ("<|e" of <|end|>); a header never closed is dropped.
// out is reset first (harmony_out_free frees it).
void harmony_parse(const char *text, size_t n, bool final, struct harmony_out *out);
void harmony_out_free(struct harmony_out *out);

#endif
