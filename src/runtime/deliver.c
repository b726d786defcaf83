// A step's results (engine.h): each request's logits row becomes its next token (sampled
// with its chain, its logit bias, its grammar's mask and logprobs), an event to its callback,
// and its finish when an end-of-generation token, the grammar's end, max_tokens or the
// context ends it. Drafted positions are verified through the same call, which rolls the
// sequences back past the rejected ones.
#include <math.h>
#include <string.h>

#include "runtime/engine.h"
#include "runtime/ops_pool.h"
#include "sample/sample_internal.h"
#include "tokenizer/tokenizer.h"

// log-softmax of the logits at tok, and the n most likely tokens with theirs (e->top_tok,
// e->top_lp, ties to the lower id)
static float logprobs(struct lm_engine *e, const float *lg, int32_t tok, int32_t n) {
    const int32_t nv = e->n_vocab;
    float mx = lg[0];
    for (int32_t i = 1; i < nv; i++) mx = lg[i] > mx ? lg[i] : mx;
    double sum = 0.0;
    for (int32_t i = 0; i < nv; i++) sum += exp((double)(lg[i] - mx));
    const float lse = mx + (float)log(sum);
    int32_t k = 0; // top n by insertion
    for (int32_t i = 0; i < nv && n > 0; i++) {
        if (k == n && !(lg[i] > lg[e->top_tok[k - 1]])) continue;
        int32_t j = k < n ? k++ : n - 1;
        while (j > 0 && lg[i] > lg[e->top_tok[j - 1]]) {
            e->top_tok[j] = e->top_tok[j - 1];
            j--;
        }
        e->top_tok[j] = i;
    }
    for (int32_t j = 0; j < k; j++) e->top_lp[j] = lg[e->top_tok[j]] - lse;
    return lg[tok] - lse;
}

