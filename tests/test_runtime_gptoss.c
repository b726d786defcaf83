// gpt-oss in the one decoder (model/gptoss.c) on the tiny random-weight copies of
// tools/make_arch_gguf.py --ci (F16 and every matrix Q8_0; 2 layers, layer 0 with a 32-token
// window, attention sinks, biases, 4 of 8 experts): batch invariance (a sequence's logits are
// the same bits whether its 48-token prompt, which crosses the window, is prefilled in one
// batch or in chunks, alone or beside 7 other sequences in mixed prefill/decode batches, at 1
// or 2 threads), the same on a Q8_0 KV cache, whose greedy choices stay the f16 cache's
// (top-1 at >= 44 of 48 positions), and the loader's refusals of malformed gpt-oss files. The
// MXFP4 copies (llama-quantize's MXFP4_MOE mix and the as-shipped one) carry gpt-oss's own
// tokenizer and template: the file's tokenizer gives llama.cpp's ids (tests/golden/
// tokens_gpt-oss.tsv), its template reads as harmony (in `lumen info` too), <|return|> and
// <|call|> end generation.
// Set-up as tests/test_model_arch_golden.c: the generator into $LUMEN_ARCH_DIR.
// LM_TEST_LABELS: model;arch
#include "lm_test_arch.h"
#include "tok_golden.h"

enum { NP = 48, NS = 8, GEN = 8 };

// The invariances on one file and KV type; the one-batch prefill's logits into out (NP rows).
static void run(struct lm_model *m, const char *path, enum lm_kv_type kv, float *out) {
    const int nv = lm_model_n_vocab(m);
    char what[1100];
    snprintf(what, sizeof what, "%s (KV %s)", path, lm_kv_type_name(kv));
    int32_t prompt[NP];
    lm_test_ids(prompt, NP, 1, nv);
    float *got = malloc(sizeof(float) * (size_t)nv * NP), *ref = malloc(sizeof(float) * (size_t)nv * GEN);
    struct lm_context_params cp = {.n_ctx = 256, .n_seq_max = NS, .n_batch = 128, .n_threads = 2,
                                   .kv_tokens = 1024, .kv_type_k = kv, .kv_type_v = kv};
    struct lm_context *c = NULL;
    CHECKF(lm_context_init(&c, m, &cp) == LM_OK, "%s: %s", what, lm_error_msg());
    if (!c) { free(got); free(ref); return; }
    CHECK(lm_test_prefill(c, 0, prompt, NP, NP, out, nv));
    const int chunks[] = {1, 5, 17};
    for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
        CHECK(lm_kv_cache_seq_rm(c, 0, 0, -1) == LM_OK);
        CHECK(lm_test_prefill(c, 0, prompt, NP, chunks[k], got, nv));
        const int bad = lm_test_first_diff(out, got, NP, nv);
        CHECKF(bad < 0, "%s: chunks of %d: position %d differs from the one-batch prefill", what,
               chunks[k], bad);
    }
    CHECK(lm_kv_cache_seq_rm(c, 0, 0, -1) == LM_OK);
    int32_t toks[GEN];
    CHECK(lm_test_greedy_alone(c, prompt, NP, GEN, ref, toks, nv));
    lm_test_beside_others(c, what, prompt, NP, GEN, NS, 4, 100, ref, toks, nv);
    struct lm_context_params c1p = cp;
    c1p.n_threads = 1;
    struct lm_context *c1 = NULL;
    CHECK(lm_context_init(&c1, m, &c1p) == LM_OK);
    if (c1) {
        CHECK(lm_test_prefill(c1, 0, prompt, NP, 13, got, nv));
        const int bad = lm_test_first_diff(out, got, NP, nv);
        CHECKF(bad < 0, "%s: 1 thread vs 2: position %d differs", what, bad);
        lm_context_free(c1);
    }
    printf("%s: prefill chunks, 8 mixed sequences, 1 and 2 threads: bit-identical\n", what);
    lm_context_free(c);
    free(got);
    free(ref);
}

static void run_file(const char *path) {
    struct lm_model *m = NULL;
    if (lm_model_load(&m, path, NULL) != LM_OK) {
        CHECKF(0, "cannot load %s: %s", path, lm_error_msg());
        return;
    }
    CHECK(!strcmp(lm_model_arch(m), "gpt-oss"));
    const int nv = lm_model_n_vocab(m);
    float *f16 = malloc(sizeof(float) * (size_t)nv * NP), *q8 = malloc(sizeof(float) * (size_t)nv * NP);
    run(m, path, LM_KV_F16, f16);
    run(m, path, LM_KV_Q8_0, q8);
    int agree = 0;
    for (int p = 0; p < NP; p++)
        agree += lm_test_argmax(f16 + (size_t)p * nv, nv) == lm_test_argmax(q8 + (size_t)p * nv, nv);
    printf("%s: Q8_0 KV cache: top-1 as the f16 cache's at %d of %d positions\n", path, agree, NP);
    CHECKF(agree >= NP - 4, "%s: Q8_0 KV: top-1 as f16's at only %d of %d positions", path, agree, NP);
    free(f16);
    free(q8);
    lm_model_free(m);
}

