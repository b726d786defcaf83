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
#include "lm_test.h"
#include "lm_test_file.h"
#include "lm_test_model.h"
#include "lumen.h"

#include <unistd.h>

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
        int32_t other[NS][48];
        int olen[NS];
        for (int s = 1; s < NS; s++) { olen[s] = 11 + 4 * s; lm_test_ids(other[s], olen[s], 100 + s, nv); }
        int32_t alone_tok[GEN];
        CHECK(lm_test_greedy_alone(c, prompt, NP, GEN, ref, alone_tok, nv));
        int pos[NS] = {0}, last[NS] = {0}, g0 = 0, diff = 0, steps = 0;
        bool done = false;
        while (!done && steps < 100) {
            struct lm_batch_entry b[128];
            int nb = 0, want0 = -1;
            for (int s = 0; s < NS; s++) {
                const int len = s ? olen[s] : NP;
                const int32_t *t = s ? other[s] : prompt;
                if (pos[s] < len) {
                    const int ch = s ? 5 : 7;
                    for (int i = 0; i < ch && pos[s] < len; i++, pos[s]++) {
                        if (s == 0 && pos[s] == len - 1) want0 = nb;
                        b[nb++] = (struct lm_batch_entry){t[pos[s]], pos[s], s, pos[s] == len - 1};
                    }
                } else {
                    if (s == 0) want0 = nb;
                    b[nb++] = (struct lm_batch_entry){last[s], pos[s], s, true};
                    pos[s]++;
                }
            }
            if (lm_decode(c, b, nb) != LM_OK) {
                CHECKF(0, "%s: mixed batch of %d: %s", path, nb, lm_error_msg());
                break;
            }
            steps++;
            int k = 0;
            for (int i = 0; i < nb; i++) {
                if (!b[i].want_logits) continue;
                const float *l = lm_get_logits(c, k++);
                last[b[i].seq] = lm_test_argmax(l, nv);
                if (i == want0) {
                    if (!lm_test_same(l, ref + (size_t)g0 * nv, nv) || last[0] != alone_tok[g0]) diff++;
                    last[0] = alone_tok[g0];
                    if (++g0 == GEN) done = true;
                }
            }
        }
        CHECKF(done && diff == 0, "%s: sequence 0 beside %d others: %d of %d steps differ", path, NS - 1, diff, g0);
        printf("%s: beside %d others (%d batches): %d generated positions bit-identical\n", path,
               NS - 1, steps, g0);
        for (int s = 0; s < NS; s++) CHECK(lm_kv_cache_seq_rm(c, s, 0, -1) == LM_OK);
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

static unsigned char *find(unsigned char *b, size_t n, const char *s) {
    const size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(b + i, s, k)) return b + i;
    return NULL;
}

// A copy of the model at src with one patch (patch() edits the bytes) loads with status
// want and a message containing msg.
static void refuse(const char *src, const char *what, void (*patch)(unsigned char *, size_t),
                   enum lm_status want, const char *msg) {
    size_t n = 0;
    unsigned char *b = (unsigned char *)lm_test_read_file(src, &n);
    CHECKF(b != NULL, "cannot read %s", src);
    if (!b) return;
    patch(b, n);
    char dst[1024];
    snprintf(dst, sizeof dst, "%s.bad-%d.gguf", src, (int)getpid());
    FILE *f = fopen(dst, "wb");
    CHECK(f && fwrite(b, 1, n, f) == n);
    if (f) fclose(f);
    free(b);
    struct lm_model *m = NULL;
    const enum lm_status st = lm_model_load(&m, dst, NULL);
    CHECKF(st == want && strstr(lm_error_msg(), msg), "%s: got %s '%s', want %s with '%s'", what,
           lm_status_name(st), st ? lm_error_msg() : "", lm_status_name(want), msg);
    printf("refused (%s): %s\n", what, st ? lm_error_msg() : "(loaded!)");
    lm_model_free(m);
    remove(dst);
}

// qwen3moe.expert_used_count: the u32 after the key string and its type
static void p_used_9(unsigned char *b, size_t n) {
    unsigned char *k = find(b, n, "qwen3moe.expert_used_count");
    if (k) { uint32_t v = 9; memcpy(k + strlen("qwen3moe.expert_used_count") + 4, &v, 4); }
}
static void p_count_0(unsigned char *b, size_t n) {
    unsigned char *k = find(b, n, "qwen3moe.expert_count");
    if (k) { uint32_t v = 0; memcpy(k + strlen("qwen3moe.expert_count") + 4, &v, 4); }
}
// blk.0.ffn_up_exps.weight's ne[2] (name, n_dims u32, ne[0], ne[1], ne[2] u64): 8 -> 7
static void p_up_ne2(unsigned char *b, size_t n) {
    unsigned char *k = find(b, n, "blk.0.ffn_up_exps.weight");
    if (k) { uint64_t v = 7; memcpy(k + strlen("blk.0.ffn_up_exps.weight") + 4 + 16, &v, 8); }
}
static void p_down_name(unsigned char *b, size_t n) {
    unsigned char *k = find(b, n, "blk.1.ffn_down_exps.weight");
    if (k) k[strlen("blk.1.ffn_down_exp")] = 'z';
}
static void p_router_name(unsigned char *b, size_t n) {
    unsigned char *k = find(b, n, "blk.0.ffn_gate_inp.weight");
    if (k) k[strlen("blk.0.ffn_gate_in")] = 'x';
}

static void refusals(const char *path) {
    refuse(path, "expert_used_count 9 of 8", p_used_9, LM_ERR_FORMAT, "expert_used_count 9");
    refuse(path, "expert_count 0", p_count_0, LM_ERR_FORMAT, "expert_count 0");
    refuse(path, "7 experts in ffn_up_exps", p_up_ne2, LM_ERR_FORMAT,
           "'blk.0.ffn_up_exps.weight' has shape [256, 256, 7], expected [256, 256, 8]");
    refuse(path, "no ffn_down_exps", p_down_name, LM_ERR_FORMAT,
           "missing required expert tensor 'blk.1.ffn_down_exps.weight'");
    refuse(path, "no router", p_router_name, LM_ERR_FORMAT,
           "missing required tensor 'blk.0.ffn_gate_inp.weight'");
}

int main(void) {
    char dir[512], cmd[2048], path[1024];
    const char *d = getenv("LUMEN_ARCH_DIR");
    if (d && *d) snprintf(dir, sizeof dir, "%s", d);
    else snprintf(dir, sizeof dir, "/tmp/lumen-arch-%d", (int)getuid());
    const char *py = getenv("LUMEN_PYTHON");
    char pybuf[1024];
    if (!py || !*py) {
        snprintf(pybuf, sizeof pybuf, "%s", lm_test_path(".venv/bin/python"));
        py = access(pybuf, X_OK) == 0 ? pybuf : "python3";
    }
    snprintf(cmd, sizeof cmd, "'%s' '%s' --ci '%s'", py, lm_test_path("tools/make_arch_gguf.py"), dir);
    if (system(cmd) != 0) {
        const char *allow = getenv("LUMEN_ALLOW_SKIP");
        if (allow && !strcmp(allow, "1")) {
            printf("SKIP: cannot generate the architecture models (needs numpy + gguf)\n");
            return 0;
        }
        CHECKF(0, "generator failed: %s", cmd);
        return lm_test_finish();
    }
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
