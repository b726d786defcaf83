// Token masks (mask.h): a stack's core is walked over the whole trie once per grammar; a new
// state ORs its cores' sets and walks only their "pop nodes" (inside a JSON string: tokens with
// a closing quote and more) from the state below the cut; masks are then cached per state.
#define _POSIX_C_SOURCE 200809L
#include "grammar/mask.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define GK_MAX_CUT_STACKS 16
#define GK_MAX_CORES 2048 // 64 MB of accepted-token sets at 262k tokens

// A token set kept in a cache: sparse (n token ids) when small, else the full bitset, so the
// many narrow sets (a state after "{" allows a few tokens) cost no 32 KB page-faulting copy.
struct gk_set {
    uint32_t *v;
    uint32_t n;             // ids when sparse; words otherwise
    bool sparse;
};
#define GK_SPARSE 2048      // ids: 8 KB, a quarter of the bitset at 262k tokens

struct gk_core {
    struct gk_set acc;      // tokens accepted without leaving the core
    uint32_t *pops;         // pop nodes
    uint32_t n_pops;
};

// ---------------------------------------------------------------- the shared trie

static pthread_mutex_t trie_lock = PTHREAD_MUTEX_INITIALIZER;
#define TRIE_CACHE 4
static struct gk_trie *trie_cache[TRIE_CACHE]; // most recent first; each holds one reference

// Four independent multiply lanes: about 0.2 ms over the 3.5 MB of a 262k vocabulary.
static uint64_t mix(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t l[4] = {h, h ^ 0x9E3779B97F4A7C15ull, h ^ 0xC2B2AE3D27D4EB4Full, h ^ 0x165667B19E3779F9ull};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int j = 0; j < 4; j++) {
            uint64_t v;
            memcpy(&v, s + i + 8 * j, 8);
            l[j] = (l[j] ^ v) * 0x9E3779B97F4A7C15ull;
            l[j] ^= l[j] >> 29;
        }
    for (; i < n; i++) l[0] = (l[0] ^ s[i]) * 0x100000001B3ull;
    uint64_t r = n;
    for (int j = 0; j < 4; j++) r = (r ^ l[j]) * 0xBF58476D1CE4E5B9ull, r ^= r >> 31;
    return r;
}

static uint64_t fingerprint(const struct lm_tokenizer *t) {
    uint64_t h = mix(0xCBF29CE484222325ull, &t->n_vocab, sizeof t->n_vocab);
    h = mix(h, &t->kind, sizeof t->kind);
    h = mix(h, t->off, ((size_t)t->n_vocab + 1) * sizeof *t->off);
    h = mix(h, t->attr, (size_t)t->n_vocab * sizeof *t->attr);
    return mix(h, t->blob, t->off[t->n_vocab]);
}

static void trie_free(struct gk_trie *tr) {
    if (!tr) return;
    free(tr->byte), free(tr->depth), free(tr->end), free(tr->tok), free(tr->ids), free(tr->eog), free(tr->usable);
    free(tr->sub), free(tr->sub_flags);
    free(tr);
}

static const char *sort_blob;
static const uint32_t *sort_off;
static const uint16_t *sort_attr;
// By piece, then byte-fallback tokens after the others (forced runs pick the first token of
// a node: "{" rather than <0x7B>), then by id.
static int cmp_piece(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = sort_off[x + 1] - sort_off[x], ly = sort_off[y + 1] - sort_off[y];
    int c = memcmp(sort_blob + sort_off[x], sort_blob + sort_off[y], lx < ly ? lx : ly);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    int bx = (sort_attr[x] & LM_TOK_ATTR_BYTE) != 0, by = (sort_attr[y] & LM_TOK_ATTR_BYTE) != 0;
    if (bx != by) return bx - by;
    return x < y ? -1 : x > y;
}

