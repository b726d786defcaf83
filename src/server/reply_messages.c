// Anthropic's Messages answers rendered from the same run as a chat completion's (generate.c):
// the whole message, the stream's events (message_start, content_block_*, message_delta,
// message_stop, ping, error), and POST /v1/messages/count_tokens.
#include "srv.h"

#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPEN_NONE = -1, OPEN_TEXT = -2, OPEN_THINKING = -3 };

// ================================================================ shared parts

// "toolu_" + the call's random part (tools.c's ids are "call_" + 24 letters and digits).
static json_t *tool_id(const struct tool_call *t) {
    char id[48];
    snprintf(id, sizeof id, "toolu_%s", strncmp(t->id, "call_", 5) ? t->id : t->id + 5);
    return json_string(id);
}

// stop_reason and stop_sequence (a JSON string or null) of a finished run.
static const char *stop_reason(const struct run *r, json_t **seq) {
    *seq = json_null();
    if (!strcmp(r->finish, "length")) return "max_tokens";
    if (r->tools && r->tp.n_calls > 0) return "tool_use";
    if (r->gen.stopped && r->gen.stop_index >= 0 && r->gen.stop_index < r->req.n_stop) {
        *seq = json_text(r->req.stop[r->gen.stop_index], r->req.stop_len[r->gen.stop_index]);
        return "stop_sequence";
    }
    return "end_turn";
}

// usage: input_tokens counts the prompt tokens the prefix cache did not hold (as Anthropic's
// does), cache_read_input_tokens those it held.
static json_t *usage(const struct run *r) {
    const int32_t cached = r->st.n_cached < r->n_prompt ? r->st.n_cached : r->n_prompt;
    return json_pack("{s:i,s:i,s:i,s:i}", "input_tokens", r->n_prompt - cached, "output_tokens", r->gen.n_tokens,
                     "cache_read_input_tokens", cached, "cache_creation_input_tokens", 0);
}

static json_t *text_block(const char *s, size_t n) {
    return json_pack("{s:s,s:o}", "type", "text", "text", json_text(s, n));
}

// The call's input: its arguments as an object ({} when the model's text is not one).
static json_t *tool_input(const struct tool_call *t) {
    json_t *in = t->args.n ? json_loadb(t->args.p, t->args.n, 0, NULL) : NULL;
    if (json_is_object(in)) return in;
    json_decref(in);
    return json_object();
}

// ================================================================ the whole answer

json_t *msg_full(struct run *r) {
    json_t *content = json_array();
    if (r->reasoning.n > 0) // the thinking span first, as Anthropic's (an empty signature: a local model's, as llama-server)
        json_array_append_new(content, json_pack("{s:s,s:o,s:s}", "type", "thinking", "thinking",
                                                 json_text(r->reasoning.p, r->reasoning.n), "signature", ""));
    if (r->tools) {
        struct tools_parser *tp = &r->tp;
        tools_parser_feed(tp, r->text.p, r->text.n, true);
        if (tp->oom) {
            json_decref(content);
            return NULL;
        }
        if (tp->content.n > 0 || tp->n_calls == 0) json_array_append_new(content, text_block(tp->content.p, tp->content.n));
        for (int32_t k = 0; k < tp->n_calls; k++)
            json_array_append_new(content, json_pack("{s:s,s:o,s:o,s:o}", "type", "tool_use", "id", tool_id(&tp->calls[k]),
                                                     "name", json_text(tp->calls[k].name.p, tp->calls[k].name.n),
                                                     "input", tool_input(&tp->calls[k])));
    } else {
        json_array_append_new(content, text_block(r->text.p, r->text.n));
    }
    json_t *seq;
    const char *reason = stop_reason(r, &seq);
    return json_pack("{s:s,s:s,s:s,s:s,s:o,s:s,s:o,s:o}", "id", r->rp.id, "type", "message", "role", "assistant",
                     "model", r->rp.model, "content", content, "stop_reason", reason, "stop_sequence", seq,
                     "usage", usage(r));
}

// ================================================================ the stream

// "event: NAME\ndata: JSON\n\n" (j stolen).
static void event(struct run *r, const char *name, json_t *j) {
    char *s = j ? json_dumps(j, SRV_JSON_FLAGS) : NULL;
    json_decref(j);
    if (!s) {
        r->out.oom = true;
        return;
    }
    sbuf_printf(&r->out, "event: %s\ndata: %s\n\n", name, s);
    free(s);
}

static void delta(struct run *r, const char *kind, const char *field, const char *s, size_t n);

static void close_block(struct run *r) {
    if (r->ms_open == OPEN_NONE) return;
    if (r->ms_open == OPEN_THINKING) delta(r, "signature_delta", "signature", "", 0); // before its stop, as SDKs expect
    event(r, "content_block_stop", json_pack("{s:s,s:i}", "type", "content_block_stop", "index", r->ms_index));
    r->ms_open = OPEN_NONE;
}

