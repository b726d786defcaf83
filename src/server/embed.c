// POST /v1/embeddings (OpenAI's shape): the inputs tokenized (or taken as token ids), one
// engine request each (lm_request_params.embed) submitted while the engine takes them, so many
// inputs share its steps beside generation; the vectors as floats or base64, with usage.
// POST /v1/rerank (llama-server's / Jina's shape): one rank-pooled request per document on its
// rerank prompt (lm_rerank_tokens), the results best first.
#include "srv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The inputs as token ids (q->ids), each within the context: false with e set (400).
static bool embed_prepare(struct server *s, struct api_embed *q, struct api_error *e) {
    const enum lm_pooling p = lm_model_pooling(s->m);
    if (p != LM_POOLING_MEAN && p != LM_POOLING_CLS && p != LM_POOLING_LAST)
        return api_fail(e, 400, "invalid_request_error", "model_not_embedding", "model",
                        "This model has pooling '%s' (its pooling_type), not one that gives an "
                        "embedding: serve an embedding model (pooling mean, cls or last)",
                        lm_pooling_name(p));
    const int32_t n_embd = lm_model_n_embd(s->m);
    if (q->dimensions > n_embd)
        return api_fail(e, 400, "invalid_request_error", "invalid_value", "dimensions",
                        "'dimensions' is %d; this model's embeddings have %d", q->dimensions, n_embd);
    const int32_t limit = s->n_ctx < s->kv_tokens ? s->n_ctx : s->kv_tokens;
    for (int32_t i = 0; i < q->n; i++) {
        if (q->text[i]) { // as llama-server: BOS/EOS as the vocabulary says, special-token text parsed
            size_t n = 0;
            if (lm_tokenize(s->tok, q->text[i], q->text_len[i], true, true, &q->ids[i], &n) != LM_OK)
                return api_fail(e, 400, "invalid_request_error", "invalid_value", "input",
                                "input %d: %s", i, lm_error_msg());
            q->n_ids[i] = (int32_t)n;
            free(q->text[i]);
            q->text[i] = NULL;
        }
        if (q->n_ids[i] == 0)
            return api_fail(e, 400, "invalid_request_error", "invalid_value", "input",
                            "input %d has no tokens", i);
        if (q->n_ids[i] > limit)
            return api_fail(e, 400, "invalid_request_error", "context_length_exceeded", "input",
                            "input %d has %d tokens, beyond the context of %d tokens", i, q->n_ids[i], limit);
    }
    return true;
}

static const char k_b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// v as little-endian float32 bytes in base64 (OpenAI's encoding_format "base64")
static void put_base64(struct sbuf *b, const float *v, int32_t n) {
    const size_t nb = (size_t)n * 4;
    const unsigned char *p = (const unsigned char *)v; // x86-64 and every target lumen runs on: little-endian
    char out[4];
    for (size_t i = 0; i < nb; i += 3) {
        const unsigned x = (unsigned)p[i] << 16 | (i + 1 < nb ? (unsigned)p[i + 1] << 8 : 0) |
                           (i + 2 < nb ? p[i + 2] : 0);
        out[0] = k_b64[x >> 18 & 63];
        out[1] = k_b64[x >> 12 & 63];
        out[2] = i + 1 < nb ? k_b64[x >> 6 & 63] : '=';
        out[3] = i + 2 < nb ? k_b64[x & 63] : '=';
        sbuf_append(b, out, 4);
    }
}

// The answer, written directly (a tree of 2048 x 1024 numbers would cost ~200 MB).
static char *embed_render(struct server *s, const struct api_embed *q, struct job **jobs) {
    struct sbuf b = {0};
    int64_t n_tok = 0;
    sbuf_puts(&b, "{\"object\":\"list\",\"data\":[");
    for (int32_t i = 0; i < q->n; i++) {
        const struct job *j = jobs[i];
        n_tok += q->n_ids[i];
        sbuf_printf(&b, "%s{\"object\":\"embedding\",\"index\":%d,\"embedding\":", i ? "," : "", i);
        if (q->base64) {
            sbuf_puts(&b, "\"");
            put_base64(&b, j->embd, j->n_embd);
            sbuf_puts(&b, "\"}");
            continue;
        }
        sbuf_puts(&b, "[");
        for (int32_t k = 0; k < j->n_embd; k++) sbuf_printf(&b, "%s%.9g", k ? "," : "", j->embd[k]);
        sbuf_puts(&b, "]}");
    }
    json_t *model = json_string(s->model_id);
    char *m = model ? json_dumps(model, JSON_ENCODE_ANY) : NULL;
    json_decref(model);
    sbuf_printf(&b, "],\"model\":%s,\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld}}",
                m ? m : "\"\"", (long long)n_tok, (long long)n_tok);
    free(m);
    metrics_tokens(s->metrics, n_tok, 0);
    if (b.oom) {
        sbuf_free(&b);
        return NULL;
    }
    return b.p;
}

