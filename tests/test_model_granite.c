// granite and smollm3 (model/granite.c) on the random-weight copies of tools/make_arch_gguf.py
// --ci (Granite 3.3 2B widths, 2 layers; SmolLM3's head size and GQA at n_embd 512, 4 layers):
// the hyper-parameters and per-layer data the loader reads (granite's four multipliers,
// smollm3's layer 3 without RoPE), batch invariance bit for bit (one batch, chunks of any size
// (the private residual path of small batches and the shared one), beside other sequences
// in mixed prefill/decode batches, 1 or 2 threads), the LM head's fused top-k after granite's
// logit scale, and the loader's refusals of bad granite
// metadata (byte-patched copies), each with its message. The logits themselves are checked
// against llama.cpp by tests/test_model_arch_golden.c and against the float64 reference by
// tests/test_model_ref_forward_arch.sh.
// Set-up as tests/test_model_arch_golden.c: the generator into $LUMEN_ARCH_DIR.
// LM_TEST_LABELS: model;arch
#include "lm_test_arch.h"

#include <math.h>

static char g_dir[512];

static void path_of(char *out, size_t n, const char *file) { snprintf(out, n, "%s/%s", g_dir, file); }

// ---------------------------------------------------------------- hyper-parameters

static void check_granite_hparams(const char *path) {
    struct lm_model *m = NULL;
    CHECKF(lm_model_load(&m, path, NULL) == LM_OK, "load %s: %s", path, lm_error_msg());
    if (!m) return;
    struct lm_model_hparams hp;
    lm_model_hparams(m, &hp);
    CHECK(!strcmp(lm_model_arch(m), "granite"));
    CHECKF(hp.embd_scale == 12.0f && hp.residual_scale == 0.22f && hp.attn_scale == 0.015625f &&
               hp.logit_scale == 8.0f,
           "granite multipliers: embd %g residual %g attn %g logit %g", hp.embd_scale,
           hp.residual_scale, hp.attn_scale, hp.logit_scale);
    CHECK(!hp.rope_neox && hp.n_rot == 64 && hp.n_head == 32 && hp.n_head_kv == 8);
    for (int l = 0; l < hp.n_layer; l++) {
        struct lm_model_layer_info li;
        CHECK(lm_model_layer_info(m, l, &li) == LM_OK && !li.no_rope);
    }
    lm_model_free(m);
}

static void check_smollm3_hparams(const char *path) {
    struct lm_model *m = NULL;
    CHECKF(lm_model_load(&m, path, NULL) == LM_OK, "load %s: %s", path, lm_error_msg());
    if (!m) return;
    struct lm_model_hparams hp;
    lm_model_hparams(m, &hp);
    CHECK(!strcmp(lm_model_arch(m), "smollm3") && hp.n_layer == 4);
    CHECKF(hp.embd_scale == 1.0f && hp.residual_scale == 0.0f && hp.logit_scale == 0.0f &&
               fabsf(hp.attn_scale - 1.0f / sqrtf(128.0f)) < 1e-7f,
           "smollm3 scales: embd %g residual %g logit %g attn %g", hp.embd_scale,
           hp.residual_scale, hp.logit_scale, hp.attn_scale);
    for (int l = 0; l < hp.n_layer; l++) { // llama.cpp: (il + 1) % 4 == 0 has no RoPE
        struct lm_model_layer_info li;
        CHECK(lm_model_layer_info(m, l, &li) == LM_OK);
        CHECKF(li.no_rope == (l == 3), "smollm3 layer %d: no_rope %d", l, (int)li.no_rope);
    }
    lm_model_free(m);
}

// ---------------------------------------------------------------- batch invariance

enum { NP = 40, NS = 6, GEN = 8 };

