// Drafts from a draft model (docs/speculative.md): the vocabulary check that refuses a
// target/draft pair whose token ids mean different things, the plan of a step's drafts,
// and the draft model's forward passes that draw them. The draft model runs on the
// target's thread pool and KV pool (its sequences are the target's + max_running).
#include <string.h>

#include "base/status.h"
#include "base/timer.h"
#include "model/model.h"
#include "prof/prof.h"
#include "runtime/engine.h"
#include "sample/sample_internal.h"
#include "tokenizer/tokenizer.h"

// a token's text for a message: at most 24 bytes, non-printable bytes as '?'
static void tok_show(const struct lm_tokenizer *t, int32_t id, char *out, size_t cap) {
    const uint32_t a = t->off[id], b = t->off[id + 1];
    size_t k = 0;
    for (uint32_t i = a; i < b && k + 4 < cap && i - a < 24; i++) {
        const unsigned char ch = (unsigned char)t->blob[i];
        out[k++] = ch >= 0x20 && ch != 0x7f ? (char)ch : '?';
    }
    if (b - a > 24 && k + 4 < cap) { out[k++] = '.'; out[k++] = '.'; out[k++] = '.'; }
    out[k] = 0;
}

enum lm_status lm_spec_vocab_check(const struct lm_model *target, const struct lm_model *draft) {
    const struct lm_tokenizer *a = lm_model_tokenizer(target), *b = lm_model_tokenizer(draft);
    const char *pa = target->path, *pb = draft->path;
    if (a->n_vocab != b->n_vocab || target->hp.n_vocab != draft->hp.n_vocab)
        return lm_error_set(LM_ERR_ARG, "draft model %s: vocabulary of %d tokens (logits %d), the "
                            "target %s has %d (logits %d): the pair must share one vocabulary", pb,
                            b->n_vocab, draft->hp.n_vocab, pa, a->n_vocab, target->hp.n_vocab);
    const struct { const char *name; int32_t x, y; } sp[] = {
        {"BOS", a->bos, b->bos}, {"EOS", a->eos, b->eos}, {"EOT", a->eot, b->eot},
    };
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++)
        if (sp[i].x != sp[i].y)
            return lm_error_set(LM_ERR_ARG, "draft model %s: %s token %d, the target %s has %d: the "
                                "pair must share one vocabulary", pb, sp[i].name, sp[i].y, pa, sp[i].x);
    for (int32_t id = 0; id < a->n_vocab; id++) {
        const uint32_t la = a->off[id + 1] - a->off[id], lb = b->off[id + 1] - b->off[id];
        const bool eog_a = (a->attr[id] & LM_TOK_FLAG_EOG) != 0, eog_b = (b->attr[id] & LM_TOK_FLAG_EOG) != 0;
        if (la == lb && !memcmp(a->blob + a->off[id], b->blob + b->off[id], la) && eog_a == eog_b)
            continue;
        char ta[40], tb[40];
        tok_show(a, id, ta, sizeof ta);
        tok_show(b, id, tb, sizeof tb);
        if (eog_a != eog_b && la == lb && !memcmp(a->blob + a->off[id], b->blob + b->off[id], la))
            return lm_error_set(LM_ERR_ARG, "draft model %s: token %d '%s' %s end generation in the "
                                "draft and %s in the target %s: the pair must share one vocabulary",
                                pb, id, tb, eog_b ? "does" : "does not", eog_a ? "does" : "does not", pa);
        return lm_error_set(LM_ERR_ARG, "draft model %s: token %d is '%s', in the target %s it is "
                            "'%s' (first differing id): the pair must share one vocabulary", pb, id,
                            tb, pa, ta);
    }
    return LM_OK;
}

// ================================================================ the draft sequence

void lm_spec_model_seq_rm(struct lm_engine *e, struct lm_req *r, int32_t p) {
    lm_kv_seq_rm(e->c->kv, r->seq + e->p.max_running, p, -1);
    if (r->spec.draft_kv > p) r->spec.draft_kv = p;
}

// ================================================================ planning

