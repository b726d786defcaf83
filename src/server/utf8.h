// UTF-8 for the server's output: validity, repair before JSON (jansson refuses invalid
// UTF-8), and escaping of client text for log lines.
#ifndef LM_SERVER_UTF8_H
#define LM_SERVER_UTF8_H

#include <stdbool.h>
#include <stddef.h>

#include "strbuf.h"

// Appends s[0, n) to b with every invalid UTF-8 sequence replaced by U+FFFD, so the text
// can go into a JSON string (jansson refuses invalid UTF-8; token pieces and byte-fallback
// output may hold partial characters).
bool utf8_repair_append(struct sbuf *b, const char *s, size_t n);
// Length of the longest prefix of s[0, n) that is valid UTF-8.
size_t utf8_valid_prefix(const char *s, size_t n);
// Copies the NUL-terminated s to out[cap] for a log line: control characters (C0, DEL, C1)
// and bytes that are not valid UTF-8 become \xNN, a backslash becomes two, so client text (a
// path, a field) can neither start a forged line nor hide in terminal escapes. Truncates.
void log_escape(const char *s, char *out, size_t cap);

#endif
