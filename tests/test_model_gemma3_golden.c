// Golden test against llama.cpp on the default Gemma 3 model, through include/lumen.h only:
// tokenization, per-position logits (top-1 / top-5 / top-20 values) and a 64-step greedy
// continuation. Data from tools/gen_golden_logits.py, two files of the same prompts:
//   gemma3_logits.txt          llama.cpp with n_ubatch=1 (one token per decode: its GEMV path)
//   gemma3_logits_batched.txt  llama.cpp with n_ubatch=512 (its repacked/llamafile GEMM path)
// LM_TEST_LABELS: model
#include "lm_test.h"
#include "lm_test_model.h"
#include "lumen.h"
#include "golden_cmp.h" // golden file format, parser, top-k helpers

#include <stdint.h>
#include <time.h>

#define LM_GOLDEN_BATCH 512

// What holds, measured (2 threads, AVX-512 VNNI, this commit):
//   - llama.cpp reproduces both files exactly (same build, same settings).
//   - lumen reproduces position 0 of every prompt (BOS: attention over one cell) to the
//     files' printed precision, 2e-5 (checked below, LM_GOLDEN_POS0_ABS).
//   - From position 1 on (attention over 2 cells and more) lumen does NOT reproduce either
//     file: its top-20 logits differ from the GEMV file by up to 0.4-0.6 in the short prompts
//     (0.59 at position 2 of short_english, 0.57 at position 5 of question), mean |d| 0.20 and
//     max 1.75 over all 1041 positions, top-1 97.2% (14 splits where llama.cpp's top-2 gap is
//     not a near-tie). llama.cpp's own two batch paths differ from each other just as much
//     (mean |d| 0.20, max 1.84, top-1 96.8%, 14 such splits). The cause is float summation
//     order: lumen follows llama.cpp's order in attention (src/runtime/ops.c) but not in every
//     kernel (layer dumps found the first difference, one ulp, in a Q4_K matmul where llama.cpp
//     runs a repacked 8-row GEMV), and this model amplifies a 1-ulp difference in one sum
//     chaotically (8-bit re-quantization of every matmul input can turn it into a whole
//     rounding step), moving a logit by ~0.3 a few layers later.
//     Against the float64 reference (tools/ref_forward.py, tests/test_model_ref_forward*.sh,
//     docs/accuracy.md) lumen and llama.cpp are equally far from exact: mean KL 3.7e-3 vs
//     3.6e-3 over these 1041 positions, and 7.8e-7 vs 7.6e-7 on an all-F32 copy of the model,
//     where no 8-bit rounding amplifies the order.
// So the tolerances are calibrated by llama.cpp itself: lumen must agree with the GEMV file at
// least as well as llama.cpp's two paths agree with each other, within a small margin, and its
// greedy continuations may only split where llama.cpp's own top-2 gap is small.
#define LM_GOLDEN_MARGIN 0.005      // allowed excess in rates (fraction of positions) ...
#define LM_GOLDEN_MARGIN_POS 2      // ... plus this many positions (small subsets: quick mode)
// The top-5 overlap's extra positions: windows past LM_ATTN_CHUNK (512) cells run the chunked
// attention order (kernels.h; p unrounded within a chunk, one merge), which moved the 5th
// candidate at 3 more of the long prompt's positions than llama.cpp's f16-rounded order
// (13 vs 10 of 1041) while the mean KL to the float64 reference stayed 3.74e-3 (3.73e-3 before;
// tests/test_model_ref_forward_full.sh, docs/accuracy.md): a measure of distance from
// llama.cpp's rounding, not of accuracy
#define LM_GOLDEN_TOP5_POS 5
#define LM_GOLDEN_ABS_FACTOR 1.6    // allowed factor on llama.cpp's own max |diff|
#define LM_GOLDEN_MEAN_FACTOR 1.25  // allowed factor on llama.cpp's own mean |diff|
#define LM_GOLDEN_GREEDY_GAP 0.5    // a greedy split needs llama.cpp's gap below this
// ... on either of llama.cpp's two paths while their greedy histories are the same (the
// two paths themselves move a top-1/top-2 gap by up to ~1.2 logits, median 0.11)
#define LM_GOLDEN_POS0_ABS 2e-5     // position 0: the files print 6 decimals of logits ~15

// LUMEN_TEST_QUICK=1 (the sanitizer pass): leave out the 864-token prompt and compare 16
// greedy steps; the same limits, computed over the same subset, still apply.
static int skip_prompt(const char *name) { return lm_test_quick() && !strcmp(name, "long"); }

