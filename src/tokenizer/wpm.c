// WordPiece (tokenizer.ggml.model "bert"; llama.cpp's llm_tokenizer_wpm_session) on one raw
// fragment: the BERT normaliser (NFD accent stripping, lower-casing, whitespace and control
// removal, punctuation and CJK split into one-character words), then greedy longest match.
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/wpm_unicode.h"

// ============================================================================
// Codepoint facts (llama.cpp's unicode tables, generated into wpm_unicode.c)
// ============================================================================

static uint32_t wpm_flags(uint32_t cp) {
    if (cp > 0x10FFFF) return 0;
    uint32_t lo = 0, hi = lm_wpm_n_flag_ranges; // last entry whose start <= cp
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if ((lm_wpm_flag_ranges[mid] >> 8) <= cp) lo = mid;
        else hi = mid;
    }
    return lm_wpm_flag_ranges[lo] & 0xFF;
}

static uint32_t wpm_lower(uint32_t cp) {
    uint32_t lo = 0, hi = lm_wpm_n_lower;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (lm_wpm_lower[2 * mid] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < lm_wpm_n_lower && lm_wpm_lower[2 * lo] == cp ? lm_wpm_lower[2 * lo + 1] : cp;
}

// llama.cpp's unicode_cpts_normalize_nfd: one codepoint to the base of its decomposition.
static uint32_t wpm_nfd(uint32_t cp) {
    uint32_t lo = 0, hi = lm_wpm_n_nfd; // first range whose first > cp, minus one
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (lm_wpm_nfd[3 * mid] <= cp) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return cp;
    const uint32_t *r = &lm_wpm_nfd[3 * (lo - 1)];
    return r[0] <= cp && cp <= r[1] ? r[2] : cp;
}

// BertPreTokenizer's Chinese ranges as llama.cpp writes them (0x2B920, not 0x2B820, as the
// HF Rust code does).
static bool wpm_is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// One codepoint as llama.cpp's unicode_cpts_from_utf8 reads it (the same reader as bpe.c's):
// no overlong or surrogate checks, an invalid or truncated sequence is U+FFFD for one byte
// (llama.cpp throws on a value above U+10FFFF; lumen takes it as invalid, and drops it).
static uint32_t utf8_get(const uint8_t *s, size_t n, size_t *i) {
    size_t k = *i, len;
    uint8_t c = s[k];
    uint32_t cp;
    if (c < 0x80) {
        *i = k + 1;
        return c;
    }
    if (!(c & 0x40)) goto bad;
    if (!(c & 0x20)) len = 2, cp = c & 0x1F;
    else if (!(c & 0x10)) len = 3, cp = c & 0x0F;
    else if (!(c & 0x08)) len = 4, cp = c & 0x07;
    else goto bad;
    if (k + len > n) goto bad;
    for (size_t j = 1; j < len; j++) {
        if ((s[k + j] & 0xC0) != 0x80) goto bad;
        cp = cp << 6 | (s[k + j] & 0x3F);
    }
    if (cp > 0x10FFFF) goto bad;
    *i = k + len;
    return cp;
bad:
    *i = k + 1;
    return 0xFFFD;
}

// ============================================================================
// Greedy longest match on one word
// ============================================================================

struct lm_wpm_scratch {
    char *word; // "\xe2\x96\x81" + the word being built
    size_t n, cap;
};

void lm_wpm_scratch_free(struct lm_wpm_scratch *s) {
    if (!s) return;
    free(s->word);
    free(s);
}

// The word with its phantom space (U+2581, as the converter rewrote the vocabulary: "##x"
// became "x", a word-initial "x" became "\u2581x") as the longest vocabulary tokens from the
// left; any position without a match discards the word's tokens for one [UNK].
static bool wpm_word(const struct lm_tokenizer *t, const char *w, size_t n, struct lm_tok_ids *out) {
    size_t start = out->n;
    for (size_t i = 0; i < n;) {
        size_t j = n - i > (size_t)t->max_token_len + 1 ? i + t->max_token_len + 1 : n;
        int32_t id = -1;
        for (; j > i; j--)
            if ((id = lm_tokenizer_find(t, w + i, j - i)) >= 0) break;
        if (id < 0) {
            out->n = start;
            break;
        }
        if (!lm_tok_ids_push(out, id)) return false;
        i = j;
    }
    return out->n != start || lm_tok_ids_push(out, t->unk);
}

static bool word_put(struct lm_wpm_scratch *s, uint32_t cp) {
    if (s->n + 4 > s->cap) {
        size_t nc = s->cap * 2 + 64;
        char *nw = realloc(s->word, nc);
        if (!nw) return false;
        s->word = nw;
        s->cap = nc;
    }
    if (s->n == 0) { // every word opens with the phantom space
        memcpy(s->word, "\xe2\x96\x81", 3);
        s->n = 3;
    }
    s->n += lm_utf8_put(cp, s->word + s->n);
    return true;
}

// Ends the word being built (if any) into tokens.
static bool word_end(const struct lm_tokenizer *t, struct lm_wpm_scratch *s, struct lm_tok_ids *out) {
    if (s->n == 0) return true;
    bool ok = wpm_word(t, s->word, s->n, out);
    s->n = 0;
    return ok;
}

enum lm_status lm_wpm_fragment(const struct lm_tokenizer *t, struct lm_wpm_scratch **scratch, const char *text,
                               size_t len, struct lm_tok_ids *out) {
    struct lm_wpm_scratch *s = *scratch;
    if (!s && !(s = *scratch = calloc(1, sizeof *s))) goto nomem;
    s->n = 0;
    const uint8_t *u = (const uint8_t *)text;
    for (size_t i = 0; i < len;) {
        uint32_t cp = utf8_get(u, len, &i);
        if (t->wpm_strip_accents) cp = wpm_nfd(cp);
        uint32_t f = wpm_flags(cp);
        if (f & LM_WPM_SPACE) {
            if (!word_end(t, s, out)) goto nomem;
            continue;
        }
        if (cp == 0 || cp == 0xFFFD || (f & LM_WPM_CONTROL)) continue;
        if (t->wpm_strip_accents && (f & LM_WPM_MARK)) continue;
        uint32_t c = t->wpm_lowercase ? wpm_lower(cp) : cp;
        if ((f & LM_WPM_PUNCT) || (cp < 0x7F && (f & LM_WPM_SYMBOL)) || wpm_is_cjk(cp)) {
            // a one-character word of its own
            if (!word_end(t, s, out) || !word_put(s, c) || !word_end(t, s, out)) goto nomem;
        } else if (!word_put(s, c)) {
            goto nomem;
        }
    }
    if (!word_end(t, s, out)) goto nomem;
    return LM_OK;
nomem:
    return lm_error_set(LM_ERR_NOMEM, "lm_tokenize: out of memory (WordPiece fragment of %zu bytes)", len);
}
