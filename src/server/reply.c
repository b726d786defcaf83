// Text of a generation on the HTTP thread: streaming detokenizer, stop strings held back
// until they can no longer match (a stop string never leaks into the output), logprobs in
// OpenAI's two shapes, and the JSON of responses and stream chunks.
#define _GNU_SOURCE // memmem
#include "reply.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

// ================================================================ generation text

bool gen_init(struct gen *g, const struct lm_tokenizer *tok, const struct api_request *req) {
    memset(g, 0, sizeof *g);
    g->tok = tok;
    g->req = req;
    lm_detok_init(&g->dt, false);
    g->piece_cap = lm_tokenizer_max_piece(tok) + 8;
    g->piece = malloc(g->piece_cap);
    if (req->logprobs) g->lp_pend = json_array();
    return g->piece != NULL && (!req->logprobs || g->lp_pend != NULL);
}

void gen_free(struct gen *g) {
    free(g->piece);
    sbuf_free(&g->hold);
    json_decref(g->lp);
    json_decref(g->lp_tokens);
    json_decref(g->lp_values);
    json_decref(g->lp_top);
    json_decref(g->lp_off);
    json_decref(g->lp_pend);
    free(g->pend_start);
    free(g->pend_end);
    memset(g, 0, sizeof *g);
}

json_t *json_text(const char *s, size_t n) {
    const size_t ok = utf8_valid_prefix(s, n);
    if (ok == n) return json_stringn(s ? s : "", n);
    struct sbuf b = {0};
    utf8_repair_append(&b, s, n);
    json_t *j = b.oom ? NULL : json_stringn(b.p, b.n);
    sbuf_free(&b);
    return j;
}

// logprob as a JSON number: -inf (a banned token among the alternatives) is -9999, as
// OpenAI writes it; jansson refuses non-finite reals.
static json_t *json_lp(float x) { return json_real(isfinite(x) ? (double)x : -9999.0); }

static json_t *json_bytes(const char *s, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer((unsigned char)s[i]));
    return a;
}

// Raw bytes of a token (its piece; control tokens render as their text here).
static size_t tok_bytes(const struct gen *g, int32_t id, char *buf, size_t cap) {
    size_t n = lm_token_to_piece(g->tok, id, buf, cap, true);
    return n < cap ? n : cap;
}

// The logprob entry of one token, held until its text is released: chat's
// {"token", "logprob", "bytes", "top_logprobs"}, or completions' [token, logprob, top,
// text_offset] (split into the four parallel arrays on release).
static json_t *logprob_entry(struct gen *g, const struct gen_tok *t) {
    char *buf = g->piece; // free again: the piece was consumed before this is called
    const size_t cap = g->piece_cap;
    if (g->req->kind == API_CHAT) {
        json_t *top = json_array();
        for (int32_t i = 0; i < t->n_top; i++) {
            const size_t k = tok_bytes(g, t->top_tok[i], buf, cap);
            json_t *alt = json_object();
            json_object_set_new(alt, "token", json_text(buf, k));
            json_object_set_new(alt, "logprob", json_lp(t->top_lp[i]));
            json_object_set_new(alt, "bytes", json_bytes(buf, k));
            json_array_append_new(top, alt);
        }
        const size_t n = tok_bytes(g, t->token, buf, cap);
        json_t *ent = json_object();
        json_object_set_new(ent, "token", json_text(buf, n));
        json_object_set_new(ent, "logprob", json_lp(t->logprob));
        json_object_set_new(ent, "bytes", json_bytes(buf, n));
        json_object_set_new(ent, "top_logprobs", top);
        return ent;
    }
    json_t *top = json_object();
    for (int32_t i = 0; i < t->n_top; i++) {
        const size_t k = tok_bytes(g, t->top_tok[i], buf, cap);
        json_t *key = json_text(buf, k);
        if (key && !json_object_get(top, json_string_value(key))) // two ids, one text: the likelier
            json_object_set_new(top, json_string_value(key), json_lp(t->top_lp[i]));
        json_decref(key);
    }
    const size_t n = tok_bytes(g, t->token, buf, cap);
    json_t *ent = json_array();
    json_array_append_new(ent, json_text(buf, n));
    json_array_append_new(ent, json_lp(t->logprob));
    json_array_append_new(ent, top);
    json_array_append_new(ent, json_integer((json_int_t)g->tok_off));
    g->tok_off += n;
    return ent;
}

static void hold_logprob(struct gen *g, json_t *ent, size_t start, size_t end) {
    if (!ent || !g->lp_pend) {
        json_decref(ent);
        g->oom = true;
        return;
    }
    if (g->n_pend == g->pend_cap) {
        const size_t cap = g->pend_cap ? 2 * g->pend_cap : 16;
        size_t *s = realloc(g->pend_start, cap * sizeof *s);
        if (s) g->pend_start = s;
        size_t *e = s ? realloc(g->pend_end, cap * sizeof *e) : NULL;
        if (e) g->pend_end = e;
        if (!s || !e) {
            json_decref(ent);
            g->oom = true;
            return;
        }
        g->pend_cap = cap;
    }
    g->pend_start[g->n_pend] = start;
    g->pend_end[g->n_pend++] = end;
    json_array_append_new(g->lp_pend, ent);
}

