// Multi-head latent attention (deepseek2, runtime/ops_mla.c) in the KV pool, on the tiny
// random-weight copies of tools/make_arch_gguf.py --ci: the pool's row per position and
// layer is the latent plus the RoPE key (kv_lora_rank + n_rot values, no V rows), what
// llama.cpp's MLA cache holds; rollback (seq_rm of a tail, recomputed) gives the same bits;
// a q8_0 pool (V read from the q8_0 K row) agrees with the f16 one (top-1) and is batch
// invariant; and the
// loader's refusals of inconsistent MLA metadata and missing tensors, each with its message.
// (Chunked prefill, mixed batches, threads and prefix attach: tests/test_runtime_batch_moe.c.)
// Set-up as tests/test_model_arch_golden.c: the generator into $LUMEN_ARCH_DIR.
// LM_TEST_LABELS: model;arch
#include "lm_test_arch.h"

#include <math.h>

enum { NP = 40 };

static struct lm_context *ctx(struct lm_model *m, enum lm_kv_type t) {
    struct lm_context_params cp = {.n_ctx = 128, .n_seq_max = 2, .n_batch = 64, .n_threads = 2,
                                   .kv_tokens = 256, .kv_type_k = t, .kv_type_v = t};
    struct lm_context *c = NULL;
    const enum lm_status st = lm_context_init(&c, m, &cp);
    CHECKF(st == LM_OK, "context (kv type %d): %s", (int)t, st ? lm_error_msg() : "");
    return c;
}

static void run(const char *path) {
    struct lm_model *m = NULL;
    if (lm_model_load(&m, path, NULL) != LM_OK) {
        CHECKF(0, "cannot load %s: %s", path, lm_error_msg());
        return;
    }
    struct lm_model_hparams hp;
    lm_model_hparams(m, &hp);
    CHECK(!strcmp(lm_model_arch(m), "deepseek2") && hp.mla_kv_rank > 0 && hp.n_head_kv == 1);
    const int nv = lm_model_n_vocab(m);
    int32_t prompt[NP];
    lm_test_ids(prompt, NP, 7, nv);
    float *ref = malloc(sizeof(float) * (size_t)nv * NP), *got = malloc(sizeof(float) * (size_t)nv * NP);
    struct lm_context *c = ctx(m, LM_KV_F16);
    if (!c || !ref || !got) goto done;

    // (a) the pool's bytes: per position and layer one f16 row of latent + RoPE key
    struct lm_kv_cache_stats ks;
    lm_kv_cache_stats(c, &ks);
    const uint64_t row = (uint64_t)hp.head_dim_k * 2, per_tok = row * (uint64_t)hp.n_layer;
    CHECKF(hp.head_dim_k == hp.mla_kv_rank + hp.n_rot && hp.head_dim_v == hp.mla_kv_rank,
           "head sizes %d/%d, latent %d, rope %d", hp.head_dim_k, hp.head_dim_v, hp.mla_kv_rank, hp.n_rot);
    // (rounded up to an odd number of 64-byte lines: kv_cache.c, cache sets)
    CHECKF(ks.block_bytes >= per_tok * (uint64_t)ks.block_size && ks.block_bytes - per_tok * (uint64_t)ks.block_size <= 64,
           "block of %d positions: %llu bytes, want %llu (no V rows)", ks.block_size,
           (unsigned long long)ks.block_bytes, (unsigned long long)(per_tok * (uint64_t)ks.block_size));
    printf("%s: KV bytes per token %llu (%d layers x (latent %d + rope %d) x f16)\n", path,
           (unsigned long long)per_tok, hp.n_layer, hp.mla_kv_rank, hp.n_rot);

    // (b) rollback: drop the tail, compute it again: the same bits
    CHECK(lm_test_prefill(c, 0, prompt, NP, NP, ref, nv));
    CHECK(lm_kv_cache_seq_rm(c, 0, 29, -1) == LM_OK && lm_kv_cache_seq_pos(c, 0) == 29);
    CHECK(lm_test_prefill(c, 0, prompt + 29, NP - 29, 4, got, nv));
    int bad = lm_test_first_diff(ref + (size_t)29 * nv, got, NP - 29, nv);
    CHECKF(bad < 0, "%s: after rollback to 29: position %d differs", path, bad < 0 ? bad : 29 + bad);

    // (c) q8_0 pool: V read from the q8_0 K row; near f16, one batch == token by token
    struct lm_context *cq = ctx(m, LM_KV_Q8_0);
    if (cq) {
        CHECK(lm_test_prefill(cq, 0, prompt, NP, NP, got, nv));
        int agree = 0;
        double dmax = 0;
        for (int p = 0; p < NP; p++) {
            agree += lm_test_argmax(ref + (size_t)p * nv, nv) == lm_test_argmax(got + (size_t)p * nv, nv);
            for (int i = 0; i < nv; i++) dmax = fmax(dmax, fabs((double)ref[(size_t)p * nv + i] - got[(size_t)p * nv + i]));
        }
        printf("%s: q8_0 pool vs f16: top-1 %d/%d, max|d| %.4f\n", path, agree, NP, dmax);
        // top-1 only: an 8-bit latent can flip a near-tied expert choice (v3: max|d| ~1.1 at
        // one position), which moves that position's logits far more than rounding does
        CHECKF(agree >= NP - 2, "%s: q8_0 pool: top-1 %d/%d, max|d| %g", path, agree, NP, dmax);
        float *one = malloc(sizeof(float) * (size_t)nv * NP);
        CHECK(lm_kv_cache_seq_rm(cq, 0, 0, -1) == LM_OK);
        CHECK(one && lm_test_prefill(cq, 0, prompt, NP, 1, one, nv));
        bad = one ? lm_test_first_diff(got, one, NP, nv) : 0;
        CHECKF(bad < 0, "%s: q8_0 pool: token by token differs at position %d", path, bad);
        free(one);
        lm_context_free(cq);
    }
done:
    lm_context_free(c);
    lm_model_free(m);
    free(ref);
    free(got);
}

