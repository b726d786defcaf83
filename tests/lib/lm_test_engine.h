// What an engine request's events said (lm_engine_submit's callback into a record), and the
// comparison the engine tests make of two runs. Part of the lumen_test library (tests/lib/*.c).
#ifndef LM_TEST_ENGINE_H
#define LM_TEST_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "lumen.h"

#define LM_TEST_REC_MAX 256 // tokens kept per request: above every test's max_tokens

// One request's events: its tokens (the first LM_TEST_REC_MAX), how it finished, and how many
// events said it finished (exactly one is right). Zero it before the submit.
struct lm_test_rec {
    int32_t tok[LM_TEST_REC_MAX];
    int n, finals;
    enum lm_finish finish;
};

// The lm_engine_submit callback: user is the request's struct lm_test_rec
void lm_test_rec_on_event(void *user, const struct lm_event *ev);
// Both finished once, the same way, with the same tokens
bool lm_test_rec_same(const struct lm_test_rec *a, const struct lm_test_rec *b);

#endif