// Moves the held entries whose text is released (end <= upto; with partial, start < upto:
// a token whose text begins before a stop string) to the output, in order; with drop_rest,
// the others are discarded (their text never reaches the client).
static void release_logprobs(struct gen *g, size_t upto, bool partial, bool drop_rest) {
    size_t k = 0;
    while (k < g->n_pend && (partial ? g->pend_start[k] < upto : g->pend_end[k] <= upto)) k++;
    for (size_t i = 0; i < k; i++) {
        json_t *ent = json_array_get(g->lp_pend, i);
        if (g->req->kind == API_CHAT) {
            if (!g->lp) g->lp = json_array();
            json_array_append(g->lp, ent);
            continue;
        }
        if (!g->lp_tokens) {
            g->lp_tokens = json_array();
            g->lp_values = json_array();
            g->lp_top = json_array();
            g->lp_off = json_array();
        }
        json_array_append(g->lp_tokens, json_array_get(ent, 0));
        json_array_append(g->lp_values, json_array_get(ent, 1));
        json_array_append(g->lp_top, json_array_get(ent, 2));
        json_array_append(g->lp_off, json_array_get(ent, 3));
    }
    const size_t n = drop_rest ? g->n_pend : k;
    for (size_t i = 0; i < n; i++) json_array_remove(g->lp_pend, 0);
    memmove(g->pend_start, g->pend_start + n, (g->n_pend - n) * sizeof *g->pend_start);
    memmove(g->pend_end, g->pend_end + n, (g->n_pend - n) * sizeof *g->pend_end);
    g->n_pend -= n;
}

json_t *gen_take_logprobs(struct gen *g) {
    if (g->req->kind == API_CHAT) {
        if (!g->lp) return NULL;
        json_t *o = json_object();
        json_object_set_new(o, "content", g->lp);
        json_object_set_new(o, "refusal", json_null());
        g->lp = NULL;
        return o;
    }
    if (!g->lp_tokens) return NULL;
    json_t *o = json_object();
    json_object_set_new(o, "tokens", g->lp_tokens);
    json_object_set_new(o, "token_logprobs", g->lp_values);
    json_object_set_new(o, "top_logprobs", g->lp_top);
    json_object_set_new(o, "text_offset", g->lp_off);
    g->lp_tokens = g->lp_values = g->lp_top = g->lp_off = NULL;
    return o;
}

// Longest k < len(some stop string) such that the last k bytes of s begin a stop string.
static size_t stop_prefix_suffix(const struct api_request *r, const char *s, size_t n) {
    size_t keep = 0;
    for (int32_t i = 0; i < r->n_stop; i++) {
        size_t k = r->stop_len[i] - 1;
        if (k > n) k = n;
        for (; k > keep; k--)
            if (memcmp(s + n - k, r->stop[i], k) == 0) {
                keep = k;
                break;
            }
    }
    return keep;
}

bool gen_token(struct gen *g, const struct gen_tok *t, struct sbuf *out) {
    if (g->stopped) return false;
    size_t np = 0;
    if (lm_detok_push(g->tok, &g->dt, t->token, g->piece, g->piece_cap, &np) != LM_OK) np = 0;
    g->n_tokens++;
    const struct api_request *r = g->req;
    const size_t tok_start = g->decoded;
    g->decoded += np;
    bool hit = false;
    size_t stop_at = 0; // decoded bytes before the stop string, once one matched
    if (r->n_stop == 0) {
        sbuf_append(out, g->piece, np);
    } else {
        sbuf_append(&g->hold, g->piece, np);
        // the earliest stop string in what is held (nothing before it could begin one)
        size_t best = SIZE_MAX;
        for (int32_t i = 0; i < r->n_stop; i++) {
            const char *p = g->hold.n ? memmem(g->hold.p, g->hold.n, r->stop[i], r->stop_len[i]) : NULL;
            if (p && (size_t)(p - g->hold.p) < best) {
                best = (size_t)(p - g->hold.p);
                g->stop_index = i;
            }
        }
        if (best != SIZE_MAX) {
            sbuf_append(out, g->hold.p, best);
            stop_at = g->decoded - g->hold.n + best;
            sbuf_consume(&g->hold, g->hold.n);
            g->stopped = hit = true;
        } else {
            const size_t keep = stop_prefix_suffix(r, g->hold.p ? g->hold.p : "", g->hold.n);
            sbuf_append(out, g->hold.p, g->hold.n - keep);
            sbuf_consume(&g->hold, g->hold.n - keep);
        }
    }
    if (r->logprobs) { // a token's logprobs go out with its text, never ahead of it
        hold_logprob(g, logprob_entry(g, t), tok_start, g->decoded);
        if (hit) release_logprobs(g, stop_at, true, true);
        else release_logprobs(g, g->decoded - g->hold.n, false, false);
    }
    if (out->oom || g->hold.oom) g->oom = true;
    return hit;
}

