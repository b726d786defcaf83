// Encoding: special-token partitioning (llama.cpp's tokenizer_st_partition, shared by both
// kinds) followed by SentencePiece BPE over each raw fragment (llm_tokenizer_spm_session):
// spaces -> U+2581, highest-score bigram merged first (ties: leftmost), byte fallback for
// leftover characters; byte-level BPE fragments go to bpe.c.
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

#define LM_TOK_MAX_INPUT ((size_t)1 << 29) // keeps escaped offsets (<= 3x) inside int32

bool lm_tok_ids_push(struct lm_tok_ids *a, int32_t x) {
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 64;
        int32_t *nv = realloc(a->v, nc * sizeof *nv);
        if (!nv) return false;
        a->v = nv;
        a->cap = nc;
    }
    a->v[a->n++] = x;
    return true;
}

// ============================================================================
// Special-token partition
// ============================================================================

struct frag {
    size_t off, len; // raw text span (tok < 0)
    int32_t tok;     // special token id, or -1
};

struct fvec {
    struct frag *v;
    size_t n, cap;
};

static bool fvec_push(struct fvec *a, struct frag f) {
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 16;
        struct frag *nv = realloc(a->v, nc * sizeof *nv);
        if (!nv) return false;
        a->v = nv;
        a->cap = nc;
    }
    a->v[a->n++] = f;
    return true;
}

static const char *find_bytes(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn > hn) return NULL;
    const char *end = h + (hn - nn) + 1;
    for (const char *p = h; p < end;) {
        p = memchr(p, nd[0], (size_t)(end - p));
        if (!p) return NULL;
        if (memcmp(p, nd, nn) == 0) return p;
        p++;
    }
    return NULL;
}

static bool special_eligible(const struct lm_tokenizer *t, int32_t id, bool parse_special) {
    // control and unknown tokens only with parse_special; user-defined ones always
    return parse_special || !(t->attr[id] & (LM_TOK_ATTR_CONTROL | LM_TOK_ATTR_UNKNOWN));
}

// Splits text into raw spans and special tokens. llama.cpp takes the special tokens one at
// a time, longest text first, and cuts every occurrence (leftmost first, non-overlapping)
// out of the raw spans left so far. Only tokens that occur in the text can cut anything,
// so a trie pass finds those first and the cutting runs over just them.
static enum lm_status partition(const struct lm_tokenizer *t, const char *text, size_t len,
                                bool parse_special, struct fvec *out) {
    out->n = 0;
    if (len == 0) return LM_OK;
    enum lm_status st = LM_OK;
    uint8_t *seen = NULL;
    struct fvec tmp = {0};
    if (t->n_special > 0) {
        seen = calloc((size_t)t->n_special, 1);
        if (!seen) return lm_error_set(LM_ERR_NOMEM, "lm_tokenize: out of memory");
        const uint8_t *s = (const uint8_t *)text;
        for (size_t i = 0; i < len; i++) {
            uint32_t node = t->trie_root[s[i]];
            for (size_t j = i; node;) {
                int32_t k = t->trie[node].special;
                if (k >= 0 && special_eligible(t, t->special[k], parse_special)) seen[k] = 1;
                if (++j >= len) break;
                uint32_t c = t->trie[node].child;
                while (c && t->trie[c].byte != s[j]) c = t->trie[c].sibling;
                node = c;
            }
        }
    }
    if (!fvec_push(out, (struct frag){0, len, -1})) goto nomem;
    for (int32_t k = 0; k < t->n_special; k++) {
        if (!seen[k]) continue;
        int32_t id = t->special[k];
        const char *sp = t->blob + t->off[id];
        size_t sn = t->off[id + 1] - t->off[id];
        tmp.n = 0;
        for (size_t f = 0; f < out->n; f++) {
            struct frag fr = out->v[f];
            if (fr.tok >= 0) {
                if (!fvec_push(&tmp, fr)) goto nomem;
                continue;
            }
            for (;;) {
                const char *m = find_bytes(text + fr.off, fr.len, sp, sn);
                if (!m) {
                    if (fr.len > 0 && !fvec_push(&tmp, fr)) goto nomem;
                    break;
                }
                size_t mo = (size_t)(m - text);
                if (mo > fr.off && !fvec_push(&tmp, (struct frag){fr.off, mo - fr.off, -1})) goto nomem;
                if (!fvec_push(&tmp, (struct frag){0, 0, id})) goto nomem;
                size_t end = fr.off + fr.len;
                fr.off = mo + sn;
                fr.len = end - fr.off;
            }
        }
        struct fvec sw = *out;
        *out = tmp;
        tmp = sw;
    }
    goto done;
nomem:
    st = lm_error_set(LM_ERR_NOMEM, "lm_tokenize: out of memory");
done:
    free(seen);
    free(tmp.v);
    return st;
}

// ============================================================================
// SentencePiece BPE on one fragment
// ============================================================================

struct sym {
    int32_t prev, next;
    uint32_t off, n; // bytes in the escaped text; n == 0 once merged into its left neighbour
};

struct bigram {
    float score;
    int32_t left, right;
    uint32_t size;
};

