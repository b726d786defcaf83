// One forward path for every batch shape, and batch invariance bit for bit: a sequence's
// logits are the same (memcmp) whether its prompt is prefilled in one batch, token by
// token or in chunks of any size, whether it runs alone or beside 15 other sequences in
// mixed prefill/decode batches, and at 1 or 2 threads. Rollback is exact past the
// sliding window; sequence copies and prefix-cache attaches continue exactly as a full
// prefill would; holes are masked; a full pool refuses a batch without changing it; bad
// batches are rejected with a message.
// LM_TEST_LABELS: model
#include "lm_test.h"
#include "lm_test_model.h"
#include "lumen.h"

static int nv;

enum { NP = 40 }; // the prompt every sub-test on the shared context uses

// (a) one batch vs token by token vs chunks of odd sizes: identical bits
static void test_chunks(struct lm_context *c, const int32_t *prompt, float *ref, float *got) {
    CHECK(lm_test_prefill(c, 0, prompt, NP, NP, ref, nv));
    const int chunks[] = {1, 2, 3, 5, 7, 16, 17, 33};
    for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
        CHECK(lm_kv_cache_seq_rm(c, 0, 0, -1) == LM_OK);
        CHECK(lm_test_prefill(c, 0, prompt, NP, chunks[k], got, nv));
        const int bad = lm_test_first_diff(ref, got, NP, nv);
        CHECKF(bad < 0, "chunks of %d: position %d differs from the one-batch prefill", chunks[k], bad);
    }
}

// (b) beside 15 other sequences: mixed prefill chunks and decode tokens in every
// batch, sequence 0's logits identical to it alone
static void test_beside_others(struct lm_context *c, const int32_t *prompt, float *ref) {
    enum { NS = 16, GEN = 12 };
    int32_t other[NS][64];
    int olen[NS];
    for (int s = 1; s < NS; s++) { olen[s] = 9 + 3 * s; lm_test_prompt(other[s], olen[s], 100 + s); }
    // alone: prefill, then GEN greedy steps
    int32_t alone_tok[GEN];
    CHECK(lm_test_greedy_alone(c, prompt, NP, GEN, ref, alone_tok, nv));
    // together: sequence 0's prompt in chunks of 7 alongside the others' prompts in
    // chunks of 5, then decode steps of all 16 (greedy, each its own tokens)
    int pos[NS] = {0}, last[NS];
    int g0 = 0, diff = 0, steps = 0;
    bool done = false;
    while (!done && steps < 200) {
        struct lm_batch_entry b[256];
        int nb = 0, want0 = -1;
        for (int s = 0; s < NS; s++) {
            const int len = s ? olen[s] : NP;
            const int32_t *t = s ? other[s] : prompt;
            if (pos[s] < len) { // prefill chunk
                const int ch = s ? 5 : 7;
                for (int i = 0; i < ch && pos[s] < len; i++, pos[s]++) {
                    if (s == 0 && pos[s] == len - 1) want0 = nb;
                    b[nb++] = (struct lm_batch_entry){t[pos[s]], pos[s], s, pos[s] == len - 1};
                }
            } else { // decode
                if (s == 0) want0 = nb;
                b[nb++] = (struct lm_batch_entry){last[s], pos[s], s, true};
                pos[s]++;
            }
        }
        CHECK(lm_decode(c, b, nb) == LM_OK);
        steps++;
        int k = 0;
        for (int i = 0; i < nb; i++) {
            if (!b[i].want_logits) continue;
            const float *l = lm_get_logits(c, k++);
            last[b[i].seq] = lm_test_argmax(l, nv);
            if (i == want0) { // sequence 0 at generation step g0
                if (!lm_test_same(l, ref + (size_t)g0 * nv, nv) || last[0] != alone_tok[g0]) diff++;
                last[0] = alone_tok[g0]; // follow the alone path
                if (++g0 == GEN) done = true;
            }
        }
    }
    CHECKF(done && diff == 0, "sequence 0 beside 15 others: %d of %d steps differ", diff, g0);
    printf("beside 15 others (mixed prefill + decode, %d batches): %d generated positions bit-identical\n",
           steps, g0);
    for (int s = 0; s < NS; s++) CHECK(lm_kv_cache_seq_rm(c, s, 0, -1) == LM_OK);
}

// (c) 1 thread vs 2 threads: identical bits
static void test_threads(struct lm_model *m, struct lm_context_params cp, struct lm_context *c, const int32_t *prompt, float *ref, float *got) {
    struct lm_context_params c1p = cp;
    c1p.n_threads = 1;
    struct lm_context *c1 = NULL;
    CHECK(lm_context_init(&c1, m, &c1p) == LM_OK);
    CHECK(lm_test_prefill(c1, 0, prompt, NP, 13, got, nv));
    CHECK(lm_test_prefill(c, 0, prompt, NP, NP, ref, nv));
    const int bad = lm_test_first_diff(ref, got, NP, nv);
    CHECKF(bad < 0, "1 thread vs 2: position %d differs", bad);
    lm_context_free(c1);
    CHECK(lm_kv_cache_seq_rm(c, 0, 0, -1) == LM_OK);
}

