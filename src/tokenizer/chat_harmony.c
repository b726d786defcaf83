// The harmony chat format of gpt-oss, as its official template writes it
// (models/templates/openai-gpt-oss-120b.jinja; goldens: tests/golden/chat_harmony/): the system
// message, the developer message with the instructions and the tools as a TypeScript namespace,
// the turns on their channels, prior tool calls and results; prior analysis dropped as it does.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/utf8.h"
#include "tokenizer/chat_internal.h"
#include "tokenizer/json_tree.h"
#include "tokenizer/tokenizer.h"

// ================================================================ strings

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

// A JSON string's body, unescaped (the template prints the decoded value).
static void put_unescaped(struct lm_strbuf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            lm_strbuf_put(b, s + i, 1);
            continue;
        }
        static const char pairs[] = "\"\"\\\\//b\bf\fn\nr\rt\t";
        const char x = s[++i];
        const char *m = x ? strchr(pairs, x) : NULL;
        if (x != 'u' && m && (m - pairs) % 2 == 0) {
            lm_strbuf_put(b, m + 1, 1);
            continue;
        }
        int h = x == 'u' && i + 4 < n ? hex4(s + i + 1) : -1;
        if (h >= 0) {
            unsigned cp = (unsigned)h;
            i += 4;
            const int lo = cp >= 0xD800 && cp < 0xDC00 && i + 6 < n && s[i + 1] == '\\' && s[i + 2] == 'u'
                               ? hex4(s + i + 3) : -1;
            if (lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + ((unsigned)lo - 0xDC00);
                i += 6;
            }
            char u[4];
            lm_strbuf_put(b, u, lm_utf8_put(cp, u));
        }
    }
}

static void put_node_str(struct lm_strbuf *b, const struct jt *t, int i) {
    if (i >= 0 && t->nodes[i].type == JT_STRING) put_unescaped(b, t->nodes[i].s, t->nodes[i].n);
    else if (i >= 0 && t->nodes[i].type <= JT_TRUE) // Python's str() of a literal
        lm_strbuf_puts(b, t->nodes[i].type == JT_TRUE ? "True" : t->nodes[i].type == JT_FALSE ? "False" : "None");
    else if (i >= 0) lm_strbuf_put(b, t->nodes[i].s, t->nodes[i].n); // a number (or a container) as written
}

// json.dumps of a plain string s[0, n) (ensure_ascii=False: only quotes, backslashes and
// controls escaped)
static void put_json_string(struct lm_strbuf *b, const char *s, size_t n) {
    lm_strbuf_puts(b, "\"");
    for (const char *end = s + n; s < end; s++) {
        const unsigned char c = (unsigned char)*s;
        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\b' ? "\\b" : c == '\f' ? "\\f"
                      : c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
        if (e) lm_strbuf_puts(b, e);
        else if (c < 0x20) lm_strbuf_printf(b, "\\u%04x", c);
        else lm_strbuf_put(b, s, 1);
    }
    lm_strbuf_puts(b, "\"");
}

// tojson of a node: json.dumps (", " and ": " between items, strings re-escaped, numbers as written)
static void put_node_json(struct lm_strbuf *b, const struct jt *t, int i) {
    const struct jt_node *x = &t->nodes[i];
    if (x->type == JT_STRING) {
        struct lm_strbuf raw = {0};
        lm_strbuf_put(&raw, "", 0);
        put_unescaped(&raw, x->s, x->n);
        put_json_string(b, raw.p, raw.n);
        b->nomem |= raw.nomem;
        free(raw.p);
        return;
    }
    if (x->type != JT_ARRAY && x->type != JT_OBJECT) {
        lm_strbuf_put(b, x->s, x->n);
        return;
    }
    lm_strbuf_puts(b, x->type == JT_ARRAY ? "[" : "{");
    for (int c = x->first; c >= 0; c = t->nodes[c].next) {
        if (x->type == JT_OBJECT) {
            struct jt_node key = {.type = JT_STRING, .s = t->nodes[c].key, .n = t->nodes[c].key_n};
            struct jt kt = {.nodes = &key, .n = 1, .cap = 1};
            put_node_json(b, &kt, 0);
            lm_strbuf_puts(b, ": ");
        }
        put_node_json(b, t, c);
        if (t->nodes[c].next >= 0) lm_strbuf_puts(b, ", ");
    }
    lm_strbuf_puts(b, x->type == JT_ARRAY ? "]" : "}");
}

