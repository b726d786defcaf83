// The context (lumen.h lm_context_*): the model, its KV pool (own or borrowed), the thread
// pool, the current batch and every scratch buffer of the forward pass, sized once at init
// for n_batch entries (no allocation in the hot path). runtime/context.c makes it and runs
// lm_decode, which validates a batch and runs the forward pass (runtime/forward.c).
#ifndef LM_RUNTIME_CONTEXT_H
#define LM_RUNTIME_CONTEXT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "kernels/kernels.h"
#include "kernels/matmul.h"
#include "model/model.h"
#include "runtime/kv_cache.h"

struct lm_context {
    struct lm_model *m;
    const struct lm_kernels *kern;
    struct lm_pool *pool;
    int32_t n_ctx, n_seq, n_batch, n_threads, n_logits_max;
    // The KV pool: kv_own, or a target context's (a draft context, lm_context_init_draft,
    // which borrows its pool and thread pool too). This context's sequences are the pool's
    // [seq0, seq0 + n_seq), whose rows sit at kv->lay[kv_layout] (its model's layout).
    struct lm_kv_cache *kv;
    struct lm_kv_cache kv_own;
    int32_t seq0;
    int kv_layout;
    // A q8_0 K / V: q and k, and v, are rotated (runtime/kv_rot.c lm_hadamard) in blocks of this
    // many values before k and v are stored, the attention output rotated back (0: none;
    // docs/kv_cache.md). K: the largest power of two >= 64 dividing the head size; V: 64.
    // f16 rows, MLA's latent rows and head sizes not a multiple of 64 are not rotated.
    int32_t kv_rot_k, kv_rot_v;
    bool borrowed;       // kv and pool belong to another context

    // current batch (set by lm_decode)
    const struct lm_batch_entry *batch;
    int32_t n_tokens;
    size_t *kv_koff, *kv_voff; // [n_batch] each entry's K / V cell in the pool (lm_kv_prepare)
    int32_t *seq_next;         // [n_seq] lm_decode's position check
    int32_t n_out;       // entries wanting logits
    int32_t *out_rows;   // [n_batch] batch index of each output row: the n_out logits rows,
                         // then the n_eout embedding rows (their normed states: xn rows
                         // n_out .. n_out + n_eout after the forward pass)
    int32_t n_eout;      // entries wanting embeddings (want_logits in an embedding sequence)
    bool *seq_embd;      // [n_seq] embedding mode per sequence (lm_context_seq_set_embd)
    bool non_causal;     // attention windows end at each sequence's last batch position
    // small batches (<= LM_PRIVATE_QUANT_ROWS tokens, 2+ threads): every thread computes the
    // residual adds and norms of all rows itself (lm_op_residual_norm_priv), into its own
    // xn_priv rows, while thread 0 writes the residual stream alternately to x and x_alt
    float *x_alt;        // (LM_PRIVATE_QUANT_ROWS, n_embd)
    float *xn_priv;      // (n_threads, LM_PRIVATE_QUANT_ROWS, n_embd)
    atomic_llong head_next; // next lm_head row to claim (lm_op_lm_head; lm_op_lm_head_reset)
    // fused top-k (lm_context_set_top_k): each thread selects from the logits it finishes,
    // lm_decode merges the threads' selections of each row into topk_out, sorted
    int32_t top_k;                 // 0: off
    int32_t topk_cap;              // the buffers hold selections of up to this k
    int32_t n_topk_rows;           // rows lm_get_top_k answers (last lm_decode's n_out, or 0)
    struct lm_topk *topk_part;     // (n_threads, n_logits_max)
    struct lm_topk *topk_out;      // (n_logits_max)
    struct lm_topk_cand *topk_buf; // (n_threads + 1) * n_logits_max * topk_cap candidates

