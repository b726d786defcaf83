// KV cache: one pool of fixed-size blocks shared by every sequence of a context, a block
// table per sequence, reference counts, copy-on-write, a prefix index of full blocks
// (each found by its tokens under the identity of its parent block) with LRU eviction, and
// exact rollback.
#ifndef LM_RUNTIME_KV_CACHE_H
#define LM_RUNTIME_KV_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lumen.h"
#include "tensor/dtype.h"

// Positions per block. A power of two and a multiple of 16: attention reads 16-cell
// chunks that then never straddle two blocks. 16 matches vLLM's default and gives the
// prefix cache a fine granularity; see docs/kv_cache.md for the block-size measurement.
#ifndef LM_KV_BLOCK
#define LM_KV_BLOCK 16
#endif
#define LM_KV_BLOCK_SHIFT (__builtin_ctz(LM_KV_BLOCK))

// A full block's place in the prefix index: the registered block holding that content
// after that parent, and the registration it belongs to (gen: a block evicted and
// registered again is another link, so its old children no longer match under it). The
// first block of a sequence has the layout's root as parent: blk -1 - layout, gen 0.
struct lm_kv_link {
    int32_t blk;
    uint32_t gen;
};

// One sequence: the positions it holds and where their K/V rows live.
struct lm_kv_seq {
    int32_t n_pos;       // next position to write; cells [0, n_pos) are held or holes
    int32_t cap;         // capacity of the per-position arrays below (grows by doubling)
    int32_t *blocks;     // [cap / LM_KV_BLOCK] block id per block index, -1 = none
    uint64_t *present;   // [cap / 64] bit per cell: 1 = the cell holds this sequence's K/V
    int32_t *tokens;     // [cap] token at each position (the prefix index's keys)
    struct lm_kv_link *chain; // [cap / LM_KV_BLOCK] index link of each full block [0, n_chain)
    int32_t n_chain;     // chain[0, n_chain) valid
    int32_t first_hole;  // lowest removed position below n_pos (INT32_MAX if none): blocks
                         // from there on have another context and are never registered
    int32_t layout;      // kv->lay[layout] places its rows (seq / n_seq_layout)
};

// Where one model's K/V rows sit in a block. A pool holds one layout per model that
// shares it: the target's, and a draft model's (speculative decoding, docs/speculative.md).
// Within a block a layer's K is head-major: (n_head_kv, LM_KV_BLOCK, head_k) values, each KV
// head's LM_KV_BLOCK rows together, so attention's walk over one head reads memory in order
// (docs/kv_cache.md, "Layout"); V likewise.
#define LM_KV_LAYOUTS_MAX 2
struct lm_kv_layout {
    int32_t n_layer, kv_dim_k, kv_dim_v; // kv_dim = n_head_kv * head size; kv_dim_v 0: no V
                                         // rows, V is read from the K row (MLA's latent)
    int32_t head_k, head_v; // values of one KV head's K / V row (kv_dim divided by the heads;
                            // 0 at init: one head, the whole kv_dim)
    enum lm_kv_type type_k, type_v;      // row types (0 = f16; q8_0: head a multiple of 32)
    size_t *k_off;      // [n_layer] offset of layer l's K rows in a block
    size_t *v_off;      // [n_layer] V rows
    size_t bytes;       // bytes of a block this layout uses (<= block_bytes)
};

struct lm_kv_cache {
    struct lm_kv_layout lay[LM_KV_LAYOUTS_MAX];
    int32_t n_layouts;
    int32_t n_ctx;      // max positions of one sequence
    int32_t n_seq;      // sequence ids [0, n_seq): n_seq_layout per layout, layout l's are
    int32_t n_seq_layout; // [l * n_seq_layout, (l + 1) * n_seq_layout)
    int32_t n_blocks;   // pool capacity
    size_t block_bytes; // all layers' K and V rows of one block: the largest layout's (a
                        // block of a smaller layout leaves the rest unused)
    uint8_t *base;      // n_blocks * block_bytes, reserved up front, touched when first used
    size_t map_bytes;
    bool prefix_cache;  // register full blocks and look them up (lm_kv_prefix_attach)

    // block metadata
    int32_t *ref;          // sequences holding the block
    uint64_t *hash;        // its index hash, when registered in the prefix index
    struct lm_kv_link *parent; // the link of the blocks before it, when registered
    uint32_t *gen;         // registrations and evictions so far (lm_kv_link.gen)
    int32_t *btok;         // [n_blocks * LM_KV_BLOCK] tokens of a registered block
    bool *cached;          // registered in the prefix index
    int32_t *lru_prev, *lru_next; // evictable list (ref 0, cached); sentinel = n_blocks
    int32_t *free_stack, n_free;  // unregistered free blocks, LIFO (recently touched first)
    int32_t n_evictable;
    int32_t *htab;      // open addressing, linear probing: block id or -1
    uint32_t htab_mask;
    // The index hash is keyed by a per-pool random secret, so nobody can aim prompts at
    // one probe chain; a match needs the parent's identity and the tokens, never the hash
    // alone. Tests set test_hash_collide to give every block the same hash.
    uint64_t hash_key;
    bool test_hash_collide;

    struct lm_kv_seq *seqs; // [n_seq]

    // counters (lm_kv_cache_stats)
    uint64_t prefix_queries, prefix_query_tokens, prefix_hit_tokens, evictions, cow_copies;
};

// One layout (one model), sequences [0, n_seq).
enum lm_status lm_kv_init(struct lm_kv_cache *kv, int32_t n_layer, int32_t kv_dim_k,
                          int32_t kv_dim_v, int32_t n_ctx, int32_t n_seq, int32_t kv_tokens,
                          bool prefix_cache);