// Each request's length is the one lm_spec_choose_drafter finds best for the product of the
// running requests' rates (as lookup drafts), a drafted token priced at its row in the step
// plus a draft forward of one position (measured: spec.draft_tok_ns), and only if the draft
// sequence can catch up in the draft's batch. The decode entries are the entries at their
// request's n_kv (the others are lookup drafts).
int32_t lm_spec_model_plan(struct lm_engine *e, int32_t n, int32_t *avail) {
    struct lm_spec_engine *se = &e->spec;
    if (!se->draft_ctx) return n;
    struct lm_kv_cache *kv = e->c->kv;
    int32_t n_dec = 0;
    for (int32_t i = 0; i < n; i++) n_dec += e->batch[i].pos == e->batch_req[i]->n_kv;
    int32_t rows = se->draft_rows - (n - n_dec), n_tot = n, d_room = se->draft_ctx->n_batch;
    double extra_ns = 0.0;
    const double d1 = se->draft_tok_ns; // 0 until measured: tried once
    for (int32_t i = 0; i < n; i++) {
        struct lm_req *r = e->batch_req[i];
        struct lm_req_spec *sp = &r->spec;
        if (!r->rp.use_draft || e->batch[i].pos != r->n_kv) continue;
        const int32_t ds = r->seq + e->p.max_running, catchup = r->n_toks - sp->draft_kv;
        const int32_t room = lm_spec_room(e, r, n_tot, rows);
        if (room <= 0 || catchup > d_room) continue;
        const int32_t b1 = lm_kv_blocks_needed(kv, r->seq, 1);
        int32_t nd = room;
        while (nd > 0 && lm_kv_blocks_needed(kv, r->seq, 1 + nd) - b1 +
                                 lm_kv_blocks_needed(kv, ds, catchup + nd - 1) > *avail)
            nd--;
        if (nd == 0) continue;
        double gain = 0.0;
        const int32_t k = r->rp.draft_fixed ? nd
                          : lm_spec_choose_drafter(&se->cost, lm_spec_acc_rate(&sp->acc), n_dec,
                                                   n_tot, e->n_running, extra_ns, d1, nd, &gain);
        if (k == 0) { // does not pay now: drafting pauses, the estimate drifts back
            lm_spec_acc_idle(&sp->acc);
            continue;
        }
        *avail -= lm_kv_blocks_needed(kv, r->seq, 1 + k) - b1 +
                  lm_kv_blocks_needed(kv, ds, catchup + k - 1);
        sp->n_draft = k;
        sp->from_model = true;
        rows -= k;
        n_tot += k;
        d_room -= catchup;
        extra_ns += k * d1;
    }
    if (n_tot == n) return n;
    return lm_spec_insert_drafts(e, n, n_tot, true);
}

// ================================================================ drafting

// One forward of the draft model over spec.draft_batch[0, nd); a forward of one position per
// sequence (a drafting round) prices a drafted token (spec.draft_tok_ns).
static enum lm_status draft_forward(struct lm_engine *e, int32_t nd) {
    struct lm_spec_engine *se = &e->spec;
    int32_t top_k = 0;
    for (int32_t i = 0; i < nd; i++)
        if (se->draft_batch[i].want_logits && se->draft_batch_req[i]->top_need > top_k)
            top_k = se->draft_batch_req[i]->top_need;
    if (lm_context_set_top_k(se->draft_ctx, top_k) != LM_OK) lm_context_set_top_k(se->draft_ctx, 0);
    const bool prof = lm_prof_on(); // the draft's ops under their own phase, this step's index
    const uint64_t tp = prof ? lm_prof_phase_begin(LM_PHASE_DRAFT) : 0;
    const uint64_t t0 = lm_now_ns();
    const enum lm_status st = lm_decode(se->draft_ctx, se->draft_batch, nd);
    const uint64_t dt = lm_now_ns() - t0;
    if (prof) lm_prof_phase(LM_PHASE_DRAFT, tp, lm_prof_ticks(), (int32_t)e->st.steps, nd);
    if (st != LM_OK) return st;
    int32_t n_rows = 0;
    for (int32_t i = 0; i < nd; i++) n_rows += se->draft_batch[i].want_logits;
    if (n_rows == nd) // a moving average that follows the machine's load within a few steps
        se->draft_tok_ns = se->draft_tok_ns > 0 ? 0.7 * se->draft_tok_ns + 0.3 * (double)dt / nd
                                                : (double)dt / nd;
    e->st.draft_forwards++;
    e->st.draft_forward_ns += dt;
    for (int32_t i = 0; i < nd; i++) // sequences advance in order: the last entry of each counts
        se->draft_batch_req[i]->spec.draft_kv = se->draft_batch[i].pos + 1;
    return LM_OK;
}

// The draft of r at its j-th drafted position from the draft's logits row `row`: drawn from
// q (the request's chain on the draft's logits, lm_sampler_draft), kept for verification.
static void draw_draft(struct lm_engine *e, struct lm_req *r, int32_t row, int32_t j) {
    struct lm_req_spec *sp = &r->spec;
    const struct lm_token_logit *top = NULL;
    const int32_t n_top = r->top_need > 0 ? lm_get_top_k(e->spec.draft_ctx, row, &top) : 0;
    struct lm_token_prob one;
    struct lm_token_prob *q = sp->q ? sp->q + (size_t)j * sp->q_cap : &one;
    const float *lg = lm_get_logits(e->spec.draft_ctx, row);
    const int32_t d = lm_sampler_draft(r->smp, lg, top, n_top, sp->rng, q, &sp->q_n[j]);
    sp->draft[j] = d;
    e->batch[sp->decode_entry + 1 + j].token = d;
}

