// A read-only JSON tree over a text (no copies: nodes point into it), for the templates that
// walk a JSON schema (harmony's TypeScript rendering of tool parameters, chat_harmony.c).
#ifndef LM_TOKENIZER_JSON_TREE_H
#define LM_TOKENIZER_JSON_TREE_H

#include <stdbool.h>
#include <stddef.h>

enum jt_type { JT_NULL, JT_FALSE, JT_TRUE, JT_NUMBER, JT_STRING, JT_ARRAY, JT_OBJECT };

struct jt_node {
    enum jt_type type;
    const char *s;       // the value's text (strings: between the quotes, still escaped)
    size_t n;
    const char *key;     // in an object: the member's key (still escaped), else NULL
    size_t key_n;
    int first, next;     // first child, next sibling (indices, -1 = none)
    int count;           // children
};

struct jt {
    struct jt_node *nodes;
    int n, cap;
};

// Parses text[0, len) (one value, white space around it allowed). false: not JSON, or too
// deep (64 levels), or out of memory. jt_free in every case.
bool jt_parse(struct jt *t, const char *text, size_t len);
void jt_free(struct jt *t);
// Member of object node o named key (unescaped key compared byte for byte against the raw
// key text; keys with escapes do not match), or -1. -1 for o < 0 or not an object.
int jt_get(const struct jt *t, int o, const char *key);
// Truthiness as Jinja sees the value: null, false, 0, "", [] and {} are false.
bool jt_truthy(const struct jt *t, int i);
// The string node i equals s (raw text, no escapes in it).
bool jt_str_is(const struct jt *t, int i, const char *s);

#endif
