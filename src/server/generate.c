// The generation routes (/v1/completions, /v1/chat/completions, /v1/messages, /v1/responses):
// parse, tokenize, submit to the engine, then wait on the request's job and answer whole or as
// server-sent events (Anthropic's shapes: reply_messages.c; OpenAI Responses': reply_responses.c;
// one generation path for every dialect).
#include "srv.h"

#include <jansson.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
        const bool hit = gen_token(&r->gen, &t, &r->raw);
        srv_reason_feed(r, &r->raw, true); // reasoning apart from the content (reasoning_srv.c)
        if (hit) { // a stop string: the answer is complete
            job_cancel(r->job);
            r->over = true;
            r->finish = "stop";
            r->mf = MF_STOP;
            srv_reason_finish(r, &r->raw);
        }
    }
    if (r->gen.oom || r->text.oom || r->raw.oom || r->reasoning.oom || r->split.oom) {
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
    } else if (r->st.finish == LM_FINISH_CANCELLED) { // lm_engine_free: the server stops
        r->failed = r->shutdown = true;
        r->mf = MF_CANCELLED;
        snprintf(r->note, sizeof r->note, "cancelled: the server is shutting down");
    } else if (r->st.finish == LM_FINISH_ERROR) {
        r->failed = true;
        r->mf = MF_ERROR;
        snprintf(r->note, sizeof r->note, "error: %.280s", r->st.error);
    } else {
        gen_finish(&r->gen, &r->raw);
        srv_reason_finish(r, &r->raw);
        r->finish = finish_name(r->st.finish);
        r->mf = r->st.finish == LM_FINISH_EOG ? MF_STOP : MF_LENGTH;
        if (r->gen.oom || r->text.oom || r->reasoning.oom || r->split.oom) { // the held-back text could not be released: not a 200
            r->failed = true;
            r->mf = MF_ERROR;
            snprintf(r->note, sizeof r->note, "out of memory");
        }
    }
}

