// Golden test of the llama / qwen2 / qwen3 / gemma3 / qwen3moe / deepseek2 / phi3 / granite /
// smollm3 / gpt-oss forward passes against llama.cpp on random-weight models of real widths
// (tools/make_arch_gguf.py --ci: TinyLlama, Llama 3.2 with llama3 rope_freqs, Qwen2.5, Qwen3,
// Gemma 3 1B shapes; a tiny Qwen3-MoE of 8 experts, 2 used, a tiny Mixtral-style llama of 4,
// and two tiny deepseek2 (latent attention with YaRN, shared experts; softmax, or sigmoid +
// bias + groups); Phi-3.5-mini and Phi-4-mini widths (one layer); Granite 3.3 2B widths with
// its four multipliers; a SmolLM3-like copy at n_embd 512 whose layer 3 has no RoPE; few
// layers, 8192-token vocabulary), F16 and a K-quant mix (the llama32 copy also as Q2_K /
// Q3_K_M mixes). Token ids are fed directly. Golden data from tools/gen_golden_arch.py
// (llama.cpp n_ubatch=1, its GEMV path).
// Set-up: runs the committed generator (deterministic; cached by a stamp) into
// $LUMEN_ARCH_DIR (default /tmp/lumen-arch-<uid>) with $LUMEN_PYTHON (default
// .venv/bin/python), then checks each file's sha256 against the golden file's.
// Also: the q8_0 KV rows of two copies against llama.cpp's state (tests/golden/kv_rot_*.txt).
// LM_TEST_LABELS: model;arch
#include "lm_test.h"
#include "lm_test_model.h"
#include "golden_cmp.h"
#include "runtime/context.h"
#include "runtime/kv_cache.h"
#include "tensor/blocks.h"
#include "tensor/dtype.h"

#include <math.h>

#include <time.h>
#include <unistd.h>

#define ARCH_BATCH 256
// The q8_0 K / V rows against llama.cpp's: layer 0 identical, layer 1 (after attention,
// whose float order differs from llama.cpp's flash attention) at most 1.76 steps (printed)
#define KV_ROT_STEPS 2.5

// Limits per file. max_abs: |lumen - llama.cpp| over each position's golden top-20 pairs.
// Measured (2 threads, AVX-512 machine, this commit; printed by the test):
//   F16:  top-1 100% everywhere, max|d| 0.0027-0.0050, mean|d| ~0.0005-0.001
//   qmix: top-1 95.0-100% (every split a near-tie, gap < 0.1), top-5 overlap >= 4
//         everywhere, max|d| 0.06-0.17, mean|d| 0.002-0.03
// The quant-mix limits are looser ON PURPOSE, not silently: with quantized weights every
// matmul input is re-quantized to 8 bits (Q8_0 / Q8_K), so a 1-ulp difference upstream
// (a summation order, expf) flips an int8 rounding and moves the logits by ~1e-2. The
// first position of a sequence (trivial attention) is usually exact to 1e-6. Attention
// now follows llama.cpp's order (kernels/attn_avx512.c); the matmuls' sums do not
// (docs/accuracy.md), which is what these limits still absorb.
struct arch_case {
    const char *gguf;    // file in the generator's output dir
    const char *golden;  // under tests/golden/
    double min_top1;     // fraction of positions whose argmax must agree (others near-ties)
    double max_abs;
};

