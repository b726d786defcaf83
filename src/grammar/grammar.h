// The compiled grammar and matcher behind the public structured-output API (lumen.h):
// internal so tests and the mask benchmark can read the caches' statistics.
#ifndef LM_GRAMMAR_GRAMMAR_H
#define LM_GRAMMAR_GRAMMAR_H

#include <pthread.h>
#include <stdatomic.h>

#include "grammar/gbnf.h"
#include "grammar/mask.h"
#include "grammar/matcher.h"

#define LM_GRAMMAR_MAX_TRIGGER 256 // bytes of one lazy trigger

// Time lm_grammar_compile spends warming the mask caches (grammar.c); 0: none.
extern uint64_t lm_grammar_warm_ns;

struct lm_grammar {
    atomic_int refs;
    pthread_mutex_t lock;   // guards eng and masks: their caches grow as matchers run
    const struct lm_tokenizer *t;
    struct gb_grammar g;
    struct gm eng;
    struct gk masks;
    struct gk_trie *trie;
    uint32_t start;         // state before any text
    char **triggers;
    uint32_t *trigger_len;
    int32_t n_triggers;
    uint32_t max_trigger;
    uint64_t compile_ns;
    int32_t live;           // matchers alive (under lock): the caches restart when none is
};

struct lm_grammar_hist {
    uint32_t state;
    uint32_t n_win;
    bool active;
};

struct lm_grammar_matcher {
    struct lm_grammar *g;
    uint32_t state;
    bool active;            // lazy grammars: a trigger was seen
    uint32_t n_win;         // lazy, before the trigger: the output's last bytes
    uint8_t *win;           // max_trigger bytes
    uint8_t *tmp;           // window + one piece
    struct lm_grammar_hist hist[LM_GRAMMAR_MAX_ROLLBACK];
    uint8_t *hist_win;      // LM_GRAMMAR_MAX_ROLLBACK windows (lazy grammars only)
    int32_t n_hist, head;   // entries held, next slot
};

#endif
