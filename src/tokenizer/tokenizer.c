// Tokenizer vocabulary: load + validate tokenizer.ggml.* metadata into owned arrays, the
// text -> id hash, special-token attributes exactly as llama.cpp derives them, pieces,
// whole-sequence and streaming detokenization. Reading it from GGUF: tokenizer_gguf.c;
// encoding: tokenize.c (spm.c, bpe.c).
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"

// ============================================================================
// Build from a description
// ============================================================================

void lm_tokenizer_free(struct lm_tokenizer *t) {
    if (!t) return;
    free(t->blob);
    free(t->off);
    free(t->scores);
    free(t->attr);
    free(t->ht);
    free(t->special);
    free(t->trie);
    lm_bpe_free(t->bpe);
    lm_ugm_free(t->ugm);
    free(t);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Byte value of a "<0xXX>" text, or -1.
static int byte_token_value(const char *s, size_t n) {
    if (n != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
    int hi = hexval(s[3]), lo = hexval(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

static uint16_t attr_of_type(int32_t type) {
    switch (type) {
    case LM_TOK_TYPE_UNKNOWN: return LM_TOK_ATTR_UNKNOWN;
    case LM_TOK_TYPE_UNUSED: return LM_TOK_ATTR_UNUSED;
    case LM_TOK_TYPE_NORMAL: return LM_TOK_ATTR_NORMAL;
    case LM_TOK_TYPE_CONTROL: return LM_TOK_ATTR_CONTROL;
    case LM_TOK_TYPE_USER_DEFINED: return LM_TOK_ATTR_USER_DEFINED;
    case LM_TOK_TYPE_BYTE: return LM_TOK_ATTR_BYTE;
    default: return 0; // UNDEFINED
    }
}

// Lowest id whose text is in list, or -1.
static int32_t find_first(const struct lm_tokenizer *t, const char *const *list) {
    int32_t best = -1;
    for (; *list; list++) {
        int32_t id = lm_tokenizer_find(t, *list, strlen(*list));
        if (id >= 0 && (best < 0 || id < best)) best = id;
    }
    return best;
}

// llama.cpp (llama-vocab.cpp, load): texts that identify EOT/EOM/FIM tokens when the
// metadata does not name them, and the texts that end generation. Matching tokens that
// are not CONTROL are forced to CONTROL.
static const char *const k_eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>",
    "<end_of_utterance>", NULL};
static const char *const k_eom_texts[] = {"<|eom_id|>", NULL};
static const char *const k_fim_pre_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
    "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const k_fim_suf_texts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>",
    "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const k_fim_mid_texts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
    "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
static const char *const k_fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const k_fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
                                              "<reponame>", NULL};
static const char *const k_fim_sep_texts[] = {"<|file_sep|>", NULL};
static const char *const k_eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", "[e~[", NULL};
static const char *const k_force_user_defined[] = {"<|channel|>", "<|message|>", "<|start|>",
                                                    "<|constrain|>", NULL};

// Some EOG token whose text is in list, or -1.
static int32_t eog_with_text(const struct lm_tokenizer *t, const char *const *list) {
    for (; *list; list++) {
        int32_t id = lm_tokenizer_find(t, *list, strlen(*list));
        if (id >= 0 && (t->attr[id] & LM_TOK_FLAG_EOG)) return id;
    }
    return -1;
}

// Special-token attributes and the end-of-generation set, in llama.cpp's order. llama.cpp
// walks an unordered_map for the text-based detection, so when a vocabulary holds several
// candidates for one role its pick is unspecified; lumen takes the lowest id.
static void derive_special_attrs(struct lm_tokenizer *t, int32_t fim_pad, int32_t fim_rep,
                                 int32_t fim_sep) {
    int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1;
    struct {
        int32_t *id;
        const char *const *texts;
    } detect[] = {{&t->eot, k_eot_texts},         {&t->eom, k_eom_texts},
                  {&fim_pre, k_fim_pre_texts},    {&fim_suf, k_fim_suf_texts},
                  {&fim_mid, k_fim_mid_texts},    {&fim_pad, k_fim_pad_texts},
                  {&fim_rep, k_fim_rep_texts},    {&fim_sep, k_fim_sep_texts}};
    for (size_t k = 0; k < sizeof detect / sizeof detect[0]; k++) {
        if (*detect[k].id >= 0) continue;
        *detect[k].id = find_first(t, detect[k].texts);
        if (*detect[k].id >= 0) t->attr[*detect[k].id] |= LM_TOK_ATTR_CONTROL;
    }
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if ((t->attr[id] & LM_TOK_ATTR_CONTROL) && !(t->attr[id] & LM_TOK_ATTR_UNUSED)) {
            uint32_t o = t->off[id], n = t->off[id + 1] - o;
            // strstr semantics: the text up to its first NUL contains "unused"
            const char *p = t->blob + o;
            size_t m = strnlen(p, n);
            for (size_t i = 0; i + 6 <= m; i++)
                if (memcmp(p + i, "unused", 6) == 0) {
                    t->attr[id] |= LM_TOK_ATTR_UNUSED;
                    break;
                }
        }
    }
    int32_t extra[] = {fim_pad, fim_rep, fim_sep};
    for (size_t k = 0; k < 3; k++)
        if (extra[k] >= 0) t->attr[extra[k]] |= LM_TOK_FLAG_EOG;
    for (const char *const *p = k_eog_texts; *p; p++) {
        int32_t id = lm_tokenizer_find(t, *p, strlen(*p));
        if (id >= 0) t->attr[id] |= LM_TOK_FLAG_EOG | LM_TOK_ATTR_CONTROL;
    }
    for (const char *const *p = k_force_user_defined; *p; p++) {
        int32_t id = lm_tokenizer_find(t, *p, strlen(*p));
        if (id >= 0) t->attr[id] = LM_TOK_ATTR_USER_DEFINED | (t->attr[id] & LM_TOK_FLAG_EOG);
    }
    int32_t named[] = {t->eos, t->eot, t->eom};
    for (size_t k = 0; k < 3; k++)
        if (named[k] >= 0) t->attr[named[k]] |= LM_TOK_FLAG_EOG;
    // o200k_harmony / solar-open: "<|end|>" is not EOG when "<|return|>"+"<|call|>" (or
    // "<|calls|>"+"<|flush|>") are; "</s>" is a normal token when "<|tool_response>" or
    // "<|plamo:eos|>" is EOG (gemma4, plamo).
    const char *const k_ret[] = {"<|return|>", NULL}, *const k_call[] = {"<|call|>", "<|calls|>", NULL},
                      *const k_flush[] = {"<|flush|>", NULL}, *const k_end[] = {"<|end|>", NULL},
                      *const k_norm_s[] = {"<|tool_response>", "<|plamo:eos|>", NULL}, *const k_s[] = {"</s>", NULL};
    bool has_return = eog_with_text(t, k_ret) >= 0, has_call = eog_with_text(t, k_call) >= 0;
    bool has_flush = eog_with_text(t, k_flush) >= 0;
    int32_t end_id = eog_with_text(t, k_end);
    if (end_id >= 0 && has_call && (has_return || has_flush)) t->attr[end_id] = LM_TOK_ATTR_USER_DEFINED;
    bool has_normal_s = eog_with_text(t, k_norm_s) >= 0;
    int32_t s_id = eog_with_text(t, k_s);
    if (has_normal_s && s_id >= 0) t->attr[s_id] = LM_TOK_ATTR_NORMAL;
}

static int cmp_special(const void *a, const void *b, void *ctx) {
    const struct lm_tokenizer *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = t->off[x + 1] - t->off[x], ly = t->off[y + 1] - t->off[y];
    if (lx != ly) return lx > ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

// Insertion sort is too slow for thousands of specials; a small merge sort with a context.
static void sort_special(struct lm_tokenizer *t, int32_t *a, int32_t *tmp, int32_t n) {
    if (n < 2) return;
    int32_t h = n / 2;
    sort_special(t, a, tmp, h);
    sort_special(t, a + h, tmp, n - h);
    int32_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = cmp_special(&a[j], &a[i], t) < 0 ? a[j++] : a[i++];
    while (i < h) tmp[k++] = a[i++];
    while (j < n) tmp[k++] = a[j++];
    memcpy(a, tmp, (size_t)n * sizeof *a);
}

static enum lm_status build_special(struct lm_tokenizer *t) {
    int32_t n = 0;
    size_t trie_cap = 1;
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->attr[id] & (LM_TOK_ATTR_CONTROL | LM_TOK_ATTR_USER_DEFINED | LM_TOK_ATTR_UNKNOWN)) {
            n++;
            trie_cap += t->off[id + 1] - t->off[id];
        }
    t->n_special = n;
    t->special = malloc((size_t)(n ? n : 1) * sizeof *t->special);
    int32_t *tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
    t->trie = malloc(trie_cap * sizeof *t->trie);
    if (!t->special || !tmp || !t->trie) {
        free(tmp);
        return lm_error_set(LM_ERR_NOMEM, "tokenizer: out of memory for %d special tokens", n);
    }
    n = 0;
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->attr[id] & (LM_TOK_ATTR_CONTROL | LM_TOK_ATTR_USER_DEFINED | LM_TOK_ATTR_UNKNOWN))
            t->special[n++] = id;
    sort_special(t, t->special, tmp, n);
    free(tmp);
    // byte trie; node 0 is a placeholder so 0 can mean "none"
    t->n_trie = 1;
    memset(t->trie_root, 0, sizeof t->trie_root);
    for (int32_t k = 0; k < n; k++) {
        int32_t id = t->special[k];
        const uint8_t *s = (const uint8_t *)t->blob + t->off[id];
        uint32_t len = t->off[id + 1] - t->off[id];
        uint32_t *link = &t->trie_root[s[0]];
        uint32_t node = 0;
        for (uint32_t i = 0; i < len; i++) {
            if (i > 0) link = &t->trie[node].child;
            uint32_t c = *link;
            while (c && t->trie[c].byte != s[i]) c = t->trie[c].sibling;
            if (!c) { // trie has room for every byte of every text: no realloc, link stays valid
                c = t->n_trie++;
                t->trie[c] = (struct lm_tok_trie_node){.child = 0, .sibling = *link, .special = -1, .byte = s[i]};
                *link = c;
            }
            node = c;
        }
        if (t->trie[node].special < 0) t->trie[node].special = k;
    }
    return LM_OK;
}

static enum lm_status check_id(const char *name, const char *key, int64_t id, int32_t n_vocab,
                               int32_t *out) {
    if (id < 0) return LM_OK;
    if (id >= n_vocab)
        return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: %s = %lld out of range (vocab has %d tokens)",
                            name, key, (long long)id, n_vocab);
    *out = (int32_t)id;
    return LM_OK;
}

// WordPiece / Unigram: the separator id, the normaliser options (llama.cpp: lower-casing on
// unless the file says otherwise, accent stripping as lower-casing unless said) and the ids
// the encoders emit without checking: WordPiece's [CLS] (bos), [SEP] and [UNK], Unigram's unk.
static enum lm_status encoder_options(struct lm_tokenizer *t, const struct lm_tokenizer_desc *d, const char *name,
                                      enum lm_tok_kind kind) {
    const char *what = kind == LM_TOK_KIND_WPM ? "WordPiece" : "Unigram";
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (t->off[i + 1] - t->off[i] > LM_TOK_MAX_ENCODER_TOKEN)
            return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: token %d is %u bytes (limit %d for a %s vocabulary)",
                                name, i, t->off[i + 1] - t->off[i], LM_TOK_MAX_ENCODER_TOKEN, what);
    enum lm_status st = check_id(name, "tokenizer.ggml.seperator_token_id", d->sep, t->n_vocab, &t->sep);
    if (st != LM_OK) return st;
    t->wpm_lowercase = d->lowercase != 0; // -1 (absent) = on
    t->wpm_strip_accents = d->strip_accents < 0 ? t->wpm_lowercase : d->strip_accents != 0;
    t->remove_extra_ws = d->remove_extra_ws > 0;
    if (t->unk < 0)
        return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: %s vocabulary has no unknown token "
                            "(tokenizer.ggml.unknown_token_id absent and the default id %d out of range)",
                            name, what, kind == LM_TOK_KIND_WPM ? 100 : 2);
    if (kind == LM_TOK_KIND_WPM && (t->bos < 0 || t->sep < 0))
        return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: WordPiece vocabulary has no %s token "
                            "(tokenizer.ggml.%s absent and the default id %d out of range)",
                            name, t->bos < 0 ? "[CLS]" : "[SEP]",
                            t->bos < 0 ? "bos_token_id" : "seperator_token_id", t->bos < 0 ? 101 : 102);
    return LM_OK;
}