#define F16_TOP1 0.99
#define F16_ABS 0.02
#define QMIX_TOP1 0.93
#define QMIX_ABS 0.30
static const struct arch_case k_cases[] = {
    {"arch_tinyllama_f16.gguf", "tests/golden/arch_tinyllama_f16.txt", F16_TOP1, F16_ABS},
    {"arch_tinyllama_qmix.gguf", "tests/golden/arch_tinyllama_qmix.txt", QMIX_TOP1, QMIX_ABS},
    {"arch_llama32_f16.gguf", "tests/golden/arch_llama32_f16.txt", F16_TOP1, F16_ABS},
    {"arch_llama32_qmix.gguf", "tests/golden/arch_llama32_qmix.txt", QMIX_TOP1, QMIX_ABS},
    {"arch_qwen25_f16.gguf", "tests/golden/arch_qwen25_f16.txt", F16_TOP1, F16_ABS},
    {"arch_qwen25_qmix.gguf", "tests/golden/arch_qwen25_qmix.txt", QMIX_TOP1, QMIX_ABS},
    {"arch_qwen3_f16.gguf", "tests/golden/arch_qwen3_f16.txt", F16_TOP1, F16_ABS},
    {"arch_qwen3_qmix.gguf", "tests/golden/arch_qwen3_qmix.txt", QMIX_TOP1, QMIX_ABS},
    {"arch_gemma3_f16.gguf", "tests/golden/arch_gemma3_f16.txt", F16_TOP1, F16_ABS},
    {"arch_gemma3_qmix.gguf", "tests/golden/arch_gemma3_qmix.txt", QMIX_TOP1, QMIX_ABS},
    {"arch_qwen3moe_f16.gguf", "tests/golden/arch_qwen3moe_f16.txt", F16_TOP1, F16_ABS},
    {"arch_qwen3moe_qmix.gguf", "tests/golden/arch_qwen3moe_qmix.txt", QMIX_TOP1, QMIX_ABS},
    {"arch_mixtral_f16.gguf", "tests/golden/arch_mixtral_f16.txt", F16_TOP1, F16_ABS},
    {"arch_mixtral_qmix.gguf", "tests/golden/arch_mixtral_qmix.txt", QMIX_TOP1, QMIX_ABS},
    {"arch_llama32_qmix_q2k.gguf", "tests/golden/arch_llama32_qmix_q2k.txt", QMIX_TOP1, QMIX_ABS},
    {"arch_llama32_qmix_q3k.gguf", "tests/golden/arch_llama32_qmix_q3k.txt", QMIX_TOP1, QMIX_ABS},
    {"arch_deepseek2_f16.gguf", "tests/golden/arch_deepseek2_f16.txt", F16_TOP1, F16_ABS},
    // 2 of ids16's 16 positions flip at llama.cpp gaps of 0.004 and 0.020 (3 of its 16 gaps
    // are under 0.1): 14/16 = 0.875; the ids64 sequence agrees at 63/64, max|d| 0.20
    {"arch_deepseek2_qmix.gguf", "tests/golden/arch_deepseek2_qmix.txt", 0.87, QMIX_ABS},
    {"arch_deepseek2v3_f16.gguf", "tests/golden/arch_deepseek2v3_f16.txt", F16_TOP1, F16_ABS},
    {"arch_phi35_f16.gguf", "tests/golden/arch_phi35_f16.txt", F16_TOP1, F16_ABS},
    {"arch_phi35_qmix.gguf", "tests/golden/arch_phi35_qmix.txt", QMIX_TOP1, QMIX_ABS},
    {"arch_phi4_f16.gguf", "tests/golden/arch_phi4_f16.txt", F16_TOP1, F16_ABS},
    {"arch_phi4_qmix.gguf", "tests/golden/arch_phi4_qmix.txt", QMIX_TOP1, QMIX_ABS},
    {"arch_granite_f16.gguf", "tests/golden/arch_granite_f16.txt", F16_TOP1, F16_ABS},
    {"arch_granite_qmix.gguf", "tests/golden/arch_granite_qmix.txt", QMIX_TOP1, QMIX_ABS},
    {"arch_smollm3_f16.gguf", "tests/golden/arch_smollm3_f16.txt", F16_TOP1, F16_ABS},
    {"arch_smollm3_qmix.gguf", "tests/golden/arch_smollm3_qmix.txt", QMIX_TOP1, QMIX_ABS},
    // IQ4 mixes (make_arch_gguf.py 'iq4nl' / 'iq4xs'): 8-bit activations as qmix, same limits
    {"arch_qwen25_iq4nl.gguf", "tests/golden/arch_qwen25_iq4nl.txt", QMIX_TOP1, QMIX_ABS},
    {"arch_llama32_iq4xs.gguf", "tests/golden/arch_llama32_iq4xs.txt", QMIX_TOP1, QMIX_ABS},
    // gpt-oss (biases, attention sinks, a 32-token window on layer 0, YaRN, softmax over the
    // chosen 4 of 8 experts, clamped SwiGLU): F16, and every matrix Q8_0 (8-bit activations
    // as the quant mixes: their limits)
    {"arch_gptoss_f16.gguf", "tests/golden/arch_gptoss_f16.txt", F16_TOP1, F16_ABS},
    {"arch_gptoss_q8_0.gguf", "tests/golden/arch_gptoss_q8_0.txt", QMIX_TOP1, QMIX_ABS},
    // MXFP4 experts (make_arch_gguf.py 'mxfp4moe': llama-quantize's MXFP4_MOE, Q8_0 elsewhere;
    // 'mxfp4': F16 elsewhere, as gpt-oss ships): 8-bit activations as qmix, same limits
    {"arch_qwen3moe_mxfp4moe.gguf", "tests/golden/arch_qwen3moe_mxfp4moe.txt", QMIX_TOP1, QMIX_ABS},
    {"arch_qwen3moe_mxfp4.gguf", "tests/golden/arch_qwen3moe_mxfp4.txt", QMIX_TOP1, QMIX_ABS},
    // gpt-oss as downloaded: MXFP4 experts in both mixes, its own tokenizer (ids fed directly)
    {"arch_gptoss_mxfp4moe.gguf", "tests/golden/arch_gptoss_mxfp4moe.txt", QMIX_TOP1, QMIX_ABS},
    {"arch_gptoss_mxfp4.gguf", "tests/golden/arch_gptoss_mxfp4.txt", QMIX_TOP1, QMIX_ABS},
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char g_dir[512];

// Runs tools/make_arch_gguf.py --ci DIR. Returns 1 if the models are there.
static int generate_models(void) {
    const char *dir = getenv("LUMEN_ARCH_DIR");
    if (dir && *dir) snprintf(g_dir, sizeof g_dir, "%s", dir);
    else snprintf(g_dir, sizeof g_dir, "/tmp/lumen-arch-%d", (int)getuid());
    const char *py = getenv("LUMEN_PYTHON");
    char pybuf[1024];
    if (!py || !*py) {
        snprintf(pybuf, sizeof pybuf, "%s", lm_test_path(".venv/bin/python"));
        py = access(pybuf, X_OK) == 0 ? pybuf : "python3";
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' '%s' --ci '%s'", py, lm_test_path("tools/make_arch_gguf.py"),
             g_dir);
    double t0 = now_s();
    int rc = system(cmd);
    printf("generator: %s -> exit %d (%.1fs)\n", cmd, rc, now_s() - t0);
    if (rc != 0) {
        const char *allow = getenv("LUMEN_ALLOW_SKIP");
        if (allow && !strcmp(allow, "1")) {
            printf("SKIP: cannot generate the architecture models (needs numpy + gguf: "
                   "bash scripts/setup.sh)\n");
            return 0;
        }
        CHECKF(0, "generator failed: %s (needs numpy + gguf: bash scripts/setup.sh; "
               "LUMEN_ALLOW_SKIP=1 to skip)", cmd);
        return 0;
    }
    return 1;
}

// sha256 of `file` from DIR/manifest.txt, or "" if not listed.
static void manifest_sha(const char *file, char *out, size_t n) {
    char path[1024], line[512];
    snprintf(path, sizeof path, "%s/manifest.txt", g_dir);
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        char name[256], sha[128];
        if (sscanf(line, "%255s %127s", name, sha) == 2 && !strcmp(name, file)) {
            snprintf(out, n, "%s", sha);
            break;
        }
    }
    fclose(f);
}