struct agree {
    int n_pos, top1, bad_top1, top5_bad;
    double max_abs, sum_abs;
    long n_abs;
    int greedy, greedy_match, greedy_bad;
};

// =====================================================================  helpers

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// =====================================================================  per-position comparison

struct cmp_state {
    const struct golden *g;
    const struct golden_prompt *gp;
    int n_vocab;
    int n_pos, top1_agree, top1_bad_disagree, top5_bad;
    double max_abs, sum_abs;
    long n_abs;
    int max_abs_pos, max_abs_id;
    double pos0_abs; // max |diff| at position 0
};

static void compare_position(void *ud, int pos, const float *logits) {
    struct cmp_state *s = ud;
    const int nt = s->g->n_top;
    const int32_t *gid = s->gp->top_id + (size_t)pos * nt;
    const float *gval = s->gp->top_val + (size_t)pos * nt;
    int32_t mine[5];
    golden_top_k(logits, s->n_vocab, 5, mine);
    s->n_pos++;
    if (mine[0] == gid[0]) {
        s->top1_agree++;
    } else {
        float gap = gval[0] - gval[1];
        fprintf(stderr, "  [%s] pos %d: top-1 %d (%.4f) vs llama.cpp %d (%.4f), llama.cpp gap %.4f%s\n",
                s->gp->name, pos, mine[0], logits[mine[0]], gid[0], gval[0], gap,
                gap < LM_GOLDEN_NEAR_TIE ? " (near-tie, allowed)" : "");
        if (!(gap < LM_GOLDEN_NEAR_TIE)) s->top1_bad_disagree++;
    }
    int overlap = 0;
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 5; b++)
            if (mine[a] == gid[b]) overlap++;
    if (overlap < LM_GOLDEN_MIN_TOP5_OVERLAP) {
        s->top5_bad++;
        fprintf(stderr, "  [%s] pos %d: top-5 overlap %d: lumen %d %d %d %d %d vs llama.cpp %d %d %d %d %d\n",
                s->gp->name, pos, overlap, mine[0], mine[1], mine[2], mine[3], mine[4],
                gid[0], gid[1], gid[2], gid[3], gid[4]);
    }
    for (int k = 0; k < nt; k++) {
        if (gid[k] < 0 || gid[k] >= s->n_vocab) continue;
        double d = fabs((double)logits[gid[k]] - (double)gval[k]);
        if (pos == 0 && !(d <= s->pos0_abs)) s->pos0_abs = isnan(d) ? INFINITY : d;
        if (!(d <= s->max_abs)) { // also catches NaN
            s->max_abs = isnan(d) ? INFINITY : d;
            s->max_abs_pos = pos;
            s->max_abs_id = gid[k];
        }
        s->sum_abs += d;
        s->n_abs++;
    }
}

// =====================================================================  main

// Greedy steps after the prompt (already decoded into c), teacher-forced with llama.cpp's
// token: the number that match; the first divergence (-1: none) and the divergences that are
// no near-tie (bad) go to *first_div and *bad. op: the other golden file's prompt (its gaps).
static int greedy_steps(struct lm_context *c, const struct golden_prompt *gp,
                        const struct golden_prompt *op, int n_vocab, int n_greedy, int *first_div,
                        int *bad) {
    int n_match = 0;
    for (int k = 0; k < n_greedy; k++) {
        const float *l = lm_get_logits(c, 0);
        CHECKF(l != NULL, "[%s] greedy step %d: no logits", gp->name, k);
        if (!l) break;
        int t = golden_argmax(l, n_vocab);
        int want = gp->greedy_id[k];
        if (t == want) {
            n_match++;
        } else {
            float gap = gp->greedy_gap[k];
            // the other llama.cpp path's gap counts while its greedy history is the same
            int same = op->n_greedy > k;
            for (int j = 0; same && j < k; j++) same = op->greedy_id[j] == gp->greedy_id[j];
            if (same && op->greedy_id[k] == want && op->greedy_gap[k] < gap) gap = op->greedy_gap[k];
            int allowed = gap < LM_GOLDEN_GREEDY_GAP;
            fprintf(stderr, "  [%s] greedy step %d: lumen %d (%.4f) vs llama.cpp %d (%.4f here), "
                    "llama.cpp gap %.4f%s\n", gp->name, k, t, l[t], want, l[want], gap,
                    allowed ? " (near-tie, allowed)" : "");
            if (*first_div < 0) *first_div = k;
            if (!allowed) (*bad)++;
        }
        struct lm_batch_entry e = {.token = want, .pos = gp->n_tokens + k, .seq = 0,
                                   .want_logits = true};
        const enum lm_status st = lm_decode(c, &e, 1);
        CHECKF(st == LM_OK, "[%s] greedy decode step %d: %s: %s", gp->name, k,
               lm_status_name(st), lm_error_msg());
        if (st != LM_OK) break;
    }
    return n_match;
}

