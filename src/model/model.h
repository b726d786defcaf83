// Model = mapped GGUF + hyper-parameters + weight views + tokenizer, and the
// architecture registry: one loader per family and the shape of its blocks as data; the
// forward pass that reads them is runtime/forward.c.
#ifndef LM_MODEL_MODEL_H
#define LM_MODEL_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "format/gguf.h"
#include "lumen.h"
#include "tensor/dtype.h"
#include "tensor/weight.h" // struct lm_weight

enum lm_rope_type {
    LM_ROPE_NORM = 0, // rotate adjacent pairs (x[2i], x[2i+1]) (llama)
    LM_ROPE_NEOX = 2, // rotate halves (x[i], x[i + n_rot/2]) (gemma, qwen)
};

enum lm_rope_scaling {
    LM_ROPE_SCALING_NONE = 0,
    LM_ROPE_SCALING_LINEAR,  // positions * rope_scale
    LM_ROPE_SCALING_LLAMA3,  // per-dimension frequency factors (lm_model.rope_freqs)
    LM_ROPE_SCALING_YARN,    // YaRN (deepseek2): positions * rope_scale ramped to unscaled over
                             // yarn_corr, cos/sin times the magnitude factor (ggml's rope_yarn)
};

// How the router's logits become the experts' probabilities (llama.cpp's
// expert_gating_func values).
enum lm_expert_gating {
    LM_EXPERT_GATING_SOFTMAX = 1,
    LM_EXPERT_GATING_SIGMOID = 2,
    LM_EXPERT_GATING_SOFTMAX_WEIGHT = 3, // gpt-oss: top-k of the raw logits, softmax over those k
};

// experts per layer lumen accepts (Qwen3-30B-A3B: 128; the routing scratch scales with it)
#define LM_MAX_EXPERTS 1024

struct lm_hparams {
    int32_t n_vocab;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim_k;   // key/query head size
    int32_t head_dim_v;   // value head size
    int32_t n_ff;
    int32_t n_ctx_train;
    int32_t n_rot;        // rotated dims per head
    int32_t n_swa;        // sliding window (0 = none)
    int32_t swa_period;   // every swa_period-th layer is global (0 = all sliding)
    float rms_eps;
    float rope_base;      // global layers
    float rope_base_swa;  // sliding-window layers
    float rope_scale;     // 1 / linear scaling factor (global layers)
    float attn_scale;     // applied to q before q.k
    float embd_scale;     // applied to the token embeddings (sqrt(n_embd) for gemma)
    float final_softcap;  // 0 = none
    enum lm_rope_type rope_type;
    enum lm_rope_scaling rope_scaling;
    // mixture of experts (qwen3moe; llama with expert_count > 0): 0 experts = dense FFN
    int32_t n_expert;      // experts per layer
    int32_t n_expert_used; // chosen per token (top-k of the router's softmax)
    int32_t n_ff_exp;      // an expert's hidden size
    bool expert_norm_w;    // the chosen weights are renormalised to sum 1
    float expert_w_scale;  // chosen weights scaled by this (0 or 1: not scaled)
    // deepseek2 (model/deepseek2.c): multi-head latent attention and its experts. MLA runs
    // as MQA over the compressed latent: n_head_kv 1, head_dim_k = mla_kv_rank + n_rot (the
    // latent and the shared RoPE key: the KV pool's whole row, no V rows), head_dim_v =
    // mla_kv_rank (V is the latent, the first mla_kv_rank values of the K row)
    int32_t mla_kv_rank;   // kv_lora_rank (0: not MLA)
    int32_t mla_q_rank;    // q_lora_rank (0: q straight from attn_q, as DeepSeek-V2-Lite)
    int32_t mla_hd_k;      // a head's q/k size before absorption: qk_nope + n_rot
    int32_t mla_hd_v;      // a head's value size after wv_b
    enum lm_expert_gating expert_gating; // router probabilities (softmax unless the file says)
    int32_t n_expert_groups, n_group_used; // group-limited top-k (groups > 1)
    // YaRN (rope_scaling LM_ROPE_SCALING_YARN; rope_scale is then ggml's freq_scale)
    float yarn_ext_factor;  // 1: the ramp between interpolated and extrapolated dims
    float yarn_attn_factor; // llama.cpp's cparams.yarn_attn_factor (cos/sin magnitude factor)
    float yarn_corr[2];     // the ramp's first and last dims (ggml_rope_yarn_corr_dims)
    // RoPE's cos/sin multiplier (phi3: LongRoPE's rope.scaling.attn_factor, which llama.cpp
    // passes to ggml_rope_ext as attn_factor); 0 = 1 (none)
    float rope_mscale;
    // granite's multipliers (0 = none; embd_scale and attn_scale above carry the other two)
    float residual_scale;  // each block's output is multiplied by it before its residual add
    float logit_scale;     // the logits are divided by it
    // encoders (bert: model/bert.c): LayerNorm with bias, learned positions, token types
    float norm_eps;        // attention.layer_norm_epsilon (LayerNorm, not RMSNorm)
    int32_t n_token_types; // tokenizer.ggml.token_type_count (rows of token_types.weight)
    bool causal_attn;      // <arch>.attention.causal (encoders: false unless the file says)
    // embeddings (model/model_embd.c): <arch>.pooling_type (NONE when absent)
    enum lm_pooling pooling;
};

