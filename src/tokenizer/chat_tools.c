// Tools in chat prompts: the tool definitions in the system prompt, assistant tool calls and
// tool results, rendered as each family's official template does (Qwen 2.5/3's and Llama
// 3.1's Jinja templates; tests/golden/chat_tools/ holds their output), and a documented
// generic JSON format for templates without one (Gemma 3). JSON is re-written as the
// templates' tojson (Python's json.dumps) writes it, without building a tree.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "tokenizer/chat_internal.h"
#include "tokenizer/tokenizer.h"

// ================================================================ JSON as json.dumps writes it
// Python's json.dumps(x, ensure_ascii=False): ", " and ": " between items (indent: "," and a
// new line), strings re-escaped (", \, \b \f \n \r \t, other controls as \u00xx, the rest as
// UTF-8), numbers and literals as written. A NULL buffer only validates and skips.

struct jr {
    const char *s;
    size_t n, i;
    int indent; // < 0: one line
    int depth;
};

static void jr_ws(struct jr *r) {
    while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\n' || r->s[r->i] == '\r'))
        r->i++;
}

static void put_utf8(struct lm_strbuf *b, unsigned cp) {
    char u[4];
    lm_strbuf_put(b, u, lm_utf8_put(cp, u));
}

static int hex4(const char *p) {
    int v = 0;
    for (int k = 0; k < 4; k++) {
        const char c = p[k];
        v = v * 16 + (c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1000000);
    }
    return v < 0 ? -1 : v;
}

// One decoded character c of a string, escaped as json.dumps does.
static void put_escaped(struct lm_strbuf *b, unsigned cp) {
    char e[8];
    switch (cp) {
    case '"': lm_strbuf_puts(b, "\\\""); return;
    case '\\': lm_strbuf_puts(b, "\\\\"); return;
    case '\b': lm_strbuf_puts(b, "\\b"); return;
    case '\f': lm_strbuf_puts(b, "\\f"); return;
    case '\n': lm_strbuf_puts(b, "\\n"); return;
    case '\r': lm_strbuf_puts(b, "\\r"); return;
    case '\t': lm_strbuf_puts(b, "\\t"); return;
    }
    if (cp < 0x20) {
        snprintf(e, sizeof e, "\\u%04x", cp);
        lm_strbuf_puts(b, e);
        return;
    }
    put_utf8(b, cp);
}

// A string at r->i (its opening quote): re-escaped to b (NULL: skipped), or decoded (raw).
static bool jr_string(struct jr *r, struct lm_strbuf *b, bool raw) {
    if (r->i >= r->n || r->s[r->i] != '"') return false;
    r->i++;
    if (b && !raw) lm_strbuf_puts(b, "\"");
    while (r->i < r->n && r->s[r->i] != '"') {
        const unsigned char c = (unsigned char)r->s[r->i];
        if (c < 0x20) return false;
        if (c != '\\') { // UTF-8 bytes as they are (the caller's text is UTF-8)
            if (b) {
                if (raw) lm_strbuf_put(b, (const char *)&r->s[r->i], 1);
                else put_escaped(b, c);
            }
            r->i++;
            continue;
        }
        if (r->i + 1 >= r->n) return false;
        const char x = r->s[r->i + 1];
        unsigned cp;
        r->i += 2;
        switch (x) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u': {
            if (r->i + 4 > r->n) return false;
            const int h = hex4(r->s + r->i);
            if (h < 0) return false;
            r->i += 4;
            cp = (unsigned)h;
            if (cp >= 0xD800 && cp < 0xDC00 && r->i + 6 <= r->n && r->s[r->i] == '\\' && r->s[r->i + 1] == 'u') {
                const int lo = hex4(r->s + r->i + 2);
                if (lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + ((unsigned)lo - 0xDC00);
                    r->i += 6;
                }
            }
            if (cp >= 0xD800 && cp < 0xE000) { // a lone surrogate: kept as its escape
                if (b) {
                    char e[16]; // cp < 0xE000 here: 6 bytes and the NUL
                    snprintf(e, sizeof e, "\\u%04x", cp);
                    lm_strbuf_puts(b, e);
                }
                continue;
            }
            break;
        }
        default: return false;
        }
        if (b) {
            if (raw) put_utf8(b, cp);
            else put_escaped(b, cp);
        }
    }
    if (r->i >= r->n) return false;
    r->i++;
    if (b && !raw) lm_strbuf_puts(b, "\"");
    return true;
}

