// LM_TEST_LABELS: unit
// SentencePiece tokenizer on tiny synthetic vocabularies: merge order by score, ties,
// byte fallback, space handling, special/user-defined partitioning, pieces, and clean
// errors for malformed tokenizer metadata (through an in-memory GGUF).
#include <stdint.h>

#include "format/gguf.h"
#include "lm_test.h"
#include "tokenizer/tokenizer.h"

// ============================================================================
// Synthetic vocabulary
// ============================================================================

#define U2581 "\xe2\x96\x81"

struct vocab {
    const char *text[400];
    uint32_t len[400];
    float score[400];
    int32_t type[400];
    int32_t n;
};

static int32_t add(struct vocab *v, const char *s, float score, int32_t type) {
    v->text[v->n] = s;
    v->len[v->n] = (uint32_t)strlen(s);
    v->score[v->n] = score;
    v->type[v->n] = type;
    return v->n++;
}

static char byte_names[256][7];

// ids: 0 <unk>, 1 <s>, 2 </s>, 3 <ud> (user-defined), 4..259 <0x00>..<0xFF>, then normal pieces
static void base_vocab(struct vocab *v) {
    memset(v, 0, sizeof *v);
    add(v, "<unk>", 0, LM_TOK_TYPE_UNKNOWN);
    add(v, "<s>", 0, LM_TOK_TYPE_CONTROL);
    add(v, "</s>", 0, LM_TOK_TYPE_CONTROL);
    add(v, "<ud>", 0, LM_TOK_TYPE_USER_DEFINED);
    for (int b = 0; b < 256; b++) {
        snprintf(byte_names[b], sizeof byte_names[b], "<0x%02X>", b);
        add(v, byte_names[b], 0, LM_TOK_TYPE_BYTE);
    }
}

enum { ID_A = 260, ID_B, ID_C, ID_SP, ID_AB, ID_BC, ID_SPA, ID_SPB, ID_SPAB, ID_CC };

static void piece_vocab(struct vocab *v, float s_ab, float s_bc) {
    base_vocab(v);
    CHECK(add(v, "a", -10, LM_TOK_TYPE_NORMAL) == ID_A);
    add(v, "b", -10, LM_TOK_TYPE_NORMAL);
    add(v, "c", -10, LM_TOK_TYPE_NORMAL);
    add(v, U2581, -10, LM_TOK_TYPE_NORMAL);
    add(v, "ab", s_ab, LM_TOK_TYPE_NORMAL);
    add(v, "bc", s_bc, LM_TOK_TYPE_NORMAL);
    add(v, U2581 "a", -3, LM_TOK_TYPE_NORMAL);
    add(v, U2581 "b", -3, LM_TOK_TYPE_NORMAL);
    add(v, U2581 "ab", -2, LM_TOK_TYPE_NORMAL);
    add(v, "cc", -4, LM_TOK_TYPE_NORMAL);
}

static struct lm_tokenizer_desc desc_of(const struct vocab *v) {
    return (struct lm_tokenizer_desc){.model = "llama", .n_vocab = v->n, .texts = v->text, .lens = v->len,
                                      .scores = v->score, .types = v->type,
                                      .bos = 1, .eos = 2, .unk = 0, .pad = -1, .eot = -1, .eom = -1,
                                      .fim_pad = -1, .fim_rep = -1, .fim_sep = -1,
                                      .add_bos = 1, .add_eos = 0, .add_space_prefix = 0};
}