    // scratch, sized once for n_batch entries (no allocation in the hot path)
    float *x;     // (n_batch, n_embd) residual stream
    float *xn;    // (n_batch, n_embd) normed input of a block
    float *q;     // (n_batch, n_head*hd_k)
    float *k;     // (n_batch, n_head_kv*hd_k)
    float *v;     // (n_batch, n_head_kv*hd_v)
    float *att;   // (n_batch, n_head*hd_v)
    float *o;     // (n_batch, n_embd)
    float *gate;  // (n_batch, n_ff)
    float *up;    // (n_batch, n_ff)
    // experts (hp.n_expert > 0; runtime/ops_moe.c), K = n_expert_used
    float *moe_logits; // (n_batch, n_expert) router outputs
    float *moe_xg;     // (n_batch K, n_embd) input rows gathered by expert
    float *moe_g;      // (n_batch K, n_ff_exp) gate, then SwiGLU, of every slot
    float *moe_u;      // (n_batch K, n_ff_exp)
    float *moe_y;      // (n_batch, n_embd) one expert's down output
    void *moe_route;   // per thread: routing arrays, moe_route_stride bytes each
    size_t moe_route_stride;
    uint64_t *moe_tokens; // (n_layer, n_expert) tokens routed to each expert since init
    // MLA (hp.mla_kv_rank > 0; runtime/ops_mla.c); c->q then holds the absorbed queries
    float *mla_q;      // (n_batch, n_head * mla_hd_k) q as projected (q_nope, q_pe per head)
    float *mla_qa;     // (n_batch, mla_q_rank) the q low-rank input, when mla_q_rank > 0
    float *mla_o;      // (n_batch, n_head * mla_hd_v) the heads' values after wv_b
    float *mla_tmp;    // per thread: mla_tmp_stride floats (gathered head rows)
    size_t mla_tmp_stride;
    // attention kernels' scratch (lm_attn_job.scratch), per thread: n_threads rows of
    // attn_scratch_stride floats (lm_attn_scratch_floats for windows up to n_ctx cells)
    float *attn_scratch;
    size_t attn_scratch_stride;
    int attn_tile; // prefill tiles of up to attn_tile rows fit each thread's scratch (runtime/ops.c)
    // chunks of long windows shared by threads (runtime/ops.c attn_split): attn_part_n
    // partials and their o, attn_part_ostride floats each (NULL for n_ctx <= LM_ATTN_CHUNK)
    struct lm_attn_part *attn_part;
    float *attn_part_o;
    int64_t attn_part_n;
    size_t attn_part_ostride;
    float *logits;  // (n_logits_max, n_vocab)
    // matmul activations (quantized, repacked), n_batch rows of the widest input, shared
    // and per thread (kernels/matmul.h)
    struct lm_matmul_ws mm;
    // the decision of the last matmul op, kept by thread 0 when profiling, for its event
    // (lm_fwd_sync_mm -> lm_fwd_matmul_event)
    struct lm_matmul_decision mm_last;
    // RoPE cos/sin per batch entry for each distinct (base, scale) of the layers:
    // rope_cs[slot] -> (n_batch, n_rot) as (cos, sin) pairs; rope_slot[layer] -> slot
    int32_t n_rope_slots;
    float rope_base[4], rope_scale[4];
    float *rope_cs[4];
    int8_t *rope_slot;
    // the model's RoPE frequency factors for this context's n_ctx (lm_model_rope_factors:
    // llama3's, or phi3's LongRoPE long / short ones), NULL if none; the cos/sin multiplier
    // (hp.rope_mscale, 0 read as 1)
    const float *rope_freqs;
    float rope_mscale;
    uint64_t scratch_bytes;
    // Tests: the test_fail_decode-th lm_decode from now fails (LM_ERR_STATE, nothing
    // changed), as a forward pass that cannot run would; 0: off.
    int32_t test_fail_decode;
};

// A target context whose KV pool also holds a draft model's layout (speculative decoding
// with a draft model, docs/speculative.md): the pool's sequences [0, n_seq) are the
// target's, [n_seq, 2 n_seq) the draft context's; kv_tokens counts the target's positions
// and the pool gets as many blocks again for the draft's. The draft needs head sizes that
// are multiples of 16, like any model.
enum lm_status lm_context_init_pair(struct lm_context **out, struct lm_model *m,
                                    const struct lm_context_params *params,
                                    const struct lm_model *draft);
// The draft model's context on target context t (made by lm_context_init_pair with this
// model): borrows t's KV pool (layout 1, sequences [t->n_seq, 2 t->n_seq): entries name
// those ids) and thread pool, so both models run on one pool of threads and one pool of
// blocks; own scratch for n_batch entries (params: n_batch, n_logits_max; the rest is t's).
// The same forward path runs on the draft's weights. Free it before t.
enum lm_status lm_context_init_draft(struct lm_context **out, struct lm_context *t,
                                     struct lm_model *draft, const struct lm_context_params *params);

// Makes every op of c compute with table k (tests and tools: e.g. the generic table beside
// the best one in one process). Weight layouts do not depend on the table, so any table
// works on any loaded model; results are the same bits with every table (kernels.h).
void lm_context_set_kernels(struct lm_context *c, const struct lm_kernels *k);

#endif