static void run_case(const struct arch_case *ac) {
    struct golden g;
    if (!golden_load(&g, ac->golden[0] == '/' ? ac->golden : lm_test_path(ac->golden))) {
        CHECKF(0, "cannot parse %s", ac->golden);
        return;
    }
    char sha[128];
    manifest_sha(ac->gguf, sha, sizeof sha);
    CHECKF(sha[0] && !strcmp(sha, g.model_sha),
           "%s: generated file sha256 %s differs from the golden file's %s (generator or "
           "numpy/gguf changed: regenerate with tools/gen_golden_arch.py)",
           ac->gguf, sha[0] ? sha : "(missing)", g.model_sha);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", g_dir, ac->gguf);
    double t0 = now_s();
    struct lm_model *m = NULL;
    enum lm_status st = lm_model_load(&m, path, NULL);
    CHECKF(st == LM_OK, "lm_model_load(%s): %s: %s", path, lm_status_name(st), lm_error_msg());
    if (st != LM_OK) { golden_free(&g); return; }
    const int n_vocab = lm_model_n_vocab(m);
    int max_len = 0;
    for (int i = 0; i < g.n_prompts; i++)
        if (g.p[i].n_tokens + g.n_greedy > max_len) max_len = g.p[i].n_tokens + g.n_greedy;
    struct lm_context *c = NULL;
    struct lm_context_params cp = {.n_ctx = max_len, .n_seq_max = 1, .n_batch = ARCH_BATCH,
                                   .n_threads = 2};
    st = lm_context_init(&c, m, &cp);
    CHECKF(st == LM_OK, "lm_context_init: %s: %s", lm_status_name(st), lm_error_msg());
    if (st != LM_OK) { lm_model_free(m); golden_free(&g); return; }

    int tot_pos = 0, tot_agree = 0, tot_greedy = 0, tot_greedy_match = 0;
    double tot_max = 0, tot_sum = 0;
    long tot_n = 0;
    for (int pi = 0; pi < g.n_prompts; pi++) {
        const struct golden_prompt *gp = &g.p[pi];
        struct golden_cmp s = {.g = &g, .gp = gp, .tag = ac->gguf, .n_vocab = n_vocab,
                               .max_abs_pos = -1};
        lm_kv_cache_seq_rm(c, 0, 0, -1);
        if (!golden_decode(c, gp->tokens, gp->n_tokens, ARCH_BATCH, 1, golden_compare_position, &s))
            continue;
        const double rate = s.n_pos ? (double)s.top1_agree / s.n_pos : 0;
        printf("  %-26s %-7s %4d pos  top1 %6.2f%%  top5<%d: %d  max|d| %.5f (pos %d id %d)  "
               "mean|d| %.6f\n", ac->gguf, gp->name, s.n_pos, 100.0 * rate,
               LM_GOLDEN_MIN_TOP5_OVERLAP, s.top5_bad, s.max_abs, s.max_abs_pos, s.max_abs_id,
               s.n_abs ? s.sum_abs / (double)s.n_abs : 0.0);
        CHECKF(rate >= ac->min_top1, "[%s %s] top-1 agreement %.4f < %.2f", ac->gguf, gp->name,
               rate, ac->min_top1);
        CHECKF(s.top1_bad_disagree == 0, "[%s %s] %d top-1 disagreements that are not near-ties",
               ac->gguf, gp->name, s.top1_bad_disagree);
        CHECKF(s.top5_bad == 0, "[%s %s] %d positions with top-5 overlap < %d", ac->gguf,
               gp->name, s.top5_bad, LM_GOLDEN_MIN_TOP5_OVERLAP);
        CHECKF(s.max_abs < ac->max_abs, "[%s %s] max abs logit diff %.5f >= %.3f", ac->gguf,
               gp->name, s.max_abs, ac->max_abs);
        tot_pos += s.n_pos;
        tot_agree += s.top1_agree;
        if (s.max_abs > tot_max) tot_max = s.max_abs;
        tot_sum += s.sum_abs;
        tot_n += s.n_abs;

        // greedy continuation, teacher-forced with llama.cpp's tokens (one token per decode,
        // the decode path)
        lm_kv_cache_seq_rm(c, 0, 0, -1);
        if (!golden_decode(c, gp->tokens, gp->n_tokens, ARCH_BATCH, 0, NULL, NULL)) continue;
        int bad = 0;
        for (int k = 0; k < gp->n_greedy; k++) {
            const float *l = lm_get_logits(c, 0);
            if (!l) { CHECKF(0, "[%s %s] greedy step %d: no logits", ac->gguf, gp->name, k); break; }
            const int t = golden_argmax(l, n_vocab), want = gp->greedy_id[k];
            if (t == want) {
                tot_greedy_match++;
            } else if (!(gp->greedy_gap[k] < LM_GOLDEN_NEAR_TIE)) {
                bad++;
                fprintf(stderr, "  [%s %s] greedy step %d: lumen %d vs llama.cpp %d (gap %.4f)\n",
                        ac->gguf, gp->name, k, t, want, gp->greedy_gap[k]);
            }
            tot_greedy++;
            struct lm_batch_entry e = {.token = want, .pos = gp->n_tokens + k, .seq = 0,
                                       .want_logits = true};
            st = lm_decode(c, &e, 1);
            if (st != LM_OK) {
                CHECKF(0, "[%s %s] greedy decode step %d: %s", ac->gguf, gp->name, k, lm_error_msg());
                break;
            }
        }
        CHECKF(bad == 0, "[%s %s] %d greedy divergences that are not near-ties", ac->gguf,
               gp->name, bad);
    }
    printf("%-26s %-6s top1 %d/%d (%.2f%%)  max|d| %.5f (limit %.3f)  mean|d| %.6f  greedy "
           "%d/%d  %.1fs\n", ac->gguf, lm_model_arch(m), tot_agree, tot_pos,
           tot_pos ? 100.0 * tot_agree / tot_pos : 0.0, tot_max, ac->max_abs,
           tot_n ? tot_sum / (double)tot_n : 0.0, tot_greedy_match, tot_greedy, now_s() - t0);
    lm_context_free(c);
    lm_model_free(m);
    golden_free(&g);
}

