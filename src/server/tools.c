// Tool calls in the model's output (docs/structured.md, "Tool calls"): the text so far is
// parsed into content and calls in the family's format, again at every token; content only
// grows and text that may begin a call marker is held back, so a stream never sends text it
// would have to take back. The grammars that make the model write them: structured.c.
#define _GNU_SOURCE // memmem
#include "tools.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "harmony.h"

// ================================================================ JSON scanning on partial text

enum scan { SCAN_DONE, SCAN_MORE, SCAN_BAD };

static size_t skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

// A string at s[i] == '"': DONE with *end just past its closing quote.
static enum scan scan_string(const char *s, size_t n, size_t i, size_t *end) {
    for (i++; i < n; i++) {
        if (s[i] == '\\') {
            i++;
            continue;
        }
        if (s[i] == '"') {
            *end = i + 1;
            return SCAN_DONE;
        }
        if ((unsigned char)s[i] < 0x20) return SCAN_BAD;
    }
    return SCAN_MORE;
}

// Any value at s[i]: its extent (brackets balanced, strings skipped; the inside is not
// validated: the grammar made it valid, and a free model's near-JSON is kept as it wrote it).
static enum scan scan_value(const char *s, size_t n, size_t i, size_t *end, bool final) {
    if (i >= n) return SCAN_MORE;
    const char c = s[i];
    if (c == '"') return scan_string(s, n, i, end);
    if (c == '{' || c == '[') {
        char stack[128];
        int d = 0;
        for (; i < n; i++) {
            const char ch = s[i];
            if (ch == '"') {
                size_t e;
                const enum scan r = scan_string(s, n, i, &e);
                if (r != SCAN_DONE) return r;
                i = e - 1;
            } else if (ch == '{' || ch == '[') {
                if (d == (int)sizeof stack) return SCAN_BAD;
                stack[d++] = ch;
            } else if (ch == '}' || ch == ']') {
                if (!d || stack[d - 1] != (ch == '}' ? '{' : '[')) return SCAN_BAD;
                if (--d == 0) {
                    *end = i + 1;
                    return SCAN_DONE;
                }
            }
        }
        return SCAN_MORE;
    }
    size_t j = i; // a number or a literal
    while (j < n && ((s[j] >= '0' && s[j] <= '9') || (s[j] >= 'a' && s[j] <= 'z') || s[j] == '-' || s[j] == '+' ||
                     s[j] == '.' || s[j] == 'E'))
        j++;
    if (j == i) return SCAN_BAD;
    if (j == n && !final) return SCAN_MORE;
    *end = j;
    return SCAN_DONE;
}

// s[a, b) without the whitespace between JSON tokens (a is outside any string).
static void minify(struct sbuf *out, const char *s, size_t a, size_t b) {
    bool in_str = false;
    for (size_t i = a; i < b; i++) {
        const char c = s[i];
        if (in_str) {
            sbuf_append(out, &c, 1);
            if (c == '\\' && i + 1 < b) sbuf_append(out, &s[++i], 1);
            else if (c == '"') in_str = false;
        } else if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            sbuf_append(out, &c, 1);
            in_str = c == '"';
        }
    }
}

static void put_utf8(struct sbuf *b, unsigned cp) {
    char u[4];
    size_t k;
    if (cp < 0x80) u[0] = (char)cp, k = 1;
    else if (cp < 0x800) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3F)), k = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | (cp >> 6 & 0x3F)), u[2] = (char)(0x80 | (cp & 0x3F)), k = 3;
    else
        u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | (cp >> 12 & 0x3F)), u[2] = (char)(0x80 | (cp >> 6 & 0x3F)),
        u[3] = (char)(0x80 | (cp & 0x3F)), k = 4;
    sbuf_append(b, u, k);
}

