// Status codes, thread-local error messages and the always-on assertion.
// Library code never exits on bad input: it returns a status and leaves one
// line in lm_error_msg() naming the function/file, the key or tensor, expected vs actual.
#ifndef LM_BASE_STATUS_H
#define LM_BASE_STATUS_H

#include <stdio.h>
#include <stdlib.h>

#include "lumen_status.h" // enum lm_status, lm_error_set, lm_error_msg, lm_status_name

// Programmer errors only (never bad input): always on, prints expression, file and line.
#define LM_ASSERT(e)                                                                  \
    do {                                                                              \
        if (!(e)) {                                                                   \
            fprintf(stderr, "lumen: assertion failed: %s (%s:%d)\n", #e, __FILE__,    \
                    __LINE__);                                                        \
            abort();                                                                  \
        }                                                                             \
    } while (0)

#endif