// ---------------------------------------------------------------- refusals

// a u32 key's value (after the key string and its type)
static void set_u32(unsigned char *b, size_t n, const char *key, uint32_t v) {
    unsigned char *k = lm_test_key_value(b, n, key);
    if (k) memcpy(k, &v, 4);
}
static void p_no_mla_len(unsigned char *b, size_t n) {
    unsigned char *k = lm_test_find(b, n, "deepseek2.attention.key_length_mla");
    if (k) k[strlen("deepseek2.attention.key_length_ml")] = 'x';
}
static void p_kv_rank(unsigned char *b, size_t n) { set_u32(b, n, "deepseek2.attention.kv_lora_rank", 96); }
static void p_kv_heads(unsigned char *b, size_t n) { set_u32(b, n, "deepseek2.attention.head_count_kv", 4); }
static void p_groups(unsigned char *b, size_t n) { set_u32(b, n, "deepseek2.expert_group_count", 3); }
static void p_gating(unsigned char *b, size_t n) { set_u32(b, n, "deepseek2.expert_gating_func", 3); }
static void p_no_k_b(unsigned char *b, size_t n) {
    unsigned char *k = lm_test_find(b, n, "blk.1.attn_k_b.weight");
    if (k) k[strlen("blk.1.attn_k_")] = 'z';
}
static void p_no_shexp(unsigned char *b, size_t n) {
    unsigned char *k = lm_test_find(b, n, "blk.1.ffn_down_shexp.weight");
    if (k) k[strlen("blk.1.ffn_down_shex")] = 'z';
}

static void refusals(const char *lite, const char *v3) {
    lm_test_patched(lite, "no key_length_mla", p_no_mla_len, LM_ERR_UNSUPPORTED, "older converter", NULL);
    lm_test_patched(lite, "kv_lora_rank 96", p_kv_rank, LM_ERR_FORMAT, "inconsistent MLA sizes: kv_lora_rank 96", NULL);
    lm_test_patched(lite, "4 KV heads", p_kv_heads, LM_ERR_FORMAT, "head_count_kv 1 (got 4)", NULL);
    lm_test_patched(lite, "no attn_k_b", p_no_k_b, LM_ERR_FORMAT, "'blk.1.attn_k_b.weight'", NULL);
    lm_test_patched(lite, "no ffn_down_shexp", p_no_shexp, LM_ERR_FORMAT, "'blk.1.ffn_down_shexp.weight'", NULL);
    lm_test_patched(v3, "3 expert groups of 8", p_groups, LM_ERR_FORMAT, "expert_group_count 3", NULL);
    lm_test_patched(v3, "gating 3", p_gating, LM_ERR_UNSUPPORTED, "expert_gating_func 3", NULL);
}

int main(void) {
    char dir[512], lite[1024], v3[1024];
    const int gen = lm_test_arch_generate(dir, sizeof dir);
    if (gen <= 0) return gen ? lm_test_finish() : 0;
    snprintf(lite, sizeof lite, "%s/arch_deepseek2_f16.gguf", dir);
    snprintf(v3, sizeof v3, "%s/arch_deepseek2v3_f16.gguf", dir);
    run(lite);
    run(v3);
    refusals(lite, v3);
    return lm_test_finish();
}