// (d) rollback past the sliding window (Gemma 3: 512) and past n_batch: exact
static void test_rollback_window(struct lm_context *c, float *ref, float *got, bool quick) {
    const int L = quick ? 560 : 680, K = 150;
    int32_t *t = malloc(sizeof(int32_t) * (size_t)L);
    lm_test_prompt(t, L, 7);
    CHECK(lm_test_prefill(c, 3, t, L, 256, ref, nv));
    CHECK(lm_kv_cache_seq_rm(c, 3, L - K, -1) == LM_OK && lm_kv_cache_seq_pos(c, 3) == L - K);
    CHECK(lm_test_prefill(c, 3, t + (L - K), K, 1, got, nv));
    const int bad = lm_test_first_diff(ref + (size_t)(L - K) * nv, got, K, nv);
    CHECKF(bad < 0, "rollback of %d positions at %d: position %d differs", K, L, L - K + bad);
    printf("rollback of %d positions from %d (sliding window 512, n_batch 256): exact\n", K, L);
    CHECK(lm_kv_cache_seq_rm(c, 3, 0, -1) == LM_OK);
    free(t);
}

// (e) seq_cp and the prefix cache continue exactly as a full prefill
static void test_seq_cp_prefix(struct lm_context *c, float *ref, float *got) {
    int32_t t[100];
    lm_test_prompt(t, 100, 9);
    CHECK(lm_test_prefill(c, 0, t, 100, 100, ref, nv)); // reference: the whole 100 tokens
    CHECK(lm_kv_cache_seq_rm(c, 0, 37, -1) == LM_OK);
    // a copy of the first 37 positions (shared blocks), continued with the rest
    CHECK(lm_kv_cache_seq_cp(c, 0, 1, 37) == LM_OK);
    CHECK(lm_test_prefill(c, 1, t + 37, 63, 63, got, nv));
    int bad = lm_test_first_diff(ref + (size_t)37 * nv, got, 63, nv);
    CHECKF(bad < 0, "after seq_cp: position %d differs", 37 + bad);
    // sequence 0 meanwhile continues differently; the shared block was copied on write
    int32_t u[10];
    lm_test_prompt(u, 10, 10);
    CHECK(lm_test_prefill(c, 0, u + 1, 9, 9, NULL, nv));
    CHECK(lm_test_prefill(c, 2, t, 1, 1, NULL, nv) && lm_kv_cache_seq_rm(c, 2, 0, -1) == LM_OK);
    // prefix cache: a new sequence over the same 100 tokens attaches the blocks that
    // sequence 1 filled (6 blocks = 96 positions) and computes the rest
    int32_t na = 0;
    CHECK(lm_kv_cache_prefix_attach(c, 2, t, 100, &na) == LM_OK);
    CHECKF(na == 96, "attached %d", na);
    CHECK(lm_test_prefill(c, 2, t + na, 100 - na, 100 - na, got, nv));
    bad = lm_test_first_diff(ref + (size_t)na * nv, got, 100 - na, nv);
    CHECKF(bad < 0, "after a prefix attach: position %d differs", na + bad);
    struct lm_kv_cache_stats ks;
    lm_kv_cache_stats(c, &ks);
    CHECK(ks.prefix_hit_tokens >= 96 && ks.cow_copies >= 1);
    for (int s = 0; s < 3; s++) CHECK(lm_kv_cache_seq_rm(c, s, 0, -1) == LM_OK);
}

// (f) holes: removing cells changes what later positions see, deterministically;
// removing the same range twice over gives the same bits
static void test_holes(struct lm_context *c, float *ref, float *got) {
    int32_t t[60];
    lm_test_prompt(t, 60, 11);
    float *a = malloc(sizeof(float) * (size_t)nv), *b = malloc(sizeof(float) * (size_t)nv);
    for (int rep = 0; rep < 2; rep++) {
        CHECK(lm_test_prefill(c, rep, t, 50, 50, NULL, nv));
        CHECK(lm_kv_cache_seq_rm(c, rep, 10, 30) == LM_OK); // a hole of 20
        CHECK(lm_kv_cache_seq_pos(c, rep) == 50);
        CHECK(lm_test_prefill(c, rep, t + 50, 10, 10, got, nv));
        memcpy(rep ? b : a, got + (size_t)9 * nv, sizeof(float) * nv);
    }
    CHECK(lm_test_same(a, b, nv));
    CHECK(lm_test_prefill(c, 2, t, 60, 60, ref, nv)); // no hole
    CHECK(!lm_test_same(a, ref + (size_t)59 * nv, nv));
    int nonfinite = 0;
    for (int i = 0; i < nv; i++) nonfinite += !isfinite(a[i]);
    CHECK(nonfinite == 0);
    free(a);
    free(b);
    for (int s = 0; s < 3; s++) CHECK(lm_kv_cache_seq_rm(c, s, 0, -1) == LM_OK);
}

