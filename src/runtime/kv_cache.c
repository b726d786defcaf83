// KV cache (kv_cache.h): the block pool, per-sequence block tables, copy-on-write, the
// prefix index with LRU eviction, and the sequence operations (remove, copy, keep).
#include "runtime/kv_cache.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/status.h"

// The parent of a sequence's first block: one root per layout, so chains of different
// models never meet in the index.
static inline struct lm_kv_link kv_root(int lay) { return (struct lm_kv_link){-1 - lay, 0}; }

// ================================================================ hashing

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// The index hash of one block: its parent's identity and its tokens under the pool's key.
// It only places the block in the table; a match compares parent and tokens exactly.
static uint64_t block_hash(const struct lm_kv_cache *kv, struct lm_kv_link parent,
                           const int32_t *tok) {
    if (kv->test_hash_collide) return 0;
    uint64_t h = mix64(kv->hash_key ^ ((uint64_t)(uint32_t)parent.blk << 32 | parent.gen));
    for (int i = 0; i < LM_KV_BLOCK; i++) h = mix64(h ^ kv->hash_key ^ (uint64_t)(uint32_t)tok[i]);
    return h;
}

// A per-pool secret: the kernel's randomness, or the clock and the pool's address if the
// kernel gives none.
static uint64_t hash_key_new(const void *salt) {
    uint64_t k = 0;
    if (getrandom(&k, sizeof k, GRND_NONBLOCK) != (ssize_t)sizeof k) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        k = mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)salt);
    }
    return k;
}

// ================================================================ block lists + index

static void lru_unlink(struct lm_kv_cache *kv, int32_t b) {
    kv->lru_next[kv->lru_prev[b]] = kv->lru_next[b];
    kv->lru_prev[kv->lru_next[b]] = kv->lru_prev[b];
    kv->n_evictable--;
}

static void lru_push_tail(struct lm_kv_cache *kv, int32_t b) {
    const int32_t s = kv->n_blocks; // sentinel
    kv->lru_prev[b] = kv->lru_prev[s];
    kv->lru_next[b] = s;
    kv->lru_next[kv->lru_prev[s]] = b;
    kv->lru_prev[s] = b;
    kv->n_evictable++;
}

// The registered block holding tok after parent, or -1.
static int32_t index_find(const struct lm_kv_cache *kv, uint64_t h, struct lm_kv_link parent,
                          const int32_t *tok) {
    for (uint32_t i = (uint32_t)h & kv->htab_mask;; i = (i + 1) & kv->htab_mask) {
        const int32_t b = kv->htab[i];
        if (b < 0) return -1;
        if (kv->hash[b] == h && kv->parent[b].blk == parent.blk && kv->parent[b].gen == parent.gen &&
            !memcmp(kv->btok + (size_t)b * LM_KV_BLOCK, tok, LM_KV_BLOCK * sizeof(int32_t)))
            return b;
    }
}

static void index_insert(struct lm_kv_cache *kv, int32_t b) {
    uint32_t i = (uint32_t)kv->hash[b] & kv->htab_mask;
    while (kv->htab[i] >= 0) i = (i + 1) & kv->htab_mask;
    kv->htab[i] = b;
}

// linear probing with backward-shift deletion (no tombstones)
static void index_remove(struct lm_kv_cache *kv, int32_t b) {
    uint32_t i = (uint32_t)kv->hash[b] & kv->htab_mask;
    while (kv->htab[i] != b) i = (i + 1) & kv->htab_mask;
    kv->htab[i] = -1;
    for (uint32_t j = (i + 1) & kv->htab_mask; kv->htab[j] >= 0; j = (j + 1) & kv->htab_mask) {
        const uint32_t home = (uint32_t)kv->hash[kv->htab[j]] & kv->htab_mask;
        // the entry at j may move to the hole at i unless its home lies in (i, j]
        const bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (stays) continue;
        kv->htab[i] = kv->htab[j];
        kv->htab[j] = -1;
        i = j;
    }
}

// ================================================================ blocks

static int32_t blk_alloc(struct lm_kv_cache *kv) {
    int32_t b;
    if (kv->n_free > 0) {
        b = kv->free_stack[--kv->n_free];
    } else if (kv->n_evictable > 0) { // least recently used cached block
        b = kv->lru_next[kv->n_blocks];
        lru_unlink(kv, b);
        index_remove(kv, b);
        kv->cached[b] = false;
        kv->gen[b]++; // its children in the index no longer match under this block
        kv->evictions++;
    } else {
        return -1;
    }
    kv->ref[b] = 1;
    return b;
}