// other: the other golden file (the other llama.cpp path), for its greedy gaps
static void run_file(const char *file, const char *other, struct agree *tot) {
    const char *model_path = lm_test_model_path();
    FILE *mf = fopen(model_path, "rb");
    if (!mf) {
        const char *allow = getenv("LUMEN_ALLOW_SKIP");
        if (allow && !strcmp(allow, "1")) {
            printf("SKIP: model %s not found\n", model_path);
            return;
        }
        CHECKF(0, "model %s not found (bash scripts/setup.sh writes it)", model_path);
        return;
    }
    fclose(mf);

    struct golden g;
    const char *gpath = lm_test_path(file);
    printf("== lumen vs %s\n", file);
    if (!golden_load(&g, gpath)) {
        CHECKF(0, "cannot parse %s", gpath);
        return;
    }
    struct golden go;
    if (!golden_load(&go, lm_test_path(other)) || go.n_prompts != g.n_prompts) {
        CHECKF(0, "cannot parse %s", other);
        golden_free(&g);
        return;
    }

    double t0 = now_s();
    struct lm_model *m = NULL;
    enum lm_status st = lm_model_load(&m, model_path, NULL);
    CHECKF(st == LM_OK, "lm_model_load(%s): %s: %s", model_path, lm_status_name(st), lm_error_msg());
    if (st != LM_OK) { golden_free(&g); golden_free(&go); return; }
    const struct lm_tokenizer *tok = lm_model_tokenizer(m);
    const int n_vocab = lm_model_n_vocab(m);
    CHECKF(n_vocab == 262144, "n_vocab %d", n_vocab);

    struct lm_context *c = NULL;
    struct lm_context_params cp = {.n_ctx = 2048, .n_seq_max = 1, .n_batch = LM_GOLDEN_BATCH,
                                   .n_threads = 2};
    st = lm_context_init(&c, m, &cp);
    CHECKF(st == LM_OK, "lm_context_init: %s: %s", lm_status_name(st), lm_error_msg());
    if (st != LM_OK) { lm_model_free(m); golden_free(&g); golden_free(&go); return; }

    int tot_pos = 0, tot_agree = 0, tot_tok_mismatch = 0, tot_greedy_match = 0, tot_greedy = 0;
    double tot_max_abs = 0, tot_sum_abs = 0;
    long tot_n_abs = 0;

    for (int pi = 0; pi < g.n_prompts; pi++) {
        const struct golden_prompt *gp = &g.p[pi];
        if (skip_prompt(gp->name)) continue;

        // ---- tokenization
        int32_t *ids = NULL;
        size_t n_ids = 0;
        st = lm_tokenize(tok, gp->text, gp->text_len, true, gp->special != 0, &ids, &n_ids);
        CHECKF(st == LM_OK, "[%s] lm_tokenize: %s: %s", gp->name, lm_status_name(st), lm_error_msg());
        int tok_ok = st == LM_OK && n_ids == (size_t)gp->n_tokens;
        for (size_t i = 0; tok_ok && i < n_ids; i++) tok_ok = ids[i] == gp->tokens[i];
        if (!tok_ok && st == LM_OK) {
            size_t first = 0;
            while (first < n_ids && (int)first < gp->n_tokens && ids[first] == gp->tokens[first]) first++;
            fprintf(stderr, "  [%s] tokenization differs: %zu vs %d tokens, first difference at %zu "
                    "(lumen %d, llama.cpp %d); continuing with llama.cpp's ids\n",
                    gp->name, n_ids, gp->n_tokens, first,
                    first < n_ids ? ids[first] : -1,
                    (int)first < gp->n_tokens ? gp->tokens[first] : -1);
        }
        CHECKF(tok_ok, "[%s] token ids equal llama.cpp's", gp->name);
        if (!tok_ok) tot_tok_mismatch++;
        free(ids);

        // ---- all-position logits
        struct cmp_state s = {.g = &g, .gp = gp, .n_vocab = n_vocab, .max_abs_pos = -1};
        lm_kv_cache_seq_rm(c, 0, 0, -1);
        double tp = now_s();
        int ok = golden_decode(c, gp->tokens, gp->n_tokens, LM_GOLDEN_BATCH, 1, compare_position, &s);
        tp = now_s() - tp;
        if (!ok) continue;
        double rate = s.n_pos ? (double)s.top1_agree / s.n_pos : 0;
        double mean_abs = s.n_abs ? s.sum_abs / (double)s.n_abs : 0;
        printf("[%-13s] %4d pos  top1 %d/%d (%.2f%%)  top5<%d: %d  max|d| %.4f (pos %d id %d)  "
               "mean|d| %.5f  (%.2fs)\n",
               gp->name, s.n_pos, s.top1_agree, s.n_pos, 100.0 * rate, LM_GOLDEN_MIN_TOP5_OVERLAP,
               s.top5_bad, s.max_abs, s.max_abs_pos, s.max_abs_id, mean_abs, tp);
        CHECKF(s.pos0_abs <= LM_GOLDEN_POS0_ABS, "[%s] position 0 differs from %s by %.6f (> %g): "
               "lumen no longer reproduces llama.cpp where attention covers one cell", gp->name, file,
               s.pos0_abs, LM_GOLDEN_POS0_ABS);
        tot->n_pos += s.n_pos;
        tot->top1 += s.top1_agree;
        tot->bad_top1 += s.top1_bad_disagree;
        tot->top5_bad += s.top5_bad;
        if (s.max_abs > tot->max_abs) tot->max_abs = s.max_abs;
        tot->sum_abs += s.sum_abs;
        tot->n_abs += s.n_abs;
        tot_pos += s.n_pos;
        tot_agree += s.top1_agree;
        if (s.max_abs > tot_max_abs) tot_max_abs = s.max_abs;
        tot_sum_abs += s.sum_abs;
        tot_n_abs += s.n_abs;

        // ---- greedy: re-decode the prompt (logits on the last entry only), then one token
        // at a time. Teacher-forced with llama.cpp's token, so after an allowed near-tie
        // divergence the remaining steps are still compared on the same history.
        lm_kv_cache_seq_rm(c, 0, 0, -1);
        CHECKF(lm_kv_cache_seq_len(c, 0) == 0, "[%s] seq_len after clear = %d", gp->name,
               lm_kv_cache_seq_len(c, 0));
        if (!golden_decode(c, gp->tokens, gp->n_tokens, LM_GOLDEN_BATCH, 0, NULL, NULL)) continue;
        int first_div = -1, bad = 0;
        const int n_greedy = lm_test_quick() && gp->n_greedy > 16 ? 16 : gp->n_greedy;
        const int n_match = greedy_steps(c, gp, &go.p[pi], n_vocab, n_greedy, &first_div, &bad);
        printf("[%-13s] greedy %d/%d match, first divergence %d\n", gp->name, n_match,
               n_greedy, first_div);
        tot->greedy += n_greedy;
        tot->greedy_match += n_match;
        tot->greedy_bad += bad;
        tot_greedy_match += n_match;
        tot_greedy += n_greedy;
    }

    printf("TOTAL: %d prompts, tokenization mismatches %d, top1 %d/%d (%.2f%%), max|d| %.4f "
           "mean|d| %.5f, greedy %d/%d, %.1fs\n",
           g.n_prompts, tot_tok_mismatch, tot_agree, tot_pos,
           tot_pos ? 100.0 * tot_agree / tot_pos : 0.0, tot_max_abs,
           tot_n_abs ? tot_sum_abs / (double)tot_n_abs : 0.0, tot_greedy_match, tot_greedy,
           now_s() - t0);

    lm_context_free(c);
    lm_model_free(m);
    golden_free(&g);
    golden_free(&go);
}