// (g) invalid batches and arguments
static void test_bad_batches(struct lm_context *c) {
    struct lm_batch_entry badpos = {5, 99, 0, true};
    CHECK(lm_decode(c, &badpos, 1) == LM_ERR_ARG && strstr(lm_error_msg(), "position"));
    struct lm_batch_entry badseq = {5, 0, 16, true};
    CHECK(lm_decode(c, &badseq, 1) == LM_ERR_ARG && strstr(lm_error_msg(), "sequence"));
    struct lm_batch_entry badtok = {nv, 0, 0, true};
    CHECK(lm_decode(c, &badtok, 1) == LM_ERR_ARG && strstr(lm_error_msg(), "token"));
    static struct lm_batch_entry big[257];
    CHECK(lm_decode(c, big, 257) == LM_ERR_ARG);
    CHECK(lm_decode(c, big, 0) == LM_ERR_ARG);
    CHECK(lm_kv_cache_seq_rm(c, 16, 0, -1) == LM_ERR_ARG && strstr(lm_error_msg(), "sequence 16"));
    CHECK(lm_kv_cache_seq_rm(c, 0, 0, 5) == LM_ERR_ARG); // holds nothing
    CHECK(lm_kv_cache_seq_pos(c, -1) == -1);
}

// (h) a full pool refuses the batch whole; a sequence at n_ctx is full
static void test_full_pool(struct lm_model *m) {
    struct lm_context *sm = NULL;
    struct lm_context_params sp = {.n_ctx = 64, .n_seq_max = 2, .n_batch = 64, .n_threads = 1,
                                   .kv_tokens = 48};
    CHECK(lm_context_init(&sm, m, &sp) == LM_OK);
    int32_t t[64];
    lm_test_prompt(t, 64, 3);
    CHECK(lm_test_prefill(sm, 0, t, 40, 40, NULL, nv));
    struct lm_batch_entry b[16];
    for (int i = 0; i < 16; i++) b[i] = (struct lm_batch_entry){t[i], i, 1, false};
    CHECK(lm_decode(sm, b, 16) == LM_ERR_KV_FULL && strstr(lm_error_msg(), "full"));
    CHECK(lm_kv_cache_seq_pos(sm, 1) == 0);
    struct lm_kv_cache_stats ks;
    lm_kv_cache_stats(sm, &ks);
    CHECK(ks.n_used == 3 && ks.n_blocks == 3);
    CHECK(lm_kv_cache_seq_rm(sm, 0, 0, -1) == LM_OK);
    CHECK(lm_decode(sm, b, 16) == LM_OK);
    lm_context_free(sm);
    sp.kv_tokens = 0;
    CHECK(lm_context_init(&sm, m, &sp) == LM_OK);
    CHECK(lm_test_prefill(sm, 0, t, 64, 64, NULL, nv));
    struct lm_batch_entry one = {5, 64, 0, true};
    CHECK(lm_decode(sm, &one, 1) == LM_ERR_STATE && strstr(lm_error_msg(), "full"));
    lm_context_free(sm);
}

int main(void) {
    struct lm_model *m = lm_test_load(lm_test_model_path());
    if (!m) return 1;
    nv = lm_model_n_vocab(m);
    const bool quick = lm_test_quick();
    int32_t prompt[NP];
    lm_test_prompt(prompt, NP, 1);
    float *ref = malloc(sizeof(float) * (size_t)nv * 700);
    float *got = malloc(sizeof(float) * (size_t)nv * 700);

    struct lm_context_params cp = {.n_ctx = 1024, .n_seq_max = 16, .n_batch = 256, .n_threads = 2};
    struct lm_context *c = NULL;
    CHECK(lm_context_init(&c, m, &cp) == LM_OK);

    test_chunks(c, prompt, ref, got);
    test_beside_others(c, prompt, ref);
    test_threads(m, cp, c, prompt, ref, got);
    test_rollback_window(c, ref, got, quick);
    test_seq_cp_prefix(c, ref, got);
    test_holes(c, ref, got);
    test_bad_batches(c);
    lm_context_free(c);
    test_full_pool(m);

    free(ref);
    free(got);
    lm_model_free(m);
    return lm_test_finish();
}
