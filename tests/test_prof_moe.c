// The per-expert profile of MoE layers (runtime/ops_moe.c -> src/prof): on the tiny random
// Qwen3-MoE and Mixtral-style llama of tools/make_arch_gguf.py --ci, the tokens routed to each
// expert sum to n_tokens x n_expert_used in every layer; a prompt decoded token by token routes
// each expert the same tokens as its one-batch prefill (routing is per token), touching
// exactly n_expert_used experts per step; every expert that got tokens has a time; and the
// trace carries one expert event per (layer, chosen expert, op) that `lumen analyze` reads
// back with the same token totals.
// LM_TEST_LABELS: model;arch
#include "lm_test_arch.h"
#include "lumen.h"
#include "lumen_prof.h"
#include "report/report.h"

#include <unistd.h>

#define N_PROMPT 24

static bool decode_all(struct lm_context *c, const int32_t *t, int n, int p0, bool one_batch) {
    struct lm_batch_entry b[N_PROMPT];
    // logits of every entry: the last layer then runs every token (else only those wanted)
    for (int i = 0; i < n; i++) b[i] = (struct lm_batch_entry){t[i], p0 + i, 0, true};
    if (one_batch) return lm_decode(c, b, n) == LM_OK;
    for (int i = 0; i < n; i++) {
        const uint64_t t0 = lm_prof_phase_begin(LM_PHASE_DECODE);
        const enum lm_status st = lm_decode(c, &b[i], 1);
        lm_prof_phase_end(LM_PHASE_DECODE, t0, i, 1);
        if (st != LM_OK) return false;
    }
    return true;
}

static void run(const char *path, const char *trace) {
    struct lm_model *m = NULL;
    if (lm_model_load(&m, path, NULL) != LM_OK) {
        CHECKF(0, "cannot load %s: %s", path, lm_error_msg());
        return;
    }
    struct lm_model_hparams hp;
    lm_model_hparams(m, &hp);
    const int X = hp.n_expert, K = hp.n_expert_used, NL = hp.n_layer;
    CHECKF(X > 1 && K >= 1 && K < X, "%s: %d experts, %d used", path, X, K);
    int32_t t[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) t[i] = 3 + (int32_t)((i * 7919u) % (uint32_t)(hp.n_vocab - 3));
    struct lm_context_params cp = {.n_ctx = 64, .n_seq_max = 1, .n_batch = N_PROMPT, .n_threads = 2};
    struct lm_context *c = NULL;
    CHECKF(lm_context_init(&c, m, &cp) == LM_OK, "%s", lm_error_msg());
    CHECK(lm_prof_init(LM_PROF_TRACE, 2, 0) == LM_OK);
    // the prompt in one batch (no phase begun: the prefill slot), then again token by token
    // as decode steps at the same positions of a cleared cache
    CHECK(c && decode_all(c, t, N_PROMPT, 0, true));
    CHECK(c && lm_kv_cache_seq_rm(c, 0, 0, -1) == LM_OK);
    CHECK(c && decode_all(c, t, N_PROMPT, 0, false));
    CHECKF(lm_prof_moe_n_expert() == X, "experts recorded %d, the model has %d", lm_prof_moe_n_expert(), X);
    uint64_t all_tokens = 0;
    for (int l = 0; l < NL; l++) {
        struct lm_prof_moe_layer pl, dl;
        CHECK(lm_prof_moe_layer_get(false, l, &pl) && lm_prof_moe_layer_get(true, l, &dl));
        CHECKF(pl.calls == 1 && pl.tokens == N_PROMPT, "layer %d prefill: %llu calls, %llu tokens", l,
               (unsigned long long)pl.calls, (unsigned long long)pl.tokens);
        CHECKF(dl.calls == N_PROMPT && dl.tokens == N_PROMPT && dl.distinct == (uint64_t)N_PROMPT * K &&
                   dl.distinct_min == K && dl.distinct_max == K,
               "layer %d decode: %llu calls, %llu tokens, %llu experts touched (%d..%d)", l,
               (unsigned long long)dl.calls, (unsigned long long)dl.tokens,
               (unsigned long long)dl.distinct, dl.distinct_min, dl.distinct_max);
        uint64_t sum_p = 0, sum_d = 0, touched = 0;
        bool same = true, timed = true;
        for (int e = 0; e < X; e++) {
            struct lm_prof_moe_expert pe, de;
            CHECK(lm_prof_moe_expert_get(false, l, e, &pe) && lm_prof_moe_expert_get(true, l, e, &de));
            sum_p += pe.tokens;
            sum_d += de.tokens;
            same &= pe.tokens == de.tokens;
            touched += pe.tokens > 0;
            timed &= (pe.tokens > 0) == (pe.calls == 1) && de.calls <= de.tokens && de.ms >= 0 && pe.ms >= 0;
            timed &= de.tokens == 0 || de.calls > 0;
        }
        CHECKF(sum_p == pl.tokens * (uint64_t)K && sum_d == dl.tokens * (uint64_t)K && sum_d == sum_p, "layer %d: tokens over experts %llu "
               "(prefill), %llu (decode); want %d x %d", l, (unsigned long long)sum_p,
               (unsigned long long)sum_d, N_PROMPT, K);
        CHECKF(same, "layer %d: an expert's tokens differ between prefill and decode", l);
        CHECKF(touched == (uint64_t)pl.distinct && pl.distinct_min == (int32_t)touched,
               "layer %d: %llu experts had tokens, the layer counted %llu", l,
               (unsigned long long)touched, (unsigned long long)pl.distinct);
        CHECK(timed);
        all_tokens += sum_p + sum_d;
    }
    struct lm_prof_moe_expert none;
    CHECK(!lm_prof_moe_expert_get(true, NL, 0, &none) && !lm_prof_moe_expert_get(true, 0, X, &none));

    // the trace: expert events that the analyzer reads back, the same token totals
    CHECKF(lm_prof_write_jsonl(trace) == LM_OK, "%s", lm_error_msg());
    struct lm_prof_report *r = NULL;
    CHECKF(lm_prof_report_load(trace, &r) == LM_OK, "%s", lm_error_msg());
    if (r) {
        uint64_t tok = 0, n_ev = 0;
        for (int e = 0; e < X; e++) {
            char key[32];
            snprintf(key, sizeof key, "expert %d", e);
            struct lm_prof_row row;
            if (lm_prof_report_row(r, "expert_tokens", key, &row)) tok += (uint64_t)row.total;
            if (lm_prof_report_row(r, "expert", key, &row)) n_ev += row.count;
        }
        CHECKF(tok == all_tokens, "trace: %llu tokens over the experts, the summary %llu",
               (unsigned long long)tok, (unsigned long long)all_tokens);
        // one gate/up and one down span per (layer, pass, expert touched)
        CHECKF(n_ev > 0 && n_ev % 2 == 0, "trace: %llu expert events", (unsigned long long)n_ev);
        lm_prof_report_free(r);
    }
    unlink(trace);
    lm_prof_shutdown();
    lm_context_free(c);
    lm_model_free(m);
}

int main(void) {
    char dir[512], path[1024], trace[600];
    const int gen = lm_test_arch_generate(dir, sizeof dir);
    if (gen <= 0) return gen ? lm_test_finish() : 0;
    snprintf(trace, sizeof trace, "%s/prof_moe_%d.jsonl", dir, (int)getpid());
    const char *files[] = {"arch_qwen3moe_qmix.gguf", "arch_mixtral_qmix.gguf"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        run(path, trace);
    }
    return lm_test_finish();
}
