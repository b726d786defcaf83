// The regex subset of JSON Schema's `pattern` -> a GBNF expression over the *JSON-encoded*
// characters of a string (between its quotes).
#ifndef LM_GRAMMAR_REGEX_H
#define LM_GRAMMAR_REGEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/strbuf.h"

// Helper rules an emitted expression may refer to; the caller defines them.
enum {
    LM_RX_USES_CHAR = 1, // `char`: any JSON string character (raw or escaped)
    LM_RX_USES_DOT = 2,  // `regex-dot`: any character but a newline
};
#define LM_RX_MAX_REPEAT 10000 // largest count of {m,n}
#define LM_RX_MAX_LEN 4096     // longest pattern

// Appends to out a GBNF expression matching exactly the JSON-encoded strings (one encoding
// per character, as lm_json_encode_cp) whose text matches `pattern` as JSON Schema reads it
// (ECMA-262, unanchored unless ^/$). The subset: literals, escapes \d \w \s \D \W \S \n \t
// \r \f \v \xHH \uHHHH and escaped punctuation, classes [...] [^...], ., groups (...) (?:...)
// (?<name>...), alternation, ? * + {m} {m,} {m,n} (lazy forms too), ^ at the start and $ at
// the end of a top-level alternative. LM_ERR_ARG ("json schema: <where>: pattern ...: what
// at offset N") for backreferences, lookaround, word boundaries, flags, and anything else.
enum lm_status lm_regex_to_gbnf(struct lm_strbuf *out, const char *pattern, size_t len,
                                const char *where, unsigned *uses);

#endif
