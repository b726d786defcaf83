// The reasoning splitter's harmony form (gpt-oss): analysis message bodies are reasoning; the rest
// is content, either as the plain text of the other messages' bodies (calls and other recipients
// dropped: the CLI, an answer without tools) or, with markup, as the harmony text less the analysis
// bodies (markers and headers kept, for the server's tool-call reader). One pass, as think tags.
#include <string.h>

#include "reasoning.h"

enum { H_HEAD = 0, H_BODY, H_DONE };
enum { M_START, M_END, M_RETURN, M_CALL, M_CHANNEL, M_MESSAGE, M_CONSTRAIN };
static const char *const k_markers[] = {"<|start|>", "<|end|>", "<|return|>", "<|call|>", "<|channel|>",
                                        "<|message|>", "<|constrain|>", NULL};

enum reason_dest reason_harmony_dest(const char *h, size_t n, const char **name, size_t *name_n) {
    const char *end = h + n, *to = NULL, *ch = NULL;
    for (const char *p = h; p + 3 <= end; p++)
        if (memcmp(p, "to=", 3) == 0 && (p == h || p[-1] == ' ')) to = p + 3;
    for (const char *p = h; p + 11 <= end; p++)
        if (memcmp(p, "<|channel|>", 11) == 0) ch = p + 11;
    size_t rn = 0, cn = 0;
    while (to && to + rn < end && to[rn] != ' ' && to[rn] != '<') rn++;
    while (ch && ch + cn < end && ch[cn] != ' ' && ch[cn] != '<') cn++;
    if (to && !(rn == 9 && memcmp(to, "assistant", 9) == 0)) { // " to=assistant": no recipient
        if (rn > 10 && memcmp(to, "functions.", 10) == 0) {
            if (name) *name = to + 10;
            if (name_n) *name_n = rn - 10;
            return REASON_DEST_CALL;
        }
        return REASON_DEST_DROP;
    }
    if (ch && cn == 8 && memcmp(ch, "analysis", 8) == 0) return REASON_DEST_REASON;
    return REASON_DEST_CONTENT;
}

// The marker at p[0, n) (p[0] == '<'): its index, -1 when none begins here, -2 when p is a
// proper prefix of one (more text may complete it).
static int marker_at(const char *p, size_t n) {
    bool partial = false;
    for (int k = 0; k_markers[k]; k++) {
        const size_t m = strlen(k_markers[k]);
        if (n >= m && memcmp(p, k_markers[k], m) == 0) return k;
        if (n < m && memcmp(p, k_markers[k], n) == 0) partial = true;
    }
    return partial ? -2 : -1;
}

static void put(struct reason_split *s, struct sbuf *to, const char *p, size_t n) {
    if (n && !sbuf_append(to, p, n)) s->oom = true;
}

// Markup: text that is not a body (headers, markers) goes to content as it is.
static void frame(struct reason_split *s, struct sbuf *content, const char *p, size_t n) {
    if (s->markup) put(s, content, p, n);
}

static void body(struct reason_split *s, struct sbuf *reason, struct sbuf *content, const char *p, size_t n) {
    if (s->h_dest == REASON_DEST_REASON) put(s, reason, p, n);
    else if (s->h_dest == REASON_DEST_CONTENT || s->markup) put(s, content, p, n);
}

// A header begins here: plain text where it should be (not white space, not " to=", not the
// role after <|start|>) is no harmony: a body of content without a header.
static bool plain_start(const struct reason_split *s, const char *p, size_t n) {
    if (s->h_role || n == 0 || p[0] == ' ' || p[0] == '\n' || p[0] == '\r' || p[0] == '\t') return false;
    if (p[0] == '<') return n >= 2 && p[1] != '|'; // "<|": a marker; "<x": text
    return !(memcmp(p, "to=", n < 3 ? n : 3) == 0);
}

// One step on the held text; false when more text is needed.
static bool step(struct reason_split *s, struct sbuf *reason, struct sbuf *content, bool final) {
    struct sbuf *h = &s->hold;
    const char *p = h->p ? h->p : "";
    if (h->n == 0) return false;
    if (s->h_state == H_DONE) { // after <|return|>: nothing more is the answer's
        frame(s, content, p, h->n);
        sbuf_consume(h, h->n);
        return false;
    }
    if (s->h_state == H_HEAD && s->h_fresh) {
        size_t w = 0; // white space before a header is skipped
        while (w < h->n && (p[w] == ' ' || p[w] == '\n' || p[w] == '\r' || p[w] == '\t')) w++;
        frame(s, content, p, w);
        sbuf_consume(h, w);
        p = h->p ? h->p : "";
        if (h->n == 0) return false;
        if (!final && h->n < 3 && memcmp(p, "to=", h->n) == 0 && !s->h_role) return false; // "t": may be "to="
        if (!final && h->n == 1 && p[0] == '<' && !s->h_role) return false;                  // "<": may be "<|"
        s->h_fresh = false;
        if (plain_start(s, p, h->n)) {
            s->h_state = H_BODY;
            s->h_dest = REASON_DEST_CONTENT;
            return true;
        }
    }
    for (size_t i = 0; i < h->n; i++) {
        if (p[i] != '<') continue;
        const int k = marker_at(p + i, h->n - i);
        if (k == -1) continue;
        if (k == -2) { // held: may become a marker
            if (s->h_state == H_BODY) {
                body(s, reason, content, p, i);
                sbuf_consume(h, i);
            }
            return false;
        }
        const size_t m = strlen(k_markers[k]);
        if (s->h_state == H_BODY) {
            if (k == M_MESSAGE || k == M_CONSTRAIN) continue; // inside a body: text
            body(s, reason, content, p, i);
            sbuf_consume(h, i);
            s->h_state = k == M_RETURN ? H_DONE : H_HEAD;
            s->h_fresh = k != M_CHANNEL;
            s->h_role = k == M_START;
            if (k != M_CHANNEL) { // a header begins after the marker (<|channel|> is part of it)
                frame(s, content, h->p, m);
                sbuf_consume(h, m);
            }
            return true;
        }
        if (k == M_MESSAGE) { // the header is complete: where its body goes
            s->h_dest = reason_harmony_dest(p, i, NULL, NULL);
            frame(s, content, p, i + m);
            sbuf_consume(h, i + m);
            s->h_state = H_BODY;
            return true;
        }
        if (k == M_START || k == M_END || k == M_RETURN || k == M_CALL) { // a new header after it
            frame(s, content, p, i + m);
            sbuf_consume(h, i + m);
            s->h_state = k == M_RETURN ? H_DONE : H_HEAD;
            s->h_fresh = true;
            s->h_role = k == M_START;
            return true;
        }
        i += m - 1;
    }
    if (s->h_state == H_BODY) { // no marker: all of it is the body's
        body(s, reason, content, p, h->n);
        sbuf_consume(h, h->n);
    }
    return false; // a header: held until its <|message|>
}

void reason_harmony_feed(struct reason_split *s, struct sbuf *reason, struct sbuf *content) {
    while (step(s, reason, content, false)) {
    }
}

void reason_harmony_finish(struct reason_split *s, struct sbuf *reason, struct sbuf *content) {
    while (step(s, reason, content, true)) {
    }
    // what is held: a header never closed (dropped, as harmony_parse drops it) or a marker cut
    // short at the very end; with markup both stay for the tool-call reader
    frame(s, content, s->hold.p, s->hold.n);
    sbuf_consume(&s->hold, s->hold.n);
}