static void jr_newline(struct jr *r, struct lm_strbuf *b) {
    lm_strbuf_puts(b, "\n");
    for (int k = 0; k < r->depth * r->indent; k++) lm_strbuf_puts(b, " ");
}

static bool jr_value(struct jr *r, struct lm_strbuf *b);

// An object or array at r->i.
static bool jr_container(struct jr *r, struct lm_strbuf *b) {
    const char open = r->s[r->i], close = open == '{' ? '}' : ']';
    if (++r->depth > 128) return false; // the server bounds nesting far below this
    r->i++;
    jr_ws(r);
    if (r->i < r->n && r->s[r->i] == close) {
        r->i++;
        r->depth--;
        if (b) lm_strbuf_put(b, open == '{' ? "{}" : "[]", 2);
        return true;
    }
    if (b) lm_strbuf_put(b, &open, 1);
    for (bool first = true;; first = false) {
        if (!first) {
            if (b) lm_strbuf_puts(b, r->indent >= 0 ? "," : ", ");
        }
        if (b && r->indent >= 0) jr_newline(r, b);
        jr_ws(r);
        if (open == '{') {
            if (!jr_string(r, b, false)) return false;
            jr_ws(r);
            if (r->i >= r->n || r->s[r->i] != ':') return false;
            r->i++;
            if (b) lm_strbuf_puts(b, ": ");
        }
        if (!jr_value(r, b)) return false;
        jr_ws(r);
        if (r->i >= r->n) return false;
        if (r->s[r->i] == ',') {
            r->i++;
            continue;
        }
        if (r->s[r->i] != close) return false;
        r->i++;
        break;
    }
    r->depth--;
    if (b && r->indent >= 0) jr_newline(r, b);
    if (b) lm_strbuf_put(b, &close, 1);
    return true;
}

static bool jr_value(struct jr *r, struct lm_strbuf *b) {
    jr_ws(r);
    if (r->i >= r->n) return false;
    const char c = r->s[r->i];
    if (c == '{' || c == '[') return jr_container(r, b);
    if (c == '"') return jr_string(r, b, false);
    static const char *const lits[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        const size_t l = strlen(lits[k]);
        if (r->n - r->i >= l && memcmp(r->s + r->i, lits[k], l) == 0) {
            if (b) lm_strbuf_put(b, lits[k], l);
            r->i += l;
            return true;
        }
    }
    const size_t at = r->i; // a number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
    if (r->s[r->i] == '-') r->i++;
    size_t d = r->i;
    while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') r->i++;
    if (r->i == d || (r->s[d] == '0' && r->i - d > 1)) return false;
    if (r->i < r->n && r->s[r->i] == '.') {
        d = ++r->i;
        while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') r->i++;
        if (r->i == d) return false;
    }
    if (r->i < r->n && (r->s[r->i] == 'e' || r->s[r->i] == 'E')) {
        r->i++;
        if (r->i < r->n && (r->s[r->i] == '+' || r->s[r->i] == '-')) r->i++;
        d = r->i;
        while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') r->i++;
        if (r->i == d) return false;
    }
    if (b) lm_strbuf_put(b, r->s + at, r->i - at);
    return true;
}

// The whole text s[0, n) is one JSON value: written to b as json.dumps(indent) would.
static bool json_dumps_py(struct lm_strbuf *b, const char *s, size_t n, int indent) {
    struct jr r = {s, n, 0, indent, 0};
    if (!jr_value(&r, b)) return false;
    jr_ws(&r);
    return r.i == n;
}

