// SentencePiece Unigram (tokenizer.ggml.model "t5": XLM-RoBERTa, T5; llama.cpp's
// llm_tokenizer_ugm_session) on one raw fragment: the precompiled charsmap's normalisation
// (a XOR-compressed double array over bytes + replacement strings), space escaping and
// prefixing, then Viterbi over token scores with an unknown-token penalty.
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

struct ugm_node {
    uint32_t child, sibling; // node indices, 0 = none
    uint8_t byte;
};

struct lm_ugm {
    uint32_t *xcda;         // XCDA entries (copied: the charsmap may sit unaligned in the file)
    size_t n_xcda;
    char *repl;             // NUL-terminated replacement strings
    size_t n_repl;
    struct ugm_node *ud;    // byte trie over USER_DEFINED texts, node 0 = root
    uint32_t n_ud;
    double unk_score;       // lowest NORMAL score - 10 (llama.cpp's unknown_token_score)
};

void lm_ugm_free(struct lm_ugm *u) {
    if (!u) return;
    free(u->xcda);
    free(u->repl);
    free(u->ud);
    free(u);
}

// ============================================================================
// Load: the charsmap checked, the user-defined trie, the unknown score
// ============================================================================

// tokenizer.ggml.precompiled_charsmap: u32 (little-endian) byte size of the XCDA, the XCDA
// (u32 entries), then NUL-terminated replacement strings. Empty = no normalisation.
static enum lm_status charsmap_init(struct lm_ugm *u, const struct lm_tokenizer_desc *d, const char *name) {
    const char *key = "tokenizer.ggml.precompiled_charsmap";
    if (!d->charsmap)
        return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: Unigram vocabulary without %s", name, key);
    size_t n = d->charsmap_len;
    if (n == 0) return LM_OK;
    if (n < 4)
        return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: %s is %zu bytes (expected at least 4: the XCDA size)",
                            name, key, n);
    const uint8_t *p = d->charsmap;
    uint32_t xb = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    if (xb % 4 != 0 || xb > n - 4)
        return lm_error_set(LM_ERR_FORMAT,
                            "tokenizer: %s: %s: XCDA of %u bytes (expected a multiple of 4, at most %zu)", name, key,
                            xb, n - 4);
    u->n_xcda = xb / 4;
    u->n_repl = n - 4 - xb;
    if (u->n_xcda == 0 && u->n_repl > 0)
        return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: %s: %zu bytes of replacements but no XCDA", name, key,
                            u->n_repl);
    if (u->n_repl > 0 && p[n - 1] != 0)
        return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: %s: the last replacement string is not NUL-terminated",
                            name, key);
    u->xcda = malloc((u->n_xcda ? u->n_xcda : 1) * sizeof *u->xcda);
    u->repl = malloc(u->n_repl ? u->n_repl : 1);
    if (!u->xcda || !u->repl) return lm_error_set(LM_ERR_NOMEM, "tokenizer: %s: out of memory for %s", name, key);
    for (size_t i = 0; i < u->n_xcda; i++) {
        const uint8_t *e = p + 4 + 4 * i;
        u->xcda[i] = (uint32_t)e[0] | (uint32_t)e[1] << 8 | (uint32_t)e[2] << 16 | (uint32_t)e[3] << 24;
    }
    memcpy(u->repl, p + 4 + xb, u->n_repl);
    return LM_OK;
}

enum lm_status lm_ugm_init(struct lm_tokenizer *t, const struct lm_tokenizer_desc *d, const char *name) {
    struct lm_ugm *u = t->ugm = calloc(1, sizeof *u);
    if (!u) return lm_error_set(LM_ERR_NOMEM, "tokenizer: %s: out of memory", name);
    enum lm_status st = charsmap_init(u, d, name);
    if (st != LM_OK) return st;
    size_t cap = 1;
    float min_score = FLT_MAX;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (t->attr[id] & LM_TOK_ATTR_USER_DEFINED) cap += t->off[id + 1] - t->off[id];
        if ((t->attr[id] & LM_TOK_ATTR_NORMAL) && t->scores[id] < min_score) min_score = t->scores[id];
    }
    u->unk_score = (double)(min_score - 10.0f);
    if (!(u->ud = calloc(cap, sizeof *u->ud))) return lm_error_set(LM_ERR_NOMEM, "tokenizer: %s: out of memory", name);
    u->n_ud = 1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (!(t->attr[id] & LM_TOK_ATTR_USER_DEFINED)) continue;
        const uint8_t *s = (const uint8_t *)t->blob + t->off[id];
        uint32_t node = 0;
        for (uint32_t i = 0, n = t->off[id + 1] - t->off[id]; i < n; i++) {
            uint32_t c = u->ud[node].child;
            while (c && u->ud[c].byte != s[i]) c = u->ud[c].sibling;
            if (!c) { // room for every byte of every text: cap counted them
                c = u->n_ud++;
                u->ud[c] = (struct ugm_node){.child = 0, .sibling = u->ud[node].child, .byte = s[i]};
                u->ud[node].child = c;
            }
            node = c;
        }
    }
    return LM_OK;
}

