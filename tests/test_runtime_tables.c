// The kernel tables agree end to end: a prefill in chunks, a hole, decode steps and a second
// sequence batched beside the first give the same logits (memcmp) with the generic table
// as with every ISA table this CPU has (lm_context_set_kernels), at 1 and 2 threads (2 only
// with LUMEN_TEST_QUICK). So a LUMEN_FORCE_GENERIC=1 run computes the bits a default run
// does, and a bug report made with it reproduces the default build.
// LM_TEST_LABELS: model;tables
#include "lm_test.h"
#include "lm_test_model.h"
#include "lumen.h"
#include "runtime/context.h"

static int nv;

// the scenario on c with table k; every logits row asked for goes to out, returns the rows
static int run(struct lm_context *c, const struct lm_kernels *k, int np, float *out) {
    lm_context_set_kernels(c, k);
    CHECK(lm_kv_cache_seq_rm(c, 0, 0, -1) == LM_OK);
    CHECK(lm_kv_cache_seq_rm(c, 1, 0, -1) == LM_OK);
    int rows = 0;
    struct lm_batch_entry b[64];
    uint64_t x = 12345;
    int pos = 0;
    while (pos < np) { // chunks of 7, logits for every token
        int n = 0;
        for (; n < 7 && pos < np; n++, pos++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            b[n] = (struct lm_batch_entry){pos == 0 ? 2 : 100 + (int32_t)(x % 20000), pos, 0, true};
        }
        if (lm_decode(c, b, n) != LM_OK) { fprintf(stderr, "decode: %s\n", lm_error_msg()); return -1; }
        for (int i = 0; i < n; i++) memcpy(out + (size_t)rows++ * nv, lm_get_logits(c, i), sizeof(float) * nv);
    }
    CHECK(lm_kv_cache_seq_rm(c, 0, 3, 9) == LM_OK); // a hole
    for (int i = 0; i < 9; i++) b[i] = (struct lm_batch_entry){i == 0 ? 2 : 300 + 17 * i, i, 1, i == 8};
    if (lm_decode(c, b, 9) != LM_OK) return -1;
    memcpy(out + (size_t)rows++ * nv, lm_get_logits(c, 0), sizeof(float) * nv);
    for (int g = 0; g < 3; g++) { // both sequences decode in one batch
        b[0] = (struct lm_batch_entry){500 + g, pos++, 0, true};
        b[1] = (struct lm_batch_entry){700 + g, 9 + g, 1, true};
        if (lm_decode(c, b, 2) != LM_OK) return -1;
        for (int i = 0; i < 2; i++) memcpy(out + (size_t)rows++ * nv, lm_get_logits(c, i), sizeof(float) * nv);
    }
    return rows;
}

int main(void) {
    struct lm_model *m = lm_test_load(lm_test_model_path());
    if (!m) return 1;
    nv = lm_model_n_vocab(m);
    const bool quick = lm_test_quick();
    const int np = quick ? 12 : 30;
    const struct lm_kernels *isa[2] = {lm_kernels_avx2(), lm_kernels_avx512()};
    float *ref = malloc(sizeof(float) * (size_t)nv * 64), *got = malloc(sizeof(float) * (size_t)nv * 64);
    int compared = 0;
    for (int threads = quick ? 2 : 1; threads <= 2; threads++) { // quick (sanitizers): 2 threads
        struct lm_context_params cp = {.n_ctx = 256, .n_seq_max = 2, .n_batch = 64, .n_threads = threads};
        struct lm_context *c = NULL;
        CHECK(lm_context_init(&c, m, &cp) == LM_OK);
        const int rows = run(c, lm_kernels_generic(), np, ref);
        CHECK(rows > 0);
        for (int t = 0; t < 2 && rows > 0; t++) {
            if (!isa[t]) continue;
            CHECK(run(c, isa[t], np, got) == rows);
            int bad = -1;
            for (int r = 0; r < rows && bad < 0; r++)
                if (memcmp(ref + (size_t)r * nv, got + (size_t)r * nv, sizeof(float) * nv)) bad = r;
            CHECKF(bad < 0, "%d threads: %s logits row %d differ from the generic table's", threads, isa[t]->name, bad);
            compared++;
        }
        lm_context_free(c);
    }
    if (!compared) printf("note: no ISA table on this CPU; nothing to compare\n");
    else printf("%d comparisons of %d-token scenarios\n", compared, np);
    free(ref);
    free(got);
    lm_model_free(m);
    return lm_test_finish();
}
