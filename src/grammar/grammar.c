// The public structured-output API (lumen.h): compile GBNF for a tokenizer (parse, matcher
// tables, the shared vocabulary trie) and run matchers over it. One lock per grammar guards
// the caches that matchers of any thread grow; a cached mask is one copy under it.
#define _POSIX_C_SOURCE 200809L
#include "grammar/grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timer.h"
#include "tokenizer/tokenizer.h"

struct lm_grammar_options lm_grammar_options_default(void) {
    struct lm_grammar_options o;
    memset(&o, 0, sizeof o);
    return o;
}

#define DEFAULT_MAX_RULES 10000
#define DEFAULT_MAX_COMPILE_MS 2000

// Compiling spends up to this long computing the masks of the states nearest the start
// (breadth first over ASCII bytes): the cores a generation meets first (inside a JSON string:
// about 1.5 ms at 262k tokens) are then walked here rather than at a token of the first request.
#define WARM_STATES 256
uint64_t lm_grammar_warm_ns = 3000000; // grammar.h: tests set 0 to see cold caches

static void warm(struct lm_grammar *g, uint64_t deadline) {
    uint32_t *queue = malloc(WARM_STATES * sizeof *queue), *bits = malloc((size_t)g->masks.words * sizeof *bits);
    uint32_t head = 0, n = 0;
    if (queue && bits) {
        queue[n++] = g->start;
        while (head < n && lm_now_ns() < deadline && !g->eng.exhausted) {
            uint32_t s = queue[head++];
            gk_fill(&g->masks, s, bits);
            for (uint32_t b = 0; b < 128 && n < WARM_STATES; b++) {
                uint32_t x = gm_next(&g->eng, s, (uint8_t)b);
                if (x == GM_DEAD || g->eng.states[x].mask) continue;
                bool seen = false;
                for (uint32_t i = 0; i < n && !seen; i++) seen = queue[i] == x;
                if (!seen) queue[n++] = x;
            }
        }
    }
    free(queue), free(bits);
}

