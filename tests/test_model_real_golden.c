// Golden test against llama.cpp on the trained models that scripts/setup.sh --models fetches
// (tools/fetch_models.py): Qwen2.5-Coder 1.5B and 0.5B Q4_K_M, SmolLM2-135M Q4_1. Per prompt:
// tokenization, every position's top-1 / top-5 against llama.cpp's, and a 16-step greedy
// continuation (teacher-forced with llama.cpp's tokens). Golden data: tools/gen_golden_real.py
// (llama.cpp n_ubatch=1). A model that is absent is skipped with one line.
// LM_TEST_LABELS: model;real;slow
#include "lm_test.h"
#include "lm_test_model.h"
#include "lumen.h"
#include "golden_cmp.h"

#include <unistd.h>

// A split (lumen's top-1 is not llama.cpp's) is allowed only where llama.cpp's own top-1 /
// top-2 gap is below this: the same rule as the default model's greedy continuation
// (tests/test_model_gemma3_golden.c: llama.cpp's own two batch paths move a gap by up to ~1.2
// logits on a quantized model, median 0.11).
#define REAL_GAP 0.5
#define REAL_MIN_TOP5 3 // top-5 overlap at every position (of 5)
// |lumen - llama.cpp| over each position's golden top-20. Measured (2 threads, AVX-512 VNNI,
// this commit): Qwen2.5-Coder 1.5B 0.22-0.45, 0.5B 0.20-0.34, SmolLM2-135M Q4_1 0.000 (its
// q4_1 x q8_1 dots sum in llama.cpp's order); top-1 and greedy 100% on all nine prompts.
// LUMEN_FORCE_GENERIC=1: the same for Qwen; SmolLM2 0.44-0.85, greedy 15/16 (near-ties).
#define REAL_MAX_ABS 1.5
#define REAL_BATCH 64

struct real_case {
    const char *file;   // under models/
    const char *golden; // under tests/golden/
    int quick;          // also run under LUMEN_TEST_QUICK=1 (the sanitizer pass: the small one)
};

static const struct real_case k_cases[] = {
    {"models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
     "tests/golden/real_qwen2.5-coder-1.5b-instruct-q4_k_m.txt", 0},
    {"models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
     "tests/golden/real_qwen2.5-coder-0.5b-instruct-q4_k_m.txt", 0},
    {"models/smollm2-135m-instruct-q4_1.gguf", "tests/golden/real_smollm2-135m-instruct-q4_1.txt",
     1},
};

struct pos_state {
    const struct golden *g;
    const struct golden_prompt *gp;
    const char *tag;
    int n_vocab, n_pos, top1, bad_split, top5_low;
    double max_abs;
};

static void check_position(void *ud, int pos, const float *logits) {
    struct pos_state *s = ud;
    const int nt = s->g->n_top;
    const int32_t *gid = s->gp->top_id + (size_t)pos * nt;
    const float *gval = s->gp->top_val + (size_t)pos * nt;
    int32_t mine[5];
    golden_top_k(logits, s->n_vocab, 5, mine);
    s->n_pos++;
    if (mine[0] == gid[0]) {
        s->top1++;
    } else if (!(gval[0] - gval[1] < REAL_GAP)) {
        s->bad_split++;
        fprintf(stderr, "  [%s %s] pos %d: top-1 %d vs llama.cpp %d, llama.cpp gap %.4f\n", s->tag,
                s->gp->name, pos, mine[0], gid[0], gval[0] - gval[1]);
    }
    int overlap = 0;
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 5; b++) overlap += mine[a] == gid[b];
    if (overlap < REAL_MIN_TOP5) {
        s->top5_low++;
        fprintf(stderr, "  [%s %s] pos %d: top-5 overlap %d\n", s->tag, s->gp->name, pos, overlap);
    }
    for (int k = 0; k < nt; k++) {
        if (gid[k] < 0 || gid[k] >= s->n_vocab) continue;
        double d = fabs((double)logits[gid[k]] - (double)gval[k]);
        if (!(d <= s->max_abs)) s->max_abs = isnan(d) ? INFINITY : d;
    }
}

// Greedy steps after the prompt (decoded into c), teacher-forced with llama.cpp's tokens:
// the matches; splits where llama.cpp's gap is not below REAL_GAP count in *bad.
static int greedy(struct lm_context *c, const struct golden_prompt *gp, const char *tag,
                  int n_vocab, int *bad) {
    int n_match = 0;
    for (int k = 0; k < gp->n_greedy; k++) {
        const float *l = lm_get_logits(c, 0);
        CHECKF(l != NULL, "[%s %s] greedy step %d: no logits", tag, gp->name, k);
        if (!l) break;
        const int t = golden_argmax(l, n_vocab), want = gp->greedy_id[k];
        if (t == want) {
            n_match++;
        } else if (!(gp->greedy_gap[k] < REAL_GAP)) {
            (*bad)++;
            fprintf(stderr, "  [%s %s] greedy step %d: lumen %d vs llama.cpp %d, gap %.4f\n", tag,
                    gp->name, k, t, want, gp->greedy_gap[k]);
        }
        struct lm_batch_entry e = {.token = want, .pos = gp->n_tokens + k, .seq = 0,
                                   .want_logits = true};
        const enum lm_status st = lm_decode(c, &e, 1);
        CHECKF(st == LM_OK, "[%s %s] greedy step %d: %s", tag, gp->name, k, lm_error_msg());
        if (st != LM_OK) break;
    }
    return n_match;
}