static void blk_acquire(struct lm_kv_cache *kv, int32_t b) {
    if (kv->ref[b]++ == 0) lru_unlink(kv, b); // a cached block nobody held
}

static void blk_release(struct lm_kv_cache *kv, int32_t b) {
    LM_ASSERT(kv->ref[b] > 0);
    if (--kv->ref[b] > 0) return;
    if (kv->cached[b]) lru_push_tail(kv, b);
    else kv->free_stack[kv->n_free++] = b;
}

// ================================================================ init / free

const char *lm_kv_type_name(enum lm_kv_type t) {
    switch (t) {
    case LM_KV_F16: return "f16";
    case LM_KV_Q8_0: return "q8_0";
    }
    return NULL;
}

enum lm_status lm_kv_type_from_name(const char *s, enum lm_kv_type *out) {
    if (s && !strcmp(s, "f16")) *out = LM_KV_F16;
    else if (s && !strcmp(s, "q8_0")) *out = LM_KV_Q8_0;
    else return lm_error_set(LM_ERR_ARG, "kv cache type '%s': expected f16 or q8_0", s ? s : "(null)");
    return LM_OK;
}

static void seq_free(struct lm_kv_seq *s) {
    free(s->blocks);
    free(s->present);
    free(s->tokens);
    free(s->chain);
    const int32_t layout = s->layout;
    memset(s, 0, sizeof *s);
    s->first_hole = INT32_MAX;
    s->layout = layout;
}

void lm_kv_free(struct lm_kv_cache *kv) {
    if (kv->seqs)
        for (int32_t s = 0; s < kv->n_seq; s++) seq_free(&kv->seqs[s]);
    free(kv->seqs);
    free(kv->base);
    for (int l = 0; l < LM_KV_LAYOUTS_MAX; l++) {
        free(kv->lay[l].k_off);
        free(kv->lay[l].v_off);
    }
    free(kv->ref);
    free(kv->hash);
    free(kv->parent);
    free(kv->gen);
    free(kv->btok);
    free(kv->cached);
    free(kv->lru_prev);
    free(kv->lru_next);
    free(kv->free_stack);
    free(kv->htab);
    memset(kv, 0, sizeof *kv);
}

enum lm_status lm_kv_init(struct lm_kv_cache *kv, int32_t n_layer, int32_t kv_dim_k,
                          int32_t kv_dim_v, int32_t n_ctx, int32_t n_seq, int32_t kv_tokens,
                          bool prefix_cache) {
    const struct lm_kv_layout lay = {.n_layer = n_layer, .kv_dim_k = kv_dim_k, .kv_dim_v = kv_dim_v};
    return lm_kv_init_layouts(kv, &lay, 1, n_ctx, n_seq, kv_tokens, prefix_cache);
}

enum lm_status lm_kv_init_layouts(struct lm_kv_cache *kv, const struct lm_kv_layout *lays,
                                  int32_t n_lay, int32_t n_ctx, int32_t n_seq, int32_t kv_tokens,
                                  bool prefix_cache) {
    memset(kv, 0, sizeof *kv);
    if (n_lay < 1 || n_lay > LM_KV_LAYOUTS_MAX)
        return lm_error_set(LM_ERR_ARG, "kv cache: %d layouts (1 to %d)", n_lay, LM_KV_LAYOUTS_MAX);
    for (int32_t l = 0; l < n_lay; l++)
        if (lays[l].n_layer <= 0 || lays[l].kv_dim_k <= 0 || lays[l].kv_dim_v < 0 || n_ctx <= 0 ||
            n_seq <= 0 || kv_tokens <= 0)
            return lm_error_set(LM_ERR_ARG, "kv cache: invalid sizes (layout %d: layers %d, kv dims "
                                "%d/%d, n_ctx %d, sequences %d, pool tokens %d)", l, lays[l].n_layer,
                                lays[l].kv_dim_k, lays[l].kv_dim_v, n_ctx, n_seq, kv_tokens);
    int32_t head[LM_KV_LAYOUTS_MAX][2];
    for (int32_t l = 0; l < n_lay; l++) {
        const enum lm_kv_type t[2] = {lays[l].type_k, lays[l].type_v};
        const int32_t dim[2] = {lays[l].kv_dim_k, lays[l].kv_dim_v};
        for (int i = 0; i < 2; i++) {
            const int32_t h = i ? lays[l].head_v : lays[l].head_k;
            head[l][i] = h > 0 ? h : dim[i];
            if (!lm_kv_type_name(t[i]))
                return lm_error_set(LM_ERR_ARG, "kv cache: layout %d: %s type %d is not a KV cache "
                                    "type (f16, q8_0)", l, i ? "V" : "K", (int)t[i]);
            if (h < 0 || (dim[i] > 0 && dim[i] % head[l][i] != 0))
                return lm_error_set(LM_ERR_ARG, "kv cache: layout %d: %s rows of %d values are not "
                                    "whole heads of %d", l, i ? "V" : "K", dim[i], h);
            if (t[i] == LM_KV_Q8_0 && head[l][i] % 32 != 0)
                return lm_error_set(LM_ERR_ARG, "kv cache: layout %d: q8_0 %s heads of %d values (not "
                                    "a multiple of 32)", l, i ? "V" : "K", head[l][i]);
        }
    }
    const int32_t n_layer = lays[0].n_layer, kv_dim_k = lays[0].kv_dim_k, kv_dim_v = lays[0].kv_dim_v;
    kv->n_layouts = n_lay;
    kv->n_seq_layout = n_seq;
    n_seq *= n_lay;
    kv->n_ctx = n_ctx;
    kv->n_seq = n_seq;
    kv->prefix_cache = prefix_cache;
    kv->n_blocks = (int32_t)(((int64_t)kv_tokens + LM_KV_BLOCK - 1) / LM_KV_BLOCK);
    for (int32_t l = 0; l < n_lay; l++) {
        struct lm_kv_layout *L = &kv->lay[l];
        L->n_layer = lays[l].n_layer;
        L->kv_dim_k = lays[l].kv_dim_k;
        L->kv_dim_v = lays[l].kv_dim_v;
        L->type_k = lays[l].type_k;
        L->type_v = lays[l].type_v;
        L->head_k = head[l][0];
        L->head_v = head[l][1];
        L->k_off = calloc((size_t)L->n_layer, sizeof *L->k_off);
        L->v_off = calloc((size_t)L->n_layer, sizeof *L->v_off);
        if (!L->k_off || !L->v_off) goto nomem;
        // every layer's rows start on a 64-byte line (f16: kv_dim is a multiple of 16, so
        // whole lines already; q8_0 rows of 17 bytes per 16 values are rounded up); its heads'
        // rows follow one another (head-major: n_head_kv times LM_KV_BLOCK head rows)
        size_t off = 0;
        for (int i = 0; i < L->n_layer; i++) {
            L->k_off[i] = off;
            off += ((size_t)LM_KV_BLOCK * lm_kv_row_bytes(L->type_k, L->kv_dim_k) + 63) & ~(size_t)63;
            L->v_off[i] = off;
            off += ((size_t)LM_KV_BLOCK * lm_kv_row_bytes(L->type_v, L->kv_dim_v) + 63) & ~(size_t)63;
        }
        L->bytes = off;
        if (off > kv->block_bytes) kv->block_bytes = off;
    }
    // An odd number of 64-byte lines from one block to the next. Blocks are usually a power of
    // two or a multiple of 64 KB (Llama 3.2 1B: 512 KB), so a KV head's rows in every block fell
    // on the same cache sets and evicted one another between a chunk's scores and its p.v: one
    // line more spreads them over the sets (one thread's decode attention over 16k cells of the
    // 1B layout, bench/c/attn_depth_bench.c: 225 -> 118 ns a cell with rows of all heads).
    if ((kv->block_bytes / 64) % 2 == 0) kv->block_bytes += 64;
    const size_t nb = (size_t)kv->n_blocks;
    if (nb > SIZE_MAX / 2 / kv->block_bytes) goto nomem;
    kv->map_bytes = nb * kv->block_bytes;
    // Not cleared: a cell is read only after it was written, and untouched pages never
    // become resident, so memory grows with the blocks actually used (LIFO free list).
    kv->base = aligned_alloc(4096, (kv->map_bytes + 4095) / 4096 * 4096);
    kv->ref = calloc(nb, sizeof *kv->ref);
    kv->hash = calloc(nb, sizeof *kv->hash);
    kv->parent = calloc(nb, sizeof *kv->parent);
    kv->gen = calloc(nb, sizeof *kv->gen);
    kv->btok = calloc(nb * LM_KV_BLOCK, sizeof *kv->btok);
    kv->cached = calloc(nb, sizeof *kv->cached);
    kv->lru_prev = calloc(nb + 1, sizeof *kv->lru_prev);
    kv->lru_next = calloc(nb + 1, sizeof *kv->lru_next);
    kv->free_stack = calloc(nb, sizeof *kv->free_stack);
    uint32_t hcap = 16;
    while (hcap < 2 * nb) hcap *= 2;
    kv->htab = malloc(hcap * sizeof *kv->htab);
    kv->htab_mask = hcap - 1;
    kv->seqs = calloc((size_t)n_seq, sizeof *kv->seqs);
    if (!kv->base || !kv->ref || !kv->hash || !kv->parent || !kv->gen || !kv->btok || !kv->cached ||
        !kv->lru_prev || !kv->lru_next || !kv->free_stack || !kv->htab || !kv->seqs)
        goto nomem;
    memset(kv->htab, 0xff, hcap * sizeof *kv->htab);
    kv->hash_key = hash_key_new(kv);
    kv->lru_prev[nb] = kv->lru_next[nb] = (int32_t)nb;
    for (int32_t b = kv->n_blocks - 1; b >= 0; b--) kv->free_stack[kv->n_free++] = b;
    for (int32_t s = 0; s < n_seq; s++) {
        kv->seqs[s].first_hole = INT32_MAX;
        kv->seqs[s].layout = s / kv->n_seq_layout;
    }
    return LM_OK;
nomem:
    lm_kv_free(kv);
    return lm_error_set(LM_ERR_NOMEM, "kv cache: cannot allocate a pool of %d tokens (%d layers, kv "
                        "dims %d/%d, %d layouts, %d sequences)", kv_tokens, n_layer, kv_dim_k,
                        kv_dim_v, n_lay, n_seq);
}

// Grows a sequence's per-position arrays to hold positions [0, need).
static enum lm_status seq_reserve(struct lm_kv_cache *kv, int32_t seq, int32_t need) {
    struct lm_kv_seq *s = &kv->seqs[seq];
    if (need <= s->cap) return LM_OK;
    const int32_t unit = LM_KV_BLOCK > 64 ? LM_KV_BLOCK : 64;
    int64_t cap = s->cap ? s->cap : 256;
    while (cap < need) cap *= 2;
    const int64_t lim = ((int64_t)kv->n_ctx + unit - 1) / unit * unit;
    if (cap > lim) cap = lim;
    cap = (cap + unit - 1) / unit * unit;
    const size_t nbk = (size_t)cap / LM_KV_BLOCK, nw = (size_t)cap / 64;
    int32_t *blocks = realloc(s->blocks, nbk * sizeof *blocks);
    if (blocks) s->blocks = blocks;
    uint64_t *present = realloc(s->present, nw * sizeof *present);
    if (present) s->present = present;
    int32_t *tokens = realloc(s->tokens, (size_t)cap * sizeof *tokens);
    if (tokens) s->tokens = tokens;
    struct lm_kv_link *chain = realloc(s->chain, nbk * sizeof *chain);
    if (chain) s->chain = chain;
    if (!blocks || !present || !tokens || !chain)
        return lm_error_set(LM_ERR_NOMEM, "kv cache: cannot grow sequence %d to %lld positions", seq,
                            (long long)cap);
    const size_t obk = (size_t)s->cap / LM_KV_BLOCK, ow = (size_t)s->cap / 64;
    for (size_t i = obk; i < nbk; i++) s->blocks[i] = -1;
    memset(s->present + ow, 0, (nw - ow) * sizeof *present);
    s->cap = (int32_t)cap;
    return LM_OK;
}

// ================================================================ batch writes

static inline bool present_get(const struct lm_kv_seq *s, int32_t p) {
    return (s->present[p >> 6] >> (p & 63)) & 1;
}

// Blocks entry (seq, pos) needs if it is the first write of this batch to its block:
// a fresh block at a block start (or where a hole left none), a copy where the block is
// shared or registered (its content must stay as the other holders see it).
static int32_t needs_block(const struct lm_kv_cache *kv, const struct lm_kv_seq *s, int32_t pos) {
    const int32_t b = s->blocks[pos >> LM_KV_BLOCK_SHIFT];
    if (b < 0) return 1;
    return kv->ref[b] > 1 || kv->cached[b];
}

int32_t lm_kv_blocks_needed(const struct lm_kv_cache *kv, int32_t seq, int32_t n) {
    const struct lm_kv_seq *s = &kv->seqs[seq];
    if (n <= 0) return 0;
    const int32_t p0 = s->n_pos, p1 = s->n_pos + n; // positions [p0, p1)
    int32_t need = 0;
    if (p0 % LM_KV_BLOCK != 0) { // continues a block
        need += p0 < s->cap ? needs_block(kv, s, p0) : 1;
    }
    const int32_t first_new = (p0 + LM_KV_BLOCK - 1) / LM_KV_BLOCK;
    const int32_t last = (p1 - 1) / LM_KV_BLOCK;
    if (last >= first_new) need += last - first_new + 1;
    return need;
}