// Per node, what its subtree below holds: the ASCII bytes, and whether any byte is non-ASCII
// or breaks UTF-8 (decoded along each path as the walk does). A walk in a state that loops on
// all of them accepts the whole subtree without visiting it.
static bool summarize(struct gk_trie *tr) {
    static const uint32_t umin[5] = {0, 0, 0x80, 0x800, 0x10000}, umax[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    uint32_t n = tr->n, *parent = malloc((size_t)n * sizeof *parent), *pst = malloc(65537 * sizeof *pst);
    uint32_t *dec = malloc(65537 * sizeof *dec);
    tr->sub = calloc(n, sizeof *tr->sub);
    tr->sub_flags = calloc(n, 1);
    uint8_t *own = calloc(n, 1);
    bool ok = parent && pst && dec && tr->sub && tr->sub_flags && own;
    if (ok) {
        pst[0] = 0, dec[0] = 0; // per depth: node, decoder state (v << 8 | need << 4 | len, or 0xFF bad)
        for (uint32_t i = 1; i < n; i++) {
            uint32_t d = tr->depth[i], pd = dec[d - 1], nd = 0;
            uint8_t b = tr->byte[i];
            parent[i] = pst[d - 1], pst[d] = i;
            if (pd == 0xFF) {
                nd = 0xFF;
            } else if (pd == 0) {
                if (b >= 0x80) {
                    uint32_t len = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
                    nd = 0xFF;
                    if (len) {
                        uint32_t v = len == 2 ? (b & 0x1Fu) : len == 3 ? (b & 0x0Fu) : (b & 0x07u), need = len - 1;
                        uint32_t lo = v << (6 * need), hi = lo | ((1u << (6 * need)) - 1);
                        if (hi >= umin[len] && lo <= umax[len]) nd = v << 8 | need << 4 | len;
                    }
                }
            } else {
                uint32_t v = pd >> 8, need = (pd >> 4) & 15, len = pd & 15;
                nd = 0xFF;
                if ((b & 0xC0) == 0x80) {
                    v = v << 6 | (b & 0x3Fu), need--;
                    uint32_t lo = v << (6 * need), hi = lo | ((1u << (6 * need)) - 1);
                    if (hi >= umin[len] && lo <= umax[len]) nd = need ? (v << 8 | need << 4 | len) : 0;
                }
            }
            dec[d] = nd;
            own[i] = (uint8_t)((b >= 0x80 ? 1 : 0) | (nd == 0xFF ? 2 : 0));
        }
        for (uint32_t i = n; i-- > 1;) { // children before parents: fold into the parent
            uint32_t p = parent[i];
            for (int w = 0; w < 4; w++) tr->sub[p][w] |= tr->sub[i][w];
            if (tr->byte[i] < 0x80) tr->sub[p][tr->byte[i] >> 5] |= 1u << (tr->byte[i] & 31);
            tr->sub_flags[p] |= tr->sub_flags[i] | own[i];
        }
    }
    free(parent), free(pst), free(dec), free(own);
    return ok;
}

static enum lm_status trie_build(struct gk_trie **out, const struct lm_tokenizer *t) {
    const int32_t nv = t->n_vocab;
    struct gk_trie *tr = calloc(1, sizeof *tr);
    uint32_t *poff = malloc(((size_t)nv + 1) * sizeof *poff);
    size_t cap = (size_t)t->off[nv] * 2 + 64, used = 0;
    char *blob = malloc(cap), buf[1 << 16];
    int32_t *order = malloc(((size_t)nv + 1) * sizeof *order);
    enum lm_status st = LM_ERR_NOMEM;
    if (!tr || !poff || !blob || !order || !(tr->usable = calloc((size_t)nv + 1, 1)) ||
        !(tr->eog = malloc(((size_t)nv + 1) * sizeof *tr->eog)))
        goto fail;
    tr->n_vocab = nv;
    int32_t n_use = 0;
    for (int32_t i = 0; i < nv; i++) {
        poff[i] = (uint32_t)used;
        uint16_t a = t->attr[i];
        if (a & LM_TOK_FLAG_EOG) { tr->eog[tr->n_eog++] = i; continue; }
        if (a & (LM_TOK_ATTR_CONTROL | LM_TOK_ATTR_UNKNOWN | LM_TOK_ATTR_UNUSED)) continue;
        size_t k = lm_token_to_piece(t, i, buf, sizeof buf, false);
        if (k == 0 || k > 65535) continue; // an empty piece can never advance; a huge one is refused
        if (used + k > cap) {
            char *nb = realloc(blob, cap = 2 * (used + k));
            if (!nb) goto fail;
            blob = nb;
        }
        memcpy(blob + used, buf, k);
        used += k;
        tr->usable[i] = 1;
        order[n_use++] = i;
    }
    poff[nv] = (uint32_t)used;
    // poff[i + 1] - poff[i] is the piece length of usable i (unusable ones have none)
    sort_blob = blob, sort_off = poff, sort_attr = t->attr; // under trie_lock
    qsort(order, (size_t)n_use, sizeof *order, cmp_piece);
    // nodes: at most one per piece byte, plus the root
    size_t maxn = used + 1;
    tr->byte = malloc(maxn);
    tr->depth = malloc(maxn * sizeof *tr->depth);
    tr->end = malloc(maxn * sizeof *tr->end);
    tr->tok = calloc(maxn + 1, sizeof *tr->tok);
    tr->ids = malloc(((size_t)n_use + 1) * sizeof *tr->ids);
    uint32_t *path = malloc(65537 * sizeof *path), *open = malloc(65537 * sizeof *open);
    if (!tr->byte || !tr->depth || !tr->end || !tr->tok || !tr->ids || !path || !open) {
        free(path), free(open);
        goto fail;
    }
    uint32_t n = 1, n_open = 1;
    tr->byte[0] = 0, tr->depth[0] = 0, path[0] = 0, open[0] = 0;
    const char *prev = NULL;
    uint32_t lprev = 0;
    for (int32_t k = 0; k < n_use; k++) {
        int32_t id = order[k];
        const char *s = blob + poff[id];
        uint32_t l = poff[id + 1] - poff[id], lcp = 0;
        while (prev && lcp < l && lcp < lprev && s[lcp] == prev[lcp]) lcp++;
        for (uint32_t d = lcp + 1; d <= l; d++) {
            while (n_open && tr->depth[open[n_open - 1]] >= d) tr->end[open[--n_open]] = n;
            tr->byte[n] = (uint8_t)s[d - 1], tr->depth[n] = (uint16_t)d;
            path[d] = n, open[n_open++] = n;
            n++;
        }
        if (l > tr->max_depth) tr->max_depth = l;
        tr->tok[path[l] + 1]++; // counts, prefix-summed below
        tr->ids[k] = id;
        prev = s, lprev = l;
    }
    while (n_open) tr->end[open[--n_open]] = n;
    for (uint32_t i = 0; i < n; i++) tr->tok[i + 1] += tr->tok[i];
    tr->n = n;
    if (!summarize(tr)) {
        free(path), free(open);
        goto fail;
    }
    free(path), free(open), free(poff), free(blob), free(order);
    tr->t = t;
    *out = tr;
    return LM_OK;
fail:
    free(poff), free(blob), free(order);
    trie_free(tr);
    return st == LM_ERR_NOMEM ? lm_error_set(LM_ERR_NOMEM, "grammar: out of memory building the vocabulary trie") : st;
}

// A cheap check that a tokenizer at a known address is still the vocabulary it was: every
// 61st token's text and attributes (about 60 KB at 262k tokens).
static uint64_t sample(const struct lm_tokenizer *t) {
    uint64_t h = (uint64_t)t->n_vocab * 0x9E3779B97F4A7C15ull;
    for (int32_t i = 0; i < t->n_vocab; i += 61) {
        h = mix(h, t->blob + t->off[i], t->off[i + 1] - t->off[i]);
        h = mix(h, &t->attr[i], sizeof t->attr[i]);
    }
    return h;
}

enum lm_status gk_trie_get(struct gk_trie **out, const struct lm_tokenizer *t) {
    uint64_t smp = sample(t), fp = 0;
    pthread_mutex_lock(&trie_lock);
    // the same tokenizer again (the common case: one model per process), then the same vocabulary
    // at another address (a second model with the same tokenizer) by the full fingerprint
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) fp = fingerprint(t);
        for (int i = 0; i < TRIE_CACHE; i++) {
            struct gk_trie *tr = trie_cache[i];
            bool same = tr && tr->n_vocab == t->n_vocab &&
                        (pass == 0 ? tr->t == t && tr->blob == t->blob && tr->off == t->off && tr->sample == smp
                                   : tr->fingerprint == fp);
            if (!same) continue;
            memmove(trie_cache + 1, trie_cache, (size_t)i * sizeof *trie_cache); // to the front
            trie_cache[0] = tr;
            tr->refs++;
            tr->t = t, tr->blob = t->blob, tr->off = t->off, tr->sample = smp;
            pthread_mutex_unlock(&trie_lock);
            *out = tr;
            return LM_OK;
        }
    }
    struct gk_trie *tr;
    enum lm_status st = trie_build(&tr, t);
    if (st == LM_OK) {
        tr->fingerprint = fp, tr->sample = smp, tr->blob = t->blob, tr->off = t->off;
        tr->refs = 2; // the caller's and the cache's
        if (trie_cache[TRIE_CACHE - 1] && --trie_cache[TRIE_CACHE - 1]->refs == 0) trie_free(trie_cache[TRIE_CACHE - 1]);
        memmove(trie_cache + 1, trie_cache, (TRIE_CACHE - 1) * sizeof *trie_cache);
        trie_cache[0] = tr;
        *out = tr;
    }
    pthread_mutex_unlock(&trie_lock);
    return st;
}

