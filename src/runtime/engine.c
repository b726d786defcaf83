// The engine (lumen.h lm_engine_*): its thread, the inbox other threads submit to and
// cancel through, the stats they read, and the step, which runs every phase in order:
// intake, admission, the batch, the draft model's forward passes, the model's forward
// pass, delivery. The policy of each phase lives in sched.c, deliver.c and spec*.c.
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "base/timer.h"
#include "prof/prof.h"
#include "runtime/engine.h"

static atomic_uint_fast64_t g_next_id = 1;

const char *lm_finish_name(enum lm_finish f) {
    switch (f) {
    case LM_FINISH_NONE: return "none";
    case LM_FINISH_EOG: return "stop";
    case LM_FINISH_LENGTH: return "length";
    case LM_FINISH_CONTEXT: return "context";
    case LM_FINISH_CANCELLED: return "cancelled";
    case LM_FINISH_ERROR: return "error";
    }
    return "unknown";
}

struct lm_request_params lm_request_params_default(void) {
    struct lm_request_params rp = {.sampling = lm_sampler_params_default(), .think_budget = -1};
    return rp;
}

// ================================================================ init / free

enum lm_status lm_engine_init(struct lm_engine **out, struct lm_model *m,
                              const struct lm_engine_params *params) {
    *out = NULL;
    struct lm_engine_params p = {0};
    if (params) p = *params;
    if (p.max_running <= 0) p.max_running = 8;
    if (p.max_waiting <= 0) p.max_waiting = 64;
    if (p.step_tokens <= 0) p.step_tokens = 256;
    if (p.embed_step_tokens <= 0) p.embed_step_tokens = LM_ENGINE_EMBED_STEP_TOKENS;
    // an encoder's input runs whole in one step, so its step holds the longest input the
    // context allows (an encoder decodes nothing: no stream waits on its steps)
    if (m->arch->decoder.encoder) {
        const int32_t n = p.n_ctx > 0 ? p.n_ctx : m->hp.n_ctx_train;
        if (n > p.step_tokens) p.step_tokens = n < 8192 ? n : 8192;
    }
    if (p.max_running > 4096 || p.max_waiting > 1 << 20 || p.step_tokens > 8192)
        return lm_error_set(LM_ERR_ARG, "engine: max_running %d (<= 4096), max_waiting %d, "
                            "step_tokens %d (<= 8192)", p.max_running, p.max_waiting, p.step_tokens);
    if (p.step_tokens < p.max_running)
        return lm_error_set(LM_ERR_ARG, "engine: step_tokens %d < max_running %d (every running "
                            "request decodes one token per step)", p.step_tokens, p.max_running);
    struct lm_engine *e = calloc(1, sizeof *e);
    if (!e) return lm_error_set(LM_ERR_NOMEM, "engine: out of memory");
    struct lm_context_params cp = {.n_ctx = p.n_ctx, .n_seq_max = p.max_running,
                                   .n_batch = p.step_tokens, .n_threads = p.n_threads,
                                   .kv_tokens = p.kv_tokens, .no_prefix_cache = p.no_prefix_cache,
                                   .n_logits_max = p.max_running + LM_ENGINE_DRAFT_ROWS,
                                   .kv_type_k = p.kv_type_k, .kv_type_v = p.kv_type_v};
    enum lm_status st = p.draft_model ? lm_spec_vocab_check(m, p.draft_model) : LM_OK;
    if (st == LM_OK) st = p.draft_model ? lm_context_init_pair(&e->c, m, &cp, p.draft_model)
                                        : lm_context_init(&e->c, m, &cp);
    if (st != LM_OK) {
        free(e);
        return st;
    }
    p.n_ctx = e->c->n_ctx;
    p.kv_tokens = e->c->kv->n_blocks / e->c->kv->n_layouts * LM_KV_BLOCK; // the target's share
    p.n_threads = e->c->n_threads;
    e->m = m;
    e->p = p;
    e->n_vocab = lm_model_n_vocab(m);
    if ((st = lm_spec_engine_init(e)) != LM_OK) {
        lm_engine_free(e);
        return st;
    }
    e->running = calloc((size_t)p.max_running, sizeof *e->running);
    e->order = calloc((size_t)p.max_running, sizeof *e->order);
    e->batch = calloc((size_t)p.step_tokens, sizeof *e->batch);
    e->batch_req = calloc((size_t)p.step_tokens, sizeof *e->batch_req);
    e->biased = malloc((size_t)e->n_vocab * sizeof *e->biased);
    if (!e->running || !e->order || !e->batch || !e->batch_req || !e->biased) {
        lm_engine_free(e);
        return lm_error_set(LM_ERR_NOMEM, "engine: out of memory");
    }
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    lm_kv_cache_stats(e->c, &e->snap.kv);
    *out = e;
    return LM_OK;
}

