// Grammar matcher and masks on a synthetic vocabulary: strings accepted and refused byte by
// byte (UTF-8 split across byte tokens included), masks equal to a token-by-token brute force,
// end-of-generation and control tokens, forced runs, rollback, lazy triggers, hostile grammars.
#include <string.h>

#include "grammar/grammar.h"
#include "lm_test.h"
#include "tokenizer/tokenizer.h"

#define U2581 "\xe2\x96\x81"

static const char *normal[] = {"{", "}", "\"", "\":", "a", "ab", "abc", "1", "12", U2581, ",", "[", "]", "true",
                               "null", "\"a", "\xc3\xa9", "\xf0\x9f\x98\x80", "x", "-", "+", "*", "(", ")", "=",
                               "\n", "-" U2581, "hello", "foo", "bc", "\"}", "\",", ":" U2581, "@@", "call",
                               "tru", "e", "nu", "ll", "2", "3", U2581 "\"", "\\", "n", "u", "0"};

static struct lm_tokenizer *make_vocab(int32_t *id_call, int32_t *id_byte0) {
    static char bytes[256][8];
    const char *texts[512];
    uint32_t lens[512];
    int32_t types[512];
    int n = 0;
    texts[n] = "<unk>", types[n++] = LM_TOK_TYPE_UNKNOWN;
    texts[n] = "<s>", types[n++] = LM_TOK_TYPE_CONTROL;
    texts[n] = "</s>", types[n++] = LM_TOK_TYPE_CONTROL;
    *id_call = n;
    texts[n] = "<tool_call>", types[n++] = LM_TOK_TYPE_CONTROL;
    *id_byte0 = n;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        texts[n] = bytes[b], types[n++] = LM_TOK_TYPE_BYTE;
    }
    for (size_t i = 0; i < sizeof normal / sizeof *normal; i++) texts[n] = normal[i], types[n++] = LM_TOK_TYPE_NORMAL;
    for (int i = 0; i < n; i++) lens[i] = (uint32_t)strlen(texts[i]);
    struct lm_tokenizer_desc d = {.model = "llama", .n_vocab = n, .texts = texts, .lens = lens, .types = types,
                                  .bos = 1, .eos = 2, .unk = 0, .pad = -1, .eot = -1, .eom = -1,
                                  .fim_pad = -1, .fim_rep = -1, .fim_sep = -1,
                                  .add_bos = 0, .add_eos = 0, .add_space_prefix = 0};
    struct lm_tokenizer *t = NULL;
    CHECKF(lm_tokenizer_init_desc(&t, &d, "synthetic") == LM_OK, "%s", lm_error_msg());
    return t;
}

static int32_t tok(const struct lm_tokenizer *t, const char *text) {
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (t->off[i + 1] - t->off[i] == strlen(text) && !memcmp(t->blob + t->off[i], text, strlen(text))) return i;
    fprintf(stderr, "no token %s\n", text);
    exit(1);
}

static struct lm_grammar *compile(const struct lm_tokenizer *t, const char *gbnf) {
    struct lm_grammar *g = NULL;
    CHECKF(lm_grammar_compile(&g, t, gbnf, strlen(gbnf), NULL) == LM_OK, "%s: %s", gbnf, lm_error_msg());
    return g;
}

// Whether the grammar's matcher accepts s byte by byte, and whether it can end after it.
static int match(struct lm_grammar *g, const char *s) {
    uint32_t x = g->start;
    for (size_t i = 0; s[i] && x != GM_DEAD; i++) x = gm_next(&g->eng, x, (uint8_t)s[i]);
    if (x == GM_DEAD) return 0;
    return g->eng.states[x].need == 0 && (g->eng.states[x].flags & GM_CAN_END) ? 2 : 1; // 1: a prefix
}

static bool bit(const uint32_t *b, int32_t id) { return (b[id >> 5] >> (id & 31)) & 1; }

// Every token's bit equals what accept says (accept then roll back).
static void brute(struct lm_grammar_matcher *m, int32_t nv, const char *where) {
    uint32_t bits[64];
    lm_grammar_matcher_fill_mask(m, bits);
    int bad = 0;
    for (int32_t id = 0; id < nv; id++) {
        bool ok = lm_grammar_matcher_accept(m, id);
        if (ok) CHECK(lm_grammar_matcher_rollback(m, 1));
        if (ok != bit(bits, id) && bad++ < 3) fprintf(stderr, "%s: token %d mask %d accept %d\n", where, id, bit(bits, id), ok);
    }
    CHECKF(bad == 0, "%s: %d tokens differ", where, bad);
}

