// Reasoning in the server: the family's thinking form from its template and vocabulary, a
// request's choice (apart or inline, enable_thinking, the budget) into the splitter and the
// engine's thinking fields, and reasoning_content in chat answers (docs/server.md, "Reasoning").
#include "srv.h"

#include <stdlib.h>
#include <string.h>

// The tokens of a marker's text (special tokens parsed), at most cap; 0 when none or too many.
static int32_t marker_tokens(const struct lm_tokenizer *t, const char *text, int32_t *out, int32_t cap) {
    int32_t *ids = NULL;
    size_t n = 0;
    if (lm_tokenize(t, text, strlen(text), false, true, &ids, &n) != LM_OK) return 0;
    const int32_t k = n > 0 && n <= (size_t)cap ? (int32_t)n : 0;
    if (k) memcpy(out, ids, (size_t)k * sizeof *out);
    free(ids);
    return k;
}

void srv_reason_detect(struct server *s, const char *template_text) {
    if (s->tmpl == LM_CHAT_TEMPLATE_HARMONY) { // gpt-oss: the analysis channel is the span
        s->reason_kind = REASON_HARMONY;
        s->think_switch = s->think_prefill = false;
        // a budget needs the markers as tokens (real vocabularies: 3 and 6); without, no budget
        s->n_think_start = marker_tokens(s->tok, reason_start_marker(REASON_HARMONY), s->think_start, 16);
        s->n_think_end = marker_tokens(s->tok, reason_end_marker(REASON_HARMONY), s->think_end, 16);
        int32_t close[16];
        s->n_think_close = marker_tokens(s->tok, reason_close_marker(REASON_HARMONY), close, 16);
        if (!s->n_think_close || s->n_think_close >= s->n_think_end ||
            memcmp(close, s->think_end, (size_t)s->n_think_close * sizeof *close) != 0)
            s->n_think_close = 0; // not a prefix of the end marker's tokens: no budget
        if (!s->n_think_start || !s->n_think_close) s->n_think_start = s->n_think_end = 0;
        return;
    }
    s->n_think_close = 0; // the whole end marker ends the span
    s->n_think_start = marker_tokens(s->tok, "<think>", s->think_start, 16);
    s->n_think_end = marker_tokens(s->tok, "</think>", s->think_end, 16);
    const bool vocab = s->n_think_start == 1 && s->n_think_end == 1; // one token each: a thinking vocabulary
    s->reason_kind = reason_kind_detect(template_text, vocab);
    // Qwen3's template (and llama.cpp's R1 templates) switch thinking off with enable_thinking;
    // without a template text, a ChatML vocabulary with the markers is taken for Qwen3's
    s->think_switch = s->reason_kind != REASON_NONE &&
                      (template_text && *template_text ? strstr(template_text, "enable_thinking") != NULL
                                                       : s->tmpl == LM_CHAT_TEMPLATE_CHATML);
    // QwQ's template opens the span after ChatML's generation prompt (the server appends it)
    s->think_prefill = s->reason_kind != REASON_NONE && s->tmpl == LM_CHAT_TEMPLATE_CHATML && template_text &&
                       strstr(template_text, "<|im_start|>assistant\\n<think>\\n") != NULL;
    // Qwen3's template (not QwQ's, not R1's) renders reasoning_content after the last user query
    s->think_keep = s->reason_kind == REASON_THINK_TAGS && s->tmpl == LM_CHAT_TEMPLATE_CHATML && s->think_switch &&
                    !s->think_prefill;
    if (s->reason_kind == REASON_NONE || s->n_think_end == 0) {
        s->think_keep = false;
        s->reason_kind = REASON_NONE;
        s->n_think_start = s->n_think_end = 0;
    }
}

// reasoning_effort "none" / "minimal" (chat's, Responses' reasoning.effort): no thinking.
static bool effort_off(const struct api_request *q) {
    return !strcmp(q->reasoning_effort, "none") || !strcmp(q->reasoning_effort, "minimal");
}

int32_t srv_think_budget(const struct server *s, const struct api_request *q) {
    if (q->think_budget_given) return q->think_budget;
    // Anthropic's thinking is off unless asked for ({"type": "enabled", "budget_tokens"})
    if (q->dialect == API_DIALECT_ANTHROPIC) return q->thinking ? q->thinking_budget : 0;
    if (effort_off(q)) return 0;
    return s->o->reasoning_budget_given ? s->o->reasoning_budget : -1;
}

