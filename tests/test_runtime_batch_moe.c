// Batch invariance of the experts' FFN (runtime/ops_moe.c) on the tiny random-weight
// Qwen3-MoE of tools/make_arch_gguf.py --ci (8 experts, 2 used), its Mixtral-style llama
// (4 experts) and the deepseek2 copies (latent attention, shared experts): a sequence's logits are the same bits whether its prompt is prefilled in one
// batch or in chunks, whether it decodes alone or beside 7 other sequences in mixed
// prefill/decode batches (each expert then sees other tokens: its group's rows change, a
// token's result must not), at 1 or 2 threads, and after a prefix-cache attach. F16 and the
// quant mix (8-bit activations: groups over LM_PRIVATE_QUANT_ROWS tokens take the shared
// quantization path). Also the loader's refusals of malformed expert metadata and tensors
// (byte-patched copies), each with its message. The MXFP4_MOE copy: MXFP4 experts (il GEMM
// on AVX-512, the multi-token dots on AVX2).
// Set-up as tests/test_model_arch_golden.c: the generator into $LUMEN_ARCH_DIR.
// LM_TEST_LABELS: model;arch
#include "lm_test_arch.h"

static int nv;

static void run(const char *path) {
    struct lm_model *m = NULL;
    if (lm_model_load(&m, path, NULL) != LM_OK) {
        CHECKF(0, "cannot load %s: %s", path, lm_error_msg());
        return;
    }
    CHECK(!strcmp(lm_model_arch(m), "qwen3moe") || !strcmp(lm_model_arch(m), "llama") ||
          !strcmp(lm_model_arch(m), "deepseek2"));
    nv = lm_model_n_vocab(m);
    enum { NP = 40, NS = 8, GEN = 10 };
    int32_t prompt[NP];
    lm_test_ids(prompt, NP, 1, nv);
    float *ref = malloc(sizeof(float) * (size_t)nv * 128), *got = malloc(sizeof(float) * (size_t)nv * 128);
    struct lm_context_params cp = {.n_ctx = 256, .n_seq_max = NS, .n_batch = 128, .n_threads = 2,
                                   .kv_tokens = 1024};
    struct lm_context *c = NULL;
    CHECK(lm_context_init(&c, m, &cp) == LM_OK);
    if (!c) { lm_model_free(m); free(ref); free(got); return; }

    // (a) one batch vs chunks
    CHECK(lm_test_prefill(c, 0, prompt, NP, NP, ref, nv));
    const int chunks[] = {1, 2, 3, 5, 16, 17};
    for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
        CHECK(lm_kv_cache_seq_rm(c, 0, 0, -1) == LM_OK);
        CHECK(lm_test_prefill(c, 0, prompt, NP, chunks[k], got, nv));
        const int bad = lm_test_first_diff(ref, got, NP, nv);
        CHECKF(bad < 0, "%s: chunks of %d: position %d differs from the one-batch prefill", path, chunks[k], bad);
    }

    // (b) alone vs beside NS-1 others (their prompts in chunks of 5, then decode)
    {
        int32_t alone_tok[GEN];
        CHECK(lm_test_greedy_alone(c, prompt, NP, GEN, ref, alone_tok, nv));
        lm_test_beside_others(c, path, prompt, NP, GEN, NS, 4, 100, ref, alone_tok, nv);
    }

    // (c) 1 thread vs 2 threads
    {
        struct lm_context_params c1p = cp;
        c1p.n_threads = 1;
        struct lm_context *c1 = NULL;
        CHECK(lm_context_init(&c1, m, &c1p) == LM_OK);
        CHECK(lm_test_prefill(c1, 0, prompt, NP, 13, got, nv));
        CHECK(lm_test_prefill(c, 0, prompt, NP, NP, ref, nv));
        const int bad = lm_test_first_diff(ref, got, NP, nv);
        CHECKF(bad < 0, "%s: 1 thread vs 2: position %d differs", path, bad);
        lm_context_free(c1);
    }

    // (d) a prefix-cache attach continues exactly as the full prefill (ref: sequence 0's)
    {
        int32_t na = 0;
        CHECK(lm_kv_cache_prefix_attach(c, 1, prompt, NP, &na) == LM_OK);
        CHECKF(na == 32, "attached %d", na);
        CHECK(lm_test_prefill(c, 1, prompt + na, NP - na, NP - na, got, nv));
        const int bad = lm_test_first_diff(ref + (size_t)na * nv, got, NP - na, nv);
        CHECKF(bad < 0, "%s: after a prefix attach: position %d differs", path, na + bad);
    }
    lm_context_free(c);
    lm_model_free(m);
    free(ref);
    free(got);
}