// t's token texts (empty ones become "[EMPTY_<id>]" as in llama.cpp), scores, attributes
// and the text -> id table, each token checked: score not NaN, type 0..6, byte tokens
// spelled <0xXX>, no two tokens with the same text. t->n_vocab is set; on error the caller
// frees t.
static enum lm_status build_vocab(struct lm_tokenizer *t, const struct lm_tokenizer_desc *d, const char *name) {
    int32_t nv = t->n_vocab;
    uint64_t total = 0;
    for (int32_t i = 0; i < nv; i++) total += d->lens[i] ? d->lens[i] : 24;
    if (total >= UINT32_MAX) {
        return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: token texts total %llu bytes (limit 4 GiB)", name,
                            (unsigned long long)total);
    }
    t->blob = malloc(total + 1);
    t->off = malloc(((size_t)nv + 1) * sizeof *t->off);
    t->scores = malloc((size_t)nv * sizeof *t->scores);
    t->attr = malloc((size_t)nv * sizeof *t->attr);
    uint32_t slots = 1;
    while (slots < 2u * (uint32_t)nv) slots <<= 1;
    t->ht = malloc((size_t)slots * sizeof *t->ht);
    if (!t->blob || !t->off || !t->scores || !t->attr || !t->ht) {
        return lm_error_set(LM_ERR_NOMEM, "tokenizer: %s: out of memory for %d tokens", name, nv);
    }
    t->ht_mask = slots - 1;
    memset(t->ht, 0xff, (size_t)slots * sizeof *t->ht);
    uint32_t pos = 0;
    for (int32_t i = 0; i < nv; i++) {
        t->off[i] = pos;
        if (d->lens[i]) {
            memcpy(t->blob + pos, d->texts[i], d->lens[i]);
            pos += d->lens[i];
        } else {
            pos += (uint32_t)snprintf(t->blob + pos, 24, "[EMPTY_%d]", i);
        }
        if (pos - t->off[i] > t->max_token_len) t->max_token_len = pos - t->off[i];
    }
    t->off[nv] = pos;
    t->blob[pos] = 0;

    for (int32_t i = 0; i < nv; i++) {
        float s = d->scores ? d->scores[i] : 0.0f;
        if (isnan(s)) {
            return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: tokenizer.ggml.scores[%d] is NaN", name, i);
        }
        t->scores[i] = s;
        int32_t ty = d->types ? d->types[i] : LM_TOK_TYPE_NORMAL;
        if (ty < LM_TOK_TYPE_UNDEFINED || ty > LM_TOK_TYPE_BYTE) {
            return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: tokenizer.ggml.token_type[%d] = %d (expected 0..6)",
                                name, i, ty);
        }
        t->attr[i] = attr_of_type(ty);
        const char *txt = t->blob + t->off[i];
        uint32_t len = t->off[i + 1] - t->off[i];
        if (ty == LM_TOK_TYPE_BYTE && byte_token_value(txt, len) < 0) {
            return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: byte token %d is not spelled <0xXX> (%u bytes)", name,
                                i, len);
        }
        uint32_t h = lm_tok_hash(txt, len) & t->ht_mask;
        while (t->ht[h] != UINT32_MAX) {
            uint32_t o = t->ht[h];
            if (t->off[o + 1] - t->off[o] == len && memcmp(t->blob + t->off[o], txt, len) == 0) {
                return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: tokens %u and %d have the same text (%u bytes)",
                                    name, o, i, len);
            }
            h = (h + 1) & t->ht_mask;
        }
        t->ht[h] = (uint32_t)i;
    }
    return LM_OK;
}

