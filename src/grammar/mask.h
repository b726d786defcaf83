// Token masks: the vocabulary as a byte trie (once per tokenizer, shared) walked with the
// matcher; a mask cache per state; per core (a stack's top frames down to the first rule that
// can return to more than one place) the tokens decided inside it, computed once per grammar.
#ifndef LM_GRAMMAR_MASK_H
#define LM_GRAMMAR_MASK_H

#include <stdint.h>

#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

// Preorder byte trie of the allowed tokens' pieces: node i's subtree is [i, end[i]).
struct gk_trie {
    int32_t n_vocab;
    uint32_t n;             // nodes; node 0 is the root (empty prefix)
    uint8_t *byte;
    uint16_t *depth;
    uint32_t *end;
    uint32_t *tok;          // tokens ending at node i: ids[tok[i] .. tok[i + 1])
    int32_t *ids;
    uint32_t max_depth;
    int32_t *eog;           // end-of-generation ids
    uint32_t n_eog;
    uint8_t *usable;        // per token: in the trie (a non-control token with bytes)
    uint32_t (*sub)[4];     // per node: the ASCII bytes of its subtree below it
    uint8_t *sub_flags;     // per node: 1 non-ASCII below, 2 bytes that break UTF-8 below
    // cache bookkeeping (mask.c)
    const struct lm_tokenizer *t; // the last tokenizer that asked, its arrays, a sample hash
    const void *blob, *off;
    uint64_t sample;
    uint64_t fingerprint;         // of the whole vocabulary
    int refs;
};

// The trie of t's vocabulary, shared (built on first use, then found by a fingerprint of
// the vocabulary). LM_ERR_NOMEM, LM_ERR_ARG (pieces longer than 65535 bytes).
enum lm_status gk_trie_get(struct gk_trie **out, const struct lm_tokenizer *t);
void gk_trie_put(struct gk_trie *tr);

struct gk_core;
struct gk_set;

// Mask caches of one grammar (guarded by the grammar's lock).
struct gk {
    struct gm *m;
    const struct gk_trie *tr;
    uint32_t words;         // (n_vocab + 31) / 32
    uint32_t *cut_core;     // per stack node: its core's index + 1 (0: not yet)
    uint32_t *cut_ctx;      // per stack node: the state below its core, + 1
    uint32_t cap_cut;
    struct gk_core *cores;
    uint32_t n_cores, cap_cores, max_cores; // beyond max_cores states are walked whole
    uint32_t *core_of;      // per node id (re-rooted core): core index + 1
    uint32_t cap_core_of;
    struct gk_set *masks;   // cached masks (a state's mask field: index + 1)
    uint32_t *mask_state;   // the state owning each
    uint32_t n_masks, cap_masks;
    size_t cache_bytes, max_cache; // beyond max_cache every cached mask is dropped
    uint32_t *tmp;          // a scratch bitset
    uint32_t *walk;         // per trie depth: state (walk scratch)
    uint32_t *dec;          // per trie depth: a UTF-8 sequence being decoded (walk scratch)
    uint64_t n_fills, n_hits, n_walked; // statistics
};

enum lm_status gk_init(struct gk *k, struct gm *m, const struct gk_trie *tr);
void gk_free(struct gk *k);
// The mask of state s into bits (words words), end-of-generation tokens iff s can end.
void gk_fill(struct gk *k, uint32_t s, uint32_t *bits);
// Jump-forward: the bytes forced from s (each the only byte allowed, the state unable to
// end), cut into the longest tokens along them; up to max ids, not accepted.
int32_t gk_forced(struct gk *k, uint32_t s, int32_t *out, int32_t max);

#endif