// ---------------------------------------------------------------- refusals

// qwen3moe.expert_used_count: the u32 after the key string and its type
static void p_used_9(unsigned char *b, size_t n) {
    unsigned char *k = lm_test_key_value(b, n, "qwen3moe.expert_used_count");
    if (k) { uint32_t v = 9; memcpy(k, &v, 4); }
}
static void p_count_0(unsigned char *b, size_t n) {
    unsigned char *k = lm_test_key_value(b, n, "qwen3moe.expert_count");
    if (k) { uint32_t v = 0; memcpy(k, &v, 4); }
}
// blk.0.ffn_up_exps.weight's ne[2] (name, n_dims u32, ne[0], ne[1], ne[2] u64): 8 -> 7
static void p_up_ne2(unsigned char *b, size_t n) {
    unsigned char *k = lm_test_find(b, n, "blk.0.ffn_up_exps.weight");
    if (k) { uint64_t v = 7; memcpy(k + strlen("blk.0.ffn_up_exps.weight") + 4 + 16, &v, 8); }
}
static void p_down_name(unsigned char *b, size_t n) {
    unsigned char *k = lm_test_find(b, n, "blk.1.ffn_down_exps.weight");
    if (k) k[strlen("blk.1.ffn_down_exp")] = 'z';
}
static void p_router_name(unsigned char *b, size_t n) {
    unsigned char *k = lm_test_find(b, n, "blk.0.ffn_gate_inp.weight");
    if (k) k[strlen("blk.0.ffn_gate_in")] = 'x';
}

static void refusals(const char *path) {
    lm_test_patched(path, "expert_used_count 9 of 8", p_used_9, LM_ERR_FORMAT, "expert_used_count 9", NULL);
    lm_test_patched(path, "expert_count 0", p_count_0, LM_ERR_FORMAT, "expert_count 0", NULL);
    lm_test_patched(path, "7 experts in ffn_up_exps", p_up_ne2, LM_ERR_FORMAT,
                    "'blk.0.ffn_up_exps.weight' has shape [256, 256, 7], expected [256, 256, 8]", NULL);
    lm_test_patched(path, "no ffn_down_exps", p_down_name, LM_ERR_FORMAT,
                    "missing required expert tensor 'blk.1.ffn_down_exps.weight'", NULL);
    lm_test_patched(path, "no router", p_router_name, LM_ERR_FORMAT,
                    "missing required tensor 'blk.0.ffn_gate_inp.weight'", NULL);
}

int main(void) {
    char dir[512], path[1024];
    const int gen = lm_test_arch_generate(dir, sizeof dir);
    if (gen <= 0) return gen ? lm_test_finish() : 0;
    // deepseek2: latent attention, a dense first layer, shared experts; v3: the q low-rank
    // pair, sigmoid gating with a selection bias, group-limited top-k
    const char *files[] = {"arch_qwen3moe_f16.gguf", "arch_qwen3moe_qmix.gguf",
                           "arch_mixtral_qmix.gguf", "arch_deepseek2_qmix.gguf",
                           "arch_deepseek2v3_f16.gguf", "arch_qwen3moe_mxfp4moe.gguf"};
    for (int i = 0; i < (int)(sizeof files / sizeof files[0]); i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        run(path);
    }
    snprintf(path, sizeof path, "%s/%s", dir, files[1]);
    refusals(path);
    return lm_test_finish();
}