static json_t *run_usage(const struct run *r) {
    json_t *u = reply_usage(r->n_prompt, r->gen.n_tokens, r->st.n_cached);
    srv_reason_usage(r, u);
    return u;
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

// A chat stream's reasoning released since the last chunk: {"reasoning_content"} deltas
// (llama-server's), the role on the stream's first chunk.
static void stream_reasoning(struct run *r) {
    if (r->reasoning.n == 0) return;
    json_t *d = json_object();
    if (!r->sent_first) json_object_set_new(d, "role", json_string("assistant"));
    json_object_set_new(d, "reasoning_content", json_text(r->reasoning.p, r->reasoning.n));
    sbuf_consume(&r->reasoning, r->reasoning.n);
    sse(r, reply_chunk_delta(&r->rp, d, NULL, NULL));
    r->sent_first = true;
}

// {"index", "id", "type", "function": {"name", "arguments"}} of call k (id and name: first=true).
static json_t *call_json(const struct tool_call *t, int32_t k, bool first, const char *args, size_t n) {
    json_t *c = json_object();
    json_object_set_new(c, "index", json_integer(k));
    json_t *fn = json_object();
    if (first) {
        json_object_set_new(c, "id", json_string(t->id));
        json_object_set_new(c, "type", json_string("function"));
        json_object_set_new(fn, "name", json_text(t->name.p, t->name.n));
    }
    json_object_set_new(fn, "arguments", json_text(args, n));
    json_object_set_new(c, "function", fn);
    return c;
}

// A tool-call answer's stream: content as it grows, then per call a first chunk (index, id,
// type, name, arguments "") and its arguments in pieces, as OpenAI streams them.
static void stream_emit_tools(struct run *r, json_t *lp) {
    struct tools_parser *tp = &r->tp;
    tools_parser_feed(tp, r->text.p, r->text.n, r->over && !r->failed);
    sbuf_consume(&r->text, r->text.n);
    if (tp->content.n > tp->content_sent || (!r->sent_first && (tp->n_calls || lp))) {
        json_t *d = json_object();
        if (!r->sent_first) json_object_set_new(d, "role", json_string("assistant"));
        if (tp->content.n > tp->content_sent || !tp->n_calls)
            json_object_set_new(d, "content", json_text(tp->content.p + tp->content_sent, tp->content.n - tp->content_sent));
        else
            json_object_set_new(d, "content", json_null());
        tp->content_sent = tp->content.n;
        sse(r, reply_chunk_delta(&r->rp, d, lp, NULL));
        lp = NULL;
        r->sent_first = true;
    }
    for (int32_t k = 0; k < tp->n_calls; k++) {
        struct tool_call *t = &tp->calls[k];
        if (!t->announced) {
            json_t *d = json_object(), *a = json_array();
            json_array_append_new(a, call_json(t, k, true, "", 0));
            json_object_set_new(d, "tool_calls", a);
            sse(r, reply_chunk_delta(&r->rp, d, NULL, NULL));
            t->announced = true;
        }
        if (t->args.n > t->args_sent) {
            json_t *d = json_object(), *a = json_array();
            json_array_append_new(a, call_json(t, k, false, t->args.p + t->args_sent, t->args.n - t->args_sent));
            json_object_set_new(d, "tool_calls", a);
            sse(r, reply_chunk_delta(&r->rp, d, lp, NULL));
            lp = NULL;
            t->args_sent = t->args.n;
        }
    }
    if (lp) sse(r, reply_chunk_delta(&r->rp, json_object(), lp, NULL));
    if (tp->oom) r->out.oom = true;
}

// Turns what the last pump produced into SSE events; on the end, the closing chunk (the
// only one with a finish_reason), the usage chunk if asked, and [DONE].
static void stream_emit(struct run *r) {
    if (r->req.dialect == API_DIALECT_ANTHROPIC) {
        msg_stream_emit(r);
        return;
    }
    if (r->req.dialect == API_DIALECT_RESPONSES) {
        resp_stream_emit(r);
        return;
    }
    const bool chat = r->req.kind == API_CHAT;
    json_t *lp = gen_take_logprobs(&r->gen);
    if (chat) stream_reasoning(r);
    if (r->tools) {
        stream_emit_tools(r, lp);
        lp = NULL;
        if (r->over && !r->failed && r->tp.n_calls > 0 && !strcmp(r->finish, "stop")) r->finish = "tool_calls";
    } else if (r->text.n > 0 || lp) {
        sse(r, reply_chunk(&r->rp, r->text.p, r->text.n, chat && !r->sent_first, lp, NULL));
        r->sent_first = true;
        sbuf_consume(&r->text, r->text.n);
    }
    if (!r->over) return;
    if (r->failed) { // an error event, then [DONE]: a stream cut by the server ends as a stream
        struct api_error e;
        if (r->shutdown) api_fail(&e, 503, "unavailable_error", "shutting_down", NULL, "%s", r->note);
        else api_fail(&e, 500, "server_error", "generation_failed", NULL, "%s", r->note);
        char *s = api_error_json(&e);
        if (s) {
            sbuf_puts(&r->out, "data: ");
            sbuf_puts(&r->out, s);
            sbuf_puts(&r->out, "\n\n");
            free(s);
        }
    } else if (r->tools) {
        json_t *d = json_object();
        if (!r->sent_first) {
            json_object_set_new(d, "role", json_string("assistant"));
            json_object_set_new(d, "content", json_string(""));
        }
        sse(r, reply_chunk_delta(&r->rp, d, NULL, r->finish));
        if (r->rp.include_usage) sse(r, reply_usage_chunk(&r->rp, run_usage(r)));
    } else {
        sse(r, reply_chunk(&r->rp, "", 0, chat && !r->sent_first, NULL, r->finish));
        if (r->rp.include_usage) sse(r, reply_usage_chunk(&r->rp, run_usage(r)));
    }
    sbuf_puts(&r->out, "data: [DONE]\n\n");
    r->ended = true;
}

// The request ends before the engine finished it: the client left (or was cut off as too
// slow: the engine shut its socket), or the server stops.
static void run_cut(struct run *r, enum job_wait w) {
    job_cancel(r->job);
    job_take(r->job, r->ev, NULL, NULL, 0, &r->st); // overflow, if that is what happened
    r->over = r->failed = true;
    r->shutdown = w == JOB_STOPPING && !r->st.overflow;
    r->mf = MF_CANCELLED;
    snprintf(r->note, sizeof r->note, "%s", r->st.overflow       ? "cancelled: the client read too slowly"
                                            : w == JOB_CLIENT_GONE ? "cancelled: the client disconnected"
                                                                   : "cancelled: the server is shutting down");
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
        const enum job_wait w = job_wait(r->job, c->s->stop_fd);
        if (w != JOB_READY) {
            run_cut(r, w);
            if (!r->shutdown) return MHD_CONTENT_READER_END_WITH_ERROR; // nobody to tell
            stream_emit(r); // the server stops: an error event and [DONE], then the end
            srv_idle_timer(c, (unsigned)c->s->o->timeout_s);
            continue;
        }
        run_pump(c);
        if (r->over && r->st.overflow) return MHD_CONTENT_READER_END_WITH_ERROR; // too slow: cut off
        stream_emit(r);
        if (r->ended) srv_idle_timer(c, (unsigned)c->s->o->timeout_s); // its end must be read too
    }
}