// Tokenizes s and compares with the -1-terminated expected list.
static bool tok_is(const struct lm_tokenizer *t, const char *s, bool add_special, bool parse_special,
                   const int32_t *want) {
    int32_t *ids;
    size_t n, nw = 0;
    if (lm_tokenize(t, s, strlen(s), add_special, parse_special, &ids, &n) != LM_OK) return false;
    while (want[nw] >= 0) nw++;
    bool ok = n == nw && memcmp(ids, want, n * sizeof *ids) == 0;
    if (!ok) {
        fprintf(stderr, "  \"%s\": got", s);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    free(ids);
    return ok;
}

#define TOK(t, s, as, ps, ...) tok_is(t, s, as, ps, (const int32_t[]){__VA_ARGS__, -1})

static void test_merges(void) {
    struct vocab v;
    struct lm_tokenizer *t;
    struct lm_tokenizer_desc d;

    piece_vocab(&v, -1.0f, -0.5f); // "bc" scores higher: merged first
    d = desc_of(&v);
    CHECKF(lm_tokenizer_init_desc(&t, &d, "synthetic") == LM_OK, "%s", lm_error_msg());
    CHECK(TOK(t, "abc", false, false, ID_A, ID_BC));
    CHECK(TOK(t, "abc", true, false, 1, ID_A, ID_BC));
    CHECK(TOK(t, "ccc", false, false, ID_CC, ID_C)); // equal-score bigrams: leftmost first
    CHECK(TOK(t, " ab", false, false, ID_SPAB));      // "▁a"(-3) then "▁ab"(-2)
    CHECK(TOK(t, "a b", false, false, ID_A, ID_SPB));
    CHECK(TOK(t, "  ", false, false, ID_SP, ID_SP));
    lm_tokenizer_free(t);

    piece_vocab(&v, -0.5f, -1.0f); // now "ab" wins
    d = desc_of(&v);
    CHECK(lm_tokenizer_init_desc(&t, &d, "synthetic") == LM_OK);
    CHECK(TOK(t, "abc", false, false, ID_AB, ID_C));
    lm_tokenizer_free(t);

    piece_vocab(&v, -1.0f, -1.0f); // tie on score: leftmost pair first
    d = desc_of(&v);
    CHECK(lm_tokenizer_init_desc(&t, &d, "synthetic") == LM_OK);
    CHECK(TOK(t, "abc", false, false, ID_AB, ID_C));
    // add_space_prefix: a leading ▁ on the first fragment and after each special token
    lm_tokenizer_free(t);
    d.add_space_prefix = 1;
    d.add_eos = 1;
    CHECK(lm_tokenizer_init_desc(&t, &d, "synthetic") == LM_OK);
    CHECK(TOK(t, "ab", true, false, 1, ID_SPAB, 2));
    CHECK(TOK(t, "a<s>b", false, true, ID_SPA, 1, ID_SPB));
    CHECK(TOK(t, "", true, false, 1, 2));
    lm_tokenizer_free(t);
}

static void test_fallback_and_specials(void) {
    struct vocab v;
    piece_vocab(&v, -1.0f, -0.5f);
    struct lm_tokenizer_desc d = desc_of(&v);
    struct lm_tokenizer *t;
    CHECK(lm_tokenizer_init_desc(&t, &d, "synthetic") == LM_OK);
    // characters missing from the vocabulary become their bytes
    CHECK(TOK(t, "\xc3\xa9", false, false, 4 + 0xC3, 4 + 0xA9));
    CHECK(TOK(t, "a\xf0\x9f\x98\x80", false, false, ID_A, 4 + 0xF0, 4 + 0x9F, 4 + 0x98, 4 + 0x80));
    CHECK(TOK(t, "x", false, false, 4 + 'x'));
    // control tokens only with parse_special; user-defined ones always; unknown treated as control
    CHECK(TOK(t, "<s>", false, true, 1));
    CHECK(TOK(t, "<s>", false, false, 4 + '<', 4 + 's', 4 + '>'));
    CHECK(TOK(t, "a<ud>b", false, false, ID_A, 3, ID_B));
    CHECK(TOK(t, "<unk>", false, true, 0));
    CHECK(TOK(t, "</s><s>", false, true, 2, 1)); // longest special first
    CHECK(TOK(t, "<s><s>ab", true, true, 1, 1, 1, ID_AB));

    // pieces
    char buf[16];
    CHECK(lm_token_to_piece(t, ID_SPAB, buf, sizeof buf, false) == 3 && memcmp(buf, " ab", 3) == 0);
    CHECK(lm_token_to_piece(t, 4 + 0xC3, buf, sizeof buf, false) == 1 && (uint8_t)buf[0] == 0xC3);
    CHECK(lm_token_to_piece(t, 1, buf, sizeof buf, false) == 0);
    CHECK(lm_token_to_piece(t, 1, buf, sizeof buf, true) == 3 && memcmp(buf, "<s>", 3) == 0);
    CHECK(lm_token_to_piece(t, 3, buf, sizeof buf, false) == 4 && memcmp(buf, "<ud>", 4) == 0);
    CHECK(lm_token_to_piece(t, -1, buf, sizeof buf, true) == 0);
    CHECK(lm_tokenizer_find(t, "bc", 2) == ID_BC && lm_tokenizer_find(t, "zz", 2) == -1);
    CHECK(lm_tokenizer_is_eog(t, 2) && !lm_tokenizer_is_eog(t, 1)); // eos; "</s>" by text too

    // whole-sequence detokenize and the streaming detokenizer on a split emoji
    int32_t ids[] = {1, ID_A, 4 + 0xF0, 4 + 0x9F, 4 + 0x98, 4 + 0x80, ID_SPB};
    char *s;
    size_t n;
    CHECK(lm_tokenizer_detokenize(t, ids, 7, false, false, &s, &n) == LM_OK);
    CHECK(n == 7 && memcmp(s, "a\xf0\x9f\x98\x80 b", 7) == 0);
    free(s);
    CHECK(lm_tokenizer_detokenize(t, ids, 7, false, true, &s, &n) == LM_OK);
    CHECK(n == 10 && memcmp(s, "<s>a", 4) == 0);
    free(s);
    struct lm_detok dt;
    lm_detok_init(&dt, false);
    size_t sizes[7], k;
    char out[64];
    for (int i = 0; i < 7; i++) {
        CHECK(lm_detok_push(t, &dt, ids[i], out, sizeof out, &k) == LM_OK);
        sizes[i] = k;
    }
    CHECK(sizes[0] == 0 && sizes[1] == 1 && sizes[2] == 0 && sizes[3] == 0 && sizes[4] == 0 && sizes[5] == 4 &&
          sizes[6] == 2);
    CHECK(lm_detok_flush(&dt, out, sizeof out) == 0);
    lm_tokenizer_free(t);
}

static void expect_desc_error(struct lm_tokenizer_desc *d, enum lm_status want, const char *needle) {
    struct lm_tokenizer *t = (struct lm_tokenizer *)1;
    enum lm_status st = lm_tokenizer_init_desc(&t, d, "synthetic");
    CHECKF(st == want, "status %s, want %s (%s)", lm_status_name(st), lm_status_name(want), lm_error_msg());
    CHECK(t == NULL);
    CHECKF(strstr(lm_error_msg(), needle) != NULL, "message '%s' lacks '%s'", lm_error_msg(), needle);
    if (st == LM_OK) lm_tokenizer_free(t);
}

static void test_desc_errors(void) {
    struct vocab v;
    piece_vocab(&v, -1, -1);
    struct lm_tokenizer_desc d = desc_of(&v);
    d.model = "rwkv"; // RWKV: not supported
    expect_desc_error(&d, LM_ERR_UNSUPPORTED, "rwkv");
    d = desc_of(&v);
    v.type[ID_A] = 7;
    expect_desc_error(&d, LM_ERR_FORMAT, "token_type[260] = 7");
    v.type[ID_A] = -1;
    expect_desc_error(&d, LM_ERR_FORMAT, "token_type[260] = -1");
    v.type[ID_A] = LM_TOK_TYPE_NORMAL;
    d.bos = v.n;
    expect_desc_error(&d, LM_ERR_FORMAT, "bos_token_id");
    d = desc_of(&v);
    v.text[ID_B] = "a";
    v.len[ID_B] = 1;
    expect_desc_error(&d, LM_ERR_FORMAT, "same text");
    piece_vocab(&v, -1, -1);
    v.type[ID_A] = LM_TOK_TYPE_BYTE;
    expect_desc_error(&d, LM_ERR_FORMAT, "<0xXX>");
    piece_vocab(&v, -1, -1);
    v.score[ID_C] = NAN;
    expect_desc_error(&d, LM_ERR_FORMAT, "NaN");
    piece_vocab(&v, -1, -1);
    d.n_vocab = 0;
    expect_desc_error(&d, LM_ERR_FORMAT, "entries");
}

// ============================================================================
// In-memory GGUF writer (metadata only, no tensors)
// ============================================================================

struct gbuf {
    uint8_t *p;
    size_t n, cap;
    uint64_t n_kv;
};

static void gput(struct gbuf *b, const void *x, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, x, n);
    b->n += n;
}
static void gu32(struct gbuf *b, uint32_t x) { gput(b, &x, 4); }
static void gu64(struct gbuf *b, uint64_t x) { gput(b, &x, 8); }
static void gstr(struct gbuf *b, const char *s, size_t n) {
    gu64(b, n);
    gput(b, s, n);
}
static void gkey(struct gbuf *b, const char *k, uint32_t type) {
    gstr(b, k, strlen(k));
    gu32(b, type);
    b->n_kv++;
}

