// Incremental grammar matcher over UTF-8 bytes with persistent pushdown stacks: a stack is one
// hash-consed node id, a state an interned sorted set of them (plus a pending UTF-8 sequence),
// so states compare as ids, cache their byte transitions, and rollback keeps an old id.
#ifndef LM_GRAMMAR_MATCHER_H
#define LM_GRAMMAR_MATCHER_H

#include <stdbool.h>
#include <stdint.h>

#include "grammar/gbnf.h"

#define GM_BOTTOM 0u        // node: the empty stack (the sentence may end here)
#define GM_HOLE 1u          // node: below a stack cut by mask.c (its frames are all popped)
#define GM_DEAD 0u          // state: no continuation
#define GM_UNKNOWN UINT32_MAX

#define GM_CAN_END 1u       // state flag: GM_BOTTOM is one of its stacks
#define GM_HAS_HOLE 2u      // state flag: GM_HOLE is one of its stacks

struct gm_node {
    uint32_t pos, parent;   // pos: element index of the next thing to match; parent: node id
};

struct gm_state {
    uint32_t off, n;        // its stack ids: gm.pool[off .. off + n), sorted
    uint32_t v;             // bits of the pending UTF-8 sequence
    uint8_t need, len;      // continuation bytes still expected, sequence length (0 0: none)
    uint8_t flags;
    uint32_t *next;         // 256 successor ids (GM_UNKNOWN until asked), NULL until the first
    uint32_t mask;          // mask.c: cached mask slot + 1, 0 = none
    uint32_t hi;            // gm_hi() (GM_UNKNOWN until asked)
    uint32_t loop[4];       // mask.c: the ASCII bytes b with next[b] == this state
    uint8_t loop_known;
    uint8_t first_known;
    uint32_t first[8];      // bytes that can start an accepted code point (complete states)
};

struct gm {
    const struct gb_grammar *g;
    uint32_t *pos_rule;     // element -> its rule
    struct gm_node *nodes;
    uint32_t n_nodes, cap_nodes;
    uint32_t *node_ht, node_ht_mask;
    uint32_t *exp_off;      // per node: its expansion in exp_pool (UINT32_MAX: not yet)
    uint32_t *exp_n;
    uint32_t *exp_pool;
    uint32_t n_exp, cap_exp;
    struct gm_state *states;
    uint32_t n_states, cap_states;
    uint32_t *pool;
    uint32_t n_pool, cap_pool;
    uint32_t *st_ht, st_ht_mask;
    uint32_t *scratch;      // step(): the successor stacks being built
    uint32_t n_scratch, cap_scratch;
    uint32_t max_stacks;    // per state (ambiguous grammars): beyond it a step is GM_DEAD
    uint32_t max_nodes;     // nodes + states + pooled ids: beyond it a step is GM_DEAD
    uint32_t n_tables, max_tables; // states with a transition table (beyond: steps uncached)
    bool overflow;          // a limit turned a step of this operation dead (callers clear it first)
    bool exhausted;         // a memory limit was reached (sticky)
};

// Builds the matcher tables of g (kept by pointer). LM_ERR_NOMEM.
enum lm_status gm_init(struct gm *m, const struct gb_grammar *g);
void gm_free(struct gm *m);
// The state before any byte (GM_DEAD only when out of memory).
uint32_t gm_start(struct gm *m);
// The state after byte b, GM_DEAD if b cannot follow (cached: one load when seen before).
uint32_t gm_step(struct gm *m, uint32_t s, uint8_t b);
static inline uint32_t gm_next(struct gm *m, uint32_t s, uint8_t b) {
    const uint32_t *n = m->states[s].next;
    uint32_t r = n ? n[b] : GM_UNKNOWN;
    return r != GM_UNKNOWN ? r : gm_step(m, s, b);
}
// The state after any one non-ASCII code point from complete state s when every stack's class
// holds all of U+0080..U+10FFFF or none of it (JSON strings: the common case), so a walk can
// decode UTF-8 itself instead of visiting one partial state per sequence prefix;
// GM_NOT_UNIFORM otherwise (then step byte by byte).
#define GM_NOT_UNIFORM (UINT32_MAX - 1)
uint32_t gm_hi(struct gm *m, uint32_t s);
// Node (pos, parent), interned; UINT32_MAX when out of memory.
uint32_t gm_node(struct gm *m, uint32_t pos, uint32_t parent);
// The state whose stacks are the expansion of node n (top at a character or the bottom).
uint32_t gm_state_of_node(struct gm *m, uint32_t n);
static inline const uint32_t *gm_stacks(const struct gm *m, uint32_t s) { return m->pool + m->states[s].off; }

#endif