// A whole answer with tool calls: message.tool_calls, content null when there are only calls.
static json_t *full_tools(struct run *r) {
    struct tools_parser *tp = &r->tp;
    tools_parser_feed(tp, r->text.p, r->text.n, true);
    if (tp->oom) return NULL;
    json_t *msg = json_object();
    json_object_set_new(msg, "role", json_string("assistant"));
    json_object_set_new(msg, "content", tp->content_null ? json_null() : json_text(tp->content.p, tp->content.n));
    if (tp->n_calls > 0) {
        json_t *a = json_array();
        for (int32_t k = 0; k < tp->n_calls; k++) {
            json_t *cj = call_json(&tp->calls[k], k, true, tp->calls[k].args.p, tp->calls[k].args.n);
            json_object_del(cj, "index");
            json_array_append_new(a, cj);
        }
        json_object_set_new(msg, "tool_calls", a);
        if (!strcmp(r->finish, "stop")) r->finish = "tool_calls";
    }
    srv_reason_message(r, msg);
    return reply_full_message(&r->rp, msg, gen_take_logprobs(&r->gen), r->finish, run_usage(r));
}

// The request's grammar compiled for the model (rp->grammar), or none. False with e filled.
static bool run_grammar(struct server *s, struct run *r, struct lm_request_params *rp, struct api_error *e) {
    char *gbnf = NULL;
    size_t n = 0;
    char **triggers = NULL;
    if (!tools_grammar(&r->req, lm_chat_tool_format(s->tmpl), &gbnf, &n, &triggers, e)) return false;
    if (!gbnf) return true;
    const enum lm_status st = gcache_get(s->gcache, s->tok, gbnf, n, (const char *const *)triggers, &r->grammar);
    free(gbnf);
    free(triggers);
    if (st == LM_ERR_NOMEM) return api_fail(e, 500, "server_error", "out_of_memory", NULL, "out of memory");
    if (st != LM_OK) // the client's grammar (or a schema's) that does not compile: its message
        return api_fail(e, 400, "invalid_request_error", "invalid_grammar",
                        r->req.format == API_FORMAT_GRAMMAR ? "grammar" : NULL, "%s", lm_error_msg());
    rp->grammar = r->grammar; // the engine takes its own reference at submit
    return true;
}