// A drafted position samples as a plain one: for a point-mass draft (prompt lookup, a greedy
// draft model) the acceptance rule (lm_sampler_verify: accept with probability p(draft),
// else draw from p without it) is exactly one plain draw x ~ p compared with the draft. A
// draft model's sampled draft came from q: accept with probability min(1, p/q), else draw
// from max(0, p - q). A chain that needs only the best logits draws from the LM head's
// selection of the row (the same token as from the full row, lm_sampler_sample_top_k).
// Samples r's token from logits row `row` and delivers its event; finishes r when done.
// draft >= 0: the token drafted at this position, q (n_q entries) the draft model's
// distribution there, or NULL for a point mass (prompt lookup, a greedy draft model);
// *accepted (may be NULL): the token is the draft. Returns false when r finished: r is
// freed then.
static bool deliver_token(struct lm_engine *e, struct lm_req *r, int32_t row, uint64_t t,
                          int32_t draft, const struct lm_token_prob *q, int32_t n_q, bool *accepted) {
    const float *lg = lm_get_logits(e->c, row);
    const struct lm_token_logit *top = NULL;
    int32_t n_top = r->top_need > 0 ? lm_get_top_k(e->c, row, &top) : 0;
    if (r->rp.n_bias > 0) {
        memcpy(e->biased, lg, (size_t)e->n_vocab * sizeof *lg);
        for (int32_t i = 0; i < r->rp.n_bias; i++) e->biased[r->bias_tok[i]] += r->bias_val[i];
        lg = e->biased;
    }
    // A grammar's mask comes before the chain: the LM head's candidates it allows, when enough
    // remain, else the row with the others at -inf (the same token either way). Logprobs stay
    // the model's own distribution (lg).
    const float *ls = lg; // the row the chain samples
    const int32_t forced = lm_think_forced(r); // a thinking budget's end marker: no draw
    if (forced < 0 && lm_req_masked(r)) { // inside a thinking span the grammar waits
        if (r->gm && !r->mask_ready) lm_grammar_matcher_fill_mask(r->gm, r->mask);
        r->mask_ready = false;
        lm_think_mask(r, r->mask, e->n_vocab); // the span's start marker may come instead
        n_top = n_top > 0 ? lm_sampler_filter_top_k(top, n_top, r->mask, e->top_kept) : 0;
        top = e->top_kept;
        if (n_top == 0 || n_top < r->top_need || (draft >= 0 && q)) { // the masked row
            int32_t allowed = 0;
            if (!(ls = lm_sampler_masked_row(r->smp, lg, r->mask, &allowed)) || allowed == 0) {
                lm_req_finish(e, r, LM_FINISH_ERROR, -1, NULL,
                              ls ? "grammar: no token is allowed here" : lm_error_msg());
                return false;
            }
            n_top = 0;
        }
    }
    int32_t tok;
    if (forced >= 0) {
        tok = forced;
    } else if (draft >= 0 && q) { // a draft model's draft, sampled from its q
        float *const q_dense = e->spec.q_dense;
        for (int32_t i = 0; i < n_q; i++) q_dense[q[i].id] = q[i].p;
        bool acc = false;
        tok = lm_sampler_verify(r->smp, ls, draft, q_dense, &acc);
        for (int32_t i = 0; i < n_q; i++) q_dense[q[i].id] = 0.0f;
    } else { // plain, or a point-mass draft
        tok = n_top >= r->top_need && n_top > 0 ? lm_sampler_sample_top_k(r->smp, top, n_top)
                                                : lm_sampler_sample(r->smp, ls);
    }
    r->mask_ready = false;
    int32_t ans[LM_THINK_MARKER_MAX + 1] = {tok}; // the tokens the grammar sees now (the answer's)
    const int32_t n_ans = r->think.n_end > 0 ? lm_think_accept(r, tok, ans, lm_model_tokenizer(e->m)) : 1;
    for (int32_t i = 0; r->gm && i < n_ans; i++)
        if (!lm_grammar_matcher_accept(r->gm, ans[i])) { // not expected: the mask allowed it
            lm_req_finish(e, r, LM_FINISH_ERROR, -1, NULL, "grammar: the sampled token was refused");
            return false;
        }
    if (accepted) *accepted = draft >= 0 && tok == draft;
    lm_sampler_accept(r->smp, tok);
    struct lm_event ev = {.id = r->id, .token = tok, .index = r->n_gen, .t_ns = t,
                          .n_prompt = r->n_prompt, .n_cached = r->n_cached,
                          .t_submit_ns = r->t_submit, .t_admit_ns = r->t_admit};
    if (r->rp.n_logprobs > 0) {
        ev.logprob = logprobs(e, lg, tok, r->rp.n_logprobs - 1);
        ev.n_top = r->rp.n_logprobs - 1;
        ev.top_tokens = e->top_tok;
        ev.top_logprobs = e->top_lp;
    }
    r->toks[r->n_toks++] = tok;
    r->n_gen++;
    e->st.generated_tokens++;
    enum lm_finish why = LM_FINISH_NONE;
    if (!r->rp.ignore_eos && lm_tokenizer_is_eog(lm_model_tokenizer(e->m), tok)) why = LM_FINISH_EOG;
    else if (r->gm && n_ans > 0 && lm_grammar_matcher_is_done(r->gm)) why = LM_FINISH_EOG; // nothing may follow
    else if (r->n_gen >= r->max_gen) why = LM_FINISH_LENGTH;
    else if (r->n_toks >= e->p.n_ctx) why = LM_FINISH_CONTEXT;
    if (why != LM_FINISH_NONE) {
        lm_req_finish(e, r, why, tok, &ev, NULL);
        return false;
    }
    if (r->cb) r->cb(r->user, &ev);
    return true;
}

