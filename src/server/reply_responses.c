// OpenAI Responses answers rendered from the same run as a chat completion's (generate.c): the
// whole response object (output items: message with output_text, function_call) and the
// stream's events (response.created ... response.completed, each with its sequence_number).
#include "srv.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPEN_NONE = -1, OPEN_TEXT = -2, OPEN_REASONING = -3 };

// ================================================================ shared parts

static bool incomplete(const struct run *r) { return r->finish && !strcmp(r->finish, "length"); }

// usage: input_tokens counts the whole prompt (as OpenAI's does), cached_tokens what the
// prefix cache held of it.
static json_t *usage(const struct run *r) {
    const int32_t cached = r->st.n_cached < r->n_prompt ? r->st.n_cached : r->n_prompt;
    return json_pack("{s:i,s:{s:i},s:i,s:{s:i},s:i}", "input_tokens", r->n_prompt, "input_tokens_details",
                     "cached_tokens", cached, "output_tokens", r->gen.n_tokens, "output_tokens_details",
                     "reasoning_tokens", r->n_reason, "total_tokens", r->n_prompt + r->gen.n_tokens);
}

// The request's tools and tool_choice as the response repeats them.
static json_t *tools_echo(const struct api_request *q, json_t **choice) {
    json_t *a = json_array();
    for (int32_t i = 0; i < q->n_tools; i++) {
        json_t *p = json_loads(q->tools[i].parameters, 0, NULL);
        json_array_append_new(a, json_pack("{s:s,s:s,s:o,s:b}", "type", "function", "name", q->tools[i].name,
                                           "parameters", p ? p : json_object(), "strict", q->tools[i].strict));
    }
    switch (q->tool_choice) {
    case API_TOOLS_NONE: *choice = json_string("none"); break;
    case API_TOOLS_REQUIRED: *choice = json_string("required"); break;
    case API_TOOLS_NAMED:
        *choice = json_pack("{s:s,s:s}", "type", "function", "name", q->tools[q->tool_named].name);
        break;
    default: *choice = json_string("auto");
    }
    return a;
}

// The response object with the given status and output (stolen); usage once it is done.
static json_t *response(const struct run *r, const char *status, json_t *output, const char *text, size_t n) {
    const struct api_request *q = &r->req;
    static const char *const formats[] = {"text", "json_object", "json_schema", "text"};
    json_t *choice, *tools = tools_echo(q, &choice);
    json_t *md = q->metadata ? json_loads(q->metadata, 0, NULL) : NULL;
    const bool done = strcmp(status, "in_progress") != 0;
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:n,s:n,s:o,s:s,s:o,s:b,s:n,s:{s:n,s:n},s:b,s:f,s:{s:{s:s}},s:o,s:o,"
                          "s:f,s:s,s:o}",
                          "id", r->rp.id, "object", "response", "created_at", (json_int_t)r->rp.created, "status",
                          status, "error", "instructions", "max_output_tokens",
                          q->max_tokens_given ? json_integer(q->max_tokens) : json_null(), "model", r->rp.model,
                          "output", output, "parallel_tool_calls", q->parallel_tool_calls, "previous_response_id",
                          "reasoning", "effort", "summary", "store", false, "temperature",
                          (double)q->sampling.temperature,
                          "text", "format", "type", formats[q->format], "tool_choice", choice, "tools", tools,
                          "top_p", (double)q->sampling.top_p, "truncation", "disabled", "metadata",
                          md ? md : json_object());
    if (!o) return NULL;
    json_object_set_new(o, "incomplete_details", done && incomplete(r) ? json_pack("{s:s}", "reason",
                                                                                   "max_output_tokens") : json_null());
    json_object_set_new(o, "usage", done ? usage(r) : json_null());
    if (done) json_object_set_new(o, "output_text", json_text(text, n)); // the SDKs' convenience, as a field
    return o;
}

