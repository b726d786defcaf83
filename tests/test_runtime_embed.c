// Embeddings on the one forward pass (docs/embeddings.md), on the reduced Qwen3 mean-pooling
// copy of tools/gen_golden_embed.py (tests/golden/embed_qwen3_mean.txt): a sequence in
// embedding mode gives its final normed rows, mean-pooled here in float64 and compared with
// the float64 reference (cosine >= 0.9999), causal and non-causal (lm_context_set_causal:
// the reference's non-causal vectors, which are far from the causal ones); those rows and a
// logits sequence's row are the same bits alone and sharing one batch (non-causal windows end
// per sequence); through the engine an embedding request's vector is the same bits alone and
// beside a running generation, and bad requests are refused (LM_ERR_ARG).
// LM_TEST_LABELS: model;embed
#include "lm_test.h"
#include "lm_test_engine.h"
#include "lm_test_model.h"

#include <unistd.h>

#define N_IN 3
#define MAX_TOK 64
#define E_MAX 1024

struct gold {
    int32_t ids[N_IN][MAX_TOK];
    int n[N_IN];
    double ref[N_IN][E_MAX], ref_nc[N_IN][E_MAX];
};

static int read_values(char *s, double *out, int cap) {
    int n = 0;
    for (char *t = strtok(s, " \n"); t && n < cap; t = strtok(NULL, " \n")) out[n++] = strtod(t, NULL);
    return n;
}

static bool read_gold(struct gold *g) {
    FILE *f = fopen(lm_test_path("tests/golden/embed_qwen3_mean.txt"), "r");
    if (!f) return false;
    static char line[1 << 16];
    int k = -1;
    double tmp[MAX_TOK];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "input ", 6)) k++;
        if (k < 0 || k >= N_IN) continue;
        if (!strncmp(line, "ids ", 4)) {
            g->n[k] = read_values(line + 4, tmp, MAX_TOK);
            for (int i = 0; i < g->n[k]; i++) g->ids[k][i] = (int32_t)tmp[i];
        } else if (!strncmp(line, "ref ", 4)) {
            read_values(line + 4, g->ref[k], E_MAX);
        } else if (!strncmp(line, "ref_noncausal ", 14)) {
            read_values(line + 14, g->ref_nc[k], E_MAX);
        }
    }
    fclose(f);
    return k == N_IN - 1;
}

static double cosine(const float *a, const double *b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) ab += a[i] * b[i], aa += (double)a[i] * a[i], bb += b[i] * b[i];
    return ab / sqrt(aa * bb);
}

// One batch: input in[s] as sequence s (s < n_seq), every entry of the embedding sequences
// wanting its row; logits_seq (-1: none) is a plain sequence wanting its last logits row.
// Mean of each embedding sequence's rows into mean[s] (E floats), its logits into logits.
static bool run_batch(struct lm_context *c, const struct lm_model *m, const struct gold *g, const int *in, int n_seq,
                      int logits_seq, int logits_in, float mean[][E_MAX], float *logits) {
    struct lm_batch_entry b[4 * MAX_TOK];
    int n = 0;
    for (int s = 0; s < n_seq; s++) {
        lm_kv_cache_seq_rm(c, s, 0, -1);
        lm_context_seq_set_embd(c, s, true);
        for (int i = 0; i < g->n[in[s]]; i++) b[n++] = (struct lm_batch_entry){g->ids[in[s]][i], i, s, true};
    }
    if (logits_seq >= 0) {
        lm_kv_cache_seq_rm(c, logits_seq, 0, -1);
        lm_context_seq_set_embd(c, logits_seq, false);
        for (int i = 0; i < g->n[logits_in]; i++)
            b[n++] = (struct lm_batch_entry){g->ids[logits_in][i], i, logits_seq, i == g->n[logits_in] - 1};
    }
    if (lm_decode(c, b, n) != LM_OK) {
        fprintf(stderr, "decode: %s\n", lm_error_msg());
        return false;
    }
    const int E = lm_model_n_embd(m);
    for (int s = 0, row = 0; s < n_seq; s++) {
        double acc[E_MAX] = {0};
        for (int i = 0; i < g->n[in[s]]; i++) {
            const float *h = lm_get_embeddings(c, row++);
            if (!h) return false;
            for (int k = 0; k < E; k++) acc[k] += h[k];
        }
        for (int k = 0; k < E; k++) mean[s][k] = (float)(acc[k] / g->n[in[s]]);
    }
    if (logits_seq >= 0) memcpy(logits, lm_get_logits(c, 0), sizeof(float) * (size_t)lm_model_n_vocab(m));
    return true;
}

