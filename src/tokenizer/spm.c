// SentencePiece BPE on one raw fragment (llama.cpp's llm_tokenizer_spm_session): spaces ->
// U+2581, highest-score bigram merged first (ties: leftmost), byte fallback for leftover
// characters. lm_tokenize (tokenize.c) splits out the special tokens and calls it.
#include <stdlib.h>
#include <string.h>

#include "tokenizer/merge_heap.h"
#include "tokenizer/tokenizer.h"

// ============================================================================
// SentencePiece BPE on one fragment
// ============================================================================

struct sym {
    int32_t prev, next;
    uint32_t off, n; // bytes in the escaped text; n == 0 once merged into its left neighbour
};

struct lm_spm_scratch {
    char *text;
    size_t text_cap;
    struct sym *sym;
    size_t sym_cap;
    struct lm_merge_heap heap;
};

void lm_spm_scratch_free(struct lm_spm_scratch *s) {
    if (!s) return;
    free(s->text);
    free(s->sym);
    lm_merge_heap_free(&s->heap);
    free(s);
}

// Queues the merge of symbols l and r when their joined text is a token, keyed by its
// negated score (the heap takes the lowest key first).
static bool try_add_bigram(const struct lm_tokenizer *t, struct lm_spm_scratch *s, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return true;
    uint32_t ln = s->sym[l].n, rn = s->sym[r].n;
    int32_t id = lm_tokenizer_find(t, s->text + s->sym[l].off, ln + rn);
    if (id < 0) return true;
    return lm_merge_heap_push(&s->heap, (struct lm_merge){-(double)t->scores[id], l, r, -1, ln, rn});
}

// Length llama.cpp's unicode_len_utf8 gives a character from its first byte (continuation
// and invalid bytes count as 1, 0xF8..0xFF as 4).
static inline uint32_t spm_char_len(uint8_t c) {
    static const uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

enum lm_status lm_spm_fragment(const struct lm_tokenizer *t, struct lm_spm_scratch **scratch, const char *raw,
                               size_t raw_len, bool space_prefix, struct lm_tok_ids *out) {
    struct lm_spm_scratch *s = *scratch;
    if (!s && !(s = *scratch = calloc(1, sizeof *s))) goto nomem;
    // escape: optional leading space, then ' ' -> U+2581 (e2 96 81)
    size_t need = 3 * (raw_len + 1);
    if (need > s->text_cap) {
        char *nt = realloc(s->text, need);
        if (!nt) goto nomem;
        s->text = nt;
        s->text_cap = need;
    }
    size_t n = 0;
    if (space_prefix) {
        memcpy(s->text, "\xe2\x96\x81", 3);
        n = 3;
    }
    for (size_t i = 0; i < raw_len; i++) {
        if (raw[i] == ' ') {
            memcpy(s->text + n, "\xe2\x96\x81", 3);
            n += 3;
        } else {
            s->text[n++] = raw[i];
        }
    }
    if (n == 0) return LM_OK;
    if (n > s->sym_cap) {
        struct sym *ns = realloc(s->sym, n * sizeof *ns);
        if (!ns) goto nomem;
        s->sym = ns;
        s->sym_cap = n;
    }
    int32_t n_sym = 0;
    for (size_t off = 0; off < n;) {
        uint32_t cl = spm_char_len((uint8_t)s->text[off]);
        if (cl > n - off) cl = (uint32_t)(n - off);
        s->sym[n_sym] = (struct sym){n_sym - 1, off + cl == n ? -1 : n_sym + 1, (uint32_t)off, cl};
        off += cl;
        n_sym++;
    }
    s->heap.n = 0;
    for (int32_t i = 1; i < n_sym; i++)
        if (!try_add_bigram(t, s, i - 1, i)) goto nomem;
    while (s->heap.n > 0) {
        struct lm_merge b = lm_merge_heap_pop(&s->heap);
        struct sym *L = &s->sym[b.left], *R = &s->sym[b.right];
        if (L->n == 0 || R->n == 0 || L->n + R->n != b.ln + b.rn) continue; // stale
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) s->sym[R->next].prev = b.left;
        if (!try_add_bigram(t, s, L->prev, b.left) || !try_add_bigram(t, s, b.left, L->next)) goto nomem;
    }
    // every merged symbol is a vocabulary token; unmerged characters missing from the
    // vocabulary fall back to their bytes (llama.cpp's resegment; its rev_merge branch is
    // unreachable for SPM because only vocabulary texts are ever merged)
    for (int32_t i = 0; i != -1; i = s->sym[i].next) {
        const struct sym *y = &s->sym[i];
        int32_t id = lm_tokenizer_find(t, s->text + y->off, y->n);
        if (id >= 0) {
            if (!lm_tok_ids_push(out, id)) goto nomem;
            continue;
        }
        for (uint32_t j = 0; j < y->n; j++) {
            int32_t bt = t->byte_tok[(uint8_t)s->text[y->off + j]];
            // llama.cpp throws when a vocabulary lacks the byte token; lumen emits unk
            if (!lm_tok_ids_push(out, bt >= 0 ? bt : t->unk)) goto nomem;
        }
    }
    return LM_OK;
nomem:
    return lm_error_set(LM_ERR_NOMEM, "lm_tokenize: out of memory (fragment of %zu bytes)", raw_len);
}

