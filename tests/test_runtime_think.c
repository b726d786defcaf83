// A request's thinking span (runtime/think.c): opening by the start marker (one or several
// tokens, or the prompt), the budget forcing the end marker (completing one the model began),
// a natural end, budget 0, which tokens the grammar sees, a budget that forces only the close
// (harmony with tools), the submit check's errors.
// LM_TEST_LABELS: unit
#include <string.h>

#include "grammar/grammar.h"
#include "lm_test.h"
#include "runtime/request.h"
#include "tokenizer/tokenizer.h"

// A request with markers start[0, ns) / end[0, ne), open or not, with budget b.
static void setup(struct lm_req *r, const int32_t *start, int32_t ns, const int32_t *end, int32_t ne, bool open,
                  int32_t b) {
    memset(r, 0, sizeof *r);
    struct lm_request_params rp = lm_request_params_default();
    rp.think_start = start;
    rp.n_think_start = ns;
    rp.think_end = end;
    rp.n_think_end = ne;
    rp.think_open = open;
    rp.think_budget = b;
    r->rp = rp;
    CHECK(lm_think_check(&rp, 1000) == LM_OK);
    CHECK(lm_think_init(r, &rp) == LM_OK);
}

// Delivers toks as the model's draws (a forced token replaces the draw); returns the tokens
// delivered and the grammar's tokens in gram.
static int32_t run(struct lm_req *r, const int32_t *draws, int32_t n, int32_t *out, int32_t *gram, int32_t *n_gram) {
    int32_t buf[LM_THINK_MARKER_MAX + 1];
    *n_gram = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t f = lm_think_forced(r);
        const int32_t tok = f >= 0 ? f : draws[i];
        out[i] = tok;
        const int32_t k = lm_think_accept(r, tok, buf, NULL);
        for (int32_t j = 0; j < k; j++) gram[(*n_gram)++] = buf[j];
    }
    return n;
}

static bool same(const int32_t *a, const int32_t *b, int32_t n) { return memcmp(a, b, (size_t)n * sizeof *a) == 0; }

static void test_budget(void) {
    const int32_t open1[] = {7}, end1[] = {8};
    struct lm_req r;
    int32_t out[16], gram[16], ng;
    // <think> a a a (budget 3) -> </think> forced, then the answer (the grammar's)
    setup(&r, open1, 1, end1, 1, false, 3);
    const int32_t d1[] = {7, 1, 1, 1, 1, 2, 3};
    run(&r, d1, 7, out, gram, &ng);
    const int32_t w1[] = {7, 1, 1, 1, 8, 2, 3};
    CHECK(same(out, w1, 7) && ng == 2 && gram[0] == 2 && gram[1] == 3 && r.think.state == LM_THINK_OFF);
    lm_think_free(&r);
    // a natural end before the budget: nothing forced
    setup(&r, open1, 1, end1, 1, false, 5);
    const int32_t d2[] = {7, 1, 8, 2};
    run(&r, d2, 4, out, gram, &ng);
    CHECK(same(out, d2, 4) && ng == 1 && gram[0] == 2);
    lm_think_free(&r);
    // budget 0: the end right after the start
    setup(&r, open1, 1, end1, 1, false, 0);
    const int32_t d3[] = {7, 1, 2};
    run(&r, d3, 3, out, gram, &ng);
    const int32_t w3[] = {7, 8, 2};
    CHECK(same(out, w3, 3) && ng == 1 && gram[0] == 2);
    lm_think_free(&r);
    // no span: every token is the answer's, nothing forced whatever the budget
    setup(&r, open1, 1, end1, 1, false, 0);
    const int32_t d4[] = {1, 7, 2};
    run(&r, d4, 3, out, gram, &ng);
    CHECK(same(out, d4, 3) && ng == 3 && same(gram, d4, 3));
    lm_think_free(&r);
    // the prompt opened the span (R1): budget 2 counts from the first token; budget 0 forces at once
    setup(&r, open1, 1, end1, 1, true, 2);
    const int32_t d5[] = {1, 1, 1, 2};
    run(&r, d5, 4, out, gram, &ng);
    const int32_t w5[] = {1, 1, 8, 2};
    CHECK(same(out, w5, 4) && ng == 1 && gram[0] == 2);
    lm_think_free(&r);
    setup(&r, open1, 1, end1, 1, true, 0);
    CHECK(lm_think_forced(&r) == 8);
    lm_think_free(&r);
    // no budget: the span runs on
    setup(&r, open1, 1, end1, 1, true, -1);
    const int32_t d6[] = {1, 1, 1, 1};
    run(&r, d6, 4, out, gram, &ng);
    CHECK(same(out, d6, 4) && ng == 0 && r.think.state == LM_THINK_IN);
    lm_think_free(&r);
}