static bool same(const float *a, const float *b, int n) { return !memcmp(a, b, sizeof(float) * (size_t)n); }

static void test_context(struct lm_model *m, const struct gold *g) {
    const int E = lm_model_n_embd(m), V = lm_model_n_vocab(m);
    struct lm_context *c = NULL;
    const struct lm_context_params cp = {.n_ctx = 128, .n_seq_max = 4, .n_batch = 4 * MAX_TOK, .n_threads = 2};
    CHECK(lm_context_init(&c, m, &cp) == LM_OK);
    if (!c) return;
    static float alone[2][N_IN][E_MAX], both[4][E_MAX], lg_alone[4096], lg_both[4096];
    CHECK(V <= 4096);
    for (int causal = 1; causal >= 0; causal--) {
        lm_context_set_causal(c, causal);
        for (int k = 0; k < N_IN; k++) {
            const int in[1] = {k};
            CHECK(run_batch(c, m, g, in, 1, -1, 0, &alone[causal][k], NULL));
            const double cr = cosine(alone[causal][k], g->ref[k], E), cn = cosine(alone[causal][k], g->ref_nc[k], E);
            printf("%s input %d: cos to the causal reference %.9f, to the non-causal %.9f\n",
                   causal ? "causal" : "non-causal", k, cr, cn);
            CHECKF(causal ? cr >= 0.9999 && cn < 0.99 : cn >= 0.9999 && cr < 0.99, "input %d", k);
        }
        // inputs 0 and 1 embedded, input 2 as a logits sequence, in one batch: the same bits
        const int in[2] = {0, 1};
        CHECK(run_batch(c, m, g, (const int[]){2}, 0, 3, 2, NULL, lg_alone));
        CHECK(run_batch(c, m, g, in, 2, 3, 2, both, lg_both));
        CHECKF(same(both[0], alone[causal][0], E) && same(both[1], alone[causal][1], E),
               "%s: embedding rows change with batch mates", causal ? "causal" : "non-causal");
        CHECKF(same(lg_both, lg_alone, V), "a logits sequence changes beside embedding sequences");
    }
    CHECK(lm_context_seq_set_embd(c, 4, true) == LM_ERR_ARG);
    CHECK(lm_get_embeddings(c, 1000) == NULL);
    lm_context_free(c);
}

struct vec_rec {
    float v[E_MAX];
    int n, finals;
    enum lm_finish finish;
};

static void on_vec(void *user, const struct lm_event *ev) {
    struct vec_rec *r = user;
    if (ev->finish == LM_FINISH_NONE) return;
    r->finals++;
    r->finish = ev->finish;
    if (ev->embd && ev->n_embd <= E_MAX) memcpy(r->v, ev->embd, sizeof(float) * (size_t)(r->n = ev->n_embd));
}

static void drain(struct lm_engine *e) {
    for (int i = 0; i < 1000 && lm_engine_step(e) > 0; i++) {}
}