enum {
    BAD_NONE,
    BAD_SCORES_SHORT,
    BAD_TYPE_VALUE,
    BAD_NO_TOKENS,
    BAD_BOS_RANGE,
    BAD_TYPES_FLOAT,
    BAD_SCORES_STRING,
    BAD_MODEL,
    BAD_ADD_BOS_TYPE,
};

// Builds a GGUF holding the piece vocabulary with one defect.
static struct gbuf make_gguf(int bad) {
    struct vocab v;
    piece_vocab(&v, -1, -0.5f);
    struct gbuf b = {0};
    gkey(&b, "tokenizer.ggml.model", LM_GGUF_TYPE_STRING);
    gstr(&b, bad == BAD_MODEL ? "rwkv" : "llama", bad == BAD_MODEL ? 4 : 5);
    if (bad != BAD_NO_TOKENS) {
        gkey(&b, "tokenizer.ggml.tokens", LM_GGUF_TYPE_ARRAY);
        gu32(&b, LM_GGUF_TYPE_STRING);
        gu64(&b, (uint64_t)v.n);
        for (int i = 0; i < v.n; i++) gstr(&b, v.text[i], v.len[i]);
    }
    gkey(&b, "tokenizer.ggml.scores", LM_GGUF_TYPE_ARRAY);
    if (bad == BAD_SCORES_STRING) {
        gu32(&b, LM_GGUF_TYPE_STRING);
        gu64(&b, 1);
        gstr(&b, "x", 1);
    } else {
        int n = bad == BAD_SCORES_SHORT ? v.n - 1 : v.n;
        gu32(&b, LM_GGUF_TYPE_FLOAT32);
        gu64(&b, (uint64_t)n);
        gput(&b, v.score, (size_t)n * 4);
    }
    gkey(&b, "tokenizer.ggml.token_type", LM_GGUF_TYPE_ARRAY);
    if (bad == BAD_TYPE_VALUE) v.type[ID_C] = 9;
    gu32(&b, bad == BAD_TYPES_FLOAT ? LM_GGUF_TYPE_FLOAT32 : LM_GGUF_TYPE_INT32);
    gu64(&b, (uint64_t)v.n);
    gput(&b, v.type, (size_t)v.n * 4);
    gkey(&b, "tokenizer.ggml.bos_token_id", LM_GGUF_TYPE_UINT32);
    gu32(&b, bad == BAD_BOS_RANGE ? 5000u : 1u);
    gkey(&b, "tokenizer.ggml.eos_token_id", LM_GGUF_TYPE_UINT32);
    gu32(&b, 2);
    gkey(&b, "tokenizer.ggml.add_space_prefix", LM_GGUF_TYPE_BOOL);
    uint8_t f = 0;
    gput(&b, &f, 1);
    if (bad == BAD_ADD_BOS_TYPE) {
        gkey(&b, "tokenizer.ggml.add_bos_token", LM_GGUF_TYPE_STRING);
        gstr(&b, "yes", 3);
    }
    // header in front
    struct gbuf h = {0};
    gput(&h, "GGUF", 4);
    gu32(&h, 3);
    gu64(&h, 0);
    gu64(&h, b.n_kv);
    gput(&h, b.p, b.n);
    free(b.p);
    return h;
}

