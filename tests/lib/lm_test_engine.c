// Engine request records for the tests (lm_test_engine.h): the callback and comparison that
// test_runtime_grammar, _spec and _spec_draft each used to carry.
#include "lm_test_engine.h"

#include <string.h>

void lm_test_rec_on_event(void *user, const struct lm_event *ev) {
    struct lm_test_rec *r = user;
    if (ev->token >= 0 && r->n < LM_TEST_REC_MAX) r->tok[r->n++] = ev->token;
    if (ev->finish != LM_FINISH_NONE) {
        r->finish = ev->finish;
        r->finals++;
    }
}

bool lm_test_rec_same(const struct lm_test_rec *a, const struct lm_test_rec *b) {
    return a->n == b->n && a->finish == b->finish && a->finals == 1 && b->finals == 1 &&
           !memcmp(a->tok, b->tok, (size_t)a->n * sizeof *a->tok);
}