void lm_engine_free(struct lm_engine *e) {
    if (!e) return;
    if (e->running && e->started) {
        pthread_mutex_lock(&e->mu);
        e->stop = true;
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
    }
    lm_mask_worker_free(e);
    if (e->running) { // everything left ends as cancelled, on this thread
        struct lm_req *r = e->inbox_head;
        while (r) {
            struct lm_req *n = r->next;
            lm_req_finish(e, r, LM_FINISH_CANCELLED, -1, NULL, NULL);
            r = n;
        }
        while (e->wait_head) {
            r = e->wait_head;
            lm_req_wait_unlink(e, r);
            lm_req_finish(e, r, LM_FINISH_CANCELLED, -1, NULL, NULL);
        }
        for (int32_t s = 0; s < e->p.max_running; s++)
            if (e->running[s]) lm_req_finish(e, e->running[s], LM_FINISH_CANCELLED, -1, NULL, NULL);
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->cv);
    }
    lm_spec_engine_free(e); // the draft context borrows c's pools: before c
    lm_context_free(e->c);
    free(e->running);
    free(e->order);
    free(e->batch);
    free(e->batch_req);
    free(e->biased);
    free(e->cancels);
    free(e);
}

struct lm_context *lm_engine_context(struct lm_engine *e) { return e->c; }

// ================================================================ thread-safe entry points

// The request's parameters against the engine's limits: LM_OK, or LM_ERR_ARG naming the field.
// An embedding request (rp->pooling resolved here): the whole input in the context and the
// pool, a pooling that gives one vector, dimensions in [0, n_embd].
static enum lm_status check_embed(const struct lm_engine *e, int32_t n_prompt,
                                  struct lm_request_params *rp) {
    if (n_prompt > e->p.n_ctx || n_prompt > e->p.kv_tokens)
        return lm_error_set(LM_ERR_ARG, "engine: embedding input of %d tokens exceeds the context of "
                            "%d tokens", n_prompt, e->p.n_ctx < e->p.kv_tokens ? e->p.n_ctx
                                                                           : e->p.kv_tokens);
    if (e->c->non_causal && n_prompt > e->p.step_tokens) // the whole input in one step
        return lm_error_set(LM_ERR_ARG, "engine: embedding input of %d tokens exceeds the step of %d "
                            "tokens (a non-causal model sees its whole input in one step)", n_prompt,
                            e->p.step_tokens);
    if (rp->pooling == LM_POOLING_UNSPECIFIED || rp->pooling == LM_POOLING_NONE)
        rp->pooling = e->m->hp.pooling;
    if (rp->pooling == LM_POOLING_RANK && lm_model_n_cls_out(e->m) == 0)
        return lm_error_set(LM_ERR_ARG, "engine: rank pooling needs a classification head; %s has "
                            "none (cls.output.weight)", e->m->path);
    if (rp->pooling == LM_POOLING_RANK && rp->dimensions != 0)
        return lm_error_set(LM_ERR_ARG, "engine: dimensions %d with rank pooling (scores, not a "
                            "vector)", rp->dimensions);
    if (rp->pooling != LM_POOLING_MEAN && rp->pooling != LM_POOLING_CLS &&
        rp->pooling != LM_POOLING_LAST && rp->pooling != LM_POOLING_RANK)
        return lm_error_set(LM_ERR_ARG, "engine: embeddings need mean, cls, last or rank pooling; %s has "
                            "%s pooling (%s.pooling_type)%s", e->m->path,
                            lm_pooling_name(rp->pooling), e->m->arch->name,
                            rp->pooling == LM_POOLING_NONE ? ": not an embedding model (ask for a "
                            "pooling to pool its hidden states anyway)" : "");
    if (rp->dimensions < 0 || rp->dimensions > e->m->hp.n_embd)
        return lm_error_set(LM_ERR_ARG, "engine: dimensions %d out of range [1, %d] (0: all)",
                            rp->dimensions, e->m->hp.n_embd);
    if (rp->grammar || rp->use_draft || rp->n_logprobs || rp->n_bias)
        return lm_error_set(LM_ERR_ARG, "engine: an embedding request samples nothing (no grammar, "
                            "drafts, logprobs or logit bias)");
    rp->lookup = false;
    return LM_OK;
}