static json_t *text_part(const char *s, size_t n) {
    return json_pack("{s:s,s:o,s:[],s:[]}", "type", "output_text", "text", json_text(s, n), "annotations", "logprobs");
}

static json_t *message_item(const char *id, const char *status, json_t *content) {
    return json_pack("{s:s,s:s,s:s,s:s,s:o}", "id", id, "type", "message", "status", status, "role", "assistant",
                     "content", content);
}

// "fc_" + the call's random part (tools.c's ids are "call_" + 24 letters and digits).
static void call_item_id(const struct tool_call *t, char *id, size_t cap) {
    snprintf(id, cap, "fc_%s", strncmp(t->id, "call_", 5) ? t->id : t->id + 5);
}

static json_t *call_item(const struct tool_call *t, const char *status, bool with_args) {
    char id[48];
    call_item_id(t, id, sizeof id);
    return json_pack("{s:s,s:s,s:s,s:s,s:o,s:o}", "id", id, "type", "function_call", "status", status, "call_id",
                     t->id, "name", json_text(t->name.p, t->name.n), "arguments",
                     with_args ? json_text(t->args.p, t->args.n) : json_string(""));
}

// The thinking span's output item (llama-server's shape): its text as one reasoning_text part,
// no summary, an empty encrypted_content.
static json_t *reasoning_item(const struct run *r, const char *status, const char *s, size_t n, bool with_text) {
    char id[64];
    snprintf(id, sizeof id, "rs_%s", strncmp(r->rp.id, "resp_", 5) ? r->rp.id : r->rp.id + 5);
    json_t *content = with_text ? json_pack("[{s:s,s:o}]", "type", "reasoning_text", "text", json_text(s, n))
                                : json_array();
    return json_pack("{s:s,s:s,s:[],s:o,s:s,s:s}", "id", id, "type", "reasoning", "summary", "content", content,
                     "encrypted_content", "", "status", status);
}

// Output item k's message id ("msg_" + the response's own part + its index).
static void msg_id(const struct run *r, int32_t k, char *id, size_t cap) {
    snprintf(id, cap, "msg_%s_%d", strncmp(r->rp.id, "resp_", 5) ? r->rp.id : r->rp.id + 5, k);
}

// ================================================================ the whole answer

json_t *resp_full(struct run *r) {
    json_t *out = json_array();
    const char *text = r->text.p ? r->text.p : "";
    size_t n = r->text.n;
    const char *st = incomplete(r) ? "incomplete" : "completed";
    char id[64];
    const int32_t k0 = r->reasoning.n > 0; // the reasoning item comes first
    if (k0) json_array_append_new(out, reasoning_item(r, "completed", r->reasoning.p, r->reasoning.n, true));
    msg_id(r, k0, id, sizeof id);
    if (r->tools) {
        struct tools_parser *tp = &r->tp;
        tools_parser_feed(tp, r->text.p, r->text.n, true);
        if (tp->oom) {
            json_decref(out);
            return NULL;
        }
        text = tp->content.p ? tp->content.p : "";
        n = tp->content.n;
        if (n > 0 || tp->n_calls == 0)
            json_array_append_new(out, message_item(id, st, json_pack("[o]", text_part(text, n))));
        for (int32_t k = 0; k < tp->n_calls; k++)
            json_array_append_new(out, call_item(&tp->calls[k], "completed", true));
    } else {
        json_array_append_new(out, message_item(id, st, json_pack("[o]", text_part(text, n))));
    }
    return response(r, st, out, text, n);
}

// ================================================================ the stream

// "event: TYPE\ndata: JSON\n\n" with the type and the next sequence_number set in j (stolen).
static void event(struct run *r, const char *type, json_t *j) {
    if (j) {
        json_object_set_new(j, "type", json_string(type));
        json_object_set_new(j, "sequence_number", json_integer(r->rs_seq++));
    }
    char *s = j ? json_dumps(j, SRV_JSON_FLAGS) : NULL;
    json_decref(j);
    if (!s) {
        r->out.oom = true;
        return;
    }
    sbuf_printf(&r->out, "event: %s\ndata: %s\n\n", type, s);
    free(s);
}