int32_t lm_kv_chunk_fit(const struct lm_kv_cache *kv, int32_t seq, int32_t want, int32_t avail) {
    if (lm_kv_blocks_needed(kv, seq, want) <= avail) return want;
    int32_t lo = 0, hi = want; // needed(lo) fits, needed(hi) does not
    while (hi - lo > 1) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (lm_kv_blocks_needed(kv, seq, mid) <= avail) lo = mid;
        else hi = mid;
    }
    return lo;
}

enum lm_status lm_kv_prepare(struct lm_kv_cache *kv, const struct lm_batch_entry *e, int32_t n,
                             size_t *k_row_off, size_t *v_row_off) {
    // capacities first (harmless if a later step refuses)
    for (int32_t i = 0; i < n; i++) {
        enum lm_status st = seq_reserve(kv, e[i].seq, e[i].pos + 1);
        if (st != LM_OK) return st;
    }
    // count: the first entry of a sequence that lands in a block decides for that block
    int32_t need = 0;
    for (int32_t i = 0; i < n; i++) {
        const struct lm_kv_seq *s = &kv->seqs[e[i].seq];
        const bool first_in_block = e[i].pos % LM_KV_BLOCK == 0 || e[i].pos == s->n_pos;
        if (first_in_block) need += needs_block(kv, s, e[i].pos);
    }
    if (need > lm_kv_blocks_available(kv))
        return lm_error_set(LM_ERR_KV_FULL,
                            "kv cache: the pool is full: the batch needs %d more blocks of %d "
                            "positions, %d are free (pool of %d blocks = %d tokens)",
                            need, LM_KV_BLOCK, lm_kv_blocks_available(kv), kv->n_blocks,
                            kv->n_blocks * LM_KV_BLOCK);
    for (int32_t i = 0; i < n; i++) {
        struct lm_kv_seq *s = &kv->seqs[e[i].seq];
        const int32_t bi = e[i].pos >> LM_KV_BLOCK_SHIFT;
        const bool first_in_block = e[i].pos % LM_KV_BLOCK == 0 || e[i].pos == s->n_pos;
        if (first_in_block && needs_block(kv, s, e[i].pos)) {
            const int32_t old = s->blocks[bi], nb = blk_alloc(kv);
            LM_ASSERT(nb >= 0); // counted above
            if (old >= 0) { // copy-on-write: the cells before pos keep their content
                memcpy(kv->base + (size_t)nb * kv->block_bytes,
                       kv->base + (size_t)old * kv->block_bytes, kv->lay[s->layout].bytes);
                blk_release(kv, old);
                kv->cow_copies++;
            }
            s->blocks[bi] = nb;
        }
        const size_t blk = (size_t)s->blocks[bi] * kv->block_bytes;
        const size_t row = (size_t)(e[i].pos & (LM_KV_BLOCK - 1));
        const struct lm_kv_layout *L = &kv->lay[s->layout];
        k_row_off[i] = blk + row * lm_kv_hrow_k(L);
        v_row_off[i] = blk + row * lm_kv_hrow_v(L);
    }
    // the batch's cells count as held from now on: attention reads them in this forward
    for (int32_t i = 0; i < n; i++) {
        struct lm_kv_seq *s = &kv->seqs[e[i].seq];
        s->tokens[e[i].pos] = e[i].token;
        s->present[e[i].pos >> 6] |= 1ull << (e[i].pos & 63);
    }
    return LM_OK;
}