// r's decode token at logits row `row` and its n_draft drafts after it, delivered in order
// until one is rejected (that position's token is the model's own); both sequences are
// rolled back past the accepted ones. r may finish (and be freed) on the way.
static void verify(struct lm_engine *e, struct lm_req *r, int32_t row, uint64_t t) {
    struct lm_req_spec *sp = &r->spec;
    const int32_t nd = sp->n_draft, seq = r->seq;
    const bool forced = sp->forced; // r may be freed on the way
    int32_t acc = 0;
    bool alive = true, ok = true;
    while (alive && ok) { // the draft at position n_kv + acc, or the bonus token after all nd
        const int32_t d = acc < nd ? sp->draft[acc] : -1;
        const bool sampled = d >= 0 && sp->from_model && sp->q; // drawn from the draft's q
        const struct lm_token_prob *q = sampled ? sp->q + (size_t)acc * sp->q_cap : NULL;
        alive = deliver_token(e, r, row + acc, t, d, q, sampled ? sp->q_n[acc] : 0, &ok);
        if (ok) acc++;
    }
    e->st.drafted_tokens += (uint64_t)nd;
    e->st.accepted_tokens += (uint64_t)acc;
    if (forced) e->st.forced_tokens += (uint64_t)(acc < nd ? acc : nd);
    if (!alive) return; // finished: its sequences are freed already
    if (!forced) lm_spec_acc_update(&sp->acc, nd, acc); // forced ones say nothing of lookup's
    sp->forced = false;
    sp->n_draft = 0;
    r->n_kv += acc; // the accepted drafts' K/V stay; the rest is rolled back
    if (acc < nd) lm_kv_seq_rm(e->c->kv, seq, r->n_kv, -1);
    if (sp->draft_kv > r->n_kv) lm_spec_model_seq_rm(e, r, r->n_kv); // the draft's drafts too
}

// An embedding request's chunk, batch entries [i, j): the rows that feed its pooling added
// in position order (embedding rows erow.. of the step); after its last position, its vector
// in its one event. Returns the next embedding row.
static int32_t pool_rows(struct lm_engine *e, struct lm_req *r, int32_t i, int32_t j,
                         int32_t erow) {
    const int64_t E = e->m->hp.n_embd;
    for (int32_t k = i; k < j; k++)
        if (e->batch[k].want_logits) // its sequence is in embedding mode
            lm_pool_add(r->embd_acc, lm_get_embeddings(e->c, erow++), E,
                        e->batch[k].pos == 0 || r->rp.pooling != LM_POOLING_MEAN);
    if (r->n_kv < r->n_toks) return erow;
    struct lm_event ev = {.embd = r->embd_out};
    if (r->rp.pooling == LM_POOLING_RANK) { // a reranker's scores (embd_out: the head's scratch)
        float scores[64];
        ev.n_embd = lm_pool_rank(e->m, e->c->kern, r->embd_acc, r->embd_out, scores);
        memcpy(r->embd_out, scores, (size_t)ev.n_embd * sizeof *scores);
    } else {
        const int32_t n_rows = r->rp.pooling == LM_POOLING_MEAN ? r->n_toks : 1;
        lm_pool_finish(r->embd_out, r->embd_acc, E, n_rows, r->rp.dimensions);
        ev.n_embd = r->rp.dimensions > 0 ? r->rp.dimensions : (int32_t)E;
    }
    lm_req_finish(e, r, LM_FINISH_EOG, -1, &ev, NULL);
    return erow;
}

int32_t lm_deliver_step(struct lm_engine *e, int32_t n, uint64_t t) {
    int32_t row = 0; // logits rows come in batch order of the entries that want them
    int32_t erow = 0; // embedding rows likewise
    for (int32_t i = 0, j; i < n; i = j) {
        struct lm_req *r = e->batch_req[i];
        for (j = i + 1; j < n && e->batch_req[j] == r; j++) {}
        const int32_t n_draft = r->spec.n_draft;
        if (n_draft > 0) { // a decode token and its drafts: one row each
            r->n_kv = e->batch[i].pos + 1; // the decode token's; verification adds the accepted
            verify(e, r, row, t);
            row += n_draft + 1;
            continue;
        }
        r->n_kv = e->batch[j - 1].pos + 1; // a prefill chunk, or a decode token
        if (r->rp.embed) {
            erow = pool_rows(e, r, i, j, erow);
            continue;
        }
        if (e->batch[j - 1].want_logits) deliver_token(e, r, row++, t, -1, NULL, 0, NULL);
    }
    return row;
}
