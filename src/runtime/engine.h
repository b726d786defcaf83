// The engine's state, shared by its modules (internal; the API is lumen.h lm_engine_*):
//   engine.c       the engine thread, its inbox, submit / cancel / stats, and the step
//   sched.c        the scheduling policy: admission, preemption, the batch
//   deliver.c      a step's results: sampling, verification of drafts, events
//   mask_worker.c  grammar masks computed beside the forward pass
//   spec*.c        speculative decoding: drafts (prompt lookup, a draft model)
//   request.c      a request's lifecycle (runtime/request.h), below all of them
// Only the thread running the steps touches what is not marked "under mu".
#ifndef LM_RUNTIME_ENGINE_H
#define LM_RUNTIME_ENGINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "lumen.h"
#include "runtime/context.h"
#include "runtime/request.h"
#include "runtime/spec.h"

// ---------------------------------------------------------------- the engine

struct lm_mask_worker; // mask_worker.c

// What speculative decoding keeps per engine (spec*.c).
struct lm_spec_engine {
    struct lm_spec_cost cost; // decode steps' forward ns by sequences and tokens (drafts that pay)
    int32_t draft_rows;       // logits rows beyond max_running, for drafts
    // draft model (lm_engine_params.draft_model): its context on the target's KV pool and
    // thread pool, and its batch
    struct lm_context *draft_ctx;
    struct lm_batch_entry *draft_batch; // [draft_ctx->n_batch]
    struct lm_req **draft_batch_req;    // [draft_ctx->n_batch]
    double draft_tok_ns; // draft forward ns per sequence of a drafting round (one position
                         // each: the price of a drafted token; 0: not measured yet)
    float *q_dense;      // [n_vocab] zeros; a drafted position's q during its verification
};

// Logits rows for drafted tokens, beyond one per running request: bounds a step's drafts
// (and the logits buffer: a row is n_vocab floats, 1 MiB for Gemma 3).
#define LM_ENGINE_DRAFT_ROWS 32

// lm_engine_params.embed_step_tokens's default: embedding tokens per step beside decodes
// (docs/embeddings.md, "Embeddings beside chat": the measurement behind it).
#define LM_ENGINE_EMBED_STEP_TOKENS 16

struct lm_engine {
    struct lm_model *m;
    struct lm_context *c;
    struct lm_engine_params p;
    int32_t n_vocab;

    // ---- shared with other threads, under mu
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct lm_req *inbox_head, *inbox_tail;
    uint64_t *cancels;
    int32_t n_cancels, cap_cancels;
    int32_t n_queued;          // inbox + waiting
    int32_t n_run_pub;         // n_running, as the submitting threads see it: a request is
                               // refused when n_queued + n_run_pub reaches max_waiting +
                               // max_running (free sequences take requests beyond the queue)
    struct lm_engine_stats snap;
    bool stop, started;
    pthread_t thread;

    // ---- the stepping thread only
    struct lm_req *wait_head, *wait_tail;
    int32_t n_waiting;
    struct lm_req **running;      // [max_running] by sequence id
    int32_t n_running;
    uint64_t admit_counter;
    struct lm_batch_entry *batch; // [step_tokens] this step's entries
    struct lm_req **batch_req;    // [step_tokens] the request of each entry
    struct lm_req **order;        // [max_running] scratch: running requests by admission
    float *biased;                // [n_vocab] logits with a request's logit bias
    struct lm_token_logit top_kept[LM_TOP_K_MAX]; // the LM head's candidates a mask allows
    struct lm_mask_worker *masks; // computes grammar masks beside the forward pass
    int32_t top_tok[LM_MAX_TOP_LOGPROBS];
    float top_lp[LM_MAX_TOP_LOGPROBS];
    struct lm_engine_stats st;    // counters (published into snap after each step)
    int32_t embed_saved;          // embedding tokens saved for a non-causal input that waits
                                  // whole for a step beside decodes (sched.c embed_credit)
    struct lm_spec_engine spec;
};

// ---------------------------------------------------------------- sched.c

// Admits queued requests in order into free sequences while the KV pool holds their blocks.
void lm_sched_admit(struct lm_engine *e);