void gen_finish(struct gen *g, struct sbuf *out) {
    if (g->stopped) return;
    char tail[8];
    const size_t n = lm_detok_flush(&g->dt, tail, sizeof tail);
    sbuf_append(&g->hold, tail, n);
    sbuf_append(out, g->hold.p, g->hold.n);
    sbuf_consume(&g->hold, g->hold.n);
    if (g->req->logprobs) release_logprobs(g, SIZE_MAX, false, false);
    if (out->oom || g->hold.oom) g->oom = true;
}

// ================================================================ response JSON

json_t *reply_usage(int32_t n_prompt, int32_t n_completion, int32_t n_cached) {
    json_t *u = json_object();
    json_object_set_new(u, "prompt_tokens", json_integer(n_prompt));
    json_object_set_new(u, "completion_tokens", json_integer(n_completion));
    json_object_set_new(u, "total_tokens", json_integer((json_int_t)n_prompt + n_completion));
    json_t *d = json_object();
    json_object_set_new(d, "cached_tokens", json_integer(n_cached));
    json_object_set_new(u, "prompt_tokens_details", d);
    return u;
}

static json_t *reply_head(const struct reply *rp, bool chunk) {
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(rp->id));
    const char *object = rp->kind == API_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                              : "text_completion";
    json_object_set_new(o, "object", json_string(object));
    json_object_set_new(o, "created", json_integer(rp->created));
    json_object_set_new(o, "model", json_text(rp->model, strlen(rp->model)));
    return o;
}

static json_t *or_null(json_t *v) { return v ? v : json_null(); }

json_t *reply_chunk(const struct reply *rp, const char *text, size_t n, bool with_role,
                    json_t *logprobs, const char *finish) {
    json_t *o = reply_head(rp, true);
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    if (rp->kind == API_CHAT) {
        json_t *delta = json_object();
        if (with_role) json_object_set_new(delta, "role", json_string("assistant"));
        if (n > 0 || with_role) json_object_set_new(delta, "content", json_text(text, n));
        json_object_set_new(choice, "delta", delta);
    } else {
        json_object_set_new(choice, "text", json_text(text, n));
    }
    json_object_set_new(choice, "logprobs", or_null(logprobs));
    json_object_set_new(choice, "finish_reason", finish ? json_string(finish) : json_null());
    json_t *choices = json_array();
    json_array_append_new(choices, choice);
    json_object_set_new(o, "choices", choices);
    if (rp->include_usage) json_object_set_new(o, "usage", json_null());
    return o;
}

json_t *reply_usage_chunk(const struct reply *rp, json_t *usage) {
    json_t *o = reply_head(rp, true);
    json_object_set_new(o, "choices", json_array());
    json_object_set_new(o, "usage", or_null(usage));
    return o;
}

json_t *reply_full(const struct reply *rp, const char *text, size_t n, json_t *logprobs,
                   const char *finish, json_t *usage) {
    json_t *o = reply_head(rp, false);
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    if (rp->kind == API_CHAT) {
        json_t *msg = json_object();
        json_object_set_new(msg, "role", json_string("assistant"));
        json_object_set_new(msg, "content", json_text(text, n));
        json_object_set_new(choice, "message", msg);
    } else {
        json_object_set_new(choice, "text", json_text(text, n));
    }
    json_object_set_new(choice, "logprobs", or_null(logprobs));
    json_object_set_new(choice, "finish_reason", json_string(finish));
    json_t *choices = json_array();
    json_array_append_new(choices, choice);
    json_object_set_new(o, "choices", choices);
    json_object_set_new(o, "usage", or_null(usage));
    return o;
}

json_t *reply_chunk_delta(const struct reply *rp, json_t *delta, json_t *logprobs, const char *finish) {
    json_t *o = reply_head(rp, true);
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    json_object_set_new(choice, "delta", delta ? delta : json_object());
    json_object_set_new(choice, "logprobs", or_null(logprobs));
    json_object_set_new(choice, "finish_reason", finish ? json_string(finish) : json_null());
    json_t *choices = json_array();
    json_array_append_new(choices, choice);
    json_object_set_new(o, "choices", choices);
    if (rp->include_usage) json_object_set_new(o, "usage", json_null());
    return o;
}

json_t *reply_full_message(const struct reply *rp, json_t *message, json_t *logprobs, const char *finish,
                           json_t *usage) {
    json_t *o = reply_head(rp, false);
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    json_object_set_new(choice, "message", message);
    json_object_set_new(choice, "logprobs", or_null(logprobs));
    json_object_set_new(choice, "finish_reason", json_string(finish));
    json_t *choices = json_array();
    json_array_append_new(choices, choice);
    json_object_set_new(o, "choices", choices);
    json_object_set_new(o, "usage", or_null(usage));
    return o;
}
