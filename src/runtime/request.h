// A request of the engine (internal) and its lifecycle (runtime/request.c): create, the
// waiting queue, admit into a sequence, requeue when preempted, finish, free. Below the
// engine, the scheduler and delivery, so none of them calls back up to end or requeue one.
#ifndef LM_RUNTIME_REQUEST_H
#define LM_RUNTIME_REQUEST_H

#include <stdbool.h>
#include <stdint.h>

#include "lumen.h"
#include "runtime/spec.h"

// ---------------------------------------------------------------- a request

// What speculative decoding keeps per request (spec*.c). Drafts of a step sit in the batch
// right after the request's decode entry, at positions n_kv + 1 .. n_kv + n_draft.
struct lm_req_spec {
    int32_t draft[LM_DRAFT_MAX_LIMIT]; // this step's drafted tokens
    int32_t n_draft;
    bool forced;                       // they are a grammar's forced tokens (jump-forward)
    struct lm_spec_acc acc;            // how often its drafts are accepted
    // draft model (rp.use_draft): its sequence (the request's seq + max_running in the pool)
    // holds toks[0, draft_kv), never past the request's n_kv after a verification
    bool from_model;      // this step's drafts are the draft model's, drawn after the batch
                          // was planned (lm_spec_model_draft)
    int32_t draft_kv;
    int32_t decode_entry; // this step: the index of the request's decode entry in the batch
    uint64_t rng[4];      // draws drafts from q (the request's sampler RNG stays untouched)
    struct lm_token_prob *q; // sampled drafts: [draft_max][q_cap] the draft's distribution q
    int32_t q_cap;           // at each drafted position (its q_n[j] most likely tokens)
    int32_t q_n[LM_DRAFT_MAX_LIMIT];
};

// A thinking span's progress (rp.think_*; runtime/think.c): PRE, the first tokens may open it
// (match: of think_start so far); IN, inside (used: its tokens so far, match: of think_end so
// far); FORCE, the budget is spent and think_end[force..n_force) are delivered; OFF: no span now (the
// answer: the grammar constrains it); SPENT: as OFF after a budget that forced only part of the end
// marker (n_force < n_end): the span may not open again (match: of think_start so far).
enum lm_think_state { LM_THINK_OFF = 0, LM_THINK_PRE, LM_THINK_IN, LM_THINK_FORCE, LM_THINK_SPENT };
struct lm_req_think {
    int32_t *start, *end; // copies of rp.think_start / think_end
    int32_t n_start, n_end;
    enum lm_think_state state;
    int32_t match, used, force;
    int32_t utf8_need; // continuation bytes the span's text still waits for (the budget waits too)
    int32_t n_close;   // think_end's tokens that end the span when generated (rp.n_think_close)
    int32_t n_force;   // think_end's tokens the budget delivers (rp.n_think_force; n_close..n_end)
    int32_t g_in;      // PRE: the start marker's tokens so far the grammar (gm) accepted too, while it followed
                       // them (== match); undone when the span opens; below match: the marker is completed
};

struct lm_req {
    uint64_t id;
    struct lm_req *next, *prev; // inbox (next only) or the waiting queue
    int32_t *toks;              // prompt + generated so far
    int32_t n_toks, cap_toks;
    int32_t n_prompt, n_gen, max_gen;
    int32_t n_kv;               // positions of toks held in the KV (the sequence's next position)
    int32_t seq;                // sequence while running, else -1
    int32_t n_cached;           // prompt tokens the prefix cache supplied at first admission
    bool admitted_once;
    struct lm_request_params rp;
    int32_t *bias_tok;
    float *bias_val;
    struct lm_sampler *smp;
    int32_t top_need;           // best logits the chain draws from (lm_sampler_top_k_need; 0:
                                // it needs the full row: also with logit bias or logprobs)
    int32_t top_ask;            // best logits the LM head selects for it: top_need, more with a
                                // grammar (its mask removes some; the full row if too many)
    // grammar (rp.grammar): the matcher over the generated tokens, and the allowed tokens of
    // the next draw; mask_ready: the mask was computed beside this step's forward pass
    struct lm_grammar_matcher *gm;
    uint32_t *mask;
    bool mask_ready;
    lm_event_fn cb;
    void *user;
    uint64_t t_submit, t_admit, admit_order;
    struct lm_req_spec spec;
    // embedding (rp.embed; rp.pooling resolved to MEAN, CLS or LAST): the float64 sum of the
    // rows that feed its pooling, in position order (runtime/ops_pool.h), and its vector
    double *embd_acc;           // [2 * n_embd]: the pooled sum, then lm_pool_rank's scratch
    float *embd_out;            // [n_embd]
    struct lm_req_think think;
};