// ---- the q8_0 KV cache's rows against llama.cpp's (tools/gen_golden_kv_rot.py): both rotate
// q / k / v by the same Walsh-Hadamard blocks before storing them (docs/kv_cache.md), so the
// stored rows agree to a quantization step; with the rotation off (LUMEN_KV_NO_ROT=1, the
// control) they are other numbers altogether.

// value i of a row of q8_0 blocks, and its block's step d (the blocks may sit unaligned)
static float q8_at(const uint8_t *row, int i, float *step) {
    struct lm_block_q8_0 b;
    memcpy(&b, row + (size_t)(i / LM_QK8_0) * sizeof b, sizeof b);
    *step = lm_f16_to_f32(b.d);
    return *step * (float)b.qs[i % LM_QK8_0];
}

// The largest difference between a value of lumen's q8_0 K / V rows and llama.cpp's, in
// quantization steps (the larger of the two blocks' d), and the fraction of rows identical
// byte for byte.
static void kv_rot_run(struct lm_model *m, const int32_t *toks, int nt, int n_layers, int row,
                       uint8_t *const *gold, double *max_steps, double *same_rows) {
    struct lm_context *c = NULL;
    struct lm_context_params cp = {.n_ctx = 256, .n_batch = nt, .n_threads = 2,
                                   .kv_type_k = LM_KV_Q8_0, .kv_type_v = LM_KV_Q8_0};
    *max_steps = 1e30;
    *same_rows = -1;
    CHECKF(lm_context_init(&c, m, &cp) == LM_OK, "q8_0 context: %s", lm_error_msg());
    if (!c) return;
    struct lm_batch_entry b[64];
    for (int i = 0; i < nt; i++) b[i] = (struct lm_batch_entry){toks[i], i, 0, i == nt - 1};
    CHECKF(lm_decode(c, b, nt) == LM_OK, "decode: %s", lm_error_msg());
    const struct lm_kv_cache *kv = c->kv;
    const struct lm_kv_layout *lay = &kv->lay[kv->seqs[0].layout];
    const int lrow = lay->kv_dim_k / LM_QK8_0 * (int)sizeof(struct lm_block_q8_0);
    CHECKF(lrow == row, "K row of %d bytes, golden %d", lrow, row);
    long rows = 0, same = 0;
    double mx = 0;
    for (int l = 0; l < n_layers; l++)
        for (int w = 0; w < 2; w++)
            for (int p = 0; p < nt; p++) {
                const uint8_t *blk = kv->base + (size_t)kv->seqs[0].blocks[p / LM_KV_BLOCK] * kv->block_bytes;
                // the cell's row gathered from its heads' rows (the pool is head-major, kv_cache.h)
                static uint8_t r[16384];
                const size_t hr = w ? lm_kv_hrow_v(lay) : lm_kv_hrow_k(lay);
                CHECKF((size_t)row <= sizeof r && (size_t)row % hr == 0, "K/V row of %d bytes", row);
                if ((size_t)row > sizeof r || (size_t)row % hr != 0) return;
                for (size_t h = 0; h < (size_t)row / hr; h++)
                    memcpy(r + h * hr, blk + (w ? lay->v_off[l] : lay->k_off[l]) + h * LM_KV_BLOCK * hr +
                                           (size_t)(p % LM_KV_BLOCK) * hr, hr);
                const uint8_t *g = gold[(l * 2 + w) * nt + p];
                for (int i = 0; i < row / (int)sizeof(struct lm_block_q8_0) * LM_QK8_0; i++) {
                    float sr, sg;
                    const float vr = q8_at(r, i, &sr), vg = q8_at(g, i, &sg);
                    const double d = fabsf(vr - vg) / fmaxf(sr, sg);
                    if (d > mx) mx = d;
                }
                same += !memcmp(r, g, (size_t)row);
                rows++;
            }
    *max_steps = mx;
    *same_rows = (double)same / (double)rows;
    lm_context_free(c);
}

