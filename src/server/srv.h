// The server's shared state and the per-request structs that its files (server.c: set-up,
// shutdown; dispatch.c: the route table and the MHD callbacks; gate.c: the gate; routes.c:
// answers and the small routes; generate.c: the generation routes) pass between them.
// Internal to src/server.
#ifndef LM_SERVER_SRV_H
#define LM_SERVER_SRV_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "api.h"
#include "assets.h"
#include "clock.h"
#include "conns.h"
#include "job.h"
#include "metrics.h"
#include "policy.h"
#include "reasoning.h"
#include "reply.h"
#include "server.h"
#include "tools.h"
#include "utf8.h"

// LOADING -> READY -> DRAINING (no new work; running requests finish within the grace)
// -> STOPPING (what is left is cancelled, then the HTTP server and the engine stop)
enum srv_state { SRV_LOADING, SRV_READY, SRV_DRAINING, SRV_STOPPING };

#define SRV_SNDBUF (128 * 1024) // bytes of a connection's kernel send buffer
// Requests parsing JSON or tokenizing at once: each may build a tree of up to
// limits.max_values values (~100 bytes each) and a prompt's tokens; more wait their turn.
#define SRV_PARSE_SLOTS 4
#define SRV_BODY_BYTES_PER_TOKEN 64 // default --max-body: this much per token of the context
#define SRV_MIN_MAX_BODY ((size_t)1 << 20)
#define SRV_MIN_BODY_BUDGET ((size_t)64 << 20) // bodies buffered at once: max(this, 8 x --max-body)

struct server {
    const struct lm_server_opts *o;
    struct MHD_Daemon *d;
    struct conns *conns;       // the front door: accepts, caps, deadlines (conns.h)
    atomic_int state;
    int stop_fd;               // eventfd, written once to stop: every waiting HTTP thread wakes
    pthread_mutex_t life_mu;   // guards the fields below; life_cv: their changes
    pthread_cond_t life_cv;
    bool drain_requested;
    bool operator_drain;       // the operator's drain (SIGUSR1 .. SIGUSR2): no new work, no exit
    char drain_why[64];
    int active;                // requests between a complete body and MHD's completion callback
    // the gate before work that scales with a body (parse, template, tokenize, submit)
    _Atomic size_t max_body;   // bytes of a request body (--max-body, else from the context)
    struct api_limits limits;  // JSON values and depth of a body (set once the model is loaded)
    atomic_size_t body_bytes;  // request bodies buffered now, at most body_budget (else 503)
    atomic_size_t body_budget;
    pthread_mutex_t gate_mu;   // guards held, parsing; gate_cv: a parse slot came free
    pthread_cond_t gate_cv;
    int held, held_cap;        // requests past the gate (to their answer's end): --parallel + --queue
    int parsing, parse_cap;    // of those, parsing or tokenizing now: SRV_PARSE_SLOTS
    struct lm_model *m;
    struct lm_model *dm;       // -md: the draft model, or NULL
    struct lm_engine *e;
    const struct lm_tokenizer *tok;
    int32_t n_vocab, n_ctx, kv_tokens, n_ctx_train;
    enum lm_chat_template tmpl;
    const char *tmpl_source;
    bool tmpl_trims;           // the template trims message contents (prompt.c)
    uint8_t *is_control;       // [n_vocab]: a control token (no text unless rendered)
    struct gcache *gcache;     // compiled grammars of recent requests (structured.c)
    // the family's thinking span (reasoning_srv.c): its form, whether the template switches it
    // off (Qwen3's enable_thinking), its markers' tokens
    enum reason_kind reason_kind;
    bool think_switch;
    bool think_prefill;        // the template's generation prompt opens the span (QwQ's, after ChatML's)
    bool think_keep;           // the template keeps an assistant's reasoning after the last user message (Qwen3's)
    int32_t think_start[16], think_end[16];
    int32_t n_think_start, n_think_end;
    int32_t n_think_close;     // think_end's first tokens that end the span (reason_close_marker; 0: all)
    char model_id[256];
    char url[300];
    struct metrics *metrics;
    struct policy policy;      // Host, Origin, Content-Type (policy.h)
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
    bool shutdown;       // failed because the server stops (503 unavailable_error / an error event)
    const char *finish;  // "stop" / "length" / "tool_calls" once over without failure
    bool tools;          // the answer is parsed for tool calls (chat, tools, tool_choice not none)
    struct tools_parser tp;
    struct lm_grammar *grammar; // the request's (NULL: none); the engine holds its own reference
    enum metrics_finish mf;
    char note[320];      // why it ended abnormally (log line)
    struct job_state st;
    uint64_t t_first, t_prev;
    bool queue_seen;
    // an Anthropic stream (reply_messages.c): content blocks started, the open one's index,
    // and what it is (-1 none, -2 text, k >= 0 tool call k)
    int32_t ms_blocks, ms_index, ms_open;
    // a Responses stream (reply_responses.c; items tracked in the ms_* fields): the next
    // event's sequence_number, the items done (the final event repeats them), the open
    // message's text
    int64_t rs_seq;
    json_t *rs_output;
    struct sbuf rs_text;
    // reasoning (reasoning_srv.c): the splitter of the released text, the reasoning not sent
    // yet (a stream) or all of it (a whole answer), the splitter's input, the span's tokens
    bool think_open;     // the prompt opened the span (prompt.c)
    struct reason_split split;
    struct sbuf reasoning, raw;
    int32_t n_reason;
    struct sbuf rs_reason; // a Responses stream: its reasoning item's text so far
};

