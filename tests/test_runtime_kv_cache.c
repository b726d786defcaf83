// KV pool bookkeeping without a model: block allocation, copy-on-write, rollback, holes,
// sequence copy/keep, the prefix index with LRU eviction, a full pool, bad arguments; and
// a random walk of operations where every held cell must still hold what its own
// sequence wrote (a stand-in for K/V: a hash of the sequence's tokens up to that cell),
// with lm_kv_check's invariants after every step.
#include "lm_test.h"
#include "lm_test_model.h"
#include "base/status.h"
#include "runtime/kv_cache.h"

#define NL 2
#define DK 16
#define DV 32

// what a real forward pass would write: a function of the tokens up to the cell
static uint64_t content(const int32_t *tok, int32_t n) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t i = 0; i < n; i++) h = (h ^ (uint64_t)(uint32_t)tok[i]) * 1099511628211ull;
    return h;
}

struct model_seq {
    int32_t n;          // positions
    int32_t tok[1024];
    bool held[1024];    // not removed
};

static struct model_seq ms[4];

// decode n tokens onto seq (simulated forward: writes the content of each cell)
static enum lm_status put(struct lm_kv_cache *kv, int32_t seq, const int32_t *tok, int32_t n) {
    struct lm_batch_entry e[64] = {{0}};
    size_t ko[64], vo[64];
    LM_ASSERT(n <= 64);
    for (int32_t i = 0; i < n; i++)
        e[i] = (struct lm_batch_entry){tok[i], kv->seqs[seq].n_pos + i, seq, false};
    enum lm_status st = lm_kv_prepare(kv, e, n, ko, vo);
    if (st != LM_OK) return st;
    struct model_seq *m = &ms[seq];
    for (int32_t i = 0; i < n; i++) {
        m->tok[m->n] = tok[i];
        m->held[m->n] = true;
        m->n++;
        const uint64_t c = content(m->tok, m->n);
        for (int l = 0; l < NL; l++) {
            memcpy(kv->base + ko[i] + kv->lay[kv->seqs[seq].layout].k_off[l], &c, sizeof c);
            memcpy(kv->base + vo[i] + kv->lay[kv->seqs[seq].layout].v_off[l] + 8, &c, sizeof c);
        }
    }
    lm_kv_commit(kv, e, n);
    return LM_OK;
}

// every held cell of every sequence holds its own content, in both layers
static bool verify(const struct lm_kv_cache *kv) {
    for (int32_t s = 0; s < kv->n_seq; s++) {
        const struct lm_kv_seq *q = &kv->seqs[s];
        const struct model_seq *m = &ms[s];
        if (q->n_pos != m->n) return false;
        for (int32_t p = 0; p < m->n; p++) {
            const bool pr = (q->present[p >> 6] >> (p & 63)) & 1;
            if (pr != m->held[p]) return false;
            if (!pr) continue;
            const uint64_t want = content(m->tok, p + 1);
            const int32_t b = q->blocks[p / LM_KV_BLOCK];
            for (int l = 0; l < NL; l++) {
                uint64_t k, v;
                const struct lm_kv_layout *L = &kv->lay[q->layout];
                memcpy(&k, (const uint8_t *)lm_kv_k(kv, q->layout, b, l) + (size_t)(p % LM_KV_BLOCK) * L->kv_dim_k * 2, 8);
                memcpy(&v, (const uint8_t *)lm_kv_v(kv, q->layout, b, l) + (size_t)(p % LM_KV_BLOCK) * L->kv_dim_v * 2 + 8, 8);
                if (k != want || v != want) return false;
            }
        }
    }
    return true;
}

static void model_rm(int32_t s, int32_t p0, int32_t p1) {
    if (p1 < 0) p1 = ms[s].n;
    if (p1 == ms[s].n) ms[s].n = p0;
    else for (int32_t p = p0; p < p1; p++) ms[s].held[p] = false;
}

static void model_cp(int32_t src, int32_t dst, int32_t n) {
    ms[dst] = ms[src];
    ms[dst].n = n;
}

static int32_t used(const struct lm_kv_cache *kv) { return kv->n_blocks - lm_kv_blocks_available(kv); }