// Is r still prefilling (its next entries are prompt positions)? An embedding request
// prefills its whole prompt and never decodes.
static inline bool lm_req_prefilling(const struct lm_req *r) {
    return r->n_kv < r->n_toks - (r->rp.embed ? 0 : 1);
}

// ---------------------------------------------------------------- its thinking span (think.c)

// Copies rp's markers into r->think and sets its first state. LM_ERR_NOMEM.
#define LM_THINK_MARKER_MAX 16 // tokens of a start or end marker at most
// The thinking fields of rp are sound (submit's check): LM_ERR_ARG naming the field.
enum lm_status lm_think_check(const struct lm_request_params *rp, int32_t n_vocab);
enum lm_status lm_think_init(struct lm_req *r, const struct lm_request_params *rp);
void lm_think_free(struct lm_req *r);
// The token the span's budget forces next, or -1.
int32_t lm_think_forced(const struct lm_req *r);
// The grammar's mask applies to r's next token (none inside the span): before the span, with
// the start marker's next token (lm_think_mask).
static inline bool lm_req_grammar_on(const struct lm_req *r) {
    return r->gm && (r->think.state == LM_THINK_OFF || r->think.state == LM_THINK_PRE ||
                     r->think.state == LM_THINK_SPENT);
}
// A mask applies to r's next token: the grammar's, or (SPENT, without a grammar) all tokens but
// the one that would open the span again (lm_think_mask).
static inline bool lm_req_masked(const struct lm_req *r) {
    return lm_req_grammar_on(r) || r->think.state == LM_THINK_SPENT;
}
// With the grammar's mask of the next token: also the start marker's next token (the span may
// open here); once the grammar stopped following a begun marker: only the marker's next token.
// SPENT: less the start marker's last token after its others (without a grammar, r->gm NULL,
// the mask is set to every token first).
void lm_think_mask(struct lm_req *r, uint32_t *mask, int32_t n_vocab);
// tok was delivered: the span's state moves on. Returns how many tokens the grammar must
// accept now (into toks[], at most n_start + 1): the answer's (tok, after a half-seen start
// marker's tokens the grammar has not seen), or 0 inside the span. A start marker's tokens go
// to r->gm (if any) as they come, while it allows them, and are undone if the span opens. With tok's tokenizer t (may be NULL: not checked),
// a spent budget waits for the span's text to end a UTF-8 character (as llama.cpp's does).
int32_t lm_think_accept(struct lm_req *r, int32_t tok, int32_t *toks, const struct lm_tokenizer *t);

// ---------------------------------------------------------------- its lifecycle

struct lm_engine;

// Create: the request of a submit (rp final, its place among the held requests reserved):
// its own copies of the prompt and the logit bias, its sampler (which has seen the prompt),
// its grammar's reference and matcher, its draft state. LM_ERR_NOMEM, or the sampler's or
// the grammar's error, with its message.
enum lm_status lm_req_new(struct lm_engine *e, const int32_t *prompt, int32_t n_prompt,
                          const struct lm_request_params *rp, struct lm_req **out);

// The waiting queue (requests admitted before are put back at the front when preempted).
void lm_req_wait_push(struct lm_engine *e, struct lm_req *r, bool front);
void lm_req_wait_unlink(struct lm_engine *e, struct lm_req *r);
// Out of the waiting queue for good (cancelled, or its admission failed): its place among
// the held requests is released.
void lm_req_unqueue(struct lm_engine *e, struct lm_req *r);

// Admit: r, at the head of the waiting queue, into free sequence seq: its draft buffers, the
// longest cached prefix of its tokens attached (its draft sequence's too), running. When its
// buffers cannot be had, r is finished with an error event (and freed) and the status
// returned.
enum lm_status lm_req_admit(struct lm_engine *e, struct lm_req *r, int32_t seq);
// Requeue (preemption by recompute): frees r's sequences and puts it back at the head of the
// queue; its tokens so far are recomputed when it is admitted again (same results: batch
// invariance).
void lm_req_requeue(struct lm_engine *e, struct lm_req *r);
// Finish: frees r's sequences, delivers its last event (token tok or -1; fields from tmpl
// when given), frees r. r must not be in the waiting queue.
void lm_req_finish(struct lm_engine *e, struct lm_req *r, enum lm_finish why, int32_t tok,
                   const struct lm_event *tmpl, const char *error);

#endif