enum lm_status lm_tokenizer_init_desc(struct lm_tokenizer **out, const struct lm_tokenizer_desc *d,
                                      const char *name) {
    *out = NULL;
    if (!name) name = "(memory)";
    enum lm_tok_kind kind;
    struct lm_bpe_info bpe_info = {0};
    if (d->model && strcmp(d->model, "llama") == 0) {
        kind = LM_TOK_KIND_SPM;
    } else if (d->model && strcmp(d->model, "gpt2") == 0) {
        kind = LM_TOK_KIND_BPE;
        enum lm_status st = lm_bpe_pre_info(d->pre, name, &bpe_info);
        if (st != LM_OK) return st;
    } else if (d->model && strcmp(d->model, "bert") == 0) {
        kind = LM_TOK_KIND_WPM;
    } else if (d->model && strcmp(d->model, "t5") == 0) {
        kind = LM_TOK_KIND_UGM;
    } else {
        return lm_error_set(LM_ERR_UNSUPPORTED,
                            "tokenizer: %s: tokenizer.ggml.model '%s' not supported (expected 'llama', 'gpt2', "
                            "'bert' or 't5')",
                            name, d->model ? d->model : "(null)");
    }
    if (d->n_vocab <= 0 || d->n_vocab > LM_TOK_MAX_VOCAB)
        return lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: tokenizer.ggml.tokens has %d entries (expected 1..%d)",
                            name, d->n_vocab, LM_TOK_MAX_VOCAB);
    int32_t nv = d->n_vocab;
    struct lm_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return lm_error_set(LM_ERR_NOMEM, "tokenizer: out of memory");
    t->kind = kind;
    t->n_vocab = nv;
    enum lm_status st = LM_OK;

    if ((st = build_vocab(t, d, name)) != LM_OK) goto fail;

    // special ids: defaults (SPM bos 1, eos 2, unk 0; BPE bos = eos = 11) are dropped when
    // out of range, as llama.cpp does; explicit metadata ids out of range are an error.
    if (kind == LM_TOK_KIND_SPM) {
        t->bos = nv > 1 ? 1 : -1;
        t->eos = nv > 2 ? 2 : -1;
        t->unk = 0;
    } else if (kind == LM_TOK_KIND_WPM) { // [CLS] 101, [UNK] 100, [SEP] 102 (llama.cpp)
        t->bos = nv > 101 ? 101 : -1;
        t->eos = -1;
        t->unk = nv > 100 ? 100 : -1;
    } else if (kind == LM_TOK_KIND_UGM) { // T5: </s> 1, <unk> 2
        t->bos = -1;
        t->eos = nv > 1 ? 1 : -1;
        t->unk = nv > 2 ? 2 : -1;
    } else {
        t->bos = t->eos = nv > 11 ? 11 : -1;
        t->unk = -1;
    }
    t->pad = t->eot = t->eom = -1;
    t->sep = kind == LM_TOK_KIND_WPM && nv > 102 ? 102 : -1;
    int32_t fim_pad = -1, fim_rep = -1, fim_sep = -1;
    if ((st = check_id(name, "tokenizer.ggml.bos_token_id", d->bos, nv, &t->bos)) ||
        (st = check_id(name, "tokenizer.ggml.eos_token_id", d->eos, nv, &t->eos)) ||
        (st = check_id(name, "tokenizer.ggml.unknown_token_id", d->unk, nv, &t->unk)) ||
        (st = check_id(name, "tokenizer.ggml.padding_token_id", d->pad, nv, &t->pad)) ||
        (st = check_id(name, "tokenizer.ggml.eot_token_id", d->eot, nv, &t->eot)) ||
        (st = check_id(name, "tokenizer.ggml.eom_token_id", d->eom, nv, &t->eom)) ||
        (st = check_id(name, "tokenizer.ggml.fim_pad_token_id", d->fim_pad, nv, &fim_pad)) ||
        (st = check_id(name, "tokenizer.ggml.fim_rep_token_id", d->fim_rep, nv, &fim_rep)) ||
        (st = check_id(name, "tokenizer.ggml.fim_sep_token_id", d->fim_sep, nv, &fim_sep)))
        goto fail;
    if ((kind == LM_TOK_KIND_WPM || kind == LM_TOK_KIND_UGM) &&
        (st = encoder_options(t, d, name, kind)) != LM_OK)
        goto fail;
    bool spm = kind == LM_TOK_KIND_SPM;
    bool wpm = kind == LM_TOK_KIND_WPM, ugm = kind == LM_TOK_KIND_UGM;
    t->add_bos = d->add_bos < 0 ? (spm || wpm || bpe_info.add_bos) : d->add_bos != 0;
    t->add_eos = d->add_eos < 0 ? ugm : d->add_eos != 0;
    t->add_space_prefix = d->add_space_prefix < 0 ? spm : d->add_space_prefix != 0;
    t->clean_spaces = wpm || (kind == LM_TOK_KIND_BPE && bpe_info.clean_spaces);
    if (t->add_bos && t->bos < 0) {
        st = lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: add_bos_token is true but there is no bos token", name);
        goto fail;
    }
    if (t->add_eos && t->eos < 0) {
        st = lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: add_eos_token is true but there is no eos token", name);
        goto fail;
    }

    derive_special_attrs(t, fim_pad, fim_rep, fim_sep);
    if ((st = build_special(t)) != LM_OK) goto fail;

    // byte fallback: "<0xXX>", else the raw one-byte token (llama_vocab::byte_to_token)
    for (int b = 0; b < 256; b++) {
        char hex[7];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        int32_t id = lm_tokenizer_find(t, hex, 6);
        if (id < 0) {
            char c = (char)b;
            id = lm_tokenizer_find(t, &c, 1);
        }
        t->byte_tok[b] = id;
    }
    t->max_piece = t->max_token_len;
    if (kind == LM_TOK_KIND_UGM && (st = lm_ugm_init(t, d, name)) != LM_OK) goto fail;
    if (kind == LM_TOK_KIND_BPE) {
        if ((st = lm_bpe_init(t, d, name)) != LM_OK) goto fail;
        // a NORMAL piece is at most its text long, unless it holds characters outside the
        // byte mapping (llama.cpp spells those out as "[UNK_BYTE_0x..]")
        t->max_piece = 0;
        for (int32_t i = 0; i < nv; i++) {
            uint32_t o = t->off[i], n = t->off[i + 1] - o;
            size_t k = (t->attr[i] & (LM_TOK_ATTR_UNKNOWN | LM_TOK_ATTR_CONTROL | LM_TOK_ATTR_USER_DEFINED)) ? n
                       : (t->attr[i] & LM_TOK_ATTR_NORMAL) ? lm_bpe_decode_piece(t->blob + o, n, NULL, 0)
                                                            : 1;
            if (k > UINT32_MAX / 2) {
                st = lm_error_set(LM_ERR_FORMAT, "tokenizer: %s: token %d decodes to %zu bytes", name, i, k);
                goto fail;
            }
            if (k > t->max_piece) t->max_piece = (uint32_t)k;
        }
    }
    *out = t;
    return LM_OK;
