// LM_TEST_LABELS: unit
// The encoder models' tokenizers: WordPiece on llama.cpp's bert-bge test vocabulary
// (tests/data/vocab/, committed) against llama.cpp golden ids (tools/gen_golden_encoder_tokens.py),
// its normaliser options; Unigram on a synthetic vocabulary with a hand-built charsmap
// (Viterbi, unknown runs, space prefix and merging); malformed vocabularies and charsmaps
// refused at load with one clear message each.
#include "tok_golden.h"

static int32_t id_of(const struct lm_tokenizer *t, const char *s) { return lm_tokenizer_find(t, s, strlen(s)); }

static bool ids_eq(const struct lm_tokenizer *t, const char *text, bool add_special, const int32_t *want, size_t n) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    bool ok = lm_tokenize(t, text, strlen(text), add_special, false, &ids, &n_ids) == LM_OK && n_ids == n &&
              memcmp(ids, want, n * sizeof *ids) == 0;
    if (!ok) tg_show_ids(text, ids, n_ids);
    free(ids);
    return ok;
}

// ============================================================================
// WordPiece: bert-bge
// ============================================================================

static void test_bert_bge(void) {
    struct lm_tokenizer *t = NULL;
    CHECKF(lm_tokenizer_open(&t, lm_test_path("tests/data/vocab/ggml-vocab-bert-bge.gguf")) == LM_OK, "%s",
           lm_error_msg());
    if (!t) return;
    CHECK(t->kind == LM_TOK_KIND_WPM && lm_tokenizer_kind(t) == LM_TOKENIZER_WPM);
    CHECK(t->bos == 101 && t->sep == 102 && t->unk == 100 && t->eos == -1 && t->add_bos && !t->add_eos);
    CHECK(t->wpm_lowercase && t->wpm_strip_accents && t->clean_spaces && !t->add_space_prefix);
    tg_check_golden_ex(t, "tests/golden/tokens_bert-bge.tsv", "bert-bge", false, 100);
    // [CLS] hello , world ! [SEP]: lower-cased, punctuation split; a word with no match is [UNK]
    int32_t hello = id_of(t, "\xe2\x96\x81hello"), world = id_of(t, "\xe2\x96\x81world");
    int32_t comma = id_of(t, "\xe2\x96\x81,"), bang = id_of(t, "\xe2\x96\x81!");
    CHECK(hello > 0 && world > 0 && comma > 0 && bang > 0);
    CHECK(ids_eq(t, "HeLLo,   WORLD!", true, (int32_t[]){101, hello, comma, world, bang, 102}, 6));
    CHECK(ids_eq(t, "hello \xf0\x9f\xa6\x99", false, (int32_t[]){hello, 100}, 2));
    char *text = NULL;
    size_t n = 0;
    CHECK(lm_tokenizer_detokenize(t, (int32_t[]){101, hello, comma, world, bang, 102}, 6, true, false, &text, &n) ==
          LM_OK);
    CHECKF(text && strcmp(text, " hello, world!") == 0, "detokenize: '%s'", text ? text : "");
    free(text);
    tg_bench(t, "bert-bge");
    lm_tokenizer_close(t);
}

// A WordPiece vocabulary of its own: options and the continuation rule.
static void test_wpm_synthetic(void) {
    // 0 [UNK] 1 [CLS] 2 [SEP] 3 ▁un 4 aff 5 able 6 ▁é 7 ▁e 8 ▁Ab
    const char *texts[] = {"[UNK]", "[CLS]", "[SEP]", "\xe2\x96\x81un", "aff", "able", "\xe2\x96\x81\xc3\xa9",
                           "\xe2\x96\x81" "e", "\xe2\x96\x81" "Ab"};
    uint32_t lens[9];
    int32_t types[9] = {2, 3, 3, 1, 1, 1, 1, 1, 1};
    for (int i = 0; i < 9; i++) lens[i] = (uint32_t)strlen(texts[i]);
    struct lm_tokenizer_desc d = {.model = "bert", .n_vocab = 9, .texts = texts, .lens = lens, .types = types,
                                  .bos = 1, .eos = -1, .unk = 0, .pad = -1, .eot = -1, .eom = -1, .fim_pad = -1,
                                  .fim_rep = -1, .fim_sep = -1, .add_bos = -1, .add_eos = -1,
                                  .add_space_prefix = -1, .sep = 2, .lowercase = -1, .strip_accents = -1,
                                  .remove_extra_ws = -1};
    struct lm_tokenizer *t = NULL;
    CHECKF(lm_tokenizer_init_desc(&t, &d, "synthetic") == LM_OK, "%s", lm_error_msg());
    if (!t) return;
    CHECK(ids_eq(t, "unaffable", true, (int32_t[]){1, 3, 4, 5, 2}, 5));
    CHECK(ids_eq(t, "UNAFFABLE unaffablex", false, (int32_t[]){3, 4, 5, 0}, 4)); // no "x": the whole word is [UNK]
    CHECK(ids_eq(t, "\xc3\x89", false, (int32_t[]){7}, 1));                      // É -> e (NFD base, lower)
    CHECK(ids_eq(t, "Ab", false, (int32_t[]){0}, 1));                            // lower-cased: "ab" not in vocab
    lm_tokenizer_free(t);
    d.lowercase = 0; // neither lower-casing nor (by default, then) accent stripping
    CHECK(lm_tokenizer_init_desc(&t, &d, "synthetic") == LM_OK);
    if (!t) return;
    CHECK(ids_eq(t, "Ab \xc3\xa9", false, (int32_t[]){8, 6}, 2));
    lm_tokenizer_free(t);
    d.strip_accents = 1;
    CHECK(lm_tokenizer_init_desc(&t, &d, "synthetic") == LM_OK);
    if (!t) return;
    CHECK(ids_eq(t, "Ab \xc3\xa9", false, (int32_t[]){8, 7}, 2));
    lm_tokenizer_free(t);
}

