// Out-of-line forms, for include/lumen_prof.h, of the profiler hooks that prof.h inlines
// into the library's hot paths (a program outside the library cannot see their globals).
#include "prof/prof.h"

bool lm_prof_enabled(void) { return lm_prof_on(); }

void lm_prof_phase_end(enum lm_prof_phase ph, uint64_t t0, int32_t step, int32_t n_tokens) {
    lm_prof_phase(ph, t0, lm_prof_ticks(), step, n_tokens);
}