// n_lay layouts over one pool of blocks: n_seq sequences per layout, layout l's are
// [l * n_seq, (l + 1) * n_seq). Block tables, refcounts, copy-on-write, rollback and
// eviction do not depend on the layout; the prefix index keys on it (a block of one model's
// K/V never serves another's sequence). lays[l]: n_layer, kv_dim_k, kv_dim_v, head_k, head_v,
// type_k, type_v (rest ignored). LM_ERR_ARG for an unknown type, a kv_dim not a multiple of its
// head, or a q8_0 head not a multiple of 32.
enum lm_status lm_kv_init_layouts(struct lm_kv_cache *kv, const struct lm_kv_layout *lays,
                                  int32_t n_lay, int32_t n_ctx, int32_t n_seq, int32_t kv_tokens,
                                  bool prefix_cache);
void lm_kv_free(struct lm_kv_cache *kv);

// Bytes of n values of type t in a K/V row (q8_0: n a multiple of 32).
static inline size_t lm_kv_row_bytes(enum lm_kv_type t, int64_t n) {
    return t == LM_KV_Q8_0 ? (size_t)n / 32 * 34 : (size_t)n * 2;
}

// Bytes of one KV head's row; of its LM_KV_BLOCK rows (from one head's rows to the next's)
static inline size_t lm_kv_hrow_k(const struct lm_kv_layout *L) { return lm_kv_row_bytes(L->type_k, L->head_k); }
static inline size_t lm_kv_hrow_v(const struct lm_kv_layout *L) { return lm_kv_row_bytes(L->type_v, L->head_v); }
static inline size_t lm_kv_hblk_k(const struct lm_kv_layout *L) { return LM_KV_BLOCK * lm_kv_hrow_k(L); }
static inline size_t lm_kv_hblk_v(const struct lm_kv_layout *L) { return LM_KV_BLOCK * lm_kv_hrow_v(L); }

// K / V rows of block b, layer l of layout lay: (n_head_kv, LM_KV_BLOCK, head) f16 (only for
// an f16 layout; a q8_0 one's are (n_head_kv, LM_KV_BLOCK, lm_kv_hrow) bytes at the same place)
static inline lm_f16 *lm_kv_k(const struct lm_kv_cache *kv, int lay, int32_t b, int l) {
    return (lm_f16 *)(kv->base + (size_t)b * kv->block_bytes + kv->lay[lay].k_off[l]);
}
static inline lm_f16 *lm_kv_v(const struct lm_kv_cache *kv, int lay, int32_t b, int l) {
    return (lm_f16 *)(kv->base + (size_t)b * kv->block_bytes + kv->lay[lay].v_off[l]);
}

// ---- a batch's writes: lm_kv_prepare before the forward pass, lm_kv_commit after it
// Entries (positions of a sequence consecutive from its n_pos, validated by the caller)
// get their cell's offset from kv->base in k_row_off[i] / v_row_off[i]: its block plus its
// row within a head's rows (add k_off[l] / v_off[l] for layer l, g * lm_kv_hblk for head g). Allocates the blocks the batch needs, copying a shared or
// registered block before it is written (copy-on-write), and marks the cells held (the
// forward pass reads them). LM_ERR_KV_FULL, with nothing changed, if the pool cannot
// supply the blocks even after evicting cached ones.
enum lm_status lm_kv_prepare(struct lm_kv_cache *kv, const struct lm_batch_entry *e, int32_t n,
                             size_t *k_row_off, size_t *v_row_off);
// After the forward pass: advances the sequences' n_pos and registers the blocks that
// became full in the prefix index.
void lm_kv_commit(struct lm_kv_cache *kv, const struct lm_batch_entry *e, int32_t n);

// ---- sequence operations (validated; messages name the sequence and range)
enum lm_status lm_kv_seq_rm(struct lm_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1);
enum lm_status lm_kv_seq_cp(struct lm_kv_cache *kv, int32_t src, int32_t dst, int32_t n_pos);
enum lm_status lm_kv_seq_keep(struct lm_kv_cache *kv, int32_t seq);
// Attaches the longest run of cached full blocks that begin tokens[0, n) to the empty
// sequence seq, keeping at least one token to compute; returns the positions attached
// in *n_attached.
enum lm_status lm_kv_prefix_attach(struct lm_kv_cache *kv, int32_t seq, const int32_t *tokens,
                                   int32_t n, int32_t *n_attached);
// Cached full blocks of layout lay that tokens[0, n) would attach (no change made).
int32_t lm_kv_prefix_probe(const struct lm_kv_cache *kv, int lay, const int32_t *tokens, int32_t n);
// Free blocks, counting evictable cached ones.
static inline int32_t lm_kv_blocks_available(const struct lm_kv_cache *kv) {
    return kv->n_free + kv->n_evictable;
}
// Blocks a sequence at n_pos needs to grow by n positions (0 if its last block has room
// and is its own).
int32_t lm_kv_blocks_needed(const struct lm_kv_cache *kv, int32_t seq, int32_t n);
// The largest n <= want whose blocks for seq fit in avail (a prefill chunk, a catch-up).
int32_t lm_kv_chunk_fit(const struct lm_kv_cache *kv, int32_t seq, int32_t want, int32_t avail);

// Internal consistency check (refcounts against block tables, free/LRU lists, index);
// for tests. Returns false and sets lm_error_msg on the first inconsistency.
bool lm_kv_check(const struct lm_kv_cache *kv);

#endif