static void test_multi_token(void) {
    const int32_t open2[] = {7, 9}, end3[] = {8, 9, 10};
    struct lm_req r;
    int32_t out[16], gram[16], ng;
    // the model begins the end marker (8 9) at the budget: the rest (10) is forced
    setup(&r, open2, 2, end3, 3, false, 4);
    const int32_t d1[] = {7, 9, 1, 1, 8, 9, 5, 2};
    run(&r, d1, 8, out, gram, &ng);
    const int32_t w1[] = {7, 9, 1, 1, 8, 9, 10, 2};
    CHECK(same(out, w1, 8) && ng == 1 && gram[0] == 2);
    lm_think_free(&r);
    // a half-seen start marker that is not one: its tokens go to the grammar with the next
    setup(&r, open2, 2, end3, 3, false, 4);
    CHECK(lm_req_grammar_on(&r) == false); // no grammar here
    const int32_t d2[] = {7, 3, 4};
    run(&r, d2, 3, out, gram, &ng);
    const int32_t g2[] = {7, 3, 4};
    CHECK(same(out, d2, 3) && ng == 3 && same(gram, g2, 3));
    lm_think_free(&r);
    // the mask gains the start marker's first token before the first draw only
    setup(&r, open2, 2, end3, 3, false, -1);
    uint32_t mask[1] = {0};
    lm_think_mask(&r, mask, 32);
    CHECK(mask[0] == 1u << 7);
    int32_t buf[4];
    lm_think_accept(&r, 3, buf, NULL);
    mask[0] = 0;
    lm_think_mask(&r, mask, 32);
    CHECK(mask[0] == 0);
    lm_think_free(&r);
}

// harmony's form: the span ends at the end marker's first token (n_think_close 1) though the
// budget delivers all of it; the forced tokens after the first are the answer's (the grammar's),
// as they are when the model writes them.
static void test_close_prefix(void) {
    const int32_t open3[] = {7, 9, 11}, end4[] = {8, 12, 13, 14};
    struct lm_req r;
    int32_t out[16], gram[16], ng;
    setup(&r, open3, 3, end4, 4, false, 2);
    r.rp.n_think_close = 1;
    r.think.n_close = 1;
    const int32_t d1[] = {7, 9, 11, 1, 1, 1, 1, 1, 1, 2};
    run(&r, d1, 10, out, gram, &ng);
    const int32_t w1[] = {7, 9, 11, 1, 1, 8, 12, 13, 14, 2}, g1[] = {12, 13, 14, 2};
    CHECK(same(out, w1, 10) && ng == 4 && same(gram, g1, 4));
    lm_think_free(&r);
    // the model ends the span itself (8) and goes on elsewhere (12 5: a tool call's header):
    // nothing is forced, the grammar sees all after 8, the budget no longer counts
    struct lm_request_params rp = lm_request_params_default();
    rp.think_start = open3;
    rp.n_think_start = 3;
    rp.think_end = end4;
    rp.n_think_end = 4;
    rp.n_think_close = 1;
    rp.think_budget = 3;
    CHECK(lm_think_check(&rp, 1000) == LM_OK);
    memset(&r, 0, sizeof r);
    r.rp = rp;
    CHECK(lm_think_init(&r, &rp) == LM_OK && r.think.n_close == 1);
    const int32_t d2[] = {7, 9, 11, 1, 8, 12, 5, 5, 5};
    run(&r, d2, 9, out, gram, &ng);
    const int32_t g2[] = {12, 5, 5, 5};
    CHECK(same(out, d2, 9) && ng == 4 && same(gram, g2, 4) && r.think.state == LM_THINK_OFF);
    lm_think_free(&r);
    rp.n_think_close = 5;
    CHECK(lm_think_check(&rp, 1000) == LM_ERR_ARG && strstr(lm_error_msg(), "n_think_close 5"));
}

// harmony's markers in a tiny vocabulary with a real grammar: "analysis" is two tokens (as in
// gpt-oss's BPE), <|channel|> is both the start marker's first token and the grammar's (the
// tokenizer makes the header tokens USER_DEFINED, text a grammar matches, as llama.cpp does;
// <|return|> and <|call|> end generation; issue 35).
enum { T_RET = 1, T_CALL, T_CHAN, T_MSG, T_END, T_START, T_AN, T_ALYSIS, T_FINAL, T_IT, T_ASSISTANT,
       T_COMMENTARY, T_TO, T_CONSTRAIN, T_JSON, T_LBRACE, T_RBRACE, T_NV };
static const int32_t h_start[] = {T_CHAN, T_AN, T_ALYSIS, T_MSG},
                     h_end[] = {T_END, T_START, T_ASSISTANT, T_CHAN, T_FINAL, T_MSG};

static struct lm_tokenizer *harmony_vocab(void) {
    const char *texts[T_NV] = {"<unk>", "<|return|>", "<|call|>", "<|channel|>", "<|message|>", "<|end|>", "<|start|>",
                               "an", "alysis", "final", "It", "assistant", "commentary", " to=functions.f",
                               "<|constrain|>", "json", "{", "}"};
    uint32_t lens[T_NV];
    int32_t types[T_NV];
    for (int i = 0; i < T_NV; i++) {
        lens[i] = (uint32_t)strlen(texts[i]);
        types[i] = i == 0 ? LM_TOK_TYPE_UNKNOWN
                   : i < T_AN || i == T_CONSTRAIN ? LM_TOK_TYPE_CONTROL : LM_TOK_TYPE_NORMAL;
    }
    struct lm_tokenizer_desc d = {.model = "llama", .n_vocab = T_NV, .texts = texts, .lens = lens, .types = types,
                                  .bos = -1, .eos = T_RET, .unk = 0, .pad = -1, .eot = -1, .eom = -1,
                                  .fim_pad = -1, .fim_rep = -1, .fim_sep = -1,
                                  .add_bos = 0, .add_eos = 0, .add_space_prefix = 0};
    struct lm_tokenizer *t = NULL;
    CHECKF(lm_tokenizer_init_desc(&t, &d, "harmony") == LM_OK, "%s", lm_error_msg());
    return t;
}

// r with harmony's markers (n_think_close 3), budget b and a matcher of gbnf (lazy with a
// trigger).
static void setup_harmony(struct lm_req *r, const struct lm_tokenizer *tk, const char *gbnf, int32_t b,
                          const char *trigger) {
    setup(r, h_start, 4, h_end, 6, false, b);
    r->rp.n_think_close = r->think.n_close = 3;
    struct lm_grammar *g = NULL;
    struct lm_grammar_options opt = lm_grammar_options_default();
    opt.triggers = &trigger;
    opt.n_triggers = trigger ? 1 : 0;
    CHECKF(lm_grammar_compile(&g, tk, gbnf, strlen(gbnf), &opt) == LM_OK, "%s", lm_error_msg());
    CHECK(lm_grammar_matcher_init(&r->gm, g) == LM_OK);
    lm_grammar_free(g);
}

// The next draw's mask as deliver.c computes it (0 when the grammar is off).
static uint32_t next_mask(struct lm_req *r) {
    uint32_t mask = 0;
    if (!lm_req_grammar_on(r)) return 0;
    lm_grammar_matcher_fill_mask(r->gm, &mask);
    lm_think_mask(r, &mask, T_NV);
    return mask;
}

// Delivers draws as deliver.c does: each drawn token is one the mask allows, and every token
// handed to the grammar is accepted. Returns the tokens delivered in out.
static void drive(struct lm_req *r, const int32_t *draws, int32_t n, int32_t *out) {
    int32_t buf[LM_THINK_MARKER_MAX + 1];
    for (int32_t i = 0; i < n; i++) {
        const int32_t f = lm_think_forced(r);
        const bool on = f < 0 && lm_req_grammar_on(r);
        const uint32_t mask = on ? next_mask(r) : 0;
        const int32_t tok = out[i] = f >= 0 ? f : draws[i];
        CHECKF(!on || (mask >> tok & 1u), "draw %d: token %d is not in the mask %#x", i, tok, mask);
        const int32_t k = lm_think_accept(r, tok, buf, NULL);
        for (int32_t j = 0; j < k; j++)
            CHECKF(lm_grammar_matcher_accept(r->gm, buf[j]), "draw %d: the grammar refused %d", i, buf[j]);
    }
}

static void test_harmony_grammar(void) {
    struct lm_tokenizer *tk = harmony_vocab();
    const char *g1 = "root ::= \"<|channel|>final<|message|>\" \"It\"";
    struct lm_req r;
    int32_t out[32];
    // <|channel|> is the grammar's and the marker's: the next draw is the grammar's ("final") or
    // the marker's ("an"), never a token that is neither
    setup_harmony(&r, tk, g1, -1, NULL);
    CHECK(next_mask(&r) == 1u << T_CHAN);
    drive(&r, (const int32_t[]){T_CHAN}, 1, out);
    CHECKF(next_mask(&r) == ((1u << T_AN) | (1u << T_FINAL)), "mask %#x", next_mask(&r));
    drive(&r, (const int32_t[]){T_FINAL, T_MSG, T_IT, T_RET}, 4, out);
    CHECK(r.think.state == LM_THINK_OFF && lm_grammar_matcher_is_done(r.gm));
    lm_grammar_matcher_free(r.gm);
    lm_think_free(&r);
    // budget 0, the model opens its analysis anyway: once the marker leaves the grammar, only the
    // marker's next token; the span opens, the grammar forgets the marker and sees the forced final
    setup_harmony(&r, tk, g1, 0, NULL);
    drive(&r, (const int32_t[]){T_CHAN, T_AN}, 2, out);
    CHECK(next_mask(&r) == 1u << T_ALYSIS);
    const int32_t d2[] = {T_ALYSIS, T_MSG, 0, 0, 0, 0, 0, 0, T_IT, T_RET};
    drive(&r, d2, 10, out);
    CHECK(same(out + 2, h_end, 6) && lm_grammar_matcher_is_done(r.gm));
    lm_grammar_matcher_free(r.gm);
    lm_think_free(&r);
    // a grammar that follows the marker part of the way ("an", "alysis" are letters): undone when
    // the marker completes; after the span the grammar starts afresh at <|channel|>
    setup_harmony(&r, tk, "root ::= \"<|channel|>\" [a-z]+", -1, NULL);
    drive(&r, (const int32_t[]){T_CHAN, T_AN, T_ALYSIS}, 3, out);
    // the grammar's letters and its end, or the marker's <|message|>
    CHECK(next_mask(&r) == ((1u << T_AN) | (1u << T_ALYSIS) | (1u << T_FINAL) | (1u << T_ASSISTANT) | (1u << T_RET) |
                            (1u << T_CALL) | (1u << T_COMMENTARY) | (1u << T_JSON) | (1u << T_MSG)));
    drive(&r, (const int32_t[]){T_MSG, T_IT, T_END, T_START, T_ASSISTANT}, 5, out);
    CHECK(r.think.state == LM_THINK_OFF && next_mask(&r) == 1u << T_CHAN);
    drive(&r, (const int32_t[]){T_CHAN, T_FINAL, T_AN, T_RET}, 4, out);
    lm_grammar_matcher_free(r.gm);
    lm_think_free(&r);
    // a marker the grammar does not allow at all: the mask adds its first token, and once begun
    // holds only its next token
    setup_harmony(&r, tk, "root ::= \"It\"", -1, NULL);
    CHECK(next_mask(&r) == ((1u << T_IT) | (1u << T_CHAN)));
    drive(&r, (const int32_t[]){T_CHAN}, 1, out);
    CHECK(next_mask(&r) == 1u << T_AN);
    drive(&r, (const int32_t[]){T_AN, T_ALYSIS, T_MSG, T_IT, T_END, T_START, T_ASSISTANT, T_IT}, 8, out);
    CHECK(lm_grammar_matcher_is_done(r.gm));
    lm_grammar_matcher_free(r.gm);
    lm_think_free(&r);
    // tools: a call to functions.f starts the answer, no analysis; the lazy grammar saw its header
    // from the <|channel|> on (the marker's first token) and constrains the arguments after it
    const char *trig = "to=functions.f<|constrain|>json<|message|>";
    setup_harmony(&r, tk, "root ::= \"to=functions.f<|constrain|>json<|message|>\" \"{}\"", -1, trig);
    CHECK(next_mask(&r) == (1u << T_NV) - 1);
    drive(&r, (const int32_t[]){T_CHAN}, 1, out);
    CHECK(next_mask(&r) == (1u << T_NV) - 1);
    drive(&r, (const int32_t[]){T_COMMENTARY, T_TO, T_CONSTRAIN, T_JSON, T_MSG}, 5, out);
    CHECK(r.think.state == LM_THINK_OFF && next_mask(&r) == 1u << T_LBRACE);
    drive(&r, (const int32_t[]){T_LBRACE, T_RBRACE}, 2, out);
    CHECK(lm_grammar_matcher_is_done(r.gm));
    lm_grammar_matcher_free(r.gm);
    lm_think_free(&r);
    // an analysis first: the lazy grammar forgets the marker, and the call after the span is seen
    setup_harmony(&r, tk, "root ::= \"to=functions.f<|constrain|>json<|message|>\" \"{}\"", -1, trig);
    const int32_t d5[] = {T_CHAN, T_AN, T_ALYSIS, T_MSG, T_IT, T_END, T_START, T_ASSISTANT,
                          T_CHAN, T_COMMENTARY, T_TO, T_CONSTRAIN, T_JSON, T_MSG};
    drive(&r, d5, 14, out);
    CHECK(next_mask(&r) == 1u << T_LBRACE);
    lm_grammar_matcher_free(r.gm);
    lm_think_free(&r);
    lm_tokenizer_free(tk);
}