void gk_trie_put(struct gk_trie *tr) {
    if (!tr) return;
    pthread_mutex_lock(&trie_lock);
    if (--tr->refs == 0) trie_free(tr);
    pthread_mutex_unlock(&trie_lock);
}

// ---------------------------------------------------------------- walks

struct u32vec { uint32_t *v; uint32_t n, cap; };

static void vec_push(struct u32vec *v, uint32_t x) {
    if (v->n == v->cap) {
        uint32_t c = v->cap ? 2 * v->cap : 64;
        uint32_t *n = realloc(v->v, (size_t)c * sizeof *n);
        if (!n) return; // a lost pop node only loses tokens: masks stay sound (never too wide)
        v->v = n, v->cap = c;
    }
    v->v[v->n++] = x;
}

// Whether complete state s stays s over every byte below trie node i (so it accepts all of
// its tokens): its ASCII self-loops cover the subtree's ASCII bytes, and any non-ASCII there is
// valid UTF-8 that s also loops on. Not when s holds a hole and pop nodes are being collected.
static bool absorbs(struct gm *m, uint32_t s, const struct gk_trie *tr, uint32_t i, bool pops) {
    struct gm_state *st = &m->states[s];
    if (st->need || (pops && (st->flags & GM_HAS_HOLE)) || (tr->sub_flags[i] & 2)) return false;
    if (!st->loop_known) {
        uint8_t c = tr->byte[i + 1]; // a necessary condition first: no loops computed for structure
        if (c >= 0x80 || gm_next(m, s, c) != s) return false;
        uint32_t loop[4] = {0};
        for (uint32_t b = 0; b < 128; b++)
            if (gm_next(m, s, (uint8_t)b) == s) loop[b >> 5] |= 1u << (b & 31);
        st = &m->states[s]; // gm_next may move the states
        memcpy(st->loop, loop, sizeof loop);
        st->loop_known = 1;
    }
    for (int w = 0; w < 4; w++)
        if (tr->sub[i][w] & ~st->loop[w]) return false;
    return !(tr->sub_flags[i] & 1) || gm_hi(m, s) == s;
}