// the grammars the sub-tests compile (freed at the end of main, as before) and the JSON
// grammar text (tests/data/gbnf/json.gbnf)
static struct lm_grammar *gj, *ga, *gu, *gf, *gl, *gh;
static char json[1 << 14];
static size_t jl;

// strings, byte by byte
static void test_strings(struct lm_tokenizer *t) {
    FILE *f = fopen(lm_test_path("tests/data/gbnf/json.gbnf"), "rb");
    jl = f ? fread(json, 1, sizeof json - 1, f) : 0;
    if (f) fclose(f);
    json[jl] = 0;
    gj = compile(t, json);
    if (gj) {
        CHECK(match(gj, "{}") == 2);
        CHECK(match(gj, "{\"a\": [1, 2.5, -3, true, null, {\"b\": \"\\u00e9\\n\"}]}") == 2);
        CHECK(match(gj, "{\"emoji\": \"\xf0\x9f\x98\x80 caf\xc3\xa9\"}") == 2);
        CHECK(match(gj, "{\"a\": 1") == 1);
        CHECK(match(gj, "{\"a\": 01}") == 0);
        CHECK(match(gj, "{\"a\" 1}") == 0);
        CHECK(match(gj, "{\"a\": \"\x01\"}") == 0);
        CHECK(match(gj, "{\"a\": \"\xc3\"}") == 0);       // truncated UTF-8
        CHECK(match(gj, "{\"a\": \"\xc0\xaf\"}") == 0);   // overlong
        CHECK(match(gj, "{\"a\": \"\xed") == 1);        // a partial sequence is a prefix
        CHECK(match(gj, "[]") == 0);
        CHECK(match(gj, "{}  ") == 0);
    }
    const char *arith = "root  ::= (expr \"=\" ws term \"\\n\")+\nexpr  ::= term ([-+*/] term)*\n"
                        "term  ::= ident | num | \"(\" ws expr \")\" ws\nident ::= [a-z] [a-z0-9_]* ws\nnum   ::= [0-9]+ ws\nws    ::= [ \\t\\n]*\n";
    ga = compile(t, arith);
    if (ga) {
        CHECK(match(ga, "x=1\n") == 2);
        CHECK(match(ga, "(a+b)*c = 42\ny=x\n") == 2);
        CHECK(match(ga, "x==1\n") == 0);
        CHECK(match(ga, "x=1") == 1);
    }
    gu = compile(t, "root ::= [^a-z\\u00e0-\\u00ff]+ \"\xc3\xa9\"");
    if (gu) {
        CHECK(match(gu, "\xf0\x9f\x98\x80\xc3\xa9") == 2);
        CHECK(match(gu, "A\xc3\xa9") == 2);
        CHECK(match(gu, "\xc3\xa0") == 0); // U+00E0 is excluded: refused at its second byte
        uint32_t x = gm_next(&gu->eng, gu->start, 0xc3);
        CHECK(x != GM_DEAD && gm_next(&gu->eng, x, 0xa0) == GM_DEAD);
    }
}