fail:
    lm_tokenizer_free(t);
    return st;
}

// ============================================================================
// Queries and pieces
// ============================================================================

int32_t lm_tokenizer_n_vocab(const struct lm_tokenizer *t) { return t->n_vocab; }
int32_t lm_tokenizer_bos(const struct lm_tokenizer *t) { return t->bos; }
int32_t lm_tokenizer_eos(const struct lm_tokenizer *t) { return t->eos; }
bool lm_tokenizer_add_bos(const struct lm_tokenizer *t) { return t->add_bos; }
bool lm_tokenizer_add_eos(const struct lm_tokenizer *t) { return t->add_eos; }
enum lm_tokenizer_kind lm_tokenizer_kind(const struct lm_tokenizer *t) {
    switch (t->kind) {
    case LM_TOK_KIND_SPM: return LM_TOKENIZER_SPM;
    case LM_TOK_KIND_WPM: return LM_TOKENIZER_WPM;
    case LM_TOK_KIND_UGM: return LM_TOKENIZER_UGM;
    default: return LM_TOKENIZER_BPE;
    }
}

bool lm_tokenizer_is_eog(const struct lm_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab && (t->attr[id] & LM_TOK_FLAG_EOG);
}

const char *lm_tokenizer_text(const struct lm_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) return NULL;
    *len = t->off[id + 1] - t->off[id];
    return t->blob + t->off[id];
}

