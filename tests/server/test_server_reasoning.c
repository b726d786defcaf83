// The reasoning splitter (src/common/reasoning.c): answers with and without a thinking span,
// whole and fed in pieces of every size 1..9 (markers split across deltas: the same reasoning
// and content), unclosed spans, a span the prompt opened, detection from templates.
// LM_TEST_LABELS: unit
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_test.h"
#include "reasoning.h"

static bool eq(const struct sbuf *b, const char *want) {
    const size_t n = strlen(want);
    return b->n == n && (n == 0 || memcmp(b->p, want, n) == 0);
}

// Splits text whole, then in pieces of 1..9 bytes; each split must give want_r / want_c.
static void check(enum reason_kind kind, bool in_think, const char *text, const char *want_r, const char *want_c) {
    const size_t n = strlen(text);
    for (size_t piece = 0; piece <= 9; piece++) { // 0: whole
        struct reason_split s;
        struct sbuf r = {0}, c = {0};
        reason_split_init(&s, kind, in_think);
        const size_t step = piece ? piece : n ? n : 1;
        for (size_t i = 0; i < n; i += step) reason_split_feed(&s, text + i, i + step > n ? n - i : step, &r, &c);
        reason_split_finish(&s, &r, &c);
        CHECKF(eq(&r, want_r) && eq(&c, want_c) && !s.oom,
               "text '%s' (in_think %d, pieces of %zu): reasoning '%s' content '%s', want '%s' / '%s'", text,
               (int)in_think, piece, r.p ? r.p : "", c.p ? c.p : "", want_r, want_c);
        reason_split_free(&s);
        sbuf_free(&r);
        sbuf_free(&c);
    }
}

static void test_think_tags(void) {
    const enum reason_kind k = REASON_THINK_TAGS;
    check(k, false, "<think>\nLet me see.\n</think>\n\nThe answer is 4.", "Let me see.", "The answer is 4.");
    check(k, false, "no thinking here", "", "no thinking here");
    check(k, false, "  indented answer", "", "  indented answer"); // white space kept without a span
    check(k, false, "", "", "");
    check(k, false, "<think>\n\n</think>\n\nQuick.", "", "Quick."); // Qwen3's empty span
    check(k, false, "<think>a </thinker> b\n\n</think>c", "a </thinker> b", "c");
    check(k, false, "<think>a\n\nb\n</think>", "a\n\nb", "");
    check(k, false, "x <think>y</think>", "", "x <think>y</think>"); // a span only at the start
    check(k, false, "<thi", "", "<thi");                              // ended inside a marker
    check(k, false, "<thinker>", "", "<thinker>");
    check(k, false, "<think>unclosed thought  \n", "unclosed thought", "");
    check(k, false, "<think>cut at </thi", "cut at </thi", "");
    check(k, false, "<think>two</think>one<think>more</think>", "two", "one<think>more</think>");
    check(k, false, "<think>\xe4\xbd\xa0\xe5\xa5\xbd</think>\xe5\xa5\xbd", "\xe4\xbd\xa0\xe5\xa5\xbd", "\xe5\xa5\xbd");
    // the prompt opened the span (R1's "<think>\n"): no opening marker in the answer
    check(k, true, "Hmm, 2+2.\n</think>\n\n4", "Hmm, 2+2.", "4");
    check(k, true, "<think>\nrepeated marker</think>ok", "repeated marker", "ok");
    check(k, true, "never closed", "never closed", "");
    check(k, true, "</think>direct", "", "direct");
    check(k, true, "<thi", "<thi", "");
    check(k, true, "", "", "");
}

static void test_none(void) {
    check(REASON_NONE, false, "<think>a</think>b", "", "<think>a</think>b"); // inline: all content
    check(REASON_NONE, true, "a</think>b", "", "a</think>b");
}

// reason_split_thinking follows the span: for counting reasoning tokens.
static void test_thinking_flag(void) {
    struct reason_split s;
    struct sbuf r = {0}, c = {0};
    reason_split_init(&s, REASON_THINK_TAGS, false);
    CHECK(!reason_split_thinking(&s));
    reason_split_feed(&s, "<think>", 7, &r, &c);
    CHECK(reason_split_thinking(&s));
    reason_split_feed(&s, "hmm", 3, &r, &c);
    CHECK(reason_split_thinking(&s));
    reason_split_feed(&s, "</think>", 8, &r, &c);
    CHECK(!reason_split_thinking(&s));
    reason_split_feed(&s, "answer", 6, &r, &c);
    CHECK(!reason_split_thinking(&s) && eq(&r, "hmm") && eq(&c, "answer"));
    reason_split_free(&s);
    reason_split_init(&s, REASON_THINK_TAGS, true);
    CHECK(reason_split_thinking(&s));
    reason_split_free(&s);
    reason_split_init(&s, REASON_THINK_TAGS, false);
    reason_split_feed(&s, "plain", 5, &r, &c);
    CHECK(!reason_split_thinking(&s));
    reason_split_free(&s);
    sbuf_free(&r);
    sbuf_free(&c);
}

static void test_detect(void) {
    CHECK(reason_kind_detect("{{ '<think>\\n\\n</think>\\n\\n' }}", false) == REASON_THINK_TAGS);
    CHECK(reason_kind_detect("<|im_start|>assistant\n", true) == REASON_NONE); // template has no span
    CHECK(reason_kind_detect(NULL, true) == REASON_THINK_TAGS);
    CHECK(reason_kind_detect("", true) == REASON_THINK_TAGS);
    CHECK(reason_kind_detect(NULL, false) == REASON_NONE);
    const char *r1 = "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c><think>\n";
    CHECK(reason_prompt_opens(REASON_THINK_TAGS, r1, strlen(r1)));
    CHECK(!reason_prompt_opens(REASON_NONE, r1, strlen(r1)));
    const char *q3 = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    CHECK(!reason_prompt_opens(REASON_THINK_TAGS, q3, strlen(q3)));
    CHECK(!reason_prompt_opens(REASON_THINK_TAGS, "think>", 6));
    CHECK(strcmp(reason_end_marker(REASON_THINK_TAGS), "</think>") == 0);
    CHECK(reason_end_marker(REASON_NONE) == NULL);
}

int main(void) {
    test_think_tags();
    test_none();
    test_thinking_flag();
    test_detect();
    return lm_test_finish();
}
