// Status codes, thread-local error messages and the always-on assertion.
// Library code never exits on bad input: it returns a status and leaves one
// line in lm_error_msg() naming the function/file, the key or tensor, expected vs actual.
#ifndef LM_BASE_STATUS_H
#define LM_BASE_STATUS_H

#include <stdio.h>
#include <stdlib.h>

enum lm_status {
    LM_OK = 0,
    LM_ERR_IO,          // open/read/mmap failed
    LM_ERR_FORMAT,      // malformed input file
    LM_ERR_UNSUPPORTED, // valid but not supported (dtype, architecture, version)
    LM_ERR_NOMEM,       // allocation failed or size overflow
    LM_ERR_ARG,         // bad argument from the caller / user
    LM_ERR_STATE,       // e.g. context full
};

// Stores a printf-formatted message (thread-local, truncated to 1024 bytes) and returns st.
enum lm_status lm_error_set(enum lm_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
// The last message set on this thread ("" if none).
const char *lm_error_msg(void);
const char *lm_status_name(enum lm_status st);

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
