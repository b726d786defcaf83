// Pushdown matcher with hash-consed stacks (matcher.h). A reference ending its alternative
// pushes nothing (a tail call: the helper of "x*" keeps the stack flat); expansions (rule entry
// down to character tops) are memoized per node, so nullable chains cost once.
#include "grammar/matcher.h"

#include <stdlib.h>
#include <string.h>

static uint32_t hash32(uint32_t h, uint32_t v) {
    h ^= v;
    h *= 0x9E3779B1u;
    return h ^ (h >> 15);
}

static bool grow(void **v, uint32_t *cap, uint64_t need, size_t size) {
    if (need <= *cap) return true;
    if (need > UINT32_MAX / 2) return false;
    uint32_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *n = realloc(*v, (size_t)c * size);
    if (!n) return false;
    *v = n, *cap = c;
    return true;
}

// A limit turned a step dead: flags the operation (its results are not cached) and, for the
// memory limits, the grammar (its caches restart when no matcher is alive).
static uint32_t full(struct gm *m, const char *what) {
    if (!m->overflow) lm_error_set(LM_ERR_NOMEM, "grammar matcher: %s", what);
    m->overflow = true;
    if (!strstr(what, "stacks than the limit") && !strstr(what, "too deep")) m->exhausted = true;
    return UINT32_MAX;
}