// llama.cpp's batched path (cand) against its GEMV path (ref), from the golden files
// alone: top-1 / near-tie / top-5 rules and |diff| over ids present in both top-20 lists.
static void ref_agreement(const struct golden *ref, const struct golden *cand, struct agree *a) {
    for (int pi = 0; pi < ref->n_prompts && pi < cand->n_prompts; pi++) {
        const struct golden_prompt *r = &ref->p[pi], *c = &cand->p[pi];
        if (skip_prompt(r->name)) continue;
        const int nt = ref->n_top;
        for (int pos = 0; pos < r->n_tokens && pos < c->n_tokens; pos++) {
            const int32_t *ri = r->top_id + (size_t)pos * nt, *ci = c->top_id + (size_t)pos * nt;
            const float *rv = r->top_val + (size_t)pos * nt, *cv = c->top_val + (size_t)pos * nt;
            a->n_pos++;
            if (ri[0] == ci[0]) a->top1++;
            else if (!(rv[0] - rv[1] < LM_GOLDEN_NEAR_TIE)) a->bad_top1++;
            int ov = 0;
            for (int x = 0; x < 5; x++)
                for (int y = 0; y < 5; y++) ov += ri[x] == ci[y];
            if (ov < LM_GOLDEN_MIN_TOP5_OVERLAP) a->top5_bad++;
            for (int x = 0; x < nt; x++)
                for (int y = 0; y < nt; y++)
                    if (ri[x] == ci[y]) {
                        const double d = fabs((double)rv[x] - (double)cv[y]);
                        if (d > a->max_abs) a->max_abs = d;
                        a->sum_abs += d;
                        a->n_abs++;
                    }
        }
    }
}