// masks, EOG, control tokens
static void test_masks(struct lm_tokenizer *t, int32_t nv, int32_t id_call, int32_t b0) {
    if (gj) {
        struct lm_grammar_matcher *m;
        CHECK(lm_grammar_matcher_init(&m, gj) == LM_OK);
        uint32_t bits[64];
        lm_grammar_matcher_fill_mask(m, bits);
        CHECK(bit(bits, tok(t, "{")) && !bit(bits, tok(t, "}")) && !bit(bits, 2) && !bit(bits, 1) && !bit(bits, id_call));
        CHECK(!lm_grammar_matcher_can_end(m) && !lm_grammar_matcher_accept(m, 2) && !lm_grammar_matcher_accept(m, 1));
        brute(m, nv, "json start");
        const char *seq[] = {"{", "\"a", "bc", "\":", U2581, "\"", "\xc3\xa9", "hello", "\",", U2581 "\"", "x", "\":", U2581, "[", "12", ",", "3", "]", "}"};
        for (size_t i = 0; i < sizeof seq / sizeof *seq; i++) {
            char where[64];
            snprintf(where, sizeof where, "json after %zu tokens", i);
            brute(m, nv, where);
            CHECKF(lm_grammar_matcher_accept(m, tok(t, seq[i])), "token %zu '%s'", i, seq[i]);
        }
        lm_grammar_matcher_fill_mask(m, bits);
        CHECK(bit(bits, 2) && lm_grammar_matcher_can_end(m) && !lm_grammar_matcher_is_done(m)); // ws may follow
        brute(m, nv, "json end");
        CHECK(lm_grammar_matcher_accept(m, 2));
        // an emoji split over byte tokens inside a string
        CHECK(lm_grammar_matcher_rollback(m, 1));
        lm_grammar_matcher_free(m);
        CHECK(lm_grammar_matcher_init(&m, gj) == LM_OK);
        CHECK(lm_grammar_matcher_accept(m, tok(t, "{")) && lm_grammar_matcher_accept(m, tok(t, "\"")));
        const uint8_t emoji[4] = {0xF0, 0x9F, 0x98, 0x80};
        for (int i = 0; i < 4; i++) {
            brute(m, nv, "inside an emoji");
            CHECKF(lm_grammar_matcher_accept(m, b0 + emoji[i]), "emoji byte %d", i);
        }
        CHECK(!lm_grammar_matcher_accept(m, b0 + 0x80)); // stray continuation byte
        CHECK(lm_grammar_matcher_accept(m, b0 + 0xC3));
        CHECK(!lm_grammar_matcher_accept(m, tok(t, "a"))); // a lead byte then ASCII
        CHECK(lm_grammar_matcher_accept(m, b0 + 0xA9));
        // rollback
        lm_grammar_matcher_fill_mask(m, bits);
        uint32_t before[64];
        memcpy(before, bits, sizeof before);
        CHECK(lm_grammar_matcher_accept(m, tok(t, "\":")) && lm_grammar_matcher_accept(m, tok(t, "1")));
        CHECK(lm_grammar_matcher_rollback(m, 2));
        lm_grammar_matcher_fill_mask(m, bits);
        CHECK(!memcmp(before, bits, sizeof bits));
        CHECK(!lm_grammar_matcher_rollback(m, 100) && !lm_grammar_matcher_rollback(m, LM_GRAMMAR_MAX_ROLLBACK + 1));
        lm_grammar_matcher_free(m);
    }
}

// without cores (their memory bound reached) masks are whole walks, the same
static void test_no_cores(struct lm_tokenizer *t, int32_t nv) {
    uint64_t warm_ns = lm_grammar_warm_ns;
    lm_grammar_warm_ns = 0;
    struct lm_grammar *gn = compile(t, json);
    lm_grammar_warm_ns = warm_ns;
    if (gn) {
        gn->masks.max_cores = 0;
        struct lm_grammar_matcher *m;
        CHECK(lm_grammar_matcher_init(&m, gn) == LM_OK);
        const char *seq[] = {"{", "\"a", "\xc3\xa9", "\":", U2581, "[", "12", "]", "}"};
        for (size_t i = 0; i < sizeof seq / sizeof *seq; i++) {
            brute(m, nv, "no cores");
            CHECK(lm_grammar_matcher_accept(m, tok(t, seq[i])));
        }
        brute(m, nv, "no cores, at the end");
        CHECK(gn->masks.n_cores == 0);
        lm_grammar_matcher_free(m);
        lm_grammar_free(gn);
    }
}

// a grammar whose caches hit a limit restarts them once no matcher is alive
static void test_cache_restart(struct lm_tokenizer *t, int32_t nv) {
    if (gj) {
        struct lm_grammar_matcher *m, *m2;
        CHECK(lm_grammar_matcher_init(&m, gj) == LM_OK);
        gj->eng.exhausted = true; // as if a memory limit was reached
        CHECK(lm_grammar_matcher_init(&m2, gj) == LM_OK && gj->eng.exhausted); // m alive: kept
        lm_grammar_matcher_free(m2);
        CHECK(lm_grammar_matcher_accept(m, tok(t, "{")));
        lm_grammar_matcher_free(m);
        CHECK(lm_grammar_matcher_init(&m, gj) == LM_OK && !gj->eng.exhausted && gj->eng.n_states < 50);
        const char *seq[] = {"{", "\"a", "\":", "[", "12", "]", "}"};
        for (size_t i = 0; i < sizeof seq / sizeof *seq; i++) {
            brute(m, nv, "after a restart");
            CHECK(lm_grammar_matcher_accept(m, tok(t, seq[i])));
        }
        CHECK(lm_grammar_matcher_can_end(m));
        lm_grammar_matcher_free(m);
    }
}

