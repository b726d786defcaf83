// A request's lifecycle (runtime/request.h): create, the waiting queue, admit, requeue when
// preempted, finish with its last event, free. The engine, the scheduler and delivery call it;
// it calls only what is below them (the KV pool, the drafters' per-request state).
#include "runtime/request.h"

#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "base/timer.h"
#include "runtime/engine.h"
#include "sample/sample_internal.h"

// ================================================================ create, free

static void req_free(struct lm_req *r) {
    if (!r) return;
    lm_spec_req_free(r);
    lm_grammar_matcher_free(r->gm);
    lm_grammar_free(r->rp.grammar);
    lm_think_free(r);
    free(r->mask);
    lm_sampler_free(r->smp);
    free(r->toks);
    free(r->bias_tok);
    free(r->bias_val);
    free(r->embd_acc);
    free(r->embd_out);
    free(r);
}

enum lm_status lm_req_new(struct lm_engine *e, const int32_t *prompt, int32_t n_prompt,
                          const struct lm_request_params *rp, struct lm_req **out) {
    *out = NULL;
    struct lm_req *r = calloc(1, sizeof *r);
    if (!r) return lm_error_set(LM_ERR_NOMEM, "engine: out of memory");
    r->rp = *rp;
    r->rp.grammar = NULL; // referenced below: req_free releases only what the request holds
    enum lm_status st = lm_sampler_init(&r->smp, &rp->sampling, e->n_vocab);
    if (st != LM_OK) {
        free(r);
        return st;
    }
    r->cap_toks = rp->max_tokens > 0 ? n_prompt + rp->max_tokens : e->p.n_ctx;
    r->toks = malloc((size_t)r->cap_toks * sizeof *r->toks);
    if (rp->n_bias) {
        r->bias_tok = malloc((size_t)rp->n_bias * sizeof *r->bias_tok);
        r->bias_val = malloc((size_t)rp->n_bias * sizeof *r->bias_val);
    }
    if (!r->toks || (rp->n_bias && (!r->bias_tok || !r->bias_val))) {
        req_free(r);
        return lm_error_set(LM_ERR_NOMEM, "engine: out of memory");
    }
    if (rp->embed) {
        const size_t E = (size_t)e->m->hp.n_embd;
        r->embd_acc = malloc(2 * E * sizeof *r->embd_acc); // the second half: lm_pool_rank's
        r->embd_out = malloc(E * sizeof *r->embd_out);
        if (!r->embd_acc || !r->embd_out) {
            req_free(r);
            return lm_error_set(LM_ERR_NOMEM, "engine: out of memory");
        }
    }
    lm_spec_req_init(e, r);
    if ((st = lm_think_init(r, rp)) != LM_OK) {
        req_free(r);
        return st;
    }
    memcpy(r->toks, prompt, (size_t)n_prompt * sizeof *prompt);
    if (rp->n_bias) {
        memcpy(r->bias_tok, rp->bias_tokens, (size_t)rp->n_bias * sizeof *r->bias_tok);
        memcpy(r->bias_val, rp->bias_values, (size_t)rp->n_bias * sizeof *r->bias_val);
    }
    r->rp.bias_tokens = NULL; // the copies above are the request's
    r->rp.bias_values = NULL;
    if (rp->grammar) { // its own reference, released by req_free
        r->rp.grammar = lm_grammar_ref(rp->grammar);
        enum lm_status gs = lm_grammar_matcher_init(&r->gm, r->rp.grammar);
        r->mask = malloc((size_t)(e->n_vocab + 31) / 32 * sizeof *r->mask);
        if (gs != LM_OK || !r->mask) {
            req_free(r);
            return gs != LM_OK ? gs : lm_error_set(LM_ERR_NOMEM, "engine: out of memory");
        }
    }
    if (!r->mask && r->think.n_force < r->think.n_end) { // SPENT masks without a grammar too
        r->mask = malloc((size_t)(e->n_vocab + 31) / 32 * sizeof *r->mask);
        if (!r->mask) {
            req_free(r);
            return lm_error_set(LM_ERR_NOMEM, "engine: out of memory");
        }
    }
    r->n_toks = r->n_prompt = n_prompt;
    r->max_gen = rp->max_tokens > 0 ? rp->max_tokens : INT32_MAX; // else the context ends it
    r->seq = -1;
    r->t_submit = lm_now_ns();
    for (int32_t i = 0; i < n_prompt; i++) lm_sampler_accept(r->smp, prompt[i]);
    r->top_need = rp->n_bias == 0 && rp->n_logprobs == 0 && !rp->full_logits
                      ? lm_sampler_top_k_need(r->smp) : 0;
    // a grammar removes candidates: 64 of the best leave enough allowed ones at most steps
    // (inside a string nearly all are; at a key or bracket the few allowed rank high)
    r->top_ask = r->gm && r->top_need > 0 ? (r->top_need > 64 ? r->top_need : 64) : r->top_need;
    *out = r;
    return LM_OK;
}

