// The scheduling policy (engine.h): the waiting queue, admission under the KV pool's
// capacity with prefix-cache reuse, preemption by recompute, and the plan of one step:
// a decode token for every running request, the drafts that pay, then prefill chunks of
// the others under the step's token budget, so a long prompt delays running streams by at
// most one chunk.
#include "runtime/engine.h"

#include "base/timer.h"

// ================================================================ the waiting queue

void lm_sched_wait_unlink(struct lm_engine *e, struct lm_req *r) {
    if (r->prev) r->prev->next = r->next;
    else e->wait_head = r->next;
    if (r->next) r->next->prev = r->prev;
    else e->wait_tail = r->prev;
    r->next = r->prev = NULL;
    e->n_waiting--;
}

void lm_sched_wait_push(struct lm_engine *e, struct lm_req *r, bool front) {
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

// ================================================================ admission, preemption

// Blocks for tokens[0, n) beyond the prefix the cache holds for layout `layout`: a cached
// block stops being evictable once attached, so it counts too.
static int32_t blocks_to_admit(struct lm_kv_cache *kv, int layout, const int32_t *toks, int32_t n) {
    const int32_t n_hit = lm_kv_prefix_probe(kv, layout, toks, n);
    return (n - n_hit + LM_KV_BLOCK - 1) / LM_KV_BLOCK + n_hit / LM_KV_BLOCK;
}

// Admission is first come, first served: a request that does not fit holds back the ones
// behind it. Blocks are counted for the whole prompt (its draft sequence's too) plus one of
// decode growth per running request; the first request is admitted whatever it needs.
void lm_sched_admit(struct lm_engine *e) {
    struct lm_kv_cache *kv = e->c->kv;
    while (e->wait_head && e->n_running < e->p.max_running) {
        struct lm_req *r = e->wait_head;
        int32_t seq = 0;
        while (e->running[seq]) seq++;
        int32_t need = blocks_to_admit(kv, 0, r->toks, r->n_toks);
        if (r->rp.use_draft) need += blocks_to_admit(kv, 1, r->toks, r->n_toks);
        if (need + e->n_running > lm_kv_blocks_available(kv) && e->n_running > 0) break;
        if (lm_spec_req_admit(e, r) != LM_OK) { // its buffers: an error event, the queue goes on
            lm_sched_wait_unlink(e, r);
            pthread_mutex_lock(&e->mu);
            e->n_queued--;
            pthread_mutex_unlock(&e->mu);
            lm_req_finish(e, r, LM_FINISH_ERROR, -1, NULL, lm_error_msg());
            continue;
        }
        int32_t n_att = 0;
        if (lm_kv_prefix_attach(kv, seq, r->toks, r->n_toks, &n_att) != LM_OK) n_att = 0;
        lm_sched_wait_unlink(e, r);
        pthread_mutex_lock(&e->mu);
        e->n_queued--;
        e->n_run_pub++;
        pthread_mutex_unlock(&e->mu);
        r->seq = seq;
        r->n_kv = n_att;
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
    }
}

// Frees r's sequences and puts it back at the head of the queue; its tokens so far are
// recomputed when it is admitted again (same results: batch invariance).
static void preempt(struct lm_engine *e, struct lm_req *r) {
    lm_kv_seq_rm(e->c->kv, r->seq, 0, -1);
    if (e->spec.draft_ctx) lm_spec_model_seq_rm(e, r, 0);
    r->spec.draft_kv = 0;
    e->running[r->seq] = NULL;
    e->n_running--;
    r->seq = -1;
    r->n_kv = 0;
    lm_sched_wait_push(e, r, true);
    pthread_mutex_lock(&e->mu);
    e->n_queued++;
    e->n_run_pub--;
    pthread_mutex_unlock(&e->mu);
    e->st.preempted++;
}

// The pool cannot hold this step's decode tokens: the newest request is preempted, or,
// running alone, has filled the pool and ends with LM_FINISH_CONTEXT.
static void make_room(struct lm_engine *e) {
    struct lm_req *v = NULL;
    for (int32_t s = 0; s < e->p.max_running; s++)
        if (e->running[s] && (!v || e->running[s]->admit_order > v->admit_order)) v = e->running[s];
    if (e->n_running == 1) lm_req_finish(e, v, LM_FINISH_CONTEXT, -1, NULL, NULL);
    else preempt(e, v);
}

// ================================================================ the step's batch

// The running requests in e->order by admission (their draft state reset for this step);
// returns their count.
static int32_t running_by_admission(struct lm_engine *e) {
    int32_t no = 0;
    for (int32_t s = 0; s < e->p.max_running; s++)
        if (e->running[s]) {
            e->order[no++] = e->running[s];
            e->running[s]->spec.n_draft = 0;
            e->running[s]->spec.from_model = false;
        }
    for (int32_t i = 1; i < no; i++) // insertion sort: a few requests
        for (int32_t j = i; j > 0 && e->order[j - 1]->admit_order > e->order[j]->admit_order; j--) {
            struct lm_req *t = e->order[j];
            e->order[j] = e->order[j - 1];
            e->order[j - 1] = t;
        }
    return no;
}

// One attempt at the plan: false after make_room when the pool cannot hold it (plan again).
static bool try_plan(struct lm_engine *e, struct lm_step *s) {
    struct lm_kv_cache *kv = e->c->kv;
    int32_t n = 0, avail = lm_kv_blocks_available(kv);
    const int32_t no = running_by_admission(e);
    for (int32_t k = 0; k < no; k++) { // decode tokens, oldest request first
        struct lm_req *r = e->order[k];
        if (r->n_kv != r->n_toks - 1) continue; // prefilling
        const int32_t need = lm_kv_blocks_needed(kv, r->seq, 1);
        if (need > avail) {
            make_room(e);
            return false;
        }
        avail -= need;
        e->batch[n] = (struct lm_batch_entry){r->toks[r->n_kv], r->n_kv, r->seq, true};
        e->batch_req[n++] = r;
    }
    n = lm_spec_lookup_plan(e, n, &avail); // drafts after their decode entries
    n = lm_spec_model_plan(e, n, &avail);
    for (int32_t k = 0; k < no && n < e->p.step_tokens; k++) { // prefill chunks, oldest first
        struct lm_req *r = e->order[k];
        if (r->n_kv >= r->n_toks - 1) continue;
        int32_t want = r->n_toks - r->n_kv;
        if (want > e->p.step_tokens - n) want = e->p.step_tokens - n;
        const int32_t chunk = lm_kv_chunk_fit(kv, r->seq, want, avail);
        if (chunk == 0) continue;
        avail -= lm_kv_blocks_needed(kv, r->seq, chunk);
        for (int32_t i = 0; i < chunk; i++) {
            const int32_t pos = r->n_kv + i;
            e->batch[n] = (struct lm_batch_entry){r->toks[pos], pos, r->seq, pos == r->n_toks - 1};
            e->batch_req[n++] = r;
        }
    }
    if (n == 0 && e->n_running > 0) { // every running request waits for blocks
        make_room(e);
        return false;
    }
    *s = (struct lm_step){.n = n, .free_blocks = avail};
    return true;
}

struct lm_step lm_sched_plan(struct lm_engine *e) {
    struct lm_step s;
    while (!try_plan(e, &s)) {}
    return s;
}