struct lm_layer {
    bool swa; // sliding-window layer
    bool no_rope; // q and k are not rotated (smollm3: every 4th layer)
    float rope_base;
    float rope_scale;
    struct lm_weight attn_norm;      // (n_embd)
    struct lm_weight wq;             // (n_head*hd_k, n_embd); MLA: attn_q or attn_q_b
                                     // (n_head*mla_hd_k, n_embd or mla_q_rank)
    struct lm_weight wk;             // (n_head_kv*hd_k, n_embd); MLA: attn_kv_a_mqa
                                     // (mla_kv_rank + n_rot, n_embd), latent and rope key
    struct lm_weight wv;             // (n_head_kv*hd_v, n_embd)
    struct lm_weight bq, bk, bv;     // optional biases (qwen2)
    struct lm_weight q_norm, k_norm; // (hd_k), optional per-head norms
    struct lm_weight wo;             // (n_embd, n_head*hd_v)
    struct lm_weight post_attn_norm; // (n_embd), optional
    struct lm_weight ffn_norm;       // (n_embd)
    struct lm_weight gate;           // (n_ff, n_embd)
    struct lm_weight up;             // (n_ff, n_embd)
    struct lm_weight down;           // (n_embd, n_ff)
    struct lm_weight post_ffw_norm;  // (n_embd), optional
    // MLA (hp.mla_kv_rank > 0; wv and the q/k/v biases are then absent)
    struct lm_weight wq_a;           // attn_q_a (mla_q_rank, n_embd), when mla_q_rank > 0
    struct lm_weight q_a_norm;       // (mla_q_rank), when mla_q_rank > 0
    struct lm_weight kv_a_norm;      // (mla_kv_rank) the latent's norm
    struct lm_weight *wk_b;          // [n_head] (mla_kv_rank, qk_nope): q_nope -> latent space
    struct lm_weight *wv_b;          // [n_head] (mla_hd_v, mla_kv_rank): latent -> value
    struct lm_weight exp_probs_b;    // (n_expert) router bias for the choice only, optional
    // experts (hp.n_expert > 0; gate/up/down above are then absent, or, deepseek2, the
    // shared experts' FFN, added to the routed ones' sum): the router and one
    // 2-D view per expert into the 3-D ffn_*_exps tensors (a slice is a plain matrix)
    struct lm_weight router;         // ffn_gate_inp (n_expert, n_embd)
    struct lm_weight *gate_exps;     // [n_expert] (n_ff_exp, n_embd); up_exps and down_exps
                                     // follow it in one array (repack.c walks all three)
    struct lm_weight *up_exps;       // [n_expert] (n_ff_exp, n_embd)
    struct lm_weight *down_exps;     // [n_expert] (n_embd, n_ff_exp)
    // bert (post-norm): x = LN(x + attn(x)) with attn_out_norm, then x = LN(x + ffn(x)) with
    // layer_out_norm; every LayerNorm has a bias; the FFN is GELU(up x + b) -> down (no gate)
    struct lm_weight bo;                       // (n_embd) attn_output.bias, optional (bert, gpt-oss)
    struct lm_weight attn_out_norm, attn_out_norm_b;   // (n_embd) each
    struct lm_weight up_b, down_b;             // (n_ff), (n_embd), optional
    struct lm_weight layer_out_norm, layer_out_norm_b; // (n_embd) each
    // gpt-oss (model/gptoss.c): the output projection's bias (bo above), the router's and the
    // experts' biases (F32, added after each matmul as llama.cpp's graph does) and the sinks
    struct lm_weight router_b;       // ffn_gate_inp.bias (n_expert), optional
    struct lm_weight attn_sinks;     // attn_sinks.weight (n_head), optional: lm_attn_job.sinks
    const float *gate_exps_b;        // (n_expert, n_ff_exp) rows of ffn_gate_exps.bias, or NULL
    const float *up_exps_b;          // (n_expert, n_ff_exp) ffn_up_exps.bias, or NULL
    const float *down_exps_b;        // (n_expert, n_embd) ffn_down_exps.bias, or NULL
};

// The gate's activation in the FFN: act(gate) * up. The values are lm_op_gate_up_act's
// act codes.
enum lm_ffn_act {
    LM_FFN_ACT_GELU = 0, // GELU (tanh approximation): gemma3
    LM_FFN_ACT_SILU = 1, // SiLU (SwiGLU): llama, qwen2, qwen3
    LM_FFN_ACT_SWIGLU_OAI = 2, // gpt-oss's clamped SwiGLU (experts only: kernels' swiglu_oai)
};

// The per-architecture shape of the forward pass's blocks (runtime/forward.c), as data. What else differs
// between the families is data too, used wherever present: per-model numbers in lm_hparams
// (embd_scale: gemma3's sqrt(n_embd); final_softcap) and lm_layer (swa, rope_base); optional
// weights the loader sets or leaves NULL (q/k/v biases: qwen2; q_norm/k_norm: gemma3, qwen3;
// output_b: qwen2), which the ops apply when present.
struct lm_decoder_desc {
    bool post_norms;         // post_attn_norm / post_ffw_norm on the attention and FFN outputs
                             // before their residual adds (gemma3; the loader requires them)
    enum lm_ffn_act ffn_act;
    // an encoder (bert): the input is LN(token + type + position embeddings), no pre-norms,
    // each residual add followed by a LayerNorm (post-norm), the FFN ungated (GELU(up x + b)),
    // no final norm and no LM head; attention non-causal unless hp.causal_attn, and no
    // prefix cache (a position's K/V depend on the whole input). runtime/ops_enc.c
    bool encoder;
};

struct lm_arch {
    const char *name; // general.architecture value
    enum lm_status (*load)(struct lm_model *m);
    struct lm_decoder_desc decoder; // read by the forward pass
};

