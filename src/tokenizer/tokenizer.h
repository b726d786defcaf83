// Tokenizer: vocabulary from GGUF tokenizer.ggml.* metadata, SentencePiece (SPM), byte-level BPE,
// WordPiece and Unigram encoding that match llama.cpp token for token, pieces, streaming
// detokenizer, chat templates.
// The tokenizer owns copies of everything it uses: the GGUF may be closed after load.
#ifndef LM_TOKENIZER_TOKENIZER_H
#define LM_TOKENIZER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "lumen.h"

// The largest vocabulary accepted (tokens of a description or a GGUF file).
#define LM_TOK_MAX_VOCAB (1 << 26)
// The longest token text a WordPiece or Unigram vocabulary may hold (their encoders try every
// length up to it at each position; real ones stay under 100 bytes).
#define LM_TOK_MAX_ENCODER_TOKEN 1024

struct lm_gguf;

// ---------------------------------------------------------------- types

enum lm_tok_kind {
    LM_TOK_KIND_SPM = 1, // tokenizer.ggml.model "llama": SentencePiece BPE with byte fallback
    LM_TOK_KIND_BPE = 2, // "gpt2": byte-level BPE with regex pre-tokenizer (bpe.c)
    LM_TOK_KIND_WPM = 3, // "bert": WordPiece with the BERT normaliser (wpm.c)
    LM_TOK_KIND_UGM = 4, // "t5": SentencePiece Unigram with a precompiled charsmap (ugm.c)
};

// GGUF tokenizer.ggml.token_type values (llama.cpp's LLAMA_TOKEN_TYPE_*).
enum lm_tok_type {
    LM_TOK_TYPE_UNDEFINED = 0,
    LM_TOK_TYPE_NORMAL = 1,
    LM_TOK_TYPE_UNKNOWN = 2,
    LM_TOK_TYPE_CONTROL = 3,
    LM_TOK_TYPE_USER_DEFINED = 4,
    LM_TOK_TYPE_UNUSED = 5,
    LM_TOK_TYPE_BYTE = 6,
};

// Per-token attribute bits (llama.cpp's LLAMA_TOKEN_ATTR_*; same values). Derived from the
// token type, then adjusted by text the way llama.cpp does (e.g. "<end_of_turn>" and "</s>"
// get CONTROL, control tokens containing "unused" get UNUSED).
enum lm_tok_attr {
    LM_TOK_ATTR_UNKNOWN = 1 << 0,
    LM_TOK_ATTR_UNUSED = 1 << 1,
    LM_TOK_ATTR_NORMAL = 1 << 2,
    LM_TOK_ATTR_CONTROL = 1 << 3,
    LM_TOK_ATTR_USER_DEFINED = 1 << 4,
    LM_TOK_ATTR_BYTE = 1 << 5,
    LM_TOK_FLAG_EOG = 1 << 12, // lumen-only: token ends generation
};

// Byte trie over special-token texts (first-child / next-sibling lists).
struct lm_tok_trie_node {
    uint32_t child, sibling; // node indices, 0 = none
    int32_t special;         // index into lm_tokenizer.special whose text ends here, or -1
    uint8_t byte;
};

struct lm_tokenizer {
    enum lm_tok_kind kind;
    int32_t n_vocab;
    // token texts: text of id i is blob[off[i] .. off[i+1]) (not NUL-terminated)
    char *blob;
    uint32_t *off;      // n_vocab + 1
    float *scores;      // n_vocab (0 if the file has none)
    uint16_t *attr;     // n_vocab, enum lm_tok_attr bits
    uint32_t max_token_len;
    // text -> id: open addressing, linear probe, UINT32_MAX = empty; ht_mask + 1 slots
    uint32_t *ht;
    uint32_t ht_mask;
    int32_t byte_tok[256]; // SPM byte fallback "<0xXX>" (or the raw byte's token); -1 if none
    // special ids (-1 = none)
    int32_t bos, eos, unk, pad, eot, eom;
    bool add_bos, add_eos, add_space_prefix;
    // tokens split out before SPM (CONTROL, USER_DEFINED, UNKNOWN), longest text first
    // (ties: lower id first), and a byte trie over their texts -> index into this list
    int32_t *special;
    int32_t n_special;
    struct lm_tok_trie_node *trie;
    uint32_t n_trie;
    uint32_t trie_root[256]; // node index of each first byte's child, 0 = none
    uint32_t max_piece;      // longest lm_token_to_piece() output (render_special on)
    // byte-level BPE only (kind == LM_TOK_KIND_BPE)
    struct lm_bpe *bpe;      // pre-tokenizer regexes + merge ranks, owned (bpe.c)
    bool clean_spaces;       // detokenize drops spaces before ?!., and in contractions (llama.cpp)
    // WordPiece and Unigram (kind WPM, UGM)
    int32_t sep;                            // [SEP]: WordPiece appends it after the text (-1 = none)
    bool wpm_lowercase, wpm_strip_accents;  // BERT normaliser options
    bool remove_extra_ws;                   // Unigram: runs of spaces become one
    struct lm_ugm *ugm;                     // Unigram: charsmap and matcher, owned (ugm.c)
};