uint32_t lm_tokenizer_attr(const struct lm_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab ? t->attr[id] : 0;
}

size_t lm_tokenizer_max_piece(const struct lm_tokenizer *t) { return t->max_piece; }

// As llama_vocab::token_to_piece (SPM): CONTROL/UNKNOWN give "" unless render_special,
// then their raw text; USER_DEFINED its raw text; NORMAL its text with U+2581 -> ' ';
// BYTE its byte; UNUSED and UNDEFINED give "".
size_t lm_token_to_piece(const struct lm_tokenizer *t, int32_t id, char *buf, size_t cap,
                         bool render_special) {
    if (id < 0 || id >= t->n_vocab) return 0;
    uint32_t a = t->attr[id];
    const char *s = t->blob + t->off[id];
    size_t n = t->off[id + 1] - t->off[id];
    if (!render_special && (a & (LM_TOK_ATTR_UNKNOWN | LM_TOK_ATTR_CONTROL))) return 0;
    if (a & (LM_TOK_ATTR_UNKNOWN | LM_TOK_ATTR_CONTROL | LM_TOK_ATTR_USER_DEFINED)) {
        memcpy(buf, s, n < cap ? n : cap);
        return n;
    }
    if ((a & LM_TOK_ATTR_NORMAL) && t->kind == LM_TOK_KIND_BPE) return lm_bpe_decode_piece(s, n, buf, cap);
    if (a & LM_TOK_ATTR_NORMAL) {
        size_t o = 0;
        for (size_t i = 0; i < n;) {
            char c;
            if (i + 3 <= n && (uint8_t)s[i] == 0xE2 && (uint8_t)s[i + 1] == 0x96 && (uint8_t)s[i + 2] == 0x81) {
                c = ' ';
                i += 3;
            } else {
                c = s[i++];
            }
            if (o < cap) buf[o] = c;
            o++;
        }
        return o;
    }
    if (a & LM_TOK_ATTR_BYTE) {
        if (cap) buf[0] = (char)byte_token_value(s, n);
        return 1;
    }
    return 0;
}

