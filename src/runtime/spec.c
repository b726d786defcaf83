// Speculative decoding (docs/speculative.md), what both drafters share: the step cost
// model, the acceptance estimate, the draft-length choice (runtime/spec.h), the engine's
// and each request's draft state, and placing drafts in the batch (runtime/engine.h). The
// drafters: spec_lookup.c (prompt lookup) and spec_draft.c (a draft model); verification
// and rollback are delivery's (deliver.c).
#include "runtime/spec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "runtime/engine.h"
#include "sample/sample_internal.h"

// ================================================================ step cost

enum lm_status lm_spec_cost_init(struct lm_spec_cost *c, int32_t n_max, int32_t s_max) {
    c->n_max = n_max;
    c->s_max = s_max < 1 ? 1 : s_max > n_max ? n_max : s_max;
    c->marginal = 0.0;
    c->ns = calloc((size_t)(c->s_max + 1) * ((size_t)n_max + 1), sizeof *c->ns);
    if (!c->ns)
        return lm_error_set(LM_ERR_NOMEM, "spec: out of memory for the step cost table (%d x %d)",
                            c->s_max + 1, n_max + 1);
    return LM_OK;
}

void lm_spec_cost_free(struct lm_spec_cost *c) {
    free(c->ns);
    c->ns = NULL;
}

// row of s sequences (n_max + 1 entries by token count)
static double *cost_row(const struct lm_spec_cost *c, int32_t s) {
    return c->ns + (size_t)(s > c->s_max ? c->s_max : s) * ((size_t)c->n_max + 1);
}

void lm_spec_cost_observe(struct lm_spec_cost *c, int32_t s, int32_t n, uint64_t ns) {
    if (s < 1 || n < s || n > c->n_max || ns == 0) return;
    double *r = cost_row(c, s);
    const int32_t s0 = s > c->s_max ? c->s_max : s;
    // a moving average that follows the machine's load within a few steps; the noise of a
    // shared machine only ever adds time, so one slow step moves it by 7.5% at most (a
    // plain step's cost left high by a hiccup would make every draft look cheap)
    double x = (double)ns;
    if (r[n] > 0 && x > 1.25 * r[n]) x = 1.25 * r[n];
    // the price of a token beyond the sequences' own, against the same row's plain step
    if (n > s && s == s0 && r[s] > 0) {
        const double m = x > r[s] ? (x - r[s]) / (double)(n - s) : 0.0;
        c->marginal = c->marginal > 0 ? 0.8 * c->marginal + 0.2 * m : m;
    }
    r[n] = r[n] > 0 ? 0.7 * r[n] + 0.3 * x : x;
}

double lm_spec_cost_est(const struct lm_spec_cost *c, int32_t s, int32_t n) {
    if (s < 1 || n < s) return 0.0;
    if (n > c->n_max) n = c->n_max;
    const double *r = cost_row(c, s);
    if (r[n] > 0) return r[n];
    const int32_t s0 = s > c->s_max ? c->s_max : s; // the row's smallest count
    int32_t lo = n - 1, hi = n + 1;
    while (lo >= s0 && !(r[lo] > 0)) lo--;
    if (lo < s0) return 0.0;
    while (hi <= c->n_max && !(r[hi] > 0)) hi++;
    if (hi <= c->n_max && r[hi] >= r[lo])
        return r[lo] + (r[hi] - r[lo]) * (double)(n - lo) / (double)(hi - lo);
    if (c->marginal > 0) return r[lo] + c->marginal * (double)(n - lo);
    return r[lo] * (1.0 + 0.03 * (double)(n - lo));
}

// ================================================================ acceptance

// prior: one accepted and one rejected position (rate 0.5)
void lm_spec_acc_init(struct lm_spec_acc *a) { a->acc = a->rej = 1.0f; }

double lm_spec_acc_rate(const struct lm_spec_acc *a) {
    return (double)a->acc / ((double)a->acc + (double)a->rej);
}

void lm_spec_acc_update(struct lm_spec_acc *a, int32_t drafted, int32_t accepted) {
    // decay per verification: the last ~5 verifications dominate
    a->acc = 0.8f * a->acc + (float)accepted;
    a->rej = 0.8f * a->rej + (accepted < drafted ? 1.0f : 0.0f);
}

void lm_spec_acc_idle(struct lm_spec_acc *a) {
    a->acc = 0.97f * a->acc + 0.03f;
    a->rej = 0.97f * a->rej + 0.03f;
}

int32_t lm_spec_choose_drafter(const struct lm_spec_cost *c, double a, int32_t s_seq, int32_t n_base,
                               int32_t n_streams, double extra_ns, double draft_ns, int32_t k_avail,
                               double *gain) {
    *gain = 0.0;
    const double t0 = lm_spec_cost_est(c, s_seq, n_base);
    if (!(t0 > 0) || k_avail <= 0 || !(a > 0) || n_streams < 1) return 0;
    // the drafting stream's rate goes from 1 / base to (1 + g) / time, every stream's (its
    // own included) is divided by time / base: the log of the product of all rates changes
    // by log(1 + g) - n_streams * log(time / base), with base = t0 + extra_ns and time =
    // t + extra_ns + K draft_ns
    const double base = t0 + extra_ns;
    double best = LM_SPEC_MIN_GAIN, g = 0.0, ai = 1.0, t = t0;
    int32_t kb = 0;
    for (int32_t k = 1; k <= k_avail && n_base + k <= c->n_max; k++) {
        ai *= a;
        g += ai;
        const double tk = lm_spec_cost_est(c, s_seq, n_base + k);
        if (tk > t) t = tk; // a longer step never costs less (estimates from noisy averages)
        const double v = log1p(g) - (double)n_streams * log((t + extra_ns + k * draft_ns) / base);
        if (v > best) {
            best = v;
            kb = k;
            *gain = g;
        }
    }
    return kb;
}