// A tokenizer described by plain arrays (what lm_tokenizer_load reads from GGUF); also the
// way unit tests build synthetic vocabularies. Every pointer is only read during the call.
struct lm_tokenizer_desc {
    const char *model;        // "llama" (SPM) or "gpt2" (byte-level BPE)
    int32_t n_vocab;
    const char *const *texts; // n_vocab texts
    const uint32_t *lens;     // their byte lengths
    const float *scores;      // n_vocab or NULL
    const int32_t *types;     // n_vocab enum lm_tok_type values or NULL (all NORMAL)
    int64_t bos, eos, unk, pad, eot, eom; // -1 = absent (the SPM defaults 1, 2, 0 apply to bos, eos, unk)
    int64_t fim_pad, fim_rep, fim_sep;    // -1 = absent (these end generation)
    int add_bos, add_eos, add_space_prefix; // -1 = absent (SPM defaults: 1, 0, 1; BPE: per pre, 0, 0)
    // BPE only: pre-tokenizer name (tokenizer.ggml.pre; NULL or "" = "default") and the
    // merges "left right", rank = index. merges NULL = key absent (an error for BPE).
    const char *pre;
    const char *const *merges;
    const uint32_t *merge_lens;
    int64_t n_merges;
    // "bert" and "t5" only (ignored otherwise; a zero-initialised description is not enough
    // for them: set each to -1 when absent). sep: tokenizer.ggml.seperator_token_id (sic);
    // lowercase / strip_accents: tokenizer.ggml.normalizer.*; remove_extra_ws:
    // tokenizer.ggml.remove_extra_whitespaces.
    int64_t sep;
    int lowercase, strip_accents, remove_extra_ws;
    // "t5": tokenizer.ggml.precompiled_charsmap (NULL = absent, then no normalisation)
    const uint8_t *charsmap;
    size_t charsmap_len;
};

// ---------------------------------------------------------------- load

// Reads tokenizer.ggml.{model,tokens,scores,token_type,*_token_id,add_*} (+ pre, merges for
// "gpt2") and validates: array types, scores/types at least n_tokens long, type values 0..6,
// special ids in range, byte tokens spelled <0xXX>, no duplicate texts; BPE: a known pre-
// tokenizer, merges present as strings "left right" whose parts are both tokens; WordPiece /
// Unigram: [UNK] (and [CLS], [SEP]) present, no token over LM_TOK_MAX_ENCODER_TOKEN bytes, a
// well-formed charsmap (ugm.c). On error *out is NULL and lm_error_msg() names the key,
// expected vs actual.
enum lm_status lm_tokenizer_load(struct lm_tokenizer **out, const struct lm_gguf *g);
enum lm_status lm_tokenizer_init_desc(struct lm_tokenizer **out, const struct lm_tokenizer_desc *d,
                                      const char *name /* for messages */);
void lm_tokenizer_free(struct lm_tokenizer *t);

// ---------------------------------------------------------------- lookups

// The hash of the text -> id table (FNV-1a, high bits folded in).
static inline uint32_t lm_tok_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 16777619u;
    }
    return h ^ (h >> 15);
}