static void print_agree(const char *what, const struct agree *a) {
    printf("%-34s top-1 %d/%d (%.2f%%)  non-near-tie splits %d  top-5<4 %d  max|d| %.4f  "
           "mean|d| %.4f", what, a->top1, a->n_pos, 100.0 * a->top1 / (a->n_pos ? a->n_pos : 1),
           a->bad_top1, a->top5_bad, a->max_abs, a->n_abs ? a->sum_abs / (double)a->n_abs : 0.0);
    if (a->greedy) printf("  greedy %d/%d (splits at gap >= %.1f: %d)", a->greedy_match, a->greedy,
                          LM_GOLDEN_GREEDY_GAP, a->greedy_bad);
    printf("\n");
}

int main(void) {
    const char *fa = "tests/golden/gemma3_logits.txt", *fb = "tests/golden/gemma3_logits_batched.txt";
    struct agree lum = {0}, lum_b = {0}, ref = {0};
    run_file(fa, fb, &lum);
    run_file(fb, fa, &lum_b);
    struct golden ga, gb;
    if (!golden_load(&ga, lm_test_path(fa)) || !golden_load(&gb, lm_test_path(fb))) {
        CHECKF(0, "cannot parse the golden files");
        return lm_test_finish();
    }
    ref_agreement(&ga, &gb, &ref);
    printf("\n");
    print_agree("llama.cpp batched vs llama.cpp GEMV", &ref);
    print_agree("lumen vs llama.cpp GEMV", &lum);
    print_agree("lumen vs llama.cpp batched", &lum_b);
    const double n = lum.n_pos ? lum.n_pos : 1, nr = ref.n_pos ? ref.n_pos : 1;
    CHECKF(lum.n_pos == ref.n_pos && lum.n_pos > (lm_test_quick() ? 150 : 1000),
           "positions compared: %d vs %d", lum.n_pos, ref.n_pos);
    const double slack = LM_GOLDEN_MARGIN + LM_GOLDEN_MARGIN_POS / n;
    CHECKF(lum.top1 / n >= ref.top1 / nr - slack, "top-1 agreement %.4f < llama.cpp's own %.4f - %.3f",
           lum.top1 / n, ref.top1 / nr, slack);
    CHECKF(lum.bad_top1 / n <= ref.bad_top1 / nr + slack,
           "non-near-tie top-1 splits %d vs llama.cpp's own %d", lum.bad_top1, ref.bad_top1);
    CHECKF(lum.top5_bad / n <= ref.top5_bad / nr + slack + LM_GOLDEN_TOP5_POS / n,
           "top-5 overlap < 4 at %d positions vs llama.cpp's own %d", lum.top5_bad, ref.top5_bad);
    CHECKF(lum.max_abs <= LM_GOLDEN_ABS_FACTOR * ref.max_abs, "max |diff| %.4f > %.1f x llama.cpp's own %.4f",
           lum.max_abs, LM_GOLDEN_ABS_FACTOR, ref.max_abs);
    const double lm_mean = lum.sum_abs / (double)(lum.n_abs ? lum.n_abs : 1);
    const double ref_mean = ref.sum_abs / (double)(ref.n_abs ? ref.n_abs : 1);
    CHECKF(lm_mean <= LM_GOLDEN_MEAN_FACTOR * ref_mean, "mean |diff| %.4f > %.2f x llama.cpp's own %.4f",
           lm_mean, LM_GOLDEN_MEAN_FACTOR, ref_mean);
    CHECKF(lum.greedy_bad == 0 && lum_b.greedy_bad == 0,
           "greedy splits where llama.cpp's gap >= %.1f: %d (GEMV) %d (batched)", LM_GOLDEN_GREEDY_GAP,
           lum.greedy_bad, lum_b.greedy_bad);
    golden_free(&ga);
    golden_free(&gb);
    return lm_test_finish();
}
