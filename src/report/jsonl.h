// The strict JSON-object-line parser of `lumen analyze` (analyze.c): one flat object
// per line (strings, numbers, booleans, null; no nesting), decoded strings in a buffer of
// its own, errors with the column.
#ifndef LM_REPORT_JSONL_H
#define LM_REPORT_JSONL_H

#include <stdbool.h>
#include <stddef.h>

enum { JV_STR = 1, JV_NUM, JV_BOOL, JV_NULL };

#define JMAX_FIELDS 32
struct jfield {
    const char *key;
    int type;
    const char *s; // JV_STR (NUL-terminated, decoded)
    double num;
    bool is_int;   // JV_NUM written without fraction/exponent
    long long i;
};

struct jline {
    struct jfield f[JMAX_FIELDS];
    int n;
    char *buf; // decoded strings
    size_t cap, used;
    char err[160];
};

// Parses one line of len bytes into j (its fields valid until the next call on j); false
// with j->err set (column and what) on anything but one flat JSON object.
bool lm_jline_parse(struct jline *j, const char *p, size_t len);
// The field named key of the last parsed line, or NULL.
const struct jfield *lm_jget(const struct jline *j, const char *key);

#endif
