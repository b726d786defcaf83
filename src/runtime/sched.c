// Engine (lumen.h lm_engine_*): the scheduler loop over one context. Queue, admission
// under the KV pool's capacity with prefix-cache reuse, one step = a decode token for
// every running request + prefill chunks of the others under a token budget,
// cancellation, preemption by recompute, sampling and token delivery with timestamps,
// speculative decoding (prompt-lookup or draft-model drafts verified in the step's forward
// pass; the draft model runs on the same thread pool and KV pool).
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "base/timer.h"
#include "runtime/runtime.h"
#include "runtime/spec.h"
#include "sample/sample_internal.h"
#include "tokenizer/tokenizer.h"

// ================================================================ types

static atomic_uint_fast64_t g_next_id = 1;

struct req {
    uint64_t id;
    struct req *next, *prev;   // inbox (next only) or waiting list
    int32_t *toks;             // prompt + generated so far
    int32_t n_toks, cap_toks;
    int32_t n_prompt, n_gen, max_gen;
    int32_t n_kv;              // positions of toks held in the KV (the sequence's next position)
    int32_t seq;               // sequence while running, else -1
    int32_t n_cached;          // prompt tokens the prefix cache supplied at first admission
    bool admitted_once;
    struct lm_request_params rp;
    int32_t *bias_tok;
    float *bias_val;
    struct lm_sampler *smp;
    int32_t top_need;          // best logits the chain draws from (lm_sampler_top_k_need; 0:
                               // it needs the full row: also with logit bias or logprobs)
    lm_event_fn cb;
    void *user;
    uint64_t t_submit, t_admit, admit_order;
    // speculative decoding (rp.lookup): this step's drafts (after its decode entry)
    int32_t draft[LM_DRAFT_MAX_LIMIT];
    int32_t n_draft;
    struct lm_spec_acc sacc;
    // draft model (rp.use_draft): the draft sequence (seq + max_running in the pool) holds
    // toks[0, n_dkv), never past n_kv after a verification
    bool mdraft;               // this step's drafts are the draft model's (drafted after
                               // build_batch placed them: run_model_drafts)
    int32_t n_dkv;
    int32_t bidx;              // this step: index of its decode entry in e->batch
    int32_t vj;                // the drafted position deliver() verifies
    uint64_t drng[4];          // draws drafts from q (the sampler's own RNG stays untouched)
    struct lm_token_prob *dq;  // sampling: [draft_max][dq_cap] q of each drafted position
    int32_t dq_cap, dq_n[LM_DRAFT_MAX_LIMIT];
};

struct lm_engine {
    struct lm_model *m;
    struct lm_context *c;
    struct lm_engine_params p;
    int32_t n_vocab;

    // ---- shared with other threads, under mu
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct req *inbox_head, *inbox_tail;
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
    struct req *wait_head, *wait_tail;
    int32_t n_waiting;
    struct req **running;      // [max_running] by sequence id
    int32_t n_running;
    uint64_t admit_counter;
    struct lm_batch_entry *batch; // [step_tokens]
    struct req **batch_req;       // [step_tokens] request of each entry
    struct req **order;           // [max_running] scratch: running requests by admission
    float *biased;                // [n_vocab] logits with a request's logit bias
    int32_t top_tok[LM_MAX_TOP_LOGPROBS];
    float top_lp[LM_MAX_TOP_LOGPROBS];
    struct lm_engine_stats st;    // counters (published into snap after each step)
    struct lm_spec_cost cost;     // decode steps' forward ns by sequences and tokens (drafts that pay)
    int32_t draft_rows;           // logits rows beyond max_running, for drafts
    // draft model (p.draft_model): its context on c's KV pool and thread pool
    struct lm_context *dc;
    struct lm_batch_entry *dbatch; // [dc->n_batch]
    struct req **dbatch_req;       // [dc->n_batch]
    double dtok_ns;                // draft forward ns per sequence of a drafting round (one
                                   // position each: the price of a drafted token; 0: unknown)
    float *qdense;                 // [n_vocab] zeros; a drafted position's q during verification
};

// Logits rows for drafted tokens, beyond one per running request: bounds a step's drafts
// (and the logits buffer: a row is n_vocab floats, 1 MiB for Gemma 3).
#define LM_ENGINE_DRAFT_ROWS 32

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
    struct lm_request_params rp = {.sampling = lm_sampler_params_default()};
    return rp;
}

// ================================================================ requests

static void req_free(struct req *r) {
    if (!r) return;
    free(r->dq);
    lm_sampler_free(r->smp);
    free(r->toks);
    free(r->bias_tok);
    free(r->bias_val);
    free(r);
}