uint32_t gm_node(struct gm *m, uint32_t pos, uint32_t parent) {
    uint32_t h = hash32(hash32(0x12345u, pos), parent);
    for (uint32_t i = h & m->node_ht_mask;; i = (i + 1) & m->node_ht_mask) {
        uint32_t id = m->node_ht[i];
        if (id == UINT32_MAX) break;
        if (m->nodes[id].pos == pos && m->nodes[id].parent == parent) return id;
    }
    if (m->n_nodes >= m->max_nodes) return full(m, "too many stack nodes (limit reached)");
    uint32_t cap = m->cap_nodes;
    if (!grow((void **)&m->nodes, &m->cap_nodes, m->n_nodes + 1, sizeof *m->nodes)) return full(m, "out of memory");
    if (m->cap_nodes != cap) {
        uint32_t *a = realloc(m->exp_off, (size_t)m->cap_nodes * sizeof *a);
        if (a) m->exp_off = a;
        uint32_t *b = a ? realloc(m->exp_n, (size_t)m->cap_nodes * sizeof *b) : NULL;
        if (b) m->exp_n = b;
        if (!a || !b) return full(m, "out of memory");
    }
    uint32_t id = m->n_nodes++;
    m->nodes[id] = (struct gm_node){pos, parent};
    m->exp_off[id] = UINT32_MAX, m->exp_n[id] = 0;
    if (2 * m->n_nodes > m->node_ht_mask) { // rehash at half full
        uint32_t mask = 2 * m->node_ht_mask + 1;
        uint32_t *t = malloc(((size_t)mask + 1) * sizeof *t);
        if (!t) return m->n_nodes--, full(m, "out of memory");
        memset(t, 0xFF, ((size_t)mask + 1) * sizeof *t);
        for (uint32_t k = 0; k < m->n_nodes; k++) {
            uint32_t j = hash32(hash32(0x12345u, m->nodes[k].pos), m->nodes[k].parent) & mask;
            while (t[j] != UINT32_MAX) j = (j + 1) & mask;
            t[j] = k;
        }
        free(m->node_ht);
        m->node_ht = t, m->node_ht_mask = mask;
    } else {
        uint32_t i = h & m->node_ht_mask;
        while (m->node_ht[i] != UINT32_MAX) i = (i + 1) & m->node_ht_mask;
        m->node_ht[i] = id;
    }
    return id;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static uint32_t sort_unique(uint32_t *v, uint32_t n) {
    if (n < 2) return n;
    if (n < 16) {
        for (uint32_t i = 1; i < n; i++)
            for (uint32_t j = i; j > 0 && v[j - 1] > v[j]; j--) { uint32_t t = v[j]; v[j] = v[j - 1], v[j - 1] = t; }
    } else {
        qsort(v, n, sizeof *v, cmp_u32);
    }
    uint32_t k = 1;
    for (uint32_t i = 1; i < n; i++)
        if (v[i] != v[k - 1]) v[k++] = v[i];
    return k;
}

// Expansion of node n: the stacks with a character (or nothing) on top that it stands for,
// memoized in exp_pool. false: out of memory or a limit.
static bool expand(struct gm *m, uint32_t n, int depth) {
    if (m->exp_off[n] != UINT32_MAX) return true;
    if (depth > 4096) return full(m, "expansion too deep"), false;
    const struct gb_grammar *g = m->g;
    uint32_t *list = NULL, nl = 0, cap = 0;
    uint32_t pos = m->nodes[n].pos;
    bool ok = true;
    if (n == GM_BOTTOM || n == GM_HOLE || g->elem[pos].kind == GB_CHAR) {
        ok = grow((void **)&list, &cap, 1, sizeof *list);
        if (ok) list[nl++] = n;
    } else {
        m->exp_off[n] = UINT32_MAX - 1; // in progress (a cycle would need left recursion)
        const struct gb_rule *r = &g->rules[g->elem[pos].arg];
        uint32_t parent = m->nodes[n].parent;
        uint32_t base = g->elem[pos + 1].kind == GB_END ? parent : gm_node(m, pos + 1, parent);
        ok = base != UINT32_MAX;
        for (uint32_t a = 0; ok && a < r->n_alt; a++) {
            uint32_t start = g->alts[r->alt_off + a];
            uint32_t sub = g->elem[start].kind == GB_END ? base : gm_node(m, start, base);
            if (sub == UINT32_MAX) { ok = false; break; }
            if (m->exp_off[sub] == UINT32_MAX - 1) continue; // a cycle adds no stacks
            if (!expand(m, sub, depth + 1)) { ok = false; break; }
            uint32_t k = m->exp_n[sub];
            if (!grow((void **)&list, &cap, (uint64_t)nl + k, sizeof *list)) { ok = false; break; }
            memcpy(list + nl, m->exp_pool + m->exp_off[sub], k * sizeof *list);
            nl += k;
        }
        nl = sort_unique(list, nl);
    }
    if (ok && nl > m->max_stacks) full(m, "a grammar position expands to more stacks than the limit (ambiguous grammar)"), ok = false;
    if (ok && m->n_exp + (uint64_t)nl > m->max_nodes) full(m, "too many stack expansions (limit reached)"), ok = false;
    if (ok && !grow((void **)&m->exp_pool, &m->cap_exp, (uint64_t)m->n_exp + nl, sizeof *m->exp_pool)) full(m, "out of memory"), ok = false;
    if (!ok) {
        if (m->exp_off[n] == UINT32_MAX - 1) m->exp_off[n] = UINT32_MAX;
        free(list);
        return false;
    }
    if (nl) memcpy(m->exp_pool + m->n_exp, list, nl * sizeof *list);
    m->exp_off[n] = m->n_exp, m->exp_n[n] = nl;
    m->n_exp += nl;
    free(list);
    return true;
}

// Appends node n's expansion to scratch.
static bool add_expansion(struct gm *m, uint32_t n) {
    if (n == UINT32_MAX || !expand(m, n, 0)) return false;
    uint32_t k = m->exp_n[n];
    if (!grow((void **)&m->scratch, &m->cap_scratch, (uint64_t)m->n_scratch + k, sizeof *m->scratch)) return full(m, "out of memory"), false;
    memcpy(m->scratch + m->n_scratch, m->exp_pool + m->exp_off[n], k * sizeof *m->scratch);
    m->n_scratch += k;
    return true;
}

static uint32_t state_hash(const uint32_t *ids, uint32_t n, uint32_t v, uint32_t need, uint32_t len) {
    uint32_t h = hash32(hash32(hash32(0xABCDu, v), need), len);
    for (uint32_t i = 0; i < n; i++) h = hash32(h, ids[i]);
    return h;
}

// Interns the state (scratch[0..n) sorted unique, v, need, len); GM_DEAD when empty.
static uint32_t intern(struct gm *m, uint32_t n, uint32_t v, uint8_t need, uint8_t len) {
    const uint32_t *ids = m->scratch;
    if (n == 0) return GM_DEAD;
    if (n > m->max_stacks) return full(m, "a state has more stacks than the limit (ambiguous grammar)"), GM_DEAD;
    uint32_t h = state_hash(ids, n, v, need, len);
    for (uint32_t i = h & m->st_ht_mask;; i = (i + 1) & m->st_ht_mask) {
        uint32_t id = m->st_ht[i];
        if (id == UINT32_MAX) break;
        const struct gm_state *s = &m->states[id];
        if (s->n == n && s->v == v && s->need == need && s->len == len && !memcmp(m->pool + s->off, ids, n * sizeof *ids)) return id;
    }
    if (m->n_states + m->n_pool + (uint64_t)n > m->max_nodes) return full(m, "too many states (limit reached)"), GM_DEAD;
    if (!grow((void **)&m->states, &m->cap_states, m->n_states + 1, sizeof *m->states) ||
        !grow((void **)&m->pool, &m->cap_pool, (uint64_t)m->n_pool + n, sizeof *m->pool))
        return full(m, "out of memory"), GM_DEAD;
    if (2 * (m->n_states + 1) > m->st_ht_mask) {
        uint32_t mask = 2 * m->st_ht_mask + 1;
        uint32_t *t = malloc(((size_t)mask + 1) * sizeof *t);
        if (!t) return full(m, "out of memory"), GM_DEAD;
        memset(t, 0xFF, ((size_t)mask + 1) * sizeof *t);
        for (uint32_t k = 1; k < m->n_states; k++) {
            const struct gm_state *s = &m->states[k];
            uint32_t j = state_hash(m->pool + s->off, s->n, s->v, s->need, s->len) & mask;
            while (t[j] != UINT32_MAX) j = (j + 1) & mask;
            t[j] = k;
        }
        free(m->st_ht);
        m->st_ht = t, m->st_ht_mask = mask;
    }
    uint32_t id = m->n_states++;
    struct gm_state *s = &m->states[id];
    memset(s, 0, sizeof *s);
    s->off = m->n_pool, s->n = n, s->v = v, s->need = need, s->len = len;
    s->hi = GM_UNKNOWN;
    memcpy(m->pool + m->n_pool, ids, n * sizeof *ids);
    m->n_pool += n;
    for (uint32_t k = 0; k < n; k++) {
        if (ids[k] == GM_BOTTOM) s->flags |= GM_CAN_END;
        if (ids[k] == GM_HOLE) s->flags |= GM_HAS_HOLE;
    }
    uint32_t i = h & m->st_ht_mask;
    while (m->st_ht[i] != UINT32_MAX) i = (i + 1) & m->st_ht_mask;
    m->st_ht[i] = id;
    return id;
}

uint32_t gm_state_of_node(struct gm *m, uint32_t n) {
    m->n_scratch = 0;
    if (!add_expansion(m, n)) return GM_DEAD;
    return intern(m, m->n_scratch, 0, 0, 0);
}

uint32_t gm_start(struct gm *m) {
    const struct gb_rule *r = &m->g->rules[m->g->root];
    m->n_scratch = 0;
    for (uint32_t a = 0; a < r->n_alt; a++) {
        uint32_t start = m->g->alts[r->alt_off + a];
        if (!add_expansion(m, m->g->elem[start].kind == GB_END ? GM_BOTTOM : gm_node(m, start, GM_BOTTOM))) return GM_DEAD;
    }
    return intern(m, sort_unique(m->scratch, m->n_scratch), 0, 0, 0);
}

static const uint32_t utf8_min[5] = {0, 0, 0x80, 0x800, 0x10000};
static const uint32_t utf8_max[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};

// The state after code point cp from complete state s (the stacks whose class holds cp, each
// advanced and expanded).
static uint32_t advance(struct gm *m, uint32_t s, uint32_t cp) {
    const struct gm_state st = m->states[s];
    m->n_scratch = 0;
    for (uint32_t i = 0; i < st.n; i++) {
        uint32_t n = m->pool[st.off + i];
        if (n == GM_BOTTOM || n == GM_HOLE) continue;
        uint32_t pos = m->nodes[n].pos;
        if (!gb_class_has(m->g, m->g->elem[pos].arg, cp)) continue;
        uint32_t parent = m->nodes[n].parent;
        uint32_t next = m->g->elem[pos + 1].kind == GB_END ? parent : gm_node(m, pos + 1, parent);
        if (!add_expansion(m, next)) return GM_DEAD;
        if (m->n_scratch > 4 * m->max_stacks) m->n_scratch = sort_unique(m->scratch, m->n_scratch);
    }
    return intern(m, sort_unique(m->scratch, m->n_scratch), 0, 0, 0);
}

uint32_t gm_hi(struct gm *m, uint32_t s) {
    if (m->states[s].hi != GM_UNKNOWN) return m->states[s].hi;
    const struct gm_state st = m->states[s];
    uint32_t r = GM_DEAD;
    bool uniform = st.need == 0;
    for (uint32_t i = 0; uniform && i < st.n; i++) {
        uint32_t n = m->pool[st.off + i];
        if (n == GM_BOTTOM || n == GM_HOLE) continue;
        uint32_t c = m->g->elem[m->nodes[n].pos].arg;
        const uint32_t *rg = m->g->ranges + 2 * (size_t)m->g->classes[c].off;
        uint32_t k = m->g->classes[c].n;
        bool meets = gb_class_meets(m->g, c, 0x80, 0x10FFFF);
        bool covers = false; // one range holds [0x80, 0x10FFFF] (ranges are merged)
        for (uint32_t j = 0; j < k; j++) covers |= rg[2 * j] <= 0x80 && rg[2 * j + 1] >= 0x10FFFF;
        if (meets && !covers) uniform = false;
    }
    if (!uniform) r = GM_NOT_UNIFORM;
    else r = advance(m, s, 0x10000);
    if (r == UINT32_MAX) r = GM_DEAD;
    if (!m->overflow || r == GM_NOT_UNIFORM) m->states[s].hi = r;
    return r;
}

static uint32_t utf8_lead(uint32_t cp) {
    return cp < 0x80 ? cp : cp < 0x800 ? 0xC0 | (cp >> 6) : cp < 0x10000 ? 0xE0 | (cp >> 12) : 0xF0 | (cp >> 18);
}

// The bytes that can start a code point some stack of complete state s accepts: most of the
// 256 transitions of a state are refused by this test alone, before any stack is advanced.
static void first_bytes(struct gm *m, uint32_t s) {
    struct gm_state *st = &m->states[s];
    memset(st->first, 0, sizeof st->first);
    for (uint32_t i = 0; i < st->n; i++) {
        uint32_t n = m->pool[st->off + i];
        if (n == GM_BOTTOM || n == GM_HOLE) continue;
        const struct gb_class *k = &m->g->classes[m->g->elem[m->nodes[n].pos].arg];
        const uint32_t *r = m->g->ranges + 2 * (size_t)k->off;
        for (uint32_t j = 0; j < k->n; j++) {
            uint32_t a = utf8_lead(r[2 * j]), b = utf8_lead(r[2 * j + 1]);
            for (uint32_t x = a; x <= b && x < 256; x++) st->first[x >> 5] |= 1u << (x & 31);
        }
    }
    st->first_known = 1;
}

static uint32_t step_slow(struct gm *m, uint32_t s, uint8_t b) {
    if (m->states[s].need == 0) {
        if (!m->states[s].first_known) first_bytes(m, s);
        if (!((m->states[s].first[b >> 5] >> (b & 31)) & 1)) return GM_DEAD;
    }
    const struct gm_state st = m->states[s];
    const uint32_t *ids = m->pool + st.off;
    uint32_t v, need, len;
    if (st.need == 0) {
        len = b < 0x80 ? 1 : b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
        if (!len) return GM_DEAD;
        v = len == 1 ? b : len == 2 ? (b & 0x1Fu) : len == 3 ? (b & 0x0Fu) : (b & 0x07u);
        need = len - 1;
    } else {
        if ((b & 0xC0) != 0x80) return GM_DEAD;
        v = st.v << 6 | (b & 0x3Fu), need = st.need - 1u, len = st.len;
    }
    m->n_scratch = 0;
    if (need) { // partial: keep the stacks whose class meets the code points still possible
        uint32_t lo = v << (6 * need), hi = lo | ((1u << (6 * need)) - 1);
        if (lo < utf8_min[len]) lo = utf8_min[len];
        if (hi > utf8_max[len]) hi = utf8_max[len];
        if (lo > hi) return GM_DEAD;
        for (uint32_t i = 0; i < st.n; i++) {
            uint32_t n = ids[i];
            if (n == GM_BOTTOM || n == GM_HOLE) continue;
            if (!gb_class_meets(m->g, m->g->elem[m->nodes[n].pos].arg, lo, hi)) continue;
            if (!grow((void **)&m->scratch, &m->cap_scratch, m->n_scratch + 1, sizeof *m->scratch)) return full(m, "out of memory"), GM_DEAD;
            m->scratch[m->n_scratch++] = n;
        }
        return intern(m, m->n_scratch, v, (uint8_t)need, (uint8_t)len);
    }
    if (v < utf8_min[len] || v > utf8_max[len]) return GM_DEAD;
    return advance(m, s, v);
}

uint32_t gm_step(struct gm *m, uint32_t s, uint8_t b) {
    if (s == GM_DEAD) return GM_DEAD;
    if (!m->states[s].next) {
        if (m->n_tables >= m->max_tables) { // memory bound: answer without caching
            uint32_t r = step_slow(m, s, b);
            return r == UINT32_MAX ? GM_DEAD : r;
        }
        m->n_tables++;
        uint32_t *t = malloc(256 * sizeof *t);
        if (!t) return full(m, "out of memory"), GM_DEAD;
        memset(t, 0xFF, 256 * sizeof *t);
        m->states[s].next = t;
    }
    uint32_t r = m->states[s].next[b];
    if (r != GM_UNKNOWN) return r;
    r = step_slow(m, s, b);
    if (r == UINT32_MAX) r = GM_DEAD;
    if (!m->overflow) m->states[s].next[b] = r; // a limit's dead end is not cached as the truth
    return r;
}

enum lm_status gm_init(struct gm *m, const struct gb_grammar *g) {
    memset(m, 0, sizeof *m);
    m->g = g;
    m->max_stacks = 1024;
    m->max_nodes = 1u << 20; // nodes, states, pooled ids: about 100 MB at most
    m->max_tables = 1u << 16; // transition tables: 64 MB
    m->pos_rule = malloc(((size_t)g->n_elem + 1) * sizeof *m->pos_rule);
    m->node_ht_mask = 1023, m->st_ht_mask = 1023;
    m->node_ht = malloc(1024 * sizeof *m->node_ht);
    m->st_ht = malloc(1024 * sizeof *m->st_ht);
    if (!m->pos_rule || !m->node_ht || !m->st_ht) {
        gm_free(m);
        return lm_error_set(LM_ERR_NOMEM, "grammar matcher: out of memory");
    }
    memset(m->node_ht, 0xFF, 1024 * sizeof *m->node_ht);
    memset(m->st_ht, 0xFF, 1024 * sizeof *m->st_ht);
    for (uint32_t p = g->n_elem; p-- > 0;)
        m->pos_rule[p] = g->elem[p].kind == GB_END ? g->elem[p].arg : m->pos_rule[p + 1];
    // node 0 = bottom, node 1 = hole (positions unused); state 0 = dead
    uint32_t a = gm_node(m, UINT32_MAX, UINT32_MAX), b = gm_node(m, UINT32_MAX - 1, UINT32_MAX);
    bool ok = a == GM_BOTTOM && b == GM_HOLE && grow((void **)&m->states, &m->cap_states, 1, sizeof *m->states);
    if (!ok) {
        gm_free(m);
        return lm_error_set(LM_ERR_NOMEM, "grammar matcher: out of memory");
    }
    memset(&m->states[0], 0, sizeof m->states[0]);
    m->n_states = 1;
    return LM_OK;
}

void gm_free(struct gm *m) {
    if (!m) return;
    for (uint32_t i = 0; i < m->n_states; i++) free(m->states[i].next);
    free(m->pos_rule), free(m->nodes), free(m->node_ht), free(m->exp_off), free(m->exp_n), free(m->exp_pool);
    free(m->states), free(m->pool), free(m->st_ht), free(m->scratch);
    memset(m, 0, sizeof *m);
}