// ================================================================ the waiting queue

void lm_req_wait_unlink(struct lm_engine *e, struct lm_req *r) {
    if (r->prev) r->prev->next = r->next;
    else e->wait_head = r->next;
    if (r->next) r->next->prev = r->prev;
    else e->wait_tail = r->prev;
    r->next = r->prev = NULL;
    e->n_waiting--;
}

void lm_req_wait_push(struct lm_engine *e, struct lm_req *r, bool front) {
    r->prev = r->next = NULL;
    if (!e->wait_head) {
        e->wait_head = e->wait_tail = r;
    } else if (front) {
        r->next = e->wait_head;
        e->wait_head->prev = r;
        e->wait_head = r;
    } else {
        r->prev = e->wait_tail;
        e->wait_tail->next = r;
        e->wait_tail = r;
    }
    e->n_waiting++;
}

void lm_req_unqueue(struct lm_engine *e, struct lm_req *r) {
    lm_req_wait_unlink(e, r);
    pthread_mutex_lock(&e->mu);
    e->n_queued--;
    pthread_mutex_unlock(&e->mu);
}

// ================================================================ admit, requeue

enum lm_status lm_req_admit(struct lm_engine *e, struct lm_req *r, int32_t seq) {
    struct lm_kv_cache *kv = e->c->kv;
    const enum lm_status st = lm_spec_req_admit(e, r);
    if (st != LM_OK) { // its buffers: an error event
        lm_req_unqueue(e, r);
        lm_req_finish(e, r, LM_FINISH_ERROR, -1, NULL, lm_error_msg());
        return st;
    }
    int32_t n_att = 0;
    // an embedding pooled over more than its last row computes every row (no cached prefix)
    // (nor does a non-causal one: its K/V depend on the whole input)
    const bool attach = !r->rp.embed || (!e->c->non_causal && (r->rp.pooling == LM_POOLING_LAST ||
                                                               r->rp.pooling == LM_POOLING_RANK));
    if (attach && lm_kv_prefix_attach(kv, seq, r->toks, r->n_toks, &n_att) != LM_OK) n_att = 0;
    lm_req_wait_unlink(e, r);
    pthread_mutex_lock(&e->mu);
    e->n_queued--;
    e->n_run_pub++;
    pthread_mutex_unlock(&e->mu);
    r->seq = seq;
    r->n_kv = n_att;
    e->c->seq_embd[seq] = r->rp.embed; // an embedding request's rows are hidden states
    r->spec.draft_kv = 0;
    if (r->rp.use_draft && lm_kv_prefix_attach(kv, seq + e->p.max_running, r->toks, r->n_toks,
                                               &r->spec.draft_kv) != LM_OK)
        r->spec.draft_kv = 0;
    if (!r->admitted_once) {
        r->admitted_once = true;
        r->n_cached = n_att;
        r->t_admit = lm_now_ns();
    }
    r->admit_order = ++e->admit_counter;
    e->running[seq] = r;
    e->n_running++;
    return LM_OK;
}

// Frees r's sequences (the model's, the draft model's) and its running slot; the caller
// moves r's count between the published ones (under mu).
static void release_seqs(struct lm_engine *e, struct lm_req *r) {
    lm_kv_seq_rm(e->c->kv, r->seq, 0, -1); // full blocks stay cached for later prompts
    if (e->spec.draft_ctx) lm_spec_model_seq_rm(e, r, 0);
    e->running[r->seq] = NULL;
    e->n_running--;
    r->seq = -1;
}

void lm_req_requeue(struct lm_engine *e, struct lm_req *r) {
    release_seqs(e, r);
    r->spec.draft_kv = 0;
    r->n_kv = 0;
    lm_req_wait_push(e, r, true);
    pthread_mutex_lock(&e->mu); // one change: the held count stays the same
    e->n_queued++;
    e->n_run_pub--;
    pthread_mutex_unlock(&e->mu);
}

// ================================================================ finish

void lm_req_finish(struct lm_engine *e, struct lm_req *r, enum lm_finish why, int32_t tok,
                   const struct lm_event *tmpl, const char *error) {
    if (r->seq >= 0) {
        release_seqs(e, r);
        pthread_mutex_lock(&e->mu);
        e->n_run_pub--;
        pthread_mutex_unlock(&e->mu);
    }
    struct lm_event ev = {0};
    if (tmpl) ev = *tmpl;
    ev.id = r->id;
    ev.token = tok;
    ev.index = tok >= 0 ? r->n_gen - 1 : r->n_gen;
    ev.t_ns = lm_now_ns();
    ev.finish = why;
    ev.n_prompt = r->n_prompt;
    ev.n_cached = r->n_cached;
    ev.t_submit_ns = r->t_submit;
    ev.t_admit_ns = r->t_admit;
    ev.error = error;
    e->st.finished++;
    if (why == LM_FINISH_CANCELLED) e->st.cancelled++;
    if (r->cb) r->cb(r->user, &ev);
    req_free(r);
}
