// gpt-oss's harmony answers read back (src/server/harmony.c): analysis -> reasoning, final and
// preambles -> content, functions.NAME -> calls, built-in recipients dropped, plain text as
// content, truncated messages as far as they went; each answer whole and fed in pieces of every
// size 1..7 (what a stream sees: the outputs only grow, and end equal to the whole answer). The
// reasoning splitter's harmony form (common/reasoning_harmony.c) agrees on every answer: plain,
// and with markup (its content read by the parser gives the same content and calls).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harmony.h"
#include "lm_test.h"
#include "reasoning.h"
#include "tools.h"

struct want {
    const char *reasoning, *content;
    int n_calls;
    const char *names[2], *args[2];
    int n_dropped;
};

static bool is(const struct sbuf *b, const char *s) {
    return b->n == strlen(s) && (b->n == 0 || memcmp(b->p, s, b->n) == 0);
}

static bool prefix_of(const struct sbuf *a, const struct sbuf *b) { // a is a prefix of b
    return a->n <= b->n && (a->n == 0 || memcmp(a->p, b->p, a->n) == 0);
}

// The splitter on text whole (step 0) and in pieces of 1..7: the same reasoning; its plain content
// is the answer's content, its markup content parsed again gives the content and the calls.
static void check_split(const char *text, const struct want *w) {
    const size_t n = strlen(text);
    for (int markup = 0; markup < 2; markup++)
        for (size_t step = 0; step <= 7; step++) {
            struct reason_split sp;
            struct sbuf r = {0}, c = {0};
            reason_split_init(&sp, REASON_HARMONY, false);
            sp.markup = markup;
            const size_t k = step ? step : n ? n : 1;
            for (size_t i = 0; i < n; i += k) reason_split_feed(&sp, text + i, i + k > n ? n - i : k, &r, &c);
            reason_split_finish(&sp, &r, &c);
            bool ok = !sp.oom && is(&r, w->reasoning);
            if (!markup) {
                ok = ok && is(&c, w->content);
            } else {
                struct harmony_out o = {0};
                harmony_parse(c.p ? c.p : "", c.n, true, &o);
                ok = ok && is(&o.reasoning, "") && is(&o.content, w->content) && o.n_calls == w->n_calls;
                for (int j = 0; ok && j < o.n_calls; j++) ok = is(&o.calls[j].args, w->args[j]);
                harmony_out_free(&o);
            }
            CHECKF(ok, "%s: splitter (markup %d, pieces of %zu): reasoning '%.*s' content '%.*s'", text, markup, step,
                   (int)r.n, r.p ? r.p : "", (int)c.n, c.p ? c.p : "");
            reason_split_free(&sp);
            sbuf_free(&r);
            sbuf_free(&c);
        }
}

static void check(const char *text, const struct want *w) {
    check_split(text, w);
    struct harmony_out o = {0}, prev = {0};
    harmony_parse(text, strlen(text), true, &o);
    CHECKF(!o.oom && is(&o.reasoning, w->reasoning), "%s: reasoning '%s'", text, o.reasoning.p ? o.reasoning.p : "");
    CHECKF(is(&o.content, w->content), "%s: content '%s'", text, o.content.p ? o.content.p : "");
    CHECKF(o.n_calls == w->n_calls && o.n_dropped == w->n_dropped, "%s: %d calls, %d dropped", text, o.n_calls,
           o.n_dropped);
    for (int c = 0; c < o.n_calls && c < w->n_calls; c++)
        CHECKF(o.calls[c].done && is(&o.calls[c].name, w->names[c]) && is(&o.calls[c].args, w->args[c]),
               "%s: call %d '%s' '%s'", text, c, o.calls[c].name.p ? o.calls[c].name.p : "",
               o.calls[c].args.p ? o.calls[c].args.p : "");
    const size_t n = strlen(text);
    for (size_t step = 1; step <= 7; step++) {
        bool grows = true;
        harmony_out_free(&prev);
        for (size_t end = step < n ? step : n;; end = end + step < n ? end + step : n) {
            struct harmony_out cur = {0};
            harmony_parse(text, end, end == n, &cur);
            grows &= prefix_of(&prev.reasoning, &cur.reasoning) && prefix_of(&prev.content, &cur.content) &&
                     cur.n_calls >= prev.n_calls;
            for (int c = 0; c < prev.n_calls && c < cur.n_calls; c++)
                grows &= prefix_of(&prev.calls[c].args, &cur.calls[c].args);
            harmony_out_free(&prev);
            prev = cur;
            if (end == n) break;
        }
        CHECKF(grows, "%s: pieces of %zu: an output shrank", text, step);
        bool same = is(&prev.reasoning, w->reasoning) && is(&prev.content, w->content) && prev.n_calls == w->n_calls;
        for (int c = 0; same && c < prev.n_calls; c++) same = is(&prev.calls[c].args, w->args[c]);
        CHECKF(same, "%s: pieces of %zu end differently", text, step);
    }
    harmony_out_free(&prev);
    harmony_out_free(&o);
}

