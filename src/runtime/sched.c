// The scheduling policy (engine.h): admission in queue order under the KV pool's capacity
// with prefix-cache reuse, the choice of whom to preempt, and the plan of one step: a decode
// token for every running request, the drafts that pay, then prefill chunks of the others
// under the step's token budget, so a long prompt delays running streams by at most one
// chunk, and embedding inputs after the prompts, within embed_step_tokens while requests
// decode. What admission and preemption do to a request is runtime/request.c.
#include "runtime/engine.h"
#include "runtime/ops_pool.h"

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
        lm_req_admit(e, r, seq); // if its buffers cannot be had: an error event, the queue goes on
    }
}

// The pool cannot hold this step's decode tokens: the newest request is preempted, or,
// running alone, has filled the pool and ends with LM_FINISH_CONTEXT.
static void make_room(struct lm_engine *e) {
    struct lm_req *v = NULL;
    for (int32_t s = 0; s < e->p.max_running; s++)
        if (e->running[s] && (!v || e->running[s]->admit_order > v->admit_order)) v = e->running[s];
    if (e->n_running == 1) {
        lm_req_finish(e, v, LM_FINISH_CONTEXT, -1, NULL, NULL);
    } else {
        lm_req_requeue(e, v); // recomputed when admitted again
        e->st.preempted++;
    }
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

// ================================================================ embeddings beside decodes

// What the step leaves embedding inputs (docs/embeddings.md, "Embeddings beside chat"): while
// requests decode, embed_step_tokens less the prompts' chunks, plus what earlier steps saved
// for a non-causal input that waits to run whole; without decodes, the whole budget.
struct embed_room {
    int32_t credit; // embedding tokens this step may still take
    bool capped;    // requests decode: the credit is the cap, not the budget
    bool held;      // a non-causal input waits for credit (saved for the next step)
};

static struct embed_room embed_room(const struct lm_engine *e, bool decoding) {
    const int32_t b = e->p.step_tokens, cap = e->p.embed_step_tokens;
    if (!decoding || cap >= b) return (struct embed_room){.credit = b};
    const int32_t c = cap + e->embed_saved;
    return (struct embed_room){.credit = c < b ? c : b, .capped = true};
}

// Prefill chunks from entry n on, oldest request first: the prompts' (embed false; they spend
// the embedding credit too) or the embedding inputs' (within the credit). A non-causal input
// that the credit cannot hold whole holds back the inputs behind it, so it is the next to go.
// Returns the new entry count.
static int32_t plan_chunks(struct lm_engine *e, int32_t n, int32_t no, bool embed,
                           int32_t *avail, struct embed_room *room) {
    struct lm_kv_cache *kv = e->c->kv;
    for (int32_t k = 0; k < no && n < e->p.step_tokens; k++) {
        struct lm_req *r = e->order[k];
        if (!lm_req_prefilling(r) || r->rp.embed != embed) continue;
        const int32_t left = r->n_toks - r->n_kv;
        int32_t want = left;
        if (want > e->p.step_tokens - n) want = e->p.step_tokens - n;
        if (embed && want > room->credit) want = room->credit > 0 ? room->credit : 0;
        const int32_t chunk = want > 0 ? lm_kv_chunk_fit(kv, r->seq, want, *avail) : 0;
        // non-causal attention needs the whole input in one batch: wait for a step with room
        if (embed && e->c->non_causal && chunk < left) {
            if (room->capped && left > room->credit) {
                room->held = true;
                break;
            }
            continue;
        }
        if (chunk == 0) continue;
        *avail -= lm_kv_blocks_needed(kv, r->seq, chunk);
        room->credit -= chunk;
        for (int32_t i = 0; i < chunk; i++) {
            const int32_t pos = r->n_kv + i;
            const bool last = pos == r->n_toks - 1;
            // an embedding request's sequence is in embedding mode: its "logits" rows are the
            // hidden states that feed its pooling
            const bool wants = embed ? lm_pool_wants(r->rp.pooling, pos, r->n_toks,
                                                     !e->c->non_causal) : last;
            e->batch[n] = (struct lm_batch_entry){r->toks[pos], pos, r->seq, wants};
            e->batch_req[n++] = r;
        }
    }
    return n;
}

// ================================================================ the plan

// One attempt at the plan: false after make_room when the pool cannot hold it (plan again).
static bool try_plan(struct lm_engine *e, struct lm_step *s) {
    struct lm_kv_cache *kv = e->c->kv;
    int32_t n = 0, avail = lm_kv_blocks_available(kv);
    const int32_t no = running_by_admission(e);
    for (int32_t k = 0; k < no; k++) { // decode tokens, oldest request first
        struct lm_req *r = e->order[k];
        if (r->rp.embed || r->n_kv != r->n_toks - 1) continue; // prefilling, or an embedding
        const int32_t need = lm_kv_blocks_needed(kv, r->seq, 1);
        if (need > avail) {
            make_room(e);
            return false;
        }
        avail -= need;
        e->batch[n] = (struct lm_batch_entry){r->toks[r->n_kv], r->n_kv, r->seq, true};
        e->batch_req[n++] = r;
    }
    struct embed_room room = embed_room(e, n > 0);
    n = lm_spec_lookup_plan(e, n, &avail); // drafts after their decode entries
    n = lm_spec_model_plan(e, n, &avail);
    n = plan_chunks(e, n, no, false, &avail, &room); // prompts, then embedding inputs
    n = plan_chunks(e, n, no, true, &avail, &room);
    if (n == 0 && e->n_running > 0) { // every running request waits for blocks
        make_room(e);
        return false;
    }
    e->embed_saved = room.held && room.credit > 0 ? room.credit : 0;
    *s = (struct lm_step){.n = n, .free_blocks = avail};
    return true;
}

struct lm_step lm_sched_plan(struct lm_engine *e) {
    struct lm_step s;
    while (!try_plan(e, &s)) {}
    return s;
}
