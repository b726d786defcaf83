// The harmony answer parser (gpt-oss): messages are "<|start|>ROLE HEADER<|message|>BODY END"
// where the header holds <|channel|>NAME, " to=RECIPIENT" and <|constrain|>TYPE, and END is
// <|end|>, <|return|> (the answer is over) or <|call|> (a tool call is). Where each body goes:
//   analysis                   -> reasoning
//   final, commentary, unknown -> content (commentary without a recipient is a preamble to a call)
//   to=functions.NAME          -> a tool call NAME with the body as its arguments (any channel)
//   to=<anything else>         -> dropped (built-in tools lumen does not run; counted); a stray
//                                 " to=assistant" names no recipient.
// Text that is not harmony at all (no header before the first body byte) is content.
#include "harmony.h"
#include "reasoning.h"

#include <stdlib.h>
#include <string.h>

enum dest { D_REASON, D_CONTENT, D_CALL, D_DROP };

static const char *const k_markers[] = {"<|start|>", "<|end|>", "<|return|>", "<|call|>", "<|channel|>",
                                        "<|message|>", "<|constrain|>", NULL};

// The marker at p[0, n) (p starts with "<|"): its index, -1 when none can start here, -2 when
// p is a proper prefix of one (more text may complete it).
static int marker_at(const char *p, size_t n) {
    bool partial = false;
    for (int k = 0; k_markers[k]; k++) {
        size_t m = strlen(k_markers[k]);
        if (n >= m && memcmp(p, k_markers[k], m) == 0) return k;
        if (n < m && memcmp(p, k_markers[k], n) == 0) partial = true;
    }
    return partial ? -2 : -1;
}
enum { M_START, M_END, M_RETURN, M_CALL, M_CHANNEL, M_MESSAGE, M_CONSTRAIN };

static void put(struct harmony_out *o, struct sbuf *b, const char *p, size_t n) {
    if (n && !sbuf_append(b, p, n)) o->oom = true;
}

// A message's header: where its body goes (the splitter's reading, common/reasoning_harmony.c);
// for a call, its name.
static enum dest header_dest(const char *h, size_t n, const char **name, size_t *name_n) {
    switch (reason_harmony_dest(h, n, name, name_n)) {
    case REASON_DEST_REASON: return D_REASON;
    case REASON_DEST_CALL: return D_CALL;
    case REASON_DEST_DROP: return D_DROP;
    default: return D_CONTENT;
    }
}

static struct harmony_call *call_new(struct harmony_out *o, const char *name, size_t n) {
    if (o->n_calls == o->cap) {
        int nc = o->cap ? 2 * o->cap : 4;
        struct harmony_call *c = realloc(o->calls, (size_t)nc * sizeof *c);
        if (!c) {
            o->oom = true;
            return NULL;
        }
        o->calls = c;
        o->cap = nc;
    }
    struct harmony_call *c = &o->calls[o->n_calls++];
    memset(c, 0, sizeof *c);
    put(o, &c->name, name, n);
    return c;
}

void harmony_out_free(struct harmony_out *o) {
    sbuf_free(&o->reasoning);
    sbuf_free(&o->content);
    for (int i = 0; i < o->n_calls; i++) {
        sbuf_free(&o->calls[i].name);
        sbuf_free(&o->calls[i].args);
    }
    free(o->calls);
    memset(o, 0, sizeof *o);
}

struct rd {
    struct harmony_out *o;
    bool in_body;
    size_t head; // start of the current header (in_body false)
    bool role;   // the header follows <|start|>: it begins with the author's role
    enum dest d;
    struct harmony_call *call;
};

static void body(struct rd *r, const char *p, size_t n) {
    struct harmony_out *o = r->o;
    if (r->d == D_REASON) put(o, &o->reasoning, p, n);
    else if (r->d == D_CONTENT) put(o, &o->content, p, n);
    else if (r->d == D_CALL && r->call) put(o, &r->call->args, p, n);
}

static void open_body(struct rd *r, const char *h, size_t hn) {
    const char *name = NULL;
    size_t name_n = 0;
    r->d = header_dest(h, hn, &name, &name_n);
    r->call = r->d == D_CALL ? call_new(r->o, name, name_n) : NULL;
    if (r->d == D_DROP) r->o->n_dropped++;
    r->in_body = true;
}

static void close_body(struct rd *r) {
    if (r->call) r->call->done = true;
    r->call = NULL;
    r->in_body = false;
}

void harmony_parse(const char *s, size_t n, bool final, struct harmony_out *o) {
    harmony_out_free(o);
    struct rd r = {.o = o};
    size_t i = 0, run = 0; // body: bytes [run, i) not given out yet
    while (i < n) {
        if (s[i] != '<' || (i + 1 < n && s[i + 1] != '|')) {
            // header text, or body text. Where a header should begin: white space is skipped, and
            // other plain text (not " to=", not a role after <|start|>) is no harmony: content.
            if (!r.in_body && i == r.head && !r.role) {
                if (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
                    r.head = ++i;
                    continue;
                }
                if (!(n - i >= 3 && memcmp(s + i, "to=", 3) == 0) && !(n - i < 3 && memcmp(s + i, "to=", n - i) == 0)) {
                    r.in_body = true;
                    r.d = D_CONTENT;
                    run = i;
                } else if (n - i < 3 && !final) {
                    break; // "t": may be " to="
                }
            }
            i++;
            continue;
        }
        int k = marker_at(s + i, n - i);
        if (k == -2) break; // held back: may become a marker (final: a marker cut short, dropped)
        if (k < 0) {
            i++;
            continue;
        }
        if (r.in_body) {
            if (k == M_MESSAGE || k == M_CONSTRAIN) { // not a message boundary: text
                i += strlen(k_markers[k]);
                continue;
            }
            body(&r, s + run, i - run);
            close_body(&r);
            i += strlen(k_markers[k]);
            r.head = k == M_CHANNEL ? i - 11 : i; // a new header without <|start|>: it begins here
            r.role = k == M_START;
            if (k == M_RETURN) break;            // the answer is over
            continue;
        }
        if (k == M_MESSAGE) {
            open_body(&r, s + r.head, i - r.head);
            i += 11;
            run = i;
            continue;
        }
        if (k == M_START || k == M_END || k == M_RETURN || k == M_CALL) {
            r.head = i + strlen(k_markers[k]);
            r.role = k == M_START;
        }
        if (k == M_RETURN) break;
        i += strlen(k_markers[k]);
    }
    if (r.in_body) {
        // the body up to what is held back (or all of it when final: a truncated message)
        size_t stop = i < n ? i : n;
        body(&r, s + run, stop - run);
        if (final) close_body(&r);
    }
}
