// `lumen serve`: libmicrohttpd in thread-per-connection mode, routing, API key, the
// OpenAI generation routes (whole answers and server-sent events), /health, /metrics,
// /v1/models, /tokenize, /detokenize and the embedded web page. The engine thread owns
// the model; every HTTP thread parses, queues, then waits on its own job (job.h).
#define _GNU_SOURCE
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "assets.h"
#include "job.h"
#include "metrics.h"
#include "reply.h"
#include "util.h"

// ================================================================ types

enum srv_state { SRV_LOADING, SRV_READY, SRV_STOPPING };

#define SRV_SNDBUF (128 * 1024) // bytes of a connection's kernel send buffer

struct server {
    const struct lm_server_opts *o;
    struct MHD_Daemon *d;
    atomic_int state;
    atomic_bool stopping;
    struct lm_model *m;
    struct lm_model *dm;       // -md: the draft model, or NULL
    struct lm_engine *e;
    const struct lm_tokenizer *tok;
    int32_t n_vocab, n_ctx, kv_tokens, n_ctx_train;
    enum lm_chat_template tmpl;
    const char *tmpl_source;
    char model_id[256];
    char url[300];
    struct metrics *metrics;
    long long started;
    atomic_uint_fast64_t next_id;
    uint64_t salt;
};

// A generation request (completions or chat) on its HTTP thread.
struct run {
    struct api_request req;
    struct gen gen;
    struct reply rp;
    struct job *job;
    int32_t *prompt;
    int32_t n_prompt;
    struct job_ev ev[64];
    int32_t *top_tok;
    float *top_lp;
    struct sbuf text;    // released text not sent yet (stream: this chunk; else the answer)
    struct sbuf out;     // stream: SSE bytes not handed to MHD yet
    size_t out_off;
    bool submitted, sent_first, over, ended, failed;
    const char *finish;  // "stop" / "length" once over without failure
    enum metrics_finish mf;
    char note[320];      // why it ended abnormally (log line)
    struct job_state st;
    uint64_t t_first, t_prev;
    bool queue_seen;
};

// One HTTP request (MHD's con_cls), freed when MHD reports it complete.
struct conn {
    struct server *s;
    enum metrics_route route;
    char method[8];
    char path[96];
    uint64_t t_arrive;
    int fd;
    struct sbuf body;
    bool too_large, answered;
    int status;
    char id[24];
    char err[200];       // the error answered (log line)
    struct run *run;
};

// ================================================================ small helpers

static uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t next_random(struct server *s) {
    return splitmix(s->salt ^ (atomic_fetch_add(&s->next_id, 1) * 0x2545f4914f6cdd1dull));
}

static bool key_matches(const char *want, const char *got) {
    const size_t n = strlen(want), m = got ? strlen(got) : 0;
    unsigned diff = n != m;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)want[i] ^ (unsigned char)(i < m ? got[i] : 0);
    return diff == 0; // the same time whatever the first wrong byte
}