// ============================================================================
// Detokenization
// ============================================================================

// llama_vocab::impl::detokenize's clean_spaces passes, kept literally (in place, reading
// the partly rewritten buffer as llama.cpp does): " ?" " !" " ." " ," lose the space; a
// lone " ' " loses both; " 's" " 'm" " 're" " 've" lose the space.
static size_t clean_spaces(char *text, size_t n) {
    size_t total = n;
    size_t total1 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total1; ++i) {
        const char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
        text[total++] = x;
    }
    size_t total2 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total2; ++i) {
        const char x = text[i];
        if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            total--;
            text[++i] = '\0';
        }
        text[total++] = x;
    }
    size_t total3 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total3; ++i) {
        const char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
            const char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm') {
                total--;
            } else if (i + 2 < total3) {
                const char x2 = text[i + 2];
                if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) total--;
            }
        }
        text[total++] = x;
    }
    return total;
}

enum lm_status lm_tokenizer_detokenize(const struct lm_tokenizer *t, const int32_t *ids, size_t n,
                                       bool remove_special, bool unparse_special, char **out,
                                       size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    bool remove_space = t->add_space_prefix;
    if (remove_special && t->add_bos && n > 0 && ids[0] == t->bos) {
        remove_space = false;
        ids++;
        n--;
    }
    if (remove_special && t->add_eos && n > 0 && ids[n - 1] == t->eos) n--;
    size_t cap = 16, len = 0;
    char *s = malloc(cap);
    if (!s) return lm_error_set(LM_ERR_NOMEM, "tokenizer: detokenize: out of memory");
    for (size_t i = 0; i < n; i++) {
        size_t need = (size_t)t->max_piece + 1;
        if (len + need > cap) {
            while (len + need > cap) cap *= 2;
            char *ns = realloc(s, cap);
            if (!ns) {
                free(s);
                return lm_error_set(LM_ERR_NOMEM, "tokenizer: detokenize: out of memory");
            }
            s = ns;
        }
        size_t k = lm_token_to_piece(t, ids[i], s + len, cap - len, unparse_special);
        if (remove_space && k > 0 && s[len] == ' ') {
            memmove(s + len, s + len + 1, k - 1);
            k--;
        }
        remove_space = false;
        len += k;
    }
    if (t->clean_spaces) len = clean_spaces(s, len);
    s[len] = 0;
    *out = s;
    *n_out = len;
    return LM_OK;
}

