// Prompt-lookup drafts (docs/speculative.md): the tokens that followed an earlier copy of a
// request's last tokens, proposed after its decode entry when they pay for their rows in
// the step (lm_spec_choose); and a grammar's forced tokens (jump-forward, docs/structured.md),
// certain drafts through the same verification.
#include "runtime/engine.h"

int32_t lm_spec_lookup(const int32_t *toks, int32_t n_toks, int32_t k_max, int32_t *out) {
    if (k_max <= 0 || n_toks < LM_SPEC_NGRAM_MIN + 1) return 0;
    // every earlier end e (< n_toks, so a token follows) of a run equal to the sequence's
    // tail, scored by the run's length (at most LM_SPEC_MATCH_MAX): the longest is the best
    // aligned copy; ties go to the latest
    const int32_t *tail = toks + n_toks - 1;
    int32_t best_e = -1, best_l = LM_SPEC_NGRAM_MIN - 1;
    for (int32_t e = n_toks - 1; e >= LM_SPEC_NGRAM_MIN; e--) {
        if (toks[e - 1] != *tail) continue;
        int32_t l = 1;
        while (l < LM_SPEC_MATCH_MAX && l < e && toks[e - 1 - l] == tail[-l]) l++;
        if (l > best_l) {
            best_l = l;
            best_e = e;
            if (l == LM_SPEC_MATCH_MAX) break;
        }
    }
    if (best_e < 0) return 0;
    int32_t k = 0;
    for (int32_t i = best_e; i < n_toks && k < k_max; i++) out[k++] = toks[i];
    return k;
}

// Each request's draft length is the one lm_spec_choose finds best for the product of the
// running requests' token rates (alone: the most tokens per measured ns; among several, a
// draft must repay the slowdown of everybody's step), so a draft is only added when it pays
// against the same step without it.
int32_t lm_spec_lookup_plan(struct lm_engine *e, int32_t n, int32_t *avail) {
    struct lm_kv_cache *kv = e->c->kv;
    int32_t rows = e->spec.draft_rows, n_tot = n;
    for (int32_t i = 0; i < n; i++) {
        struct lm_req *r = e->batch_req[i];
        struct lm_req_spec *sp = &r->spec;
        sp->n_draft = 0;
        const bool jump = r->gm && r->think.state == LM_THINK_OFF && !r->rp.use_draft; // a grammar's forced tokens
        if (!r->rp.lookup && !jump) continue;
        const int32_t room = lm_spec_room(e, r, n_tot, rows);
        if (room <= 0) continue;
        // forced tokens are certain (each the only one the grammar allows there): accepted
        // whatever the logits, so they pay like drafts of acceptance 1
        int32_t nd = jump ? lm_grammar_matcher_forced(r->gm, sp->draft, room) : 0;
        const bool forced = nd > 0;
        if (!forced && r->rp.lookup) nd = lm_spec_lookup(r->toks, r->n_toks, room, sp->draft);
        const int32_t b1 = lm_kv_blocks_needed(kv, r->seq, 1);
        while (nd > 0 && lm_kv_blocks_needed(kv, r->seq, 1 + nd) - b1 > *avail) nd--;
        if (nd == 0) continue;
        double gain = 0.0;
        const double rate = forced ? 1.0 : lm_spec_acc_rate(&sp->acc);
        const int32_t k = lm_spec_choose(&e->spec.cost, rate, n, n_tot, e->n_running, nd, &gain);
        if (k == 0) { // does not pay now: drafting pauses, the estimate drifts back
            if (!forced) lm_spec_acc_idle(&sp->acc);
            continue;
        }
        *avail -= lm_kv_blocks_needed(kv, r->seq, 1 + k) - b1;
        sp->n_draft = k;
        sp->forced = forced;
        rows -= k;
        n_tot += k;
    }
    return lm_spec_insert_drafts(e, n, n_tot, false);
}
