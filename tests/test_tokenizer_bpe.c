// LM_TEST_LABELS: unit
// Byte-level BPE: merge order by rank on tiny synthetic vocabularies, ignore_merges, special
// and user-defined tokens, BOS per pre-tokenizer, pieces and clean-up on detokenize, clean
// errors for malformed metadata (in-memory GGUF), the GPT-2 vocabulary against llama.cpp
// golden ids (tests/data/vocab, tests/golden/tokens_gpt-2.tsv), chat templates + detection.
#include "format/gguf.h"
#include "tok_golden.h"

// ============================================================================
// Synthetic vocabulary
// ============================================================================

// GPT-2 character of byte b, NUL-terminated
static void enc_byte(unsigned b, char out[3]) {
    unsigned c = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE ? b
                 : b <= 0x20                                                    ? 0x100 + b
                 : b == 0xAD                                                    ? 0x143
                                                                                : 0x100 + 33 + (b - 0x7F);
    if (c < 0x80) {
        out[0] = (char)c;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3F));
        out[2] = 0;
    }
}

#define G "\xc4\xa0" // 'Ġ': the character of byte 0x20

struct vocab {
    const char *text[320];
    uint32_t len[320];
    int32_t type[320];
    int32_t n;
    const char *merge[16];
    uint32_t mlen[16];
    int32_t n_merges;
};

static char byte_chars[256][3];

static int32_t add(struct vocab *v, const char *s, int32_t type) {
    v->text[v->n] = s;
    v->len[v->n] = (uint32_t)strlen(s);
    v->type[v->n] = type;
    return v->n++;
}

static void merge(struct vocab *v, const char *m) {
    v->merge[v->n_merges] = m;
    v->mlen[v->n_merges++] = (uint32_t)strlen(m);
}

// ids 0..255: the byte characters (id == byte), then these
enum { ID_AB = 256, ID_BC, ID_GA, ID_ABC, ID_CC, ID_CAB, ID_EOT, ID_UD, ID_OMEGA };

// skip: one byte whose character is left out (its slot gets a dummy text), or -1
static void base_vocab(struct vocab *v, bool rank_ab_first, int skip) {
    memset(v, 0, sizeof *v);
    for (int b = 0; b < 256; b++) {
        enc_byte((unsigned)b, byte_chars[b]);
        add(v, b == skip ? "<dummy>" : byte_chars[b], LM_TOK_TYPE_NORMAL);
    }
    add(v, "ab", LM_TOK_TYPE_NORMAL);
    add(v, "bc", LM_TOK_TYPE_NORMAL);
    add(v, G "a", LM_TOK_TYPE_NORMAL);
    add(v, "abc", LM_TOK_TYPE_NORMAL);
    add(v, "cc", LM_TOK_TYPE_NORMAL);
    add(v, "cab", LM_TOK_TYPE_NORMAL); // reachable only as a whole word (no merge makes it)
    add(v, "<|endoftext|>", LM_TOK_TYPE_CONTROL);
    add(v, "<ud>", LM_TOK_TYPE_USER_DEFINED);
    add(v, "\xce\xa9", LM_TOK_TYPE_NORMAL); // 'Ω' is no byte character
    merge(v, rank_ab_first ? "a b" : "b c");
    merge(v, rank_ab_first ? "b c" : "a b");
    merge(v, G " a");
    merge(v, "ab c");
    merge(v, "c c");
}

static struct lm_tokenizer_desc desc_of(const struct vocab *v, const char *pre) {
    return (struct lm_tokenizer_desc){.model = "gpt2", .pre = pre, .n_vocab = v->n, .texts = v->text,
                                      .lens = v->len, .types = v->type,
                                      .bos = ID_EOT, .eos = ID_EOT, .unk = -1, .pad = -1, .eot = -1, .eom = -1,
                                      .fim_pad = -1, .fim_rep = -1, .fim_sep = -1,
                                      .add_bos = -1, .add_eos = -1, .add_space_prefix = -1,
                                      .merges = v->merge, .merge_lens = v->mlen, .n_merges = v->n_merges};
}

