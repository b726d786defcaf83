// The route table (every route once: path, method, handler, metric name) and the MHD
// callbacks made from it: the checks before a route (Host, Origin, API key, Content-Type,
// body size), body intake, the state and the gate, the handler; then the log line and metrics.
#define _GNU_SOURCE
#include "srv.h"

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

// ================================================================ the route table

static enum MHD_Result handle_completions(struct conn *c, struct MHD_Connection *mc) {
    return srv_handle_generate(c, mc, API_COMPLETION, API_DIALECT_OPENAI);
}

static enum MHD_Result handle_chat(struct conn *c, struct MHD_Connection *mc) {
    return srv_handle_generate(c, mc, API_CHAT, API_DIALECT_OPENAI);
}

static enum MHD_Result handle_messages(struct conn *c, struct MHD_Connection *mc) {
    return srv_handle_generate(c, mc, API_CHAT, API_DIALECT_ANTHROPIC);
}

static enum MHD_Result handle_responses(struct conn *c, struct MHD_Connection *mc) {
    return srv_handle_generate(c, mc, API_CHAT, API_DIALECT_RESPONSES);
}

// The metric name is the route's label in lumen_requests_total: aliases share their
// route's. Flags: OPEN, answered without the API key; ANY_STATE, answered while loading or
// draining too (else 503); GATED, through the gate (srv_gate_enter) and a parse slot.
static const struct srv_route k_routes[] = {
    {"/v1/completions", "POST", handle_completions, "/v1/completions", SRV_ROUTE_GATED},
    {"/completions", "POST", handle_completions, "/v1/completions", SRV_ROUTE_GATED},
    {"/v1/chat/completions", "POST", handle_chat, "/v1/chat/completions", SRV_ROUTE_GATED},
    {"/chat/completions", "POST", handle_chat, "/v1/chat/completions", SRV_ROUTE_GATED},
    {"/v1/models", "GET", srv_handle_models, "/v1/models", 0},
    {"/models", "GET", srv_handle_models, "/v1/models", 0},
    {"/health", "GET", srv_handle_health, "/health", SRV_ROUTE_OPEN | SRV_ROUTE_ANY_STATE},
    {"/v1/health", "GET", srv_handle_health, "/health", SRV_ROUTE_OPEN | SRV_ROUTE_ANY_STATE},
    {"/metrics", "GET", srv_handle_metrics, "/metrics", SRV_ROUTE_ANY_STATE},
    {"/tokenize", "POST", srv_handle_tokenize, "/tokenize", SRV_ROUTE_GATED},
    {"/detokenize", "POST", srv_handle_detokenize, "/detokenize", SRV_ROUTE_GATED},
    {"/v1/messages", "POST", handle_messages, "/v1/messages", SRV_ROUTE_GATED | SRV_ROUTE_ANTHROPIC},
    {"/v1/messages/count_tokens", "POST", srv_handle_count_tokens, "/v1/messages/count_tokens",
     SRV_ROUTE_GATED | SRV_ROUTE_ANTHROPIC},
    {"/v1/responses", "POST", handle_responses, "/v1/responses", SRV_ROUTE_GATED},
    {"/v1/embeddings", "POST", srv_handle_embeddings, "/v1/embeddings", SRV_ROUTE_GATED},
    {"/embeddings", "POST", srv_handle_embeddings, "/v1/embeddings", SRV_ROUTE_GATED},
    {"/v1/rerank", "POST", srv_handle_rerank, "/v1/rerank", SRV_ROUTE_GATED},
    {"/rerank", "POST", srv_handle_rerank, "/v1/rerank", SRV_ROUTE_GATED},
    {"/v1/reranking", "POST", srv_handle_rerank, "/v1/rerank", SRV_ROUTE_GATED},
    {"/reranking", "POST", srv_handle_rerank, "/v1/rerank", SRV_ROUTE_GATED},
};
#define N_ROUTES (sizeof k_routes / sizeof k_routes[0])
_Static_assert(N_ROUTES + 1 <= METRICS_MAX_ROUTES, "the route labels (and \"static\") fit the metrics");

// The label of the page's files in lumen_requests_total (metrics.c counts anything else as
// "other").
#define METRIC_STATIC "static"

int srv_route_metrics(const char **names, int cap) {
    int n = 0;
    for (size_t i = 0; i < N_ROUTES; i++) {
        bool seen = false;
        for (int k = 0; k < n; k++) seen = seen || !strcmp(names[k], k_routes[i].metric);
        if (!seen && n < cap) names[n++] = k_routes[i].metric;
    }
    if (n < cap) names[n++] = METRIC_STATIC;
    return n;
}