// A call's arguments as tojson writes the parsed object; text that is not JSON (a call cut by
// max_tokens) as it is.
static void put_args_json(struct lm_strbuf *b, const char *a) {
    struct jt t;
    if (jt_parse(&t, a, strlen(a))) put_node_json(b, &t, 0);
    else lm_strbuf_puts(b, a);
    jt_free(&t);
}

static size_t utf8_chars(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

// ================================================================ render_typescript_type

static bool in_required(const struct jt *t, int req, int name_node) {
    for (int c = req >= 0 && t->nodes[req].type == JT_ARRAY ? t->nodes[req].first : -1; c >= 0; c = t->nodes[c].next)
        if (t->nodes[c].type == JT_STRING && t->nodes[c].n == t->nodes[name_node].key_n &&
            memcmp(t->nodes[c].s, t->nodes[name_node].key, t->nodes[c].n) == 0)
            return true;
    return false;
}

static void ts_type(struct lm_strbuf *b, const struct jt *t, int spec, int depth);

static void ts_array(struct lm_strbuf *b, const struct jt *t, int spec, int depth) {
    const int items = jt_get(t, spec, "items");
    if (jt_truthy(t, items)) {
        const int it = jt_get(t, items, "type");
        if (jt_str_is(t, it, "string")) lm_strbuf_puts(b, "string[]");
        else if (jt_str_is(t, it, "number") || jt_str_is(t, it, "integer")) lm_strbuf_puts(b, "number[]");
        else if (jt_str_is(t, it, "boolean")) lm_strbuf_puts(b, "boolean[]");
        else {
            struct lm_strbuf in = {0};
            lm_strbuf_put(&in, "", 0);
            ts_type(&in, t, items, depth + 1);
            if ((in.n == 15 && memcmp(in.p, "object | object", 15) == 0) || utf8_chars(in.p, in.n) > 50)
                lm_strbuf_puts(b, "any[]");
            else {
                lm_strbuf_put(b, in.p, in.n);
                lm_strbuf_puts(b, "[]");
            }
            b->nomem |= in.nomem;
            free(in.p);
        }
    } else {
        lm_strbuf_puts(b, "any[]");
    }
    if (jt_truthy(t, jt_get(t, spec, "nullable"))) lm_strbuf_puts(b, " | null");
}

// The variants joined by " | \n". The template means to write "any" when a variant is an object,
// but its flag is set inside the loop, where Jinja's scoping keeps it from the test after it.
static void ts_one_of(struct lm_strbuf *b, const struct jt *t, int one_of, int depth) {
    for (int v = t->nodes[one_of].first; v >= 0; v = t->nodes[v].next) {
        ts_type(b, t, v, depth + 1);
        const int d = jt_get(t, v, "description"), def = jt_get(t, v, "default");
        if (jt_truthy(t, d)) {
            lm_strbuf_puts(b, "// ");
            put_node_str(b, t, d);
        }
        if (def >= 0) {
            lm_strbuf_puts(b, "                    // default: ");
            put_node_json(b, t, def);
        }
        if (t->nodes[v].next >= 0) lm_strbuf_puts(b, " | \n");
    }
}

// The template's macro: array, a list of types, oneOf, string, number/integer, boolean, object.
static void ts_type(struct lm_strbuf *b, const struct jt *t, int spec, int depth) {
    const int type = jt_get(t, spec, "type"), one_of = jt_get(t, spec, "oneOf");
    if (depth > 32) {
        lm_strbuf_puts(b, "any");
    } else if (jt_str_is(t, type, "array")) {
        ts_array(b, t, spec, depth);
    } else if (type >= 0 && t->nodes[type].type == JT_ARRAY && t->nodes[type].count > 0) {
        for (int c = t->nodes[type].first; c >= 0; c = t->nodes[c].next) {
            put_node_str(b, t, c);
            if (t->nodes[c].next >= 0) lm_strbuf_puts(b, " | ");
        }
    } else if (jt_truthy(t, one_of) && t->nodes[one_of].type == JT_ARRAY) {
        ts_one_of(b, t, one_of, depth);
    } else if (jt_str_is(t, type, "string")) {
        const int e = jt_get(t, spec, "enum");
        if (jt_truthy(t, e) && t->nodes[e].type == JT_ARRAY) {
            lm_strbuf_puts(b, "\"");
            for (int c = t->nodes[e].first; c >= 0; c = t->nodes[c].next) {
                put_node_str(b, t, c);
                if (t->nodes[c].next >= 0) lm_strbuf_puts(b, "\" | \"");
            }
            lm_strbuf_puts(b, "\"");
        } else {
            lm_strbuf_puts(b, "string");
            if (jt_truthy(t, jt_get(t, spec, "nullable"))) lm_strbuf_puts(b, " | null");
        }
    } else if (jt_str_is(t, type, "number") || jt_str_is(t, type, "integer")) {
        lm_strbuf_puts(b, "number");
    } else if (jt_str_is(t, type, "boolean")) {
        lm_strbuf_puts(b, "boolean");
    } else if (jt_str_is(t, type, "object")) {
        const int props = jt_get(t, spec, "properties"), req = jt_get(t, spec, "required");
        if (!jt_truthy(t, props) || t->nodes[props].type != JT_OBJECT) {
            lm_strbuf_puts(b, "object");
            return;
        }
        lm_strbuf_puts(b, "{\n");
        for (int p = t->nodes[props].first; p >= 0; p = t->nodes[p].next) {
            put_unescaped(b, t->nodes[p].key, t->nodes[p].key_n);
            if (!in_required(t, req, p)) lm_strbuf_puts(b, "?");
            lm_strbuf_puts(b, ": \n                "); // the template's line break and indent
            ts_type(b, t, p, depth + 1);
            if (t->nodes[p].next >= 0) lm_strbuf_puts(b, ", ");
        }
        lm_strbuf_puts(b, "}");
    } else {
        lm_strbuf_puts(b, "any");
    }
}

// ================================================================ the tools namespace

// One tool ({"type": "function", "function": {...}}) as render_tool_namespace writes it.
static bool put_tool_ts(struct lm_strbuf *b, const char *s, size_t n) {
    struct jt t;
    if (!jt_parse(&t, s, n)) {
        jt_free(&t);
        return false;
    }
    const int fn = jt_get(&t, 0, "function");
    const int params = jt_get(&t, fn, "parameters"), props = jt_get(&t, params, "properties");
    const int req = jt_get(&t, params, "required");
    if (fn < 0 || jt_get(&t, fn, "name") < 0) {
        jt_free(&t);
        return false;
    }
    lm_strbuf_puts(b, "// ");
    put_node_str(b, &t, jt_get(&t, fn, "description"));
    lm_strbuf_puts(b, "\ntype ");
    put_node_str(b, &t, jt_get(&t, fn, "name"));
    lm_strbuf_puts(b, " = ");
    if (!jt_truthy(&t, props) || t.nodes[props].type != JT_OBJECT) {
        lm_strbuf_puts(b, "() => any;\n\n");
        jt_free(&t);
        return true;
    }
    lm_strbuf_puts(b, "(_: {\n");
    for (int p = t.nodes[props].first; p >= 0; p = t.nodes[p].next) {
        const int d = jt_get(&t, p, "description"), def = jt_get(&t, p, "default");
        if (jt_truthy(&t, d)) {
            lm_strbuf_puts(b, "// ");
            put_node_str(b, &t, d);
            lm_strbuf_puts(b, "\n");
        }
        put_unescaped(b, t.nodes[p].key, t.nodes[p].key_n);
        if (!in_required(&t, req, p)) lm_strbuf_puts(b, "?");
        lm_strbuf_puts(b, ": ");
        ts_type(b, &t, p, 0);
        if (def >= 0 && jt_truthy(&t, jt_get(&t, p, "enum"))) {
            lm_strbuf_puts(b, ", // default: ");
            put_node_str(b, &t, def);
        } else if (def >= 0 && jt_truthy(&t, jt_get(&t, p, "oneOf"))) {
            lm_strbuf_puts(b, "// default: ");
            put_node_str(b, &t, def);
        } else if (def >= 0) {
            lm_strbuf_puts(b, ", // default: ");
            put_node_json(b, &t, def);
        }
        lm_strbuf_puts(b, ",\n");
    }
    lm_strbuf_puts(b, "}) => any;\n\n");
    jt_free(&t);
    return true;
}

static bool put_tools_ts(struct lm_strbuf *b, const char *tools, size_t len) {
    struct jt t;
    bool ok = jt_parse(&t, tools, len) && t.nodes[0].type == JT_ARRAY;
    lm_strbuf_puts(b, "# Tools\n\n## functions\n\nnamespace functions {\n\n");
    for (int c = ok ? t.nodes[0].first : -1; c >= 0 && ok; c = t.nodes[c].next)
        ok = put_tool_ts(b, t.nodes[c].s, t.nodes[c].n);
    lm_strbuf_puts(b, "} // namespace functions");
    jt_free(&t);
    return ok;
}

// ================================================================ the messages

static bool has_channel_tags(const char *s) {
    return s && (strstr(s, "<|channel|>analysis<|message|>") || strstr(s, "<|channel|>final<|message|>"));
}

// The number of tools, or -1 when tools is not a JSON array.
static int n_tools(const char *tools, size_t len) {
    struct jt t;
    int k = jt_parse(&t, tools, len) && t.nodes[0].type == JT_ARRAY ? t.nodes[0].count : -1;
    jt_free(&t);
    return k;
}

static void put_system(struct lm_strbuf *b, const struct lm_chat_harmony_opts *o, bool tools) {
    char day[32] = "";
    if (o && o->date) {
        snprintf(day, sizeof day, "%s", o->date);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        if (localtime_r(&now, &tm)) strftime(day, sizeof day, "%Y-%m-%d", &tm); // strftime_now
    }
    lm_strbuf_puts(b, "<|start|>system<|message|>");
    lm_strbuf_puts(b, o && o->model_identity ? o->model_identity
                                             : "You are ChatGPT, a large language model trained by OpenAI.");
    lm_strbuf_printf(b, "\nKnowledge cutoff: 2024-06\nCurrent date: %s\n\nReasoning: %s\n\n", day,
                     o && o->reasoning_effort ? o->reasoning_effort : "medium");
    lm_strbuf_puts(b, "# Valid channels: analysis, commentary, final. Channel must be included for every message.");
    if (tools) lm_strbuf_puts(b, "\nCalls to these tools must go to the commentary channel: 'functions'.");
    lm_strbuf_puts(b, "<|end|>");
}

static const struct lm_chat_msg_tools k_no_parts;

static const char *reasoning_of(const struct lm_chat_harmony_opts *o, size_t i) {
    return o && o->reasoning ? o->reasoning[i] : NULL;
}

static const struct lm_chat_msg_tools *hpart(const struct lm_chat_msg_tools *pt, size_t i) {
    return pt ? &pt[i] : &k_no_parts;
}

// An assistant turn with tool calls: its analysis unless a later assistant turn answered,
// then its first call (the template renders one call per message).
static enum lm_status put_call_turn(struct lm_strbuf *b, const struct lm_chat_harmony_opts *o,
                                    const struct lm_chat_msg *msgs, const struct lm_chat_msg_tools *pt, size_t i,
                                    size_t n, const char **last) {
    bool future_final = false;
    for (size_t k = i + 1; k < n; k++)
        future_final |= strcmp(msgs[k].role, "assistant") == 0 && hpart(pt, k)->n_tool_calls == 0;
    const char *content = msgs[i].content, *thinking = reasoning_of(o, i);
    if (*content && thinking && *thinking)
        return lm_error_set(LM_ERR_ARG, "lm_chat_apply: harmony: message %zu has both content and reasoning beside "
                                        "its tool calls (the template takes one of them as the analysis)", i);
    const char *analysis = *content ? content : thinking && *thinking ? thinking : NULL;
    if (analysis && !future_final) {
        lm_strbuf_puts(b, "<|start|>assistant<|channel|>analysis<|message|>");
        lm_strbuf_puts(b, analysis);
        lm_strbuf_puts(b, "<|end|>");
    }
    const struct lm_chat_tool_call *tc = &hpart(pt, i)->tool_calls[0];
    lm_strbuf_puts(b, "<|start|>assistant to=functions.");
    lm_strbuf_puts(b, tc->name);
    lm_strbuf_puts(b, "<|channel|>commentary json<|message|>");
    put_args_json(b, tc->arguments ? tc->arguments : "{}");
    lm_strbuf_puts(b, "<|call|>");
    *last = tc->name;
    return LM_OK;
}

static enum lm_status put_turns(struct lm_strbuf *b, const struct lm_chat_harmony_opts *o,
                                const struct lm_chat_msg *msgs, const struct lm_chat_msg_tools *pt, size_t first,
                                size_t n, bool agp) {
    const char *last = NULL; // the last tool call's name: a tool result answers it
    for (size_t i = first; i < n; i++) {
        const struct lm_chat_msg *m = &msgs[i];
        if (strcmp(m->role, "assistant") == 0) {
            if (has_channel_tags(m->content) || has_channel_tags(reasoning_of(o, i)))
                return lm_error_set(LM_ERR_ARG, "lm_chat_apply: harmony: message %zu holds <|channel|> tags; pass the "
                                                "analysis as reasoning and the final text as content", i);
            if (hpart(pt, i)->n_tool_calls > 0) {
                enum lm_status st = put_call_turn(b, o, msgs, pt, i, n, &last);
                if (st != LM_OK) return st;
            } else if (i + 1 == n && !agp) { // training form: the last turn keeps its analysis
                if (reasoning_of(o, i)) {
                    lm_strbuf_puts(b, "<|start|>assistant<|channel|>analysis<|message|>");
                    lm_strbuf_puts(b, reasoning_of(o, i));
                    lm_strbuf_puts(b, "<|end|>");
                }
                lm_strbuf_puts(b, "<|start|>assistant<|channel|>final<|message|>");
                lm_strbuf_puts(b, m->content);
                lm_strbuf_puts(b, "<|return|>");
            } else { // prior turns' analysis is dropped
                lm_strbuf_puts(b, "<|start|>assistant<|channel|>final<|message|>");
                lm_strbuf_puts(b, m->content);
                lm_strbuf_puts(b, "<|end|>");
                last = NULL;
            }
        } else if (strcmp(m->role, "tool") == 0) {
            if (!last)
                return lm_error_set(LM_ERR_ARG, "lm_chat_apply: harmony: message %zu is a tool result, but no "
                                                "assistant tool call precedes it", i);
            lm_strbuf_puts(b, "<|start|>functions.");
            lm_strbuf_puts(b, last);
            lm_strbuf_puts(b, " to=assistant<|channel|>commentary<|message|>");
            put_json_string(b, m->content, strlen(m->content));
            lm_strbuf_puts(b, "<|end|>");
        } else if (strcmp(m->role, "user") == 0) {
            lm_strbuf_puts(b, "<|start|>user<|message|>");
            lm_strbuf_puts(b, m->content);
            lm_strbuf_puts(b, "<|end|>");
        } // system / developer messages after the first: the template drops them
    }
    if (agp) lm_strbuf_puts(b, "<|start|>assistant");
    return LM_OK;
}

enum lm_status lm_chat_apply_harmony(const struct lm_chat_harmony_opts *opts, const struct lm_chat_msg *msgs,
                                     const struct lm_chat_msg_tools *pt, size_t n, const char *tools, size_t len,
                                     bool agp, char **out, size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    if (tools && len == 0) tools = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return lm_error_set(LM_ERR_ARG, "lm_chat_apply: message %zu has a NULL role or content", i);
        for (size_t k = 0; k < hpart(pt, i)->n_tool_calls; k++)
            if (!hpart(pt, i)->tool_calls || !hpart(pt, i)->tool_calls[k].name)
                return lm_error_set(LM_ERR_ARG, "lm_chat_apply: message %zu: tool call %zu has no name", i, k);
    }
    const int nt = tools ? n_tools(tools, len) : 0;
    if (nt < 0) return lm_error_set(LM_ERR_ARG, "lm_chat_apply: harmony: tools is not a JSON array");
    const bool has_tools = nt > 0;
    struct lm_strbuf b = {0};
    lm_strbuf_put(&b, "", 0);
    put_system(&b, opts, has_tools);
    const bool dev = n > 0 && (strcmp(msgs[0].role, "developer") == 0 || strcmp(msgs[0].role, "system") == 0);
    enum lm_status st = LM_OK;
    if ((dev && *msgs[0].content) || has_tools) {
        lm_strbuf_puts(&b, "<|start|>developer<|message|>");
        if (dev && *msgs[0].content) {
            lm_strbuf_puts(&b, "# Instructions\n\n");
            lm_strbuf_puts(&b, msgs[0].content);
            lm_strbuf_puts(&b, "\n\n");
        }
        if (has_tools && !put_tools_ts(&b, tools, len))
            st = lm_error_set(LM_ERR_ARG, "lm_chat_apply: harmony: tools is not a JSON array of "
                                          "{\"type\": \"function\", \"function\": {\"name\", ...}}");
        lm_strbuf_puts(&b, "<|end|>");
    }
    if (st == LM_OK) st = put_turns(&b, opts, msgs, pt, dev ? 1 : 0, n, agp);
    if (st == LM_OK && b.nomem) st = lm_error_set(LM_ERR_NOMEM, "lm_chat_apply: out of memory");
    if (st != LM_OK) {
        free(b.p);
        return st;
    }
    *out = b.p;
    *n_out = b.n;
    return LM_OK;
}
