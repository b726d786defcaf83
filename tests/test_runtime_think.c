// A request's thinking span (runtime/think.c): opening by the start marker (one or several
// tokens, or the prompt), the budget forcing the end marker (completing one the model began),
// a natural end, budget 0, which tokens the grammar sees, the submit check's errors.
// LM_TEST_LABELS: unit
#include <string.h>

#include "lm_test.h"
#include "runtime/request.h"

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
    // a start marker the grammar did not allow (7 not in its mask): once begun, the mask holds
    // only the marker's next token; one it allowed: the mask is off while it is half seen
    setup(&r, open3, 3, end4, 4, false, -1);
    r.gm = (struct lm_grammar_matcher *)&r; // only tested for being set
    uint32_t mask[2] = {1u << 3, 0};
    lm_think_mask(&r, mask, 64);
    CHECK(mask[0] == ((1u << 3) | (1u << 7)) && !r.think.start_free);
    int32_t buf[4];
    lm_think_accept(&r, 7, buf, NULL);
    CHECK(lm_req_grammar_on(&r));
    mask[0] = 1u << 3;
    mask[1] = 5;
    lm_think_mask(&r, mask, 64);
    CHECK(mask[0] == 1u << 9 && mask[1] == 0);
    lm_think_free(&r);
    setup(&r, open3, 3, end4, 4, false, -1);
    r.gm = (struct lm_grammar_matcher *)&r;
    mask[0] = 1u << 7;
    lm_think_mask(&r, mask, 64);
    lm_think_accept(&r, 7, buf, NULL);
    CHECK(r.think.start_free && !lm_req_grammar_on(&r));
    lm_think_free(&r);
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
}

int main(void) {
    test_budget();
    test_multi_token();
    test_close_prefix();
    test_check();
    return lm_test_finish();
}