static const struct srv_route *find_route(const char *path) {
    for (size_t i = 0; i < N_ROUTES; i++)
        if (!strcmp(k_routes[i].path, path)) return &k_routes[i];
    return NULL;
}

static const struct lm_srv_asset *find_asset(const char *path) {
    if (!strcmp(path, "/")) path = "/index.html";
    for (size_t i = 0; i < lm_srv_n_assets; i++)
        if (!strcmp(lm_srv_assets[i].path, path)) return &lm_srv_assets[i];
    return NULL;
}

static bool key_matches(const char *want, const char *got) {
    const size_t n = strlen(want), m = got ? strlen(got) : 0;
    unsigned diff = n != m;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)want[i] ^ (unsigned char)(i < m ? got[i] : 0);
    return diff == 0; // the same time whatever the first wrong byte
}

// ================================================================ MHD callbacks

// A new request (MHD's first call: its headers only): c set up, then its route's checks.
// MHD_YES with nothing answered: its body (if any) is taken next.
static enum MHD_Result on_headers(struct server *s, struct conn *c, struct MHD_Connection *mc,
                                  const char *url, const char *method) {
    c->s = s;
    c->t_arrive = srv_now_ns();
    c->fd = -1;
    c->mc = mc;
    const union MHD_ConnectionInfo *sc = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    c->link = sc ? sc->socket_context : NULL;
    conns_phase(s->conns, c->link, CONNS_REQUEST); // a keep-alive connection's next request
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
    const struct srv_route *rt = find_route(url);
    const struct lm_srv_asset *asset = !rt && is_get ? find_asset(url) : NULL;
    c->route = rt;
    c->metric = asset ? METRIC_STATIC : rt ? rt->metric : NULL;
    // another site's page in the visitor's browser: refused before any route runs
    const char *host = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    if (!policy_host_ok(&s->policy, host))
        return srv_fail(c, mc, 403, "permission_error", "host_not_allowed", "Host '%.80s' is not served "
                        "here (a name pointed at this server; allow it with --allowed-host NAME)", host);
    const char *origin = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_ORIGIN);
    const enum policy_origin po = policy_origin(&s->policy, origin, host);
    if (po == ORIGIN_REFUSED)
        return srv_fail(c, mc, 403, "permission_error", "origin_not_allowed", "Requests from pages of "
                        "'%.80s' are not served (allow that origin with --cors-origin ORIGIN)", origin);
    if (po == ORIGIN_CORS) c->cors = policy_cors_value(&s->policy, origin);
    if (po == ORIGIN_CORS && !strcmp(method, "OPTIONS")) return srv_preflight(c, mc);
    if (asset) return srv_handle_asset(c, mc, asset); // the page is public: it asks for the key itself
    if (!rt) return srv_fail(c, mc, 404, "not_found_error", "not_found", "No route for %s %.80s", method, url);
    const bool post = srv_route_post(rt);
    if (post ? strcmp(method, "POST") != 0 : !is_get)
        return srv_fail(c, mc, 405, "invalid_request_error", "method_not_allowed", "%s %.80s: use %s",
                        method, url, rt->method);
    if (s->o->api_key && !(rt->flags & SRV_ROUTE_OPEN)) {
        const char *auth = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Authorization");
        const char *key = auth && !strncasecmp(auth, "Bearer ", 7) ? auth + 7 : NULL;
        while (key && *key == ' ') key++;
        if (!key) key = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "x-api-key"); // Anthropic's clients
        if (!key || !key_matches(s->o->api_key, key))
            return srv_fail(c, mc, 401, "authentication_error", "invalid_api_key",
                            key ? "Incorrect API key provided" : "Missing API key: send 'Authorization: "
                                                                 "Bearer KEY' (or 'x-api-key: KEY')");
    }
    // a POST is JSON: a form or text/plain POST is what a page may send without a preflight
    if (post && !policy_json_type(MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE)))
        return srv_fail(c, mc, 415, "invalid_request_error", "unsupported_media_type",
                        "%s %.80s takes a JSON body: send 'Content-Type: application/json'", method, url);
    // An oversized body is read and dropped, then answered 413 (a client that sends its
    // body before reading would otherwise see a reset, not the answer); answered at once
    // when the client waits for "100 Continue" or the body is far too large to read.
    const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *expect = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
    const unsigned long long len = cl ? strtoull(cl, NULL, 10) : 0;
    const size_t max_body = atomic_load(&s->max_body);
    if (len > max_body) {
        if ((expect && !strcasecmp(expect, "100-continue")) || len / 16 > max_body)
            return srv_fail(c, mc, 413, "invalid_request_error", "request_too_large",
                            "The request body is %llu bytes; the limit is %zu", len, max_body);
        c->too_large = true;
    }
    return MHD_YES;
}