// The server's parser in the harmony format (tools.c): reasoning apart, calls with ids and
// minified arguments, the first only without parallel_tool_calls, none when drop_calls.
static void test_tools_parser(void) {
    static const char text[] = "<|channel|>analysis<|message|>Two calls.<|end|><|start|>assistant<|channel|>"
                               "commentary to=functions.a <|constrain|>json<|message|>{ \"x\" : 1 }<|call|>"
                               "<|start|>assistant to=functions.b<|channel|>commentary json<|message|>{\"y\": \"a b\"}";
    for (int mode = 0; mode < 3; mode++) { // parallel, single, dropped
        struct tools_parser p;
        tools_parser_init(&p, LM_CHAT_TOOLS_HARMONY, mode == 0, 7);
        p.drop_calls = mode == 2;
        const size_t n = strlen(text);
        for (size_t i = 0; i < n; i += 5) tools_parser_feed(&p, text + i, n - i < 5 ? n - i : 5, false);
        tools_parser_feed(&p, "", 0, true);
        CHECK(!p.oom && is(&p.reasoning, "Two calls.") && is(&p.content, ""));
        CHECKF(p.n_calls == (mode == 0 ? 2 : mode == 1 ? 1 : 0), "mode %d: %d calls", mode, p.n_calls);
        if (p.n_calls > 0)
            CHECK(is(&p.calls[0].name, "a") && is(&p.calls[0].args, "{\"x\":1}") && p.calls[0].args_done &&
                  strncmp(p.calls[0].id, "call_", 5) == 0 && strlen(p.calls[0].id) == 29);
        if (p.n_calls > 1)
            CHECK(is(&p.calls[1].name, "b") && is(&p.calls[1].args, "{\"y\":\"a b\"}") && p.calls[1].args_done &&
                  strcmp(p.calls[0].id, p.calls[1].id) != 0);
        CHECK(p.content_null == (p.n_calls > 0));
        tools_parser_free(&p);
    }
}

#define W(r, c) (&(struct want){.reasoning = r, .content = c})
#define WC(r, c, n, name, arg) (&(struct want){.reasoning = r, .content = c, .n_calls = n, .names = name, .args = arg})
#define WC2(n0, a0, n1, a1) (&(struct want){.reasoning = "", .content = "", .n_calls = 2, .names = {n0, n1}, .args = {a0, a1}})

int main(void) {
    // reasoning, then the answer
    check("<|channel|>analysis<|message|>User says hi.<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>",
          W("User says hi.", "Hello!"));
    // the end of generation (<|return|>) is not in the text the server sees
    check("<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>A <b> & <|x",
          W("think", "A <b> & <|x"));
    // a call, recipient in the channel header, <|call|> absent (the end of generation)
    check("<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
          "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}",
          WC("Need weather.", "", 1, {"get_weather"}, {"{\"city\":\"Paris\"}"}));
    // recipient in the role header, as the template writes history; two calls; <|call|> present
    check("<|start|>assistant to=functions.a<|channel|>commentary json<|message|>{}<|call|>"
          "<|start|>assistant to=functions.b<|channel|>commentary json<|message|>{\"x\": 1}<|call|>",
          WC2("a", "{}", "b", "{\"x\": 1}"));
    // a preamble to the user (commentary, no recipient), then a call
    check("<|channel|>commentary<|message|>Checking now.<|end|><|start|>assistant<|channel|>commentary to=functions.f"
          "<|message|>{\"q\": \"<|end\"}",
          WC("", "Checking now.", 1, {"f"}, {"{\"q\": \"<|end\"}"}));
    // truncated: analysis never closed (max_tokens), final never closed
    check("<|channel|>analysis<|message|>Let me think about th", W("Let me think about th", ""));
    check("<|channel|>analysis<|message|>Done thinking.<|e", W("Done thinking.", "")); // a marker cut short
    check("<|channel|>analysis<|message|>ok<|end|><|start|>assistant<|channel|>final<|message|>The answer is",
          W("ok", "The answer is"));
    // a header never closed is dropped; an unknown channel is content; built-in tools dropped
    check("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>fin", W("a", ""));
    check("<|channel|>weird<|message|>text<|end|>", W("", "text"));
    check("<|channel|>analysis<|message|>search<|end|><|start|>assistant<|channel|>analysis to=browser.search"
          "<|message|>{\"query\": \"x\"}<|call|>",
          (&(struct want){.reasoning = "search", .content = "", .n_dropped = 1}));
    // the stray commentary prefix gpt-oss-20b writes; " to=assistant" names no recipient
    check("<|channel|>commentary to=assistant<|channel|>analysis<|message|>hmm<|end|>", W("hmm", ""));
    // not harmony at all: content as it is; white space before a header skipped
    check("Hello world, no markers.", W("", "Hello world, no markers."));
    check("to be or not", W("", "to be or not"));
    check("<tohi assistant<|constrain|>x", W("", "<tohi assistant<|constrain|>x")); // "<" without "|": text
    check("\n<|channel|>final<|message|>x<|return|>ignored", W("", "x"));
    // a new header without <|end|> or <|start|> closes the message before it
    check("<|channel|>analysis<|message|>a<|channel|>final<|message|>b", W("a", "b"));
    // a channel switch inside a header: the last one counts
    check(" to=functions.g<|channel|>commentary<|message|>{\"k\":[1,2]}", WC("", "", 1, {"g"}, {"{\"k\":[1,2]}"}));
    test_tools_parser();
    return lm_test_finish();
}