// Registers the full blocks of s not yet in its chain (none past a hole). A block whose
// content the index holds already (the same tokens after the same parent) is not registered
// again: its link is the cached block, under which the sequence's next blocks register.
static void seq_register(struct lm_kv_cache *kv, struct lm_kv_seq *s) {
    while (s->n_chain < s->n_pos / LM_KV_BLOCK &&
           (int64_t)(s->n_chain + 1) * LM_KV_BLOCK <= s->first_hole) {
        const int32_t i = s->n_chain, b = s->blocks[i];
        s->n_chain++;
        if (!kv->prefix_cache) continue;
        if (kv->cached[b]) { // attached from the index (or registered by this sequence)
            s->chain[i] = (struct lm_kv_link){b, kv->gen[b]};
            continue;
        }
        const struct lm_kv_link parent = i ? s->chain[i - 1] : kv_root(s->layout);
        const int32_t *tok = s->tokens + (size_t)i * LM_KV_BLOCK;
        const uint64_t h = block_hash(kv, parent, tok);
        const int32_t dup = index_find(kv, h, parent, tok);
        if (dup >= 0) {
            s->chain[i] = (struct lm_kv_link){dup, kv->gen[dup]};
            continue;
        }
        kv->hash[b] = h;
        kv->parent[b] = parent;
        kv->gen[b]++;
        memcpy(kv->btok + (size_t)b * LM_KV_BLOCK, tok, LM_KV_BLOCK * sizeof(int32_t));
        kv->cached[b] = true;
        index_insert(kv, b);
        s->chain[i] = (struct lm_kv_link){b, kv->gen[b]};
    }
}

void lm_kv_commit(struct lm_kv_cache *kv, const struct lm_batch_entry *e, int32_t n) {
    for (int32_t i = 0; i < n; i++) kv->seqs[e[i].seq].n_pos = e[i].pos + 1;
    for (int32_t i = 0; i < n; i++)
        if (i + 1 == n || e[i + 1].seq != e[i].seq) seq_register(kv, &kv->seqs[e[i].seq]);
}

// ================================================================ sequence operations

static enum lm_status check_seq(const struct lm_kv_cache *kv, const char *fn, int32_t seq) {
    if (seq < 0 || seq >= kv->n_seq)
        return lm_error_set(LM_ERR_ARG, "%s: sequence %d out of range [0, %d)", fn, seq, kv->n_seq);
    return LM_OK;
}

static void present_clear(struct lm_kv_seq *s, int32_t p0, int32_t p1) {
    for (int32_t p = p0; p < p1;) {
        if ((p & 63) == 0 && p + 64 <= p1) {
            s->present[p >> 6] = 0;
            p += 64;
        } else {
            s->present[p >> 6] &= ~(1ull << (p & 63));
            p++;
        }
    }
}

enum lm_status lm_kv_seq_rm(struct lm_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1) {
    enum lm_status st = check_seq(kv, "kv seq_rm", seq);
    if (st != LM_OK) return st;
    struct lm_kv_seq *s = &kv->seqs[seq];
    if (p1 < 0) p1 = s->n_pos;
    if (p0 < 0 || p0 > p1 || p1 > s->n_pos)
        return lm_error_set(LM_ERR_ARG,
                            "kv seq_rm: range [%d, %d) is not within sequence %d's positions [0, %d)",
                            p0, p1, seq, s->n_pos);
    if (p0 == p1) return LM_OK;
    present_clear(s, p0, p1);
    // blocks wholly inside [p0, p1) are released; a truncation also drops the block
    // holding p0 if p0 starts it
    const int32_t b0 = (p0 + LM_KV_BLOCK - 1) / LM_KV_BLOCK;
    const int32_t b1 = p1 == s->n_pos ? (p1 + LM_KV_BLOCK - 1) / LM_KV_BLOCK : p1 / LM_KV_BLOCK;
    for (int32_t bi = b0; bi < b1; bi++)
        if (s->blocks[bi] >= 0) {
            blk_release(kv, s->blocks[bi]);
            s->blocks[bi] = -1;
        }
    if (s->n_chain > p0 / LM_KV_BLOCK) s->n_chain = p0 / LM_KV_BLOCK;
    if (p1 == s->n_pos) { // rollback / truncation: positions continue from p0
        s->n_pos = p0;
        if (s->first_hole >= p0) s->first_hole = INT32_MAX;
    } else if (p0 < s->first_hole) {
        s->first_hole = p0;
    }
    return LM_OK;
}