static void batch_invariance(const char *path) {
    struct lm_model *m = NULL;
    if (lm_model_load(&m, path, NULL) != LM_OK) {
        CHECKF(0, "cannot load %s: %s", path, lm_error_msg());
        return;
    }
    const int nv = lm_model_n_vocab(m);
    int32_t prompt[NP];
    lm_test_ids(prompt, NP, 7, nv);
    float *ref = malloc(sizeof(float) * (size_t)nv * NP), *got = malloc(sizeof(float) * (size_t)nv * NP);
    struct lm_context_params cp = {.n_ctx = 128, .n_seq_max = NS, .n_batch = 64, .n_threads = 2,
                                   .kv_tokens = 512};
    struct lm_context *c = NULL;
    CHECK(lm_context_init(&c, m, &cp) == LM_OK);
    if (!c || !ref || !got) goto out;
    // one batch vs chunks (1 and 3: the private residual path; 17: the shared one)
    CHECK(lm_test_prefill(c, 0, prompt, NP, NP, ref, nv));
    const int chunks[] = {1, 3, 17};
    for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
        CHECK(lm_kv_cache_seq_rm(c, 0, 0, -1) == LM_OK);
        CHECK(lm_test_prefill(c, 0, prompt, NP, chunks[k], got, nv));
        const int bad = lm_test_first_diff(ref, got, NP, nv);
        CHECKF(bad < 0, "%s: chunks of %d: position %d differs from the one-batch prefill", path,
               chunks[k], bad);
    }
    // 1 thread vs 2
    struct lm_context_params c1p = cp;
    c1p.n_threads = 1;
    struct lm_context *c1 = NULL;
    CHECK(lm_context_init(&c1, m, &c1p) == LM_OK);
    if (c1) {
        CHECK(lm_test_prefill(c1, 0, prompt, NP, 13, got, nv));
        const int bad = lm_test_first_diff(ref, got, NP, nv);
        CHECKF(bad < 0, "%s: 1 thread vs 2: position %d differs", path, bad);
        lm_context_free(c1);
    }
    // beside others
    CHECK(lm_kv_cache_seq_rm(c, 0, 0, -1) == LM_OK);
    int32_t alone_tok[GEN];
    CHECK(lm_test_greedy_alone(c, prompt, NP, GEN, ref, alone_tok, nv));
    lm_test_beside_others(c, path, prompt, NP, GEN, NS, 5, 200, ref, alone_tok, nv);
    printf("%s: chunks, threads and %d sequences beside: bit-identical\n", path, NS - 1);
out:
    lm_context_free(c);
    lm_model_free(m);
    free(ref);
    free(got);
}

// ---------------------------------------------------------------- fused top-k

