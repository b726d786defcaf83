// lumen public status codes and the thread-local error message (included by lumen.h;
// the library's base/status.h builds on it).
#ifndef LUMEN_STATUS_H
#define LUMEN_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

enum lm_status {
    LM_OK = 0,
    LM_ERR_IO,          // open/read/mmap failed
    LM_ERR_FORMAT,      // malformed input file
    LM_ERR_UNSUPPORTED, // valid but not supported (dtype, architecture, version)
    LM_ERR_NOMEM,       // allocation failed or size overflow
    LM_ERR_ARG,         // bad argument from the caller / user
    LM_ERR_STATE,       // e.g. a sequence at its context limit
    LM_ERR_KV_FULL,     // the KV pool has no free block: wait, preempt or refuse (nothing changed)
    LM_ERR_BUSY,        // a queue is full: retry later
};

// The last message set on this thread ("" if none): one line naming the function or file,
// the key, tensor or argument, expected vs actual.
const char *lm_error_msg(void);
const char *lm_status_name(enum lm_status st);
// Stores a printf-formatted message as this thread's (truncated to 1024 bytes) and returns
// st: how the library, and code built on it (src/bench), report a failure.
enum lm_status lm_error_set(enum lm_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif
