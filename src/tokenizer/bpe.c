// Byte-level BPE (tokenizer.ggml.model "gpt2") as llama.cpp's llm_tokenizer_bpe: a regex
// pre-tokenizer chosen by tokenizer.ggml.pre (PCRE2, UTF + UCP + JIT), the GPT-2
// byte-to-unicode mapping, and merges applied lowest rank first. Special tokens are split
// out before this runs (partition() in tokenize.c), exactly as for SentencePiece.
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "tokenizer/bpe_unicode.h"
#include "tokenizer/merge_heap.h"
#include "tokenizer/tokenizer.h"

#ifdef LM_HAVE_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

#define LM_BPE_MAX_RE 4

// ============================================================================
// Pre-tokenizers (llama.cpp src/llama-vocab.cpp, llm_tokenizer_bpe)
// ============================================================================

// llama.cpp runs each expression in turn over the pieces the previous ones produced; text
// between matches becomes a piece of its own. The regexes are llama.cpp's, verbatim.
static const char k_re_gpt2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
static const char k_re_llama3[] =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char k_re_qwen2[] =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// o200k (gpt-4o, gpt-oss): llama.cpp's form of tokenizer.json's expression, where letter case is
// ASCII-only (its collapsed-text matcher sees every other letter as one class): each
// "((?=[\\p{L}])([^a-z]))" there, one letter that is not a-z, is the class [^\\P{L}a-z] here (the
// same strings in the same order of preference; a repeated one-character group exhausts
// PCRE2's JIT stack on long words, a class does not).
static const char k_re_gpt4o[] =
    "[^\\r\\n\\p{L}\\p{N}]?[^\\P{L}a-z]*[^\\P{L}A-Z]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "[^\\r\\n\\p{L}\\p{N}]?[^\\P{L}a-z]+[^\\P{L}A-Z]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

enum lm_bpe_pre_kind { PRE_DEFAULT, PRE_GPT2, PRE_LLAMA3, PRE_QWEN2, PRE_STARCODER, PRE_FALCON, PRE_GPT4O };

static const char *const k_pre_regexes[][LM_BPE_MAX_RE + 1] = {
    [PRE_DEFAULT] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", k_re_gpt2, "\\p{N}+", "[0-9][0-9][0-9]", NULL},
    [PRE_GPT2] = {k_re_gpt2, NULL},
    [PRE_LLAMA3] = {k_re_llama3, NULL},
    [PRE_QWEN2] = {k_re_qwen2, NULL},
    [PRE_STARCODER] = {"\\p{N}", k_re_gpt2, NULL},
    [PRE_FALCON] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", k_re_gpt2, "[0-9][0-9][0-9]", NULL},
    [PRE_GPT4O] = {k_re_gpt4o, NULL},
};

struct pre_entry {
    const char *name;
    enum lm_bpe_pre_kind kind;
    bool ignore_merges, clean_spaces, add_bos;
};

// The names llama.cpp maps onto these regex families, with its per-name flags. Names whose
// llama.cpp handling needs more than this (sep tokens, lstrip/rstrip attributes, other
// regexes) are left out and rejected as unsupported.
static const struct pre_entry k_pre[] = {
    {"default", PRE_DEFAULT, false, true, false},
    {"llama3", PRE_LLAMA3, true, true, true},
    {"llama-v3", PRE_LLAMA3, true, true, true},
    {"llama-bpe", PRE_LLAMA3, true, true, true},
    {"falcon3", PRE_LLAMA3, true, true, true},
    {"falcon-h1", PRE_LLAMA3, true, true, true},
    {"midm-2.0", PRE_LLAMA3, true, true, true},
    {"lfm2", PRE_LLAMA3, true, true, true},
    {"dbrx", PRE_LLAMA3, false, true, false},
    {"smaug-bpe", PRE_LLAMA3, false, true, false},
    {"qwen2", PRE_QWEN2, false, false, false},
    {"deepseek-r1-qwen", PRE_QWEN2, false, false, false},
    {"kormo", PRE_QWEN2, false, false, false},
    {"f2llmv2", PRE_QWEN2, false, false, false},
    {"megrez", PRE_QWEN2, false, true, false},
    {"stablelm2", PRE_QWEN2, false, true, false},
    {"hunyuan", PRE_QWEN2, false, false, false},
    {"grok-2", PRE_QWEN2, false, false, false},
    {"gpt-2", PRE_GPT2, false, true, false},
    {"phi-2", PRE_GPT2, false, true, false},
    {"gigachat", PRE_GPT2, false, true, false},
    {"a.x-4.0", PRE_GPT2, false, true, false},
    {"mellum", PRE_GPT2, false, true, false},
    {"mpt", PRE_GPT2, false, true, false},
    {"olmo", PRE_GPT2, false, true, false},
    {"jais", PRE_GPT2, false, true, false},
    {"exaone4", PRE_GPT2, false, true, false},
    {"trillion", PRE_GPT2, false, false, false},
    {"granite-docling", PRE_GPT2, false, false, false},
    {"starcoder", PRE_STARCODER, false, true, false},
    {"refact", PRE_STARCODER, false, true, false},
    {"command-r", PRE_STARCODER, false, false, false},
    {"smollm", PRE_STARCODER, false, false, false},
    {"codeshell", PRE_STARCODER, false, true, false},
    {"exaone", PRE_STARCODER, false, true, false},
    {"minerva-7b", PRE_STARCODER, false, true, false},
    {"mellum2", PRE_STARCODER, false, true, false},
    {"falcon", PRE_FALCON, false, true, false},
    {"gpt-4o", PRE_GPT4O, false, false, false},
    {"llama4", PRE_GPT4O, false, false, false},
    {"kanana2", PRE_GPT4O, false, false, false},
    {"talkie", PRE_GPT4O, false, false, false},
};

static const struct pre_entry *pre_find(const char *pre) {
    if (!pre || !*pre) return &k_pre[0]; // llama.cpp: missing pre-tokenizer -> "default" (warns)
    for (size_t i = 0; i < sizeof k_pre / sizeof k_pre[0]; i++)
        if (strcmp(k_pre[i].name, pre) == 0) return &k_pre[i];
    return NULL;
}

enum lm_status lm_bpe_pre_info(const char *pre, const char *name, struct lm_bpe_info *out) {
    const struct pre_entry *e = pre_find(pre);
    if (!e)
        return lm_error_set(LM_ERR_UNSUPPORTED,
                            "tokenizer: %s: tokenizer.ggml.pre '%s' not supported (llama3/llama-bpe, qwen2, "
                            "gpt-2, starcoder/smollm, falcon, gpt-4o, default and their aliases are)",
                            name, pre);
    out->ignore_merges = e->ignore_merges;
    out->clean_spaces = e->clean_spaces;
    out->add_bos = e->add_bos;
    return LM_OK;
}

// ============================================================================
// GPT-2 byte <-> unicode mapping
// ============================================================================

// Bytes that print as themselves: '!'..'~', 0xA1..0xAC, 0xAE..0xFF. The other 68 bytes map,
// in byte order, to U+0100..U+0143.
static uint32_t byte_to_cpt(uint8_t b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    if (b <= 0x20) return 0x100 + b;
    if (b == 0xAD) return 0x143;
    return 0x100 + 33 + (b - 0x7F); // 0x7F..0xA0
}

static int cpt_to_byte(uint32_t c) {
    if ((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)) return (int)c;
    if (c < 0x100 || c > 0x143) return -1;
    uint32_t n = c - 0x100;
    if (n <= 0x20) return (int)n;
    if (n == 67) return 0xAD;
    return (int)(0x7F + n - 33);
}

// One codepoint as llama.cpp's unicode_cpt_from_utf8 + unicode_cpts_from_utf8 read it: no
// overlong or surrogate checks, an invalid or truncated sequence is U+FFFD for one byte.
// (llama.cpp throws on a decoded value above U+10FFFF; lumen takes it as invalid too.)
static uint32_t utf8_get(const uint8_t *s, size_t n, size_t *i) {
    size_t k = *i;
    uint8_t c = s[k];
    uint32_t cp;
    size_t len;
    if (c < 0x80) {
        *i = k + 1;
        return c;
    }
    if (!(c & 0x40)) goto bad;
    if (!(c & 0x20)) {
        len = 2;
        cp = c & 0x1F;
    } else if (!(c & 0x10)) {
        len = 3;
        cp = c & 0x0F;
    } else if (!(c & 0x08)) {
        len = 4;
        cp = c & 0x07;
    } else {
        goto bad;
    }
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

size_t lm_bpe_decode_piece(const char *s, size_t n, char *buf, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c = utf8_get((const uint8_t *)s, n, &i);
        int b = cpt_to_byte(c);
        if (b >= 0) {
            if (o < cap) buf[o] = (char)b;
            o++;
            continue;
        }
        // llama_decode_text: "[UNK_BYTE_0x" + hex of the codepoint's UTF-8 + whole text + "]"
        char u[4], tmp[16];
        size_t un = lm_utf8_put(c, u);
        memcpy(tmp, "[UNK_BYTE_0x", 12);
        for (size_t j = 0; j < 12; j++, o++)
            if (o < cap) buf[o] = tmp[j];
        static const char hx[] = "0123456789abcdef";
        for (size_t j = 0; j < un; j++) {
            if (o < cap) buf[o] = hx[(uint8_t)u[j] >> 4];
            o++;
            if (o < cap) buf[o] = hx[(uint8_t)u[j] & 15];
            o++;
        }
        for (size_t j = 0; j < n; j++, o++)
            if (o < cap) buf[o] = s[j];
        if (o < cap) buf[o] = ']';
        o++;
    }
    return o;
}

// ============================================================================
// Load: merge table and regexes
// ============================================================================

struct lm_bpe {
    enum lm_bpe_pre_kind pre;
    bool ignore_merges;
    int n_re;
#ifdef LM_HAVE_PCRE2
    pcre2_code *re[LM_BPE_MAX_RE];
#endif
    // (left id, right id) -> rank and merged id; open addressing, key UINT64_MAX = empty
    uint64_t *mkey;
    uint32_t *mrank;
    int32_t *mres; // id of the concatenation, -1 if it is not a token
    uint32_t mmask;
    int32_t byte_id[256]; // token of each byte's mapped character, -1 if none
    int32_t raw_byte_id[256]; // token whose text is that single raw byte, -1 if none
};

static inline uint32_t mhash(uint64_t k) { return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 32); }

static bool merge_find(const struct lm_bpe *b, int32_t l, int32_t r, uint32_t *rank, int32_t *res) {
    uint64_t k = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    for (uint32_t i = mhash(k) & b->mmask;; i = (i + 1) & b->mmask) {
        if (b->mkey[i] == UINT64_MAX) return false;
        if (b->mkey[i] == k) {
            *rank = b->mrank[i];
            *res = b->mres[i];
            return true;
        }
    }
}

void lm_bpe_free(struct lm_bpe *b) {
    if (!b) return;
#ifdef LM_HAVE_PCRE2
    for (int i = 0; i < b->n_re; i++) pcre2_code_free(b->re[i]);
#endif
    free(b->mkey);
    free(b->mrank);
    free(b->mres);
    free(b);
}

enum lm_status lm_bpe_init(struct lm_tokenizer *t, const struct lm_tokenizer_desc *d, const char *name) {
#ifndef LM_HAVE_PCRE2
    (void)t;
    (void)d;
    return lm_error_set(LM_ERR_UNSUPPORTED, "tokenizer: %s: byte-level BPE needs PCRE2 (lumen was built without it)",
                        name);
#else
    const struct pre_entry *pe = pre_find(d->pre);
    if (!pe) {
        struct lm_bpe_info info;
        return lm_bpe_pre_info(d->pre, name, &info);
    }
    if (!d->merges)
        return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: tokenizer.ggml.merges is missing (required for model 'gpt2')",
                            name);
    if (d->n_merges < 0 || d->n_merges > (int64_t)1 << 26)
        return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: tokenizer.ggml.merges has %lld entries (expected 0..%d)",
                            name, (long long)d->n_merges, 1 << 26);
    struct lm_bpe *b = calloc(1, sizeof *b);
    if (!b) return lm_error_set(LM_ERR_NOMEM, "tokenizer: %s: out of memory", name);
    enum lm_status st = LM_OK;
    char *cat = NULL;
    b->pre = pe->kind;
    b->ignore_merges = pe->ignore_merges;
    uint32_t slots = 16;
    while (slots < 2 * (uint64_t)d->n_merges) slots <<= 1;
    b->mmask = slots - 1;
    b->mkey = malloc((size_t)slots * sizeof *b->mkey);
    b->mrank = malloc((size_t)slots * sizeof *b->mrank);
    b->mres = malloc((size_t)slots * sizeof *b->mres);
    cat = malloc((size_t)t->max_token_len * 2 + 1);
    if (!b->mkey || !b->mrank || !b->mres || !cat) {
        st = lm_error_set(LM_ERR_NOMEM, "tokenizer: %s: out of memory for %lld merges", name, (long long)d->n_merges);
        goto fail;
    }
    memset(b->mkey, 0xff, (size_t)slots * sizeof *b->mkey);
    for (int64_t m = 0; m < d->n_merges; m++) {
        const char *s = d->merges[m];
        uint32_t n = d->merge_lens[m];
        // llama.cpp splits at the first space after position 0
        const char *sp = n > 1 ? memchr(s + 1, ' ', n - 1) : NULL;
        if (!sp) {
            st = lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: tokenizer.ggml.merges[%lld] has no space separating two tokens",
                              name, (long long)m);
            goto fail;
        }
        size_t ln = (size_t)(sp - s), rn = n - ln - 1;
        int32_t l = lm_tokenizer_find(t, s, ln), r = lm_tokenizer_find(t, sp + 1, rn);
        if (l < 0 || r < 0) {
            st = lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: tokenizer.ggml.merges[%lld] '%.*s' names a %s that is not a token",
                              name, (long long)m, (int)(n > 64 ? 64 : n), s, l < 0 ? "left part" : "right part");
            goto fail;
        }
        uint64_t k = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
        uint32_t i = mhash(k) & b->mmask;
        while (b->mkey[i] != UINT64_MAX && b->mkey[i] != k) i = (i + 1) & b->mmask;
        if (b->mkey[i] == k) continue; // duplicate: the first (lowest) rank stays, as in llama.cpp
        memcpy(cat, s, ln);
        memcpy(cat + ln, sp + 1, rn);
        b->mkey[i] = k;
        b->mrank[i] = (uint32_t)m;
        b->mres[i] = lm_tokenizer_find(t, cat, ln + rn);
    }
    for (int c = 0; c < 256; c++) {
        char u[4], raw = (char)c;
        b->byte_id[c] = lm_tokenizer_find(t, u, lm_utf8_put(byte_to_cpt((uint8_t)c), u));
        b->raw_byte_id[c] = lm_tokenizer_find(t, &raw, 1);
    }
    for (const char *const *re = k_pre_regexes[pe->kind]; *re; re++) {
        int err;
        PCRE2_SIZE eoff;
        pcre2_code *code = pcre2_compile((PCRE2_SPTR)*re, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &eoff, NULL);
        if (!code) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(err, msg, sizeof msg);
            st = lm_error_set(LM_ERR_UNSUPPORTED, "tokenizer: %s: pre-tokenizer regex for '%s' does not compile at %zu: %s",
                              name, pe->name, (size_t)eoff, (const char *)msg);
            goto fail;
        }
        // JIT is an optimization: without it (e.g. no executable memory) the interpreter runs
        (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
        b->re[b->n_re++] = code;
    }
    free(cat);
    t->bpe = b;
    return LM_OK;
fail:
    free(cat);
    lm_bpe_free(b);
    return st;
#endif
}

#ifdef LM_HAVE_PCRE2

// ============================================================================
// Pre-tokenization
// ============================================================================

// PCRE2 matches a stand-in text: ASCII stays, every other codepoint becomes a 2-byte
// representative of its llama.cpp class, so \p{L}, \s ... follow llama.cpp's tables.
static const uint32_t k_cls_rep[7] = {
    [LM_BPE_CLS_OTHER] = 0x80,   // <control>: none of \s \p{L} \p{N} \p{P} \p{S} \p{M}
    [LM_BPE_CLS_SPACE] = 0xA0,   // NO-BREAK SPACE (Zs)
    [LM_BPE_CLS_LETTER] = 0xC0,  // A WITH GRAVE (Lu)
    [LM_BPE_CLS_NUMBER] = 0xB2,  // SUPERSCRIPT TWO (No)
    [LM_BPE_CLS_PUNCT] = 0xA1,   // INVERTED EXCLAMATION MARK (Po)
    [LM_BPE_CLS_SYMBOL] = 0xA2,  // CENT SIGN (Sc)
    [LM_BPE_CLS_MARK] = 0x300,   // COMBINING GRAVE ACCENT (Mn)
};

static uint32_t cpt_class(uint32_t c) {
    uint32_t lo = 0, hi = lm_bpe_cls_n_ranges; // last entry with start <= c
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if ((lm_bpe_cls_ranges[mid] >> 3) <= c) lo = mid;
        else hi = mid;
    }
    return lm_bpe_cls_ranges[lo] & 7;
}

struct span {
    uint32_t a, b; // [a, b) in stand-in bytes
};

struct lm_bpe_scratch {
    char *col;        // stand-in text
    uint32_t *col_cp; // stand-in byte offset -> codepoint index (n_col + 1)
    char *san;        // the codepoints re-encoded (what llama.cpp tokenizes)
    uint32_t *cp_off; // codepoint index -> offset in san (n_cp + 1)
    size_t cap_in;
    struct span *sp[2];
    size_t sp_cap[2];
    pcre2_match_data *md;
    // one pre-token
    char *enc;
    size_t enc_cap;
    struct sym {
        int32_t prev, next, id;
        uint32_t off, n; // bytes of enc; n == 0 once merged into the left neighbour
    } *sym;
    size_t sym_cap;
    struct lm_merge_heap heap;
};

void lm_bpe_scratch_free(struct lm_bpe_scratch *s) {
    if (!s) return;
    free(s->col);
    free(s->col_cp);
    free(s->san);
    free(s->cp_off);
    free(s->sp[0]);
    free(s->sp[1]);
    pcre2_match_data_free(s->md);
    free(s->enc);
    free(s->sym);
    lm_merge_heap_free(&s->heap);
    free(s);
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np) return false;
    *p = np;
    *cap = nc;
    return true;
}

static bool span_push(struct lm_bpe_scratch *s, int k, size_t *n, uint32_t a, uint32_t b) {
    if (!grow((void **)&s->sp[k], &s->sp_cap[k], *n + 1, sizeof(struct span))) return false;
    s->sp[k][(*n)++] = (struct span){a, b};
    return true;
}

// ============================================================================
// BPE merges on one pre-token
// ============================================================================

// Queues the merge of symbols l and r when the merge table has it, keyed by its rank (the
// heap takes the lowest key first).
static bool add_bigram(const struct lm_bpe *b, struct lm_bpe_scratch *s, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return true;
    const struct sym *L = &s->sym[l], *R = &s->sym[r];
    uint32_t rank;
    int32_t res;
    // merge parts are validated to be tokens at load, so a symbol that is no token can
    // never be part of a merge (llama.cpp looks the pair up by text; same outcome)
    if (L->id < 0 || R->id < 0 || !merge_find(b, L->id, R->id, &rank, &res)) return true;
    return lm_merge_heap_push(&s->heap, (struct lm_merge){(double)rank, l, r, res, L->n, R->n});
}