static void run_prompt(struct lm_context *c, const struct lm_tokenizer *tok,
                       const struct golden *g, const struct golden_prompt *gp, const char *tag,
                       int n_vocab) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    enum lm_status st = lm_tokenize(tok, gp->text, gp->text_len, true, gp->special != 0, &ids,
                                    &n_ids);
    int same = st == LM_OK && n_ids == (size_t)gp->n_tokens;
    for (size_t i = 0; same && i < n_ids; i++) same = ids[i] == gp->tokens[i];
    CHECKF(same, "[%s %s] token ids equal llama.cpp's (%zu vs %d tokens)", tag, gp->name, n_ids,
           gp->n_tokens);
    free(ids);

    struct pos_state s = {.g = g, .gp = gp, .tag = tag, .n_vocab = n_vocab};
    lm_kv_cache_seq_rm(c, 0, 0, -1);
    if (!golden_decode(c, gp->tokens, gp->n_tokens, REAL_BATCH, 1, check_position, &s)) return;
    lm_kv_cache_seq_rm(c, 0, 0, -1);
    if (!golden_decode(c, gp->tokens, gp->n_tokens, REAL_BATCH, 0, NULL, NULL)) return;
    int bad = 0;
    const int n_match = greedy(c, gp, tag, n_vocab, &bad);
    printf("[%s %-5s] %3d pos: top-1 %d/%d, splits beyond gap %.1f %d, top-5<%d %d, max|d| %.3f; "
           "greedy %d/%d, splits beyond the gap %d\n", tag, gp->name, s.n_pos, s.top1, s.n_pos,
           REAL_GAP, s.bad_split, REAL_MIN_TOP5, s.top5_low, s.max_abs, n_match, gp->n_greedy,
           bad);
    CHECKF(s.bad_split == 0, "[%s %s] %d top-1 splits where llama.cpp's gap >= %.1f", tag,
           gp->name, s.bad_split, REAL_GAP);
    CHECKF(s.top5_low == 0, "[%s %s] %d positions with top-5 overlap < %d", tag, gp->name,
           s.top5_low, REAL_MIN_TOP5);
    CHECKF(s.max_abs <= REAL_MAX_ABS, "[%s %s] max |d| %.3f > %.1f", tag, gp->name, s.max_abs,
           REAL_MAX_ABS);
    CHECKF(bad == 0, "[%s %s] %d greedy splits where llama.cpp's gap >= %.1f", tag, gp->name, bad,
           REAL_GAP);
}

static void run_case(const struct real_case *rc) {
    const char *path = lm_test_path(rc->file);
    const char *tag = strrchr(rc->file, '/') + 1;
    if (lm_test_quick() && !rc->quick) {
        printf("quick: %s left out (LUMEN_TEST_QUICK)\n", rc->file);
        return;
    }
    if (access(path, R_OK) != 0) {
        printf("SKIP: %s absent (bash scripts/setup.sh --models fetches it)\n", rc->file);
        return;
    }
    struct golden g;
    if (!golden_load(&g, lm_test_path(rc->golden))) {
        CHECKF(0, "cannot parse %s", rc->golden);
        return;
    }
    CHECKF(!strcmp(g.model_file, tag), "%s is the golden of %s, not %s", rc->golden,
           g.model_file, tag);
    struct lm_model *m = lm_test_load(path);
    CHECK(m != NULL);
    struct lm_context *c = NULL;
    struct lm_context_params cp = {.n_ctx = 512, .n_seq_max = 1, .n_batch = REAL_BATCH,
                                   .n_threads = 2};
    if (m && lm_context_init(&c, m, &cp) != LM_OK) {
        CHECKF(0, "lm_context_init(%s): %s", tag, lm_error_msg());
        c = NULL;
    }
    for (int pi = 0; c && pi < g.n_prompts; pi++)
        run_prompt(c, lm_model_tokenizer(m), &g, &g.p[pi], tag, lm_model_n_vocab(m));
    lm_context_free(c);
    lm_model_free(m);
    golden_free(&g);
}

int main(void) {
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) run_case(&k_cases[i]);
    return lm_test_finish();
}