// ============================================================================
// Normalisation
// ============================================================================

struct lm_ugm_scratch {
    char *norm;
    size_t n_norm, cap_norm;
    struct best {
        double score;
        size_t from;
        int32_t id;
    } *best;
    size_t cap_best;
};

void lm_ugm_scratch_free(struct lm_ugm_scratch *s) {
    if (!s) return;
    free(s->norm);
    free(s->best);
    free(s);
}

// naive_trie::get_longest_prefix as llama.cpp uses it: how deep the text walks into the
// user-defined trie, whether or not a token ends there.
static size_t ud_prefix(const struct lm_ugm *u, const uint8_t *s, size_t n) {
    uint32_t node = 0;
    size_t k = 0;
    for (; k < n; k++) {
        uint32_t c = u->ud[node].child;
        while (c && u->ud[c].byte != s[k]) c = u->ud[c].sibling;
        if (!c) break;
        node = c;
    }
    return k;
}

// Bytes of a structurally valid UTF-8 sequence at s (llama.cpp's unicode_cpt_from_utf8: no
// overlong, surrogate or range checks), or 0.
static size_t utf8_valid_len(const uint8_t *s, size_t n) {
    size_t len = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    for (size_t j = 1; j < len; j++)
        if ((s[j] & 0xC0) != 0x80) return 0;
    return len;
}

// One step of normalize_prefix: *out / *out_n the normalised bytes for the input at s,
// returns how many input bytes they stand for (>= 1), or 0 with an error set when the
// charsmap points outside itself.
static size_t norm_prefix(const struct lm_ugm *u, const uint8_t *s, size_t n, const char **out, size_t *out_n) {
    size_t k = ud_prefix(u, s, n);
    if (k > 0) {
        *out = (const char *)s;
        *out_n = k;
        return k;
    }
    size_t best_len = 0, best_off = 0;
    if (u->n_xcda > 0) {
        // BASE bits 10-30 (shifted by 8 when bit 9 is set), LCHECK bits 0-7 (+ bit 31),
        // LEAF bit 8, VALUE bits 0-30
        const uint32_t *x = u->xcda;
        uint32_t node = (x[0] >> 10) << ((x[0] & (1u << 9)) >> 6);
        for (size_t i = 0; i < n && s[i]; i++) {
            node ^= s[i];
            if (node >= u->n_xcda) goto oob;
            if ((x[node] & ((1u << 31) | 0xFF)) != s[i]) break;
            bool leaf = (x[node] >> 8) & 1;
            node ^= (x[node] >> 10) << ((x[node] & (1u << 9)) >> 6);
            if (leaf) {
                if (node >= u->n_xcda) goto oob;
                best_len = i + 1;
                best_off = x[node] & ((1u << 31) - 1);
            }
        }
    }
    if (best_len > 0) {
        if (best_off >= u->n_repl) {
            lm_error_set(LM_ERR_FORMAT, "lm_tokenize: tokenizer.ggml.precompiled_charsmap: replacement offset %zu "
                         "outside its %zu bytes", best_off, u->n_repl);
            return 0;
        }
        *out = u->repl + best_off;
        *out_n = strlen(*out); // NUL-terminated: the load checked the last byte
        return best_len;
    }
    size_t len = utf8_valid_len(s, n);
    if (len == 0) {
        *out = "\xef\xbf\xbd";
        *out_n = 3;
        return 1;
    }
    *out = (const char *)s;
    *out_n = len;
    return len;
oob:
    lm_error_set(LM_ERR_FORMAT, "lm_tokenize: tokenizer.ggml.precompiled_charsmap: XCDA node outside its %zu entries",
                 u->n_xcda);
    return 0;
}

static bool norm_put(struct lm_ugm_scratch *s, const char *p, size_t n) {
    if (s->n_norm + n > s->cap_norm) {
        size_t nc = (s->cap_norm + n) * 2 + 64;
        char *nn = realloc(s->norm, nc);
        if (!nn) return false;
        s->norm = nn;
        s->cap_norm = nc;
    }
    memcpy(s->norm + s->n_norm, p, n);
    s->n_norm += n;
    return true;
}

