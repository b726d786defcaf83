// A request's thinking span (lm_request_params.think_*): where its generated tokens are (before,
// inside, after the span), the budget that ends the span by delivering its end marker's tokens,
// and which tokens the grammar sees (only the answer's, after the span). A budget that forces
// only the end marker's first n_force tokens leaves the model the answer's choice (harmony with
// tools: a final answer or a call) and keeps the span from opening again (SPENT).
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "runtime/request.h"

enum lm_status lm_think_check(const struct lm_request_params *rp, int32_t n_vocab) {
    if (rp->n_think_end == 0) return LM_OK;
    if (rp->think_budget < -1)
        return lm_error_set(LM_ERR_ARG, "engine: think_budget %d < -1 (-1: no budget)", rp->think_budget);
    if (rp->n_think_end < 0 || rp->n_think_end > LM_THINK_MARKER_MAX || rp->n_think_start < 0 ||
        rp->n_think_start > LM_THINK_MARKER_MAX || !rp->think_end || (rp->n_think_start && !rp->think_start))
        return lm_error_set(LM_ERR_ARG, "engine: thinking markers of %d and %d tokens (1..%d each, with their "
                            "arrays)", rp->n_think_start, rp->n_think_end, LM_THINK_MARKER_MAX);
    if (rp->n_think_close < 0 || rp->n_think_close > rp->n_think_end)
        return lm_error_set(LM_ERR_ARG, "engine: n_think_close %d is outside [0, n_think_end %d]", rp->n_think_close,
                            rp->n_think_end);
    const int32_t n_close = rp->n_think_close > 0 ? rp->n_think_close : rp->n_think_end;
    if (rp->n_think_force != 0 && (rp->n_think_force < n_close || rp->n_think_force > rp->n_think_end))
        return lm_error_set(LM_ERR_ARG, "engine: n_think_force %d is outside [n_think_close %d, n_think_end %d] "
                            "(0: all)", rp->n_think_force, n_close, rp->n_think_end);
    for (int32_t i = 0; i < rp->n_think_start + rp->n_think_end; i++) {
        const int32_t t = i < rp->n_think_start ? rp->think_start[i] : rp->think_end[i - rp->n_think_start];
        if (t < 0 || t >= n_vocab)
            return lm_error_set(LM_ERR_ARG, "engine: thinking marker token %d is out of range [0, %d)", t, n_vocab);
    }
    return LM_OK;
}

static int32_t *dup_ids(const int32_t *p, int32_t n) {
    int32_t *d = malloc((size_t)(n ? n : 1) * sizeof *d);
    if (d && n) memcpy(d, p, (size_t)n * sizeof *d);
    return d;
}

enum lm_status lm_think_init(struct lm_req *r, const struct lm_request_params *rp) {
    struct lm_req_think *t = &r->think;
    memset(t, 0, sizeof *t);
    r->rp.think_start = r->rp.think_end = NULL; // the copies below are the request's
    if (rp->n_think_end == 0) return LM_OK;
    t->start = dup_ids(rp->think_start, rp->n_think_start);
    t->end = dup_ids(rp->think_end, rp->n_think_end);
    if (!t->start || !t->end) return lm_error_set(LM_ERR_NOMEM, "engine: out of memory");
    t->n_start = rp->n_think_start;
    t->n_end = rp->n_think_end;
    t->n_close = rp->n_think_close > 0 ? rp->n_think_close : rp->n_think_end;
    t->n_force = rp->n_think_force > 0 ? rp->n_think_force : rp->n_think_end;
    t->state = rp->think_open ? LM_THINK_IN : t->n_start > 0 ? LM_THINK_PRE : LM_THINK_OFF;
    if (t->state == LM_THINK_IN && rp->think_budget == 0) t->state = LM_THINK_FORCE;
    return LM_OK;
}

void lm_think_free(struct lm_req *r) {
    free(r->think.start);
    free(r->think.end);
    memset(&r->think, 0, sizeof r->think);
}

int32_t lm_think_forced(const struct lm_req *r) {
    return r->think.state == LM_THINK_FORCE ? r->think.end[r->think.force] : -1;
}