// Walks the subtree below trie node from, starting in state s0: sets the bits of the tokens
// accepted; pops (if not NULL) collects the nodes where a state holds GM_HOLE with bytes left.
// UTF-8 is decoded here while the state is uniform over non-ASCII (gm_hi): a multi-byte
// character is then one transition, and the many partial-sequence states never exist.
static void walk(struct gk *k, uint32_t s0, uint32_t from, uint32_t *bits, struct u32vec *pops) {
    static const uint32_t umin[5] = {0, 0, 0x80, 0x800, 0x10000}, umax[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    const struct gk_trie *tr = k->tr;
    struct gm *m = k->m;
    uint32_t *st = k->walk, *dv = k->dec; // per depth: state; pending sequence v << 8 | need << 4 | len
    const uint32_t *restrict tok = tr->tok, *restrict end = tr->end;
    const int32_t *restrict ids = tr->ids;
    uint32_t *restrict out = bits;
    st[tr->depth[from]] = s0, dv[tr->depth[from]] = 0;
    uint64_t visited = 0;
    for (uint32_t i = from + 1, e = tr->end[from]; i < e;) {
        uint32_t d = tr->depth[i], s = st[d - 1], dec = dv[d - 1], nd = 0, nx;
        uint8_t b = tr->byte[i];
        visited++;
        if (dec == 0) {
            if (b < 0x80 || m->states[s].need) {
                nx = gm_next(m, s, b);
            } else {
                uint32_t h = gm_hi(m, s);
                if (h == GM_NOT_UNIFORM) {
                    nx = gm_next(m, s, b);
                } else {
                    uint32_t len = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
                    nx = GM_DEAD;
                    if (h != GM_DEAD && len) {
                        uint32_t v = len == 2 ? (b & 0x1Fu) : len == 3 ? (b & 0x0Fu) : (b & 0x07u), need = len - 1;
                        uint32_t lo = v << (6 * need), hi = lo | ((1u << (6 * need)) - 1);
                        if (hi >= umin[len] && lo <= umax[len]) nx = s, nd = v << 8 | need << 4 | len;
                    }
                }
            }
        } else {
            uint32_t v = dec >> 8, need = (dec >> 4) & 15, len = dec & 15;
            nx = (b & 0xC0) == 0x80 ? s : GM_DEAD;
            v = v << 6 | (b & 0x3Fu), need--;
            uint32_t lo = v << (6 * need), hi = lo | ((1u << (6 * need)) - 1);
            if (nx != GM_DEAD && (hi < umin[len] || lo > umax[len])) nx = GM_DEAD;
            if (nx != GM_DEAD && need == 0) nx = m->states[s].hi; // known uniform and alive
            else nd = v << 8 | need << 4 | len;
        }
        if (nx == GM_DEAD) {
            i = tr->end[i];
            continue;
        }
        st[d] = nx, dv[d] = nd;
        for (uint32_t t = tok[i]; t < tok[i + 1]; t++) out[ids[t] >> 5] |= 1u << (ids[t] & 31);
        if (!nd && tr->end[i] > i + 16 && absorbs(m, nx, tr, i, pops != NULL)) { // whole subtree accepted
            for (uint32_t t = tok[i + 1], te = tok[end[i]]; t < te; t++) out[ids[t] >> 5] |= 1u << (ids[t] & 31);
            i = end[i];
            continue;
        }
        if (pops && !nd && (m->states[nx].flags & GM_HAS_HOLE) && tr->end[i] > i + 1) vec_push(pops, i);
        i++;
    }
    k->n_walked += visited;
}

static bool grow(void **v, uint32_t *cap, uint64_t need, size_t size, bool zero) {
    if (need <= *cap) return true;
    uint32_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    void *n = realloc(*v, (size_t)c * size);
    if (!n) return false;
    if (zero) memset((char *)n + (size_t)*cap * size, 0, (size_t)(c - *cap) * size);
    *v = n, *cap = c;
    return true;
}

// *out = bits (W words) as a set; false when out of memory.
static bool set_make(struct gk_set *out, const uint32_t *bits, uint32_t W) {
    uint32_t n = 0;
    for (uint32_t w = 0; w < W; w++) n += (uint32_t)__builtin_popcount(bits[w]);
    out->sparse = n <= GK_SPARSE;
    out->n = out->sparse ? n : W;
    out->v = malloc(((size_t)out->n + 1) * sizeof *out->v);
    if (!out->v) return false;
    if (!out->sparse) {
        memcpy(out->v, bits, W * sizeof *bits);
        return true;
    }
    uint32_t k = 0;
    for (uint32_t w = 0; w < W; w++)
        for (uint32_t b = bits[w]; b; b &= b - 1) out->v[k++] = w << 5 | (uint32_t)__builtin_ctz(b);
    return true;
}

static void set_or(uint32_t *bits, const struct gk_set *x) {
    if (x->sparse)
        for (uint32_t i = 0; i < x->n; i++) bits[x->v[i] >> 5] |= 1u << (x->v[i] & 31);
    else
        for (uint32_t w = 0; w < x->n; w++) bits[w] |= x->v[w];
}

// cut_core and cut_ctx for need nodes (new entries 0: not yet).
static bool grow_cut(struct gk *k, uint32_t need) {
    if (need <= k->cap_cut) return true;
    uint32_t c = k->cap_cut ? k->cap_cut : 256;
    while (c < need) c *= 2;
    uint32_t *a = realloc(k->cut_core, (size_t)c * sizeof *a);
    if (!a) return false;
    k->cut_core = a;
    uint32_t *b = realloc(k->cut_ctx, (size_t)c * sizeof *b);
    if (!b) return false;
    k->cut_ctx = b;
    memset(a + k->cap_cut, 0, (size_t)(c - k->cap_cut) * sizeof *a);
    memset(b + k->cap_cut, 0, (size_t)(c - k->cap_cut) * sizeof *b);
    k->cap_cut = c;
    return true;
}

// The core index of stack node s (computed and cached) and the state below its cut
// (GM_DEAD: the sentence's end). false when out of memory or a limit.
static bool cut(struct gk *k, uint32_t s, uint32_t *core, uint32_t *ctx) {
    struct gm *m = k->m;
    if (!grow_cut(k, m->n_nodes)) return false;
    if (k->cut_core[s]) {
        *core = k->cut_core[s] - 1, *ctx = k->cut_ctx[s] - 1;
        return true;
    }
    uint32_t chain[16], nc = 0, n = s, below;
    for (;;) {
        chain[nc++] = n;
        uint32_t ret = m->g->ret[m->pos_rule[m->nodes[n].pos]];
        below = m->nodes[n].parent;
        if (ret >= GB_RET_ROOT || nc == 16 || below == GM_BOTTOM || below == GM_HOLE) break;
        n = below;
    }
    uint32_t c = GM_HOLE;
    for (uint32_t j = nc; j-- > 0;) {
        c = gm_node(m, m->nodes[chain[j]].pos, c);
        if (c == UINT32_MAX) return false;
    }
    uint32_t x = below == GM_BOTTOM ? GM_DEAD : gm_state_of_node(m, below);
    if (!grow((void **)&k->core_of, &k->cap_core_of, m->n_nodes, sizeof *k->core_of, true)) return false;
    if (!k->core_of[c] && k->n_cores >= k->max_cores) return false; // memory bound: walk states whole
    if (!k->core_of[c]) { // a new core: walk the whole trie once
        if (!grow((void **)&k->cores, &k->cap_cores, k->n_cores + 1, sizeof *k->cores, false)) return false;
        struct gk_core *co = &k->cores[k->n_cores];
        memset(co, 0, sizeof *co);
        memset(k->tmp, 0, k->words * sizeof *k->tmp);
        uint32_t s0 = gm_state_of_node(m, c);
        struct u32vec pops = {0};
        if (s0 != GM_DEAD) walk(k, s0, 0, k->tmp, &pops);
        if (!set_make(&co->acc, k->tmp, k->words)) return free(pops.v), false;
        co->pops = pops.v, co->n_pops = pops.n;
        k->core_of[c] = ++k->n_cores;
    }
    // the arrays may have grown inside gm_node / gm_state_of_node
    if (!grow_cut(k, m->n_nodes)) return false;
    k->cut_core[s] = k->core_of[c], k->cut_ctx[s] = x + 1;
    *core = k->core_of[c] - 1, *ctx = x;
    return true;
}

enum lm_status gk_init(struct gk *k, struct gm *m, const struct gk_trie *tr) {
    memset(k, 0, sizeof *k);
    k->m = m, k->tr = tr;
    k->words = ((uint32_t)tr->n_vocab + 31) / 32;
    k->max_cache = 64u << 20; // bytes of cached masks
    k->max_cores = GK_MAX_CORES;
    k->walk = malloc(((size_t)tr->max_depth + 2) * sizeof *k->walk);
    k->dec = malloc(((size_t)tr->max_depth + 2) * sizeof *k->dec);
    k->tmp = malloc((size_t)k->words * sizeof *k->tmp);
    if (!k->walk || !k->dec || !k->tmp) {
        gk_free(k);
        return lm_error_set(LM_ERR_NOMEM, "grammar: out of memory");
    }
    return LM_OK;
}

void gk_free(struct gk *k) {
    if (!k) return;
    for (uint32_t i = 0; i < k->n_cores; i++) free(k->cores[i].acc.v), free(k->cores[i].pops);
    for (uint32_t i = 0; i < k->n_masks; i++) free(k->masks[i].v);
    free(k->cores), free(k->cut_core), free(k->cut_ctx), free(k->core_of), free(k->masks), free(k->mask_state);
    free(k->walk), free(k->dec), free(k->tmp);
    memset(k, 0, sizeof *k);
}

void gk_fill(struct gk *k, uint32_t s, uint32_t *bits) {
    struct gm *m = k->m;
    const uint32_t W = k->words;
    k->n_fills++;
    m->overflow = false;
    if (s == GM_DEAD) {
        memset(bits, 0, W * sizeof *bits);
        return;
    }
    if (m->states[s].mask) {
        k->n_hits++;
        const struct gk_set *x = &k->masks[m->states[s].mask - 1];
        if (x->sparse) memset(bits, 0, W * sizeof *bits), set_or(bits, x);
        else memcpy(bits, x->v, W * sizeof *bits);
        return;
    }
    memset(bits, 0, W * sizeof *bits);
    // Inside a UTF-8 sequence (rare), or with many stacks (an ambiguous grammar, where each
    // stack's new core would cost a trie walk): one walk of the whole state instead.
    bool cuts = m->states[s].need == 0 && m->states[s].n <= GK_MAX_CUT_STACKS;
    for (uint32_t i = 0; cuts && i < m->states[s].n; i++) {
        uint32_t n = m->pool[m->states[s].off + i], core, ctx;
        if (n == GM_BOTTOM || n == GM_HOLE) continue;
        if (!cut(k, n, &core, &ctx)) { cuts = false; break; }
        const struct gk_core *co = &k->cores[core];
        set_or(bits, &co->acc);
        if (ctx != GM_DEAD)
            for (uint32_t j = 0; j < co->n_pops; j++) walk(k, ctx, co->pops[j], bits, NULL);
    }
    if (!cuts) { // the plain walk of the whole state: exact, only slower
        memset(bits, 0, W * sizeof *bits);
        walk(k, s, 0, bits, NULL);
    }
    if (m->states[s].flags & GM_CAN_END)
        for (uint32_t i = 0; i < k->tr->n_eog; i++) bits[k->tr->eog[i] >> 5] |= 1u << (k->tr->eog[i] & 31);
    if (m->overflow) return; // not cached: a limit may have cut it short
    if (k->cache_bytes > k->max_cache) { // full: drop every cached mask (states recompute them)
        for (uint32_t i = 0; i < k->n_masks; i++) m->states[k->mask_state[i]].mask = 0, free(k->masks[i].v);
        k->n_masks = 0, k->cache_bytes = 0;
    }
    if (k->n_masks == k->cap_masks) {
        uint32_t c = k->cap_masks ? 2 * k->cap_masks : 256;
        struct gk_set *a = realloc(k->masks, (size_t)c * sizeof *a);
        if (!a) return;
        k->masks = a;
        uint32_t *b = realloc(k->mask_state, (size_t)c * sizeof *b);
        if (!b) return;
        k->mask_state = b, k->cap_masks = c;
    }
    if (!set_make(&k->masks[k->n_masks], bits, W)) return;
    k->cache_bytes += (size_t)k->masks[k->n_masks].n * 4 + 64;
    k->mask_state[k->n_masks] = s;
    m->states[s].mask = ++k->n_masks;
}

int32_t gk_forced(struct gk *k, uint32_t s, int32_t *out, int32_t max) {
    struct gm *m = k->m;
    m->overflow = false;
    const struct gk_trie *tr = k->tr;
    uint8_t buf[256];
    uint32_t nb = 0, x = s;
    while (nb < sizeof buf && x != GM_DEAD && !(m->states[x].flags & GM_CAN_END)) {
        uint32_t live = 0, nxt = GM_DEAD;
        int b1 = -1;
        for (int b = 0; b < 256 && live < 2; b++) {
            uint32_t nx = gm_next(m, x, (uint8_t)b);
            if (nx != GM_DEAD) live++, b1 = b, nxt = nx;
        }
        if (live != 1) break;
        buf[nb++] = (uint8_t)b1;
        x = nxt;
    }
    int32_t n = 0;
    for (uint32_t p = 0; n < max && p < nb;) {
        uint32_t node = 0, best_len = 0;
        int32_t best = -1;
        for (uint32_t d = p; d < nb; d++) {
            uint32_t c = node + 1;
            while (c < tr->end[node] && tr->byte[c] != buf[d]) c = tr->end[c];
            if (c >= tr->end[node]) break;
            node = c;
            if (tr->tok[node] < tr->tok[node + 1]) best = tr->ids[tr->tok[node]], best_len = d - p + 1;
        }
        if (best < 0) break;
        out[n++] = best;
        p += best_len;
    }
    return n;
}