static enum lm_status check_request(const struct lm_engine *e, const int32_t *prompt,
                                    int32_t n_prompt, struct lm_request_params *rp) {
    if (n_prompt <= 0 || !prompt) return lm_error_set(LM_ERR_ARG, "engine: empty prompt");
    for (int32_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= e->n_vocab)
            return lm_error_set(LM_ERR_ARG, "engine: prompt token %d at index %d is out of range "
                                "[0, %d)", prompt[i], i, e->n_vocab);
    if (rp->max_tokens < 0)
        return lm_error_set(LM_ERR_ARG, "engine: max_tokens %d < 0", rp->max_tokens);
    if (rp->embed) return check_embed(e, n_prompt, rp);
    if (!e->m->output.data)
        return lm_error_set(LM_ERR_ARG, "engine: %s (%s) is an embedding model without an LM head: "
                            "it embeds or ranks, it does not generate", e->m->path, e->m->arch->name);
    const int64_t total = (int64_t)n_prompt + (rp->max_tokens > 0 ? rp->max_tokens : 1);
    if (n_prompt >= e->p.n_ctx || total > e->p.n_ctx)
        return lm_error_set(LM_ERR_ARG, "engine: prompt of %d tokens + max_tokens %d exceeds the "
                            "context of %d tokens", n_prompt, rp->max_tokens, e->p.n_ctx);
    if (total > e->p.kv_tokens)
        return lm_error_set(LM_ERR_ARG, "engine: prompt of %d tokens + max_tokens %d exceeds the "
                            "KV pool of %d tokens", n_prompt, rp->max_tokens, e->p.kv_tokens);
    if (rp->n_logprobs < 0 || rp->n_logprobs > LM_MAX_TOP_LOGPROBS + 1)
        return lm_error_set(LM_ERR_ARG, "engine: n_logprobs %d out of range [0, %d]",
                            rp->n_logprobs, LM_MAX_TOP_LOGPROBS + 1);
    if (rp->n_bias < 0 || (rp->n_bias > 0 && (!rp->bias_tokens || !rp->bias_values)))
        return lm_error_set(LM_ERR_ARG, "engine: logit bias of %d entries without arrays", rp->n_bias);
    for (int32_t i = 0; i < rp->n_bias; i++) {
        const int32_t t = rp->bias_tokens[i];
        const float v = rp->bias_values[i];
        if (t < 0 || t >= e->n_vocab || !(isfinite(v) || v == -INFINITY))
            return lm_error_set(LM_ERR_ARG, "engine: logit bias entry %d: token %d, value %g "
                                "(tokens in [0, %d), finite values or -inf)", i, t, v, e->n_vocab);
    }
    if (rp->draft_max < 0 || rp->draft_max > LM_DRAFT_MAX_LIMIT)
        return lm_error_set(LM_ERR_ARG, "engine: draft_max %d out of range [0, %d]", rp->draft_max,
                            LM_DRAFT_MAX_LIMIT);
    if (rp->use_draft && !e->spec.draft_ctx)
        return lm_error_set(LM_ERR_ARG, "engine: the request asks for draft-model drafting, the "
                            "engine has no draft model");
    return lm_think_check(rp, e->n_vocab);
}