// llama.cpp's normalize: charsmap replacements; spaces escaped as U+2581; a space before the
// first non-space run (add_space_prefix), or, with remove_extra_whitespaces, runs of spaces
// dropped and one put before every non-space run.
static enum lm_status normalize(const struct lm_tokenizer *t, struct lm_ugm_scratch *s, const char *text,
                                size_t len) {
    static const char sp[] = "\xe2\x96\x81";
    bool merge = t->remove_extra_ws, prepended = false, in_word = false;
    s->n_norm = 0;
    for (size_t i = 0; i < len;) {
        const char *r;
        size_t rn;
        size_t used = norm_prefix(t->ugm, (const uint8_t *)text + i, len - i, &r, &rn);
        if (used == 0) return LM_ERR_FORMAT;
        for (size_t k = 0; k < rn; k++) {
            if (r[k] != ' ') {
                if (!in_word) {
                    in_word = true;
                    if ((t->add_space_prefix && !prepended) || merge) {
                        if (!norm_put(s, sp, 3)) goto nomem;
                        prepended = true;
                    }
                }
                if (!norm_put(s, &r[k], 1)) goto nomem;
            } else {
                in_word = false;
                if (!merge && !norm_put(s, sp, 3)) goto nomem;
            }
        }
        i += used;
    }
    return LM_OK;
nomem:
    return lm_error_set(LM_ERR_NOMEM, "lm_tokenize: out of memory (Unigram fragment of %zu bytes)", len);
}

// ============================================================================
// Viterbi
// ============================================================================

// The id of the token with text s[0..n) whose lm_tok_hash is h, or -1 (lm_tokenizer_find with
// the hash computed by the caller, one byte at a time).
static int32_t find_hashed(const struct lm_tokenizer *t, const char *s, size_t n, uint32_t h) {
    for (uint32_t i = h & t->ht_mask;; i = (i + 1) & t->ht_mask) {
        uint32_t id = t->ht[i];
        if (id == UINT32_MAX) return -1;
        uint32_t o = t->off[id];
        if (t->off[id + 1] - o == n && memcmp(t->blob + o, s, n) == 0) return (int32_t)id;
    }
}

// unicode_len_utf8: a character's length from its first byte (continuation bytes count 1).
static inline size_t char_len(uint8_t c) {
    static const uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

// Every position's best tokenisation of the text before it: a token ending there from the
// best of where it starts (NORMAL, USER_DEFINED (scored 0) and UNUSED tokens match), or the
// unknown token for one character that no single token covers.
static void viterbi(const struct lm_tokenizer *t, const char *x, size_t n, struct best *b) {
    const uint32_t match = LM_TOK_ATTR_NORMAL | LM_TOK_ATTR_USER_DEFINED | LM_TOK_ATTR_UNUSED;
    for (size_t i = 0; i <= n; i++) b[i] = (struct best){-DBL_MAX, 0, t->unk};
    b[0].score = 0;
    for (size_t i = 0; i < n;) {
        size_t cl = char_len((uint8_t)x[i]);
        if (cl > n - i) cl = n - i;
        size_t lim = n - i < t->max_token_len ? n - i : t->max_token_len;
        bool single = false;
        uint32_t h = 2166136261u;
        for (size_t k = 1; k <= lim; k++) {
            h = (h ^ (uint8_t)x[i + k - 1]) * 16777619u;
            int32_t id = find_hashed(t, x + i, k, h ^ (h >> 15));
            if (id < 0 || !(t->attr[id] & match)) continue;
            if (k == cl) single = true;
            double sc = b[i].score + ((t->attr[id] & LM_TOK_ATTR_USER_DEFINED) ? 0.0 : (double)t->scores[id]);
            if (sc > b[i + k].score) b[i + k] = (struct best){sc, i, id};
        }
        if (!single) {
            double sc = b[i].score + t->ugm->unk_score;
            if (sc > b[i + cl].score) b[i + cl] = (struct best){sc, i, t->unk};
        }
        i += cl;
    }
}

enum lm_status lm_ugm_fragment(const struct lm_tokenizer *t, struct lm_ugm_scratch **scratch, const char *text,
                               size_t len, struct lm_tok_ids *out) {
    struct lm_ugm_scratch *s = *scratch;
    if (!s && !(s = *scratch = calloc(1, sizeof *s))) goto nomem;
    enum lm_status st = normalize(t, s, text, len);
    if (st != LM_OK) return st;
    size_t n = s->n_norm;
    if (n == 0) return LM_OK;
    if (n + 1 > s->cap_best) {
        struct best *nb = realloc(s->best, (n + 1) * sizeof *nb);
        if (!nb) goto nomem;
        s->best = nb;
        s->cap_best = n + 1;
    }
    viterbi(t, s->norm, n, s->best);
    // back from the end; runs of unknown tokens become one
    size_t first = out->n;
    bool prev_unk = false;
    for (size_t at = n;;) {
        const struct best *b = &s->best[at];
        bool unk = b->id == t->unk;
        if (!(prev_unk && unk) && !lm_tok_ids_push(out, b->id)) goto nomem;
        if (b->from == 0) break;
        prev_unk = unk;
        at = b->from;
    }
    for (size_t i = first, j = out->n - 1; i < j; i++, j--) {
        int32_t tmp = out->v[i];
        out->v[i] = out->v[j];
        out->v[j] = tmp;
    }
    return LM_OK;
nomem:
    return lm_error_set(LM_ERR_NOMEM, "lm_tokenize: out of memory (Unigram fragment of %zu bytes)", len);
}