static void test_engine(struct lm_model *m, const struct gold *g) {
    const int E = lm_model_n_embd(m);
    struct lm_engine *e = NULL;
    const struct lm_engine_params ep = {.max_running = 4, .step_tokens = 16, .n_ctx = 128, .n_threads = 2};
    CHECK(lm_engine_init(&e, m, &ep) == LM_OK);
    if (!e) return;
    struct lm_request_params rp = lm_request_params_default();
    rp.embed = true;
    static struct vec_rec a, b;
    CHECK(lm_engine_submit(e, g->ids[1], g->n[1], &rp, on_vec, &a, NULL) == LM_OK);
    drain(e);
    CHECKF(a.finals == 1 && a.finish == LM_FINISH_EOG && a.n == E, "alone: %d events, finish %d, %d values",
           a.finals, (int)a.finish, a.n);
    double nn = 0;
    for (int k = 0; k < E; k++) nn += (double)a.v[k] * a.v[k];
    const double cr = cosine(a.v, g->ref[1], E);
    CHECKF(fabs(nn - 1) < 1e-5 && cr >= 0.9999, "|v|^2 %.7f, cos to the reference %.9f (16-token steps)", nn, cr);
    // beside a generation that is decoding, and another input prefilling: the same bits
    struct lm_request_params gp = lm_request_params_default();
    gp.max_tokens = 40;
    gp.ignore_eos = true;
    static struct lm_test_rec gen;
    CHECK(lm_engine_submit(e, g->ids[0], g->n[0], &gp, lm_test_rec_on_event, &gen, NULL) == LM_OK);
    for (int i = 0; i < 3; i++) lm_engine_step(e);
    static struct vec_rec other;
    CHECK(lm_engine_submit(e, g->ids[2], g->n[2], &rp, on_vec, &other, NULL) == LM_OK);
    CHECK(lm_engine_submit(e, g->ids[1], g->n[1], &rp, on_vec, &b, NULL) == LM_OK);
    drain(e);
    CHECKF(b.finals == 1 && same(a.v, b.v, E), "beside a generation: the vector changed");
    CHECKF(gen.finals == 1 && gen.n == 40, "the generation: %d tokens", gen.n);
    // Matryoshka: the first 64 values renormalised
    static struct vec_rec d;
    rp.dimensions = 64;
    CHECK(lm_engine_submit(e, g->ids[1], g->n[1], &rp, on_vec, &d, NULL) == LM_OK);
    drain(e);
    double n64 = 0, dmax = 0;
    for (int k = 0; k < 64; k++) n64 += (double)a.v[k] * a.v[k];
    for (int k = 0; k < 64; k++) dmax = fmax(dmax, fabs(d.v[k] - a.v[k] / sqrt(n64)));
    CHECKF(d.n == 64 && dmax < 1e-6, "dimensions 64: %d values, max |d| %g", d.n, dmax);
    // refusals
    static int32_t longp[200];
    for (int i = 0; i < 200; i++) longp[i] = 5;
    rp.dimensions = E + 1;
    CHECK(lm_engine_submit(e, g->ids[0], g->n[0], &rp, on_vec, &d, NULL) == LM_ERR_ARG);
    rp.dimensions = -1;
    CHECK(lm_engine_submit(e, g->ids[0], g->n[0], &rp, on_vec, &d, NULL) == LM_ERR_ARG);
    rp.dimensions = 0;
    CHECK(lm_engine_submit(e, longp, 129, &rp, on_vec, &d, NULL) == LM_ERR_ARG);
    CHECK(lm_engine_submit(e, longp, 128, &rp, on_vec, &d, NULL) == LM_OK); // the whole context
    rp.pooling = LM_POOLING_RANK;
    CHECK(lm_engine_submit(e, g->ids[0], g->n[0], &rp, on_vec, &d, NULL) == LM_ERR_ARG);
    rp.pooling = LM_POOLING_LAST;
    static struct vec_rec last;
    CHECK(lm_engine_submit(e, g->ids[0], g->n[0], &rp, on_vec, &last, NULL) == LM_OK);
    drain(e);
    CHECK(last.finals == 1 && last.n == E && !same(last.v, a.v, E));
    lm_engine_free(e);
}

// One step; the stats' embedding tokens (those beyond its decodes and `prompt` prompt tokens).
static int step_embed_tokens(struct lm_engine *e, int prompt) {
    lm_engine_step(e);
    struct lm_engine_stats st;
    lm_engine_stats(e, &st);
    return st.last_step_tokens - st.last_step_decode - prompt;
}