bool srv_think_off(const struct server *s, const struct api_request *q) {
    if (s->reason_kind == REASON_NONE || !s->think_switch || q->kind != API_CHAT) return false;
    return q->enable_thinking < 0 || srv_think_budget(s, q) == 0;
}

const char *srv_reason_effort(const struct api_request *q) {
    if (q->dialect == API_DIALECT_ANTHROPIC && !q->reasoning_effort[0]) // from thinking.budget_tokens
        return !q->thinking || q->thinking_budget < 4096 ? "low" : q->thinking_budget < 16384 ? "medium" : "high";
    if (!q->reasoning_effort[0]) return NULL; // the template's own ("medium")
    if (effort_off(q)) return "low";
    return strcmp(q->reasoning_effort, "xhigh") ? q->reasoning_effort : "high";
}

void srv_reason_begin(struct server *s, struct run *r, struct lm_request_params *rp) {
    const struct api_request *q = &r->req;
    const bool chat = q->kind == API_CHAT && s->reason_kind != REASON_NONE;
    // the engine: the span's markers, for the budget and for a grammar that waits for the answer
    // (also when thinking is switched off: a span the model opens anyway ends at the budget)
    if (chat && s->n_think_end > 0) {
        rp->n_think_close = s->n_think_close;
        rp->think_start = s->think_start;
        rp->n_think_start = s->n_think_start;
        rp->think_end = s->think_end;
        rp->n_think_end = s->n_think_end;
        rp->think_open = r->think_open;
        rp->think_budget = srv_think_budget(s, q);
        // harmony with tools: the budget closes the analysis only (<|end|><|start|>assistant), so
        // the model may still call a tool rather than answer on the final channel; it cannot
        // think again (runtime/think.c's SPENT)
        if (s->reason_kind == REASON_HARMONY && r->tools && q->format == API_FORMAT_TEXT)
            rp->n_think_force = s->n_think_close;
    }
    // apart unless inline was asked for (Messages: thinking blocks, Responses: a reasoning item)
    const bool inline_ = q->reasoning_format == 2 || (q->reasoning_format == 0 && s->o->reasoning_inline);
    reason_split_init(&r->split, chat && !inline_ ? s->reason_kind : REASON_NONE, r->think_open);
    r->split.markup = r->tools; // harmony: the tool-call reader parses the other messages
}

void srv_reason_feed(struct run *r, struct sbuf *raw, bool tok_done) {
    const bool was = reason_split_thinking(&r->split);
    reason_split_feed(&r->split, raw->p, raw->n, &r->reasoning, &r->text);
    sbuf_consume(raw, raw->n);
    if (tok_done && (was || reason_split_thinking(&r->split))) r->n_reason++;
}

void srv_reason_finish(struct run *r, struct sbuf *raw) {
    reason_split_feed(&r->split, raw->p, raw->n, &r->reasoning, &r->text);
    sbuf_consume(raw, raw->n);
    reason_split_finish(&r->split, &r->reasoning, &r->text);
}

void srv_reason_message(struct run *r, json_t *msg) {
    if (!msg || r->reasoning.n == 0) return;
    json_object_set_new(msg, "reasoning_content", json_text(r->reasoning.p, r->reasoning.n));
    sbuf_consume(&r->reasoning, r->reasoning.n);
}

void srv_reason_usage(const struct run *r, json_t *usage) {
    if (!usage || r->split.kind == REASON_NONE) return;
    json_object_set_new(usage, "completion_tokens_details", json_pack("{s:i}", "reasoning_tokens", r->n_reason));
}

void srv_reason_prior_turns(const struct server *s, struct api_request *q) {
    if (s->reason_kind != REASON_THINK_TAGS) return;
    size_t last_user = 0;
    for (size_t i = 0; i < q->n_msgs; i++)
        if (!strcmp(q->msgs[i].role, "user")) last_user = i;
    for (size_t i = 0; i < last_user; i++) {
        char *c = q->msgs[i].content;
        if (strcmp(q->msgs[i].role, "assistant") != 0 || !c) continue;
        char *end = NULL;
        for (char *p = strstr(c, "</think>"); p; p = strstr(p + 1, "</think>")) end = p;
        if (!end) continue;
        end += strlen("</think>");
        while (*end == '\n') end++;
        memmove(c, end, strlen(end) + 1);
    }
}