// The open item's done events; the item joins the output the final event repeats.
static void close_item(struct run *r) {
    if (r->ms_open == OPEN_NONE) return;
    const char *st = r->over && incomplete(r) ? "incomplete" : "completed";
    json_t *item;
    if (r->ms_open == OPEN_REASONING) {
        const char *t = r->rs_reason.p ? r->rs_reason.p : "";
        item = reasoning_item(r, "completed", t, r->rs_reason.n, true);
        event(r, "response.reasoning_text.done", json_pack("{s:O,s:i,s:i,s:o}", "item_id", json_object_get(item, "id"),
                                                           "output_index", r->ms_index, "content_index", 0, "text",
                                                           json_text(t, r->rs_reason.n)));
    } else if (r->ms_open == OPEN_TEXT) {
        char id[64];
        msg_id(r, r->ms_index, id, sizeof id);
        const char *t = r->rs_text.p ? r->rs_text.p : "";
        event(r, "response.output_text.done", json_pack("{s:s,s:i,s:i,s:o,s:[]}", "item_id", id, "output_index",
                                                        r->ms_index, "content_index", 0, "text",
                                                        json_text(t, r->rs_text.n), "logprobs"));
        event(r, "response.content_part.done", json_pack("{s:s,s:i,s:i,s:o}", "item_id", id, "output_index",
                                                         r->ms_index, "content_index", 0, "part",
                                                         text_part(t, r->rs_text.n)));
        item = message_item(id, st, json_pack("[o]", text_part(t, r->rs_text.n)));
    } else {
        const struct tool_call *tc = &r->tp.calls[r->ms_open];
        char id[48];
        call_item_id(tc, id, sizeof id);
        event(r, "response.function_call_arguments.done",
              json_pack("{s:s,s:i,s:o,s:o}", "item_id", id, "output_index", r->ms_index, "name",
                        json_text(tc->name.p, tc->name.n), "arguments", json_text(tc->args.p, tc->args.n)));
        item = call_item(tc, "completed", true);
    }
    event(r, "response.output_item.done", json_pack("{s:i,s:O}", "output_index", r->ms_index, "item", item));
    if (json_array_append_new(r->rs_output, item) != 0) r->out.oom = true;
    r->ms_open = OPEN_NONE;
}

// Starts item `what` (OPEN_TEXT: a message, or tool call k) unless it is the open one.
static void open_item(struct run *r, int32_t what) {
    if (r->ms_open == what) return;
    close_item(r);
    r->ms_index = r->ms_blocks++;
    r->ms_open = what;
    if (what == OPEN_REASONING) {
        event(r, "response.output_item.added", json_pack("{s:i,s:o}", "output_index", r->ms_index, "item",
                                                         reasoning_item(r, "in_progress", "", 0, false)));
    } else if (what == OPEN_TEXT) {
        char id[64];
        msg_id(r, r->ms_index, id, sizeof id);
        sbuf_consume(&r->rs_text, r->rs_text.n);
        event(r, "response.output_item.added", json_pack("{s:i,s:o}", "output_index", r->ms_index, "item",
                                                         message_item(id, "in_progress", json_array())));
        event(r, "response.content_part.added", json_pack("{s:s,s:i,s:i,s:o}", "item_id", id, "output_index",
                                                          r->ms_index, "content_index", 0, "part", text_part("", 0)));
    } else {
        event(r, "response.output_item.added", json_pack("{s:i,s:o}", "output_index", r->ms_index, "item",
                                                         call_item(&r->tp.calls[what], "in_progress", false)));
    }
}

static void text_delta(struct run *r, const char *s, size_t n) {
    open_item(r, OPEN_TEXT);
    char id[64];
    msg_id(r, r->ms_index, id, sizeof id);
    sbuf_append(&r->rs_text, s, n);
    event(r, "response.output_text.delta", json_pack("{s:s,s:i,s:i,s:o,s:[]}", "item_id", id, "output_index",
                                                     r->ms_index, "content_index", 0, "delta", json_text(s, n),
                                                     "logprobs"));
}