struct conn;

// A route's handler, called once the request's body is complete.
typedef enum MHD_Result (*srv_handler)(struct conn *c, struct MHD_Connection *mc);

enum {
    SRV_ROUTE_OPEN = 1,      // answered without the API key
    SRV_ROUTE_ANY_STATE = 2, // answered while loading or draining too (else 503)
    SRV_ROUTE_GATED = 4,     // parses its body: through the gate and a parse slot (gate.c)
    SRV_ROUTE_ANTHROPIC = 8, // errors in Anthropic's shape (api_error_json_anthropic)
};

// A row of the route table (dispatch.c): dispatch and the metrics' route labels are made from it.
struct srv_route {
    const char *path;
    const char *method;  // "POST", or "GET" (which answers HEAD too)
    srv_handler handler;
    const char *metric;  // its label in lumen_requests_total (aliases share their route's)
    unsigned flags;      // SRV_ROUTE_*
};

// The route's method is POST (NULL: no route, false).
static inline bool srv_route_post(const struct srv_route *rt) { return rt && !strcmp(rt->method, "POST"); }

// One HTTP request (MHD's con_cls), freed when MHD reports it complete.
struct conn {
    struct server *s;
    const struct srv_route *route; // NULL: no route (the page's files, a 404)
    const char *metric;            // route label of its metrics (NULL: "other")
    char method[8];
    char path[96];
    uint64_t t_arrive;
    int fd;
    struct sbuf body;
    bool too_large, answered;
    bool counted;        // in s->active (from the complete body to the completion callback)
    bool held, parsing;  // past the gate; holding a parse slot
    bool busy;           // its body did not fit the body budget: 503
    size_t body_counted; // bytes of body counted in s->body_bytes
    int status;
    char id[24];
    struct MHD_Connection *mc;
    void *link;          // the connection's record in s->conns
    const char *cors;    // Access-Control-Allow-Origin for a --cors-origin page, else NULL
    char err[200];       // the error answered (log line)
    struct run *run;
};

// ---- answers (routes.c): each queues the response on mc and records the status in c

enum MHD_Result srv_queue(struct conn *c, struct MHD_Connection *mc, int status, struct MHD_Response *resp);
// A malloc'd body (taken over; NULL = out of memory -> 500).
enum MHD_Result srv_send_body(struct conn *c, struct MHD_Connection *mc, int status, char *body,
                              const char *type);