// harmony with tools: the budget forces only the close (<|end|><|start|>assistant, n_think_force 3)
// and the model chooses how the answer goes on (a call here); the span cannot open again: after
// <|channel|>an alysis the mask drops <|message|>, with the lazy tool grammar and without a grammar
static void test_force_close_only(void) {
    struct lm_tokenizer *tk = harmony_vocab();
    const char *trig = "to=functions.f<|constrain|>json<|message|>";
    struct lm_req r;
    int32_t out[32];
    setup_harmony(&r, tk, "root ::= \"to=functions.f<|constrain|>json<|message|>\" \"{}\"", 1, trig);
    r.rp.n_think_force = r.think.n_force = 3;
    const int32_t d1[] = {T_CHAN, T_AN, T_ALYSIS, T_MSG, T_IT, 0, 0, 0, T_CHAN, T_AN, T_ALYSIS};
    drive(&r, d1, 11, out);
    CHECK(same(out + 5, h_end, 3) && r.think.state == LM_THINK_SPENT);
    CHECKF(next_mask(&r) == (((1u << T_NV) - 1) & ~(1u << T_MSG)), "mask %#x", next_mask(&r));
    // a call in the analysis channel after the cut: the grammar sees it from the close on
    drive(&r, (const int32_t[]){T_TO, T_CONSTRAIN, T_JSON, T_MSG}, 4, out);
    CHECK(next_mask(&r) == 1u << T_LBRACE);
    drive(&r, (const int32_t[]){T_LBRACE, T_RBRACE}, 2, out);
    CHECK(lm_grammar_matcher_is_done(r.gm) && r.think.state == LM_THINK_SPENT);
    lm_grammar_matcher_free(r.gm);
    lm_think_free(&r);
    // no grammar: every token but <|message|> after <|channel|>an alysis; a final answer goes on
    setup(&r, h_start, 4, h_end, 6, false, 0);
    r.rp.n_think_close = r.think.n_close = 3;
    r.rp.n_think_force = r.think.n_force = 3;
    int32_t gram[32], ng;
    const int32_t d2[] = {T_CHAN, T_AN, T_ALYSIS, T_MSG, 0, 0, 0, T_CHAN, T_AN, T_ALYSIS};
    run(&r, d2, 10, out, gram, &ng);
    const int32_t g2[] = {T_CHAN, T_AN, T_ALYSIS};
    CHECK(same(out + 4, h_end, 3) && ng == 3 && same(gram, g2, 3) && lm_req_masked(&r) && !lm_req_grammar_on(&r));
    uint32_t m = 0;
    lm_think_mask(&r, &m, T_NV);
    CHECKF(m == (((1u << T_NV) - 1) & ~(1u << T_MSG)), "mask %#x", m);
    run(&r, (const int32_t[]){T_CHAN, T_FINAL, T_MSG, T_IT}, 4, out, gram, &ng); // <|channel|> again: match 1
    m = 0;
    lm_think_mask(&r, &m, T_NV);
    CHECK(ng == 4 && m == (1u << T_NV) - 1 && lm_think_forced(&r) < 0);
    lm_think_free(&r);
    lm_tokenizer_free(tk);
}

static void test_check(void) {
    const int32_t ok[] = {1}, bad[] = {5000};
    struct lm_request_params rp = lm_request_params_default();
    CHECK(rp.think_budget == -1 && lm_think_check(&rp, 100) == LM_OK); // no span: nothing to check
    rp.think_end = ok;
    rp.n_think_end = 1;
    rp.think_budget = -2;
    CHECK(lm_think_check(&rp, 100) == LM_ERR_ARG && strstr(lm_error_msg(), "think_budget -2"));
    rp.think_budget = 4;
    rp.think_end = bad;
    CHECK(lm_think_check(&rp, 100) == LM_ERR_ARG && strstr(lm_error_msg(), "5000"));
    rp.think_end = ok;
    rp.n_think_end = LM_THINK_MARKER_MAX + 1;
    CHECK(lm_think_check(&rp, 100) == LM_ERR_ARG);
    rp.n_think_end = 1;
    rp.n_think_start = 1; // without its array
    CHECK(lm_think_check(&rp, 100) == LM_ERR_ARG);
    rp.n_think_start = 0;
    rp.n_think_force = 2; // beyond the one-token end marker
    CHECK(lm_think_check(&rp, 100) == LM_ERR_ARG && strstr(lm_error_msg(), "n_think_force 2"));
}

int main(void) {
    test_budget();
    test_multi_token();
    test_close_prefix();
    test_harmony_grammar();
    test_force_close_only();
    test_check();
    return lm_test_finish();
}
