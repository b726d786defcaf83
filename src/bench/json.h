// The JSON writers the bench reports share: a quoted, escaped string, a number that is null
// when not finite (a figure a run could not measure), and an object member of either.
#ifndef LM_BENCH_JSON_H
#define LM_BENCH_JSON_H

#include <math.h>
#include <stdio.h>

// s as a JSON string literal (NULL writes "").
static inline void lm_bench_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        const unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch == '\n') fputs("\\n", f);
        else if (ch == '\t') fputs("\\t", f);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

// v with 4 decimals, or null for NaN and infinities (JSON has neither).
static inline void lm_bench_json_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.4f", v);
    else fputs("null", f);
}

// One member of an object: text (the separator, key and colon: ", \"desc\": ") then v.
static inline void lm_bench_json_member_str(FILE *f, const char *text, const char *v) {
    fputs(text, f);
    lm_bench_json_str(f, v);
}
static inline void lm_bench_json_member_num(FILE *f, const char *text, double v) {
    fputs(text, f);
    lm_bench_json_num(f, v);
}

#endif