// many stacks (more than mask.c cuts): whole-state walks, the same masks
static void test_many_stacks(struct lm_tokenizer *t, int32_t nv) {
    char amb[2048];
    size_t an = (size_t)snprintf(amb, sizeof amb, "root ::= \"x\" (");
    for (int i = 0; i < 24; i++) an += (size_t)snprintf(amb + an, sizeof amb - an, "%s[a-%c]* \"%d\"", i ? " | " : "", 'c' + i, i % 4);
    snprintf(amb + an, sizeof amb - an, ")");
    struct lm_grammar *gm = compile(t, amb);
    if (gm) {
        struct lm_grammar_matcher *m;
        CHECK(lm_grammar_matcher_init(&m, gm) == LM_OK);
        brute(m, nv, "ambiguous start");
        CHECK(lm_grammar_matcher_accept(m, tok(t, "x")));
        brute(m, nv, "ambiguous after x");
        CHECK(lm_grammar_matcher_accept(m, tok(t, "ab")));
        brute(m, nv, "ambiguous after xab");
        CHECK(lm_grammar_matcher_accept(m, tok(t, "2")) && lm_grammar_matcher_is_done(m));
        lm_grammar_matcher_free(m);
        lm_grammar_free(gm);
    }
}

// forced runs and is_done
static void test_forced(struct lm_tokenizer *t, int32_t nv) {
    gf = compile(t, "root ::= \"{\\\"abc\\\": \" [0-9] \"}\"");
    if (gf) {
        struct lm_grammar_matcher *m;
        CHECK(lm_grammar_matcher_init(&m, gf) == LM_OK);
        int32_t out[8];
        int32_t n = lm_grammar_matcher_forced(m, out, 8);
        // forced text {"abc": , longest tokens first: { "a bc ": (space)
        CHECKF(n == 5 && out[0] == tok(t, "{") && out[1] == tok(t, "\"a") && out[2] == tok(t, "bc") && out[3] == tok(t, "\":") && out[4] == tok(t, U2581), "forced n=%d: %d %d %d %d %d", n, out[0], out[1], out[2], out[3], out[4]);
        CHECK(lm_grammar_matcher_forced(m, out, 2) == 2);
        for (int32_t i = 0; i < n && i < 5; i++) CHECK(lm_grammar_matcher_accept(m, out[i]));
        CHECK(lm_grammar_matcher_forced(m, out, 8) == 0); // a digit: ten choices
        CHECK(lm_grammar_matcher_accept(m, tok(t, "1")));
        n = lm_grammar_matcher_forced(m, out, 8);
        CHECKF(n == 1 && out[0] == tok(t, "}"), "n=%d out0=%d", n, out[0]);
        CHECK(!lm_grammar_matcher_is_done(m) && lm_grammar_matcher_accept(m, tok(t, "}")));
        CHECK(lm_grammar_matcher_is_done(m) && lm_grammar_matcher_can_end(m));
        uint32_t bits[64];
        lm_grammar_matcher_fill_mask(m, bits);
        int cnt = 0;
        for (int w = 0; w < (nv + 31) / 32; w++) cnt += __builtin_popcount(bits[w]);
        CHECK(cnt == 1 && bit(bits, 2)); // only end of generation
        lm_grammar_matcher_free(m);
    }
}