enum MHD_Result srv_handle_generate(struct conn *c, struct MHD_Connection *mc, enum api_kind kind,
                                   enum api_dialect dialect) {
    struct server *s = c->s;
    struct run *r = c->run = calloc(1, sizeof *c->run);
    if (!r) return srv_send_body(c, mc, 500, NULL, NULL);
    struct api_error e;
    const bool anthropic = dialect == API_DIALECT_ANTHROPIC, responses = dialect == API_DIALECT_RESPONSES;
    const bool ok = (anthropic   ? api_parse_messages_body(c->body.p, c->body.n, false, &s->limits, &r->req, &e)
                     : responses ? api_parse_responses_body(c->body.p, c->body.n, &s->limits, &r->req, &e)
                                 : api_parse_generate(c->body.p, c->body.n, kind, s->n_vocab, &s->limits, &r->req,
                                                      &e)) &&
                    srv_prompt_tokens(s, r, &e);
    srv_body_release(c); // parsed and tokenized: the body, its tree and the prompt text are gone
    srv_parse_end(c);
    if (!ok) return srv_send_error(c, mc, &e);
    const struct api_request *q = &r->req;
    // the request must fit: prompt + max_tokens within the context and the KV pool
    const int32_t max_tokens = q->max_tokens_given ? q->max_tokens : kind == API_COMPLETION ? 16 : 0;
    const int32_t limit = s->n_ctx < s->kv_tokens ? s->n_ctx : s->kv_tokens;
    if ((int64_t)r->n_prompt + (max_tokens ? max_tokens : 1) > limit)
        return srv_fail(c, mc, 400, "invalid_request_error", "context_length_exceeded",
                    "This request needs %lld tokens (prompt %d + max_tokens %d) but a request holds at "
                    "most %d (context %d tokens, KV pool %d tokens)",
                    (long long)r->n_prompt + (max_tokens ? max_tokens : 1), r->n_prompt,
                    max_tokens ? max_tokens : 1, limit, s->n_ctx, s->kv_tokens);
    struct lm_request_params rp = lm_request_params_default();
    rp.sampling = q->sampling;
    if (!q->seed_given) rp.sampling.seed = srv_next_random(s);
    rp.max_tokens = max_tokens;
    rp.ignore_eos = q->ignore_eos;
    rp.n_logprobs = api_n_logprobs(q);
    rp.bias_tokens = q->bias_tokens;
    rp.bias_values = q->bias_values;
    rp.n_bias = q->n_bias;
    rp.lookup = q->lookup_given ? q->lookup : s->o->lookup;
    rp.draft_max = q->draft_max ? q->draft_max : s->o->draft_max;
    rp.use_draft = q->draft_model_given ? q->draft_model : s->dm != NULL;
    r->tools = kind == API_CHAT && q->tool_choice != API_TOOLS_NONE && q->n_tools > 0;
    srv_reason_begin(s, r, &rp);
    if (!run_grammar(s, r, &rp, &e)) {
        if (responses) api_responses_param(&e);
        return srv_send_error(c, mc, &e);
    }
    // gpt-oss: the answer's control tokens are written as their text for the reasoning splitter
    // (harmony's channels) and, with tools, the tool-call reader (harmony.c), in every dialect
    const bool harmony = kind == API_CHAT && s->tmpl == LM_CHAT_TEMPLATE_HARMONY;
    if (r->tools) {
        tools_parser_init(&r->tp, lm_chat_tool_format(s->tmpl), q->parallel_tool_calls, srv_next_random(s));
    }
    if (r->tools && q->tool_choice == API_TOOLS_AUTO)
        tools_parser_declare(&r->tp, q->tools, q->n_tools); // what real models write (tools.c)

    const int32_t nt = q->logprobs ? q->top_logprobs : 0;
    r->job = job_new(s->e, s->o->stream_buffer, nt, c->fd);
    if (nt > 0) {
        r->top_tok = malloc(64 * (size_t)nt * sizeof *r->top_tok);
        r->top_lp = malloc(64 * (size_t)nt * sizeof *r->top_lp);
    }
    if (!r->job || (nt > 0 && (!r->top_tok || !r->top_lp)) || !gen_init(&r->gen, s->tok, &r->req))
        return srv_send_body(c, mc, 500, NULL, NULL);
    if (harmony) r->gen.dt.render_special = true; // <|channel|>, <|message|>, ... as their text
    r->rp.kind = kind;
    const char *id_prefix = anthropic ? "msg_" : responses ? "resp_" : kind == API_CHAT ? "chatcmpl-" : "cmpl-";
    snprintf(r->rp.id, sizeof r->rp.id, "%s%s", id_prefix, c->id);
    r->rp.model = s->model_id;
    r->rp.created = (long long)time(NULL);
    r->rp.include_usage = q->stream && q->include_usage;

    const enum lm_status st = job_submit(r->job, r->prompt, r->n_prompt, &rp);
    if (st == LM_ERR_BUSY)
        return srv_fail(c, mc, 429, "rate_limit_error", "queue_full",
                    "The server is busy: %d requests are queued already; retry later",
                    s->o->ep.max_waiting);
    if (st == LM_ERR_ARG) return srv_fail(c, mc, 400, "invalid_request_error", "invalid_value", "%s", lm_error_msg());
    if (st != LM_OK) return srv_fail(c, mc, 500, "server_error", "submit_failed", "%s", lm_error_msg());
    r->submitted = true;
    metrics_tokens(s->metrics, r->n_prompt, 0);

    if (q->stream) {
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 8192, stream_reader,
                                                                      c, NULL);
        if (!resp) {
            job_cancel(r->job);
            return srv_send_body(c, mc, 500, NULL, NULL);
        }
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        if (anthropic) msg_stream_start(r);
        if (responses) resp_stream_start(r);
        return srv_queue(c, mc, 200, resp);
    }
    // a whole answer: wait here (this connection's own thread), watching the client and the stop
    while (!r->over) {
        const enum job_wait w = job_wait(r->job, s->stop_fd);
        if (w != JOB_READY) {
            run_cut(r, w);
            if (w == JOB_CLIENT_GONE) {
                c->status = 499;
                return MHD_NO; // close the connection: nobody is reading
            }
            break; // the server stops: 503 below
        }
        run_pump(c);
    }
    r->ended = true;
    if (r->shutdown) return srv_fail(c, mc, 503, "unavailable_error", "shutting_down", "%s", r->note);
    if (r->failed) return srv_fail(c, mc, 500, "server_error", "generation_failed", "%s", r->note);
    if (anthropic) return srv_send_json(c, mc, 200, msg_full(r));
    if (responses) return srv_send_json(c, mc, 200, resp_full(r));
    if (r->tools) return srv_send_json(c, mc, 200, full_tools(r));
    json_t *full = reply_full(&r->rp, r->text.p, r->text.n, gen_take_logprobs(&r->gen), r->finish, run_usage(r));
    if (kind == API_CHAT) srv_reason_message(r, json_object_get(json_array_get(json_object_get(full, "choices"), 0),
                                                                "message"));
    return srv_send_json(c, mc, 200, full);
}

void srv_run_free(struct run *r) {
    if (!r) return;
    api_request_free(&r->req);
    gen_free(&r->gen);
    tools_parser_free(&r->tp);
    lm_grammar_free(r->grammar);
    job_unref(r->job);
    free(r->prompt);
    free(r->top_tok);
    free(r->top_lp);
    sbuf_free(&r->text);
    sbuf_free(&r->out);
    sbuf_free(&r->rs_text);
    reason_split_free(&r->split);
    sbuf_free(&r->reasoning);
    sbuf_free(&r->raw);
    sbuf_free(&r->rs_reason);
    json_decref(r->rs_output);
    free(r);
}