// Ends r: frees its sequence, delivers its last event (with token tok, or -1), frees it.
static void req_finish(struct lm_engine *e, struct req *r, enum lm_finish why, int32_t tok,
                       const struct lm_event *tmpl, const char *error) {
    if (r->seq >= 0) {
        lm_kv_seq_rm(e->c->kv, r->seq, 0, -1); // full blocks stay cached for later prompts
        if (e->dc) lm_kv_seq_rm(e->c->kv, r->seq + e->p.max_running, 0, -1);
        e->running[r->seq] = NULL;
        e->n_running--;
        r->seq = -1;
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

static void wait_unlink(struct lm_engine *e, struct req *r) {
    if (r->prev) r->prev->next = r->next;
    else e->wait_head = r->next;
    if (r->next) r->next->prev = r->prev;
    else e->wait_tail = r->prev;
    r->next = r->prev = NULL;
    e->n_waiting--;
}

static void wait_push(struct lm_engine *e, struct req *r, bool front) {
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

// ================================================================ init / free

enum lm_status lm_engine_init(struct lm_engine **out, struct lm_model *m,
                              const struct lm_engine_params *params) {
    *out = NULL;
    struct lm_engine_params p = {0};
    if (params) p = *params;
    if (p.max_running <= 0) p.max_running = 8;
    if (p.max_waiting <= 0) p.max_waiting = 64;
    if (p.step_tokens <= 0) p.step_tokens = 256;
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
                                   .n_logits_max = p.max_running + LM_ENGINE_DRAFT_ROWS};
    enum lm_status st = p.draft_model ? lm_spec_vocab_check(m, p.draft_model) : LM_OK;
    if (st == LM_OK) st = p.draft_model ? lm_context_init_pair(&e->c, m, &cp, p.draft_model)
                                        : lm_context_init(&e->c, m, &cp);
    if (st != LM_OK) {
        free(e);
        return st;
    }
    p.n_ctx = e->c->n_ctx;
    p.kv_tokens = e->c->kv->n_blocks / e->c->kv->n_layouts * LM_KV_BLOCK; // the target's share
    if (p.draft_model) { // catch-ups and drafts of every running request beside a step's prefill
        const int32_t nb = p.step_tokens + 2 * p.max_running;
        struct lm_context_params dp = {.n_batch = nb > 8192 ? 8192 : nb, .n_logits_max = p.max_running};
        st = lm_context_init_draft(&e->dc, e->c, p.draft_model, &dp);
        if (st == LM_OK) {
            e->dbatch = calloc((size_t)e->dc->n_batch, sizeof *e->dbatch);
            e->dbatch_req = calloc((size_t)e->dc->n_batch, sizeof *e->dbatch_req);
            e->qdense = calloc((size_t)lm_model_n_vocab(m), sizeof *e->qdense);
            if (!e->dbatch || !e->dbatch_req || !e->qdense)
                st = lm_error_set(LM_ERR_NOMEM, "engine: out of memory");
        }
        if (st != LM_OK) {
            lm_engine_free(e);
            return st;
        }
    }
    p.n_threads = e->c->n_threads;
    e->m = m;
    e->p = p;
    e->draft_rows = e->c->n_logits_max - p.max_running; // n_logits_max is capped at step_tokens
    e->n_vocab = lm_model_n_vocab(m);
    e->running = calloc((size_t)p.max_running, sizeof *e->running);
    e->order = calloc((size_t)p.max_running, sizeof *e->order);
    e->batch = calloc((size_t)p.step_tokens, sizeof *e->batch);
    e->batch_req = calloc((size_t)p.step_tokens, sizeof *e->batch_req);
    e->biased = malloc((size_t)e->n_vocab * sizeof *e->biased);
    if (!e->running || !e->order || !e->batch || !e->batch_req || !e->biased ||
        !lm_spec_cost_init(&e->cost, p.step_tokens, p.max_running < 64 ? p.max_running : 64)) {
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
    if (e->running) { // everything left ends as cancelled, on this thread
        struct req *r = e->inbox_head;
        while (r) {
            struct req *n = r->next;
            req_finish(e, r, LM_FINISH_CANCELLED, -1, NULL, NULL);
            r = n;
        }
        while (e->wait_head) {
            r = e->wait_head;
            wait_unlink(e, r);
            req_finish(e, r, LM_FINISH_CANCELLED, -1, NULL, NULL);
        }
        for (int32_t s = 0; s < e->p.max_running; s++)
            if (e->running[s]) req_finish(e, e->running[s], LM_FINISH_CANCELLED, -1, NULL, NULL);
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->cv);
    }
    lm_context_free(e->dc); // borrows c's pools: first
    lm_context_free(e->c);
    free(e->dbatch);
    free(e->dbatch_req);
    free(e->qdense);
    free(e->running);
    free(e->order);
    free(e->batch);
    free(e->batch_req);
    free(e->biased);
    free(e->cancels);
    lm_spec_cost_free(&e->cost);
    free(e);
}

struct lm_context *lm_engine_context(struct lm_engine *e) { return e->c; }

// ================================================================ thread-safe entry points

enum lm_status lm_engine_submit(struct lm_engine *e, const int32_t *prompt, int32_t n_prompt,
                                const struct lm_request_params *rp_in, lm_event_fn cb, void *user,
                                uint64_t *id) {
    struct lm_request_params rp = rp_in ? *rp_in : lm_request_params_default();
    if (n_prompt <= 0 || !prompt) return lm_error_set(LM_ERR_ARG, "engine: empty prompt");
    for (int32_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= e->n_vocab)
            return lm_error_set(LM_ERR_ARG, "engine: prompt token %d at index %d is out of range "
                                "[0, %d)", prompt[i], i, e->n_vocab);
    if (rp.max_tokens < 0) return lm_error_set(LM_ERR_ARG, "engine: max_tokens %d < 0", rp.max_tokens);
    const int64_t total = (int64_t)n_prompt + (rp.max_tokens > 0 ? rp.max_tokens : 1);
    if (n_prompt >= e->p.n_ctx || total > e->p.n_ctx)
        return lm_error_set(LM_ERR_ARG, "engine: prompt of %d tokens + max_tokens %d exceeds the "
                            "context of %d tokens", n_prompt, rp.max_tokens, e->p.n_ctx);
    if (total > e->p.kv_tokens)
        return lm_error_set(LM_ERR_ARG, "engine: prompt of %d tokens + max_tokens %d exceeds the "
                            "KV pool of %d tokens", n_prompt, rp.max_tokens, e->p.kv_tokens);
    if (rp.n_logprobs < 0 || rp.n_logprobs > LM_MAX_TOP_LOGPROBS + 1)
        return lm_error_set(LM_ERR_ARG, "engine: n_logprobs %d out of range [0, %d]",
                            rp.n_logprobs, LM_MAX_TOP_LOGPROBS + 1);
    if (rp.n_bias < 0 || (rp.n_bias > 0 && (!rp.bias_tokens || !rp.bias_values)))
        return lm_error_set(LM_ERR_ARG, "engine: logit bias of %d entries without arrays", rp.n_bias);
    for (int32_t i = 0; i < rp.n_bias; i++)
        if (rp.bias_tokens[i] < 0 || rp.bias_tokens[i] >= e->n_vocab || !isfinite(rp.bias_values[i]))
            if (!(rp.bias_tokens[i] >= 0 && rp.bias_tokens[i] < e->n_vocab &&
                  rp.bias_values[i] == -INFINITY))
                return lm_error_set(LM_ERR_ARG, "engine: logit bias entry %d: token %d, value %g "
                                    "(tokens in [0, %d), finite values or -inf)", i,
                                    rp.bias_tokens[i], rp.bias_values[i], e->n_vocab);
    if (rp.draft_max < 0 || rp.draft_max > LM_DRAFT_MAX_LIMIT)
        return lm_error_set(LM_ERR_ARG, "engine: draft_max %d out of range [0, %d]", rp.draft_max,
                            LM_DRAFT_MAX_LIMIT);
    if (rp.use_draft && !e->dc)
        return lm_error_set(LM_ERR_ARG, "engine: the request asks for draft-model drafting, the "
                            "engine has no draft model");
    if (rp.use_draft) rp.lookup = false; // the draft model drafts
    if ((rp.lookup || rp.use_draft) && rp.draft_max == 0) rp.draft_max = LM_DRAFT_MAX_DEFAULT;
    struct req *r = calloc(1, sizeof *r);
    if (!r) return lm_error_set(LM_ERR_NOMEM, "engine: out of memory");
    lm_spec_acc_init(&r->sacc);
    enum lm_status st = lm_sampler_init(&r->smp, &rp.sampling, e->n_vocab);
    if (st != LM_OK) {
        free(r);
        return st;
    }
    r->cap_toks = rp.max_tokens > 0 ? n_prompt + rp.max_tokens : e->p.n_ctx;
    r->toks = malloc((size_t)r->cap_toks * sizeof *r->toks);
    if (rp.use_draft && rp.sampling.temperature > 0.0f) { // q of each drafted position
        const int32_t k = rp.sampling.top_k;
        r->dq_cap = k > 0 && k < e->n_vocab ? k : e->n_vocab;
        r->dq = malloc((size_t)rp.draft_max * (size_t)r->dq_cap * sizeof *r->dq);
        if (!r->dq) {
            req_free(r);
            return lm_error_set(LM_ERR_NOMEM, "engine: out of memory");
        }
    }
    lm_sampler_rng_seed(r->drng, rp.sampling.seed ^ 0x6472616674ull); // seed ^ ASCII draft
    if (rp.n_bias) {
        r->bias_tok = malloc((size_t)rp.n_bias * sizeof *r->bias_tok);
        r->bias_val = malloc((size_t)rp.n_bias * sizeof *r->bias_val);
    }
    if (!r->toks || (rp.n_bias && (!r->bias_tok || !r->bias_val))) {
        req_free(r);
        return lm_error_set(LM_ERR_NOMEM, "engine: out of memory");
    }
    memcpy(r->toks, prompt, (size_t)n_prompt * sizeof *prompt);
    if (rp.n_bias) {
        memcpy(r->bias_tok, rp.bias_tokens, (size_t)rp.n_bias * sizeof *r->bias_tok);
        memcpy(r->bias_val, rp.bias_values, (size_t)rp.n_bias * sizeof *r->bias_val);
    }
    rp.bias_tokens = NULL;
    rp.bias_values = NULL;
    r->rp = rp;
    r->n_toks = r->n_prompt = n_prompt;
    r->max_gen = rp.max_tokens > 0 ? rp.max_tokens : INT32_MAX; // else the context ends it
    r->seq = -1;
    r->cb = cb;
    r->user = user;
    r->t_submit = lm_now_ns();
    for (int32_t i = 0; i < n_prompt; i++) lm_sampler_accept(r->smp, prompt[i]);
    r->top_need = rp.n_bias == 0 && rp.n_logprobs == 0 ? lm_sampler_top_k_need(r->smp) : 0;

    pthread_mutex_lock(&e->mu);
    if (e->n_queued + e->n_run_pub >= e->p.max_waiting + e->p.max_running) {
        e->st.refused_busy++; // counted on the stepping thread's copy under the same lock
        pthread_mutex_unlock(&e->mu);
        req_free(r);
        return lm_error_set(LM_ERR_BUSY, "engine: the queue is full (%d requests waiting)",
                            e->p.max_waiting);
    }
    r->id = atomic_fetch_add(&g_next_id, 1); // unique in the process, across engines
    if (e->inbox_tail) e->inbox_tail->next = r;
    else e->inbox_head = r;
    e->inbox_tail = r;
    e->n_queued++;
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

// ================================================================ one step

// Frees r's sequence and puts it back at the head of the queue; its tokens so far are
// recomputed when it is admitted again (same results: batch invariance).
static void preempt(struct lm_engine *e, struct req *r) {
    lm_kv_seq_rm(e->c->kv, r->seq, 0, -1);
    if (e->dc) lm_kv_seq_rm(e->c->kv, r->seq + e->p.max_running, 0, -1);
    r->n_dkv = 0;
    e->running[r->seq] = NULL;
    e->n_running--;
    r->seq = -1;
    r->n_kv = 0;
    wait_push(e, r, true);
    pthread_mutex_lock(&e->mu);
    e->n_queued++;
    e->n_run_pub--;
    pthread_mutex_unlock(&e->mu);
    e->st.preempted++;
}

static struct req *newest_running(struct lm_engine *e) {
    struct req *v = NULL;
    for (int32_t s = 0; s < e->p.max_running; s++)
        if (e->running[s] && (!v || e->running[s]->admit_order > v->admit_order)) v = e->running[s];
    return v;
}

// Admits queued requests in order while a sequence is free and the pool has the blocks
// for the whole prompt beyond its cached prefix, plus one block of headroom per running
// request (their decode growth); otherwise the queue waits.
static void admit(struct lm_engine *e) {
    struct lm_kv_cache *kv = e->c->kv;
    while (e->wait_head && e->n_running < e->p.max_running) {
        struct req *r = e->wait_head;
        int32_t seq = 0;
        while (e->running[seq]) seq++;
        // blocks beyond the cached prefix (which stops being evictable once attached)
        const int32_t n_hit = lm_kv_prefix_probe(kv, 0, r->toks, r->n_toks);
        int32_t need = (r->n_toks - n_hit + LM_KV_BLOCK - 1) / LM_KV_BLOCK + n_hit / LM_KV_BLOCK;
        if (r->rp.use_draft) { // the draft sequence's blocks for the same tokens
            const int32_t d_hit = lm_kv_prefix_probe(kv, 1, r->toks, r->n_toks);
            need += (r->n_toks - d_hit + LM_KV_BLOCK - 1) / LM_KV_BLOCK + d_hit / LM_KV_BLOCK;
        }
        if (need + e->n_running > lm_kv_blocks_available(kv) && e->n_running > 0) break;
        int32_t n_att = 0;
        if (lm_kv_prefix_attach(kv, seq, r->toks, r->n_toks, &n_att) != LM_OK) n_att = 0;
        wait_unlink(e, r);
        pthread_mutex_lock(&e->mu);
        e->n_queued--;
        e->n_run_pub++;
        pthread_mutex_unlock(&e->mu);
        r->seq = seq;
        r->n_kv = n_att;
        r->n_dkv = 0;
        if (r->rp.use_draft &&
            lm_kv_prefix_attach(kv, seq + e->p.max_running, r->toks, r->n_toks, &r->n_dkv) != LM_OK)
            r->n_dkv = 0;
        if (!r->admitted_once) {
            r->admitted_once = true;
            r->n_cached = n_att;
            r->t_admit = lm_now_ns();
        }
        r->admit_order = ++e->admit_counter;
        e->running[seq] = r;
        e->n_running++;
    }
}

// The largest n <= want whose blocks fit in avail.
static int32_t fit_chunk(const struct lm_kv_cache *kv, int32_t seq, int32_t want, int32_t avail) {
    if (lm_kv_blocks_needed(kv, seq, want) <= avail) return want;
    int32_t lo = 0, hi = want; // needed(lo) fits, needed(hi) does not
    while (hi - lo > 1) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (lm_kv_blocks_needed(kv, seq, mid) <= avail) lo = mid;
        else hi = mid;
    }
    return lo;
}

// Drafts for the n decode entries of e->batch (lookup requests), in the budget left after
// them: each request's draft length is the one lm_spec_choose finds best for the product
// of the running requests' token rates (alone: the most tokens per measured ns; among
// several, a draft must repay the slowdown of everybody's step), so a draft is only added
// when it pays against the same step without it. Inserts each request's drafts after its decode entry; returns the
// new entry count and takes their blocks from *avail.
static int32_t add_drafts(struct lm_engine *e, int32_t n, int32_t *avail) {
    struct lm_kv_cache *kv = e->c->kv;
    int32_t rows = e->draft_rows, n_tot = n;
    for (int32_t i = 0; i < n; i++) {
        struct req *r = e->batch_req[i];
        r->n_draft = 0;
        if (!r->rp.lookup) continue;
        int32_t room = e->p.step_tokens - n_tot;
        if (room > rows) room = rows;
        if (room > r->rp.draft_max) room = r->rp.draft_max;
        if (room > e->p.n_ctx - r->n_toks) room = e->p.n_ctx - r->n_toks; // positions < n_ctx
        if ((int64_t)room > (int64_t)r->max_gen - r->n_gen - 1) room = r->max_gen - r->n_gen - 1;
        if (room <= 0) continue;
        int32_t nd = lm_spec_lookup(r->toks, r->n_toks, room, r->draft);
        const int32_t b1 = lm_kv_blocks_needed(kv, r->seq, 1);
        while (nd > 0 && lm_kv_blocks_needed(kv, r->seq, 1 + nd) - b1 > *avail) nd--;
        if (nd == 0) continue;
        double gain = 0.0;
        const int32_t k = lm_spec_choose(&e->cost, lm_spec_acc_rate(&r->sacc), n, n_tot,
                                         e->n_running, nd, &gain);
        if (k == 0) { // does not pay now: drafting pauses, the estimate drifts back
            lm_spec_acc_idle(&r->sacc);
            continue;
        }
        *avail -= lm_kv_blocks_needed(kv, r->seq, 1 + k) - b1;
        r->n_draft = k;
        rows -= k;
        n_tot += k;
    }
    // spread: each request's drafts right after its decode entry (positions pos+1..pos+k)
    for (int32_t i = n - 1, w = n_tot - 1; i >= 0; i--) {
        struct req *r = e->batch_req[i];
        const struct lm_batch_entry d = e->batch[i];
        for (int32_t j = r->n_draft - 1; j >= 0; j--) {
            e->batch[w] = (struct lm_batch_entry){r->draft[j], d.pos + 1 + j, d.seq, true};
            e->batch_req[w--] = r;
        }
        e->batch[w] = d;
        e->batch_req[w--] = r;
    }
    return n_tot;
}

// ================================================================ draft model

// Drafts of the draft model for the decode entries [0, n) of e->batch whose requests ask
// for it (rp.use_draft), in the budget left after the decode tokens and lookup drafts:
// each request's length is the one lm_spec_choose_drafter finds best for the product of
// the running requests' rates (as lookup drafts), a drafted token priced at its row in the
// step plus a draft forward of one position (measured, e->dtok_ns),
// and only if the draft sequence can catch up in the draft's batch. Places k entries after
// the request's decode entry with their tokens still to draw (run_model_drafts) and takes
// both sequences' blocks from *avail. Returns the new entry count.
static int32_t plan_model_drafts(struct lm_engine *e, int32_t n, int32_t *avail) {
    if (!e->dc) return n;
    struct lm_kv_cache *kv = e->c->kv;
    int32_t n_dec = 0;
    for (int32_t i = 0; i < n; i++) n_dec += e->batch[i].pos == e->batch_req[i]->n_kv;
    int32_t rows = e->draft_rows - (n - n_dec), n_tot = n, d_room = e->dc->n_batch;
    double extra_ns = 0.0;
    const double d1 = e->dtok_ns; // 0 until measured: tried once
    for (int32_t i = 0; i < n; i++) {
        struct req *r = e->batch_req[i];
        if (!r->rp.use_draft || e->batch[i].pos != r->n_kv) continue;
        const int32_t ds = r->seq + e->p.max_running, catchup = r->n_toks - r->n_dkv;
        int32_t room = e->p.step_tokens - n_tot;
        if (room > rows) room = rows;
        if (room > r->rp.draft_max) room = r->rp.draft_max;
        if (room > e->p.n_ctx - r->n_toks) room = e->p.n_ctx - r->n_toks; // positions < n_ctx
        if ((int64_t)room > (int64_t)r->max_gen - r->n_gen - 1) room = r->max_gen - r->n_gen - 1;
        if (room <= 0 || catchup > d_room) continue;
        const int32_t b1 = lm_kv_blocks_needed(kv, r->seq, 1);
        int32_t nd = room;
        while (nd > 0 && lm_kv_blocks_needed(kv, r->seq, 1 + nd) - b1 +
                                 lm_kv_blocks_needed(kv, ds, catchup + nd - 1) > *avail)
            nd--;
        if (nd == 0) continue;
        double gain = 0.0;
        const int32_t k = r->rp.draft_fixed ? nd
                          : lm_spec_choose_drafter(&e->cost, lm_spec_acc_rate(&r->sacc), n_dec,
                                                   n_tot, e->n_running, extra_ns, d1, nd, &gain);
        if (k == 0) { // does not pay now: drafting pauses, the estimate drifts back
            lm_spec_acc_idle(&r->sacc);
            continue;
        }
        *avail -= lm_kv_blocks_needed(kv, r->seq, 1 + k) - b1 + lm_kv_blocks_needed(kv, ds, catchup + k - 1);
        r->n_draft = k;
        r->mdraft = true;
        rows -= k;
        n_tot += k;
        d_room -= catchup;
        extra_ns += k * d1;
    }
    if (n_tot == n) return n;
    for (int32_t i = n - 1, w = n_tot - 1; i >= 0; i--) { // placeholders after the decode entries
        struct req *r = e->batch_req[i];
        const struct lm_batch_entry d = e->batch[i];
        if (r->mdraft && d.pos == r->n_kv)
            for (int32_t j = r->n_draft - 1; j >= 0; j--) {
                e->batch[w] = (struct lm_batch_entry){-1, d.pos + 1 + j, d.seq, true};
                e->batch_req[w--] = r;
            }
        e->batch[w] = d;
        e->batch_req[w--] = r;
    }
    return n_tot;
}

// Removes the placeholders of requests whose drafts were not drawn (n_draft set to 0).
static int32_t drop_undrawn(struct lm_engine *e, int32_t n) {
    int32_t w = 0;
    for (int32_t i = 0; i < n; i++) {
        if (e->batch[i].token < 0) continue;
        e->batch[w] = e->batch[i];
        e->batch_req[w++] = e->batch_req[i];
    }
    for (int32_t i = 0; i < w; i++) // decode entries may have moved
        if (e->batch_req[i]->mdraft && e->batch[i].pos == e->batch_req[i]->n_kv) e->batch_req[i]->bidx = i;
    return w;
}

// One forward of the draft model over e->dbatch[0, nd); a forward of one position per
// sequence (a drafting round) prices a drafted token (e->dtok_ns).
static enum lm_status draft_forward(struct lm_engine *e, int32_t nd) {
    int32_t k_step = 0;
    for (int32_t i = 0; i < nd; i++)
        if (e->dbatch[i].want_logits && e->dbatch_req[i]->top_need > k_step) k_step = e->dbatch_req[i]->top_need;
    if (lm_context_set_top_k(e->dc, k_step) != LM_OK) lm_context_set_top_k(e->dc, 0);
    const bool prof = lm_prof_on(); // the draft's ops under their own phase, this step's index
    const uint64_t tp = prof ? lm_prof_phase_begin(LM_PHASE_DRAFT) : 0;
    const uint64_t t0 = lm_now_ns();
    const enum lm_status st = lm_decode(e->dc, e->dbatch, nd);
    const uint64_t dt = lm_now_ns() - t0;
    if (prof) lm_prof_phase(LM_PHASE_DRAFT, tp, lm_prof_ticks(), (int32_t)e->st.steps, nd);
    if (st != LM_OK) return st;
    int32_t n_rows = 0;
    for (int32_t i = 0; i < nd; i++) n_rows += e->dbatch[i].want_logits;
    if (n_rows == nd) // a moving average that follows the machine's load within a few steps
        e->dtok_ns = e->dtok_ns > 0 ? 0.7 * e->dtok_ns + 0.3 * (double)dt / nd : (double)dt / nd;
    e->st.draft_forwards++;
    e->st.draft_forward_ns += dt;
    for (int32_t i = 0; i < nd; i++) // sequences advance in order: the last entry of each counts
        e->dbatch_req[i]->n_dkv = e->dbatch[i].pos + 1;
    return LM_OK;
}

// The draft of r at its j-th drafted position from the draft's logits row `row`: drawn from
// q (the request's chain on the draft's logits, lm_sampler_draft), kept for verification.
static void draw_draft(struct lm_engine *e, struct req *r, int32_t row, int32_t j) {
    const struct lm_token_logit *top = NULL;
    const int32_t n_top = r->top_need > 0 ? lm_get_top_k(e->dc, row, &top) : 0;
    struct lm_token_prob one;
    struct lm_token_prob *q = r->dq ? r->dq + (size_t)j * r->dq_cap : &one;
    const int32_t d = lm_sampler_draft(r->smp, lm_get_logits(e->dc, row), top, n_top, r->drng, q,
                                       &r->dq_n[j]);
    r->draft[j] = d;
    e->batch[r->bidx + 1 + j].token = d;
}

// Runs the draft model for the step e->batch[0, n) that build_batch made: round 1 catches
// every draft sequence up (drafting requests: to their last token, with logits; requests
// prefilling: to the end of their chunk, as far as the draft's batch and *avail allow)
// and draws each drafting request's first draft; round j draws the j-th from the (j-1)-th,
// one position per drafting request, all in one forward. Fills the placeholders of
// plan_model_drafts; returns the entry count (placeholders dropped if drafting failed).
static int32_t run_model_drafts(struct lm_engine *e, int32_t n, int32_t *avail) {
    struct lm_kv_cache *kv = e->c->kv;
    int32_t nd = 0, k_max = 0;
    for (int32_t i = 0, j; i < n; i = j) {
        struct req *r = e->batch_req[i];
        for (j = i + 1; j < n && e->batch_req[j] == r; j++) {}
        if (!r->rp.use_draft) continue;
        const int32_t ds = r->seq + e->p.max_running;
        if (r->mdraft) { // decoding with drafts: up to toks[n_toks - 1], logits on it (counted in plan)
            r->bidx = i;
            for (int32_t p = r->n_dkv; p < r->n_toks; p++) {
                e->dbatch[nd] = (struct lm_batch_entry){r->toks[p], p, ds, p == r->n_toks - 1};
                e->dbatch_req[nd++] = r;
            }
            if (r->n_draft > k_max) k_max = r->n_draft;
        } else if (r->n_kv < r->n_toks - 1 || r->n_kv - r->n_dkv > e->dc->n_batch / 2) {
            // prefilling: the chunk's tokens as well; decoding without drafts but so far
            // behind (its prefill found no blocks) that a drafting step could not catch up:
            // a chunk of what it missed (a short lag waits for the next drafting step)
            int32_t end = r->n_kv < r->n_toks - 1 ? e->batch[j - 1].pos + 1 : r->n_kv;
            const int32_t room = e->dc->n_batch - nd;
            if (end - r->n_dkv > room) end = r->n_dkv + room;
            if (end <= r->n_dkv) continue;
            end = r->n_dkv + fit_chunk(kv, ds, end - r->n_dkv, *avail);
            *avail -= lm_kv_blocks_needed(kv, ds, end - r->n_dkv);
            for (int32_t p = r->n_dkv; p < end; p++) {
                e->dbatch[nd] = (struct lm_batch_entry){r->toks[p], p, ds, false};
                e->dbatch_req[nd++] = r;
            }
        }
    }
    if (nd == 0) return n;
    bool ok = draft_forward(e, nd) == LM_OK;
    int32_t row = 0;
    for (int32_t i = 0; ok && i < nd; i++)
        if (e->dbatch[i].want_logits) draw_draft(e, e->dbatch_req[i], row++, 0);
    for (int32_t j = 1; ok && j < k_max; j++) { // round j + 1: the j-th drafts in, the next out
        nd = 0;
        for (int32_t i = 0; i < n; i++) {
            struct req *r = e->batch_req[i];
            if (!r->mdraft || r->bidx != i || r->n_draft <= j) continue;
            e->dbatch[nd] = (struct lm_batch_entry){r->draft[j - 1], r->n_toks + j - 1,
                                                    r->seq + e->p.max_running, true};
            e->dbatch_req[nd++] = r;
        }
        ok = draft_forward(e, nd) == LM_OK;
        for (int32_t i = 0; ok && i < nd; i++) draw_draft(e, e->dbatch_req[i], i, j);
    }
    if (ok) return n;
    // not expected (blocks were counted): this step verifies no model drafts; the draft
    // sequences keep what they computed (a prefix of their tokens)
    for (int32_t i = 0; i < n; i++)
        if (e->batch_req[i]->mdraft && e->batch[i].pos > e->batch_req[i]->n_kv) e->batch[i].token = -1;
    n = drop_undrawn(e, n);
    for (int32_t i = 0; i < n; i++) {
        struct req *r = e->batch_req[i];
        if (!r->mdraft) continue;
        r->mdraft = false;
        r->n_draft = 0;
        if (r->n_dkv > r->n_toks) { // drafts it fed: not tokens of the request
            lm_kv_seq_rm(kv, r->seq + e->p.max_running, r->n_toks, -1);
            r->n_dkv = r->n_toks;
        }
    }
    return n;
}

// Fills e->batch: a decode token for every running request that is decoding, drafts of
// the lookup requests among them (add_drafts), then prefill chunks in admission order up to the token budget. Requests that do not fit
// the pool are preempted newest first. Returns the entry count.
static int32_t build_batch(struct lm_engine *e) {
    struct lm_kv_cache *kv = e->c->kv;
retry:;
    int32_t n = 0, avail = lm_kv_blocks_available(kv), no = 0;
    for (int32_t s = 0; s < e->p.max_running; s++)
        if (e->running[s]) {
            e->order[no++] = e->running[s];
            e->running[s]->n_draft = 0;
            e->running[s]->mdraft = false;
        }
    for (int32_t i = 1; i < no; i++) // by admission (insertion sort: a few requests)
        for (int32_t j = i; j > 0 && e->order[j - 1]->admit_order > e->order[j]->admit_order; j--) {
            struct req *t = e->order[j];
            e->order[j] = e->order[j - 1];
            e->order[j - 1] = t;
        }
    for (int32_t k = 0; k < no; k++) {
        struct req *r = e->order[k];
        if (r->n_kv != r->n_toks - 1) continue;
        const int32_t need = lm_kv_blocks_needed(kv, r->seq, 1);
        if (need > avail) {
            struct req *v = newest_running(e);
            if (v == r && e->n_running == 1) { // alone and out of blocks: its context ends
                req_finish(e, r, LM_FINISH_CONTEXT, -1, NULL, NULL);
            } else {
                preempt(e, v);
            }
            goto retry;
        }
        avail -= need;
        e->batch[n] = (struct lm_batch_entry){r->toks[r->n_kv], r->n_kv, r->seq, true};
        e->batch_req[n++] = r;
    }
    n = add_drafts(e, n, &avail);
    n = plan_model_drafts(e, n, &avail);
    for (int32_t k = 0; k < no && n < e->p.step_tokens; k++) {
        struct req *r = e->order[k];
        if (r->n_kv >= r->n_toks - 1) continue;
        int32_t want = r->n_toks - r->n_kv;
        if (want > e->p.step_tokens - n) want = e->p.step_tokens - n;
        const int32_t chunk = fit_chunk(kv, r->seq, want, avail);
        if (chunk == 0) continue;
        avail -= lm_kv_blocks_needed(kv, r->seq, chunk);
        for (int32_t i = 0; i < chunk; i++) {
            const int32_t pos = r->n_kv + i;
            e->batch[n] = (struct lm_batch_entry){r->toks[pos], pos, r->seq, pos == r->n_toks - 1};
            e->batch_req[n++] = r;
        }
    }
    if (n == 0 && e->n_running > 0) { // every running request waits for blocks
        struct req *v = newest_running(e);
        if (e->n_running == 1) req_finish(e, v, LM_FINISH_CONTEXT, -1, NULL, NULL);
        else preempt(e, v);
        goto retry;
    }
    if (e->dc) n = run_model_drafts(e, n, &avail);
    return n;
}

// log-softmax of the logits at tok, and the n most likely tokens with theirs
static float logprobs(struct lm_engine *e, const float *lg, int32_t tok, int32_t n) {
    const int32_t nv = e->n_vocab;
    float mx = lg[0];
    for (int32_t i = 1; i < nv; i++) mx = lg[i] > mx ? lg[i] : mx;
    double sum = 0.0;
    for (int32_t i = 0; i < nv; i++) sum += exp((double)(lg[i] - mx));
    const float lse = mx + (float)log(sum);
    int32_t k = 0; // top n by insertion, ties to the lower id
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

// Samples the next token of r from logits row `row` and delivers it; finishes r when done (and
// returns false: r is freed). draft >= 0: the token drafted at this position (*accepted: the
// delivered token is the draft). Point-mass drafts (prompt lookup; a draft model's greedy
// argmax), for which the acceptance rule (lm_sampler_verify: accept with probability
// p(draft), else draw from p without it) is exactly one plain draw x ~ p compared with the
// draft, so a draft position samples as a plain one does. A draft model's sampled draft
// came from its q (r->dq): accept with probability min(1, p/q), else draw from max(0, p - q). A chain that needs only the best logits draws from the LM
// head's selection of the row (the same token as from the full row, lm_sampler_sample_top_k).
static bool deliver(struct lm_engine *e, struct req *r, int32_t row, uint64_t t, int32_t draft,
                    bool *accepted) {
    const float *lg = lm_get_logits(e->c, row);
    const struct lm_token_logit *top = NULL;
    const int32_t n_top = r->top_need > 0 ? lm_get_top_k(e->c, row, &top) : 0;
    if (r->rp.n_bias > 0) {
        memcpy(e->biased, lg, (size_t)e->n_vocab * sizeof *lg);
        for (int32_t i = 0; i < r->rp.n_bias; i++) e->biased[r->bias_tok[i]] += r->bias_val[i];
        lg = e->biased;
    }
    int32_t tok;
    if (draft >= 0 && r->mdraft && r->dq) { // a draft model's draft, sampled from its q
        const struct lm_token_prob *q = r->dq + (size_t)r->vj * r->dq_cap;
        const int32_t nq = r->dq_n[r->vj];
        for (int32_t i = 0; i < nq; i++) e->qdense[q[i].id] = q[i].p;
        bool acc = false;
        tok = lm_sampler_verify(r->smp, lg, draft, e->qdense, &acc);
        for (int32_t i = 0; i < nq; i++) e->qdense[q[i].id] = 0.0f;
    } else { // plain, or a point-mass draft (lookup; a draft model's greedy draft)
        tok = n_top >= r->top_need && n_top > 0 ? lm_sampler_sample_top_k(r->smp, top, n_top)
                                                : lm_sampler_sample(r->smp, lg);
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
    else if (r->n_gen >= r->max_gen) why = LM_FINISH_LENGTH;
    else if (r->n_toks >= e->p.n_ctx) why = LM_FINISH_CONTEXT;
    if (why != LM_FINISH_NONE) {
        req_finish(e, r, why, tok, &ev, NULL);
        return false;
    }
    if (r->cb) r->cb(r->user, &ev);
    return true;
}

// The results of r's entries [i, j) of the batch from logits row *k on: a prefill chunk
// (a token if it ends the prompt), a decode token, or a decode token and its drafts: each
// position is verified in order until one is rejected (that position's token is the
// target's own) and the rejected drafts' positions are rolled back.
static void deliver_group(struct lm_engine *e, struct req *r, int32_t i, int32_t j, int32_t *k,
                          uint64_t t) {
    r->n_kv = e->batch[j - 1].pos + 1;
    if (!e->batch[j - 1].want_logits) return; // a prefill chunk short of the prompt's end
    const int32_t nd = r->n_draft, seq = r->seq, pos0 = e->batch[i].pos, row = *k;
    *k += nd + 1;
    if (nd == 0) {
        deliver(e, r, row, t, -1, NULL);
        return;
    }
    int32_t acc = 0;
    bool alive = true, ok = true;
    while (alive && ok) { // the draft at position pos0+1+acc, or the bonus token after all nd
        const int32_t d = acc < nd ? r->draft[acc] : -1;
        r->vj = acc;
        alive = deliver(e, r, row + acc, t, d, &ok);
        if (ok) acc++;
    }
    e->st.drafted_tokens += (uint64_t)nd;
    e->st.accepted_tokens += (uint64_t)acc;
    if (!alive) return; // finished: its sequence is freed already
    lm_spec_acc_update(&r->sacc, nd, acc);
    r->n_draft = 0;
    r->n_kv = pos0 + 1 + acc; // the accepted drafts' K/V stay; the rest is rolled back
    if (acc < nd) lm_kv_seq_rm(e->c->kv, seq, r->n_kv, -1);
    if (r->n_dkv > r->n_kv) { // the draft sequence: its drafts past the accepted ones
        lm_kv_seq_rm(e->c->kv, seq + e->p.max_running, r->n_kv, -1);
        r->n_dkv = r->n_kv;
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

// Sequences in the batch: a request's entries are contiguous (its decode token, or its
// prefill chunk), so count the runs.
static int32_t batch_seqs(const struct lm_engine *e, int32_t n) {
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) k += i == 0 || e->batch_req[i] != e->batch_req[i - 1];
    return k;
}

int32_t lm_engine_step(struct lm_engine *e) {
    // profiling: one branch when off; the step span covers the whole step
    const bool prof = lm_prof_on();
    const uint64_t t_step = prof ? lm_prof_ticks() : 0;
    // 1. intake: new requests to the queue, cancellations
    pthread_mutex_lock(&e->mu);
    struct req *in = e->inbox_head;
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
        struct req *n = in->next;
        wait_push(e, in, false);
        in = n;
    }
    for (int32_t i = 0; i < nc; i++) {
        struct req *r = NULL;
        for (int32_t s = 0; s < e->p.max_running && !r; s++)
            if (e->running[s] && e->running[s]->id == cancels[i]) r = e->running[s];
        if (!r)
            for (struct req *w = e->wait_head; w && !r; w = w->next)
                if (w->id == cancels[i]) r = w;
        if (!r) continue; // finished already
        if (r->seq < 0) {
            wait_unlink(e, r);
            pthread_mutex_lock(&e->mu);
            e->n_queued--;
            pthread_mutex_unlock(&e->mu);
        }
        req_finish(e, r, LM_FINISH_CANCELLED, -1, NULL, NULL);
    }
    // 2. admission, 3. the batch
    admit(e);
    const int32_t n = build_batch(e);
    if (n > 0) {
        e->st.steps++;
        e->st.last_step_tokens = n;
        e->st.last_step_decode = 0;
        int32_t n_drafts = 0;
        for (int32_t i = 0; i < n; i++) {
            const struct req *r = e->batch_req[i];
            e->st.last_step_decode += e->batch[i].pos == r->n_kv && r->n_kv == r->n_toks - 1;
            n_drafts += e->batch[i].pos > r->n_kv && r->n_kv == r->n_toks - 1;
        }
        e->st.prefilled_tokens += (uint64_t)(n - e->st.last_step_decode - n_drafts);
        // 4. the forward pass: a prefill phase when the step holds prefill tokens, else a
        // decode phase; its step index is the engine's, so the ops carry it in a trace
        const int32_t step_idx = (int32_t)(e->st.steps - 1);
        const enum lm_prof_phase ph = e->st.last_step_decode + n_drafts == n ? LM_PHASE_DECODE
                                                                               : LM_PHASE_PREFILL;
        const uint64_t t_fwd = prof ? lm_prof_phase_begin(ph) : 0;
        // the head selects as many best logits as the step's most demanding chain needs
        // (allocates only for a k above any before)
        int32_t k_step = 0;
        for (int32_t i = 0; i < n; i++)
            if (e->batch[i].want_logits && e->batch_req[i]->top_need > k_step) k_step = e->batch_req[i]->top_need;
        if (lm_context_set_top_k(e->c, k_step) != LM_OK) lm_context_set_top_k(e->c, 0); // full rows
        const uint64_t t_fwd_ns = lm_now_ns();
        const enum lm_status st = lm_decode(e->c, e->batch, n);
        if (prof) lm_prof_phase(ph, t_fwd, lm_prof_ticks(), step_idx, n);
        if (st != LM_OK) { // not expected (blocks were counted): fail the batch's requests
            char msg[256];
            snprintf(msg, sizeof msg, "%s", lm_error_msg());
            for (int32_t i = 0; i < n; i++) {
                struct req *r = e->batch_req[i];
                if (r && r->seq >= 0 && e->running[r->seq] == r)
                    req_finish(e, r, LM_FINISH_ERROR, -1, NULL, msg);
            }
            publish(e);
            lm_error_set(st, "%s", msg);
            return -1;
        }
        // 5. sample + deliver, in batch order
        const uint64_t t = lm_now_ns();
        e->st.forward_ns += t - t_fwd_ns;
        const int32_t n_dec = e->st.last_step_decode;
        if (ph == LM_PHASE_DECODE) lm_spec_cost_observe(&e->cost, n_dec, n, t - t_fwd_ns);
        if (n_drafts) { // without its drafts, the step would have taken (model's ratio)
            const double with = lm_spec_cost_est(&e->cost, n_dec, n_dec + n_drafts);
            e->st.verify_steps++;
            e->st.verify_ns += t - t_fwd_ns;
            if (with > 0)
                e->st.verify_plain_ns +=
                    (uint64_t)((double)(t - t_fwd_ns) * lm_spec_cost_est(&e->cost, n_dec, n_dec) / with);
        }
        const int32_t n_seqs = prof ? batch_seqs(e, n) : 0; // before deliver() finishes any
        const uint64_t acc0 = e->st.accepted_tokens;
        const uint64_t t_smp = prof ? lm_prof_phase_begin(LM_PHASE_SAMPLE) : 0;
        int32_t k = 0;
        for (int32_t i = 0, j; i < n; i = j) { // each request's entries are contiguous
            for (j = i + 1; j < n && e->batch_req[j] == e->batch_req[i]; j++) {}
            deliver_group(e, e->batch_req[i], i, j, &k, t);
        }
        e->st.sample_ns += lm_now_ns() - t;
        if (prof) {
            const uint64_t t_end = lm_prof_ticks();
            lm_prof_phase(LM_PHASE_SAMPLE, t_smp, t_end, step_idx, k);
            const struct lm_prof_step ps = {.step = step_idx, .n_tokens = n,
                                            .n_decode = e->st.last_step_decode, .n_seqs = n_seqs,
                                            .n_draft = n_drafts,
                                            .n_accepted = (int32_t)(e->st.accepted_tokens - acc0)};
            lm_prof_step(&ps, t_step, t_end);
        }
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