// Starts block `what` (OPEN_TEXT, or tool call k) unless it is the open one.
static void open_block(struct run *r, int32_t what) {
    if (r->ms_open == what) return;
    close_block(r);
    json_t *blk;
    if (what == OPEN_TEXT) {
        blk = json_pack("{s:s,s:s}", "type", "text", "text", "");
    } else if (what == OPEN_THINKING) {
        blk = json_pack("{s:s,s:s}", "type", "thinking", "thinking", "");
    } else {
        const struct tool_call *t = &r->tp.calls[what];
        blk = json_pack("{s:s,s:o,s:o,s:o}", "type", "tool_use", "id", tool_id(t), "name", json_text(t->name.p, t->name.n),
                        "input", json_object());
    }
    r->ms_index = r->ms_blocks++;
    r->ms_open = what;
    event(r, "content_block_start", json_pack("{s:s,s:i,s:o}", "type", "content_block_start", "index", r->ms_index,
                                              "content_block", blk));
}

static void delta(struct run *r, const char *kind, const char *field, const char *s, size_t n) {
    json_t *d = json_pack("{s:s,s:o}", "type", kind, field, json_text(s, n));
    event(r, "content_block_delta", json_pack("{s:s,s:i,s:o}", "type", "content_block_delta", "index", r->ms_index,
                                              "delta", d));
}

void msg_stream_start(struct run *r) {
    r->ms_open = OPEN_NONE;
    json_t *u = json_pack("{s:i,s:i}", "input_tokens", r->n_prompt, "output_tokens", 0);
    json_t *m = json_pack("{s:s,s:s,s:s,s:s,s:[],s:n,s:n,s:o}", "id", r->rp.id, "type", "message", "role", "assistant",
                          "model", r->rp.model, "content", "stop_reason", "stop_sequence", "usage", u);
    event(r, "message_start", json_pack("{s:s,s:o}", "type", "message_start", "message", m));
    event(r, "ping", json_pack("{s:s}", "type", "ping"));
}

// Text and tool calls as they grow: text_delta into a text block, each call a tool_use
// block whose input arrives as input_json_delta pieces.
static void emit_tools(struct run *r) {
    struct tools_parser *tp = &r->tp;
    tools_parser_feed(tp, r->text.p, r->text.n, r->over && !r->failed);
    sbuf_consume(&r->text, r->text.n);
    if (tp->content.n > tp->content_sent) {
        open_block(r, OPEN_TEXT);
        delta(r, "text_delta", "text", tp->content.p + tp->content_sent, tp->content.n - tp->content_sent);
        tp->content_sent = tp->content.n;
    }
    for (int32_t k = 0; k < tp->n_calls; k++) {
        struct tool_call *t = &tp->calls[k];
        if (!t->announced) {
            open_block(r, k);
            t->announced = true;
        }
        if (t->args.n > t->args_sent) {
            open_block(r, k);
            delta(r, "input_json_delta", "partial_json", t->args.p + t->args_sent, t->args.n - t->args_sent);
            t->args_sent = t->args.n;
        }
    }
    if (tp->oom) r->out.oom = true;
}

void msg_stream_emit(struct run *r) {
    json_decref(gen_take_logprobs(&r->gen)); // none asked for: Messages has no logprobs
    if (r->reasoning.n > 0) { // the thinking span: a thinking block of thinking_delta pieces
        open_block(r, OPEN_THINKING);
        delta(r, "thinking_delta", "thinking", r->reasoning.p, r->reasoning.n);
        sbuf_consume(&r->reasoning, r->reasoning.n);
    }
    if (r->tools) {
        emit_tools(r);
    } else if (r->text.n > 0) {
        open_block(r, OPEN_TEXT);
        delta(r, "text_delta", "text", r->text.p, r->text.n);
        sbuf_consume(&r->text, r->text.n);
    }
    if (!r->over) return;
    if (r->failed) { // an error event ends a stream the server cut
        struct api_error e;
        if (r->shutdown) api_fail(&e, 503, "overloaded_error", "shutting_down", NULL, "%s", r->note);
        else api_fail(&e, 500, "api_error", "generation_failed", NULL, "%s", r->note);
        char *s = api_error_json_anthropic(&e);
        if (s) sbuf_printf(&r->out, "event: error\ndata: %s\n\n", s);
        free(s);
        r->ended = true;
        return;
    }
    if (r->ms_blocks == 0 || r->ms_open == OPEN_THINKING) open_block(r, OPEN_TEXT); // no text and no call: one empty text block, as whole
    close_block(r);
    json_t *seq;
    const char *reason = stop_reason(r, &seq);
    event(r, "message_delta", json_pack("{s:s,s:{s:s,s:o},s:o}", "type", "message_delta", "delta", "stop_reason",
                                        reason, "stop_sequence", seq, "usage", usage(r)));
    event(r, "message_stop", json_pack("{s:s}", "type", "message_stop"));
    r->ended = true;
}

// ================================================================ count_tokens

enum MHD_Result srv_handle_count_tokens(struct conn *c, struct MHD_Connection *mc) {
    struct server *s = c->s;
    struct run *r = c->run = calloc(1, sizeof *c->run);
    if (!r) return srv_send_body(c, mc, 500, NULL, NULL);
    struct api_error e;
    const bool ok = api_parse_messages_body(c->body.p, c->body.n, true, &s->limits, &r->req, &e) &&
                    srv_prompt_tokens(s, r, &e);
    srv_body_release(c);
    srv_parse_end(c);
    if (!ok) return srv_send_error(c, mc, &e);
    return srv_send_json(c, mc, 200, json_pack("{s:i}", "input_tokens", r->n_prompt));
}