// Submits the inputs while the engine takes them and waits for each in order. Returns 0, or
// the HTTP status of the failure with e set (429: the engine holds others and none of these;
// 499: the client left; 503: the server stops; 500: a request failed).
static int embed_run(struct conn *c, const struct api_embed *q, enum lm_pooling pooling, struct job **jobs,
                     struct api_error *e) {
    struct server *s = c->s;
    struct lm_request_params rp = lm_request_params_default();
    rp.embed = true;
    rp.pooling = pooling;
    rp.dimensions = q->dimensions;
    const int32_t n_embd = lm_model_n_embd(s->m);
    int32_t next = 0;
    for (int32_t done = 0; done < q->n;) {
        while (next < q->n) {
            struct job *j = job_new(s->e, 1, 0, c->fd);
            if (j && !(j->embd = malloc((size_t)n_embd * sizeof *j->embd))) job_unref(j), j = NULL;
            if (!j) return api_fail(e, 500, "server_error", "out_of_memory", "", "out of memory");
            j->embd_cap = n_embd;
            const enum lm_status st = job_submit(j, q->ids[next], q->n_ids[next], &rp);
            if (st == LM_ERR_BUSY) {
                job_unref(j);
                break;
            }
            jobs[next++] = j;
            if (st != LM_OK)
                return api_fail(e, 400, "invalid_request_error", "invalid_value", "input", "input %d: %s",
                                next - 1, lm_error_msg());
        }
        if (done == next)
            return api_fail(e, 429, "rate_limit_error", "queue_full", "", "The engine's queue is full; "
                            "retry later");
        const enum job_wait w = job_wait(jobs[done], s->stop_fd);
        if (w == JOB_CLIENT_GONE) return api_fail(e, 499, "invalid_request_error", "cancelled", "",
                                                  "the client disconnected");
        if (w == JOB_STOPPING) return api_fail(e, 503, "unavailable_error", "shutting_down", "",
                                               "The server is shutting down");
        struct job_state st;
        job_take(jobs[done], NULL, NULL, NULL, 0, &st);
        if (!st.done) continue;
        if (st.finish == LM_FINISH_CANCELLED)
            return api_fail(e, 503, "unavailable_error", "shutting_down", "", "The server is shutting down");
        if (st.finish != LM_FINISH_EOG || jobs[done]->n_embd == 0)
            return api_fail(e, 500, "server_error", "embedding_failed", "", "input %d: %s", done,
                            st.error[0] ? st.error : lm_finish_name(st.finish));
        done++;
    }
    return 0;
}

static void jobs_free(struct job **jobs, int32_t n) {
    for (int32_t i = 0; jobs && i < n; i++) {
        if (!jobs[i]) continue;
        job_cancel(jobs[i]); // nothing when it is done already
        job_unref(jobs[i]);
    }
    free(jobs);
}

enum MHD_Result srv_handle_embeddings(struct conn *c, struct MHD_Connection *mc) {
    struct server *s = c->s;
    struct api_embed q;
    struct api_error e;
    if (!api_parse_embed(c->body.p, c->body.n, s->n_vocab, &s->limits, &q, &e)) return srv_send_error(c, mc, &e);
    struct job **jobs = NULL;
    int status = 0;
    if (!embed_prepare(s, &q, &e)) status = 400;
    else if (!(jobs = calloc((size_t)q.n, sizeof *jobs)))
        status = 500, api_fail(&e, 500, "server_error", "out_of_memory", "", "out of memory");
    srv_parse_end(c); // the body's tree is gone; the inputs wait in the engine
    if (status == 0) status = embed_run(c, &q, LM_POOLING_UNSPECIFIED, jobs, &e);
    char *body = status == 0 ? embed_render(s, &q, jobs) : NULL;
    jobs_free(jobs, q.n);
    api_embed_free(&q);
    if (status == 0) return srv_send_body(c, mc, 200, body, "application/json");
    return srv_send_error(c, mc, &e);
}

// ================================================================ POST /v1/rerank

