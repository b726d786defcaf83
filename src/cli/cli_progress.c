// One-line progress on stderr when it is a terminal (see cli_progress.h).
#include "cli_progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lumen.h"

void cli_progress_begin(struct cli_progress *p, const char *label, int64_t total, const char *unit) {
    memset(p, 0, sizeof *p);
    snprintf(p->label, sizeof p->label, "%s", label);
    snprintf(p->unit, sizeof p->unit, "%s", unit);
    p->total = total;
    p->t0_ns = lm_time_ns();
    const char *no = getenv("LUMEN_NO_PROGRESS");
    p->enabled = isatty(STDERR_FILENO) && !(no && *no && strcmp(no, "0") != 0);
    p->delay_ns = 2000000000ull;
    const char *d = getenv("LUMEN_PROGRESS_DELAY_MS");
    if (d && *d) {
        char *end;
        const long long ms = strtoll(d, &end, 10);
        if (!*end && ms >= 0) p->delay_ns = (uint64_t)ms * 1000000ull;
    }
}

void cli_progress_update(struct cli_progress *p, int64_t done) {
    if (!p->enabled) return;
    const uint64_t now = lm_time_ns();
    if (now - p->t0_ns < p->delay_ns) return;
    if (p->shown && now - p->t_draw_ns < 100000000ull && done < p->total) return;
    p->t_draw_ns = now;
    const double el = (double)(now - p->t0_ns) / 1e9;
    char line[192];
    int n;
    if (p->total > 0) {
        const double frac = done < p->total ? (double)done / (double)p->total : 1.0;
        n = snprintf(line, sizeof line, "%s: %lld/%lld %s (%.0f%%), %.1f s", p->label, (long long)done,
                     (long long)p->total, p->unit, 100.0 * frac, el);
        if (done > 0 && done < p->total && n > 0 && (size_t)n < sizeof line)
            snprintf(line + n, sizeof line - (size_t)n, ", ~%.1f s left", el * (1.0 - frac) / frac);
    } else {
        snprintf(line, sizeof line, "%s: %lld %s, %.1f s", p->label, (long long)done, p->unit, el);
    }
    // \r + erase-line redraws in place; the terminal wraps nothing if it fits one row
    fprintf(stderr, "\r\033[K%s", line);
    fflush(stderr);
    p->shown = true;
}

void cli_progress_end(struct cli_progress *p) {
    if (!p->shown) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    p->shown = false;
}