struct spm_scratch {
    char *text;
    size_t text_cap;
    struct sym *sym;
    size_t sym_cap;
    struct bigram *heap;
    size_t heap_n, heap_cap;
};

// Max-heap order of llama.cpp's llm_bigram_spm::comparator: higher score first, then the
// lower left index. Entries equal in both are either stale or identical, so the merge
// sequence does not depend on the heap implementation.
static inline bool bg_before(const struct bigram *a, const struct bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static bool heap_push(struct spm_scratch *s, struct bigram b) {
    if (s->heap_n == s->heap_cap) {
        size_t nc = s->heap_cap ? s->heap_cap * 2 : 256;
        struct bigram *nh = realloc(s->heap, nc * sizeof *nh);
        if (!nh) return false;
        s->heap = nh;
        s->heap_cap = nc;
    }
    size_t i = s->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bg_before(&b, &s->heap[p])) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = b;
    return true;
}

static struct bigram heap_pop(struct spm_scratch *s) {
    struct bigram top = s->heap[0], last = s->heap[--s->heap_n];
    size_t n = s->heap_n, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bg_before(&s->heap[c + 1], &s->heap[c])) c++;
        if (!bg_before(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n) s->heap[i] = last;
    return top;
}

static bool try_add_bigram(const struct lm_tokenizer *t, struct spm_scratch *s, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return true;
    uint32_t size = s->sym[l].n + s->sym[r].n;
    int32_t id = lm_tokenizer_find(t, s->text + s->sym[l].off, size);
    if (id < 0) return true;
    return heap_push(s, (struct bigram){t->scores[id], l, r, size});
}

// Length llama.cpp's unicode_len_utf8 gives a character from its first byte (continuation
// and invalid bytes count as 1, 0xF8..0xFF as 4).
static inline uint32_t spm_char_len(uint8_t c) {
    static const uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

static enum lm_status spm_fragment(const struct lm_tokenizer *t, struct spm_scratch *s, const char *raw,
                                   size_t raw_len, bool space_prefix, struct lm_tok_ids *out) {
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
    s->heap_n = 0;
    for (int32_t i = 1; i < n_sym; i++)
        if (!try_add_bigram(t, s, i - 1, i)) goto nomem;
    while (s->heap_n > 0) {
        struct bigram b = heap_pop(s);
        struct sym *L = &s->sym[b.left], *R = &s->sym[b.right];
        if (L->n == 0 || R->n == 0 || L->n + R->n != b.size) continue; // stale
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

// ============================================================================
// Public entry
// ============================================================================

enum lm_status lm_tokenize(const struct lm_tokenizer *t, const char *text, size_t len,
                           bool add_special, bool parse_special, int32_t **out, size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    if (!t) return lm_error_set(LM_ERR_ARG, "lm_tokenize: tokenizer is NULL");
    if (len > 0 && !text) return lm_error_set(LM_ERR_ARG, "lm_tokenize: text is NULL with len %zu", len);
    if (len > LM_TOK_MAX_INPUT)
        return lm_error_set(LM_ERR_ARG, "lm_tokenize: input of %zu bytes exceeds the %zu byte limit", len,
                            LM_TOK_MAX_INPUT);
    if (t->kind != LM_TOK_KIND_SPM && t->kind != LM_TOK_KIND_BPE)
        return lm_error_set(LM_ERR_UNSUPPORTED, "lm_tokenize: tokenizer kind %d not implemented", (int)t->kind);

    struct fvec frags = {0};
    struct lm_tok_ids ids = {0};
    struct spm_scratch s = {0};
    struct lm_bpe_scratch *bs = NULL;
    enum lm_status st = partition(t, text, len, parse_special, &frags);
    if (st != LM_OK) goto done;

    bool prev_special = true; // a leading space prefix goes on the first fragment
    if (add_special && t->add_bos && !lm_tok_ids_push(&ids, t->bos)) goto nomem;
    for (size_t f = 0; f < frags.n; f++) {
        const struct frag *fr = &frags.v[f];
        if (fr->tok >= 0) {
            if (!lm_tok_ids_push(&ids, fr->tok)) goto nomem;
            prev_special = true;
            continue;
        }
        if (t->kind == LM_TOK_KIND_BPE) // no space prefix: llama.cpp's BPE path ignores add_space_prefix
            st = lm_bpe_fragment(t, &bs, text + fr->off, fr->len, &ids);
        else
            st = spm_fragment(t, &s, text + fr->off, fr->len, t->add_space_prefix && prev_special, &ids);
        if (st != LM_OK) goto done;
        prev_special = false;
    }
    if (add_special && t->add_eos && !lm_tok_ids_push(&ids, t->eos)) goto nomem;
    if (!ids.v && !(ids.v = malloc(sizeof *ids.v))) goto nomem; // non-NULL even when empty
    *out = ids.v;
    *n_out = ids.n;
    ids.v = NULL;
    goto done;
nomem:
    st = lm_error_set(LM_ERR_NOMEM, "lm_tokenize: out of memory (%zu input bytes)", len);
done:
    free(frags.v);
    free(ids.v);
    free(s.text);
    free(s.sym);
    free(s.heap);
    lm_bpe_scratch_free(bs);
    return st;
}