// The elements of the JSON array tools[0, len): calls fn with each element's text.
static bool each_tool(const char *tools, size_t len, bool (*fn)(void *ctx, const char *s, size_t n), void *ctx) {
    struct jr r = {tools, len, 0, -1, 0};
    jr_ws(&r);
    if (r.i >= r.n || tools[r.i] != '[') return false;
    r.i++;
    jr_ws(&r);
    if (r.i < r.n && tools[r.i] == ']') {
        r.i++;
        jr_ws(&r);
        return r.i == r.n;
    }
    for (;;) {
        jr_ws(&r);
        const size_t at = r.i;
        if (!jr_value(&r, NULL) || !fn(ctx, tools + at, r.i - at)) return false;
        jr_ws(&r);
        if (r.i < r.n && tools[r.i] == ',') {
            r.i++;
            continue;
        }
        if (r.i >= r.n || tools[r.i] != ']') return false;
        r.i++;
        jr_ws(&r);
        return r.i == r.n;
    }
}

// ================================================================ the families

enum lm_chat_tool_format lm_chat_tool_format(enum lm_chat_template tmpl) {
    return tmpl == LM_CHAT_TEMPLATE_CHATML ? LM_CHAT_TOOLS_QWEN
         : tmpl == LM_CHAT_TEMPLATE_LLAMA3 ? LM_CHAT_TOOLS_LLAMA3
         : tmpl == LM_CHAT_TEMPLATE_HARMONY ? LM_CHAT_TOOLS_HARMONY
                                           : LM_CHAT_TOOLS_GENERIC;
}

struct tool_ctx {
    struct lm_strbuf *b;
    int indent;
    const char *before, *after;
};

static bool put_tool(void *ctx, const char *s, size_t n) {
    struct tool_ctx *c = ctx;
    lm_strbuf_puts(c->b, c->before);
    if (!json_dumps_py(c->b, s, n, c->indent)) return false;
    lm_strbuf_puts(c->b, c->after);
    return true;
}

// '{"name": "<name>", "<args_key>": <arguments as tojson>}'
static void put_call(struct lm_strbuf *b, const struct lm_chat_tool_call *tc, const char *args_key) {
    lm_strbuf_puts(b, "{\"name\": \"");
    lm_strbuf_puts(b, tc->name ? tc->name : "");
    lm_strbuf_puts(b, "\", \"");
    lm_strbuf_puts(b, args_key);
    lm_strbuf_puts(b, "\": ");
    const char *a = tc->arguments ? tc->arguments : "{}";
    const size_t at = b->n;
    if (!json_dumps_py(b, a, strlen(a), -1)) { // not JSON (a call cut by max_tokens): as written
        b->n = at;
        lm_strbuf_puts(b, a);
    }
    lm_strbuf_puts(b, "}");
}

static bool is_role(const struct lm_chat_msg *m, const char *role) { return strcmp(m->role, role) == 0; }

static const struct lm_chat_msg_tools *part(const struct lm_chat_msg_tools *pt, size_t i) {
    static const struct lm_chat_msg_tools none = {0};
    return pt ? &pt[i] : &none;
}

