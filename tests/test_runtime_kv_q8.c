// A Q8_0 KV cache (lm_context_params.kv_type_k / kv_type_v) through the whole forward pass:
// batch invariance bit for bit (one batch, chunks, token by token, beside other sequences),
// prefix-cache attach and copy-on-write continuing exactly as a full prefill, rollback,
// half the block bytes of f16, logits close to the f16 cache's, each of K and V alone, and
// the refusal of a type that is none (context and engine); the Walsh-Hadamard rotation of
// q8_0 rows (lm_hadamard) against the matrix itself.
// LM_TEST_LABELS: model
#include "lm_test.h"
#include "lm_test_model.h"
#include "lumen.h"
#include "runtime/ops.h"

#include <math.h>

// lm_hadamard against H / sqrt(nb) as a matrix (H[i][j] = (-1)^popcount(i & j), the Sylvester
// construction llama.cpp's ggml_gen_hadamard builds), in double; and applied twice, x again
static void check_hadamard(void) {
    static const int nbs[] = {64, 128, 256};
    for (int t = 0; t < 3; t++) {
        const int nb = nbs[t], n = 2 * nb;
        float x[512], y[512];
        uint32_t st = 12345u + (uint32_t)nb;
        for (int i = 0; i < n; i++) {
            st = st * 1664525u + 1013904223u;
            x[i] = ((float)(st >> 8) / 16777216.0f - 0.5f) * (i % 37 == 3 ? 300.0f : 2.0f); // outliers
            y[i] = x[i];
        }
        lm_hadamard(y, n, nb);
        // the butterflies one value at a time, in float: the same operations, the same bits
        float z[512];
        memcpy(z, x, sizeof(float) * (size_t)n);
        for (int b = 0; b < n; b += nb) {
            for (int h = 1; h < nb; h *= 2)
                for (int i = 0; i < nb; i += 2 * h)
                    for (int j = i; j < i + h; j++) {
                        const float u = z[b + j], v = z[b + j + h];
                        z[b + j] = u + v;
                        z[b + j + h] = u - v;
                    }
            for (int j = 0; j < nb; j++) z[b + j] *= 1.0f / sqrtf((float)nb);
        }
        CHECKF(!memcmp(z, y, sizeof(float) * (size_t)n), "hadamard %d: not the scalar butterflies' bits", nb);
        double err = 0, norm = 0, nx = 0, ny = 0;
        for (int b = 0; b < n; b += nb)
            for (int i = 0; i < nb; i++) {
                double r = 0;
                for (int j = 0; j < nb; j++) r += (__builtin_popcount((unsigned)(i & j)) & 1 ? -1.0 : 1.0) * x[b + j];
                r /= sqrt((double)nb);
                err = fmax(err, fabs(r - y[b + i]));
                norm = fmax(norm, fabs(r));
            }
        for (int i = 0; i < n; i++) nx += (double)x[i] * x[i], ny += (double)y[i] * y[i];
        CHECKF(err <= 1e-5 * norm, "hadamard %d: max |error| %g of max %g", nb, err, norm);
        CHECKF(fabs(nx - ny) <= 1e-5 * nx, "hadamard %d: norm^2 %g -> %g", nb, nx, ny);
        lm_hadamard(y, n, nb);
        double back = 0;
        for (int i = 0; i < n; i++) back = fmax(back, fabs((double)y[i] - x[i]));
        CHECKF(back <= 1e-5 * norm, "hadamard %d twice: max |y - x| %g", nb, back);
    }
}

static int nv;

enum { NP = 53 }; // crosses three 16-cell blocks and ends inside the fourth