static enum lm_status bpe_word(const struct lm_tokenizer *t, struct lm_bpe_scratch *s, const uint8_t *w, size_t n,
                               struct lm_tok_ids *out) {
    const struct lm_bpe *b = t->bpe;
    if (!grow((void **)&s->enc, &s->enc_cap, 2 * n, 1) || !grow((void **)&s->sym, &s->sym_cap, n, sizeof *s->sym))
        goto nomem;
    size_t e = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t k = (uint32_t)lm_utf8_put(byte_to_cpt(w[i]), s->enc + e);
        s->sym[i] = (struct sym){(int32_t)i - 1, i + 1 == n ? -1 : (int32_t)i + 1, b->byte_id[w[i]], (uint32_t)e, k};
        e += k;
    }
    if (b->ignore_merges || n == 1) {
        int32_t id = n == 1 ? s->sym[0].id : lm_tokenizer_find(t, s->enc, e);
        if (id >= 0) return lm_tok_ids_push(out, id) ? LM_OK : LM_ERR_NOMEM;
    }
    s->heap.n = 0;
    for (size_t i = 1; i < n; i++)
        if (!add_bigram(b, s, (int32_t)i - 1, (int32_t)i)) goto nomem;
    while (s->heap.n > 0) {
        struct lm_merge g = lm_merge_heap_pop(&s->heap);
        struct sym *L = &s->sym[g.left], *R = &s->sym[g.right];
        if (L->n == 0 || R->n == 0 || L->n != g.ln || R->n != g.rn) continue; // stale
        L->n += R->n;
        L->id = g.res;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) s->sym[R->next].prev = g.left;
        if (!add_bigram(b, s, L->prev, g.left) || !add_bigram(b, s, g.left, L->next)) goto nomem;
    }
    for (int32_t i = 0; i != -1; i = s->sym[i].next) {
        const struct sym *y = &s->sym[i];
        if (y->id >= 0) {
            if (!lm_tok_ids_push(out, y->id)) goto nomem;
            continue;
        }
        // not a token: llama.cpp looks up each byte of the mapped text as a one-byte token
        // and drops the bytes that are none
        for (uint32_t j = 0; j < y->n; j++) {
            int32_t id = b->raw_byte_id[(uint8_t)s->enc[y->off + j]];
            if (id >= 0 && !lm_tok_ids_push(out, id)) goto nomem;
        }
    }
    return LM_OK;
nomem:
    return LM_ERR_NOMEM;
}

// ============================================================================
// Fragment entry
// ============================================================================

