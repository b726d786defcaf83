// Helper of bench/same_outputs.sh (takes arguments, so it is not a ctest): prints what a
// build computes on a model as lines of text, so that two builds (before and after a change
// meant to keep every output) can be compared with diff. Uses include/lumen.h only, so the
// same source builds against any tree's lumen_core.
//   outputs_dump MODEL [DRAFT.gguf]
// Per thread count (1, 2): a prefill and greedy decode through lm_decode with a 64-bit hash
// of every logits row (bit-exact), then the engine on six concurrent requests (greedy,
// seeded sampling, prompt lookup greedy and sampled, top-k off, a repeat penalty) and, with
// DRAFT, draft-model requests (greedy and sampled, fixed lengths: adaptive ones follow
// measured times): every token id of every request. Nothing printed depends on timing.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lumen.h"

#define N_GEN 24

static uint64_t hash_row(const float *x, int32_t n) { // FNV-1a over the float bits
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)x;
    for (size_t i = 0; i < (size_t)n * sizeof *x; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static int fail(const char *what) {
    fprintf(stderr, "outputs_dump: %s: %s\n", what, lm_error_msg());
    return 1;
}

static const char *const PROMPTS[] = {
    "The capital of France is",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\ndef fibonacci(n):",
    "Once upon a time, in a small village by the sea, there lived",
    "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,",
    "Q: What is the boiling point of water?\nA:",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
};
#define N_PROMPTS (int)(sizeof PROMPTS / sizeof *PROMPTS)

// Prefill of prompt 1 in one lm_decode (logits at every position), then N_GEN greedy steps.
static int dump_context(struct lm_model *m, int nth) {
    const struct lm_tokenizer *tok = lm_model_tokenizer(m);
    const int32_t nv = lm_model_n_vocab(m);
    int32_t *ids = NULL;
    size_t n = 0;
    if (lm_tokenize(tok, PROMPTS[1], strlen(PROMPTS[1]), true, false, &ids, &n) != LM_OK)
        return fail("tokenize");
    if (n > 128) n = 128; // byte-level synthetic vocabularies: 176 tokens
    struct lm_context_params cp = {.n_ctx = 256, .n_threads = nth, .n_batch = 128};
    struct lm_context *c = NULL;
    if (lm_context_init(&c, m, &cp) != LM_OK) return fail("context");
    struct lm_batch_entry b[128];
    for (size_t i = 0; i < n; i++) b[i] = (struct lm_batch_entry){ids[i], (int32_t)i, 0, true};
    if (lm_decode(c, b, (int32_t)n) != LM_OK) return fail("decode");
    printf("context t%d prefill %zu tokens:", nth, n);
    for (size_t i = 0; i < n; i++) printf(" %016" PRIx64, hash_row(lm_get_logits(c, (int32_t)i), nv));
    printf("\ncontext t%d greedy:", nth);
    int32_t next = argmax(lm_get_logits(c, (int32_t)n - 1), nv);
    for (int g = 0; g < N_GEN; g++) {
        const struct lm_batch_entry e = {next, (int32_t)(n + g), 0, true};
        if (lm_decode(c, &e, 1) != LM_OK) return fail("decode");
        const float *lg = lm_get_logits(c, 0);
        printf(" %d:%016" PRIx64, next, hash_row(lg, nv));
        next = argmax(lg, nv);
    }
    printf("\n");
    lm_context_free(c);
    free(ids);
    return 0;
}

struct collect {
    int32_t toks[N_PROMPTS * 2][N_GEN + 1];
    int32_t n[N_PROMPTS * 2];
    int finish[N_PROMPTS * 2];
    uint64_t ids[N_PROMPTS * 2];
    int n_req;
};

static void on_event(void *user, const struct lm_event *ev) {
    struct collect *col = user;
    for (int i = 0; i < col->n_req; i++)
        if (col->ids[i] == ev->id) {
            if (ev->token >= 0 && col->n[i] <= N_GEN) col->toks[i][col->n[i]++] = ev->token;
            if (ev->finish != LM_FINISH_NONE) col->finish[i] = (int)ev->finish;
        }
}

// The engine with several requests at once; mode 0: plain and lookup, 1: draft model.
static int dump_engine(struct lm_model *m, struct lm_model *draft, int nth, int mode) {
    struct lm_engine_params ep = {.max_running = 4, .max_waiting = 16, .step_tokens = 64,
                                  .n_ctx = 256, .n_threads = nth,
                                  .draft_model = mode == 1 ? draft : NULL};
    struct lm_engine *e = NULL;
    if (lm_engine_init(&e, m, &ep) != LM_OK) return fail("engine");
    static struct collect col;
    memset(&col, 0, sizeof col);
    const struct lm_tokenizer *tok = lm_model_tokenizer(m);
    const int n_req = mode == 0 ? N_PROMPTS * 2 : N_PROMPTS;
    for (int i = 0; i < n_req; i++) {
        const char *p = PROMPTS[i % N_PROMPTS];
        int32_t *ids = NULL;
        size_t n = 0;
        if (lm_tokenize(tok, p, strlen(p), true, false, &ids, &n) != LM_OK) return fail("tokenize");
        struct lm_request_params rp = lm_request_params_default();
        rp.max_tokens = N_GEN;
        rp.ignore_eos = true;
        rp.sampling.seed = 1000 + (uint64_t)i;
        const int kind = i % 4;
        if (kind == 0) rp.sampling.temperature = 0.0f;              // greedy
        if (kind == 2) rp.sampling.top_k = 0;                      // full-row sampling
        if (kind == 3) rp.sampling.repeat_penalty = 1.1f;          // penalties
        if (mode == 0) rp.lookup = i >= N_PROMPTS;                 // second half: lookup
        else {
            rp.use_draft = true;
            rp.draft_fixed = true; // adaptive lengths follow measured times: not repeatable
        }
        col.n_req = i + 1;
        if (lm_engine_submit(e, ids, (int32_t)n, &rp, on_event, &col, &col.ids[i]) != LM_OK)
            return fail("submit");
        free(ids);
    }
    for (int32_t left = 1; left > 0;) {
        left = lm_engine_step(e);
        if (left < 0) return fail("step");
    }
    for (int i = 0; i < n_req; i++) {
        printf("engine t%d %s req %d finish %d:", nth, mode ? "draft" : "plain", i, col.finish[i]);
        for (int j = 0; j < col.n[i]; j++) printf(" %d", col.toks[i][j]);
        printf("\n");
    }
    lm_engine_free(e);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s MODEL [DRAFT.gguf] > outputs.txt\n", argv[0]);
        return 2;
    }
    struct lm_model *m = NULL, *d = NULL;
    if (lm_model_load(&m, argv[1], NULL) != LM_OK) return fail(argv[1]);
    if (argc > 2 && lm_model_load(&d, argv[2], NULL) != LM_OK) return fail(argv[2]);
    for (int nth = 1; nth <= 2; nth++) {
        if (dump_context(m, nth)) return 1;
        if (dump_engine(m, d, nth, 0)) return 1;
        if (d && dump_engine(m, d, nth, 1)) return 1;
        fflush(stdout);
    }
    lm_model_free(d);
    lm_model_free(m);
    return 0;
}