// A place among the requests held (running + queued), taken before anything is allocated
// for a request, so that a burst beyond the limits costs no memory: LM_ERR_BUSY when full.
static enum lm_status reserve_place(struct lm_engine *e) {
    pthread_mutex_lock(&e->mu);
    if (e->n_queued + e->n_run_pub >= e->p.max_waiting + e->p.max_running) {
        e->st.refused_busy++; // counted on the stepping thread's copy under the same lock
        pthread_mutex_unlock(&e->mu);
        return lm_error_set(LM_ERR_BUSY, "engine: the queue is full (%d requests waiting)",
                            e->p.max_waiting);
    }
    e->n_queued++;
    pthread_mutex_unlock(&e->mu);
    return LM_OK;
}

static void release_place(struct lm_engine *e) {
    pthread_mutex_lock(&e->mu);
    e->n_queued--;
    pthread_mutex_unlock(&e->mu);
}

enum lm_status lm_engine_submit(struct lm_engine *e, const int32_t *prompt, int32_t n_prompt,
                                const struct lm_request_params *rp_in, lm_event_fn cb, void *user,
                                uint64_t *id) {
    struct lm_request_params rp = rp_in ? *rp_in : lm_request_params_default();
    enum lm_status st = check_request(e, prompt, n_prompt, &rp); // resolves rp.pooling
    if (st != LM_OK) return st;
    if (rp.use_draft) rp.lookup = false; // the draft model drafts
    if ((rp.lookup || rp.use_draft) && rp.draft_max == 0) rp.draft_max = LM_DRAFT_MAX_DEFAULT;
    // a grammar's forced runs (a key's rest, "\": \"") go into the next step as certain drafts
    if (rp.grammar && rp.draft_max == 0) rp.draft_max = LM_DRAFT_MAX_LIMIT;
    if ((st = reserve_place(e)) != LM_OK) return st;
    struct lm_req *r = NULL;
    if ((st = lm_req_new(e, prompt, n_prompt, &rp, &r)) != LM_OK) {
        release_place(e);
        return st;
    }
    r->cb = cb;
    r->user = user;
    pthread_mutex_lock(&e->mu);
    r->id = atomic_fetch_add(&g_next_id, 1); // unique in the process, across engines
    if (e->inbox_tail) e->inbox_tail->next = r;
    else e->inbox_head = r;
    e->inbox_tail = r;
    e->st.submitted++;
    e->st.prompt_tokens += (uint64_t)n_prompt;
    if (id) *id = r->id;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return LM_OK;
}