int32_t lm_spec_choose(const struct lm_spec_cost *c, double a, int32_t s_seq, int32_t n_base,
                       int32_t n_streams, int32_t k_avail, double *gain) {
    return lm_spec_choose_drafter(c, a, s_seq, n_base, n_streams, 0.0, 0.0, k_avail, gain);
}

// ================================================================ the engine's draft state

enum lm_status lm_spec_engine_init(struct lm_engine *e) {
    struct lm_spec_engine *sp = &e->spec;
    const struct lm_engine_params *p = &e->p;
    sp->draft_rows = e->c->n_logits_max - p->max_running; // n_logits_max is capped at step_tokens
    const int32_t s_max = p->max_running < 64 ? p->max_running : 64;
    enum lm_status st = lm_spec_cost_init(&sp->cost, p->step_tokens, s_max);
    if (st != LM_OK || !p->draft_model) return st;
    // catch-ups and drafts of every running request beside a step's prefill
    const int32_t nb = p->step_tokens + 2 * p->max_running;
    struct lm_context_params dp = {.n_batch = nb > 8192 ? 8192 : nb, .n_logits_max = p->max_running};
    if ((st = lm_context_init_draft(&sp->draft_ctx, e->c, p->draft_model, &dp)) != LM_OK) return st;
    sp->draft_batch = calloc((size_t)sp->draft_ctx->n_batch, sizeof *sp->draft_batch);
    sp->draft_batch_req = calloc((size_t)sp->draft_ctx->n_batch, sizeof *sp->draft_batch_req);
    sp->q_dense = calloc((size_t)e->n_vocab, sizeof *sp->q_dense);
    if (!sp->draft_batch || !sp->draft_batch_req || !sp->q_dense)
        return lm_error_set(LM_ERR_NOMEM, "engine: out of memory");
    return LM_OK;
}

void lm_spec_engine_free(struct lm_engine *e) {
    struct lm_spec_engine *sp = &e->spec;
    lm_context_free(sp->draft_ctx);
    free(sp->draft_batch);
    free(sp->draft_batch_req);
    free(sp->q_dense);
    lm_spec_cost_free(&sp->cost);
}

// ================================================================ a request's draft state

void lm_spec_req_init(struct lm_engine *e, struct lm_req *r) {
    (void)e;
    struct lm_req_spec *sp = &r->spec;
    lm_spec_acc_init(&sp->acc);
    lm_sampler_rng_seed(sp->rng, r->rp.sampling.seed ^ 0x6472616674ull); // seed ^ ASCII "draft"
}

enum lm_status lm_spec_req_admit(struct lm_engine *e, struct lm_req *r) {
    struct lm_req_spec *sp = &r->spec;
    const struct lm_request_params *rp = &r->rp;
    if (sp->q || !rp->use_draft || !(rp->sampling.temperature > 0.0f)) return LM_OK;
    // q of each drafted position: up to draft_max x n_vocab entries (64 MiB at Gemma 3's
    // vocabulary), so only the running requests hold one
    const int32_t k = rp->sampling.top_k;
    sp->q_cap = k > 0 && k < e->n_vocab ? k : e->n_vocab;
    sp->q = malloc((size_t)rp->draft_max * (size_t)sp->q_cap * sizeof *sp->q);
    if (!sp->q)
        return lm_error_set(LM_ERR_NOMEM, "engine: out of memory for the draft model's "
                            "distributions (%d positions x %d tokens)", rp->draft_max, sp->q_cap);
    return LM_OK;
}

void lm_spec_req_free(struct lm_req *r) { free(r->spec.q); }

// ================================================================ planning

int32_t lm_spec_room(const struct lm_engine *e, const struct lm_req *r, int32_t n_tot, int32_t rows) {
    int32_t room = e->p.step_tokens - n_tot;
    if (room > rows) room = rows;
    if (room > r->rp.draft_max) room = r->rp.draft_max;
    if (room > e->p.n_ctx - r->n_toks) room = e->p.n_ctx - r->n_toks; // positions < n_ctx
    if ((int64_t)room > (int64_t)r->max_gen - r->n_gen - 1) room = r->max_gen - r->n_gen - 1;
    return room;
}

int32_t lm_spec_insert_drafts(struct lm_engine *e, int32_t n, int32_t n_tot, bool from_model) {
    for (int32_t i = n - 1, w = n_tot - 1; i >= 0; i--) {
        struct lm_req *r = e->batch_req[i];
        const struct lm_batch_entry d = e->batch[i];
        if (d.pos == r->n_kv && r->spec.from_model == from_model)
            for (int32_t j = r->spec.n_draft - 1; j >= 0; j--) {
                const int32_t tok = from_model ? -1 : r->spec.draft[j];
                e->batch[w] = (struct lm_batch_entry){tok, d.pos + 1 + j, d.seq, true};
                e->batch_req[w--] = r;
            }
        e->batch[w] = d;
        e->batch_req[w--] = r;
    }
    return n_tot;
}