// ============================================================================
// Unigram on a synthetic vocabulary and charsmap
// ============================================================================

// A charsmap whose XCDA maps "A" to "a" and nothing else: root BASE 0x100 (every byte's
// node 0x100^c inside the array); node 0x141 checks 'A', is a leaf with BASE 0x140, so node 1
// holds the replacement offset 0; replacements "a\0". broken: node 0x141's BASE points far
// outside the array.
#define CM_BYTES (4 + 0x200 * 4 + 2)
static size_t make_charsmap(uint8_t *buf, bool broken) {
    uint32_t x[0x200] = {0};
    x[0] = 0x100u << 10;
    x[0x141] = 0x41u | (1u << 8) | ((broken ? 0x1FFFFFu : 0x140u) << 10);
    x[1] = 0;
    uint32_t xb = sizeof x;
    memcpy(buf, &xb, 4);
    memcpy(buf + 4, x, sizeof x);
    memcpy(buf + 4 + sizeof x, "a\0", 2);
    return 4 + sizeof x + 2;
}

static void ugm_desc(struct lm_tokenizer_desc *d, const char **texts, uint32_t *lens, int n) {
    for (int i = 0; i < n; i++) lens[i] = (uint32_t)strlen(texts[i]);
    *d = (struct lm_tokenizer_desc){.model = "t5", .n_vocab = n, .texts = texts, .lens = lens, .bos = -1, .eos = -1,
                                    .unk = -1, .pad = -1, .eot = -1, .eom = -1, .fim_pad = -1, .fim_rep = -1,
                                    .fim_sep = -1, .add_bos = -1, .add_eos = -1, .add_space_prefix = -1, .sep = -1,
                                    .lowercase = -1, .strip_accents = -1, .remove_extra_ws = -1};
}

static void test_ugm_synthetic(void) {
    // 0 <pad> 1 </s> 2 <unk> 3 ▁ab 4 ▁a 5 b 6 ▁ 7 c 8 ▁abc
    const char *texts[] = {"<pad>", "</s>", "<unk>", "\xe2\x96\x81" "ab", "\xe2\x96\x81" "a", "b", "\xe2\x96\x81",
                           "c", "\xe2\x96\x81" "abc"};
    uint32_t lens[9];
    float scores[9] = {0, 0, 0, -2.0f, -1.0f, -1.5f, -3.0f, -4.0f, -9.0f};
    int32_t types[9] = {3, 3, 2, 1, 1, 1, 1, 1, 1};
    uint8_t cm[CM_BYTES];
    struct lm_tokenizer_desc d;
    ugm_desc(&d, texts, lens, 9);
    d.scores = scores;
    d.types = types;
    d.add_space_prefix = 1;
    d.charsmap = cm;
    d.charsmap_len = make_charsmap(cm, false);
    struct lm_tokenizer *t = NULL;
    CHECKF(lm_tokenizer_init_desc(&t, &d, "synthetic") == LM_OK, "%s", lm_error_msg());
    if (!t) return;
    CHECK(t->eos == 1 && t->unk == 2 && t->bos == -1 && !t->add_bos && t->add_eos);
    // "ab": ▁ab (-2) beats ▁a + b (-2.5); "Ab" is normalised to "ab" by the charsmap
    CHECK(ids_eq(t, "ab", true, (int32_t[]){3, 1}, 2));
    CHECK(ids_eq(t, "Ab", false, (int32_t[]){3}, 1));
    // ▁abc (-9) loses to ▁ab + c (-6); unknown characters in a row are one <unk>
    CHECK(ids_eq(t, "abc", false, (int32_t[]){3, 7}, 2));
    CHECK(ids_eq(t, "ab\xe4\xb8\x80\xe4\xb8\x80" "b", false, (int32_t[]){3, 2, 5}, 3));
    // spaces kept as ▁ (no merging): "a  b" -> ▁a ▁ ▁ b... scored: ▁a(-1) ▁(-3) ▁(-3)? ▁b absent
    CHECK(ids_eq(t, "a  b", false, (int32_t[]){4, 6, 6, 5}, 4));
    char *text = NULL;
    size_t n = 0;
    CHECK(lm_tokenizer_detokenize(t, (int32_t[]){3, 7, 1}, 3, true, false, &text, &n) == LM_OK);
    CHECKF(text && strcmp(text, "abc") == 0, "detokenize: '%s'", text ? text : "");
    free(text);
    lm_tokenizer_free(t);
    d.remove_extra_ws = 1; // runs of spaces dropped, one ▁ before every word
    CHECK(lm_tokenizer_init_desc(&t, &d, "synthetic") == LM_OK);
    if (!t) return;
    CHECK(ids_eq(t, "  a   ab ", false, (int32_t[]){4, 3}, 2));
    lm_tokenizer_free(t);
    // an XCDA whose walk leaves the array: one error from lm_tokenize, not a crash
    make_charsmap(cm, true);
    CHECK(lm_tokenizer_init_desc(&t, &d, "synthetic") == LM_OK);
    if (!t) return;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    CHECK(lm_tokenize(t, "xA", 2, false, false, &ids, &n_ids) == LM_ERR_FORMAT && !ids);
    CHECKF(strstr(lm_error_msg(), "precompiled_charsmap"), "%s", lm_error_msg());
    lm_tokenizer_free(t);
}