// The step plan with embeddings beside decodes (embed_step_tokens 8, budget 64): without
// decodes an input goes whole in one step; while a generation decodes, a step carries at most
// 8 embedding tokens, prompts go first and count against them, and the vector is the same bits;
// a non-causal input (it runs whole) waits for 6 steps' credit (45 tokens), not forever.
static void test_sched(struct lm_model *m, const struct gold *g) {
    enum { CAP = 8, P = 30 };
    const int E = lm_model_n_embd(m), L = g->n[1];
    const struct lm_engine_params ep = {.max_running = 4, .step_tokens = 64, .n_ctx = 128,
                                        .n_threads = 2, .embed_step_tokens = CAP};
    struct lm_request_params rp = lm_request_params_default(), gp = lm_request_params_default();
    rp.embed = true;
    gp.max_tokens = 60;
    gp.ignore_eos = true;
    static int32_t prompt[P];
    for (int i = 0; i < P; i++) prompt[i] = 100 + 37 * i;
    for (int causal = 1; causal >= 0; causal--) {
        struct lm_engine *e = NULL;
        CHECK(lm_engine_init(&e, m, &ep) == LM_OK);
        if (!e) return;
        lm_context_set_causal(lm_engine_context(e), causal);
        static struct vec_rec a, b;
        static struct lm_test_rec gen, pr;
        memset(&a, 0, sizeof a), memset(&b, 0, sizeof b), memset(&gen, 0, sizeof gen), memset(&pr, 0, sizeof pr);
        CHECK(lm_engine_submit(e, g->ids[1], L, &rp, on_vec, &a, NULL) == LM_OK);
        const int whole = step_embed_tokens(e, 0);
        CHECKF(whole == L && a.finals == 1, "%s, no decodes: %d of %d tokens in the step, %d events",
               causal ? "causal" : "non-causal", whole, L, a.finals);
        CHECK(lm_engine_submit(e, g->ids[0], g->n[0], &gp, lm_test_rec_on_event, &gen, NULL) == LM_OK);
        lm_engine_step(e); // the generation's prompt: decoding from now on
        CHECK(lm_engine_submit(e, g->ids[1], L, &rp, on_vec, &b, NULL) == LM_OK);
        if (causal) CHECK(lm_engine_submit(e, prompt, P, &gp, lm_test_rec_on_event, &pr, NULL) == LM_OK);
        int over = 0, steps = 0, missed = 0, prev = gen.n, emb, seen = 0;
        if (causal) { // the prompt's 30 tokens take the step's credit: no embedding token
            emb = step_embed_tokens(e, P);
            CHECKF(emb == 0 && pr.n == 1, "a prompt beside the embedding: %d embedding tokens", emb);
            missed += gen.n != prev + 1, prev = gen.n;
        }
        while (b.finals == 0 && steps < 20) {
            emb = step_embed_tokens(e, 0);
            steps++;
            seen += emb;
            over += causal ? emb > CAP : emb != 0 && emb != L;
            missed += gen.n != prev + 1, prev = gen.n;
        }
        const int bound = (L + CAP - 1) / CAP;
        CHECKF(b.finals == 1 && steps <= bound && seen == L && over == 0 && missed == 0,
               "%s beside a decode: done after %d steps (bound %d), %d tokens, %d steps over the cap, the "
               "generation missed %d steps", causal ? "causal" : "non-causal", steps, bound, seen, over, missed);
        CHECKF(same(a.v, b.v, E), "%s: the vector beside a decode differs from alone's",
               causal ? "causal" : "non-causal");
        const double cr = cosine(b.v, causal ? g->ref[1] : g->ref_nc[1], E);
        CHECKF(cr >= 0.9999, "%s: cos to the reference %.9f", causal ? "causal" : "non-causal", cr);
        lm_engine_free(e);
    }
}

int main(void) {
    static struct gold g;
    if (!read_gold(&g)) {
        CHECKF(0, "cannot read tests/golden/embed_qwen3_mean.txt");
        return lm_test_finish();
    }
    char dir[512], path[600], cmd[2048];
    const char *d = getenv("LUMEN_EMBED_DIR");
    if (d && *d) snprintf(dir, sizeof dir, "%s", d);
    else snprintf(dir, sizeof dir, "/tmp/lumen-embed-%d", (int)getuid());
    snprintf(path, sizeof path, "%s/embed_qwen3_mean.gguf", dir);
    if (access(path, R_OK) != 0) { // the generator is deterministic: the goldens' files
        const char *py = getenv("LUMEN_PYTHON");
        char pybuf[1024];
        if (!py || !*py) {
            snprintf(pybuf, sizeof pybuf, "%s", lm_test_path(".venv/bin/python"));
            py = access(pybuf, X_OK) == 0 ? pybuf : "python3";
        }
        snprintf(cmd, sizeof cmd, "'%s' '%s' --dir '%s' --models-only", py,
                 lm_test_path("tools/gen_golden_embed.py"), dir);
        CHECKF(system(cmd) == 0, "%s failed (needs numpy + gguf)", cmd);
    }
    struct lm_model *m = lm_test_load(path);
    CHECK(m != NULL);
    if (!m) return lm_test_finish();
    test_context(m, &g);
    test_engine(m, &g);
    test_sched(m, &g);
    lm_model_free(m);
    return lm_test_finish();
}
