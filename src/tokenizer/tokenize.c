// lm_tokenize for every tokenizer kind: special-token partitioning (llama.cpp's
// tokenizer_st_partition), then each raw fragment to its kind's encoder: SentencePiece
// (spm.c), byte-level BPE (bpe.c), WordPiece (wpm.c) or Unigram (ugm.c).
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

#define LM_TOK_MAX_INPUT ((size_t)1 << 29) // keeps escaped offsets (<= 3x) inside int32

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
    if (t->kind < LM_TOK_KIND_SPM || t->kind > LM_TOK_KIND_UGM)
        return lm_error_set(LM_ERR_UNSUPPORTED, "lm_tokenize: tokenizer kind %d not implemented", (int)t->kind);

    struct fvec frags = {0};
    struct lm_tok_ids ids = {0};
    struct lm_spm_scratch *ss = NULL;
    struct lm_bpe_scratch *bs = NULL;
    struct lm_wpm_scratch *ws = NULL;
    struct lm_ugm_scratch *us = NULL;
    // WordPiece (llama.cpp): add_special means [CLS] ... [SEP] whatever add_bos_token says
    bool wpm = t->kind == LM_TOK_KIND_WPM;
    enum lm_status st = partition(t, text, len, parse_special, &frags);
    if (st != LM_OK) goto done;

    bool prev_special = true; // a leading space prefix goes on the first fragment
    if (add_special && (t->add_bos || wpm) && !lm_tok_ids_push(&ids, t->bos)) goto nomem;
    for (size_t f = 0; f < frags.n; f++) {
        const struct frag *fr = &frags.v[f];
        if (fr->tok >= 0) {
            if (!lm_tok_ids_push(&ids, fr->tok)) goto nomem;
            prev_special = true;
            continue;
        }
        if (t->kind == LM_TOK_KIND_BPE) // no space prefix: llama.cpp's BPE path ignores add_space_prefix
            st = lm_bpe_fragment(t, &bs, text + fr->off, fr->len, &ids);
        else if (wpm)
            st = lm_wpm_fragment(t, &ws, text + fr->off, fr->len, &ids);
        else if (t->kind == LM_TOK_KIND_UGM) // its own space prefix, on every fragment
            st = lm_ugm_fragment(t, &us, text + fr->off, fr->len, &ids);
        else
            st = lm_spm_fragment(t, &ss, text + fr->off, fr->len, t->add_space_prefix && prev_special, &ids);
        if (st != LM_OK) goto done;
        prev_special = false;
    }
    if (add_special && wpm && !lm_tok_ids_push(&ids, t->sep)) goto nomem;
    if (add_special && !wpm && t->add_eos && !lm_tok_ids_push(&ids, t->eos)) goto nomem;
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
    lm_spm_scratch_free(ss);
    lm_bpe_scratch_free(bs);
    lm_wpm_scratch_free(ws);
    lm_ugm_scratch_free(us);
    return st;
}