int main(void) {
    check_hadamard();
    struct lm_model *m = lm_test_load(lm_test_model_path());
    if (!m) return 1;
    nv = lm_model_n_vocab(m);
    int32_t prompt[NP];
    lm_test_prompt(prompt, NP, 7);
    float *ref = malloc(sizeof(float) * (size_t)nv * NP), *got = malloc(sizeof(float) * (size_t)nv * NP);
    float *f16 = malloc(sizeof(float) * (size_t)nv * NP);

    // the f16 cache's logits, and its block size
    struct lm_context_params cp = {.n_ctx = 256, .n_seq_max = 4, .n_batch = 128, .n_threads = 2};
    struct lm_context *c = NULL;
    CHECK(lm_context_init(&c, m, &cp) == LM_OK);
    CHECK(lm_test_prefill(c, 0, prompt, NP, NP, f16, nv));
    struct lm_kv_cache_stats s16, s8;
    lm_kv_cache_stats(c, &s16);
    lm_context_free(c);

    cp.kv_type_k = cp.kv_type_v = LM_KV_Q8_0;
    CHECK(lm_context_init(&c, m, &cp) == LM_OK);
    lm_kv_cache_stats(c, &s8);
    printf("block bytes: f16 %llu, q8_0 %llu\n", (unsigned long long)s16.block_bytes, (unsigned long long)s8.block_bytes);
    CHECKF(s8.block_bytes * 32 <= s16.block_bytes * 17 + 64 * 32 * 2, "q8_0 blocks of %llu bytes, f16 %llu",
           (unsigned long long)s8.block_bytes, (unsigned long long)s16.block_bytes);

    // ---- one batch vs chunks vs token by token
    CHECK(lm_test_prefill(c, 0, prompt, NP, NP, ref, nv));
    const int chunks[] = {1, 7, 16};
    for (int k = 0; k < 3; k++) {
        CHECK(lm_kv_cache_seq_rm(c, 0, 0, -1) == LM_OK);
        CHECK(lm_test_prefill(c, 0, prompt, NP, chunks[k], got, nv));
        const int d = lm_test_first_diff(ref, got, NP, nv);
        CHECKF(d < 0, "chunks of %d: position %d differs from the one-batch prefill", chunks[k], d);
    }
    // ---- close to the f16 cache: same top token at most positions
    int agree = 0;
    for (int i = 0; i < NP; i++) agree += lm_test_argmax(ref + (size_t)i * nv, nv) == lm_test_argmax(f16 + (size_t)i * nv, nv);
    printf("top token as with the f16 cache at %d of %d positions\n", agree, NP);
    CHECKF(agree >= NP * 8 / 10, "q8_0 cache: top token as f16's at only %d of %d positions", agree, NP);

    // ---- beside other sequences: sequence 0's prompt in chunks of 5 while 1-3 prefill and decode
    {
        CHECK(lm_kv_cache_seq_rm(c, 0, 0, -1) == LM_OK);
        int32_t other[4][40];
        int pos[4] = {0}, last[4] = {0};
        for (int s = 1; s < 4; s++) lm_test_prompt(other[s], 10 + 7 * s, 50 + s);
        int diff = 0, steps = 0;
        while (pos[0] < NP && steps < 100) {
            struct lm_batch_entry b[64];
            int nb = 0;
            for (int s = 0; s < 4; s++) {
                const int len = s ? 10 + 7 * s : NP;
                const int ch = s ? 3 : 5;
                for (int i = 0; i < ch && pos[s] < len; i++, pos[s]++)
                    b[nb++] = (struct lm_batch_entry){s ? other[s][pos[s]] : prompt[pos[s]], pos[s], s, true};
                if (s && pos[s] >= len && nb < 60) b[nb++] = (struct lm_batch_entry){last[s], pos[s]++, s, true};
            }
            CHECK(lm_decode(c, b, nb) == LM_OK);
            steps++;
            for (int i = 0; i < nb; i++) {
                const float *l = lm_get_logits(c, i);
                if (b[i].seq == 0) diff += !lm_test_same(l, ref + (size_t)b[i].pos * nv, nv);
                else last[b[i].seq] = lm_test_argmax(l, nv);
            }
        }
        CHECKF(diff == 0, "sequence 0 beside 3 others: %d positions differ", diff);
        for (int s = 1; s < 4; s++) CHECK(lm_kv_cache_seq_rm(c, s, 0, -1) == LM_OK);
    }

    // ---- prefix cache: sequence 1 attaches sequence 0's full blocks, computes the rest
    {
        int32_t n_att = 0;
        CHECK(lm_kv_cache_prefix_attach(c, 1, prompt, NP, &n_att) == LM_OK);
        CHECKF(n_att == 48, "prefix attach: %d positions (want 48)", n_att);
        CHECK(lm_test_prefill(c, 1, prompt + n_att, NP - n_att, NP, got, nv));
        const int d = lm_test_first_diff(ref + (size_t)n_att * nv, got, NP - n_att, nv);
        CHECKF(d < 0, "after a prefix attach: position %d differs", n_att + d);
        CHECK(lm_kv_cache_seq_rm(c, 1, 0, -1) == LM_OK);
    }
    // ---- copy-on-write: sequence 2 shares sequence 0's first 40 positions (a block in the
    // middle), both continue; each as its own full prefill; then rollback of sequence 0
    {
        CHECK(lm_kv_cache_seq_cp(c, 0, 2, 40) == LM_OK);
        int32_t alt[NP];
        memcpy(alt, prompt, sizeof alt);
        for (int i = 40; i < NP; i++) alt[i] = prompt[i] + 1;
        CHECK(lm_test_prefill(c, 2, alt + 40, NP - 40, 4, got, nv));
        // sequence 2 alone from scratch in sequence 3
        float *alone = malloc(sizeof(float) * (size_t)nv * NP);
        CHECK(lm_test_prefill(c, 3, alt, NP, NP, alone, nv));
        CHECKF(lm_test_first_diff(alone + (size_t)40 * nv, got, NP - 40, nv) < 0, "copy-on-write: the copy's continuation differs");
        CHECK(lm_kv_cache_seq_rm(c, 3, 0, -1) == LM_OK);
        // sequence 0 was not disturbed: its next token after a rollback to 45 matches
        CHECK(lm_kv_cache_seq_rm(c, 0, 45, -1) == LM_OK);
        CHECK(lm_test_prefill(c, 0, prompt + 45, NP - 45, 3, got, nv));
        CHECKF(lm_test_first_diff(ref + (size_t)45 * nv, got, NP - 45, nv) < 0, "rollback / the shared original differs");
        free(alone);
    }
    struct lm_kv_cache_stats st;
    lm_kv_cache_stats(c, &st);
    CHECKF(st.cow_copies > 0, "no copy-on-write happened");
    lm_context_free(c);

    // ---- K alone and V alone
    for (int kv = 0; kv < 2; kv++) {
        struct lm_context_params p1 = {.n_ctx = 64, .n_seq_max = 1, .n_batch = 64, .n_threads = 2,
                                       .kv_type_k = kv == 0 ? LM_KV_Q8_0 : LM_KV_F16,
                                       .kv_type_v = kv == 1 ? LM_KV_Q8_0 : LM_KV_F16};
        CHECK(lm_context_init(&c, m, &p1) == LM_OK);
        CHECK(lm_test_prefill(c, 0, prompt, NP, 11, got, nv));
        int a = 0;
        for (int i = 0; i < NP; i++) a += lm_test_argmax(got + (size_t)i * nv, nv) == lm_test_argmax(f16 + (size_t)i * nv, nv);
        CHECKF(a >= NP * 8 / 10, "q8_0 %s only: top token as f16's at %d of %d", kv ? "V" : "K", a, NP);
        lm_context_free(c);
    }

    // ---- refusals
    struct lm_context_params bad = {.n_ctx = 64, .kv_type_k = (enum lm_kv_type)7};
    CHECK(lm_context_init(&c, m, &bad) == LM_ERR_ARG);
    CHECKF(strstr(lm_error_msg(), "KV cache type 7"), "message: %s", lm_error_msg());
    struct lm_engine *e = NULL;
    struct lm_engine_params ep = {.n_ctx = 64, .kv_type_v = (enum lm_kv_type)2};
    CHECK(lm_engine_init(&e, m, &ep) == LM_ERR_ARG && e == NULL);
    CHECKF(strstr(lm_error_msg(), "KV cache type 2"), "engine message: %s", lm_error_msg());
    enum lm_kv_type t;
    CHECK(lm_kv_type_from_name("q8_0", &t) == LM_OK && t == LM_KV_Q8_0);
    CHECK(lm_kv_type_from_name("f16", &t) == LM_OK && t == LM_KV_F16);
    CHECK(lm_kv_type_from_name("q4_0", &t) == LM_ERR_ARG);
    CHECK(lm_kv_type_from_name(NULL, &t) == LM_ERR_ARG);
    CHECK(!strcmp(lm_kv_type_name(LM_KV_Q8_0), "q8_0") && lm_kv_type_name((enum lm_kv_type)9) == NULL);

    free(ref); free(got); free(f16);
    lm_model_free(m);
    return lm_test_finish();
}