void lm_engine_cancel(struct lm_engine *e, uint64_t id) {
    pthread_mutex_lock(&e->mu);
    if (e->n_cancels == e->cap_cancels) {
        const int32_t cap = e->cap_cancels ? 2 * e->cap_cancels : 16;
        uint64_t *nc = realloc(e->cancels, (size_t)cap * sizeof *nc);
        if (!nc) { // keep the request running rather than lose the lock state
            pthread_mutex_unlock(&e->mu);
            return;
        }
        e->cancels = nc;
        e->cap_cancels = cap;
    }
    e->cancels[e->n_cancels++] = id;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

void lm_engine_stats(struct lm_engine *e, struct lm_engine_stats *out) {
    pthread_mutex_lock(&e->mu);
    *out = e->snap;
    out->submitted = e->st.submitted;
    out->refused_busy = e->st.refused_busy;
    out->prompt_tokens = e->st.prompt_tokens;
    out->waiting = e->n_queued;
    pthread_mutex_unlock(&e->mu);
}

// ================================================================ the step

// Phase 1: the requests and cancellations other threads queued since the last step.
static void intake(struct lm_engine *e) {
    pthread_mutex_lock(&e->mu);
    struct lm_req *in = e->inbox_head;
    e->inbox_head = e->inbox_tail = NULL;
    uint64_t cancels[64];
    const int32_t nc = e->n_cancels < 64 ? e->n_cancels : 64; // the rest next step
    if (nc > 0) {
        memcpy(cancels, e->cancels, (size_t)nc * sizeof *cancels);
        memmove(e->cancels, e->cancels + nc, (size_t)(e->n_cancels - nc) * sizeof *cancels);
        e->n_cancels -= nc;
    }
    pthread_mutex_unlock(&e->mu);
    while (in) {
        struct lm_req *n = in->next;
        lm_req_wait_push(e, in, false);
        in = n;
    }
    for (int32_t i = 0; i < nc; i++) {
        struct lm_req *r = NULL;
        for (int32_t s = 0; s < e->p.max_running && !r; s++)
            if (e->running[s] && e->running[s]->id == cancels[i]) r = e->running[s];
        for (struct lm_req *w = e->wait_head; w && !r; w = w->next)
            if (w->id == cancels[i]) r = w;
        if (!r) continue; // finished already
        if (r->seq < 0) lm_req_unqueue(e, r);
        lm_req_finish(e, r, LM_FINISH_CANCELLED, -1, NULL, NULL);
    }
}

// What a planned batch holds, for the stats and the profiler.
struct step_info {
    int32_t n, n_decode, n_drafts, index;
    enum lm_prof_phase phase; // prefill when the step holds prefill tokens, else decode
    uint64_t forward_ns;
};

static struct step_info count_step(struct lm_engine *e, int32_t n) {
    struct step_info k = {.n = n};
    for (int32_t i = 0; i < n; i++) {
        const struct lm_req *r = e->batch_req[i];
        const bool decoding = r->n_kv == r->n_toks - 1;
        k.n_decode += decoding && e->batch[i].pos == r->n_kv;
        k.n_drafts += decoding && e->batch[i].pos > r->n_kv;
    }
    e->st.steps++;
    e->st.last_step_tokens = n;
    e->st.last_step_decode = k.n_decode;
    e->st.prefilled_tokens += (uint64_t)(n - k.n_decode - k.n_drafts);
    k.index = (int32_t)(e->st.steps - 1); // the ops carry it in a trace
    k.phase = k.n_decode + k.n_drafts == n ? LM_PHASE_DECODE : LM_PHASE_PREFILL;
    return k;
}

// Phase 5: the model's forward pass over the batch. The LM head selects as many best logits
// as the step's most demanding sampler needs. Feeds the cost model that prices drafts.
static enum lm_status forward(struct lm_engine *e, struct step_info *k) {
    const bool prof = lm_prof_on();
    const uint64_t tp = prof ? lm_prof_phase_begin(k->phase) : 0;
    int32_t top_k = 0;
    for (int32_t i = 0; i < k->n; i++)
        if (e->batch[i].want_logits && e->batch_req[i]->top_ask > top_k)
            top_k = e->batch_req[i]->top_ask;
    if (lm_context_set_top_k(e->c, top_k) != LM_OK) lm_context_set_top_k(e->c, 0); // full rows
    const uint64_t t0 = lm_now_ns();
    const enum lm_status st = lm_decode(e->c, e->batch, k->n);
    if (prof) lm_prof_phase(k->phase, tp, lm_prof_ticks(), k->index, k->n);
    if (st != LM_OK) return st;
    k->forward_ns = lm_now_ns() - t0;
    e->st.forward_ns += k->forward_ns;
    struct lm_spec_cost *cost = &e->spec.cost;
    if (k->phase == LM_PHASE_DECODE) lm_spec_cost_observe(cost, k->n_decode, k->n, k->forward_ns);
    if (k->n_drafts) { // the same step without its drafts would have taken (the cost model's ratio)
        const double with = lm_spec_cost_est(cost, k->n_decode, k->n_decode + k->n_drafts);
        e->st.verify_steps++;
        e->st.verify_ns += k->forward_ns;
        const double plain = lm_spec_cost_est(cost, k->n_decode, k->n_decode);
        if (with > 0) e->st.verify_plain_ns += (uint64_t)((double)k->forward_ns * plain / with);
    }
    return LM_OK;
}

// A failed forward pass (not expected: the blocks were counted) fails the batch's requests.
static int32_t fail_step(struct lm_engine *e, int32_t n, enum lm_status st) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s", lm_error_msg());
    for (int32_t i = 0, j; i < n; i = j) { // each request's entries are contiguous
        struct lm_req *r = e->batch_req[i];
        for (j = i + 1; j < n && e->batch_req[j] == r; j++) {}
        lm_req_finish(e, r, LM_FINISH_ERROR, -1, NULL, msg);
    }
    lm_error_set(st, "%s", msg);
    return -1;
}