static void grammar_destroy(struct lm_grammar *g) {
    gk_free(&g->masks);
    gm_free(&g->eng);
    gb_free(&g->g);
    gk_trie_put(g->trie);
    for (int32_t i = 0; i < g->n_triggers; i++) free(g->triggers[i]);
    free(g->triggers), free(g->trigger_len);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

enum lm_status lm_grammar_compile(struct lm_grammar **out, const struct lm_tokenizer *t, const char *gbnf,
                                  size_t len, const struct lm_grammar_options *opt) {
    if (!out) return lm_error_set(LM_ERR_ARG, "lm_grammar_compile: out is NULL");
    *out = NULL;
    if (!t || (!gbnf && len)) return lm_error_set(LM_ERR_ARG, "lm_grammar_compile: NULL tokenizer or text");
    struct lm_grammar_options o = opt ? *opt : lm_grammar_options_default();
    uint64_t t0 = lm_now_ns();
    uint64_t ms = o.max_compile_ms ? o.max_compile_ms : DEFAULT_MAX_COMPILE_MS;
    if (o.n_triggers < 0 || (o.n_triggers && !o.triggers))
        return lm_error_set(LM_ERR_ARG, "lm_grammar_compile: n_triggers %d without triggers", o.n_triggers);
    struct lm_grammar *g = calloc(1, sizeof *g);
    if (!g) return lm_error_set(LM_ERR_NOMEM, "lm_grammar_compile: out of memory");
    atomic_init(&g->refs, 1);
    pthread_mutex_init(&g->lock, NULL);
    g->t = t;
    struct gb_limits lim = {.max_rules = o.max_rules ? o.max_rules : DEFAULT_MAX_RULES,
                            .deadline_ns = t0 + ms * 1000000ull};
    enum lm_status st = gb_parse(&g->g, gbnf, len, o.root, &lim);
    if (st != LM_OK) {
        free(g);
        return st;
    }
    if (o.n_triggers) {
        g->triggers = calloc((size_t)o.n_triggers, sizeof *g->triggers);
        g->trigger_len = calloc((size_t)o.n_triggers, sizeof *g->trigger_len);
        if (!g->triggers || !g->trigger_len) st = lm_error_set(LM_ERR_NOMEM, "lm_grammar_compile: out of memory");
        for (int32_t i = 0; st == LM_OK && i < o.n_triggers; i++) {
            size_t n = o.triggers[i] ? strlen(o.triggers[i]) : 0;
            if (n == 0 || n > LM_GRAMMAR_MAX_TRIGGER) {
                st = lm_error_set(LM_ERR_ARG, "lm_grammar_compile: trigger %d is empty or longer than %d bytes", i, LM_GRAMMAR_MAX_TRIGGER);
                break;
            }
            if (!(g->triggers[i] = malloc(n + 1))) { st = lm_error_set(LM_ERR_NOMEM, "lm_grammar_compile: out of memory"); break; }
            memcpy(g->triggers[i], o.triggers[i], n + 1);
            g->trigger_len[i] = (uint32_t)n;
            if (n > g->max_trigger) g->max_trigger = (uint32_t)n;
            g->n_triggers = i + 1;
        }
    }
    uint64_t t_trie = lm_now_ns(); // the vocabulary's trie is the tokenizer's cost, not the grammar's
    if (st == LM_OK) st = gk_trie_get(&g->trie, t);
    t0 += lm_now_ns() - t_trie;
    if (st == LM_OK) st = gm_init(&g->eng, &g->g);
    if (st == LM_OK) st = gk_init(&g->masks, &g->eng, g->trie);
    if (st == LM_OK && (g->start = gm_start(&g->eng)) == GM_DEAD) { // the matcher said which limit
        char why[256];
        snprintf(why, sizeof why, "%s", lm_error_msg());
        st = lm_error_set(LM_ERR_ARG, "lm_grammar_compile: the start of rule '%s': %s", g->g.names + g->g.rules[g->g.root].name_off, why);
    }
    uint64_t limit = t0 + ms * 1000000ull, now = lm_now_ns();
    if (st == LM_OK && now > limit)
        st = lm_error_set(LM_ERR_ARG, "lm_grammar_compile: compiling exceeds the limit of %llu ms", (unsigned long long)ms);
    if (st == LM_OK && lm_grammar_warm_ns) // within what is left of the limit
        warm(g, now + lm_grammar_warm_ns < limit ? now + lm_grammar_warm_ns : limit);
    if (st != LM_OK) {
        grammar_destroy(g);
        return st;
    }
    g->compile_ns = lm_now_ns() - t0;
    *out = g;
    return LM_OK;
}

struct lm_grammar *lm_grammar_ref(struct lm_grammar *g) {
    if (g) atomic_fetch_add(&g->refs, 1);
    return g;
}

void lm_grammar_free(struct lm_grammar *g) {
    if (g && atomic_fetch_sub(&g->refs, 1) == 1) grammar_destroy(g);
}

// ---------------------------------------------------------------- matcher

enum lm_status lm_grammar_matcher_init(struct lm_grammar_matcher **out, struct lm_grammar *g) {
    if (!out || !g) return lm_error_set(LM_ERR_ARG, "lm_grammar_matcher_init: NULL argument");
    *out = NULL;
    struct lm_grammar_matcher *m = calloc(1, sizeof *m);
    if (!m) return lm_error_set(LM_ERR_NOMEM, "lm_grammar_matcher_init: out of memory");
    if (g->n_triggers) {
        m->win = malloc(g->max_trigger);
        m->tmp = malloc(g->max_trigger + lm_tokenizer_max_piece(g->t) + 8);
        m->hist_win = malloc((size_t)LM_GRAMMAR_MAX_ROLLBACK * g->max_trigger);
        if (!m->win || !m->tmp || !m->hist_win) {
            lm_grammar_matcher_free(m);
            return lm_error_set(LM_ERR_NOMEM, "lm_grammar_matcher_init: out of memory");
        }
    }
    m->g = lm_grammar_ref(g);
    pthread_mutex_lock(&g->lock);
    // The caches only grow (state ids must stay valid while a matcher holds them); a grammar
    // kept for many requests restarts them when no matcher is alive and they are half full.
    if (g->live == 0 && (g->eng.exhausted || g->eng.n_nodes + g->eng.n_states + g->eng.n_pool > g->eng.max_nodes / 2 ||
                         g->eng.n_tables > g->eng.max_tables / 2)) {
        struct gm eng; // built aside, swapped in only whole
        struct gk masks;
        uint32_t start = GM_DEAD;
        enum lm_status st = gm_init(&eng, &g->g);
        if (st == LM_OK && (start = gm_start(&eng)) == GM_DEAD) st = LM_ERR_NOMEM, gm_free(&eng);
        if (st == LM_OK && (st = gk_init(&masks, &g->eng, g->trie)) != LM_OK) gm_free(&eng); // keeps only the address
        if (st == LM_OK) {
            gk_free(&g->masks);
            gm_free(&g->eng);
            g->eng = eng, g->masks = masks, g->start = start;
        }
        if (st != LM_OK) {
            pthread_mutex_unlock(&g->lock);
            lm_grammar_free(g);
            m->g = NULL;
            lm_grammar_matcher_free(m);
            return lm_error_set(LM_ERR_NOMEM, "lm_grammar_matcher_init: out of memory restarting the grammar's caches");
        }
    }
    g->live++;
    pthread_mutex_unlock(&g->lock);
    m->state = g->start;
    m->active = g->n_triggers == 0;
    *out = m;
    return LM_OK;
}

void lm_grammar_matcher_free(struct lm_grammar_matcher *m) {
    if (!m) return;
    if (m->g) {
        pthread_mutex_lock(&m->g->lock);
        m->g->live--;
        pthread_mutex_unlock(&m->g->lock);
    }
    lm_grammar_free(m->g);
    free(m->win), free(m->tmp), free(m->hist_win);
    free(m);
}

void lm_grammar_matcher_fill_mask(struct lm_grammar_matcher *m, uint32_t *bits) {
    struct lm_grammar *g = m->g;
    if (!m->active) {
        int32_t nv = g->trie->n_vocab;
        memset(bits, 0xFF, (size_t)(nv / 32) * sizeof *bits);
        if (nv & 31) bits[nv / 32] = (1u << (nv & 31)) - 1;
        return;
    }
    pthread_mutex_lock(&g->lock);
    gk_fill(&g->masks, m->state, bits);
    pthread_mutex_unlock(&g->lock);
}

// The state after feeding n bytes from s (GM_DEAD if one is refused); lock held.
static uint32_t feed(struct lm_grammar *g, uint32_t s, const uint8_t *b, size_t n) {
    g->eng.overflow = false;
    for (size_t i = 0; i < n && s != GM_DEAD; i++) s = gm_next(&g->eng, s, b[i]);
    return s;
}

static void push_hist(struct lm_grammar_matcher *m) {
    struct lm_grammar_hist *h = &m->hist[m->head];
    h->state = m->state, h->active = m->active, h->n_win = m->n_win;
    if (m->hist_win) memcpy(m->hist_win + (size_t)m->head * m->g->max_trigger, m->win, m->n_win);
    m->head = (m->head + 1) % LM_GRAMMAR_MAX_ROLLBACK;
    if (m->n_hist < LM_GRAMMAR_MAX_ROLLBACK) m->n_hist++;
}

// Lazy grammar before its trigger: appends the token's text (special tokens as text) and
// starts matching at the first trigger found. false: the text from the trigger on is refused.
static bool accept_lazy(struct lm_grammar_matcher *m, int32_t token) {
    struct lm_grammar *g = m->g;
    size_t cap = g->max_trigger + lm_tokenizer_max_piece(g->t) + 8;
    memcpy(m->tmp, m->win, m->n_win);
    size_t n = m->n_win + lm_token_to_piece(g->t, token, (char *)m->tmp + m->n_win, cap - m->n_win, true);
    if (n > cap) n = cap;
    size_t best = SIZE_MAX;
    for (int32_t i = 0; i < g->n_triggers; i++) {
        uint32_t l = g->trigger_len[i];
        for (size_t p = 0; p + l <= n && p < best; p++)
            if (!memcmp(m->tmp + p, g->triggers[i], l)) { best = p; break; }
    }
    if (best == SIZE_MAX) {
        push_hist(m);
        size_t keep = g->max_trigger - 1 < n ? g->max_trigger - 1 : n;
        memmove(m->win, m->tmp + n - keep, keep);
        m->n_win = (uint32_t)keep;
        return true;
    }
    pthread_mutex_lock(&g->lock);
    uint32_t s = feed(g, g->start, m->tmp + best, n - best);
    pthread_mutex_unlock(&g->lock);
    if (s == GM_DEAD) return false;
    push_hist(m);
    m->active = true, m->state = s, m->n_win = 0;
    return true;
}

bool lm_grammar_matcher_accept(struct lm_grammar_matcher *m, int32_t token) {
    struct lm_grammar *g = m->g;
    if (token < 0 || token >= g->trie->n_vocab) return false;
    if (!m->active) return accept_lazy(m, token);
    bool ok;
    pthread_mutex_lock(&g->lock);
    const struct gm_state *st = &g->eng.states[m->state];
    if (g->t->attr[token] & LM_TOK_FLAG_EOG) {
        ok = st->need == 0 && (st->flags & GM_CAN_END);
        if (ok) push_hist(m);
    } else if (!g->trie->usable[token]) {
        ok = false;
    } else {
        char buf[1024];
        size_t n = lm_token_to_piece(g->t, token, buf, sizeof buf, false);
        uint32_t s = GM_DEAD;
        if (n <= sizeof buf) {
            s = feed(g, m->state, (const uint8_t *)buf, n);
        } else { // a piece longer than the buffer
            char *big = malloc(n);
            if (big) {
                lm_token_to_piece(g->t, token, big, n, false);
                s = feed(g, m->state, (const uint8_t *)big, n);
                free(big);
            }
        }
        ok = s != GM_DEAD;
        if (ok) push_hist(m), m->state = s;
    }
    pthread_mutex_unlock(&g->lock);
    return ok;
}

bool lm_grammar_matcher_can_end(const struct lm_grammar_matcher *m) {
    if (!m->active) return true;
    pthread_mutex_lock(&m->g->lock);
    const struct gm_state *st = &m->g->eng.states[m->state];
    bool r = st->need == 0 && (st->flags & GM_CAN_END);
    pthread_mutex_unlock(&m->g->lock);
    return r;
}

bool lm_grammar_matcher_is_done(const struct lm_grammar_matcher *m) {
    if (!m->active) return false;
    pthread_mutex_lock(&m->g->lock);
    const struct gm_state *st = &m->g->eng.states[m->state];
    bool r = st->need == 0 && st->n == 1 && m->g->eng.pool[st->off] == GM_BOTTOM;
    pthread_mutex_unlock(&m->g->lock);
    return r;
}

int32_t lm_grammar_matcher_forced(struct lm_grammar_matcher *m, int32_t *out, int32_t max) {
    if (!m->active || max <= 0 || !out) return 0;
    pthread_mutex_lock(&m->g->lock);
    int32_t n = gk_forced(&m->g->masks, m->state, out, max);
    pthread_mutex_unlock(&m->g->lock);
    return n;
}

bool lm_grammar_matcher_rollback(struct lm_grammar_matcher *m, int32_t n) {
    if (n < 0 || n > m->n_hist) return false;
    if (n == 0) return true;
    m->head = (m->head - n + LM_GRAMMAR_MAX_ROLLBACK) % LM_GRAMMAR_MAX_ROLLBACK;
    m->n_hist -= n;
    const struct lm_grammar_hist *h = &m->hist[m->head];
    m->state = h->state, m->active = h->active, m->n_win = h->n_win;
    if (m->hist_win) memcpy(m->win, m->hist_win + (size_t)m->head * m->g->max_trigger, m->n_win);
    return true;
}