static int hex4(const char *p) {
    int v = 0;
    for (int k = 0; k < 4; k++) {
        const char c = p[k];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

// The string at s[i] == '"' decoded as far as it is complete (an escape cut short waits).
static void decode_partial(struct sbuf *out, const char *s, size_t n, size_t i) {
    for (i++; i < n && s[i] != '"'; i++) {
        if (s[i] != '\\') {
            sbuf_append(out, &s[i], 1);
            continue;
        }
        if (i + 1 >= n) return;
        const char x = s[i + 1];
        const char *simple = x == 'n' ? "\n" : x == 't' ? "\t" : x == 'r' ? "\r" : x == 'b' ? "\b" : x == 'f' ? "\f" : NULL;
        if (simple) {
            sbuf_puts(out, simple);
            i++;
        } else if (x == 'u') {
            if (i + 6 > n) return;
            int cp = hex4(s + i + 2);
            if (cp < 0) return;
            i += 5;
            if (cp >= 0xD800 && cp < 0xDC00) { // a surrogate pair: both halves or wait
                if (i + 7 > n) return;
                const int lo = s[i + 1] == '\\' && s[i + 2] == 'u' ? hex4(s + i + 3) : -1;
                if (lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    i += 6;
                } else {
                    cp = 0xFFFD;
                }
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                cp = 0xFFFD;
            }
            put_utf8(out, (unsigned)cp);
        } else {
            sbuf_append(out, &x, 1); // \" \\ \/
            i++;
        }
    }
}

// ================================================================ calls

// One call object {"name": ..., "<args>": ...} as far as it is written.
struct callp {
    bool has_name, has_args, args_done, args_string;
    size_t name_a, name_b, args_a, args_b;
};

static bool key_is(const char *s, size_t a, size_t b, const char *key) {
    return b - a == strlen(key) && memcmp(s + a, key, b - a) == 0;
}

// The object at s[i] == '{'. args_key / args_key2: the key of the arguments (either).
static enum scan scan_call(const char *s, size_t n, size_t i, const char *args_key, const char *args_key2,
                           struct callp *c, size_t *end, bool final) {
    memset(c, 0, sizeof *c);
    for (i++;;) {
        i = skip_ws(s, n, i);
        if (i >= n) return SCAN_MORE;
        if (s[i] == '}') {
            *end = i + 1;
            return SCAN_DONE;
        }
        if (s[i] != '"') return SCAN_BAD;
        size_t ke;
        enum scan r = scan_string(s, n, i, &ke);
        if (r != SCAN_DONE) return r;
        const size_t ka = i + 1, kb = ke - 1;
        i = skip_ws(s, n, ke);
        if (i >= n) return SCAN_MORE;
        if (s[i] != ':') return SCAN_BAD;
        i = skip_ws(s, n, i + 1);
        if (i >= n) return SCAN_MORE;
        size_t ve = n;
        r = scan_value(s, n, i, &ve, final);
        if (r == SCAN_BAD) return r;
        if (key_is(s, ka, kb, "name")) {
            if (s[i] != '"') return SCAN_BAD;
            if (r == SCAN_DONE) {
                c->has_name = true;
                c->name_a = i + 1;
                c->name_b = ve - 1;
            }
        } else if (key_is(s, ka, kb, args_key) || (args_key2 && key_is(s, ka, kb, args_key2))) {
            c->has_args = true;
            c->args_string = s[i] == '"';
            c->args_a = i;
            c->args_b = r == SCAN_DONE ? ve : n;
            c->args_done = r == SCAN_DONE;
        }
        if (r == SCAN_MORE) return r;
        i = skip_ws(s, n, ve);
        if (i >= n) return SCAN_MORE;
        if (s[i] == ',') {
            i++;
            continue;
        }
        if (s[i] != '}') return SCAN_BAD;
        *end = i + 1;
        return SCAN_DONE;
    }
}

static void call_id(char id[32], uint64_t seed, int32_t k) {
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    memcpy(id, "call_", 5);
    uint64_t x = 0; // 62^10 < 2^64: ten letters from each 64-bit draw
    for (int i = 0; i < 24; i++) {
        if (i % 10 == 0) x = srv_splitmix(seed + 0x9e3779b97f4a7c15ull * (uint64_t)(k + 1) + (uint64_t)i);
        id[5 + i] = al[x % 62];
        x /= 62;
    }
    id[29] = 0;
}

// Grows what is known of call k from its parsed object (nothing known is ever taken back).
static void record_call(struct tools_parser *p, int32_t k, const char *s, const struct callp *c) {
    if (!c->has_name) return; // a call shows once its name is known
    if (k >= p->n_calls) {
        if (k >= p->cap) {
            const int32_t cap = p->cap ? 2 * p->cap : 4;
            struct tool_call *v = realloc(p->calls, (size_t)cap * sizeof *v);
            if (!v) {
                p->oom = true;
                return;
            }
            p->calls = v;
            p->cap = cap;
        }
        struct tool_call *t = &p->calls[p->n_calls++];
        memset(t, 0, sizeof *t);
        call_id(t->id, p->seed, k);
        sbuf_append(&t->name, s + c->name_a, c->name_b - c->name_a);
        sbuf_append(&t->args, "", 0);
        t->name_done = true;
    }
    struct tool_call *t = &p->calls[k];
    if (t->args_done || !c->has_args) return;
    struct sbuf a = {0};
    if (c->args_string) { // the arguments written as a JSON string of JSON: once whole
        if (!c->args_done) return;
        json_t *str = json_loadb(s + c->args_a, c->args_b - c->args_a, JSON_DECODE_ANY, NULL);
        if (json_is_string(str)) minify(&a, json_string_value(str), 0, json_string_length(str));
        json_decref(str);
    } else {
        minify(&a, s, c->args_a, c->args_b);
    }
    if (a.n > t->args.n) sbuf_append(&t->args, a.p + t->args.n, a.n - t->args.n);
    t->args_done = c->args_done;
    if (a.oom || t->args.oom || t->name.oom) p->oom = true;
    sbuf_free(&a);
}

// Content grows to want[0, n) (never shrinks).
static void grow_content(struct tools_parser *p, const char *want, size_t n) {
    if (n > p->content.n) sbuf_append(&p->content, want + p->content.n, n - p->content.n);
    if (p->content.oom) p->oom = true;
}

// The content before a call at pos: without trailing whitespace (held back until known).
static void content_before(struct tools_parser *p, const char *s, size_t pos, bool final, bool calls) {
    size_t e = pos;
    if (!final || calls)
        while (e > 0 && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\n' || s[e - 1] == '\r')) e--;
    grow_content(p, s, e);
}

// Longest proper prefix of m that ends s[0, n).
static size_t marker_tail(const char *s, size_t n, const char *m) {
    const size_t ml = strlen(m);
    for (size_t k = ml - 1; k > 0; k--)
        if (k <= n && memcmp(s + n - k, m, k) == 0) return k;
    return 0;
}

static bool starts(const char *s, size_t n, size_t i, const char *m, bool *partial) {
    const size_t ml = strlen(m);
    if (n - i >= ml) return memcmp(s + i, m, ml) == 0;
    *partial = memcmp(s + i, m, n - i) == 0;
    return false;
}

static const char k_open[] = "<tool_call>", k_close[] = "</tool_call>";

// Qwen: content, then <tool_call> {"name", "arguments"} </tool_call> ...
static void parse_qwen(struct tools_parser *p, bool final) {
    const char *s = p->text.p ? p->text.p : "";
    const size_t n = p->text.n;
    const char *m = memmem(s, n, k_open, sizeof k_open - 1);
    if (!m) {
        content_before(p, s, final ? n : n - marker_tail(s, n, k_open), final, false);
        return;
    }
    const size_t pos = (size_t)(m - s);
    content_before(p, s, pos, final, true);
    for (size_t i = pos, k = 0; (k == 0 || p->parallel) && i < n; k++) {
        bool partial = false;
        if (!starts(s, n, i, k_open, &partial)) return;
        i = skip_ws(s, n, i + sizeof k_open - 1);
        if (i >= n || s[i] != '{') return;
        struct callp c;
        size_t end = n;
        const enum scan r = scan_call(s, n, i, "arguments", NULL, &c, &end, final);
        if (r == SCAN_BAD) return;
        record_call(p, (int32_t)k, s, &c);
        if (r == SCAN_MORE) return;
        i = skip_ws(s, n, end);
        if (!starts(s, n, i, k_close, &partial)) return;
        i = skip_ws(s, n, i + sizeof k_close - 1);
    }
}

// Where a Llama 3 call begins: a '{' followed by "name" or "type" (partial: the text ends in a
// prefix of that). n when there is none.
static size_t llama_start(const char *s, size_t n, bool final, bool *partial) {
    *partial = false;
    for (const char *q = memchr(s, '{', n); q; q = memchr(q + 1, '{', n - (size_t)(q + 1 - s))) {
        const size_t i = (size_t)(q - s), j = skip_ws(s, n, i + 1);
        bool pn = false, pt = false;
        if (starts(s, n, j, "\"name\"", &pn) || starts(s, n, j, "\"type\"", &pt)) return i;
        if (!final && (j == n || pn || pt)) {
            *partial = true;
            return i;
        }
        if (q + 1 >= s + n) break;
    }
    return n;
}

// Llama 3.1: content, then {"name", "parameters"} objects (";" or white space between).
static void parse_llama3(struct tools_parser *p, bool final) {
    const char *s = p->text.p ? p->text.p : "";
    const size_t n = p->text.n;
    bool partial = false;
    const size_t pos = llama_start(s, n, final, &partial);
    content_before(p, s, pos, final, pos < n && !partial);
    if (pos == n || partial) return;
    for (size_t i = pos, k = 0; (k == 0 || p->parallel) && i < n && s[i] == '{'; k++) {
        struct callp c;
        size_t end = n;
        const enum scan r = scan_call(s, n, i, "parameters", "arguments", &c, &end, final);
        if (r == SCAN_BAD) return;
        record_call(p, (int32_t)k, s, &c);
        if (r == SCAN_MORE) return;
        i = skip_ws(s, n, end);
        if (i < n && s[i] == ';') i = skip_ws(s, n, i + 1);
    }
}

// Generic: the whole answer is {"tool_calls": [...]}, {"tool_call": {...}} or
// {"response": "..."}; anything else is content as written.
static void parse_generic(struct tools_parser *p, bool final) {
    const char *s = p->text.p ? p->text.p : "";
    const size_t n = p->text.n;
    size_t i = skip_ws(s, n, 0);
    if (i < n && s[i] != '{') {
        grow_content(p, s, n);
        return;
    }
    size_t j = skip_ws(s, n, i + 1), ke = 0;
    const enum scan r = j < n && s[j] == '"' ? scan_string(s, n, j, &ke) : j < n ? SCAN_BAD : SCAN_MORE;
    if (r == SCAN_MORE && !final) return; // hold until the first key is known
    const bool calls = r == SCAN_DONE && key_is(s, j + 1, ke - 1, "tool_calls");
    const bool call = r == SCAN_DONE && key_is(s, j + 1, ke - 1, "tool_call");
    const bool response = r == SCAN_DONE && key_is(s, j + 1, ke - 1, "response");
    if (!calls && !call && !response) {
        grow_content(p, s, n);
        return;
    }
    j = skip_ws(s, n, ke);
    if (j < n && s[j] == ':') j = skip_ws(s, n, j + 1);
    if (j >= n) return;
    if (response) {
        struct sbuf d = {0};
        size_t ve;
        if (s[j] == '"') decode_partial(&d, s, n, j);
        else if (scan_value(s, n, j, &ve, final) == SCAN_DONE) minify(&d, s, j, ve); // a non-string answer
        grow_content(p, d.p ? d.p : "", d.n);
        sbuf_free(&d);
        return;
    }
    if (call) {
        struct callp c;
        size_t end;
        if (s[j] == '{' && scan_call(s, n, j, "arguments", NULL, &c, &end, final) != SCAN_BAD) record_call(p, 0, s, &c);
        return;
    }
    if (s[j] != '[') return;
    j++;
    for (int32_t k = 0; k == 0 || p->parallel; k++) {
        j = skip_ws(s, n, j);
        if (j >= n || s[j] != '{') return;
        struct callp c;
        size_t end = n;
        const enum scan rc = scan_call(s, n, j, "arguments", NULL, &c, &end, final);
        if (rc == SCAN_BAD) return;
        record_call(p, k, s, &c);
        if (rc == SCAN_MORE) return;
        j = skip_ws(s, n, end);
        if (j >= n || s[j] != ',') return;
        j++;
    }
}

// ================================================================ auto mode: what real models write

// Auto mode (tools_parser_declare): a call may open with the family's markers or none. The
// openings, each a decision made on a prefix of the text (so whole and streamed agree):
// <tool_call> (Qwen), <|python_tag|> (Llama 3.x), [TOOL_CALLS] (Mistral), a fenced ```json
// block, or a bare JSON object / array of objects whose "name" is a declared tool; and Gemma's
// ```tool_code block of NAME(key=value, ...) calls (tools_pycall.c).
enum verdict { V_NOT, V_PENDING, V_CALL };

static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static bool declared(const struct tools_parser *p, const char *s, size_t a, size_t b) {
    for (int32_t i = 0; i < p->n_tools; i++)
        if (key_is(s, a, b, p->tools[i].name)) return true;
    return false;
}

// A JSON value at s[i] that is a call to a declared tool ({"name": <declared>, ...}, or
// {"type": "function", ...}), or an array whose first element is one.
static enum verdict json_call(const struct tools_parser *p, const char *s, size_t n, size_t i, bool final) {
    const enum verdict more = final ? V_NOT : V_PENDING;
    if (i < n && s[i] == '[') i = skip_ws(s, n, i + 1);
    if (i >= n) return more;
    if (s[i] != '{') return V_NOT;
    i = skip_ws(s, n, i + 1);
    if (i >= n) return more;
    if (s[i] != '"') return V_NOT;
    size_t ke, ve;
    enum scan r = scan_string(s, n, i, &ke);
    if (r != SCAN_DONE) return r == SCAN_MORE ? more : V_NOT;
    const bool is_name = key_is(s, i + 1, ke - 1, "name"), is_type = key_is(s, i + 1, ke - 1, "type");
    if (!is_name && !is_type) return V_NOT;
    i = skip_ws(s, n, ke);
    if (i < n && s[i] == ':') i = skip_ws(s, n, i + 1);
    else if (i < n) return V_NOT;
    if (i >= n) return more;
    if (s[i] != '"') return V_NOT;
    r = scan_string(s, n, i, &ve);
    if (r != SCAN_DONE) return r == SCAN_MORE ? more : V_NOT;
    if (is_type) return key_is(s, i + 1, ve - 1, "function") ? V_CALL : V_NOT;
    return declared(p, s, i + 1, ve - 1) ? V_CALL : V_NOT;
}

static const char *const k_markers[] = {"<tool_call>", "<|python_tag|>", "[TOOL_CALLS]", "```"};

// Mistral's newer form at s[i]: NAME[ARGS]{...}. V_CALL with *ne the name's end when NAME is
// a declared tool.
static enum verdict mistral_named(const struct tools_parser *p, const char *s, size_t n, size_t i, bool final,
                                  size_t *ne) {
    size_t e = i;
    while (e < n && (name_char(s[e]))) e++;
    if (e == i) return V_NOT;
    bool partial = false;
    if (starts(s, n, e, "[ARGS]", &partial)) {
        *ne = e;
        return declared(p, s, i, e) ? V_CALL : V_NOT;
    }
    return (partial || e == n) && !final ? V_PENDING : V_NOT;
}

// Gemma's ```tool_code form at s[i]: NAME( with NAME a declared tool (tools_pycall.c reads it).
static size_t code_name_end(const char *s, size_t n, size_t i) {
    while (i < n && name_char(s[i])) i++;
    return i;
}
static enum verdict code_call(const struct tools_parser *p, const char *s, size_t n, size_t i, bool final) {
    const size_t e = code_name_end(s, n, i);
    if (e == n) return final ? V_NOT : V_PENDING;
    return e > i && s[e] == '(' && declared(p, s, i, e) ? V_CALL : V_NOT;
}

// Records the ```tool_code call at s[j] as call k once it is whole (its name and its arguments
// as JSON at once: a call cut short or malformed is none, whole or streamed alike). False when
// it is not a whole call to a declared tool.
static bool code_record(struct tools_parser *p, int32_t k, const char *s, size_t n, size_t j, size_t *end) {
    size_t ne = j;
    struct sbuf a = {0};
    const bool whole = tools_pycall(s, n, j, &ne, end, &a) == PYCALL_DONE && declared(p, s, j, ne);
    if (whole) {
        const struct callp cp = {.has_name = true, .name_a = j, .name_b = ne};
        record_call(p, k, s, &cp);
        if (k < p->n_calls && !p->calls[k].args_done) {
            sbuf_append(&p->calls[k].args, a.p, a.n);
            p->calls[k].args_done = true;
            if (a.oom || p->calls[k].args.oom) p->oom = true;
        }
    }
    sbuf_free(&a);
    return whole;
}

// The opening at s[c] (c is '<', '[', '`' or '{'): its verdict, and *j where its JSON begins.
static enum verdict opening(const struct tools_parser *p, const char *s, size_t n, size_t c, bool final, size_t *j) {
    const enum verdict more = final ? V_NOT : V_PENDING;
    for (int k = 0; k < 4; k++) {
        bool partial = false;
        if (!starts(s, n, c, k_markers[k], &partial)) {
            if (partial) return more;
            continue;
        }
        size_t i = c + strlen(k_markers[k]);
        if (k == 3) { // a fence: ```json or ``` then the JSON; ```tool_code then Gemma's calls
            bool pj = false, pt = false;
            if (starts(s, n, i, "json", &pj)) i += 4;
            else if (starts(s, n, i, "tool_code", &pt)) {
                *j = skip_ws(s, n, i + 9);
                return code_call(p, s, n, *j, final);
            } else if (pj || pt) return more;
        }
        *j = i = skip_ws(s, n, i);
        if (k == 0) return V_CALL; // Qwen's own marker is a call whatever it names
        size_t ne;
        if (k == 2 && i < n && name_char(s[i])) return mistral_named(p, s, n, i, final, &ne);
        return json_call(p, s, n, i, final);
    }
    if (s[c] != '{' && s[c] != '[') return V_NOT;
    *j = c;
    return json_call(p, s, n, c, final);
}

// After a call: separators between calls (white space, ';', ',', the markers' closings).
static size_t skip_between(const char *s, size_t n, size_t i) {
    static const char *const seps[] = {"</tool_call>", "<tool_call>", "<|python_tag|>", "[TOOL_CALLS]", "```json", "```",
                                       ";", ","};
    for (bool moved = true; moved;) {
        moved = false;
        i = skip_ws(s, n, i);
        for (size_t k = 0; k < sizeof seps / sizeof *seps; k++) {
            bool partial = false;
            if (starts(s, n, i, seps[k], &partial)) {
                i += strlen(seps[k]);
                moved = true;
                break;
            }
        }
    }
    return i;
}

static void parse_auto(struct tools_parser *p, bool final) {
    const char *s = p->text.p ? p->text.p : "";
    const size_t n = p->text.n;
    size_t c = 0, j = 0;
    enum verdict v = V_NOT;
    for (; c < n; c++) {
        if (s[c] != '<' && s[c] != '[' && s[c] != '`' && s[c] != '{') continue;
        v = opening(p, s, n, c, final, &j);
        if (v != V_NOT) break;
    }
    content_before(p, s, c, final, v == V_CALL);
    if (v != V_CALL) return;
    if (j < n && s[j] == '[') j = skip_ws(s, n, j + 1);
    for (int32_t k = 0; (k == 0 || p->parallel) && j < n && (s[j] == '{' || name_char(s[j])); k++) {
        struct callp cp;
        size_t end = n, ne;
        enum scan r;
        const size_t ce = s[j] != '{' ? code_name_end(s, n, j) : n;
        if (ce < n && s[ce] == '(') { // Gemma's ```tool_code NAME(key=value, ...)
            if (!code_record(p, k, s, n, j, &end)) { // a block that holds no call stays text
                if (final && p->n_calls == 0) grow_content(p, s, n);
                return;
            }
            j = skip_between(s, n, end);
            continue;
        }
        if (s[j] != '{') { // Mistral's NAME[ARGS]{...}
            if (mistral_named(p, s, n, j, final, &ne) != V_CALL) return;
            const size_t a = skip_ws(s, n, ne + 6);
            if (a >= n) return;
            if (s[a] != '{') return;
            memset(&cp, 0, sizeof cp);
            cp.has_name = true, cp.name_a = j, cp.name_b = ne;
            r = scan_value(s, n, a, &end, final);
            if (r == SCAN_BAD) return;
            cp.has_args = true, cp.args_a = a, cp.args_b = r == SCAN_DONE ? end : n, cp.args_done = r == SCAN_DONE;
        } else {
            r = scan_call(s, n, j, "arguments", "parameters", &cp, &end, final);
        }
        if (r == SCAN_BAD) return;
        record_call(p, k, s, &cp);
        if (r == SCAN_MORE) return;
        j = skip_between(s, n, end);
    }
}

// The generic format in auto mode: its own answers ({"tool_calls": ...}, {"tool_call": ...},
// {"response": ...}) are parse_generic's, anything else parse_auto's. -1: not known yet.
static int generic_own(const struct tools_parser *p, bool final) {
    const char *s = p->text.p ? p->text.p : "";
    const size_t n = p->text.n;
    const size_t i = skip_ws(s, n, 0);
    if (i < n && s[i] != '{') return 0;
    const size_t j = i < n ? skip_ws(s, n, i + 1) : n;
    size_t ke = 0;
    const enum scan r = j < n && s[j] == '"' ? scan_string(s, n, j, &ke) : j < n ? SCAN_BAD : SCAN_MORE;
    if (r == SCAN_MORE) return final ? 0 : -1;
    return r == SCAN_DONE && (key_is(s, j + 1, ke - 1, "tool_calls") || key_is(s, j + 1, ke - 1, "tool_call") ||
                              key_is(s, j + 1, ke - 1, "response"));
}

// gpt-oss's channels (harmony.c): analysis -> reasoning, final -> content, calls to
// functions.NAME -> calls (arguments minified as the other formats'; without
// parallel_tool_calls the first only).
static void parse_harmony(struct tools_parser *p, bool final) {
    struct harmony_out o = {0};
    harmony_parse(p->text.p ? p->text.p : "", p->text.n, final, &o);
    if (o.reasoning.n > p->reasoning.n)
        sbuf_append(&p->reasoning, o.reasoning.p + p->reasoning.n, o.reasoning.n - p->reasoning.n);
    grow_content(p, o.content.p ? o.content.p : "", o.content.n);
    for (int32_t k = 0; k < o.n_calls && !p->drop_calls && (p->parallel || k == 0); k++) {
        const struct harmony_call *hc = &o.calls[k];
        if (k >= p->n_calls) { // a new call: its id and name
            const struct callp c = {.has_name = true, .name_b = hc->name.n};
            record_call(p, k, hc->name.p ? hc->name.p : "", &c);
            if (k >= p->n_calls) break; // out of memory
        }
        struct tool_call *t = &p->calls[k];
        struct sbuf a = {0};
        minify(&a, hc->args.p ? hc->args.p : "", 0, hc->args.n);
        if (!t->args_done && a.n > t->args.n) sbuf_append(&t->args, a.p + t->args.n, a.n - t->args.n);
        t->args_done = hc->done;
        if (a.oom || t->args.oom) p->oom = true;
        sbuf_free(&a);
    }
    if (o.oom || p->reasoning.oom) p->oom = true;
    harmony_out_free(&o);
}

void tools_parser_declare(struct tools_parser *p, const struct api_tool *tools, int32_t n_tools) {
    p->tools = tools;
    p->n_tools = n_tools;
}

void tools_parser_init(struct tools_parser *p, enum lm_chat_tool_format fmt, bool parallel, uint64_t seed) {
    memset(p, 0, sizeof *p);
    p->fmt = fmt;
    p->parallel = parallel;
    p->seed = seed;
}

void tools_parser_free(struct tools_parser *p) {
    for (int32_t i = 0; i < p->n_calls; i++) {
        sbuf_free(&p->calls[i].name);
        sbuf_free(&p->calls[i].args);
    }
    free(p->calls);
    sbuf_free(&p->text);
    sbuf_free(&p->content);
    sbuf_free(&p->reasoning);
    memset(p, 0, sizeof *p);
}

void tools_parser_feed(struct tools_parser *p, const char *s, size_t n, bool final) {
    if (n) sbuf_append(&p->text, s, n);
    if (p->text.oom) {
        p->oom = true;
        return;
    }
    if (p->fmt == LM_CHAT_TOOLS_HARMONY) {
        parse_harmony(p, final);
        p->content_null = p->n_calls > 0 && p->content.n == 0;
        return;
    }
    const int own = p->tools && p->fmt == LM_CHAT_TOOLS_GENERIC ? generic_own(p, final) : 0;
    if (own < 0) return; // held until the first key is known
    if (p->tools && !own) parse_auto(p, final);
    else if (p->fmt == LM_CHAT_TOOLS_QWEN) parse_qwen(p, final);
    else if (p->fmt == LM_CHAT_TOOLS_LLAMA3) parse_llama3(p, final);
    else parse_generic(p, final);
    p->content_null = p->n_calls > 0 && p->content.n == 0;
}