static void run_kv_rot(const char *golden) {
    FILE *f = fopen(lm_test_path(golden), "r");
    CHECKF(f != NULL, "cannot open %s", golden);
    if (!f) return;
    static char line[1 << 16];
    char file[256] = "", sha[128] = "";
    int hd = 0, kvh = 0, row = 0, nt = 0, n_layers = 0;
    int32_t toks[64];
    uint8_t *gold[2 * 4 * 64] = {0};
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        int l, p;
        char kind;
        if (sscanf(line, "model %255s %127s", file, sha) == 2) continue;
        if (sscanf(line, "head_dim %d n_head_kv %d row_bytes %d", &hd, &kvh, &row) == 3) continue;
        if (sscanf(line, "n_layers %d", &n_layers) == 1) continue;
        if (!strncmp(line, "tokens ", 7)) {
            char *s = line + 7, *e;
            for (long v; nt < 64 && (v = strtol(s, &e, 10), e != s); s = e) toks[nt++] = (int32_t)v;
            continue;
        }
        if (sscanf(line, "%d %c %d", &l, &kind, &p) == 3 && l >= 0 && l < 4 && p >= 0 && p < nt && row > 0) {
            const char *h = strrchr(line, ' ') + 1;
            uint8_t *r = malloc((size_t)row);
            for (int i = 0; i < row; i++) sscanf(h + 2 * i, "%2hhx", &r[i]);
            gold[(l * 2 + (kind == 'V')) * nt + p] = r;
        }
    }
    fclose(f);
    int complete = nt > 0 && n_layers > 0 && n_layers <= 4;
    for (int i = 0; complete && i < n_layers * 2 * nt; i++) complete = gold[i] != NULL;
    CHECKF(complete, "%s: incomplete (tokens %d, layers %d)", golden, nt, n_layers);
    char msha[128];
    manifest_sha(file, msha, sizeof msha);
    CHECKF(msha[0] && !strcmp(msha, sha), "%s: generated file sha256 %s differs from %s's "
           "(regenerate with tools/gen_golden_kv_rot.py)", file, msha[0] ? msha : "(missing)", golden);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", g_dir, file);
    struct lm_model *m = NULL;
    CHECKF(complete && lm_model_load(&m, path, NULL) == LM_OK, "load %s: %s", path, lm_error_msg());
    if (m) {
        double steps, same, steps_off, same_off;
        kv_rot_run(m, toks, nt, n_layers, row, gold, &steps, &same);
        setenv("LUMEN_KV_NO_ROT", "1", 1);
        kv_rot_run(m, toks, nt, n_layers, row, gold, &steps_off, &same_off);
        unsetenv("LUMEN_KV_NO_ROT");
        printf("%s (head size %d): q8_0 K/V values at most %.2f steps from llama.cpp's, rows "
               "identical %.3f; rotation off: %.1f steps, %.3f\n", file, hd, steps, same, steps_off, same_off);
        CHECKF(steps <= KV_ROT_STEPS, "%s: a q8_0 K/V value %.2f quantization steps from llama.cpp's",
               file, steps);
        CHECKF(steps_off > 20, "%s: the control (rotation off) agrees too (%.2f steps): the test cannot tell",
               file, steps_off);
        lm_model_free(m);
    }
    for (size_t i = 0; i < sizeof gold / sizeof gold[0]; i++) free(gold[i]);
}