// Token id of an exact text, or -1. Inline: the encoders (spm.c, bpe.c) and the vocabulary
// (tokenizer.c) use it without depending on one another.
static inline int32_t lm_tokenizer_find(const struct lm_tokenizer *t, const char *text, size_t len) {
    uint32_t i = lm_tok_hash(text, len) & t->ht_mask;
    for (;;) {
        uint32_t id = t->ht[i];
        if (id == UINT32_MAX) return -1;
        uint32_t o = t->off[id], n = t->off[id + 1] - o;
        if (n == len && memcmp(t->blob + o, text, len) == 0) return (int32_t)id;
        i = (i + 1) & t->ht_mask;
    }
}
// Raw vocabulary text of id (no unescaping); *len its length. NULL if out of range.
const char *lm_tokenizer_text(const struct lm_tokenizer *t, int32_t id, size_t *len);
uint32_t lm_tokenizer_attr(const struct lm_tokenizer *t, int32_t id); // 0 if out of range
// Upper bound on lm_token_to_piece() byte counts for this vocabulary.

// Whole-sequence detokenization as llama_detokenize(): remove_special drops a leading BOS
// and trailing EOS (when the vocab adds them), unparse_special renders control tokens, and
// with add_space_prefix the first piece loses one leading space. *out is malloc'd and
// NUL-terminated; *n_out excludes the NUL.
enum lm_status lm_tokenizer_detokenize(const struct lm_tokenizer *t, const int32_t *ids, size_t n,
                                       bool remove_special, bool unparse_special, char **out,
                                       size_t *n_out);

// streaming detokenizer and chat templates: public (lumen.h)

// ---------------------------------------------------------------- internal (tokenizer/*.c)

struct lm_tok_ids {
    int32_t *v;
    size_t n, cap;
};
static inline bool lm_tok_ids_push(struct lm_tok_ids *a, int32_t x) {
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

// SentencePiece: encodes one raw fragment (no special tokens in it), escaping spaces and
// with a leading U+2581 when space_prefix, and appends its ids to out. *scratch is
// allocated on first use and reused; free with lm_spm_scratch_free (spm.c).
struct lm_spm_scratch;
enum lm_status lm_spm_fragment(const struct lm_tokenizer *t, struct lm_spm_scratch **scratch, const char *raw,
                               size_t raw_len, bool space_prefix, struct lm_tok_ids *out);
void lm_spm_scratch_free(struct lm_spm_scratch *s);

// Pre-tokenizer properties llama.cpp derives from tokenizer.ggml.pre.
struct lm_bpe_info {
    bool ignore_merges; // a pre-token that is a whole vocabulary entry is emitted as is
    bool clean_spaces;
    bool add_bos;       // default of add_bos_token
};
enum lm_status lm_bpe_pre_info(const char *pre, const char *name, struct lm_bpe_info *out);
// Compiles the pre-tokenizer and the merge table into t->bpe (t's texts and hash are built).
enum lm_status lm_bpe_init(struct lm_tokenizer *t, const struct lm_tokenizer_desc *d, const char *name);
void lm_bpe_free(struct lm_bpe *b);
// Encodes one raw fragment (no special tokens in it) and appends its ids to out. *scratch
// is allocated on first use and reused; free with lm_bpe_scratch_free.
struct lm_bpe_scratch;
enum lm_status lm_bpe_fragment(const struct lm_tokenizer *t, struct lm_bpe_scratch **scratch, const char *text,
                               size_t len, struct lm_tok_ids *out);
void lm_bpe_scratch_free(struct lm_bpe_scratch *s);
// Bytes of a NORMAL BPE token text (GPT-2 byte-to-unicode mapping undone, as llama.cpp's
// llama_decode_text); writes at most cap bytes, returns the full length.
size_t lm_bpe_decode_piece(const char *s, size_t n, char *buf, size_t cap);

// WordPiece: normalises and encodes one raw fragment, appending its ids (wpm.c).
struct lm_wpm_scratch;
enum lm_status lm_wpm_fragment(const struct lm_tokenizer *t, struct lm_wpm_scratch **scratch, const char *text,
                               size_t len, struct lm_tok_ids *out);
void lm_wpm_scratch_free(struct lm_wpm_scratch *s);

// Unigram: checks the charsmap and builds t->ugm (t's texts, scores, attributes are built);
// encodes one raw fragment, appending its ids (ugm.c).
enum lm_status lm_ugm_init(struct lm_tokenizer *t, const struct lm_tokenizer_desc *d, const char *name);
void lm_ugm_free(struct lm_ugm *u);
struct lm_ugm_scratch;
enum lm_status lm_ugm_fragment(const struct lm_tokenizer *t, struct lm_ugm_scratch **scratch, const char *text,
                               size_t len, struct lm_tok_ids *out);
void lm_ugm_scratch_free(struct lm_ugm_scratch *s);

#endif