static void expect_gguf(int bad, enum lm_status want, const char *needle) {
    struct gbuf b = make_gguf(bad);
    struct lm_gguf g;
    enum lm_status st = lm_gguf_open_memory(&g, b.p, b.n, "tiny.gguf");
    CHECKF(st == LM_OK, "gguf: %s", lm_error_msg());
    if (st == LM_OK) {
        struct lm_tokenizer *t = NULL;
        st = lm_tokenizer_load(&t, &g);
        CHECKF(st == want, "case %d: status %s, want %s (%s)", bad, lm_status_name(st), lm_status_name(want),
               lm_error_msg());
        if (st != LM_OK) {
            CHECK(t == NULL);
            CHECKF(strstr(lm_error_msg(), needle) != NULL, "case %d: message '%s' lacks '%s'", bad, lm_error_msg(),
                   needle);
        } else {
            lm_gguf_close(&g); // tokenizer must not depend on the gguf after load
            memset(b.p, 0, b.n);
            CHECK(TOK(t, "abc b", true, false, 1, ID_A, ID_BC, ID_SPB));
            lm_tokenizer_free(t);
            free(b.p);
            return;
        }
        lm_gguf_close(&g);
    }
    free(b.p);
}

static void test_gguf_errors(void) {
    expect_gguf(BAD_NONE, LM_OK, "");
    expect_gguf(BAD_SCORES_SHORT, LM_ERR_FORMAT, "tokenizer.ggml.scores has 269 entries");
    expect_gguf(BAD_TYPE_VALUE, LM_ERR_FORMAT, "token_type[262] = 9");
    expect_gguf(BAD_NO_TOKENS, LM_ERR_FORMAT, "tokenizer.ggml.tokens");
    expect_gguf(BAD_BOS_RANGE, LM_ERR_FORMAT, "bos_token_id = 5000 out of range");
    expect_gguf(BAD_TYPES_FLOAT, LM_ERR_FORMAT, "tokenizer.ggml.token_type");
    expect_gguf(BAD_SCORES_STRING, LM_ERR_FORMAT, "tokenizer.ggml.scores");
    expect_gguf(BAD_MODEL, LM_ERR_UNSUPPORTED, "'rwkv'");
    expect_gguf(BAD_ADD_BOS_TYPE, LM_ERR_FORMAT, "add_bos_token");
}

static void test_chat_unit(void) {
    struct lm_chat_msg m[] = {{"system", "A"}, {"system", " B "}, {"tool", "x"}, {"user", "\t"}};
    char *out;
    size_t n;
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_GEMMA, m, 4, false, &out, &n) == LM_OK);
    // consecutive system messages concatenate; merged into the first non-model turn
    CHECK(strcmp(out, "<start_of_turn>tool\nAB\n\nx<end_of_turn>\n<start_of_turn>user\n<end_of_turn>\n") == 0);
    free(out);
    struct lm_chat_msg bad[] = {{"user", NULL}};
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_GEMMA, bad, 1, false, &out, &n) == LM_ERR_ARG && out == NULL);
    CHECK(lm_chat_apply((enum lm_chat_template)99, m, 1, false, &out, &n) == LM_ERR_UNSUPPORTED);
}

int main(void) {
    test_merges();
    test_fallback_and_specials();
    test_desc_errors();
    test_gguf_errors();
    test_chat_unit();
    return lm_test_finish();
}