// A step's batch as the scheduler planned it: e->batch[0, n) and their requests, each
// request's entries contiguous (a decode token and its drafts, or a prefill chunk).
struct lm_step {
    int32_t n;
    int32_t free_blocks; // KV blocks still free after the batch's (for the draft's catch-up)
};
// Plans the step: a decode token for every running request that is decoding, the drafts
// that pay (prompt lookup: tokens; draft model: slots drawn by lm_spec_model_draft), then
// prompts' prefill chunks in admission order up to the token budget, then embedding inputs'
// (while requests decode, at most embed_step_tokens less the prompts' tokens). Preempts the newest requests
// (or ends a lone one's context) while the pool cannot hold the decode tokens.
struct lm_step lm_sched_plan(struct lm_engine *e);

// ---------------------------------------------------------------- deliver.c

// Samples and delivers the results of the step's batch e->batch[0, n), stamped t: per
// request, its next token (a prefill chunk short of the prompt's end has none), or its
// decode token's drafts verified (delivered in order until one is rejected, the sequences
// rolled back past it); finishes requests that are done. Returns the logits rows it read.
int32_t lm_deliver_step(struct lm_engine *e, int32_t n, uint64_t t);

// ---------------------------------------------------------------- mask_worker.c

// Starts computing, on the mask worker, the grammar mask of the first logits row of each
// constrained request among the batch's n entries (r->mask, r->mask_ready); the engine
// thread runs the forward pass meanwhile and must call lm_mask_worker_wait before sampling or
// finishing any of them. Without a worker (it could not start) nothing is posted and
// sampling computes the masks itself.
void lm_mask_worker_begin(struct lm_engine *e, int32_t n);
void lm_mask_worker_wait(struct lm_engine *e);
void lm_mask_worker_free(struct lm_engine *e); // stops the worker (lm_engine_free)

// ---------------------------------------------------------------- spec*.c

// Engine-level state: the cost model and, with a draft model, its context and batch.
// LM_ERR_NOMEM / a context error with its message.
enum lm_status lm_spec_engine_init(struct lm_engine *e);
void lm_spec_engine_free(struct lm_engine *e);
// A request's draft state at submit (rp final): the acceptance prior, the draft RNG.
void lm_spec_req_init(struct lm_engine *e, struct lm_req *r);
// At admission: the buffer of q for sampled draft-model drafts (kept if preempted and
// admitted again). LM_ERR_NOMEM with a message.
enum lm_status lm_spec_req_admit(struct lm_engine *e, struct lm_req *r);
void lm_spec_req_free(struct lm_req *r);

// The most tokens r may draft in a step that holds n_tot entries with `rows` logits rows
// left for drafts: within the step's budget, its draft_max, its context and max_tokens.
int32_t lm_spec_room(const struct lm_engine *e, const struct lm_req *r, int32_t n_tot, int32_t rows);
// Spreads e->batch[0, n) to n_tot entries: after each decode entry whose request drafts
// (spec.n_draft, of the drafter from_model names) its drafts at the next positions (a draft
// model's as slots, token -1). Returns n_tot.
int32_t lm_spec_insert_drafts(struct lm_engine *e, int32_t n, int32_t n_tot, bool from_model);

// spec_lookup.c: prompt-lookup drafts for the n decode entries at the front of e->batch,
// in the budget left after them; inserts each request's drafts after its decode entry,
// takes their blocks from *avail and returns the new entry count.
int32_t lm_spec_lookup_plan(struct lm_engine *e, int32_t n, int32_t *avail);

// spec_draft.c: the draft model. _plan: slots (token -1) for the drafts that pay after the
// decode entries of the requests that use it, their blocks (both sequences) taken from
// *avail; returns the new entry count. _draft: the draft model's forward passes for the
// planned step (catching its sequences up, then one round per drafted position), filling
// the slots; returns the entry count (slots dropped if a forward failed).
int32_t lm_spec_model_plan(struct lm_engine *e, int32_t n, int32_t *avail);
int32_t lm_spec_model_draft(struct lm_engine *e, int32_t n, int32_t *avail);
// Frees r's draft-model sequence from position p on (p = 0: all of it).
void lm_spec_model_seq_rm(struct lm_engine *e, struct lm_req *r, int32_t p);

#endif