// basics: 8 blocks of 16
static void test_basics_prefix(struct lm_kv_cache *kv, const int32_t *tok) {
    CHECK(lm_kv_init(kv, NL, DK, DV, 512, 4, 128, true) == LM_OK);
    CHECK(kv->n_blocks == 8 && lm_kv_blocks_available(kv) == 8);
    CHECK(put(kv, 0, tok, 40) == LM_OK); // 3 blocks, the first two full and registered
    CHECK(used(kv) == 3 && kv->seqs[0].n_pos == 40 && kv->seqs[0].n_chain == 2);
    CHECK(kv->cached[kv->seqs[0].blocks[0]] && kv->cached[kv->seqs[0].blocks[1]]);
    CHECK(!kv->cached[kv->seqs[0].blocks[2]]);
    CHECK(lm_kv_check(kv) && verify(kv));
    CHECK(lm_kv_blocks_needed(kv, 0, 8) == 0 && lm_kv_blocks_needed(kv, 0, 9) == 1);

    // ---- prefix: the same first 40 tokens attach 2 blocks (32 positions); differing in
    // block 1 attaches 1; the whole 32-token prompt attaches 1 (one token left to compute)
    CHECK(lm_kv_prefix_probe(kv, 0, tok, 40) == 32);
    CHECK(lm_kv_prefix_probe(kv, 0, tok, 33) == 32 && lm_kv_prefix_probe(kv, 0, tok, 32) == 16);
    int32_t alt[40];
    memcpy(alt, tok, sizeof alt);
    alt[20] = 7;
    CHECK(lm_kv_prefix_probe(kv, 0, alt, 40) == 16);
    alt[0] = 7;
    CHECK(lm_kv_prefix_probe(kv, 0, alt, 40) == 0);
    int32_t na = -1;
    CHECK(lm_kv_prefix_attach(kv, 1, tok, 40, &na) == LM_OK && na == 32);
    model_cp(0, 1, 32);
    CHECK(kv->ref[kv->seqs[0].blocks[0]] == 2 && used(kv) == 3);
    CHECK(put(kv, 1, tok + 32, 1) == LM_OK); // a fresh block
    CHECK(lm_kv_check(kv) && verify(kv));
    CHECK(kv->prefix_hit_tokens == 32 && kv->prefix_queries == 1);
    // attaching needs an empty sequence
    CHECK(lm_kv_prefix_attach(kv, 1, tok, 40, &na) == LM_ERR_ARG && strstr(lm_error_msg(), "empty"));
}

// rollback into a registered block copies it before writing (its content stays
// as cached); then the re-written block registers again only if its tokens differ
static void test_rollback_seq_cp(struct lm_kv_cache *kv, const int32_t *tok) {
    const int32_t b1 = kv->seqs[0].blocks[1];
    CHECK(lm_kv_seq_rm(kv, 0, 20, -1) == LM_OK);
    model_rm(0, 20, -1);
    CHECK(kv->seqs[0].n_pos == 20 && kv->seqs[0].n_chain == 1 && kv->seqs[0].blocks[1] == b1);
    const uint64_t cow0 = kv->cow_copies;
    int32_t other[16];
    for (int i = 0; i < 16; i++) other[i] = 5000 + i;
    CHECK(put(kv, 0, other, 16) == LM_OK);
    CHECK(kv->cow_copies == cow0 + 1 && kv->seqs[0].blocks[1] != b1 && kv->cached[b1]);
    CHECK(lm_kv_check(kv) && verify(kv));
    CHECK(lm_kv_prefix_probe(kv, 0, tok, 40) == 32); // the original block 1 is still cached

    // ---- seq_cp shares blocks, a write into the shared partial block copies it
    CHECK(lm_kv_seq_rm(kv, 1, 0, -1) == LM_OK);
    model_rm(1, 0, -1);
    CHECK(lm_kv_seq_cp(kv, 0, 2, 30) == LM_OK);
    model_cp(0, 2, 30);
    CHECK(kv->ref[kv->seqs[0].blocks[1]] == 2);
    CHECK(put(kv, 2, tok + 100, 3) == LM_OK);
    CHECK(kv->seqs[2].blocks[1] != kv->seqs[0].blocks[1]);
    CHECK(lm_kv_check(kv) && verify(kv));
    CHECK(lm_kv_seq_cp(kv, 0, 2, 5) == LM_ERR_ARG);  // destination not empty
    CHECK(lm_kv_seq_cp(kv, 0, 0, 5) == LM_ERR_ARG);  // itself
    CHECK(lm_kv_seq_cp(kv, 0, 3, 99) == LM_ERR_ARG); // more than it holds
}

// holes: remove [16, 32) inside sequence 0 (36 positions): block 1 released,
// the sequence goes on at 36; positions past the hole never register
static void test_holes_bad_args(struct lm_kv_cache *kv, const int32_t *tok) {
    CHECK(kv->seqs[0].n_pos == 36);
    CHECK(lm_kv_seq_rm(kv, 0, 16, 32) == LM_OK);
    model_rm(0, 16, 32);
    CHECK(kv->seqs[0].blocks[1] == -1 && kv->seqs[0].first_hole == 16 && kv->seqs[0].n_pos == 36);
    CHECK(put(kv, 0, tok + 50, 20) == LM_OK);
    CHECK(kv->seqs[0].n_chain == 1);
    CHECK(lm_kv_check(kv) && verify(kv));
    // rolling back below the hole removes it
    CHECK(lm_kv_seq_rm(kv, 0, 10, -1) == LM_OK);
    model_rm(0, 10, -1);
    CHECK(kv->seqs[0].first_hole == INT32_MAX && lm_kv_check(kv) && verify(kv));

    // ---- bad arguments: no change, one clear message
    CHECK(lm_kv_seq_rm(kv, 4, 0, -1) == LM_ERR_ARG && strstr(lm_error_msg(), "sequence 4"));
    CHECK(lm_kv_seq_rm(kv, -1, 0, -1) == LM_ERR_ARG);
    CHECK(lm_kv_seq_rm(kv, 0, 5, 3) == LM_ERR_ARG && strstr(lm_error_msg(), "[5, 3)"));
    CHECK(lm_kv_seq_rm(kv, 0, 0, 11) == LM_ERR_ARG); // past its 10 positions
    CHECK(lm_kv_seq_rm(kv, 0, -2, 3) == LM_ERR_ARG);
    CHECK(lm_kv_seq_keep(kv, 9) == LM_ERR_ARG);
    CHECK(lm_kv_check(kv) && verify(kv));
}

// a full pool: the batch is refused whole, nothing changes; freeing makes room,
// cached blocks are evicted least recently used first
static void test_full_pool(struct lm_kv_cache *kv, const int32_t *tok) {
    CHECK(lm_kv_seq_keep(kv, 0) == LM_OK);
    model_rm(1, 0, -1); model_rm(2, 0, -1); model_rm(3, 0, -1);
    CHECK(lm_kv_seq_rm(kv, 0, 0, -1) == LM_OK);
    model_rm(0, 0, -1);
    CHECK(used(kv) == 0 && lm_kv_check(kv));
    lm_kv_free(kv); // a fresh pool: no cached blocks of tok
    CHECK(lm_kv_init(kv, NL, DK, DV, 512, 4, 128, true) == LM_OK);
    CHECK(put(kv, 0, tok, 64) == LM_OK);       // 4 blocks
    CHECK(put(kv, 1, tok + 64, 64) == LM_OK);  // 4 more: pool full
    CHECK(lm_kv_blocks_available(kv) == 0);
    const uint64_t ev0 = kv->evictions;
    CHECK(put(kv, 2, tok + 128, 1) == LM_ERR_KV_FULL && strstr(lm_error_msg(), "full"));
    CHECK(kv->seqs[2].n_pos == 0 && lm_kv_check(kv) && verify(kv));
    CHECK(lm_kv_seq_rm(kv, 0, 0, -1) == LM_OK); // its 4 full blocks stay cached
    model_rm(0, 0, -1);
    CHECK(kv->n_evictable == 4 && kv->n_free == 0);
    CHECK(put(kv, 2, tok + 128, 17) == LM_OK); // evicts 2, block 0 of tok first
    CHECK(kv->evictions == ev0 + 2);
    CHECK(lm_kv_prefix_probe(kv, 0, tok, 64) == 0);        // its first block is gone
    CHECK(lm_kv_check(kv) && verify(kv));
    lm_kv_free(kv);
}