// Sequences in the batch: a request's entries are contiguous, so count the runs.
static int32_t batch_seqs(const struct lm_engine *e, int32_t n) {
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) k += i == 0 || e->batch_req[i] != e->batch_req[i - 1];
    return k;
}

// Phase 6: sampling and delivery, timed; the step's span when profiling.
static void deliver(struct lm_engine *e, const struct step_info *k, uint64_t t_step) {
    const bool prof = lm_prof_on();
    const int32_t n_seqs = prof ? batch_seqs(e, k->n) : 0; // before delivery finishes any
    const uint64_t acc0 = e->st.accepted_tokens;
    const uint64_t tp = prof ? lm_prof_phase_begin(LM_PHASE_SAMPLE) : 0;
    const uint64_t t0 = lm_now_ns();
    const int32_t rows = lm_deliver_step(e, k->n, t0);
    e->st.sample_ns += lm_now_ns() - t0;
    if (prof) {
        const uint64_t t_end = lm_prof_ticks();
        lm_prof_phase(LM_PHASE_SAMPLE, tp, t_end, k->index, rows);
        const struct lm_prof_step ps = {.step = k->index, .n_tokens = k->n, .n_decode = k->n_decode,
                                        .n_seqs = n_seqs, .n_draft = k->n_drafts,
                                        .n_accepted = (int32_t)(e->st.accepted_tokens - acc0)};
        lm_prof_step(&ps, t_step, t_end);
    }
}

static void publish(struct lm_engine *e) {
    pthread_mutex_lock(&e->mu);
    const uint64_t sub = e->snap.submitted, busy = e->snap.refused_busy, pt = e->snap.prompt_tokens;
    e->snap = e->st;
    e->snap.submitted = sub;
    e->snap.refused_busy = busy;
    e->snap.prompt_tokens = pt;
    e->snap.running = e->n_running;
    lm_kv_cache_stats(e->c, &e->snap.kv);
    pthread_mutex_unlock(&e->mu);
}

int32_t lm_engine_step(struct lm_engine *e) {
    const uint64_t t_step = lm_prof_on() ? lm_prof_ticks() : 0; // the step's span
    intake(e);                           // 1. new requests and cancellations
    lm_sched_admit(e);                   // 2. queued requests into free sequences
    struct lm_step s = lm_sched_plan(e); // 3. the batch: decode tokens, drafts, prefill chunks
    if (s.n > 0 && e->spec.draft_ctx)    // 4. the draft model's forward passes draw its drafts
        s.n = lm_spec_model_draft(e, s.n, &s.free_blocks);
    if (s.n > 0) {
        struct step_info k = count_step(e, s.n);
        lm_mask_worker_begin(e, s.n);    //    grammar masks on the worker, beside:
        const enum lm_status st = forward(e, &k); // 5. the model's forward pass
        lm_mask_worker_wait(e);
        if (st != LM_OK) {
            const int32_t ret = fail_step(e, s.n, st);
            publish(e);
            return ret;
        }
        deliver(e, &k, t_step);          // 6. sampling, verification of drafts, events
    }
    publish(e);
    return e->n_running + e->n_waiting;
}

// ================================================================ engine thread

static void *engine_main(void *arg) {
    struct lm_engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->stop && !e->inbox_head && e->n_cancels == 0 && e->n_running + e->n_waiting == 0)
            pthread_cond_wait(&e->cv, &e->mu);
        const bool stop = e->stop;
        pthread_mutex_unlock(&e->mu);
        if (stop) break;
        lm_engine_step(e);
    }
    return NULL;
}

enum lm_status lm_engine_start(struct lm_engine *e) {
    if (e->started) return lm_error_set(LM_ERR_STATE, "engine: already started");
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0)
        return lm_error_set(LM_ERR_NOMEM, "engine: cannot start the engine thread");
    e->started = true;
    return LM_OK;
}