void lm_detok_init(struct lm_detok *d, bool render_special) {
    memset(d, 0, sizeof *d);
    d->render_special = render_special;
}

// Length a UTF-8 sequence starting with lead byte c should have; 0 if c cannot start one.
static int utf8_seq_len(uint8_t c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

enum lm_status lm_detok_push(const struct lm_tokenizer *t, struct lm_detok *d, int32_t id, char *out,
                             size_t cap, size_t *n_out) {
    *n_out = 0;
    if (cap < (size_t)t->max_piece + 4)
        return lm_error_set(LM_ERR_ARG, "lm_detok_push: cap %zu < %u (max piece + 4)", cap, t->max_piece + 4);
    memcpy(out, d->pend, d->n_pend);
    size_t n = d->n_pend;
    n += lm_token_to_piece(t, id, out + n, cap - n, d->render_special);
    d->n_pend = 0;
    // find the start of the last (possibly incomplete) sequence: back over <= 3 continuation bytes
    size_t i = n, back = 0;
    while (i > 0 && back < 3 && ((uint8_t)out[i - 1] & 0xC0) == 0x80) {
        i--;
        back++;
    }
    if (i > 0) {
        int need = utf8_seq_len((uint8_t)out[i - 1]);
        size_t have = n - (i - 1);
        if (need > 1 && (size_t)need > have) { // incomplete: hold it back
            d->n_pend = (uint8_t)have;
            memcpy(d->pend, out + i - 1, have);
            n = i - 1;
        }
    }
    *n_out = n;
    return LM_OK;
}

size_t lm_detok_flush(struct lm_detok *d, char *out, size_t cap) {
    size_t n = d->n_pend < cap ? d->n_pend : cap;
    memcpy(out, d->pend, n);
    d->n_pend = 0;
    return n;
}
