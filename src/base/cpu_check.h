// Start-up CPU check: the features the natively compiled code assumes (-march=native on the
// build machine) against what this CPU and OS provide; a constructor in cpu_check.c refuses
// to run, with one line, before any such instruction can execute.
#ifndef LM_BASE_CPU_CHECK_H
#define LM_BASE_CPU_CHECK_H

#include <stddef.h>

// The features this build's natively compiled code may use, from the compiler's own feature
// macros (cpu_required.c): "sse3+ssse3+...+avx512vnni", "" for a baseline x86-64 build.
// Names are gcc's -m spellings without the -m: "sse4.1", "avx2", "avx512vnni", "amx-tile".
const char *lm_cpu_required(void);

// 1 when this CPU supports `name` (and, for AVX / AVX-512 / AMX, the OS saves those
// registers), 0 when not, -1 for a name lumen does not know. Always 1 off x86.
int lm_cpu_has(const char *name);

// Features in `required` (names separated by '+', ',' or spaces) that this CPU lacks,
// written to out as "a, b" (truncated to cap); returns how many. An unknown name counts as
// missing and is written "name (unknown feature)".
int lm_cpu_missing_features(const char *required, char *out, size_t cap);

// The one-line refusal (no newline) for a binary that requires `required` and was built with
// `built_with` (e.g. "-march=native on the build machine"), ending with `advice`: written to
// out when something is missing (else out = ""); returns the number of missing features.
int lm_cpu_check_message(const char *required, const char *built_with, const char *advice,
                         char *out, size_t cap);

// 1 once the start-up check has run in this process (it runs before main()).
int lm_cpu_check_done(void);

// The start-up check itself (a constructor; exported so the link pulls it into every binary
// that uses lumen_core: CMakeLists.txt passes --undefined=lm_cpu_check_at_start). Adds the
// features in $LUMEN_CPU_CHECK_EXTRA to the required list (for tests).
void lm_cpu_check_at_start(void);

#endif