int main(int argc, char **argv) {
    // test_model_arch_golden [FILTER]: only cases whose file name contains FILTER
    // test_model_arch_golden DIR FILE.gguf GOLDEN.txt MAX_ABS: one ad-hoc case (debugging)
    if (argc == 5) {
        snprintf(g_dir, sizeof g_dir, "%s", argv[1]);
        struct arch_case ac = {argv[2], argv[3], 0.0, atof(argv[4])};
        run_case(&ac);
        return lm_test_finish();
    }
    const char *only = argc > 1 ? argv[1] : NULL;
    if (!generate_models()) return lm_test_finish();
    // LUMEN_TEST_QUICK (the sanitizer and generic-kernel passes): the small F16 copies only.
    // The quant mixes (K-quant, Q2_K / Q3_K, IQ4) run kernels that the kernel tests check bit
    // for bit on every table, and the real-width copies of phi3 (one layer of 100-113M
    // weights), granite (2 layers at 2048 x 8192) and the IQ4 mixes take minutes on the
    // generic kernels; test_model_phi3 and test_model_granite cover those loaders there.
    const int quick = lm_test_quick();
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++)
        if ((!only || strstr(k_cases[i].gguf, only)) &&
            !(quick && (strstr(k_cases[i].gguf, "qmix") || strstr(k_cases[i].gguf, "arch_phi") ||
                       strstr(k_cases[i].gguf, "arch_granite") || strstr(k_cases[i].gguf, "iq4"))))
            run_case(&k_cases[i]);
    if (!only || strstr("kv_rot", only)) {
        run_kv_rot("tests/golden/kv_rot_qwen25.txt");
        run_kv_rot("tests/golden/kv_rot_qwen3.txt");
    }
    return lm_test_finish();
}