// Body data: kept up to the limit, within the budget of all bodies.
static void take_body(struct server *s, struct conn *c, const char *data, size_t k) {
    if (c->answered || c->too_large || c->busy) return;
    if (c->body.n + k > atomic_load(&s->max_body)) {
        c->too_large = true;
        srv_body_release(c);
    } else if (atomic_fetch_add(&s->body_bytes, k) + k > atomic_load(&s->body_budget)) {
        atomic_fetch_sub(&s->body_bytes, k);
        c->busy = true;
        srv_body_release(c);
    } else {
        c->body_counted += k;
        if (!sbuf_append(&c->body, data, k)) {
            c->too_large = true; // out of memory reads as too large
            srv_body_release(c);
        }
    }
}

// The body is complete: the route's handler, after the state and, for a route that parses
// a body, the gate.
static enum MHD_Result dispatch(struct server *s, struct conn *c, struct MHD_Connection *mc) {
    conns_phase(s->conns, c->link, CONNS_ACTIVE); // no request deadline while it is worked on
    srv_idle_timer(c, 0);                         // nor MHD's idle timer: the server watches the client
    pthread_mutex_lock(&s->life_mu); // counted before the state is read: a drain waits for it
    s->active++;
    c->counted = true;
    pthread_mutex_unlock(&s->life_mu);
    if (c->too_large)
        return srv_fail(c, mc, 413, "invalid_request_error", "request_too_large",
                        "The request body exceeds the limit of %zu bytes", atomic_load(&s->max_body));
    if (c->busy)
        return srv_fail(c, mc, 503, "unavailable_error", "busy", "Request bodies of %zu bytes are arriving "
                        "already; retry later", atomic_load(&s->body_budget));
    const struct srv_route *rt = c->route; // set: a request without one was answered at its headers
    if (!rt) return srv_fail(c, mc, 404, "not_found_error", "not_found", "No route for %s %.80s", c->method, c->path);
    if (rt->flags & SRV_ROUTE_ANY_STATE) return rt->handler(c, mc);
    if (atomic_load(&s->state) != SRV_READY) return srv_not_ready(c, mc);
    if (!(rt->flags & SRV_ROUTE_GATED)) return rt->handler(c, mc);
    // the gate: nothing that scales with the body runs beyond --parallel + --queue requests
    if (!srv_gate_enter(c))
        return srv_fail(c, mc, 429, "rate_limit_error", "queue_full", "The server is busy: %d requests are "
                        "held already (--parallel + --queue); retry later", s->held_cap);
    srv_parse_begin(c);
    const enum MHD_Result res = rt->handler(c, mc);
    srv_parse_end(c);
    srv_body_release(c);
    return res;
}

enum MHD_Result srv_on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_data_size,
                               void **con_cls) {
    (void)version;
    struct server *s = cls;
    struct conn *c = *con_cls;
    if (!c) { // first call: headers only
        c = calloc(1, sizeof *c);
        if (!c) return MHD_NO;
        *con_cls = c;
        return on_headers(s, c, mc, url, method);
    }
    if (*upload_data_size) {
        take_body(s, c, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (c->answered) return MHD_YES;
    return dispatch(s, c, mc);
}

// One log line and the metrics of every request; a generation still running (the client
// went away, or MHD gave up on the connection) is cancelled here.
void srv_on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                      enum MHD_RequestTerminationCode toe) {
    struct server *s = cls;
    struct conn *c = *con_cls;
    if (!c) return;
    *con_cls = NULL;
    // the connection waits for its next request: idle at most --keep-alive-timeout, and the
    // request complete within --timeout
    conns_phase(s->conns, c->link, CONNS_IDLE);
    MHD_set_connection_option(mc, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)s->o->keepalive_s);
    const uint64_t now = srv_now_ns();
    struct run *r = c->run;
    if (r && r->job) job_detach_client(r->job); // MHD closes the socket after this callback
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
    metrics_request(s->metrics, c->metric, c->status);
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
    char esc[2048];
    log_escape(line, esc, sizeof esc); // the path and the error quote client text
    fprintf(stderr, "lumen serve: %s\n", esc);
    srv_run_free(r);
    srv_parse_end(c);
    srv_body_release(c);
    srv_gate_leave(c);
    if (c->counted) {
        pthread_mutex_lock(&s->life_mu);
        s->active--;
        pthread_cond_broadcast(&s->life_cv);
        pthread_mutex_unlock(&s->life_mu);
    }
    free(c);
}