static const char k_qwen_tools_head[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
static const char k_qwen_tools_tail[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";

// Qwen 3's template (Qwen 2.5's but for its default system text): ChatML, the tools in the
// first system message, calls in <tool_call>, consecutive results in one user turn.
static enum lm_status apply_qwen(struct lm_strbuf *b, const struct lm_chat_msg *msgs, const struct lm_chat_msg_tools *pt,
                                 size_t n, const char *tools, size_t len, bool agp) {
    size_t i0 = 0;
    if (tools) {
        lm_strbuf_puts(b, "<|im_start|>system\n");
        if (n > 0 && is_role(&msgs[0], "system")) {
            lm_strbuf_puts(b, msgs[0].content);
            lm_strbuf_puts(b, "\n\n");
            i0 = 1;
        }
        lm_strbuf_puts(b, k_qwen_tools_head);
        struct tool_ctx c = {b, -1, "\n", ""};
        if (!each_tool(tools, len, put_tool, &c))
            return lm_error_set(LM_ERR_ARG, "lm_chat_apply_tools: 'tools' is not a valid JSON array");
        lm_strbuf_puts(b, k_qwen_tools_tail);
    }
    for (size_t i = i0; i < n; i++) {
        const struct lm_chat_msg *m = &msgs[i];
        const struct lm_chat_msg_tools *p = part(pt, i);
        if (is_role(m, "tool")) {
            if (i == 0 || !is_role(&msgs[i - 1], "tool")) lm_strbuf_puts(b, "<|im_start|>user");
            lm_strbuf_puts(b, "\n<tool_response>\n");
            lm_strbuf_puts(b, m->content);
            lm_strbuf_puts(b, "\n</tool_response>");
            if (i + 1 == n || !is_role(&msgs[i + 1], "tool")) lm_strbuf_puts(b, "<|im_end|>\n");
            continue;
        }
        if (is_role(m, "assistant") && p->n_tool_calls > 0) {
            lm_strbuf_puts(b, "<|im_start|>assistant");
            if (*m->content) {
                lm_strbuf_puts(b, "\n");
                lm_strbuf_puts(b, m->content);
            }
            for (size_t k = 0; k < p->n_tool_calls; k++) {
                lm_strbuf_puts(b, "\n<tool_call>\n");
                put_call(b, &p->tool_calls[k], "arguments");
                lm_strbuf_puts(b, "\n</tool_call>");
            }
            lm_strbuf_puts(b, "<|im_end|>\n");
            continue;
        }
        lm_strbuf_puts(b, "<|im_start|>");
        lm_strbuf_puts(b, m->role);
        lm_strbuf_puts(b, "\n");
        lm_strbuf_puts(b, m->content);
        lm_strbuf_puts(b, "<|im_end|>\n");
    }
    if (agp) lm_strbuf_puts(b, "<|im_start|>assistant\n");
    return LM_OK;
}

// Llama 3.1's template as llama.cpp runs it (tools in the system message, not the first user
// message; its default date): calls as {"name", "parameters"} (several: one per line), results
// in the ipython role, written as they are (the template would quote a string result as JSON).
static enum lm_status apply_llama3_tools(struct lm_strbuf *b, const struct lm_chat_msg *msgs,
                                         const struct lm_chat_msg_tools *pt, size_t n, const char *tools,
                                         size_t len, bool agp) {
    size_t i0 = 0;
    if (tools) {
        lm_strbuf_puts(b, "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n"
                  "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
                  "You have access to the following functions. To call a function, please respond with JSON "
                  "for a function call.Respond in the format {\"name\": function name, \"parameters\": "
                  "dictionary of argument name and its value}.Do not use variables.\n\n");
        struct tool_ctx c = {b, 4, "", "\n\n"};
        if (!each_tool(tools, len, put_tool, &c))
            return lm_error_set(LM_ERR_ARG, "lm_chat_apply_tools: 'tools' is not a valid JSON array");
        if (n > 0 && is_role(&msgs[0], "system")) {
            sb_trimmed(b, msgs[0].content);
            i0 = 1;
        }
        lm_strbuf_puts(b, "<|eot_id|>");
    }
    for (size_t i = i0; i < n; i++) {
        const struct lm_chat_msg *m = &msgs[i];
        const struct lm_chat_msg_tools *p = part(pt, i);
        const bool result = is_role(m, "tool") || is_role(m, "ipython");
        lm_strbuf_puts(b, "<|start_header_id|>");
        lm_strbuf_puts(b, result ? "ipython" : m->role);
        lm_strbuf_puts(b, "<|end_header_id|>\n\n");
        if (p->n_tool_calls > 0) {
            for (size_t k = 0; k < p->n_tool_calls; k++) {
                if (k) lm_strbuf_puts(b, "\n");
                put_call(b, &p->tool_calls[k], "parameters");
            }
        } else {
            sb_trimmed(b, m->content);
        }
        lm_strbuf_puts(b, "<|eot_id|>");
    }
    if (agp) lm_strbuf_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return LM_OK;
}

static const char k_generic_head[] =
    "You can call the following tools. Each is a JSON object with the tool's name, what it does, and the "
    "JSON Schema of its arguments (\"parameters\"):\n";
static const char k_generic_tail[] =
    "\nAnswer with one JSON object and nothing else. To call one or more tools:\n"
    "{\"tool_calls\": [{\"name\": \"<tool name>\", \"arguments\": {<the arguments>}}]}\n"
    "To answer the user directly:\n"
    "{\"response\": \"<your answer>\"}";

// The generic format through any template: the tool prompt joins the system message, an
// assistant's calls become its content ({"tool_calls": [...]}), a tool result a user turn.
static enum lm_status apply_generic(enum lm_chat_template tmpl, const struct lm_chat_msg *msgs,
                                    const struct lm_chat_msg_tools *pt, size_t n, const char *tools, size_t len,
                                    bool agp, char **out, size_t *n_out) {
    struct lm_chat_msg *m2 = calloc(n + 1, sizeof *m2);
    struct lm_strbuf *texts = calloc(n + 1, sizeof *texts); // synthesized contents
    enum lm_status st = LM_OK;
    if (!m2 || !texts) {
        st = lm_error_set(LM_ERR_NOMEM, "lm_chat_apply: out of memory");
        goto done;
    }
    size_t k = 0, i0 = 0;
    if (tools) {
        struct lm_strbuf *t = &texts[k];
        if (n > 0 && is_role(&msgs[0], "system")) {
            sb_trimmed(t, msgs[0].content);
            if (t->n) lm_strbuf_puts(t, "\n\n");
            i0 = 1;
        }
        lm_strbuf_puts(t, k_generic_head);
        struct tool_ctx c = {t, -1, "", "\n"};
        if (!each_tool(tools, len, put_tool, &c)) {
            st = lm_error_set(LM_ERR_ARG, "lm_chat_apply_tools: 'tools' is not a valid JSON array");
            goto done;
        }
        lm_strbuf_puts(t, k_generic_tail);
        lm_strbuf_put(t, "", 0);
        m2[k++] = (struct lm_chat_msg){.role = "system", .content = t->p};
    }
    for (size_t i = i0; i < n; i++) {
        const struct lm_chat_msg *m = &msgs[i];
        const struct lm_chat_msg_tools *p = part(pt, i);
        struct lm_strbuf *t = &texts[k];
        if (is_role(m, "tool")) {
            struct lm_strbuf name = {0}; // the call's function, found by its id in earlier messages
            for (size_t j = i; j-- > 0 && !name.n && p->tool_call_id;) {
                const struct lm_chat_msg_tools *q = part(pt, j);
                for (size_t c = 0; c < q->n_tool_calls && !name.n; c++)
                    if (q->tool_calls[c].id && strcmp(q->tool_calls[c].id, p->tool_call_id) == 0)
                        lm_strbuf_puts(&name, q->tool_calls[c].name);
            }
            lm_strbuf_puts(t, "Result of the tool call");
            if (name.n) {
                lm_strbuf_puts(t, " ");
                lm_strbuf_put(t, name.p, name.n);
            }
            lm_strbuf_puts(t, ":\n");
            free(name.p);
            sb_trimmed(t, m->content);
            m2[k++] = (struct lm_chat_msg){.role = "user", .content = t->p};
            continue;
        }
        if (p->n_tool_calls > 0) {
            sb_trimmed(t, m->content);
            if (t->n) lm_strbuf_puts(t, "\n");
            lm_strbuf_puts(t, "{\"tool_calls\": [");
            for (size_t c = 0; c < p->n_tool_calls; c++) {
                if (c) lm_strbuf_puts(t, ", ");
                put_call(t, &p->tool_calls[c], "arguments");
            }
            lm_strbuf_puts(t, "]}");
            m2[k++] = (struct lm_chat_msg){.role = m->role, .content = t->p};
            continue;
        }
        m2[k++] = (struct lm_chat_msg){.role = m->role, .content = m->content};
    }
    for (size_t j = 0; j < k; j++)
        if (texts[j].nomem) {
            st = lm_error_set(LM_ERR_NOMEM, "lm_chat_apply: out of memory");
            goto done;
        }
    st = chat_apply_plain(tmpl, m2, k, agp, out, n_out);
done:
    for (size_t j = 0; texts && j <= n; j++) free(texts[j].p);
    free(texts);
    free(m2);
    return st;
}

static bool has_tool_parts(const struct lm_chat_msg *msgs, const struct lm_chat_msg_tools *pt, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (part(pt, i)->n_tool_calls > 0 || (msgs[i].role && strcmp(msgs[i].role, "tool") == 0)) return true;
    return false;
}

enum lm_status lm_chat_apply_tools(enum lm_chat_template tmpl, const struct lm_chat_msg *msgs,
                                   const struct lm_chat_msg_tools *pt, size_t n, const char *tools, size_t len,
                                   bool agp, char **out, size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    if (tmpl == LM_CHAT_TEMPLATE_HARMONY) return lm_chat_apply_harmony(NULL, msgs, pt, n, tools, len, agp, out, n_out);
    if (tools && len == 0) tools = NULL;
    if (!tools && (!pt || !has_tool_parts(msgs, pt, n))) return chat_apply_plain(tmpl, msgs, n, agp, out, n_out);
    // DeepSeek-R1 distills: their official templates declare no tools (no `tools` variable; they
    // render earlier calls and results only), so tools go through the generic tool prompt
    if (tmpl != LM_CHAT_TEMPLATE_GEMMA && tmpl != LM_CHAT_TEMPLATE_LLAMA3 && tmpl != LM_CHAT_TEMPLATE_CHATML &&
        tmpl != LM_CHAT_TEMPLATE_PHI3 && tmpl != LM_CHAT_TEMPLATE_DEEPSEEK_R1)
        return lm_error_set(LM_ERR_UNSUPPORTED, "lm_chat_apply: unknown template %d", (int)tmpl);
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return lm_error_set(LM_ERR_ARG, "lm_chat_apply: message %zu has a NULL role or content", i);
        for (size_t k = 0; k < part(pt, i)->n_tool_calls; k++)
            if (!part(pt, i)->tool_calls || !part(pt, i)->tool_calls[k].name)
                return lm_error_set(LM_ERR_ARG, "lm_chat_apply: message %zu: tool call %zu has no name", i, k);
    }
    const enum lm_chat_tool_format f = lm_chat_tool_format(tmpl);
    if (f == LM_CHAT_TOOLS_GENERIC) return apply_generic(tmpl, msgs, pt, n, tools, len, agp, out, n_out);
    struct lm_strbuf b = {0};
    lm_strbuf_put(&b, "", 0);
    const enum lm_status st = f == LM_CHAT_TOOLS_QWEN ? apply_qwen(&b, msgs, pt, n, tools, len, agp)
                                                      : apply_llama3_tools(&b, msgs, pt, n, tools, len, agp);
    if (st == LM_OK && b.nomem) {
        free(b.p);
        return lm_error_set(LM_ERR_NOMEM, "lm_chat_apply: out of memory");
    }
    if (st != LM_OK) {
        free(b.p);
        return st;
    }
    *out = b.p;
    *n_out = b.n;
    return LM_OK;
}

enum lm_status lm_chat_apply(enum lm_chat_template tmpl, const struct lm_chat_msg *msgs, size_t n,
                             bool add_generation_prompt, char **out, size_t *n_out) {
    return chat_apply_plain(tmpl, msgs, n, add_generation_prompt, out, n_out);
}