// lazy triggers: a special token's text and a text split across tokens
static void test_lazy(struct lm_tokenizer *t, int32_t nv, int32_t id_call) {
    const char *trig[] = {"<tool_call>", "@@call"};
    struct lm_grammar_options o = lm_grammar_options_default();
    o.triggers = trig, o.n_triggers = 2;
    const char *lazy = "root ::= (\"<tool_call>\" | \"@@call\") \"{\" [a-z]* \"}\"";
    gl = NULL;
    CHECKF(lm_grammar_compile(&gl, t, lazy, strlen(lazy), &o) == LM_OK, "%s", lm_error_msg());
    if (gl) {
        struct lm_grammar_matcher *m;
        CHECK(lm_grammar_matcher_init(&m, gl) == LM_OK);
        uint32_t bits[64];
        lm_grammar_matcher_fill_mask(m, bits);
        int cnt = 0;
        for (int w = 0; w < (nv + 31) / 32; w++) cnt += __builtin_popcount(bits[w]);
        CHECK(cnt == nv && lm_grammar_matcher_can_end(m));
        CHECK(lm_grammar_matcher_accept(m, tok(t, "hello")) && lm_grammar_matcher_accept(m, tok(t, "}")));
        CHECK(lm_grammar_matcher_accept(m, id_call));
        lm_grammar_matcher_fill_mask(m, bits);
        CHECK(bit(bits, tok(t, "{")) && !bit(bits, tok(t, "hello")) && !bit(bits, 2));
        brute(m, nv, "after the trigger token");
        CHECK(lm_grammar_matcher_rollback(m, 1)); // before the trigger again: free
        lm_grammar_matcher_fill_mask(m, bits);
        CHECK(bit(bits, tok(t, "hello")));
        CHECK(lm_grammar_matcher_accept(m, tok(t, "@@")) && lm_grammar_matcher_accept(m, tok(t, "call")));
        lm_grammar_matcher_fill_mask(m, bits);
        CHECK(bit(bits, tok(t, "{")) && !bit(bits, tok(t, "hello")));
        CHECK(lm_grammar_matcher_accept(m, tok(t, "{")) && lm_grammar_matcher_accept(m, tok(t, "abc")) && lm_grammar_matcher_accept(m, tok(t, "}")));
        CHECK(lm_grammar_matcher_is_done(m) && lm_grammar_matcher_accept(m, 2));
        lm_grammar_matcher_free(m);
    }
}

// hostile: an ambiguous grammar whose stacks double per byte stops at the limit
static void test_hostile(struct lm_tokenizer *t) {
    gh = compile(t, "root ::= a\na ::= \"a\" a \"b\" | \"a\" a \"c\" | \"\"");
    if (gh) {
        struct lm_grammar_matcher *m;
        CHECK(lm_grammar_matcher_init(&m, gh) == LM_OK);
        int i = 0;
        while (i < 40 && lm_grammar_matcher_accept(m, tok(t, "a"))) i++;
        CHECKF(i >= 8 && i < 40 && strstr(lm_error_msg(), "limit"), "%d: %s", i, lm_error_msg());
        lm_grammar_matcher_free(m);
    }
    // so ambiguous that its start already has more stacks than the limit: refused at compile
    const char *amb0 = "root ::= (((\"a\"{0,30}){0,30}){0,30})";
    struct lm_grammar *ga0 = NULL;
    CHECKF(lm_grammar_compile(&ga0, t, amb0, strlen(amb0), NULL) == LM_ERR_ARG && !ga0 && strstr(lm_error_msg(), "start of rule 'root': grammar matcher:") && strstr(lm_error_msg(), "limit"),
           "%s", lm_error_msg());
    struct lm_grammar_options lo = lm_grammar_options_default();
    lo.max_rules = 4;
    struct lm_grammar *gx = NULL;
    CHECK(lm_grammar_compile(&gx, t, json, jl, &lo) == LM_ERR_ARG && gx == NULL && strstr(lm_error_msg(), "more rules than the limit"));
    CHECK(lm_grammar_compile(&gx, t, "root ::= [", 10, NULL) == LM_ERR_ARG && strstr(lm_error_msg(), "gbnf:1:10"));
}

int main(void) {
    int32_t id_call, b0;
    struct lm_tokenizer *t = make_vocab(&id_call, &b0);
    if (!t) return lm_test_finish();
    const int32_t nv = t->n_vocab;
    CHECK(nv <= 64 * 32);

    test_strings(t);
    test_masks(t, nv, id_call, b0);
    test_no_cores(t, nv);
    test_cache_restart(t, nv);
    test_many_stacks(t, nv);
    test_forced(t, nv);
    test_lazy(t, nv, id_call);
    test_hostile(t);

    // references: a matcher keeps its grammar alive
    if (ga) {
        struct lm_grammar_matcher *m;
        CHECK(lm_grammar_ref(ga) == ga);
        lm_grammar_free(ga);
        CHECK(lm_grammar_matcher_init(&m, ga) == LM_OK);
        lm_grammar_free(ga);
        CHECK(lm_grammar_matcher_accept(m, tok(t, "x")));
        lm_grammar_matcher_free(m);
    }
    lm_grammar_free(NULL);
    lm_grammar_free(gj), lm_grammar_free(gu), lm_grammar_free(gf), lm_grammar_free(gl), lm_grammar_free(gh);
    lm_tokenizer_free(t);
    return lm_test_finish();
}
