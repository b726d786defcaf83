// A one-line progress display on stderr for work that runs longer than ~2 s (bench
// tests, long prefills, later perplexity chunks): drawn only when stderr is a terminal,
// redrawn in place, erased when the work ends, so logs and pipes never see it.
#ifndef LM_CLI_PROGRESS_H
#define LM_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

struct cli_progress {
    char label[64];
    char unit[16];
    int64_t total;       // 0: unknown (no percentage, no ETA)
    uint64_t t0_ns;      // begin
    uint64_t t_draw_ns;  // last redraw
    uint64_t delay_ns;   // nothing is drawn before this much time has passed
    bool enabled;        // stderr is a terminal (and LUMEN_NO_PROGRESS is unset)
    bool shown;          // a line is on the screen
};

// Starts timing a piece of work of total units (e.g. "tok", "rep", "chunk").
// The delay is 2 s, or $LUMEN_PROGRESS_DELAY_MS (tests use 0).
void cli_progress_begin(struct cli_progress *p, const char *label, int64_t total, const char *unit);
// done units of total are complete; redraws at most 10 times a second.
void cli_progress_update(struct cli_progress *p, int64_t done);
// Erases the line if one was drawn (call before printing anything else to the terminal).
void cli_progress_end(struct cli_progress *p);

#endif