// The documents' prompts as token ids in p (p->n documents), each within the context.
static bool rerank_prepare(struct server *s, const struct api_rerank *q, struct api_embed *p,
                           struct api_error *e) {
    if (lm_model_pooling(s->m) != LM_POOLING_RANK || lm_model_n_cls_out(s->m) == 0)
        return api_fail(e, 400, "invalid_request_error", "model_not_reranker", "model",
                        "This model has pooling '%s' and %s classification head: serve a reranker "
                        "(pooling rank with cls.output, such as Qwen3-Reranker)",
                        lm_pooling_name(lm_model_pooling(s->m)), lm_model_n_cls_out(s->m) ? "a" : "no");
    memset(p, 0, sizeof *p);
    p->n = q->n;
    p->ids = calloc((size_t)q->n, sizeof *p->ids);
    p->n_ids = calloc((size_t)q->n, sizeof *p->n_ids);
    if (!p->ids || !p->n_ids) return api_fail(e, 500, "server_error", "out_of_memory", "", "out of memory");
    const int32_t limit = s->n_ctx < s->kv_tokens ? s->n_ctx : s->kv_tokens;
    for (int32_t i = 0; i < q->n; i++) {
        size_t n = 0;
        if (lm_rerank_tokens(s->m, q->query, q->query_len, q->doc[i], q->doc_len[i], &p->ids[i], &n) != LM_OK)
            return api_fail(e, 400, "invalid_request_error", "invalid_value", "documents", "document %d: %s",
                            i, lm_error_msg());
        p->n_ids[i] = (int32_t)n;
        if (n == 0 || (int64_t)n > limit)
            return api_fail(e, 400, "invalid_request_error", "context_length_exceeded", "documents",
                            "document %d's rerank prompt has %zu tokens; the context holds %d", i, n, limit);
    }
    return true;
}

// {"model", "object": "list", "usage", "results": [{"index", "relevance_score", "document"?}]}
// best first (ties in document order), the first top_n
static char *rerank_render(struct server *s, const struct api_rerank *q, const struct api_embed *p,
                           struct job **jobs) {
    int32_t *order = malloc((size_t)q->n * sizeof *order);
    if (!order) return NULL;
    int64_t n_tok = 0;
    for (int32_t i = 0; i < q->n; i++) {
        n_tok += p->n_ids[i];
        int32_t j = i;
        for (; j > 0 && jobs[order[j - 1]]->embd[0] < jobs[i]->embd[0]; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    json_t *root = json_object(), *res = json_array(), *usage = json_object();
    json_object_set_new(root, "model", json_string(s->model_id));
    json_object_set_new(root, "object", json_string("list"));
    json_object_set_new(usage, "prompt_tokens", json_integer(n_tok));
    json_object_set_new(usage, "total_tokens", json_integer(n_tok));
    json_object_set_new(root, "usage", usage);
    const int32_t top = q->top_n > 0 && q->top_n < q->n ? q->top_n : q->n;
    for (int32_t k = 0; k < top; k++) {
        json_t *r = json_object();
        json_object_set_new(r, "index", json_integer(order[k]));
        json_object_set_new(r, "relevance_score", json_real(jobs[order[k]]->embd[0]));
        if (q->return_documents) {
            json_t *d = json_object();
            json_object_set_new(d, "text", json_text(q->doc[order[k]], q->doc_len[order[k]]));
            json_object_set_new(r, "document", d);
        }
        json_array_append_new(res, r);
    }
    json_object_set_new(root, "results", res);
    free(order);
    metrics_tokens(s->metrics, n_tok, 0);
    char *out = json_dumps(root, SRV_JSON_FLAGS);
    json_decref(root);
    return out;
}

enum MHD_Result srv_handle_rerank(struct conn *c, struct MHD_Connection *mc) {
    struct server *s = c->s;
    struct api_rerank q;
    struct api_embed p = {0};
    struct api_error e;
    if (!api_parse_rerank(c->body.p, c->body.n, &s->limits, &q, &e)) return srv_send_error(c, mc, &e);
    struct job **jobs = NULL;
    int status = 0;
    if (!rerank_prepare(s, &q, &p, &e)) status = 400;
    else if (!(jobs = calloc((size_t)q.n, sizeof *jobs)))
        status = 500, api_fail(&e, 500, "server_error", "out_of_memory", "", "out of memory");
    srv_parse_end(c);
    if (status == 0) status = embed_run(c, &p, LM_POOLING_RANK, jobs, &e);
    char *body = status == 0 ? rerank_render(s, &q, &p, jobs) : NULL;
    jobs_free(jobs, q.n);
    api_embed_free(&p);
    api_rerank_free(&q);
    if (status == 0) return srv_send_body(c, mc, 200, body, "application/json");
    return srv_send_error(c, mc, &e);
}