// ---------------------------------------------------------------- as downloaded

// A gpt-oss file with its own tokenizer: llama.cpp's ids from the file's tokenizer, the harmony
// template detected (by the library and by `lumen info`), the ends of generation.
static void as_downloaded(const char *path) {
    struct lm_model *m = NULL;
    if (lm_model_load(&m, path, NULL) != LM_OK) {
        CHECKF(0, "cannot load %s: %s", path, lm_error_msg());
        return;
    }
    const struct lm_tokenizer *t = lm_model_tokenizer(m);
    CHECKF(lm_chat_template_detect(t, lm_model_arch(m), lm_model_chat_template(m)) == LM_CHAT_TEMPLATE_HARMONY,
           "%s: the official template does not read as harmony", path);
    int32_t *ids = NULL;
    size_t n = 0;
    static const char *const ends[] = {"<|return|>", "<|call|>", "<|end|>"};
    for (int k = 0; k < 3; k++) {
        CHECK(lm_tokenize(t, ends[k], strlen(ends[k]), false, true, &ids, &n) == LM_OK && n == 1);
        if (n == 1) CHECKF(lm_tokenizer_is_eog(t, ids[0]) == (k < 2), "%s: %s %s generation", path, ends[k],
                           k < 2 ? "does not end" : "ends");
        free(ids);
        ids = NULL;
    }
    tg_check_golden(t, "tests/golden/tokens_gpt-oss.tsv", path);
    lm_model_free(m);
    const char *bin = getenv("LUMEN_BIN");
    if (!bin || !*bin) bin = lm_test_path("build/lumen");
    char cmd[2048], line[512];
    snprintf(cmd, sizeof cmd, "'%s' info '%s' 2>&1", bin, path);
    FILE *p = popen(cmd, "r");
    bool harmony = false;
    while (p && fgets(line, sizeof line, p)) harmony |= strstr(line, "chat format    harmony") != NULL;
    CHECKF(p && pclose(p) == 0 && harmony, "%s: lumen info does not say 'chat format    harmony'", cmd);
}

// ---------------------------------------------------------------- refusals

static const char *rename_from, *rename_to;
static void p_rename(unsigned char *b, size_t n) {
    unsigned char *k = lm_test_find(b, n, rename_from);
    CHECKF(k != NULL && strlen(rename_from) == strlen(rename_to), "no '%s' to patch", rename_from);
    if (k) memcpy(k, rename_to, strlen(rename_to));
}

// A copy of src with the first occurrence of `from` overwritten by `to` (same length) loads
// with status want and a message containing msg.
static void refuse(const char *src, const char *from, const char *to, enum lm_status want,
                   const char *msg) {
    char what[256];
    snprintf(what, sizeof what, "%s -> %s", from, to);
    rename_from = from;
    rename_to = to;
    lm_test_patched(src, what, p_rename, want, msg, NULL);
}

static void refusals(const char *path) {
    refuse(path, "blk.0.attn_sinks.weight", "blk.0.attn_sinkz.weight", LM_ERR_FORMAT,
           "missing required tensor 'blk.0.attn_sinks.weight'");
    refuse(path, "blk.1.ffn_down_exps.bias", "blk.1.ffn_down_exps.biaz", LM_ERR_FORMAT,
           "missing required tensor 'blk.1.ffn_down_exps.bias'");
    refuse(path, "blk.0.attn_output.bias", "blk.0.attn_output.biaz", LM_ERR_FORMAT,
           "missing required tensor 'blk.0.attn_output.bias'");
    refuse(path, "blk.1.ffn_gate_inp.bias", "blk.1.ffn_gate_inp.biaz", LM_ERR_FORMAT,
           "missing required tensor 'blk.1.ffn_gate_inp.bias'");
    refuse(path, "gpt-oss.attention.sliding_window", "gpt-oss.attention.sliding_windoz",
           LM_ERR_FORMAT, "gpt-oss.attention.sliding_window");
    refuse(path, "gpt-oss.expert_used_count", "gpt-oss.expert_used_counz", LM_ERR_FORMAT,
           "gpt-oss.expert_used_count");
    refuse(path, "yarn", "yorn", LM_ERR_UNSUPPORTED, "rope scaling 'yorn'");
}

int main(void) {
    char dir[512], path[1024];
    const int gen = lm_test_arch_generate(dir, sizeof dir);
    if (gen <= 0) return gen == 0 ? 0 : lm_test_finish();
    const char *files[] = {"arch_gptoss_f16.gguf", "arch_gptoss_q8_0.gguf", "arch_gptoss_mxfp4moe.gguf",
                           "arch_gptoss_mxfp4.gguf"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        run_file(path);
        if (i >= 2) as_downloaded(path);
    }
    snprintf(path, sizeof path, "%s/%s", dir, files[1]);
    refusals(path);
    return lm_test_finish();
}
