// Answers (status, JSON and error bodies) and the routes that need no engine work:
// /health, /metrics, /v1/models, /tokenize, /detokenize and the web page's files.
#include "srv.h"

#include <jansson.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t srv_next_random(struct server *s) {
    return srv_splitmix(s->salt ^ (atomic_fetch_add(&s->next_id, 1) * 0x2545f4914f6cdd1dull));
}

void srv_idle_timer(struct conn *c, unsigned seconds) {
    if (c->mc) MHD_set_connection_option(c->mc, MHD_CONNECTION_OPTION_TIMEOUT, seconds);
}

enum MHD_Result srv_queue(struct conn *c, struct MHD_Connection *mc, int status,
                             struct MHD_Response *resp) {
    c->status = status;
    c->answered = true;
    // a whole answer is written now: a client that does not read it for --timeout is dropped
    // (a stream's writes are watched once its end is written: stream_reader)
    if (!(c->run && c->run->submitted && c->run->req.stream)) srv_idle_timer(c, (unsigned)c->s->o->timeout_s);
    if (atomic_load(&c->s->state) >= SRV_DRAINING) // clients reconnect elsewhere, not here
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    if (c->cors) MHD_add_response_header(resp, "Access-Control-Allow-Origin", c->cors);
    if (c->s->policy.n_cors_origins > 0) MHD_add_response_header(resp, "Vary", "Origin");
    const enum MHD_Result r = MHD_queue_response(mc, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return r;
}

// Anthropic's routes (and unknown paths under them) answer errors in Anthropic's shape.
static bool anthropic_route(const struct conn *c) {
    return (c->route && (c->route->flags & SRV_ROUTE_ANTHROPIC)) || !strncmp(c->path, "/v1/messages", 12);
}

// Answers with a malloc'd body (taken over; NULL = out of memory -> 500).
enum MHD_Result srv_send_body(struct conn *c, struct MHD_Connection *mc, int status, char *body,
                                 const char *type) {
    if (!body) {
        static char k_oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\","
                              "\"param\":null,\"code\":\"out_of_memory\"}}";
        static char k_oom_anthropic[] = "{\"type\":\"error\",\"error\":{\"type\":\"api_error\","
                                        "\"message\":\"out of memory\"}}";
        char *oom = anthropic_route(c) ? k_oom_anthropic : k_oom;
        struct MHD_Response *r = MHD_create_response_from_buffer(strlen(oom), oom, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Content-Type", "application/json");
        return srv_queue(c, mc, 500, r);
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", type);
    return srv_queue(c, mc, status, r);
}

enum MHD_Result srv_send_json(struct conn *c, struct MHD_Connection *mc, int status, json_t *j) {
    char *s = j ? json_dumps(j, SRV_JSON_FLAGS) : NULL;
    json_decref(j);
    return srv_send_body(c, mc, status, s, "application/json");
}

enum MHD_Result srv_send_error(struct conn *c, struct MHD_Connection *mc, const struct api_error *e) {
    snprintf(c->err, sizeof c->err, "%s: %.160s", e->code ? e->code : e->type, e->message);
    char *s = anthropic_route(c) ? api_error_json_anthropic(e) : api_error_json(e);
    if (!s) return srv_send_body(c, mc, 500, NULL, NULL);
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (e->status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    if (e->status == 429 || (e->status == 503 && e->code && !strcmp(e->code, "busy")))
        MHD_add_response_header(r, "Retry-After", "1");
    if (e->status == 405)
        MHD_add_response_header(r, "Allow", srv_route_post(c->route) ? "POST" : "GET, HEAD");
    return srv_queue(c, mc, e->status, r);
}

enum MHD_Result srv_fail(struct conn *c, struct MHD_Connection *mc, int status, const char *type,
                            const char *code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
enum MHD_Result srv_fail(struct conn *c, struct MHD_Connection *mc, int status, const char *type,
                            const char *code, const char *fmt, ...) {
    struct api_error e;
    char msg[sizeof e.message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    api_fail(&e, status, type, code, NULL, "%s", msg);
    return srv_send_error(c, mc, &e);
}

enum MHD_Result srv_not_ready(struct conn *c, struct MHD_Connection *mc) {
    const int state = atomic_load(&c->s->state);
    if (state == SRV_LOADING) return srv_fail(c, mc, 503, "unavailable_error", "loading", "Loading model");
    pthread_mutex_lock(&c->s->life_mu);
    const bool held = state == SRV_DRAINING && !c->s->drain_requested;
    pthread_mutex_unlock(&c->s->life_mu);
    if (held)
        return srv_fail(c, mc, 503, "unavailable_error", "draining", "This replica is draining: running "
                        "requests finish, new ones go to another replica");
    if (state == SRV_DRAINING)
        return srv_fail(c, mc, 503, "unavailable_error", "shutting_down", "The server is shutting down: "
                        "running requests finish, new ones go elsewhere");
    return srv_fail(c, mc, 503, "unavailable_error", "shutting_down", "The server is shutting down");
}

// ================================================================ other routes

enum MHD_Result srv_handle_health(struct conn *c, struct MHD_Connection *mc) {
    if (atomic_load(&c->s->state) != SRV_READY) return srv_not_ready(c, mc);
    return srv_send_body(c, mc, 200, strdup("{\"status\":\"ok\"}"), "application/json");
}

enum MHD_Result srv_handle_metrics(struct conn *c, struct MHD_Connection *mc) {
    struct server *s = c->s;
    struct lm_engine_stats st;
    const int state = atomic_load(&s->state);
    const bool ready = state == SRV_READY || state == SRV_DRAINING; // the engine runs: its gauges count
    if (ready) lm_engine_stats(s->e, &st); // a short lock the engine never holds across a step
    struct metrics_conns cs;
    conns_stats(s->conns, &cs);
    return srv_send_body(c, mc, 200, metrics_render(s->metrics, ready ? &st : NULL, &cs),
                     "text/plain; version=0.0.4; charset=utf-8");
}

enum MHD_Result srv_handle_models(struct conn *c, struct MHD_Connection *mc) {
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
    return srv_send_json(c, mc, 200, root);
}

enum MHD_Result srv_handle_tokenize(struct conn *c, struct MHD_Connection *mc) {
    struct server *s = c->s;
    struct api_tokenize t;
    struct api_error e;
    if (!api_parse_tokenize(c->body.p, c->body.n, &s->limits, &t, &e)) return srv_send_error(c, mc, &e);
    int32_t *ids = NULL;
    size_t n = 0;
    const enum lm_status st = lm_tokenize(s->tok, t.content, t.len, t.add_special, t.parse_special, &ids, &n);
    free(t.content);
    if (st != LM_OK) return srv_fail(c, mc, 400, "invalid_request_error", "invalid_value", "%s", lm_error_msg());
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
    return srv_send_json(c, mc, 200, root);
}

enum MHD_Result srv_handle_detokenize(struct conn *c, struct MHD_Connection *mc) {
    struct server *s = c->s;
    int32_t *ids = NULL, n = 0;
    struct api_error e;
    if (!api_parse_detokenize(c->body.p, c->body.n, s->n_vocab, &s->limits, &ids, &n, &e)) return srv_send_error(c, mc, &e);
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
    return srv_send_json(c, mc, 200, root);
}

enum MHD_Result srv_handle_asset(struct conn *c, struct MHD_Connection *mc, const struct lm_srv_asset *a) {
    struct MHD_Response *r = MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Content-Type", a->mime);
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    return srv_queue(c, mc, 200, r);
}

enum MHD_Result srv_preflight(struct conn *c, struct MHD_Connection *mc) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers",
                            "Authorization, Content-Type, X-Api-Key, Anthropic-Version, Anthropic-Beta");
    MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    const char *pna = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Access-Control-Request-Private-Network");
    if (pna && !strcmp(pna, "true")) // Chrome's Private Network Access: the origin is allowed
        MHD_add_response_header(r, "Access-Control-Allow-Private-Network", "true");
    return srv_queue(c, mc, 204, r);
}