static enum MHD_Result queue(struct conn *c, struct MHD_Connection *mc, int status,
                             struct MHD_Response *resp) {
    c->status = status;
    c->answered = true;
    const enum MHD_Result r = MHD_queue_response(mc, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return r;
}

// Answers with a malloc'd body (taken over; NULL = out of memory -> 500).
static enum MHD_Result send_body(struct conn *c, struct MHD_Connection *mc, int status, char *body,
                                 const char *type) {
    if (!body) {
        static char k_oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\","
                              "\"param\":null,\"code\":\"out_of_memory\"}}";
        struct MHD_Response *r = MHD_create_response_from_buffer(strlen(k_oom), k_oom, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Content-Type", "application/json");
        return queue(c, mc, 500, r);
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", type);
    return queue(c, mc, status, r);
}

static enum MHD_Result send_json(struct conn *c, struct MHD_Connection *mc, int status, json_t *j) {
    char *s = j ? json_dumps(j, SRV_JSON_FLAGS) : NULL;
    json_decref(j);
    return send_body(c, mc, status, s, "application/json");
}

static enum MHD_Result send_error(struct conn *c, struct MHD_Connection *mc, const struct api_error *e) {
    snprintf(c->err, sizeof c->err, "%s: %.160s", e->code ? e->code : e->type, e->message);
    char *s = api_error_json(e);
    if (!s) return send_body(c, mc, 500, NULL, NULL);
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (e->status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    if (e->status == 429) MHD_add_response_header(r, "Retry-After", "1");
    if (e->status == 405)
        MHD_add_response_header(r, "Allow", c->route == MR_COMPLETIONS || c->route == MR_CHAT ||
                                                    c->route == MR_TOKENIZE || c->route == MR_DETOKENIZE
                                                ? "POST" : "GET, HEAD");
    return queue(c, mc, e->status, r);
}

static enum MHD_Result fail(struct conn *c, struct MHD_Connection *mc, int status, const char *type,
                            const char *code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static enum MHD_Result fail(struct conn *c, struct MHD_Connection *mc, int status, const char *type,
                            const char *code, const char *fmt, ...) {
    struct api_error e;
    char msg[sizeof e.message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    api_fail(&e, status, type, code, NULL, "%s", msg);
    return send_error(c, mc, &e);
}

static enum MHD_Result not_ready(struct conn *c, struct MHD_Connection *mc) {
    if (atomic_load(&c->s->state) == SRV_LOADING)
        return fail(c, mc, 503, "unavailable_error", "loading", "Loading model");
    return fail(c, mc, 503, "unavailable_error", "shutting_down", "The server is shutting down");
}

// ================================================================ routes

struct route {
    const char *path;
    enum metrics_route mr;
    bool post;    // else GET (and HEAD)
    bool open;    // answered without the API key
};

static const struct route k_routes[] = {
    {"/v1/completions", MR_COMPLETIONS, true, false},
    {"/completions", MR_COMPLETIONS, true, false},
    {"/v1/chat/completions", MR_CHAT, true, false},
    {"/chat/completions", MR_CHAT, true, false},
    {"/v1/models", MR_MODELS, false, false},
    {"/models", MR_MODELS, false, false},
    {"/health", MR_HEALTH, false, true},
    {"/v1/health", MR_HEALTH, false, true},
    {"/metrics", MR_METRICS, false, false},
    {"/tokenize", MR_TOKENIZE, true, false},
    {"/detokenize", MR_DETOKENIZE, true, false},
};

static const struct lm_srv_asset *find_asset(const char *path) {
    if (!strcmp(path, "/")) path = "/index.html";
    for (size_t i = 0; i < lm_srv_n_assets; i++)
        if (!strcmp(lm_srv_assets[i].path, path)) return &lm_srv_assets[i];
    return NULL;
}

// ================================================================ generation

static const char *finish_name(enum lm_finish f) {
    return f == LM_FINISH_EOG ? "stop" : "length"; // LENGTH and CONTEXT: "length" (as vLLM)
}

// Takes what the job has delivered: metrics per token, text through the stop-string
// filter into r->text. Sets r->over when the generation is finished for the client.
static void run_pump(struct conn *c) {
    struct server *s = c->s;
    struct run *r = c->run;
    const int32_t nt = r->req.logprobs ? r->req.top_logprobs : 0;
    const int32_t n = job_take(r->job, r->ev, r->top_tok, r->top_lp, 64, &r->st);
    if (!r->queue_seen && r->st.t_admit) {
        r->queue_seen = true;
        metrics_observe(s->metrics, MH_QUEUE, (double)(r->st.t_admit - r->st.t_submit) / 1e9);
    }
    for (int32_t i = 0; i < n && !r->over; i++) {
        const struct job_ev *ev = &r->ev[i];
        if (r->gen.n_tokens == 0) {
            r->t_first = ev->t_ns;
            metrics_observe(s->metrics, MH_TTFT, (double)(ev->t_ns - c->t_arrive) / 1e9);
        } else {
            metrics_observe(s->metrics, MH_ITL, (double)(ev->t_ns - r->t_prev) / 1e9);
        }
        r->t_prev = ev->t_ns;
        const struct gen_tok t = {.token = ev->token, .logprob = ev->logprob, .n_top = ev->n_top,
                                  .top_tok = r->top_tok + (size_t)i * nt, .top_lp = r->top_lp + (size_t)i * nt};
        if (gen_token(&r->gen, &t, &r->text)) { // a stop string: the answer is complete
            job_cancel(r->job);
            r->over = true;
            r->finish = "stop";
            r->mf = MF_STOP;
        }
    }
    if (r->gen.oom || r->text.oom) {
        job_cancel(r->job);
        r->over = r->failed = true;
        r->mf = MF_ERROR;
        snprintf(r->note, sizeof r->note, "out of memory");
        return;
    }
    if (r->over || !r->st.done) return;
    r->over = true;
    if (r->st.overflow) {
        r->failed = true;
        r->mf = MF_CANCELLED;
        snprintf(r->note, sizeof r->note, "cancelled: the client read too slowly");
    } else if (r->st.finish == LM_FINISH_CANCELLED) {
        r->failed = true;
        r->mf = MF_CANCELLED;
        snprintf(r->note, sizeof r->note, "cancelled: the server is shutting down");
    } else if (r->st.finish == LM_FINISH_ERROR) {
        r->failed = true;
        r->mf = MF_ERROR;
        snprintf(r->note, sizeof r->note, "error: %.280s", r->st.error);
    } else {
        gen_finish(&r->gen, &r->text);
        r->finish = finish_name(r->st.finish);
        r->mf = r->st.finish == LM_FINISH_EOG ? MF_STOP : MF_LENGTH;
    }
}

static json_t *run_usage(const struct run *r) {
    return reply_usage(r->n_prompt, r->gen.n_tokens, r->st.n_cached);
}

static void sse(struct run *r, json_t *j) {
    char *s = j ? json_dumps(j, SRV_JSON_FLAGS) : NULL;
    json_decref(j);
    if (!s) {
        r->out.oom = true;
        return;
    }
    sbuf_puts(&r->out, "data: ");
    sbuf_puts(&r->out, s);
    sbuf_puts(&r->out, "\n\n");
    free(s);
}

// Turns what the last pump produced into SSE events; on the end, the closing chunk (the
// only one with a finish_reason), the usage chunk if asked, and [DONE].
static void stream_emit(struct run *r) {
    const bool chat = r->req.kind == API_CHAT;
    json_t *lp = gen_take_logprobs(&r->gen);
    if (r->text.n > 0 || lp) {
        sse(r, reply_chunk(&r->rp, r->text.p, r->text.n, chat && !r->sent_first, lp, NULL));
        r->sent_first = true;
        sbuf_consume(&r->text, r->text.n);
    }
    if (!r->over) return;
    if (r->failed) {
        struct api_error e;
        api_fail(&e, 500, "server_error", "generation_failed", NULL, "%s", r->note);
        char *s = api_error_json(&e);
        if (s) {
            sbuf_puts(&r->out, "data: ");
            sbuf_puts(&r->out, s);
            sbuf_puts(&r->out, "\n\n");
            free(s);
        }
    } else {
        sse(r, reply_chunk(&r->rp, "", 0, chat && !r->sent_first, NULL, r->finish));
        if (r->rp.include_usage) sse(r, reply_usage_chunk(&r->rp, run_usage(r)));
    }
    sbuf_puts(&r->out, "data: [DONE]\n\n");
    r->ended = true;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    struct conn *c = cls;
    struct run *r = c->run;
    for (;;) {
        if (r->out.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (r->out_off < r->out.n) {
            size_t n = r->out.n - r->out_off;
            if (n > max) n = max;
            memcpy(buf, r->out.p + r->out_off, n);
            r->out_off += n;
            if (r->out_off == r->out.n) {
                sbuf_consume(&r->out, r->out.n);
                r->out_off = 0;
            }
            return (ssize_t)n;
        }
        if (r->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        const enum job_wait w = job_wait(r->job, c->fd, &c->s->stopping);
        if (w != JOB_READY) {
            job_cancel(r->job);
            r->over = r->failed = true;
            r->mf = MF_CANCELLED;
            snprintf(r->note, sizeof r->note, w == JOB_CLIENT_GONE ? "cancelled: the client disconnected"
                                                                   : "cancelled: the server is shutting down");
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        run_pump(c);
        if (r->over && r->st.overflow) return MHD_CONTENT_READER_END_WITH_ERROR; // too slow: cut off
        stream_emit(r);
    }
}

// The prompt's tokens: a completions prompt as text (special tokens parsed, BOS added as
// the vocabulary says, like llama-server) or ids as given; chat messages through the
// chat template.
static bool run_prompt(struct server *s, struct run *r, struct api_error *e) {
    const struct api_request *q = &r->req;
    if (q->kind == API_COMPLETION && q->has_prompt_ids) {
        r->prompt = malloc((size_t)(q->n_prompt_ids ? q->n_prompt_ids : 1) * sizeof *r->prompt);
        if (!r->prompt) return api_fail(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
        memcpy(r->prompt, q->prompt_ids, (size_t)q->n_prompt_ids * sizeof *r->prompt);
        r->n_prompt = q->n_prompt_ids;
    } else {
        char *text = NULL;
        size_t len = 0;
        const char *src = q->prompt;
        if (q->kind == API_CHAT) {
            struct lm_chat_msg *msgs = calloc(q->n_msgs, sizeof *msgs);
            if (!msgs) return api_fail(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
            for (size_t i = 0; i < q->n_msgs; i++) msgs[i] = (struct lm_chat_msg){q->msgs[i].role, q->msgs[i].content};
            const enum lm_status st = lm_chat_apply(s->tmpl, msgs, q->n_msgs, true, &text, &len);
            free(msgs);
            if (st != LM_OK)
                return api_fail(e, 400, "invalid_request_error", "invalid_value", "messages", "%s",
                                lm_error_msg());
            src = text;
        } else {
            len = q->prompt_len;
        }
        int32_t *ids = NULL;
        size_t n = 0;
        const enum lm_status st = lm_tokenize(s->tok, src ? src : "", len, true, true, &ids, &n);
        free(text);
        if (st != LM_OK)
            return api_fail(e, 400, "invalid_request_error", "invalid_value", q->kind == API_CHAT ? "messages" : "prompt",
                            "%s", lm_error_msg());
        if (n > INT32_MAX / 2) {
            free(ids);
            return api_fail(e, 400, "invalid_request_error", "context_length_exceeded", "prompt",
                            "the prompt is %zu tokens", n);
        }
        r->prompt = ids;
        r->n_prompt = (int32_t)n;
    }
    if (r->n_prompt == 0)
        return api_fail(e, 400, "invalid_request_error", "invalid_value", "prompt",
                        "the prompt is empty (no tokens)");
    return true;
}

static enum MHD_Result handle_generate(struct conn *c, struct MHD_Connection *mc, enum api_kind kind) {
    struct server *s = c->s;
    struct run *r = c->run = calloc(1, sizeof *c->run);
    if (!r) return send_body(c, mc, 500, NULL, NULL);
    struct api_error e;
    if (!api_parse_generate(c->body.p, c->body.n, kind, s->n_vocab, &r->req, &e)) return send_error(c, mc, &e);
    if (!run_prompt(s, r, &e)) return send_error(c, mc, &e);
    const struct api_request *q = &r->req;
    // the request must fit: prompt + max_tokens within the context and the KV pool
    const int32_t max_tokens = q->max_tokens_given ? q->max_tokens : kind == API_COMPLETION ? 16 : 0;
    const int32_t limit = s->n_ctx < s->kv_tokens ? s->n_ctx : s->kv_tokens;
    if ((int64_t)r->n_prompt + (max_tokens ? max_tokens : 1) > limit)
        return fail(c, mc, 400, "invalid_request_error", "context_length_exceeded",
                    "This request needs %lld tokens (prompt %d + max_tokens %d) but a request holds at "
                    "most %d (context %d tokens, KV pool %d tokens)",
                    (long long)r->n_prompt + (max_tokens ? max_tokens : 1), r->n_prompt,
                    max_tokens ? max_tokens : 1, limit, s->n_ctx, s->kv_tokens);
    struct lm_request_params rp = lm_request_params_default();
    rp.sampling = q->sampling;
    if (!q->seed_given) rp.sampling.seed = next_random(s);
    rp.max_tokens = max_tokens;
    rp.ignore_eos = q->ignore_eos;
    rp.n_logprobs = api_n_logprobs(q);
    rp.bias_tokens = q->bias_tokens;
    rp.bias_values = q->bias_values;
    rp.n_bias = q->n_bias;
    rp.lookup = q->lookup_given ? q->lookup : s->o->lookup;
    rp.draft_max = q->draft_max ? q->draft_max : s->o->draft_max;
    rp.use_draft = q->draft_model_given ? q->draft_model : s->dm != NULL;

    const int32_t nt = q->logprobs ? q->top_logprobs : 0;
    r->job = job_new(s->e, s->o->stream_buffer, nt);
    if (nt > 0) {
        r->top_tok = malloc(64 * (size_t)nt * sizeof *r->top_tok);
        r->top_lp = malloc(64 * (size_t)nt * sizeof *r->top_lp);
    }
    if (!r->job || (nt > 0 && (!r->top_tok || !r->top_lp)) || !gen_init(&r->gen, s->tok, &r->req))
        return send_body(c, mc, 500, NULL, NULL);
    r->rp.kind = kind;
    snprintf(r->rp.id, sizeof r->rp.id, "%s-%s", kind == API_CHAT ? "chatcmpl" : "cmpl", c->id);
    r->rp.model = s->model_id;
    r->rp.created = (long long)time(NULL);
    r->rp.include_usage = q->stream && q->include_usage;

    const enum lm_status st = job_submit(r->job, r->prompt, r->n_prompt, &rp);
    if (st == LM_ERR_BUSY)
        return fail(c, mc, 429, "rate_limit_error", "queue_full",
                    "The server is busy: %d requests are queued already; retry later",
                    s->o->ep.max_waiting);
    if (st == LM_ERR_ARG) return fail(c, mc, 400, "invalid_request_error", "invalid_value", "%s", lm_error_msg());
    if (st != LM_OK) return fail(c, mc, 500, "server_error", "submit_failed", "%s", lm_error_msg());
    r->submitted = true;
    metrics_tokens(s->metrics, r->n_prompt, 0);

    if (q->stream) {
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 8192, stream_reader,
                                                                      c, NULL);
        if (!resp) {
            job_cancel(r->job);
            return send_body(c, mc, 500, NULL, NULL);
        }
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        return queue(c, mc, 200, resp);
    }
    // a whole answer: wait here (this connection's own thread), watching the client
    while (!r->over) {
        const enum job_wait w = job_wait(r->job, c->fd, &s->stopping);
        if (w != JOB_READY) {
            job_cancel(r->job);
            r->over = r->failed = true;
            r->mf = MF_CANCELLED;
            if (w == JOB_CLIENT_GONE) {
                snprintf(r->note, sizeof r->note, "cancelled: the client disconnected");
                c->status = 499;
                return MHD_NO; // close the connection: nobody is reading
            }
            snprintf(r->note, sizeof r->note, "cancelled: the server is shutting down");
            return fail(c, mc, 503, "unavailable_error", "shutting_down", "The server is shutting down");
        }
        run_pump(c);
    }
    r->ended = true;
    if (r->failed)
        return fail(c, mc, r->mf == MF_CANCELLED ? 503 : 500, "server_error", "generation_failed", "%s",
                    r->note);
    return send_json(c, mc, 200, reply_full(&r->rp, r->text.p, r->text.n, gen_take_logprobs(&r->gen),
                                            r->finish, run_usage(r)));
}

static void run_free(struct run *r) {
    if (!r) return;
    api_request_free(&r->req);
    gen_free(&r->gen);
    job_unref(r->job);
    free(r->prompt);
    free(r->top_tok);
    free(r->top_lp);
    sbuf_free(&r->text);
    sbuf_free(&r->out);
    free(r);
}

// ================================================================ other routes

static enum MHD_Result handle_health(struct conn *c, struct MHD_Connection *mc) {
    if (atomic_load(&c->s->state) != SRV_READY) return not_ready(c, mc);
    return send_body(c, mc, 200, strdup("{\"status\":\"ok\"}"), "application/json");
}

static enum MHD_Result handle_metrics(struct conn *c, struct MHD_Connection *mc) {
    struct server *s = c->s;
    struct lm_engine_stats st;
    const bool ready = atomic_load(&s->state) == SRV_READY;
    if (ready) lm_engine_stats(s->e, &st); // a short lock the engine never holds across a step
    return send_body(c, mc, 200, metrics_render(s->metrics, ready ? &st : NULL),
                     "text/plain; version=0.0.4; charset=utf-8");
}

static enum MHD_Result handle_models(struct conn *c, struct MHD_Connection *mc) {
    struct server *s = c->s;
    json_t *meta = json_object();
    json_object_set_new(meta, "architecture", json_string(lm_model_arch(s->m)));
    json_object_set_new(meta, "n_vocab", json_integer(s->n_vocab));
    json_object_set_new(meta, "n_ctx_train", json_integer(s->n_ctx_train));
    json_object_set_new(meta, "n_ctx", json_integer(s->n_ctx));
    json_object_set_new(meta, "kv_pool_tokens", json_integer(s->kv_tokens));
    json_object_set_new(meta, "parallel", json_integer(s->o->ep.max_running));
    json_object_set_new(meta, "chat_template", json_string(lm_chat_template_name(s->tmpl)));
    json_object_set_new(meta, "chat_template_source", json_string(s->tmpl_source));
    json_t *m = json_object();
    json_object_set_new(m, "id", json_text(s->model_id, strlen(s->model_id)));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer(s->started));
    json_object_set_new(m, "owned_by", json_string("lumen"));
    json_object_set_new(m, "meta", meta);
    json_t *data = json_array();
    json_array_append_new(data, m);
    json_t *root = json_object();
    json_object_set_new(root, "object", json_string("list"));
    json_object_set_new(root, "data", data);
    return send_json(c, mc, 200, root);
}

static enum MHD_Result handle_tokenize(struct conn *c, struct MHD_Connection *mc) {
    struct server *s = c->s;
    struct api_tokenize t;
    struct api_error e;
    if (!api_parse_tokenize(c->body.p, c->body.n, &t, &e)) return send_error(c, mc, &e);
    int32_t *ids = NULL;
    size_t n = 0;
    const enum lm_status st = lm_tokenize(s->tok, t.content, t.len, t.add_special, t.parse_special, &ids, &n);
    free(t.content);
    if (st != LM_OK) return fail(c, mc, 400, "invalid_request_error", "invalid_value", "%s", lm_error_msg());
    json_t *arr = json_array();
    const size_t cap = lm_tokenizer_max_piece(s->tok) + 8;
    char *piece = t.with_pieces ? malloc(cap) : NULL;
    for (size_t i = 0; i < n; i++) {
        if (!t.with_pieces) {
            json_array_append_new(arr, json_integer(ids[i]));
            continue;
        }
        json_t *o = json_object();
        json_object_set_new(o, "id", json_integer(ids[i]));
        size_t k = piece ? lm_token_to_piece(s->tok, ids[i], piece, cap, true) : 0;
        if (k > cap) k = cap;
        if (utf8_valid_prefix(piece, k) == k) { // llama-server: text if valid UTF-8, else the bytes
            json_object_set_new(o, "piece", json_stringn(piece ? piece : "", k));
        } else {
            json_t *b = json_array();
            for (size_t j = 0; j < k; j++) json_array_append_new(b, json_integer((unsigned char)piece[j]));
            json_object_set_new(o, "piece", b);
        }
        json_array_append_new(arr, o);
    }
    free(piece);
    free(ids);
    json_t *root = json_object();
    json_object_set_new(root, "tokens", arr);
    return send_json(c, mc, 200, root);
}

static enum MHD_Result handle_detokenize(struct conn *c, struct MHD_Connection *mc) {
    struct server *s = c->s;
    int32_t *ids = NULL, n = 0;
    struct api_error e;
    if (!api_parse_detokenize(c->body.p, c->body.n, s->n_vocab, &ids, &n, &e)) return send_error(c, mc, &e);
    struct lm_detok dt;
    lm_detok_init(&dt, true);
    const size_t cap = lm_tokenizer_max_piece(s->tok) + 8;
    char *piece = malloc(cap);
    struct sbuf text = {0};
    sbuf_append(&text, "", 0);
    for (int32_t i = 0; i < n && piece; i++) {
        size_t k = 0;
        if (lm_detok_push(s->tok, &dt, ids[i], piece, cap, &k) == LM_OK) sbuf_append(&text, piece, k);
    }
    if (piece) sbuf_append(&text, piece, lm_detok_flush(&dt, piece, cap));
    free(piece);
    free(ids);
    json_t *root = json_object();
    json_object_set_new(root, "content", json_text(text.p, text.n));
    sbuf_free(&text);
    return send_json(c, mc, 200, root);
}

static enum MHD_Result handle_asset(struct conn *c, struct MHD_Connection *mc, const struct lm_srv_asset *a) {
    struct MHD_Response *r = MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Content-Type", a->mime);
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    return queue(c, mc, 200, r);
}

// ================================================================ MHD callbacks

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    (void)version;
    struct server *s = cls;
    struct conn *c = *con_cls;
    if (!c) { // first call: headers only
        c = calloc(1, sizeof *c);
        if (!c) return MHD_NO;
        *con_cls = c;
        c->s = s;
        c->t_arrive = srv_now_ns();
        c->fd = -1;
        c->route = MR_OTHER;
        snprintf(c->method, sizeof c->method, "%s", method);
        snprintf(c->path, sizeof c->path, "%s", url);
        const uint64_t n = atomic_fetch_add(&s->next_id, 1);
        snprintf(c->id, sizeof c->id, "%08x%06llx", (unsigned)(s->salt >> 32), (unsigned long long)(n & 0xffffff));
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci) {
            c->fd = ci->connect_fd;
            // A bounded kernel send buffer (no autotuning to megabytes): a client that stops
            // reading fills it, then the request's token queue, then is cut off.
            const int sndbuf = SRV_SNDBUF;
            setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
        }

        const bool is_get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
        const struct route *rt = NULL;
        for (size_t i = 0; i < sizeof k_routes / sizeof k_routes[0]; i++)
            if (!strcmp(k_routes[i].path, url)) rt = &k_routes[i];
        const struct lm_srv_asset *asset = !rt && is_get ? find_asset(url) : NULL;
        if (asset) {
            c->route = MR_STATIC;
            return handle_asset(c, mc, asset); // the page is public: it asks for the key itself
        }
        if (!rt) return fail(c, mc, 404, "not_found_error", "not_found", "No route for %s %.80s", method, url);
        c->route = rt->mr;
        if (rt->post ? strcmp(method, "POST") != 0 : !is_get)
            return fail(c, mc, 405, "invalid_request_error", "method_not_allowed", "%s %.80s: use %s",
                        method, url, rt->post ? "POST" : "GET");
        if (s->o->api_key && !rt->open) {
            const char *auth = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Authorization");
            const char *key = auth && !strncasecmp(auth, "Bearer ", 7) ? auth + 7 : NULL;
            while (key && *key == ' ') key++;
            if (!key || !key_matches(s->o->api_key, key))
                return fail(c, mc, 401, "authentication_error", "invalid_api_key",
                            key ? "Incorrect API key provided" : "Missing API key: send 'Authorization: "
                                                                 "Bearer KEY'");
        }
        // An oversized body is read and dropped, then answered 413 (a client that sends its
        // body before reading would otherwise see a reset, not the answer); answered at once
        // when the client waits for "100 Continue" or the body is far too large to read.
        const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        const char *expect = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
        const unsigned long long len = cl ? strtoull(cl, NULL, 10) : 0;
        if (len > s->o->max_body) {
            if ((expect && !strcasecmp(expect, "100-continue")) || len / 16 > s->o->max_body)
                return fail(c, mc, 413, "invalid_request_error", "request_too_large",
                            "The request body is %llu bytes; the limit is %zu", len, s->o->max_body);
            c->too_large = true;
        }
        return MHD_YES;
    }
    if (*upload_data_size) { // body data: kept up to the limit
        if (!c->answered && !c->too_large) {
            if (c->body.n + *upload_data_size > c->s->o->max_body) {
                c->too_large = true;
                sbuf_free(&c->body);
            } else if (!sbuf_append(&c->body, upload_data, *upload_data_size)) {
                c->too_large = true; // out of memory reads as too large
                sbuf_free(&c->body);
            }
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (c->answered) return MHD_YES;
    if (c->too_large)
        return fail(c, mc, 413, "invalid_request_error", "request_too_large",
                    "The request body exceeds the limit of %zu bytes", s->o->max_body);
    if (c->route == MR_HEALTH) return handle_health(c, mc);
    if (c->route == MR_METRICS) return handle_metrics(c, mc);
    if (atomic_load(&s->state) != SRV_READY) return not_ready(c, mc);
    switch (c->route) {
    case MR_COMPLETIONS: return handle_generate(c, mc, API_COMPLETION);
    case MR_CHAT: return handle_generate(c, mc, API_CHAT);
    case MR_MODELS: return handle_models(c, mc);
    case MR_TOKENIZE: return handle_tokenize(c, mc);
    case MR_DETOKENIZE: return handle_detokenize(c, mc);
    default: return fail(c, mc, 404, "not_found_error", "not_found", "No route for %s %.80s", method, url);
    }
}

// One log line and the metrics of every request; a generation still running (the client
// went away, or MHD gave up on the connection) is cancelled here.
static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)mc;
    struct server *s = cls;
    struct conn *c = *con_cls;
    if (!c) return;
    *con_cls = NULL;
    const uint64_t now = srv_now_ns();
    struct run *r = c->run;
    if (r && r->submitted && !r->ended) { // MHD ended it: the client left, or timed out
        job_cancel(r->job);
        job_take(r->job, r->ev, NULL, NULL, 0, &r->st); // the engine's last word on it
        if (!r->failed) {
            r->failed = true;
            r->mf = MF_CANCELLED;
            snprintf(r->note, sizeof r->note, "%s",
                     r->st.overflow ? "cancelled: the client read too slowly"
                     : toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "cancelled: the connection timed out"
                                                                     : "cancelled: the client disconnected");
        }
    }
    // 499: the client went away before the answer was complete (a client cut off for
    // reading too slowly keeps its 200: the server ended it)
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && c->status < 400 &&
        (!r || !r->ended || r->failed) && !(r && r->st.overflow))
        c->status = 499;
    if (c->status == 0) c->status = 499; // no answer was queued: the client left first
    metrics_request(s->metrics, c->route, c->status);
    char line[1024];
    if (r && r->submitted) {
        metrics_tokens(s->metrics, 0, r->gen.n_tokens);
        metrics_finish(s->metrics, r->mf);
        metrics_observe(s->metrics, MH_E2E, (double)(now - c->t_arrive) / 1e9);
        const int32_t ng = r->gen.n_tokens;
        const double ttft = r->t_first ? (double)(r->t_first - c->t_arrive) / 1e6 : 0.0;
        const double tps = ng > 1 && r->t_prev > r->t_first ? (ng - 1) / ((double)(r->t_prev - r->t_first) / 1e9) : 0.0;
        const double qms = r->st.t_admit ? (double)(r->st.t_admit - r->st.t_submit) / 1e6 : 0.0;
        snprintf(line, sizeof line, "%s %s %s %d | prompt %d tok (%d cached) | gen %d tok | TTFT %.1f ms "
                 "| %.1f tok/s | queue %.1f ms | %.1f ms | %s%s", r->rp.id, c->method, c->path, c->status,
                 r->n_prompt, r->st.n_cached, ng, ttft, tps, qms, (double)(now - c->t_arrive) / 1e6,
                 r->failed ? r->note : r->finish ? r->finish : "-", r->req.stream ? " (stream)" : "");
    } else {
        snprintf(line, sizeof line, "req-%s %s %s %d | %.1f ms%s%s", c->id, c->method, c->path, c->status,
                 (double)(now - c->t_arrive) / 1e6, c->err[0] ? " | " : "", c->err);
    }
    fprintf(stderr, "lumen serve: %s\n", line);
    run_free(r);
    sbuf_free(&c->body);
    free(c);
}

// ================================================================ start-up, shutdown

static int listen_on(const char *host, int port, char *url, size_t url_cap) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    const int gai = getaddrinfo(host, ps, &hints, &ai);
    if (gai != 0) {
        fprintf(stderr, "lumen serve: cannot resolve --host '%s': %s\n", host, gai_strerror(gai));
        return -1;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        const int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 128) != 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        fprintf(stderr, "lumen serve: cannot listen on %s:%d: %s\n", host, port, strerror(err));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    char addr[INET6_ADDRSTRLEN] = "?";
    int bound = port;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &in->sin_addr, addr, sizeof addr);
        bound = ntohs(in->sin_port);
        snprintf(url, url_cap, "http://%s:%d", addr, bound);
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof addr);
        bound = ntohs(in6->sin6_port);
        snprintf(url, url_cap, "http://[%s]:%d", addr, bound);
    }
    return fd;
}

// The chat template: --chat-template (a name or a file), else the model's own text, else
// the vocabulary's turn tokens / the architecture (lm_chat_template_detect); chatml last.
static int pick_template(struct server *s) {
    const char *want = s->o->chat_template;
    const char *arch = lm_model_arch(s->m);
    if (want) {
        s->tmpl = lm_chat_template_from_name(want);
        s->tmpl_source = "--chat-template";
        if (s->tmpl != LM_CHAT_TEMPLATE_NONE) return 0;
        FILE *f = fopen(want, "rb");
        if (!f) {
            fprintf(stderr, "lumen serve: --chat-template '%s' is neither a template name (gemma, llama3, "
                    "chatml) nor a readable file\n", want);
            return 2;
        }
        struct sbuf text = {0};
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0 && text.n < (1u << 20)) sbuf_append(&text, buf, n);
        fclose(f);
        s->tmpl = lm_chat_template_detect(s->tok, arch, text.p ? text.p : "");
        sbuf_free(&text);
        s->tmpl_source = "--chat-template file";
        if (s->tmpl == LM_CHAT_TEMPLATE_NONE) {
            fprintf(stderr, "lumen serve: --chat-template '%s': not a template lumen knows (gemma, llama3, "
                    "chatml)\n", want);
            return 2;
        }
        return 0;
    }
    const char *text = lm_model_chat_template(s->m);
    s->tmpl = lm_chat_template_detect(s->tok, arch, text);
    s->tmpl_source = text ? "the model's tokenizer.chat_template"
                          : "the architecture's turn format (the model has no chat template)";
    if (s->tmpl == LM_CHAT_TEMPLATE_NONE) {
        s->tmpl = LM_CHAT_TEMPLATE_CHATML;
        s->tmpl_source = text ? "fallback: the model's template is not one lumen knows"
                              : "fallback: no template and no known turn format";
    }
    return 0;
}

static void model_name(struct server *s) {
    if (s->o->alias) {
        snprintf(s->model_id, sizeof s->model_id, "%s", s->o->alias);
        return;
    }
    const char *p = strrchr(s->o->model_path, '/');
    snprintf(s->model_id, sizeof s->model_id, "%s", p ? p + 1 : s->o->model_path);
}

int lm_server_run(const struct lm_server_opts *o) {
    // SIGINT/SIGTERM are taken by sigwait below: block them before any thread starts
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct server *s = calloc(1, sizeof *s);
    if (!s) return 1;
    s->o = o;
    s->started = (long long)time(NULL);
    s->salt = splitmix((uint64_t)srv_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL));
    atomic_init(&s->state, SRV_LOADING);
    atomic_init(&s->stopping, false);
    atomic_init(&s->next_id, 1);
    s->metrics = metrics_new();
    int rc = 1;
    const int lfd = s->metrics ? listen_on(o->host, o->port, s->url, sizeof s->url) : -1;
    if (lfd < 0) goto out;
    s->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD, 0, NULL, NULL,
                            on_request, s, MHD_OPTION_LISTEN_SOCKET, lfd,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_connections,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->timeout_s,
                            MHD_OPTION_END);
    if (!s->d) {
        close(lfd);
        fprintf(stderr, "lumen serve: cannot start the HTTP server on %s\n", s->url);
        goto out;
    }
    fprintf(stderr, "lumen serve: loading %s (%s/health answers 503 until ready)\n", o->model_path, s->url);
    if (o->load_delay_ms > 0) {
        struct timespec ts = {o->load_delay_ms / 1000, (long)(o->load_delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (lm_model_load(&s->m, o->model_path, NULL) != LM_OK) {
        fprintf(stderr, "lumen serve: %s\n", lm_error_msg());
        goto stop;
    }
    s->tok = lm_model_tokenizer(s->m);
    s->n_vocab = lm_model_n_vocab(s->m);
    s->n_ctx_train = lm_model_n_ctx_train(s->m);
    model_name(s);
    if ((rc = pick_template(s)) != 0) goto stop;
    struct lm_engine_params ep = o->ep;
    if (ep.kv_tokens <= 0) ep.kv_tokens = 8192;
    ep.n_ctx = ep.kv_tokens < s->n_ctx_train ? ep.kv_tokens : s->n_ctx_train;
    if (o->draft_path) {
        if (lm_model_load(&s->dm, o->draft_path, NULL) != LM_OK) {
            fprintf(stderr, "lumen serve: %s\n", lm_error_msg());
            rc = 1;
            goto stop;
        }
        if (ep.n_ctx > lm_model_n_ctx_train(s->dm)) ep.n_ctx = lm_model_n_ctx_train(s->dm);
        ep.draft_model = s->dm;
    }
    if (lm_engine_init(&s->e, s->m, &ep) != LM_OK || lm_engine_start(s->e) != LM_OK) {
        fprintf(stderr, "lumen serve: %s\n", lm_error_msg());
        rc = 1;
        goto stop;
    }
    struct lm_engine_stats st;
    lm_engine_stats(s->e, &st);
    s->n_ctx = ep.n_ctx;
    s->kv_tokens = st.kv.n_blocks * st.kv.block_size / (s->dm ? 2 : 1); // a draft's blocks: as many again
    fprintf(stderr, "lumen serve: model %s (%s), context %d tokens per request, KV pool %d tokens, "
            "parallel %d, queue %d; chat template %s (%s)\n", s->model_id, lm_model_arch(s->m), s->n_ctx,
            s->kv_tokens, ep.max_running > 0 ? ep.max_running : 8, ep.max_waiting > 0 ? ep.max_waiting : 64,
            lm_chat_template_name(s->tmpl), s->tmpl_source);
    atomic_store(&s->state, SRV_READY);
    fprintf(stderr, "lumen serve: listening on %s\n", s->url);
    fflush(stderr);

    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "lumen serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    rc = 0;
stop:
    // new requests get 503, waiting HTTP threads cancel their jobs and return, then the
    // engine ends whatever is left
    atomic_store(&s->state, SRV_STOPPING);
    atomic_store(&s->stopping, true);
    MHD_stop_daemon(s->d);
    lm_engine_free(s->e);
    lm_model_free(s->dm);
    lm_model_free(s->m);
    if (rc == 0) fprintf(stderr, "lumen serve: stopped\n");
out:
    metrics_free(s->metrics);
    free(s);
    return rc;
}
