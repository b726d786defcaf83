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
    // private
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

#endif