// The grammar's mask is after the marker's tokens so far while it follows them (g_in == match):
// its next token or the marker's next one. A marker it stopped following is completed.
void lm_think_mask(struct lm_req *r, uint32_t *mask, int32_t n_vocab) {
    struct lm_req_think *th = &r->think;
    if (th->state == LM_THINK_SPENT) { // every token but the one that would open the span again
        if (!r->gm) {
            memset(mask, 0xFF, (size_t)(n_vocab / 32) * sizeof *mask);
            if (n_vocab & 31) mask[n_vocab / 32] = (1u << (n_vocab & 31)) - 1;
        }
        if (th->n_start > 0 && th->match == th->n_start - 1) {
            const int32_t t = th->start[th->match];
            mask[t >> 5] &= ~(1u << (t & 31));
        }
        return;
    }
    if (th->state != LM_THINK_PRE) return;
    if (th->g_in < th->match) memset(mask, 0, (size_t)((n_vocab + 31) / 32) * sizeof *mask);
    const int32_t t = th->start[th->match];
    mask[t >> 5] |= 1u << (t & 31);
}

// Continuation bytes still expected after tok's text, need before it.
static int32_t utf8_need(const struct lm_tokenizer *tk, int32_t tok, int32_t need) {
    char buf[256];
    const size_t n = lm_token_to_piece(tk, tok, buf, sizeof buf, false);
    if (n > sizeof buf) return 0; // a long piece: whole characters
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)buf[i];
        if (need > 0 && (c & 0xC0) == 0x80) need--;
        else need = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
    }
    return need;
}

// The span is open: count its tokens, watch for its end, force it at the budget (once its
// text ends a character).
static void inside(struct lm_req *r, int32_t tok, const struct lm_tokenizer *tk) {
    struct lm_req_think *t = &r->think;
    t->used++;
    if (tk) t->utf8_need = utf8_need(tk, tok, t->utf8_need);
    if (tok == t->end[t->match]) t->match++;
    else t->match = tok == t->end[0] ? 1 : 0;
    if (t->match == t->n_close) {
        t->state = LM_THINK_OFF;
        return;
    }
    if (r->rp.think_budget >= 0 && t->used >= r->rp.think_budget && t->utf8_need == 0) { // complete the marker
        t->state = LM_THINK_FORCE;
        t->force = t->match;
    }
}

int32_t lm_think_accept(struct lm_req *r, int32_t tok, int32_t *toks, const struct lm_tokenizer *tk) {
    struct lm_req_think *t = &r->think;
    switch (t->state) {
    case LM_THINK_OFF: toks[0] = tok; return 1;
    case LM_THINK_PRE:
        if (tok == t->start[t->match]) { // the grammar takes it too while it follows the marker
            if (r->gm && t->g_in == t->match && lm_grammar_matcher_accept(r->gm, tok)) t->g_in++;
            if (++t->match < t->n_start) return 0;
            if (t->g_in > 0) lm_grammar_matcher_rollback(r->gm, t->g_in); // the span's: not the answer's
            t->g_in = 0;
            t->match = 0;
            t->used = 0;
            t->state = r->rp.think_budget == 0 ? LM_THINK_FORCE : LM_THINK_IN;
            t->force = 0;
            return 0;
        } else { // no span: the half-seen marker and tok are the answer's (the grammar has some)
            const int32_t k = t->match - t->g_in;
            memcpy(toks, t->start + t->g_in, (size_t)k * sizeof *toks);
            toks[k] = tok;
            t->match = t->g_in = 0;
            t->state = LM_THINK_OFF;
            return k + 1;
        }
    case LM_THINK_IN: inside(r, tok, tk); return 0;
    case LM_THINK_FORCE: {
        t->used++;
        const bool answer = t->force >= t->n_close; // past the tokens that close the span: the answer's
        if (++t->force == t->n_force) {
            t->state = t->n_force < t->n_end ? LM_THINK_SPENT : LM_THINK_OFF;
            t->match = 0;
        }
        toks[0] = tok;
        return answer ? 1 : 0;
    }
    case LM_THINK_SPENT: // the answer's; the start marker is watched (the mask keeps it from completing)
        if (t->n_start > 0) {
            if (tok == t->start[t->match]) t->match = t->match + 1 < t->n_start ? t->match + 1 : 0;
            else t->match = tok == t->start[0] ? 1 : 0;
        }
        toks[0] = tok;
        return 1;
    }
    return 0;
}