enum lm_status lm_bpe_fragment(const struct lm_tokenizer *t, struct lm_bpe_scratch **scratch, const char *text,
                               size_t len, struct lm_tok_ids *out) {
    const struct lm_bpe *b = t->bpe;
    if (len == 0) return LM_OK;
    struct lm_bpe_scratch *s = *scratch;
    if (!s) {
        s = *scratch = calloc(1, sizeof *s);
        if (!s || !(s->md = pcre2_match_data_create(4, NULL))) goto nomem;
    }
    if (len > s->cap_in) {
        size_t c = len;
        char *col = realloc(s->col, 2 * c), *san = realloc(s->san, 4 * c);
        if (col) s->col = col;
        if (san) s->san = san;
        uint32_t *col_cp = realloc(s->col_cp, (2 * c + 1) * sizeof *col_cp);
        if (col_cp) s->col_cp = col_cp;
        uint32_t *cp_off = realloc(s->cp_off, (c + 1) * sizeof *cp_off);
        if (cp_off) s->cp_off = cp_off;
        if (!col || !san || !col_cp || !cp_off) goto nomem;
        s->cap_in = c;
    }
    // codepoints (llama.cpp's reading), their re-encoding, and the stand-in text
    const uint8_t *u = (const uint8_t *)text;
    size_t n_cp = 0, n_col = 0, n_san = 0;
    for (size_t i = 0; i < len;) {
        uint32_t c = u[i] < 0x80 ? u[i++] : utf8_get(u, len, &i);
        s->cp_off[n_cp] = (uint32_t)n_san;
        n_san += lm_utf8_put(c, s->san + n_san);
        s->col_cp[n_col] = (uint32_t)n_cp;
        if (c < 0x80) {
            s->col[n_col++] = (char)c;
        } else {
            s->col_cp[n_col + 1] = (uint32_t)n_cp;
            n_col += lm_utf8_put(k_cls_rep[cpt_class(c)], s->col + n_col);
        }
        n_cp++;
    }
    s->cp_off[n_cp] = (uint32_t)n_san;
    s->col_cp[n_col] = (uint32_t)n_cp;

    // regex passes: each splits every piece of the previous pass into matches and gaps
    size_t n_sp = 0, n_new;
    int cur = 0;
    if (!span_push(s, cur, &n_sp, 0, (uint32_t)n_col)) goto nomem;
    for (int r = 0; r < b->n_re; r++) {
        n_new = 0;
        for (size_t k = 0; k < n_sp; k++) {
            struct span p = s->sp[cur][k];
            PCRE2_SPTR subj = (PCRE2_SPTR)s->col + p.a;
            PCRE2_SIZE plen = p.b - p.a, off = 0, prev = 0;
            while (off < plen) {
                int rc = pcre2_match(b->re[r], subj, plen, off, PCRE2_NO_UTF_CHECK, s->md, NULL);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) {
                    PCRE2_UCHAR msg[160];
                    pcre2_get_error_message(rc, msg, sizeof msg);
                    return lm_error_set(LM_ERR_STATE, "lm_tokenize: pre-tokenizer regex failed: %s", (const char *)msg);
                }
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
                if (ov[0] > prev && !span_push(s, !cur, &n_new, p.a + (uint32_t)prev, p.a + (uint32_t)ov[0]))
                    goto nomem;
                if (ov[1] > ov[0]) {
                    if (!span_push(s, !cur, &n_new, p.a + (uint32_t)ov[0], p.a + (uint32_t)ov[1])) goto nomem;
                    prev = off = ov[1];
                } else { // empty match (none of the built-in regexes has one): step one character
                    off = ov[0] + 1;
                    while (off < plen && (subj[off] & 0xC0) == 0x80) off++;
                }
            }
            if (prev < plen && !span_push(s, !cur, &n_new, p.a + (uint32_t)prev, p.b)) goto nomem;
        }
        cur = !cur;
        n_sp = n_new;
    }
    for (size_t k = 0; k < n_sp; k++) {
        struct span p = s->sp[cur][k];
        uint32_t a = s->cp_off[s->col_cp[p.a]], z = s->cp_off[s->col_cp[p.b]];
        if (z > a && bpe_word(t, s, (const uint8_t *)s->san + a, z - a, out) != LM_OK) goto nomem;
    }
    return LM_OK;
nomem:
    return lm_error_set(LM_ERR_NOMEM, "lm_tokenize: out of memory (BPE fragment of %zu bytes)", len);
}

#else // !LM_HAVE_PCRE2: lm_bpe_init refuses, so these are never reached with a BPE tokenizer

struct lm_bpe_scratch {
    int unused;
};
void lm_bpe_scratch_free(struct lm_bpe_scratch *s) { free(s); }
enum lm_status lm_bpe_fragment(const struct lm_tokenizer *t, struct lm_bpe_scratch **scratch, const char *text,
                               size_t len, struct lm_tok_ids *out) {
    (void)t, (void)scratch, (void)text, (void)len, (void)out;
    return lm_error_set(LM_ERR_UNSUPPORTED, "lm_tokenize: byte-level BPE needs PCRE2");
}

#endif