void resp_stream_start(struct run *r) {
    r->ms_open = OPEN_NONE;
    r->rs_output = json_array();
    if (!r->rs_output) r->out.oom = true;
    event(r, "response.created", json_pack("{s:o}", "response", response(r, "in_progress", json_array(), "", 0)));
    event(r, "response.in_progress", json_pack("{s:o}", "response", response(r, "in_progress", json_array(), "", 0)));
}

// Text and tool calls as they grow: output_text deltas into a message item, each call a
// function_call item whose arguments arrive as function_call_arguments deltas.
static void emit_tools(struct run *r) {
    struct tools_parser *tp = &r->tp;
    tools_parser_feed(tp, r->text.p, r->text.n, r->over && !r->failed);
    sbuf_consume(&r->text, r->text.n);
    if (tp->content.n > tp->content_sent) {
        text_delta(r, tp->content.p + tp->content_sent, tp->content.n - tp->content_sent);
        tp->content_sent = tp->content.n;
    }
    for (int32_t k = 0; k < tp->n_calls; k++) {
        struct tool_call *t = &tp->calls[k];
        if (!t->announced) {
            open_item(r, k);
            t->announced = true;
        }
        if (t->args.n > t->args_sent) {
            open_item(r, k);
            char id[48];
            call_item_id(t, id, sizeof id);
            event(r, "response.function_call_arguments.delta",
                  json_pack("{s:s,s:i,s:o}", "item_id", id, "output_index", r->ms_index, "delta",
                            json_text(t->args.p + t->args_sent, t->args.n - t->args_sent)));
            t->args_sent = t->args.n;
        }
    }
    if (tp->oom) r->out.oom = true;
}

void resp_stream_emit(struct run *r) {
    json_decref(gen_take_logprobs(&r->gen)); // none asked for: this route has no logprobs yet
    if (r->reasoning.n > 0) { // the thinking span: a reasoning item of reasoning_text deltas
        open_item(r, OPEN_REASONING);
        json_t *item = reasoning_item(r, "in_progress", "", 0, false);
        sbuf_append(&r->rs_reason, r->reasoning.p, r->reasoning.n);
        event(r, "response.reasoning_text.delta", json_pack("{s:O,s:i,s:i,s:o}", "item_id", json_object_get(item, "id"),
                                                            "output_index", r->ms_index, "content_index", 0, "delta",
                                                            json_text(r->reasoning.p, r->reasoning.n)));
        json_decref(item);
        sbuf_consume(&r->reasoning, r->reasoning.n);
    }
    if (r->tools) {
        emit_tools(r);
    } else if (r->text.n > 0) {
        text_delta(r, r->text.p, r->text.n);
        sbuf_consume(&r->text, r->text.n);
    }
    if (!r->over) return;
    if (r->failed) { // an error event ends a stream the server cut
        const bool down = r->shutdown;
        event(r, "error", json_pack("{s:s,s:s,s:n}", "code", down ? "shutting_down" : "generation_failed", "message",
                                    r->note, "param"));
        r->ended = true;
        return;
    }
    if (r->ms_blocks == 0 || r->ms_open == OPEN_REASONING) open_item(r, OPEN_TEXT); // no text and no call: one empty message, as whole
    close_item(r);
    // output_text: the messages' text (tool mode: the parser's content; else what was streamed)
    const struct sbuf *t = r->tools ? &r->tp.content : &r->rs_text;
    json_t *out = r->rs_output;
    r->rs_output = NULL;
    const bool inc = incomplete(r);
    event(r, inc ? "response.incomplete" : "response.completed",
          json_pack("{s:o}", "response", response(r, inc ? "incomplete" : "completed", out, t->p ? t->p : "", t->n)));
    r->ended = true;
}
