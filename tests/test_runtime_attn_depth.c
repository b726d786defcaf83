// Decode attention past LM_ATTN_CHUNK cells (kernels.h: long windows in chunks, one merge) is
// batch and thread invariant bit for bit on the default model (Gemma 3: 1 KV head, so decode
// at 2 threads shares a window's chunks between the threads, runtime/ops.c attn_split, where
// a prefill batch gives each thread whole windows): the logits of positions 520..559 are the
// same prefilled in batches of 200, decoded one by one alone, and decoded beside another
// sequence (a short window in the same step), and prefilled in batches of 37 (other prefill
// tiles, runtime/ops.c) gives every position's logits of the batches of 200.
// LM_TEST_LABELS: model
#include <stdlib.h>

#include "lm_test.h"
#include "lm_test_model.h"
#include "lumen.h"

enum { L = 560, A = 520, N = L - A, U = 40 }; // positions [A, L) are compared; U: the other's prompt

static int nv;

// sequence 0 holds t[0, A): t[A, L) one per step, the logits into out (N rows); with other,
// sequence 1 (prompt u[0, U)) decodes its own tokens in the same steps
static bool decode_tail(struct lm_context *c, const int32_t *t, bool other, const int32_t *u, float *out) {
    if (other && !lm_test_prefill(c, 1, u, U, U, NULL, nv)) return false;
    for (int i = A; i < L; i++) {
        struct lm_batch_entry b[2] = {{t[i], i, 0, true}, {u[U + i - A], U + i - A, 1, true}};
        if (lm_decode(c, b, other ? 2 : 1) != LM_OK) return false;
        const float *lg = lm_get_logits(c, 0);
        if (!lg) return false;
        for (int k = 0; k < nv; k++) out[(size_t)(i - A) * (size_t)nv + (size_t)k] = lg[k];
    }
    return true;
}

int main(void) {
    struct lm_model *m = lm_test_load(lm_test_model_path());
    if (!m) return 1;
    nv = lm_model_n_vocab(m);
    int32_t *t = malloc(sizeof(int32_t) * L), *u = malloc(sizeof(int32_t) * L);
    lm_test_prompt(t, L, 5);
    lm_test_prompt(u, L, 6);
    float *all = malloc(sizeof(float) * (size_t)nv * L), *got = malloc(sizeof(float) * (size_t)nv * N);

    struct lm_context_params cp = {.n_ctx = 1024, .n_seq_max = 2, .n_batch = 200, .n_threads = 2};
    struct lm_context *c = NULL;
    CHECK(lm_context_init(&c, m, &cp) == LM_OK);

    // reference: prefill in batches of 200 (many units: each thread takes whole windows)
    CHECK(lm_test_prefill(c, 0, t, L, 200, all, nv));
    const float *ref = all + (size_t)A * (size_t)nv;

    CHECK(lm_kv_cache_seq_rm(c, 0, A, -1) == LM_OK);
    CHECK(decode_tail(c, t, false, u, got));
    int bad = lm_test_first_diff(ref, got, N, nv);
    CHECKF(bad < 0, "decode alone: position %d differs from the prefill", A + bad);

    CHECK(lm_kv_cache_seq_rm(c, 0, A, -1) == LM_OK);
    CHECK(decode_tail(c, t, true, u, got));
    bad = lm_test_first_diff(ref, got, N, nv);
    CHECKF(bad < 0, "decode beside another sequence: position %d differs", A + bad);
    // prefill in batches of 37 (tiles of 4 rows and a last of 1, runtime/ops.c attn_tiles,
    // crossing the 512-cell chunk edge at other rows): every position's logits as in 200s
    float *odd = malloc(sizeof(float) * (size_t)nv * L);
    CHECK(lm_kv_cache_seq_rm(c, 0, 0, -1) == LM_OK);
    CHECK(lm_test_prefill(c, 0, t, L, 37, odd, nv));
    bad = lm_test_first_diff(all, odd, L, nv);
    CHECKF(bad < 0, "prefill in batches of 37: position %d differs from batches of 200", bad);
    free(odd);
    printf("positions %d..%d (windows over %d cells): prefill, decode alone and beside another "
           "sequence bit-identical (2 threads)\n", A, L - 1, 512);

    lm_context_free(c);
    free(t); free(u); free(all); free(got);
    lm_model_free(m);
    return lm_test_finish();
}