enum MHD_Result srv_send_json(struct conn *c, struct MHD_Connection *mc, int status, json_t *j); // j stolen
enum MHD_Result srv_send_error(struct conn *c, struct MHD_Connection *mc, const struct api_error *e);
enum MHD_Result srv_fail(struct conn *c, struct MHD_Connection *mc, int status, const char *type,
                         const char *code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
// 503: loading, or shutting down
enum MHD_Result srv_not_ready(struct conn *c, struct MHD_Connection *mc);
// MHD's idle timer of c's connection: 0 while a request is worked on (the server watches the
// client itself), --timeout while an answer is written (a client that stops reading is
// dropped), --keep-alive-timeout between requests.
void srv_idle_timer(struct conn *c, unsigned seconds);
// A random 64-bit value (seeds of requests that give none).
uint64_t srv_next_random(struct server *s);

// ---- the route table and the MHD callbacks (dispatch.c)

// The route labels of the metrics, made from the table (each once, in the table's order),
// then the page's files' ("static"); returns how many (at most cap).
int srv_route_metrics(const char **names, int cap);
// MHD's access handler and completion callback (cls: the server).
enum MHD_Result srv_on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_data_size,
                               void **con_cls);
void srv_on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                      enum MHD_RequestTerminationCode toe);

// ---- the gate (gate.c)

// Takes a place past the gate (false: --parallel + --queue requests hold one already).
bool srv_gate_enter(struct conn *c);
void srv_gate_leave(struct conn *c); // idempotent
// Waits for a parse slot (SRV_PARSE_SLOTS requests parse or tokenize at once).
void srv_parse_begin(struct conn *c);
// Ends c's parse slot (idempotent): the body's tree and the prompt's text are gone.
void srv_parse_end(struct conn *c);
// Frees c's buffered body and returns its bytes to the budget (idempotent).
void srv_body_release(struct conn *c);

// ---- prompts (prompt.c)

// Once the model and the template are known: the control-token table. False when out of memory.
bool srv_prompt_init(struct server *s);
// r->prompt / r->n_prompt from r->req: a completions prompt, or the chat template's text
// where the messages' special-token text stays text (unless --parse-special-in-messages).
bool srv_prompt_tokens(struct server *s, struct run *r, struct api_error *e);

// ---- reasoning (reasoning_srv.c)

// The thinking form of the model's template text (NULL: none; the vocabulary decides).
void srv_reason_detect(struct server *s, const char *template_text);
// The request does not think: enable_thinking false or a budget of 0 where the template can
// switch thinking off (the generation prompt then holds an empty span).
bool srv_think_off(const struct server *s, const struct api_request *q);
// The effective thinking budget of a request (-1: none).
int32_t srv_think_budget(const struct server *s, const struct api_request *q);
// The request's splitter (reasoning apart unless inline was asked for, or the dialect has no
// place for it yet) and its engine fields (markers, budget).
void srv_reason_begin(struct server *s, struct run *r, struct lm_request_params *rp);
// The effort a harmony prompt states ("Reasoning: low|medium|high"; NULL: the template's): the
// request's reasoning_effort ("none" / "minimal": low, "xhigh": high), or Anthropic's from its
// thinking budget (none: low, < 4096: low, < 16384: medium, else high).
const char *srv_reason_effort(const struct api_request *q);
// Released text of the answer: the splitter's reasoning into r->reasoning, content into
// r->text; tok_done: one token's text (counted as reasoning while the span is open).
void srv_reason_feed(struct run *r, struct sbuf *raw, bool tok_done);
void srv_reason_finish(struct run *r, struct sbuf *raw);
// A whole chat message gains "reasoning_content" (when there is any).
void srv_reason_message(struct run *r, json_t *msg);
// Earlier assistant turns lose their thinking span, as the families' templates drop it (the
// text after the last </think>, its leading newlines dropped): those before the last user
// message (Qwen3; R1's template drops every turn's, and no turn follows the last user one there).
void srv_reason_prior_turns(const struct server *s, struct api_request *q);
// usage gains completion_tokens_details.reasoning_tokens.
void srv_reason_usage(const struct run *r, json_t *usage);

