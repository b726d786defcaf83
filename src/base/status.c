// Thread-local error message storage for lm_status returns.
#include "base/status.h"

#include <stdarg.h>

static _Thread_local char g_msg[1024];

enum lm_status lm_error_set(enum lm_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    return st;
}

const char *lm_error_msg(void) { return g_msg; }

const char *lm_status_name(enum lm_status st) {
    switch (st) {
    case LM_OK: return "ok";
    case LM_ERR_IO: return "io error";
    case LM_ERR_FORMAT: return "format error";
    case LM_ERR_UNSUPPORTED: return "unsupported";
    case LM_ERR_NOMEM: return "out of memory";
    case LM_ERR_ARG: return "bad argument";
    case LM_ERR_STATE: return "bad state";
    case LM_ERR_KV_FULL: return "kv pool full";
    case LM_ERR_BUSY: return "busy";
    }
    return "unknown";
}