struct lm_model {
    char path[512];
    struct lm_gguf gguf;
    const struct lm_arch *arch;
    struct lm_hparams hp;
    struct lm_layer *layers;
    struct lm_weight tok_embd;    // (n_vocab, n_embd)
    struct lm_weight output_norm; // (n_embd)
    struct lm_weight output;      // (n_vocab, n_embd); == tok_embd when tied
    bool tied_output;
    struct lm_weight output_b;    // (n_vocab), optional output bias (qwen2)
    const float *rope_freqs;      // (n_rot/2) llama3 frequency factors, NULL if none:
                                  // rope_freqs.weight or computed into rope_freqs_buf
    float rope_freqs_buf[256];
    // phi3 LongRoPE: rope_factors_long / _short.weight (n_rot/2), NULL if absent; which one a
    // context uses depends on its n_ctx against n_ctx_orig (lm_model_rope_factors)
    const float *rope_long, *rope_short;
    int32_t n_ctx_orig; // rope.scaling.original_context_length (phi3; 0 = n_ctx_train)
    struct lm_tokenizer *tok;
    char *chat_template;   // tokenizer.chat_template (NUL-terminated copy) or NULL
    uint64_t load_ns;
    uint64_t weight_bytes; // bytes of all tensors
    struct lm_weight *exps_buf; // the layers' expert views (3 * n_layer * n_expert)
    struct lm_weight *mla_buf;  // MLA: the layers' per-head wk_b / wv_b views (2 * n_layer * n_head)
    void *il_buf;          // il copies of the layer matmul weights (lm_model_repack_il)
    uint64_t il_bytes;
    uint64_t il_released;  // bytes of the mapping dropped once repacked (page-aligned interiors)
    // bert (model/bert.c): the input is LN(tok_embd[t] + type_embd[0] + pos_embd[p]); the
    // classifier head (rerankers) is cls (+ cls_b), then cls_out (+ cls_out_b), all optional
    struct lm_weight type_embd;            // (n_token_types, n_embd), optional
    struct lm_weight pos_embd;             // (n_ctx_train, n_embd)
    struct lm_weight tok_norm, tok_norm_b; // (n_embd) each
    struct lm_weight cls, cls_b;           // (n_embd, n_embd), (n_embd)
    // rerankers (pooling rank; model/model_embd.c): the classification head cls.output
    // (n_cls_out, n_embd) and its optional bias, and the rerank prompt
    // (tokenizer.chat_template.rerank, NUL-terminated copy) or NULL
    struct lm_weight cls_out, cls_out_b;
    char *rerank_template;
};

// Helpers for architecture loaders: look up + validate shape; message names the
// file, tensor, expected vs actual. required=false leaves w->data NULL if absent.
enum lm_status lm_model_weight(struct lm_model *m, struct lm_weight *w, const char *name,
                               int64_t n_in, int64_t n_out, bool required);
