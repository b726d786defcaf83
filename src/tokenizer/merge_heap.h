// The merge queue both BPE encoders share (spm.c, bpe.c): a binary heap of candidate merges
// of two adjacent symbols, the one with the lowest key first, ties to the lower left index.
#ifndef LM_TOKENIZER_MERGE_HEAP_H
#define LM_TOKENIZER_MERGE_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

// A candidate merge of symbols left and right (adjacent when pushed). The key orders it:
// SentencePiece stores the negated score (highest score first, llama.cpp's
// llm_bigram_spm::comparator), byte-level BPE the merge rank (lowest rank first,
// llm_bigram_bpe::comparator). A double holds every float score and uint32 rank exactly and
// compares them as float and integer comparisons do. ln, rn: the symbols' byte lengths when
// pushed (a later mismatch marks the entry stale); res: the merged token (BPE; -1 for SPM).
struct lm_merge {
    double key;
    int32_t left, right, res;
    uint32_t ln, rn;
};

struct lm_merge_heap {
    struct lm_merge *v;
    size_t n, cap;
};

// Entries equal in both key and left are either stale or identical, so the merge sequence
// does not depend on the heap implementation.
static inline bool lm_merge_before(const struct lm_merge *a, const struct lm_merge *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

static inline bool lm_merge_heap_push(struct lm_merge_heap *h, struct lm_merge m) {
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 256;
        struct lm_merge *nv = realloc(h->v, nc * sizeof *nv);
        if (!nv) return false;
        h->v = nv;
        h->cap = nc;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!lm_merge_before(&m, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = m;
    return true;
}

// The first entry, removed; the heap must not be empty.
static inline struct lm_merge lm_merge_heap_pop(struct lm_merge_heap *h) {
    struct lm_merge top = h->v[0], last = h->v[--h->n];
    size_t n = h->n, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && lm_merge_before(&h->v[c + 1], &h->v[c])) c++;
        if (!lm_merge_before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (n) h->v[i] = last;
    return top;
}

static inline void lm_merge_heap_free(struct lm_merge_heap *h) {
    free(h->v);
    *h = (struct lm_merge_heap){0};
}

#endif
