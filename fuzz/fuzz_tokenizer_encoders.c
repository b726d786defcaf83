// libFuzzer target for the encoder tokenizers: text into WordPiece and Unigram (each with
// special-token parsing and [CLS]/[SEP] / eos on or off per the first byte), and, when the
// first byte's top bit is set, the rest as a Unigram precompiled_charsmap used on a fixed text
// (the loader checks what it can; a walk that leaves the XCDA must be an error, not a read).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

// 0 [PAD] 1 [UNK] 2 [CLS] 3 [SEP] ... word-initial "▁x" and continuation texts (WordPiece), or
// <pad> </s> <unk> and scored pieces (Unigram); the same texts serve both.
static const char *const k_texts[] = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "\xe2\x96\x81" "the", "\xe2\x96\x81" "a", "b", "c", "ab", "\xe2\x96\x81",
    "\xe2\x96\x81\xe4\xb8\xad", "\xe6\x96\x87", "\xe2\x96\x81!", "!", "\xe2\x96\x81" "caf", "\xc3\xa9", "e",
    "<0x41>", "\xe2\x96\x81" "ab" "c"};
#define N_TEXTS (sizeof k_texts / sizeof k_texts[0])

static struct lm_tokenizer *make(const char *model, const uint8_t *cm, size_t cm_n, bool merge) {
    uint32_t lens[N_TEXTS];
    float scores[N_TEXTS];
    int32_t types[N_TEXTS];
    for (size_t i = 0; i < N_TEXTS; i++) {
        lens[i] = (uint32_t)strlen(k_texts[i]);
        scores[i] = -(float)(i % 7) - 0.5f;
        types[i] = i == 1 ? LM_TOK_TYPE_UNKNOWN : i < 4 ? LM_TOK_TYPE_CONTROL : i == 17 ? LM_TOK_TYPE_BYTE
                 : i == 18 ? LM_TOK_TYPE_USER_DEFINED : LM_TOK_TYPE_NORMAL;
    }
    struct lm_tokenizer_desc d = {.model = model, .n_vocab = (int32_t)N_TEXTS, .texts = k_texts, .lens = lens,
                                  .scores = scores, .types = types, .bos = 2, .eos = 3, .unk = 1, .pad = 0,
                                  .eot = -1, .eom = -1, .fim_pad = -1, .fim_rep = -1, .fim_sep = -1, .add_bos = -1,
                                  .add_eos = -1, .add_space_prefix = 1, .sep = 3, .lowercase = -1,
                                  .strip_accents = -1, .remove_extra_ws = merge, .charsmap = cm, .charsmap_len = cm_n};
    struct lm_tokenizer *t = NULL;
    return lm_tokenizer_init_desc(&t, &d, "fuzz") == LM_OK ? t : NULL;
}

static void run(const struct lm_tokenizer *t, const char *text, size_t n, bool add, bool special) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (lm_tokenize(t, text, n, add, special, &ids, &n_ids) != LM_OK) return;
    for (size_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= t->n_vocab) __builtin_trap();
    char *out = NULL;
    size_t n_out = 0;
    if (lm_tokenizer_detokenize(t, ids, n_ids, true, special, &out, &n_out) == LM_OK) free(out);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const uint8_t k_empty_cm[4] = {0, 0, 0, 0};
    if (size == 0) return 0;
    uint8_t mode = data[0];
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    if (mode & 0x80) { // the rest is a charsmap
        struct lm_tokenizer *t = make("t5", data + 1, size - 1, mode & 1);
        static const char k_fixed[] = "A the  ab\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87!\x00x\xff";
        if (t) run(t, k_fixed, sizeof k_fixed - 1, true, mode & 2);
        lm_tokenizer_free(t);
        return 0;
    }
    struct lm_tokenizer *wpm = make("bert", NULL, 0, false);
    struct lm_tokenizer *ugm = make("t5", k_empty_cm, sizeof k_empty_cm, mode & 8);
    if (!wpm || !ugm) __builtin_trap(); // both descriptions are valid
    run((mode & 1) ? ugm : wpm, text, n, mode & 2, mode & 4);
    lm_tokenizer_free(wpm);
    lm_tokenizer_free(ugm);
    return 0;
}