// Round 1: the draft sequences catch up to the step, as far as the draft's batch and the
// free blocks allow (requests drafting: to their last token, with logits; prefilling: to
// the end of their chunk; decoding without drafts but far behind: a chunk of what they
// missed). Returns the entry count of spec.draft_batch; *k_max: the longest draft planned.
static int32_t catch_up(struct lm_engine *e, int32_t n, int32_t *avail, int32_t *k_max) {
    struct lm_spec_engine *se = &e->spec;
    struct lm_kv_cache *kv = e->c->kv;
    int32_t nd = 0;
    for (int32_t i = 0, j; i < n; i = j) {
        struct lm_req *r = e->batch_req[i];
        struct lm_req_spec *sp = &r->spec;
        for (j = i + 1; j < n && e->batch_req[j] == r; j++) {}
        if (!r->rp.use_draft) continue;
        const int32_t ds = r->seq + e->p.max_running;
        if (sp->from_model) { // up to toks[n_toks - 1], logits on it (counted in the plan)
            sp->decode_entry = i;
            for (int32_t p = sp->draft_kv; p < r->n_toks; p++) {
                se->draft_batch[nd] = (struct lm_batch_entry){r->toks[p], p, ds, p == r->n_toks - 1};
                se->draft_batch_req[nd++] = r;
            }
            if (sp->n_draft > *k_max) *k_max = sp->n_draft;
        } else if (r->n_kv < r->n_toks - 1 || r->n_kv - sp->draft_kv > se->draft_ctx->n_batch / 2) {
            // a short lag of a decoding request waits for its next drafting step
            int32_t end = r->n_kv < r->n_toks - 1 ? e->batch[j - 1].pos + 1 : r->n_kv;
            const int32_t room = se->draft_ctx->n_batch - nd;
            if (end - sp->draft_kv > room) end = sp->draft_kv + room;
            if (end <= sp->draft_kv) continue;
            end = sp->draft_kv + lm_kv_chunk_fit(kv, ds, end - sp->draft_kv, *avail);
            *avail -= lm_kv_blocks_needed(kv, ds, end - sp->draft_kv);
            for (int32_t p = sp->draft_kv; p < end; p++) {
                se->draft_batch[nd] = (struct lm_batch_entry){r->toks[p], p, ds, false};
                se->draft_batch_req[nd++] = r;
            }
        }
    }
    return nd;
}

// A failed draft forward (not expected: the blocks were counted): this step verifies no
// model drafts; the draft sequences keep what they computed (a prefix of their tokens).
static int32_t drop_model_drafts(struct lm_engine *e, int32_t n) {
    int32_t w = 0;
    for (int32_t i = 0; i < n; i++) {
        struct lm_req *r = e->batch_req[i];
        if (r->spec.from_model && e->batch[i].pos > r->n_kv) continue; // a slot
        e->batch[w] = e->batch[i];
        e->batch_req[w++] = r;
    }
    for (int32_t i = 0; i < w; i++) {
        struct lm_req *r = e->batch_req[i];
        if (!r->spec.from_model) continue;
        r->spec.from_model = false;
        r->spec.n_draft = 0;
        if (r->spec.draft_kv > r->n_toks) lm_spec_model_seq_rm(e, r, r->n_toks); // drafts it fed
    }
    return w;
}

// Round j + 1 feeds every drafting request's j-th draft and draws its next, one position per
// request, all in one forward of the draft model.
int32_t lm_spec_model_draft(struct lm_engine *e, int32_t n, int32_t *avail) {
    struct lm_spec_engine *se = &e->spec;
    int32_t k_max = 0;
    int32_t nd = catch_up(e, n, avail, &k_max);
    if (nd == 0) return n;
    bool ok = draft_forward(e, nd) == LM_OK;
    int32_t row = 0;
    for (int32_t i = 0; ok && i < nd; i++)
        if (se->draft_batch[i].want_logits) draw_draft(e, se->draft_batch_req[i], row++, 0);
    for (int32_t j = 1; ok && j < k_max; j++) {
        nd = 0;
        for (int32_t i = 0; i < n; i++) {
            struct lm_req *r = e->batch_req[i];
            const struct lm_req_spec *sp = &r->spec;
            if (!sp->from_model || sp->decode_entry != i || sp->n_draft <= j) continue;
            se->draft_batch[nd] = (struct lm_batch_entry){sp->draft[j - 1], r->n_toks + j - 1,
                                                     r->seq + e->p.max_running, true};
            se->draft_batch_req[nd++] = r;
        }
        ok = draft_forward(e, nd) == LM_OK;
        for (int32_t i = 0; ok && i < nd; i++) draw_draft(e, se->draft_batch_req[i], i, j);
    }
    return ok ? n : drop_model_drafts(e, n);
}