static int cand_cmp(const void *a, const void *b) {
    const struct lm_token_logit *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

// The LM head's top-k selection (lm_context_set_top_k) equals the sorted scaled logits row:
// granite's logit scale is applied after the matmul, before the selection (ops.c), on a
// prefill's last row and on both rows of a 2-sequence decode step.
static void fused_top_k(const char *path) {
    struct lm_model *m = NULL;
    if (lm_model_load(&m, path, NULL) != LM_OK) {
        CHECKF(0, "cannot load %s: %s", path, lm_error_msg());
        return;
    }
    const int nv = lm_model_n_vocab(m), K = 40;
    struct lm_token_logit *row = malloc(sizeof *row * (size_t)nv);
    struct lm_context_params cp = {.n_ctx = 64, .n_seq_max = 2, .n_batch = 32, .n_threads = 2};
    struct lm_context *c = NULL;
    CHECK(lm_context_init(&c, m, &cp) == LM_OK && lm_context_set_top_k(c, K) == LM_OK);
    int32_t prompt[12];
    lm_test_ids(prompt, 12, 5, nv);
    struct lm_batch_entry b[12];
    int bad = 0, rows = 0;
    for (int i = 0; i < 12; i++) b[i] = (struct lm_batch_entry){prompt[i], i, 0, i == 11};
    bool ok = c && row && lm_decode(c, b, 12) == LM_OK;
    for (int step = 0; ok && step < 3; step++) {
        for (int32_t r = 0; r < (step ? 2 : 1); r++, rows++) {
            const float *lg = lm_get_logits(c, r);
            const struct lm_token_logit *top = NULL;
            if (!lg || lm_get_top_k(c, r, &top) != K || !top) { bad++; continue; }
            for (int j = 0; j < nv; j++) row[j] = (struct lm_token_logit){j, lg[j]};
            qsort(row, (size_t)nv, sizeof *row, cand_cmp);
            for (int j = 0; j < K; j++)
                if (top[j].id != row[j].id || memcmp(&top[j].logit, &row[j].logit, sizeof(float))) {
                    bad++;
                    break;
                }
        }
        // next: sequence 0 continues, sequence 1 starts (one token each)
        b[0] = (struct lm_batch_entry){prompt[step], 12 + step, 0, true};
        b[1] = (struct lm_batch_entry){prompt[step + 1], step, 1, true};
        ok = lm_decode(c, b, 2) == LM_OK;
    }
    CHECKF(ok && bad == 0 && rows == 5, "%s: fused top-%d: %d of %d rows differ from the sorted row",
           path, K, bad, rows);
    lm_context_free(c);
    lm_model_free(m);
    free(row);
}

// ---------------------------------------------------------------- refusals

static void p_no_logit_scale(unsigned char *b, size_t n) {
    unsigned char *k = lm_test_find(b, n, "granite.logit_scale");
    if (k) k[strlen("granite.logit_scal")] = 'z';
}
static void p_logit_scale_neg(unsigned char *b, size_t n) {
    unsigned char *v = lm_test_key_value(b, n, "granite.logit_scale");
    if (v) { const float x = -8.0f; memcpy(v, &x, 4); }
}
static void p_residual_nan(unsigned char *b, size_t n) {
    unsigned char *v = lm_test_key_value(b, n, "granite.residual_scale");
    if (v) { const float x = NAN; memcpy(v, &x, 4); }
}
static void p_no_residual(unsigned char *b, size_t n) {
    unsigned char *k = lm_test_find(b, n, "granite.residual_scale");
    if (k) k[strlen("granite.residual_scal")] = 'z';
}
static void no_residual_scale(struct lm_model *m) {
    struct lm_model_hparams hp;
    lm_model_hparams(m, &hp);
    CHECKF(hp.residual_scale == 0.0f && hp.logit_scale == 8.0f,
           "without granite.residual_scale: residual %g (want 0: none), logit %g",
           hp.residual_scale, hp.logit_scale);
}

static void refusals(const char *path) {
    lm_test_patched(path, "no granite.logit_scale", p_no_logit_scale, LM_ERR_FORMAT,
                    "granite.logit_scale", NULL);
    lm_test_patched(path, "granite.logit_scale -8", p_logit_scale_neg, LM_ERR_FORMAT,
                    "granite.logit_scale = -8 must be finite and > 0", NULL);
    lm_test_patched(path, "granite.residual_scale nan", p_residual_nan, LM_ERR_FORMAT,
                    "granite.residual_scale = nan must be finite and > 0", NULL);
    lm_test_patched(path, "no granite.residual_scale (optional)", p_no_residual, LM_OK, "",
                    no_residual_scale);
}

int main(void) {
    char path[1024];
    const int gen = lm_test_arch_generate(g_dir, sizeof g_dir);
    if (gen <= 0) return gen ? lm_test_finish() : 0;
    path_of(path, sizeof path, "arch_granite_qmix.gguf");
    check_granite_hparams(path);
    batch_invariance(path);
    fused_top_k(path);
    refusals(path);
    path_of(path, sizeof path, "arch_smollm3_f16.gguf");
    check_smollm3_hparams(path);
    batch_invariance(path);
    if (!lm_test_quick()) {
        path_of(path, sizeof path, "arch_smollm3_qmix.gguf");
        batch_invariance(path);
    }
    return lm_test_finish();
}