// random walk: 4 sequences, random decodes / rollbacks / holes / copies /
// prefix attaches over a small pool; contents and invariants checked every step
static void test_random_walk(void) {
    struct lm_kv_cache kv;
    memset(ms, 0, sizeof ms);
    CHECK(lm_kv_init(&kv, NL, DK, DV, 1024, 4, 24 * LM_KV_BLOCK, true) == LM_OK);
    int bad = 0, full = 0;
    // a few shared prefixes so attaches hit
    int32_t base[3][256];
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 256; i++) base[k][i] = (int32_t)(lm_test_rng_u64() % 50);
    const int steps = lm_test_quick() ? 1500 : 6000;
    for (int step = 0; step < steps && !bad; step++) {
        const int32_t s = (int32_t)(lm_test_rng_u64() % 4);
        const int op = (int)(lm_test_rng_u64() % 10);
        struct lm_kv_seq *q = &kv.seqs[s];
        if (op < 5) { // decode 1..40 tokens, following one of the base texts mostly
            const int32_t n = 1 + (int32_t)(lm_test_rng_u64() % 40);
            if (q->n_pos + n > 900) continue;
            int32_t t[64];
            const int k = s % 3;
            for (int32_t i = 0; i < n; i++)
                t[i] = lm_test_rng_u64() % 8 ? base[k][(q->n_pos + i) % 256] : (int32_t)(lm_test_rng_u64() % 50);
            const enum lm_status st = put(&kv, s, t, n);
            if (st == LM_ERR_KV_FULL) full++;
            else if (st != LM_OK) bad = 1;
        } else if (op < 7 && q->n_pos > 0) { // rollback
            const int32_t p0 = (int32_t)(lm_test_rng_u64() % (uint64_t)(q->n_pos + 1));
            if (lm_kv_seq_rm(&kv, s, p0, -1) != LM_OK) bad = 1;
            model_rm(s, p0, -1);
        } else if (op == 7 && q->n_pos > 2) { // hole
            const int32_t p0 = (int32_t)(lm_test_rng_u64() % (uint64_t)(q->n_pos - 1));
            const int32_t p1 = p0 + 1 + (int32_t)(lm_test_rng_u64() % (uint64_t)(q->n_pos - 1 - p0));
            if (lm_kv_seq_rm(&kv, s, p0, p1) != LM_OK) bad = 1;
            model_rm(s, p0, p1);
        } else if (op == 8) { // clear + prefix attach of a base text
            lm_kv_seq_rm(&kv, s, 0, -1);
            model_rm(s, 0, -1);
            const int k = (int)(lm_test_rng_u64() % 3);
            const int32_t n = 1 + (int32_t)(lm_test_rng_u64() % 200);
            int32_t got = 0;
            if (lm_kv_prefix_attach(&kv, s, base[k], n, &got) != LM_OK) bad = 1;
            if (got % LM_KV_BLOCK || got >= n) bad = 1;
            for (int32_t i = 0; i < got; i++) {
                ms[s].tok[i] = base[k][i];
                ms[s].held[i] = true;
            }
            ms[s].n = got;
        } else if (op == 9) { // copy another sequence's prefix into this one
            const int32_t src = (s + 1) % 4;
            lm_kv_seq_rm(&kv, s, 0, -1);
            model_rm(s, 0, -1);
            const int32_t n = (int32_t)(lm_test_rng_u64() % (uint64_t)(kv.seqs[src].n_pos + 1));
            if (lm_kv_seq_cp(&kv, src, s, n) != LM_OK) bad = 1;
            model_cp(src, s, n);
        }
        if (!lm_kv_check(&kv)) {
            fprintf(stderr, "step %d: %s\n", step, lm_error_msg());
            bad = 1;
        }
        if (!verify(&kv)) {
            fprintf(stderr, "step %d: a held cell does not hold its sequence's content\n", step);
            bad = 1;
        }
    }
    CHECKF(!bad, "random walk failed");
    printf("random walk: %d steps, %d full-pool refusals, %llu prefix hits (tokens), %llu "
           "evictions, %llu copies on write\n", steps, full,
           (unsigned long long)kv.prefix_hit_tokens, (unsigned long long)kv.evictions,
           (unsigned long long)kv.cow_copies);
    CHECK(kv.prefix_hit_tokens > 0 && kv.evictions > 0 && kv.cow_copies > 0 && full > 0);
    lm_kv_free(&kv);
}

// two layouts in one pool (a target and a draft model): sequences 0-1 and 2-3
static void test_two_layouts(const int32_t *tok) {
    struct lm_kv_cache kv;
    memset(ms, 0, sizeof ms);
    const struct lm_kv_layout lays[2] = {{.n_layer = NL, .kv_dim_k = DK, .kv_dim_v = DV},
                                         {.n_layer = NL + 1, .kv_dim_k = 2 * DV, .kv_dim_v = DK}};
    CHECK(lm_kv_init_layouts(&kv, lays, 2, 512, 2, 16 * LM_KV_BLOCK, true) == LM_OK);
    CHECK(kv.n_seq == 4 && kv.seqs[1].layout == 0 && kv.seqs[2].layout == 1);
    CHECK(kv.lay[0].bytes == (size_t)NL * LM_KV_BLOCK * (DK + DV) * 2);
    CHECK(kv.lay[1].bytes == (size_t)(NL + 1) * LM_KV_BLOCK * (2 * DV + DK) * 2);
    // the larger layout's, rounded to an odd number of lines (kv_cache.c: cache sets)
    CHECK(kv.block_bytes >= kv.lay[1].bytes && kv.block_bytes - kv.lay[1].bytes <= 64 && kv.block_bytes / 64 % 2 == 1);
    CHECK(put(&kv, 0, tok, 40) == LM_OK);     // target: 2 full blocks registered
    // the same tokens on a draft sequence find nothing: the index keys on the layout
    CHECK(lm_kv_prefix_probe(&kv, 0, tok, 40) == 32 && lm_kv_prefix_probe(&kv, 1, tok, 40) == 0);
    int32_t att = -1;
    CHECK(lm_kv_prefix_attach(&kv, 2, tok, 40, &att) == LM_OK && att == 0);
    CHECK(put(&kv, 2, tok, 40) == LM_OK);
    CHECK(lm_kv_prefix_probe(&kv, 1, tok, 40) == 32);
    CHECK(kv.seqs[2].blocks[0] != kv.seqs[0].blocks[0]);
    CHECK(lm_kv_prefix_attach(&kv, 3, tok, 40, &att) == LM_OK && att == 32); // draft's own
    CHECK(kv.seqs[3].blocks[0] == kv.seqs[2].blocks[0]);
    ms[3].n = 32;
    memcpy(ms[3].tok, tok, 32 * sizeof *tok);
    for (int i = 0; i < 32; i++) ms[3].held[i] = true;
    CHECK(lm_kv_seq_cp(&kv, 0, 3, 8) == LM_ERR_ARG);   // across models: refused
    CHECK(lm_kv_seq_cp(&kv, 0, 1, 40) == LM_OK);        // within one: shared blocks
    ms[1] = ms[0];
    CHECK(put(&kv, 1, tok + 100, 5) == LM_OK);           // copy-on-write of a target block
    CHECK(lm_kv_seq_rm(&kv, 2, 20, -1) == LM_OK);        // a draft rollback
    ms[2].n = 20;
    CHECK(put(&kv, 2, tok + 50, 30) == LM_OK);
    CHECK(lm_kv_check(&kv));
    CHECKF(verify(&kv), "two layouts: a held cell does not hold its sequence's content");
    // a block held across layouts is an inconsistency lm_kv_check reports
    const int32_t b0 = kv.seqs[2].blocks[0], t0 = kv.seqs[0].blocks[0];
    kv.seqs[2].blocks[0] = t0;
    kv.ref[t0]++;
    kv.ref[b0]--;
    CHECK(!lm_kv_check(&kv) && strstr(lm_error_msg(), "layouts"));
    kv.seqs[2].blocks[0] = b0;
    kv.ref[t0]--;
    kv.ref[b0]++;
    CHECK(lm_kv_check(&kv));
    lm_kv_free(&kv);
}

// prefix isolation: a block matches only under the very block before it. With every
// hash equal (the test hook: what an attacker who found colliding prefixes would get),
// a request's block planted after prefix Z is not reused after another prefix X.
static void test_prefix_isolation(void) {
    struct lm_kv_cache kv;
    memset(ms, 0, sizeof ms);
    CHECK(lm_kv_init(&kv, NL, DK, DV, 512, 4, 64 * LM_KV_BLOCK, true) == LM_OK);
    kv.test_hash_collide = true;
    int32_t x_w[48], z_w[48]; // X + W + tail, Z + W + tail: the same block W after both
    for (int i = 0; i < 48; i++) x_w[i] = z_w[i] = 1000 + i;
    for (int i = 0; i < 16; i++) {
        x_w[i] = 7;
        z_w[i] = 9;
    }
    CHECK(put(&kv, 0, x_w, 16) == LM_OK); // X alone: cached
    CHECK(put(&kv, 1, z_w, 33) == LM_OK); // Z, W: cached under Z
    CHECK(lm_kv_prefix_probe(&kv, 0, z_w, 48) == 32);                        // its own prefix
    CHECKF(lm_kv_prefix_probe(&kv, 0, x_w, 48) == 16, "W was reused after X: %d tokens",
           lm_kv_prefix_probe(&kv, 0, x_w, 48));                            // only X
    int32_t att = -1;
    CHECK(lm_kv_prefix_attach(&kv, 2, x_w, 48, &att) == LM_OK && att == 16);
    ms[2].n = 16;
    memcpy(ms[2].tok, x_w, 16 * sizeof *x_w);
    for (int i = 0; i < 16; i++) ms[2].held[i] = true;
    CHECK(put(&kv, 2, x_w + 16, 17) == LM_OK); // X's own W: a second block of W's tokens
    CHECK(lm_kv_prefix_probe(&kv, 0, x_w, 48) == 32 && kv.seqs[2].blocks[1] != kv.seqs[1].blocks[1]);
    CHECK(lm_kv_check(&kv) && verify(&kv));
    lm_kv_free(&kv);
}

// An evicted block's children stay in the index but out of reach: when its id comes back
// with other tokens, what was cached under its old content does not match under the new.
static void test_evicted_parent(void) {
    struct lm_kv_cache kv;
    memset(ms, 0, sizeof ms);
    CHECK(lm_kv_init(&kv, NL, DK, DV, 512, 4, 8 * LM_KV_BLOCK, true) == LM_OK);
    int32_t zw[33], fw[32], fill[96];
    for (int i = 0; i < 33; i++) zw[i] = i < 16 ? 9 : 2000 + i;
    for (int i = 0; i < 32; i++) fw[i] = i < 16 ? 3000 + i : zw[i];
    for (int i = 0; i < 96; i++) fill[i] = 4000 + i;
    CHECK(put(&kv, 0, zw, 33) == LM_OK); // Z, W cached
    const int32_t z_id = kv.seqs[0].blocks[0];
    CHECK(lm_kv_seq_rm(&kv, 0, 0, -1) == LM_OK); // evictable: Z first, then W
    model_rm(0, 0, -1);
    CHECK(put(&kv, 1, fill, 48) == LM_OK && put(&kv, 1, fill + 48, 48) == LM_OK);
    CHECK(kv.n_free == 0 && kv.n_evictable == 2);
    CHECK(put(&kv, 2, fw, 16) == LM_OK);     // F takes Z's block (evicted) at the root
    CHECK(kv.seqs[2].blocks[0] == z_id && kv.n_evictable == 1);
    CHECKF(lm_kv_prefix_probe(&kv, 0, fw, 32) == 16, "W matched under F, which took its parent's "
           "block: %d tokens", lm_kv_prefix_probe(&kv, 0, fw, 32));
    CHECK(lm_kv_check(&kv) && verify(&kv));
    lm_kv_free(&kv);
}

// the index hash is keyed per pool: two pools hash the same block differently
static void test_hash_key_per_pool(void) {
    struct lm_kv_cache a, b;
    CHECK(lm_kv_init(&a, NL, DK, DV, 64, 1, 64, true) == LM_OK);
    CHECK(lm_kv_init(&b, NL, DK, DV, 64, 1, 64, true) == LM_OK);
    CHECK(a.hash_key != b.hash_key);
    lm_kv_free(&a);
    lm_kv_free(&b);
}

int main(void) {
    struct lm_kv_cache kv;
    int32_t tok[256];
    for (int i = 0; i < 256; i++) tok[i] = 1000 + i;

    test_basics_prefix(&kv, tok);
    test_rollback_seq_cp(&kv, tok);
    test_holes_bad_args(&kv, tok);
    test_full_pool(&kv, tok);
    test_random_walk();
    test_two_layouts(tok);
    test_prefix_isolation();
    test_evicted_parent();
    test_hash_key_per_pool();

    // ---- init arguments
    CHECK(lm_kv_init(&kv, NL, DK, DV, 0, 1, 16, true) == LM_ERR_ARG);
    CHECK(lm_kv_init(&kv, NL, DK, DV, 16, 1, 0, true) == LM_ERR_ARG);
    return lm_test_finish();
}
