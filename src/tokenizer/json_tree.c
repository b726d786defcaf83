// A read-only JSON tree for the chat templates that walk tool schemas: nodes in one array,
// children linked in document order (an object's members keep their order, as Jinja's
// dict.items() does on the parsed JSON).
#include "tokenizer/json_tree.h"

#include <stdlib.h>
#include <string.h>

struct jp {
    struct jt *t;
    const char *s;
    size_t n, i;
};

static void ws(struct jp *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static int node_new(struct jp *p, enum jt_type type) {
    struct jt *t = p->t;
    if (t->n == t->cap) {
        int nc = t->cap ? 2 * t->cap : 32;
        struct jt_node *nn = realloc(t->nodes, (size_t)nc * sizeof *nn);
        if (!nn) return -1;
        t->nodes = nn;
        t->cap = nc;
    }
    t->nodes[t->n] = (struct jt_node){.type = type, .s = p->s + p->i, .first = -1, .next = -1};
    return t->n++;
}

// A string at p->i: [*a, *a + *len) is its escaped body; p->i moves past the closing quote.
static bool str_span(struct jp *p, const char **a, size_t *len) {
    if (p->i >= p->n || p->s[p->i] != '"') return false;
    size_t j = ++p->i;
    while (j < p->n && p->s[j] != '"') {
        if ((unsigned char)p->s[j] < 0x20) return false;
        if (p->s[j] == '\\' && (j + 1 >= p->n || (unsigned char)p->s[j + 1] < 0x20)) return false;
        j += p->s[j] == '\\' ? 2 : 1;
    }
    if (j >= p->n) return false;
    *a = p->s + p->i;
    *len = j - p->i;
    p->i = j + 1;
    return true;
}

static int value(struct jp *p, int depth);

static int container(struct jp *p, int depth, bool obj) {
    int me = node_new(p, obj ? JT_OBJECT : JT_ARRAY), last = -1;
    if (me < 0) return -1;
    size_t start = p->i++;
    ws(p);
    if (p->i < p->n && p->s[p->i] == (obj ? '}' : ']')) {
        p->i++;
        p->t->nodes[me].n = p->i - start;
        return me;
    }
    for (;;) {
        const char *k = NULL;
        size_t kn = 0;
        if (obj) {
            if (!str_span(p, &k, &kn)) return -1;
            ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') return -1;
            p->i++;
        }
        ws(p);
        int c = value(p, depth + 1);
        if (c < 0) return -1;
        p->t->nodes[c].key = k;
        p->t->nodes[c].key_n = kn;
        if (last < 0) p->t->nodes[me].first = c;
        else p->t->nodes[last].next = c;
        last = c;
        p->t->nodes[me].count++;
        ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            ws(p);
            continue;
        }
        if (p->i < p->n && p->s[p->i] == (obj ? '}' : ']')) {
            p->i++;
            p->t->nodes[me].n = p->i - start;
            return me;
        }
        return -1;
    }
}

static bool word(struct jp *p, const char *w) {
    size_t k = strlen(w);
    if (p->n - p->i < k || memcmp(p->s + p->i, w, k) != 0) return false;
    p->i += k;
    return true;
}

static int value(struct jp *p, int depth) {
    if (depth > 64 || p->i >= p->n) return -1;
    const char c = p->s[p->i];
    if (c == '{' || c == '[') return container(p, depth, c == '{');
    if (c == '"') {
        int me = node_new(p, JT_STRING);
        if (me < 0) return -1;
        const char *a;
        size_t len;
        if (!str_span(p, &a, &len)) return -1;
        p->t->nodes[me].s = a;
        p->t->nodes[me].n = len;
        return me;
    }
    if (c == 't' || c == 'f' || c == 'n') {
        int me = node_new(p, c == 't' ? JT_TRUE : c == 'f' ? JT_FALSE : JT_NULL);
        if (me < 0 || !word(p, c == 't' ? "true" : c == 'f' ? "false" : "null")) return -1;
        p->t->nodes[me].n = c == 'f' ? 5 : 4;
        return me;
    }
    int me = node_new(p, JT_NUMBER);
    if (me < 0) return -1;
    size_t a = p->i;
    while (p->i < p->n && strchr("+-0123456789.eE", p->s[p->i])) p->i++;
    if (p->i == a) return -1;
    p->t->nodes[me].n = p->i - a;
    return me;
}

bool jt_parse(struct jt *t, const char *text, size_t len) {
    memset(t, 0, sizeof *t);
    struct jp p = {t, text, len, 0};
    ws(&p);
    if (value(&p, 0) != 0) return false;
    ws(&p);
    return p.i == len;
}

void jt_free(struct jt *t) {
    free(t->nodes);
    memset(t, 0, sizeof *t);
}

int jt_get(const struct jt *t, int o, const char *key) {
    if (o < 0 || t->nodes[o].type != JT_OBJECT) return -1;
    size_t kn = strlen(key);
    for (int c = t->nodes[o].first; c >= 0; c = t->nodes[c].next)
        if (t->nodes[c].key_n == kn && memcmp(t->nodes[c].key, key, kn) == 0) return c;
    return -1;
}

bool jt_truthy(const struct jt *t, int i) {
    if (i < 0) return false;
    const struct jt_node *x = &t->nodes[i];
    switch (x->type) {
    case JT_NULL:
    case JT_FALSE: return false;
    case JT_TRUE: return true;
    case JT_STRING: return x->n > 0;
    case JT_ARRAY:
    case JT_OBJECT: return x->count > 0;
    case JT_NUMBER:
        for (size_t k = 0; k < x->n; k++)
            if (x->s[k] >= '1' && x->s[k] <= '9') return true;
            else if (x->s[k] == 'e' || x->s[k] == 'E') break;
        return false;
    }
    return false;
}

bool jt_str_is(const struct jt *t, int i, const char *s) {
    return i >= 0 && t->nodes[i].type == JT_STRING && t->nodes[i].n == strlen(s) &&
           memcmp(t->nodes[i].s, s, t->nodes[i].n) == 0;
}
