// One request generated through the engine in step mode, on the CLI's thread (lumen run,
// lumen chat): the text streamed to stdout as the events come (UTF-8 held back until
// complete), the timings the stats lines need, the prefill's progress line, Ctrl-C.
#ifndef LM_CLI_GEN_H
#define LM_CLI_GEN_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli_progress.h"
#include "lumen.h"
#include "reasoning.h"

struct cli_gen {
    // set by the caller after cli_gen_init
    bool ignore_eos;   // end-of-generation tokens are shown as text
    int64_t show_max;  // tokens shown and counted at most (run -n 0 asks for one, shows none)
    void (*capture)(void *user, const char *s, size_t n); // also gets the shown text (or NULL)
    void *capture_user;
    // results
    bool done;                     // the request's last event came
    enum lm_finish finish;
    char error[256];               // LM_FINISH_ERROR: what failed
    int64_t n_gen;                 // tokens generated (an end-of-generation one counted)
    int32_t n_cached;              // prompt tokens the prefix cache held
    uint64_t t_first;              // when the first token came (lm_time_ns)
    uint64_t ns_out;               // detokenizing + writing the tokens after the first
    struct lm_engine_stats at_first; // the engine's counters after the step of the first token
    // reasoning (cli_gen_reasoning): the thinking span apart from the answer
    bool reasoning;                // the model thinks: the text goes through the splitter
    bool show_reasoning, faint;    // the span is shown (faint: ANSI faint, a terminal)
    int64_t n_reason;              // tokens of the span (its markers included)
    // the span's markers as tokens (for a thinking budget: cli_gen_budget); n_think_end 0: none
    int32_t think_start[16], think_end[16], n_think_start, n_think_end;
    int32_t n_think_close;         // think_end's first tokens that end the span (reason_close_marker; 0: all)
    enum reason_kind kind;
    bool think_open;               // the generation prompt opened the span (R1's)
    // private
    struct reason_split split;
    struct sbuf rbuf, cbuf;
    bool shown_reason;             // reasoning was shown: the answer starts on its own line
    const struct lm_tokenizer *tok;
    struct lm_detok dt;
    char *piece;
    size_t piece_cap;
};

// Returns false without memory.
bool cli_gen_init(struct cli_gen *g, const struct lm_tokenizer *tok);
void cli_gen_free(struct cli_gen *g);
// The lm_event_fn of the request (user: the struct cli_gen).
void cli_gen_on_event(void *user, const struct lm_event *ev);
// Steps the engine until request id ends. While it prefills, prog (may be NULL) shows the
// prompt tokens computed of n_prefill; when *stop (may be NULL) becomes non-zero the request
// is cancelled. Returns 0, or -1 when a step failed (lm_error_msg).
int cli_gen_drive(struct lm_engine *e, uint64_t id, struct cli_gen *g, struct cli_progress *prog,
                  int64_t n_prefill, volatile sig_atomic_t *stop);
// Writes (and captures) the bytes the detokenizer held back.
void cli_gen_flush(struct cli_gen *g);
// A chat reply of model m in format tmpl: when the model thinks (its template or vocabulary
// marks a <think> span), the reply's span is kept apart: shown faint on a terminal, hidden
// elsewhere unless show; the answer alone is captured; n_reason counts the span's tokens.
void cli_gen_reasoning(struct cli_gen *g, const struct lm_model *m, enum lm_chat_template tmpl, bool show);
// --reasoning-budget N (>= 0; -1: none): the request's thinking span ends after N of its tokens
// (the engine inserts the family's end marker: </think>, or harmony's
// <|end|><|start|>assistant<|channel|>final<|message|>). Nothing when the model does not think.
void cli_gen_budget(const struct cli_gen *g, int32_t budget, struct lm_request_params *rp);

#endif