// ============================================================================
// Malformed vocabularies
// ============================================================================

static void expect_refused(const struct lm_tokenizer_desc *d, const char *want) {
    struct lm_tokenizer *t = NULL;
    enum lm_status st = lm_tokenizer_init_desc(&t, d, "bad.gguf");
    CHECKF(st != LM_OK && !t && strstr(lm_error_msg(), want) && strstr(lm_error_msg(), "bad.gguf"),
           "want '%s', got %s: %s", want, lm_status_name(st), lm_error_msg());
    lm_tokenizer_free(t);
}

static void test_malformed(void) {
    const char *texts[] = {"<pad>", "</s>", "<unk>", "\xe2\x96\x81" "a", "b"};
    uint32_t lens[5];
    struct lm_tokenizer_desc d;
    uint8_t cm[CM_BYTES];
    size_t cm_n = make_charsmap(cm, false);
    // Unigram
    ugm_desc(&d, texts, lens, 5);
    expect_refused(&d, "Unigram vocabulary without tokenizer.ggml.precompiled_charsmap");
    d.charsmap = cm;
    d.charsmap_len = 3;
    expect_refused(&d, "precompiled_charsmap is 3 bytes");
    d.charsmap_len = cm_n - 3; // the XCDA size now runs past the end
    expect_refused(&d, "XCDA of 2048 bytes (expected a multiple of 4, at most 2047)");
    uint8_t odd[8] = {2, 0, 0, 0, 1, 2, 3, 4};
    d.charsmap = odd;
    d.charsmap_len = 8;
    expect_refused(&d, "XCDA of 2 bytes");
    d.charsmap = cm;
    d.charsmap_len = cm_n - 1; // "a" without its NUL
    expect_refused(&d, "not NUL-terminated");
    d.charsmap_len = cm_n;
    d.unk = 9;
    expect_refused(&d, "tokenizer.ggml.unknown_token_id = 9 out of range (vocab has 5 tokens)");
    d.unk = -1;
    d.n_vocab = 2; // the default <unk> (2) out of range
    expect_refused(&d, "Unigram vocabulary has no unknown token");
    d.n_vocab = 0;
    expect_refused(&d, "tokenizer.ggml.tokens has 0 entries");
    // WordPiece
    ugm_desc(&d, texts, lens, 5);
    d.model = "bert";
    expect_refused(&d, "WordPiece vocabulary has no unknown token");
    d.unk = 4;
    expect_refused(&d, "WordPiece vocabulary has no [CLS] token");
    d.bos = 0;
    expect_refused(&d, "WordPiece vocabulary has no [SEP] token");
    d.sep = 77;
    expect_refused(&d, "tokenizer.ggml.seperator_token_id = 77 out of range");
    d.sep = 1;
    d.bos = 5;
    expect_refused(&d, "tokenizer.ggml.bos_token_id = 5 out of range");
    d.bos = 0;
    struct lm_tokenizer *t = NULL;
    CHECKF(lm_tokenizer_init_desc(&t, &d, "ok") == LM_OK, "%s", lm_error_msg());
    lm_tokenizer_free(t);
    // an over-long token
    char *big = malloc(LM_TOK_MAX_ENCODER_TOKEN + 2);
    memset(big, 'x', LM_TOK_MAX_ENCODER_TOKEN + 1);
    big[LM_TOK_MAX_ENCODER_TOKEN + 1] = 0;
    const char *t2[] = {"<pad>", "</s>", "<unk>", big};
    uint32_t l2[4];
    ugm_desc(&d, t2, l2, 4);
    d.charsmap = cm;
    d.charsmap_len = cm_n;
    expect_refused(&d, "token 3 is 1025 bytes (limit 1024 for a Unigram vocabulary)");
    d.model = "bert";
    d.unk = 2, d.bos = 0, d.sep = 1;
    expect_refused(&d, "token 3 is 1025 bytes (limit 1024 for a WordPiece vocabulary)");
    free(big);
}

int main(void) {
    test_bert_bge();
    test_wpm_synthetic();
    test_ugm_synthetic();
    test_malformed();
    return lm_test_finish();
}