// ---- stopping (server.c)

// Starts draining: no new work (503, /health 503), running requests finish within
// --shutdown-grace, then the rest is cancelled and lm_server_run returns 0. Any thread, any
// time, idempotent; why names the trigger in the log ("SIGTERM"). Before the model is
// ready it only records the request (the server stops once loading ends).
void srv_drain(struct server *s, const char *why);
// The operator's drain, for a balancer (deploy/haproxy/): on, /health and new requests answer
// 503 (a balancer retries those elsewhere) while running requests finish; off, the server
// takes work again. Nothing stops; the shutdown drain (srv_drain) wins over it. Any thread,
// idempotent; why names the trigger in the log ("SIGUSR1").
void srv_set_draining(struct server *s, bool on, const char *why);

// ---- routes (routes.c, generate.c), called once the request's body is complete

// The one generation route: kind and dialect say how the body parses and the answer renders.
enum MHD_Result srv_handle_generate(struct conn *c, struct MHD_Connection *mc, enum api_kind kind,
                                   enum api_dialect dialect);
// POST /v1/messages/count_tokens: {"input_tokens": N} of the prompt a /v1/messages body makes.
enum MHD_Result srv_handle_count_tokens(struct conn *c, struct MHD_Connection *mc);
enum MHD_Result srv_handle_health(struct conn *c, struct MHD_Connection *mc);
enum MHD_Result srv_handle_metrics(struct conn *c, struct MHD_Connection *mc);
enum MHD_Result srv_handle_models(struct conn *c, struct MHD_Connection *mc);
enum MHD_Result srv_handle_tokenize(struct conn *c, struct MHD_Connection *mc);
enum MHD_Result srv_handle_detokenize(struct conn *c, struct MHD_Connection *mc);
// POST /v1/embeddings (embed.c): OpenAI's shape; a model without mean, cls or last pooling: 400.
enum MHD_Result srv_handle_embeddings(struct conn *c, struct MHD_Connection *mc);
// POST /v1/rerank (embed.c): llama-server's shape; a model without rank pooling and a head: 400.
enum MHD_Result srv_handle_rerank(struct conn *c, struct MHD_Connection *mc);
enum MHD_Result srv_handle_asset(struct conn *c, struct MHD_Connection *mc, const struct lm_srv_asset *a);
// 204 to a CORS preflight (OPTIONS) from a --cors-origin page.
enum MHD_Result srv_preflight(struct conn *c, struct MHD_Connection *mc);
void srv_run_free(struct run *r); // NULL is fine

// ---- Anthropic's Messages answers (reply_messages.c), from the same run as a chat's

// The whole answer: {"id": "msg_...", "type": "message", "content": [text, tool_use...],
// "stop_reason", "stop_sequence", "usage"} (NULL when out of memory).
json_t *msg_full(struct run *r);
// A stream's opening events (message_start, ping) into r->out.
void msg_stream_start(struct run *r);
// What the last pump produced as content_block_* events; at the end message_delta and
// message_stop (or an error event), then r->ended.
void msg_stream_emit(struct run *r);

// ---- OpenAI's Responses answers (reply_responses.c), from the same run as a chat's

// The whole answer: {"id": "resp_...", "object": "response", "status", "output": [message,
// function_call...], "output_text", "usage", ...} (NULL when out of memory).
json_t *resp_full(struct run *r);
// A stream's opening events (response.created, response.in_progress) into r->out.
void resp_stream_start(struct run *r);
// What the last pump produced as output item events; at the end response.completed (or
// response.incomplete, or an error event), then r->ended.
void resp_stream_emit(struct run *r);

#endif