static bool tok_is(const struct lm_tokenizer *t, const char *s, size_t len, bool add_special, bool parse_special,
                   const int32_t *want) {
    int32_t *ids;
    size_t n, nw = 0;
    if (lm_tokenize(t, s, len, add_special, parse_special, &ids, &n) != LM_OK) {
        fprintf(stderr, "  tokenize failed: %s\n", lm_error_msg());
        return false;
    }
    while (want[nw] >= 0) nw++;
    bool ok = n == nw && memcmp(ids, want, n * sizeof *ids) == 0;
    if (!ok) {
        fprintf(stderr, "  ");
        tg_show(s, len);
        tg_show_ids(": got", ids, n);
    }
    free(ids);
    return ok;
}

#define TOK(t, s, as, ps, ...) tok_is(t, s, strlen(s), as, ps, (const int32_t[]){__VA_ARGS__, -1})

static struct lm_tokenizer *make(const struct vocab *v, const char *pre) {
    struct lm_tokenizer_desc d = desc_of(v, pre);
    struct lm_tokenizer *t = NULL;
    CHECKF(lm_tokenizer_init_desc(&t, &d, "synthetic") == LM_OK, "%s", lm_error_msg());
    return t;
}

static void test_merges(void) {
    struct vocab v;
    base_vocab(&v, true, -1);
    struct lm_tokenizer *t = make(&v, "gpt-2");
    if (!t) return;
    CHECK(t->kind == LM_TOK_KIND_BPE && !t->add_bos && !t->add_eos && t->clean_spaces);
    CHECK(TOK(t, "abc", false, false, ID_ABC)); // a+b (rank 0), then ab+c (rank 3)
    CHECK(TOK(t, "bcc", false, false, ID_BC, 'c'));
    CHECK(TOK(t, "ccc", false, false, ID_CC, 'c')); // equal rank: leftmost first
    CHECK(TOK(t, " abc", false, false, ' ', ID_ABC)); // "Ġa" (rank 2) loses to "ab" (rank 0)
    CHECK(TOK(t, " a", false, false, ID_GA));
    CHECK(TOK(t, "cab", false, false, 'c', ID_AB)); // no merge builds "cab"
    CHECK(TOK(t, "a b", false, false, 'a', ' ', 'b')); // " b": no merge
    CHECK(tok_is(t, "", 0, true, false, (const int32_t[]){-1}));
    // pre-tokenizer: words are merged separately ("ab" never spans "a" + " b")
    CHECK(TOK(t, "a,b", false, false, 'a', ',', 'b'));
    CHECK(TOK(t, "abc's", false, false, ID_ABC, '\'', 's'));
    // invalid UTF-8 reads as U+FFFD (EF BF BD), as in llama.cpp
    CHECK(TOK(t, "\xff", false, false, 0xEF, 0xBF, 0xBD));
    CHECK(tok_is(t, "a\0b", 3, false, false, (const int32_t[]){'a', 0, 'b', -1}));
    // special tokens: control only with parse_special, user-defined always
    CHECK(TOK(t, "a<|endoftext|>b", false, true, 'a', ID_EOT, 'b'));
    CHECK(TOK(t, "<|endoftext|>", false, false, '<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't', '|', '>'));
    CHECK(TOK(t, "x<ud>y", false, false, 'x', ID_UD, 'y'));
    CHECK(lm_tokenizer_is_eog(t, ID_EOT) && !lm_tokenizer_is_eog(t, ID_UD));

    // pieces: byte characters back to bytes; characters outside the mapping spelled out
    char buf[64];
    CHECK(lm_token_to_piece(t, ID_GA, buf, sizeof buf, false) == 2 && memcmp(buf, " a", 2) == 0);
    CHECK(lm_token_to_piece(t, 0xA9, buf, sizeof buf, false) == 1 && (uint8_t)buf[0] == 0xA9);
    CHECK(lm_token_to_piece(t, ID_EOT, buf, sizeof buf, false) == 0);
    CHECK(lm_token_to_piece(t, ID_EOT, buf, sizeof buf, true) == 13);
    const char *unk = "[UNK_BYTE_0xcea9\xce\xa9]";
    size_t k = lm_token_to_piece(t, ID_OMEGA, buf, sizeof buf, false);
    CHECKF(k == strlen(unk) && memcmp(buf, unk, k) == 0, "got %zu bytes", k);
    CHECK(lm_tokenizer_max_piece(t) >= strlen(unk));
    // detokenize cleans " ." and " 's" for gpt-2, not for qwen2
    int32_t ids[] = {'a', ' ', '.', ' ', '\'', 's'};
    char *s;
    size_t n;
    CHECK(lm_tokenizer_detokenize(t, ids, 6, false, false, &s, &n) == LM_OK);
    CHECKF(n == 4 && memcmp(s, "a.'s", 4) == 0, "%s", s);
    free(s);
    lm_tokenizer_free(t);

    t = make(&v, "qwen2");
    if (!t) return;
    CHECK(!t->add_bos && !t->clean_spaces);
    CHECK(lm_tokenizer_detokenize(t, ids, 6, false, false, &s, &n) == LM_OK);
    CHECK(n == 6 && memcmp(s, "a . 's", 6) == 0);
    free(s);
    CHECK(TOK(t, "abc", true, false, ID_ABC)); // qwen2 adds no BOS
    CHECK(TOK(t, "12", false, false, '1', '2')); // digits one by one
    lm_tokenizer_free(t);

    // llama3: BOS by default, and a pre-token that is a whole token skips the merges
    t = make(&v, "llama-bpe");
    if (!t) return;
    CHECK(t->add_bos);
    CHECK(TOK(t, "cab", true, false, ID_EOT, ID_CAB));
    CHECK(TOK(t, "cab", false, false, ID_CAB));
    lm_tokenizer_free(t);

    // add_bos from metadata wins over the pre-tokenizer default
    struct lm_tokenizer_desc d = desc_of(&v, "llama-bpe");
    d.add_bos = 0;
    CHECK(lm_tokenizer_init_desc(&t, &d, "synthetic") == LM_OK);
    CHECK(TOK(t, "cab", true, false, ID_CAB));
    lm_tokenizer_free(t);

    // the other rank order
    base_vocab(&v, false, -1);
    t = make(&v, "gpt-2");
    if (!t) return;
    CHECK(TOK(t, "abc", false, false, 'a', ID_BC));
    lm_tokenizer_free(t);

    // a byte whose character is no token is dropped (llama.cpp does the same)
    base_vocab(&v, true, 0x0B);
    t = make(&v, "gpt-2");
    if (!t) return;
    CHECK(TOK(t, "a\x0b" "b", false, false, 'a', 'b'));
    lm_tokenizer_free(t);

    // the other pre-tokenizer families load and split digits their way
    base_vocab(&v, true, -1);
    const struct {
        const char *pre;
        const char *text;
        int32_t want[8];
    } fam[] = {
        {"default", "1234", {'1', '2', '3', '4', -1}},
        {"starcoder", "12", {'1', '2', -1}},
        {"smollm", "12", {'1', '2', -1}},
        {"falcon", "1234", {'1', '2', '3', '4', -1}},
        {"llama3", "1234", {'1', '2', '3', '4', -1}},
        {"deepseek-r1-qwen", "12", {'1', '2', -1}},
        {NULL, "abc", {ID_ABC, -1}},
        {"", "abc", {ID_ABC, -1}},
    };
    for (size_t i = 0; i < sizeof fam / sizeof fam[0]; i++) {
        t = make(&v, fam[i].pre);
        if (!t) continue;
        CHECKF(tok_is(t, fam[i].text, strlen(fam[i].text), false, false, fam[i].want), "pre %s",
               fam[i].pre ? fam[i].pre : "(null)");
        lm_tokenizer_free(t);
    }
}

// Long inputs: whitespace and letter runs that make a backtracking regex work hard.
static void test_long_runs(void) {
    struct vocab v;
    base_vocab(&v, true, -1);
    const char *pres[] = {"llama-bpe", "qwen2", "gpt-2", "default", "gpt-4o"};
    size_t n = 200000;
    char *s = malloc(n + 2);
    for (size_t p = 0; p < sizeof pres / sizeof pres[0]; p++) {
        struct lm_tokenizer *t = make(&v, pres[p]);
        if (!t) continue;
        for (int pat = 0; pat < 3; pat++) {
            for (size_t i = 0; i < n; i++) s[i] = pat == 0 ? ' ' : pat == 1 ? 'c' : "\n \t"[i % 3];
            s[n] = 'x';
            int32_t *ids;
            size_t n_ids;
            enum lm_status st = lm_tokenize(t, s, n + 1, false, false, &ids, &n_ids);
            CHECKF(st == LM_OK, "pre %s pattern %d: %s", pres[p], pat, lm_error_msg());
            if (st == LM_OK) free(ids);
        }
        lm_tokenizer_free(t);
    }
    free(s);
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
    base_vocab(&v, true, -1);
    struct lm_tokenizer_desc d = desc_of(&v, "gpt-2");
    d.merges = NULL;
    expect_desc_error(&d, LM_ERR_FORMAT, "tokenizer.ggml.merges is missing");
    d = desc_of(&v, "gpt-2");
    v.merge[3] = "ab zz";
    v.mlen[3] = 5;
    expect_desc_error(&d, LM_ERR_FORMAT, "merges[3] 'ab zz' names a right part that is not a token");
    v.merge[3] = "zz c";
    v.mlen[3] = 4;
    expect_desc_error(&d, LM_ERR_FORMAT, "left part");
    v.merge[3] = "abc";
    v.mlen[3] = 3;
    expect_desc_error(&d, LM_ERR_FORMAT, "merges[3] has no space");
    v.merge[3] = " ab";
    v.mlen[3] = 3;
    expect_desc_error(&d, LM_ERR_FORMAT, "merges[3] has no space");
    base_vocab(&v, true, -1);
    d = desc_of(&v, "no-such-pre");
    expect_desc_error(&d, LM_ERR_UNSUPPORTED, "tokenizer.ggml.pre 'no-such-pre' not supported");
    d = desc_of(&v, "gpt-2");
    d.n_merges = -1;
    expect_desc_error(&d, LM_ERR_FORMAT, "merges has -1 entries");
    // empty merge list: allowed (every byte its own token)
    d = desc_of(&v, "gpt-2");
    d.n_merges = 0;
    struct lm_tokenizer *t;
    CHECK(lm_tokenizer_init_desc(&t, &d, "synthetic") == LM_OK);
    CHECK(TOK(t, "abc", false, false, 'a', 'b', 'c'));
    lm_tokenizer_free(t);
}

// ============================================================================
// In-memory GGUF (metadata only)
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
static void gstr(struct gbuf *b, const char *s) {
    gu64(b, strlen(s));
    gput(b, s, strlen(s));
}
static void gkey(struct gbuf *b, const char *k, uint32_t type) {
    gstr(b, k);
    gu32(b, type);
    b->n_kv++;
}

enum { BAD_NONE, BAD_NO_MERGES, BAD_MERGES_INT, BAD_MERGES_SCALAR, BAD_MERGE_UNKNOWN, BAD_PRE_TYPE, BAD_PRE_NAME };

static struct gbuf make_gguf(int bad) {
    struct vocab v;
    base_vocab(&v, true, -1);
    struct gbuf b = {0};
    gkey(&b, "tokenizer.ggml.model", LM_GGUF_TYPE_STRING);
    gstr(&b, "gpt2");
    gkey(&b, "tokenizer.ggml.pre", bad == BAD_PRE_TYPE ? LM_GGUF_TYPE_UINT32 : LM_GGUF_TYPE_STRING);
    if (bad == BAD_PRE_TYPE) gu32(&b, 3);
    else gstr(&b, bad == BAD_PRE_NAME ? "tekken" : "llama-bpe");
    gkey(&b, "tokenizer.ggml.tokens", LM_GGUF_TYPE_ARRAY);
    gu32(&b, LM_GGUF_TYPE_STRING);
    gu64(&b, (uint64_t)v.n);
    for (int i = 0; i < v.n; i++) gstr(&b, v.text[i]);
    gkey(&b, "tokenizer.ggml.token_type", LM_GGUF_TYPE_ARRAY);
    gu32(&b, LM_GGUF_TYPE_INT32);
    gu64(&b, (uint64_t)v.n);
    gput(&b, v.type, (size_t)v.n * 4);
    if (bad == BAD_MERGES_INT) {
        gkey(&b, "tokenizer.ggml.merges", LM_GGUF_TYPE_ARRAY);
        gu32(&b, LM_GGUF_TYPE_INT32);
        gu64(&b, 2);
        gu32(&b, 1);
        gu32(&b, 2);
    } else if (bad == BAD_MERGES_SCALAR) {
        gkey(&b, "tokenizer.ggml.merges", LM_GGUF_TYPE_STRING);
        gstr(&b, "a b");
    } else if (bad != BAD_NO_MERGES) {
        if (bad == BAD_MERGE_UNKNOWN) v.merge[1] = "b q\xc4\xa0q";
        gkey(&b, "tokenizer.ggml.merges", LM_GGUF_TYPE_ARRAY);
        gu32(&b, LM_GGUF_TYPE_STRING);
        gu64(&b, (uint64_t)v.n_merges);
        for (int i = 0; i < v.n_merges; i++) gstr(&b, v.merge[i]);
    }
    gkey(&b, "tokenizer.ggml.bos_token_id", LM_GGUF_TYPE_UINT32);
    gu32(&b, ID_EOT);
    gkey(&b, "tokenizer.ggml.eos_token_id", LM_GGUF_TYPE_UINT32);
    gu32(&b, ID_EOT);
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
        lm_gguf_close(&g);
        if (st != LM_OK) {
            CHECK(t == NULL);
            CHECKF(strstr(lm_error_msg(), needle) != NULL, "case %d: message '%s' lacks '%s'", bad, lm_error_msg(),
                   needle);
        } else {
            memset(b.p, 0, b.n); // the tokenizer must not depend on the file after load
            CHECK(t->add_bos);
            CHECK(TOK(t, "cab abc", true, false, ID_EOT, ID_CAB, ' ', ID_ABC));
            lm_tokenizer_free(t);
        }
    }
    free(b.p);
}

static void test_gguf_errors(void) {
    expect_gguf(BAD_NONE, LM_OK, "");
    expect_gguf(BAD_NO_MERGES, LM_ERR_FORMAT, "tokenizer.ggml.merges is missing");
    expect_gguf(BAD_MERGES_INT, LM_ERR_FORMAT, "tokenizer.ggml.merges");
    expect_gguf(BAD_MERGES_SCALAR, LM_ERR_FORMAT, "tokenizer.ggml.merges");
    expect_gguf(BAD_MERGE_UNKNOWN, LM_ERR_FORMAT, "merges[1]");
    expect_gguf(BAD_PRE_TYPE, LM_ERR_FORMAT, "tokenizer.ggml.pre");
    expect_gguf(BAD_PRE_NAME, LM_ERR_UNSUPPORTED, "'tekken'");
}

// ============================================================================
// GPT-2 vocabulary (committed: tests/data/vocab/ggml-vocab-gpt-2.gguf, 1.8 MB)
// ============================================================================

static void test_gpt2(void) {
    struct lm_gguf g;
    enum lm_status st = lm_gguf_open(&g, lm_test_path("tests/data/vocab/ggml-vocab-gpt-2.gguf"));
    CHECKF(st == LM_OK, "%s", lm_error_msg());
    if (st != LM_OK) return;
    struct lm_tokenizer *t = NULL;
    double t0 = tg_now_ms();
    st = lm_tokenizer_load(&t, &g);
    CHECKF(st == LM_OK, "%s", lm_error_msg());
    lm_gguf_close(&g);
    if (!t) return;
    printf("gpt-2: load %.1f ms (%d tokens, %d special)\n", tg_now_ms() - t0, t->n_vocab, t->n_special);
    CHECK(t->n_vocab == 50257 && !t->add_bos && lm_tokenizer_eos(t) == 50256 && lm_tokenizer_is_eog(t, 50256));
    CHECK(lm_chat_template_detect(t, "gpt2", NULL) == LM_CHAT_TEMPLATE_NONE);
    CHECK(TOK(t, "Hello world", false, false, 15496, 995));
    tg_check_golden(t, "tests/golden/tokens_gpt-2.tsv", "gpt-2");
    tg_bench(t, "gpt-2");
    lm_tokenizer_free(t);
}

// The same vocabulary with pre "gpt-4o" (o200k, gpt-oss; tools/make_gpt4o_vocab.py).
static void test_gpt4o(void) {
    struct lm_gguf g;
    enum lm_status st = lm_gguf_open(&g, lm_test_path("tests/data/vocab/ggml-vocab-gpt-4o.gguf"));
    CHECKF(st == LM_OK, "%s", lm_error_msg());
    if (st != LM_OK) return;
    struct lm_tokenizer *t = NULL;
    st = lm_tokenizer_load(&t, &g);
    CHECKF(st == LM_OK, "%s", lm_error_msg());
    lm_gguf_close(&g);
    if (!t) return;
    CHECK(!t->add_bos && !t->clean_spaces);
    // "Hello" + "World": the case change splits the word
    CHECK(TOK(t, "HelloWorld", false, false, 15496, 10603));
    tg_check_golden(t, "tests/golden/tokens_gpt-4o.tsv", "gpt-4o");
    tg_bench(t, "gpt-4o");
    lm_tokenizer_free(t);
}

// gpt-oss's tokenizer as its files carry it (tools/make_gptoss_vocab.py: pre "gpt-4o", the
// harmony special tokens at their offsets from the end, the official template): llama.cpp's ids,
// <|return|> and <|call|> end generation and <|end|> does not, the template reads as harmony.
static void test_gptoss(void) {
    struct lm_gguf g;
    enum lm_status st = lm_gguf_open(&g, lm_test_path("tests/data/vocab/ggml-vocab-gpt-oss.gguf"));
    CHECKF(st == LM_OK, "%s", lm_error_msg());
    if (st != LM_OK) return;
    struct lm_tokenizer *t = NULL;
    st = lm_tokenizer_load(&t, &g);
    CHECKF(st == LM_OK, "%s", lm_error_msg());
    struct lm_gguf_str tmpl = {0};
    CHECK(lm_gguf_get_str(&g, "tokenizer.chat_template", &tmpl, true) == LM_OK);
    char *text = strndup(tmpl.data ? tmpl.data : "", (size_t)tmpl.len);
    lm_gguf_close(&g);
    if (!t) { free(text); return; }
    CHECK(!t->add_bos);
    // 8192 - 1090 + (200006 - 199998): <|start|>; <|return|> 200002, <|call|> 200012, <|end|> 200007
    const int32_t base = 8192 - 1090 - 199998;
    CHECK(TOK(t, "<|start|>", false, true, base + 200006));
    CHECK(lm_tokenizer_eos(t) == base + 200002 && lm_tokenizer_bos(t) == base + 199998);
    CHECKF(lm_tokenizer_is_eog(t, base + 200002) && lm_tokenizer_is_eog(t, base + 200012),
           "gpt-oss: <|return|> and <|call|> end generation");
    CHECKF(!lm_tokenizer_is_eog(t, base + 200007), "gpt-oss: <|end|> ends a message, not the generation");
    CHECK(lm_chat_template_detect(t, "gpt-oss", text) == LM_CHAT_TEMPLATE_HARMONY);
    free(text);
    tg_check_golden(t, "tests/golden/tokens_gpt-oss.tsv", "gpt-oss");
    lm_tokenizer_free(t);
}

// ============================================================================
// Chat templates
// ============================================================================

static void test_chat(void) {
    struct lm_chat_msg msgs[] = {{"system", "  You are terse.\n"},
                                 {"user", "Hi there! "},
                                 {"assistant", "\nHello.\n"},
                                 {"user", "What is 2+2?"}};
    // expected texts from llama.cpp: llama_chat_apply_template("llama3" / "chatml", msgs, add_ass=true)
    const char *want_llama3 =
        "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>"
        "\n\nHi there!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|><|start_header_id|>"
        "user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
    const char *want_chatml = "<|im_start|>system\n  You are terse.\n<|im_end|>\n<|im_start|>user\nHi there! "
                              "<|im_end|>\n<|im_start|>assistant\n\nHello.\n<|im_end|>\n<|im_start|>user\nWhat is "
                              "2+2?<|im_end|>\n<|im_start|>assistant\n";
    char *out;
    size_t n;
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_LLAMA3, msgs, 4, true, &out, &n) == LM_OK);
    CHECKF(n == strlen(want_llama3) && strcmp(out, want_llama3) == 0, "llama3 gave: %s", out);
    free(out);
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_CHATML, msgs, 4, true, &out, &n) == LM_OK);
    CHECKF(n == strlen(want_chatml) && strcmp(out, want_chatml) == 0, "chatml gave: %s", out);
    free(out);
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_LLAMA3, msgs, 0, true, &out, &n) == LM_OK);
    CHECK(strcmp(out, "<|start_header_id|>assistant<|end_header_id|>\n\n") == 0);
    free(out);
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_CHATML, msgs + 1, 1, false, &out, &n) == LM_OK);
    CHECK(strcmp(out, "<|im_start|>user\nHi there! <|im_end|>\n") == 0);
    free(out);
    CHECK(lm_chat_apply(LM_CHAT_TEMPLATE_NONE, msgs, 1, true, &out, &n) == LM_ERR_UNSUPPORTED && out == NULL);

    // detection from template text (llama.cpp's heuristics), then vocabulary, then arch
    const char *llama3_jinja = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
                               "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
                               "message['content'] | trim + '<|eot_id|>' %}";
    const char *chatml_jinja = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                               "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
    CHECK(lm_chat_template_detect(NULL, NULL, llama3_jinja) == LM_CHAT_TEMPLATE_LLAMA3);
    CHECK(lm_chat_template_detect(NULL, NULL, chatml_jinja) == LM_CHAT_TEMPLATE_CHATML);
    CHECK(lm_chat_template_detect(NULL, NULL, "{{ '<start_of_turn>' + role }}") == LM_CHAT_TEMPLATE_GEMMA);
    CHECK(lm_chat_template_detect(NULL, NULL, "chatml") == LM_CHAT_TEMPLATE_CHATML);
    CHECK(lm_chat_template_detect(NULL, NULL, "llama3") == LM_CHAT_TEMPLATE_LLAMA3);
    CHECK(lm_chat_template_detect(NULL, NULL, "gemma") == LM_CHAT_TEMPLATE_GEMMA);
    CHECK(lm_chat_template_detect(NULL, NULL, "<|im_start|><|im_sep|>") == LM_CHAT_TEMPLATE_NONE); // phi4
    CHECK(lm_chat_template_detect(NULL, NULL, "[INST] <|start_header_id|><|end_header_id|>") == LM_CHAT_TEMPLATE_NONE);
    CHECK(lm_chat_template_detect(NULL, NULL, "something else") == LM_CHAT_TEMPLATE_NONE);
    CHECK(lm_chat_template_detect(NULL, "gemma3", NULL) == LM_CHAT_TEMPLATE_GEMMA);
    CHECK(lm_chat_template_detect(NULL, "gemma3", "") == LM_CHAT_TEMPLATE_GEMMA);
    CHECK(lm_chat_template_detect(NULL, "llama", NULL) == LM_CHAT_TEMPLATE_NONE);
    CHECK(strcmp(lm_chat_template_name(LM_CHAT_TEMPLATE_CHATML), "chatml") == 0);
    CHECK(strcmp(lm_chat_template_name(LM_CHAT_TEMPLATE_LLAMA3), "llama3") == 0);
    CHECK(strcmp(lm_chat_template_name(LM_CHAT_TEMPLATE_NONE), "none") == 0);

    // a vocabulary with turn tokens: detection by vocabulary, and the stop tokens are EOG
    struct vocab v;
    base_vocab(&v, true, -1);
    int32_t im_start = add(&v, "<|im_start|>", LM_TOK_TYPE_CONTROL), im_end = add(&v, "<|im_end|>", LM_TOK_TYPE_CONTROL);
    struct lm_tokenizer *t = make(&v, "qwen2");
    if (!t) return;
    CHECK(lm_chat_template_detect(t, "qwen2", NULL) == LM_CHAT_TEMPLATE_CHATML);
    CHECK(lm_tokenizer_is_eog(t, im_end) && !lm_tokenizer_is_eog(t, im_start));
    lm_tokenizer_free(t);
    base_vocab(&v, true, -1);
    add(&v, "<|start_header_id|>", LM_TOK_TYPE_CONTROL);
    int32_t eot = add(&v, "<|eot_id|>", LM_TOK_TYPE_CONTROL);
    t = make(&v, "llama-bpe");
    if (!t) return;
    CHECK(lm_chat_template_detect(t, "llama", NULL) == LM_CHAT_TEMPLATE_LLAMA3);
    CHECK(lm_tokenizer_is_eog(t, eot));
    lm_tokenizer_free(t);
}

int main(void) {
    test_merges();
    test_long_runs();
    test_desc_errors();
    test_gguf_errors();
    test_gpt2();
    test_gpt4o();
    test_gptoss();
    test_chat();
    return lm_test_finish();
}
