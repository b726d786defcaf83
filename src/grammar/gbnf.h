// GBNF (llama.cpp's grammar format) -> a flat grammar IR: rules of alternatives of elements
// (a character class or a rule reference), repetitions expanded into helper rules, and the
// checks that keep the matcher finite (defined rules, root, no left recursion, finite strings).
#ifndef LM_GRAMMAR_GBNF_H
#define LM_GRAMMAR_GBNF_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

enum gb_kind {
    GB_END = 0,  // end of an alternative; arg = its rule
    GB_CHAR = 1, // one code point in class arg
    GB_REF = 2,  // rule arg
};

struct gb_elem {
    uint32_t kind : 2;
    uint32_t arg : 30;
};

// A set of code points: sorted, merged, inclusive ranges [lo, hi].
struct gb_class {
    uint32_t off, n;      // into gb_grammar.ranges (pairs)
    uint32_t ascii[4];    // bitmap of the code points below 128, for the common case
};

struct gb_rule {
    uint32_t name_off;    // into gb_grammar.names (NUL-terminated)
    uint32_t alt_off, n_alt; // into gb_grammar.alts: first element of each alternative
    uint32_t line, col;   // where defined (helpers: where their repetition was written)
};

// Return positions of a rule's invocations (the element after the reference), or where
// the stack below a frame of the rule is known statically: one position, none, or many.
#define GB_RET_NONE UINT32_MAX
#define GB_RET_MANY (UINT32_MAX - 1)
#define GB_RET_ROOT (UINT32_MAX - 2) // popping the rule ends the sentence

struct gb_grammar {
    struct gb_elem *elem;   // alternatives, each ended by GB_END
    uint32_t n_elem;
    uint32_t *alts;         // start of each alternative, grouped by rule
    uint32_t n_alts;
    struct gb_rule *rules;
    uint32_t n_rules;
    uint32_t root;
    struct gb_class *classes;
    uint32_t n_classes;
    uint32_t *ranges;       // lo, hi pairs
    uint32_t n_ranges;
    char *names;
    uint32_t n_names;
    uint32_t *ret;          // per rule: its unique return position, GB_RET_ROOT or GB_RET_MANY
};

struct gb_limits {
    size_t max_rules;       // rules after expansion (0: 10000)
    size_t max_elems;       // elements after expansion (0: 1 << 20)
    uint32_t max_repeat;    // largest {m,n} count (0: 10000)
    uint64_t deadline_ns;   // lm_now_ns() bound on the analyses (0: none)
};

// Parses and checks text (len bytes, need not be NUL-terminated); root names the start rule
// (NULL: "root"). LM_ERR_ARG with "gbnf:LINE:COL: ..." naming what was expected, an undefined
// rule, a missing root, left recursion, a rule with no finite string or an exceeded limit;
// LM_ERR_NOMEM. On failure *out is untouched and nothing is allocated.
enum lm_status gb_parse(struct gb_grammar *out, const char *text, size_t len, const char *root,
                        const struct gb_limits *lim);
void gb_free(struct gb_grammar *g);

// Whether class c contains code point cp / any code point of [lo, hi].
static inline int gb_class_has(const struct gb_grammar *g, uint32_t c, uint32_t cp) {
    const struct gb_class *k = &g->classes[c];
    if (cp < 128) return (k->ascii[cp >> 5] >> (cp & 31)) & 1;
    const uint32_t *r = g->ranges + 2 * (size_t)k->off;
    uint32_t a = 0, b = k->n; // first range with hi >= cp
    while (a < b) {
        uint32_t m = (a + b) / 2;
        if (r[2 * m + 1] < cp) a = m + 1;
        else b = m;
    }
    return a < k->n && r[2 * a] <= cp;
}
int gb_class_meets(const struct gb_grammar *g, uint32_t c, uint32_t lo, uint32_t hi);

#endif