enum lm_status lm_model_weightf(struct lm_model *m, struct lm_weight *w, bool required,
                                int64_t n_in, int64_t n_out, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
// The sizes every decoder family reads alike: n_embd, n_layer, n_ff, n_head (required keys),
// n_head_kv (default n_head), head_dim_k (attention.key_length, default n_embd / n_head).
// head_dim_v's default differs between families: the loaders read it.
enum lm_status lm_model_block_dims(struct lm_model *m);
// The ranges every decoder family needs of those sizes and of head_dim_v and n_ctx_train
// (positive, heads a multiple of the KV heads, head sizes even and <= 512, layers <= 4096):
// LM_ERR_FORMAT naming the file and every size otherwise. Loaders call it once all are read.
enum lm_status lm_model_check_dims(const struct lm_model *m);
// The weights around the layers: token_embd (which sets hp.n_vocab), output_norm, and the
// LM head, output.weight or, when absent, the token embeddings (tied_output).
enum lm_status lm_model_io_weights(struct lm_model *m);
// One tensor of layer il for lm_model_layer_weights: "blk.<il>.<name>", shape (n_in, n_out)
// as lm_model_weight checks it.
struct lm_layer_tensor {
    struct lm_weight *w;
    const char *name;
    int64_t n_in, n_out;
    bool required; // false: an absent tensor leaves w zeroed (data NULL)
};
// Loads the tensors of layer il in order; stops at (and returns) the first error.
enum lm_status lm_model_layer_weights(struct lm_model *m, int il, const struct lm_layer_tensor *ts,
                                      int n);
// The n_expert 2-D views of the 3-D tensor "blk.<il>.<name>" of GGUF shape [n_in, n_out,
// n_expert] into out[0..n_expert): LM_ERR_FORMAT naming the tensor, expected vs actual
// shape otherwise (a missing tensor too).
enum lm_status lm_model_expert_weights(struct lm_model *m, struct lm_weight *out, int il,
                                       const char *name, int64_t n_in, int64_t n_out,
                                       int64_t n_expert);
// "<arch>.<suffix>" key helpers; an absent optional key leaves *out as it was (the default)
enum lm_status lm_model_key_u32(struct lm_model *m, const char *suffix, uint32_t *out,
                                bool required);
// a u32 key into an int32 hyper-parameter (values over INT32_MAX turn negative, which the
// loaders' range checks reject)
enum lm_status lm_model_key_i32(struct lm_model *m, const char *suffix, int32_t *out,
                                bool required);
enum lm_status lm_model_key_f32(struct lm_model *m, const char *suffix, float *out,
                                bool required);

// Repacks the layer matmul weights that have an il layout (kernels.h) into m->il_buf, on a
// few threads; LUMEN_NO_REPACK=1 skips it. Called by lm_model_load after the arch loader.
// A weight with an il copy is read through it only; its pages in the file mapping are dropped
// (m->il_released counts them).
enum lm_status lm_model_repack_il(struct lm_model *m);
// The whole pages [*a, *b) inside [p, p + n) (empty: *a == *b): what the repacking drops.
void lm_model_page_interior(const void *p, size_t n, uintptr_t *a, uintptr_t *b);

// The RoPE frequency factors a context of n_ctx positions per sequence uses, as llama.cpp's
// llama_model::get_rope_factors chooses them: rope_freqs if set, else rope_long when
// n_ctx rounded up to 256 (llama.cpp pads n_ctx so) exceeds n_ctx_orig, else rope_short
// (either may be NULL: no factors).
const float *lm_model_rope_factors(const struct lm_model *m, int32_t n_ctx);

extern const struct lm_arch lm_arch_gemma3;
extern const struct lm_arch lm_arch_llama; // llama.c: llama, qwen2, qwen3
extern const struct lm_arch lm_arch_qwen2;
extern const struct lm_arch lm_arch_qwen3;
extern const struct lm_arch lm_arch_qwen3moe;
extern const struct lm_arch lm_arch_deepseek2; // deepseek2.c: MLA + shared experts
extern const struct lm_arch lm_arch_phi3; // phi3.c
extern const struct lm_arch lm_arch_gptoss; // gptoss.c: gpt-oss (llama.cpp's openai-moe)
// YaRN as llama.cpp sets it up from the file's rope.scaling.* keys (deepseek2.c): rope_scaling,
// rope_scale (freq_scale 1/factor), yarn_ext_factor, yarn_attn_factor, yarn_corr over
// hp->n_rot and hp->rope_base; *mscale gets the magnitude llama.cpp's deepseek2 squares into
// its attention scale. LM_ERR_FORMAT naming the keys when they are out of range.
enum lm_status lm_model_yarn(struct lm_model *m, float factor, float *mscale);
extern const struct lm_arch lm_arch_granite; // llama.c + granite.c: granite, smollm3
extern const struct lm_arch lm_arch_smollm3;
// What granite and smollm3 add to the llama loader (granite.c), run after it has read
// the hyper-parameters and weights: granite's multipliers, the layers without RoPE.
enum lm_status lm_granite_load_ext(struct lm_model *m);
enum lm_status lm_smollm3_load_ext(struct lm_model *m);
// bert (model/bert.c): hyper-parameters and weights of the BERT encoder family (bge,
// all-MiniLM, XLM-RoBERTa files llama.cpp loads as bert); the forward runs it as an encoder
// (lm_decoder_desc.encoder: post-norm LayerNorms, learned positions, non-causal, no LM head).
extern const struct lm_arch lm_arch_bert;
// nomic-bert (model/bert.c; nomic-embed-text v1.5): bert without learned positions, with NeoX
// RoPE, fused attn_qkv and a SwiGLU FFN
extern const struct lm_arch lm_arch_nomic_bert;
// Q/K/V of layer il as llama.cpp's create_tensor_qkv reads them (phi3.c): attn_qkv.weight as
// three row views (+ attn_qkv.bias, or all three attn_q/k/v.bias), or separate attn_q/k/v
enum lm_status lm_model_qkv(struct lm_model *m, int il);

// Reads <arch>.pooling_type into m->hp.pooling (model/model_embd.c); LM_ERR_FORMAT for a
// value outside llama.cpp's (0..4).
enum lm_status lm_model_load_pooling(struct lm_model *m);

#endif