enum lm_status lm_kv_seq_cp(struct lm_kv_cache *kv, int32_t src, int32_t dst, int32_t n_pos) {
    enum lm_status st;
    if ((st = check_seq(kv, "kv seq_cp", src)) || (st = check_seq(kv, "kv seq_cp", dst))) return st;
    const struct lm_kv_seq *s = &kv->seqs[src];
    struct lm_kv_seq *d = &kv->seqs[dst];
    if (src == dst) return lm_error_set(LM_ERR_ARG, "kv seq_cp: source and destination are both %d", src);
    if (s->layout != d->layout)
        return lm_error_set(LM_ERR_ARG, "kv seq_cp: sequences %d and %d belong to different models "
                            "(KV layouts %d and %d)", src, dst, s->layout, d->layout);
    if (n_pos < 0) n_pos = s->n_pos;
    if (n_pos > s->n_pos)
        return lm_error_set(LM_ERR_ARG, "kv seq_cp: %d positions asked of sequence %d, which holds %d",
                            n_pos, src, s->n_pos);
    if (d->n_pos != 0)
        return lm_error_set(LM_ERR_ARG, "kv seq_cp: destination sequence %d holds %d positions; "
                            "remove them first", dst, d->n_pos);
    if (n_pos == 0) return LM_OK;
    if ((st = seq_reserve(kv, dst, n_pos)) != LM_OK) return st;
    const int32_t nbk = (n_pos + LM_KV_BLOCK - 1) / LM_KV_BLOCK;
    for (int32_t i = 0; i < nbk; i++) { // shared, no data copied (a write copies first)
        d->blocks[i] = s->blocks[i];
        if (d->blocks[i] >= 0) blk_acquire(kv, d->blocks[i]);
    }
    memcpy(d->present, s->present, (size_t)(n_pos + 63) / 64 * sizeof *d->present);
    if (n_pos & 63) d->present[n_pos >> 6] &= (1ull << (n_pos & 63)) - 1;
    memcpy(d->tokens, s->tokens, (size_t)n_pos * sizeof *d->tokens);
    d->n_chain = s->n_chain < n_pos / LM_KV_BLOCK ? s->n_chain : n_pos / LM_KV_BLOCK;
    memcpy(d->chain, s->chain, (size_t)d->n_chain * sizeof *d->chain);
    d->first_hole = s->first_hole < n_pos ? s->first_hole : INT32_MAX;
    d->n_pos = n_pos;
    return LM_OK;
}

enum lm_status lm_kv_seq_keep(struct lm_kv_cache *kv, int32_t seq) {
    enum lm_status st = check_seq(kv, "kv seq_keep", seq);
    if (st != LM_OK) return st;
    for (int32_t s = 0; s < kv->n_seq; s++)
        if (s != seq && kv->seqs[s].n_pos > 0) lm_kv_seq_rm(kv, s, 0, -1);
    return LM_OK;
}

// ================================================================ prefix cache

// Walks tokens[0, n) block by block through the index, each block under the one found
// before it, leaving at least one token uncovered; returns the number of blocks found,
// their ids in ids and their links in chain (either may be NULL).
static int32_t prefix_walk(const struct lm_kv_cache *kv, int lay, const int32_t *tokens, int32_t n,
                           int32_t *ids, struct lm_kv_link *chain) {
    if (!kv->prefix_cache) return 0;
    struct lm_kv_link parent = kv_root(lay);
    int32_t i = 0;
    for (; (int64_t)(i + 1) * LM_KV_BLOCK <= (int64_t)n - 1; i++) {
        const int32_t *tok = tokens + (size_t)i * LM_KV_BLOCK;
        const int32_t b = index_find(kv, block_hash(kv, parent, tok), parent, tok);
        if (b < 0) break;
        parent = (struct lm_kv_link){b, kv->gen[b]};
        if (ids) ids[i] = b;
        if (chain) chain[i] = parent;
    }
    return i;
}

int32_t lm_kv_prefix_probe(const struct lm_kv_cache *kv, int lay, const int32_t *tokens, int32_t n) {
    return prefix_walk(kv, lay, tokens, n, NULL, NULL) * LM_KV_BLOCK;
}

enum lm_status lm_kv_prefix_attach(struct lm_kv_cache *kv, int32_t seq, const int32_t *tokens,
                                   int32_t n, int32_t *n_attached) {
    *n_attached = 0;
    enum lm_status st = check_seq(kv, "kv prefix", seq);
    if (st != LM_OK) return st;
    struct lm_kv_seq *s = &kv->seqs[seq];
    if (s->n_pos != 0)
        return lm_error_set(LM_ERR_ARG, "kv prefix: sequence %d holds %d positions; a prefix "
                            "attaches to an empty sequence", seq, s->n_pos);
    if (n < 0 || n > kv->n_ctx)
        return lm_error_set(LM_ERR_ARG, "kv prefix: %d tokens for a context of %d", n, kv->n_ctx);
    kv->prefix_queries++;
    kv->prefix_query_tokens += (uint64_t)n;
    const int32_t nb = prefix_walk(kv, s->layout, tokens, n, NULL, NULL);
    if (nb <= 0) return LM_OK;
    const int32_t np = nb * LM_KV_BLOCK;
    if ((st = seq_reserve(kv, seq, np)) != LM_OK) return st;
    prefix_walk(kv, s->layout, tokens, n, s->blocks, s->chain);
    for (int32_t i = 0; i < nb; i++) blk_acquire(kv, s->blocks[i]);
    memcpy(s->tokens, tokens, (size_t)np * sizeof *tokens);
    for (int32_t p = 0; p < np; p += 64)
        s->present[p >> 6] = np - p >= 64 ? ~0ull : (1ull << (np - p)) - 1;
    s->n_chain = nb;
    s->n_pos = np;
    kv->prefix_hit_tokens += (uint64_t)np;
    *n_attached = np;
    return LM_OK;
}

// ================================================================ consistency check

bool lm_kv_check(const struct lm_kv_cache *kv) {
    const int32_t nb = kv->n_blocks;
    int32_t *refs = calloc((size_t)nb, sizeof *refs);
    int8_t *lay = malloc((size_t)nb); // the layout of a block's holders: one model's K/V
    bool ok = refs != NULL && lay != NULL;
#define FAIL(...)                                 \
    do {                                          \
        lm_error_set(LM_ERR_STATE, __VA_ARGS__);  \
        ok = false;                               \
        goto done;                                \
    } while (0)
    if (!ok) FAIL("kv check: out of memory");
    for (int32_t q = 0; q < kv->n_seq; q++) {
        const struct lm_kv_seq *s = &kv->seqs[q];
        if (s->n_pos > s->cap || s->n_pos > kv->n_ctx) FAIL("kv check: seq %d n_pos %d > cap %d", q, s->n_pos, s->cap);
        for (int32_t bi = 0; bi < s->cap / LM_KV_BLOCK; bi++) {
            const int32_t b = s->blocks[bi];
            if (b >= nb) FAIL("kv check: seq %d block %d id %d", q, bi, b);
            if (b >= 0 && refs[b] > 0 && lay[b] != s->layout)
                FAIL("kv check: block %d is held by sequences of layouts %d and %d", b, lay[b], s->layout);
            if (b >= 0) {
                refs[b]++;
                lay[b] = (int8_t)s->layout;
            }
            if (b >= 0 && bi * LM_KV_BLOCK >= s->n_pos) FAIL("kv check: seq %d holds block %d past n_pos", q, bi);
        }
        for (int32_t p = 0; p < s->cap; p++) {
            const bool pr = present_get(s, p);
            if (pr && p >= s->n_pos) FAIL("kv check: seq %d cell %d present past n_pos %d", q, p, s->n_pos);
            if (pr && s->blocks[p / LM_KV_BLOCK] < 0) FAIL("kv check: seq %d cell %d present without a block", q, p);
            if (!pr && p < s->n_pos && p < s->first_hole) FAIL("kv check: seq %d cell %d missing below first hole %d", q, p, s->first_hole);
        }
    }
    int32_t n_held = 0, n_cached_free = 0;
    for (int32_t b = 0; b < nb; b++) {
        if (refs[b] != kv->ref[b]) FAIL("kv check: block %d ref %d, held by %d", b, kv->ref[b], refs[b]);
        if (kv->ref[b] > 0) n_held++;
        else if (kv->cached[b]) n_cached_free++;
        if (kv->cached[b] && index_find(kv, kv->hash[b], kv->parent[b], kv->btok + (size_t)b * LM_KV_BLOCK) < 0)
            FAIL("kv check: cached block %d missing from the index", b);
    }
    for (int32_t i = 0; i < kv->n_free; i++) {
        const int32_t b = kv->free_stack[i];
        if (kv->ref[b] != 0 || kv->cached[b]) FAIL("kv check: free block %d is held or cached", b);
    }
    int32_t n_lru = 0;
    for (int32_t b = kv->lru_next[nb]; b != nb; b = kv->lru_next[b]) {
        if (kv->ref[b] != 0 || !kv->cached[b]) FAIL("kv check: evictable block %d is held or uncached", b);
        if (++n_lru > nb) FAIL("kv check: LRU list loops");
    }
    if (n_lru != kv->n_evictable || n_lru != n_cached_free)
        FAIL("kv check: %d evictable listed, %d counted, %d cached and free", n_lru, kv->n_evictable, n_cached_free);
    if (n_held + kv->n_free + kv->n_evictable != nb)
        FAIL("kv check: %d held + %d free + %d evictable != %d blocks", n_held, kv->n_free, kv->n_evictable, nb);
#undef FAIL
done:
    free(refs);
    free(lay);
    return ok;
}
