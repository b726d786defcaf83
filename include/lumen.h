// lumen public API: load a GGUF model, tokenize, run batches through the one
// forward path, sample, serve many requests through the engine. All symbols are
// prefixed lm_.
//
// Thread-safety, by object:
//   model, tokenizer  read-only once loaded: every const function (tokenize, pieces,
//                     chat templates, getters) may run on any threads at once;
//                     lm_model_free only when nothing else uses the model.
//   context           one thread at a time (lm_decode, lm_kv_cache_*, getters).
//   sampler, detok    one thread at a time per object; distinct objects are independent.
//   engine            see its section: submit / cancel / stats from any thread.
//   lm_error_msg      per thread (the message of the calling thread's last failure).
#ifndef LUMEN_H
#define LUMEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lumen_status.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------- model
struct lm_model;        // opaque: mapped file, hyper-parameters, weight views, tokenizer
struct lm_tokenizer;    // opaque, owned by the model

struct lm_model_params {
    bool validate_only;  // parse + check but do not prepare compute state
};

enum lm_status lm_model_load(struct lm_model **out, const char *path,
                             const struct lm_model_params *params /* may be NULL */);
void lm_model_free(struct lm_model *m);

int32_t lm_model_n_vocab(const struct lm_model *m);
int32_t lm_model_n_ctx_train(const struct lm_model *m);
const char *lm_model_arch(const struct lm_model *m);
const struct lm_tokenizer *lm_model_tokenizer(const struct lm_model *m);

// ---- introspection (`lumen info`, `lumen bench`): the file's header and tensor table, the
// hyper-parameters lumen read from it, and the kernel table it runs on. Strings live as long
// as the model; those given with a length are views into the file, not NUL-terminated.

struct lm_model_info {
    const char *name;         // general.name: name_len bytes ("" and 0 when absent or not a string)
    size_t name_len;
    const char *arch;         // general.architecture (lm_model_arch)
    uint32_t gguf_version;
    uint64_t n_tensors;       // tensor infos in the file (the range of lm_model_tensor)
    uint64_t n_metadata;      // metadata keys
    uint64_t alignment;       // of the tensor data
    uint64_t file_bytes;      // the file, as mapped
    uint32_t file_type;       // general.file_type (llama.cpp's ftype: 15 = Q4_K - Medium), or
                              // UINT32_MAX when absent or not an unsigned integer
    uint64_t load_ns;         // inside lm_model_load: mmap, validate, tokenizer, repacking
    // The kernel table the forward pass runs on ("avx512+amx" where k-quant prefill runs on
    // AMX tiles, "avx512", "avx2", "generic") and why
    // ("cpu_feature avx512_vnni", "forced LUMEN_FORCE_GENERIC=1"): chosen once per process
    // from the CPU and the environment, so the same for every model.
    const char *kernels;
    const char *kernels_reason;
};
void lm_model_info(const struct lm_model *m, struct lm_model_info *out);

// The hyper-parameters as lumen uses them (after per-architecture defaults).
struct lm_model_hparams {
    int32_t n_vocab, n_embd, n_layer;
    int32_t n_head, n_head_kv;       // query heads; key/value heads (grouped-query attention)
    int32_t head_dim_k, head_dim_v;  // per head: of keys and queries; of values
    int32_t n_ff;                    // hidden size of the FFN
    int32_t n_ctx_train;
    float rms_eps;
    // RoPE
    bool rope_neox;           // rotates the halves (x[i], x[i + n_rot/2]) (gemma, qwen), else
                              // adjacent pairs (x[2i], x[2i+1]) (llama)
    int32_t n_rot;            // dimensions of a head that RoPE rotates
    float rope_base;          // frequency base of the global layers
    float rope_base_swa;      // of the sliding-window layers
    float rope_scale;         // positions are multiplied by it (1: no linear scaling)
    bool rope_llama3;         // llama3 scaling: a frequency divisor per rotated pair
    float rope_factor_min, rope_factor_max; // with rope_llama3: the divisors' range
    bool rope_factors_from_tensor; // with rope_llama3: rope_freqs.weight (else computed from
                                   // the rope.scaling.* metadata)
    // attention pattern and scales
    int32_t n_swa;            // sliding window in positions (0: every layer attends to all)
    int32_t swa_period;       // every swa_period-th layer is global (0: all sliding)
    float attn_scale;         // applied to q before q.k
    float embd_scale;         // applied to the token embeddings
    float final_softcap;      // logits are capped by tanh at this value (0: none)
    // LM head
    bool tied_output;         // it is token_embd (the file has no output.weight)
    bool output_bias;         // output.bias is added to the logits
    // mixture of experts (0 experts: a dense FFN)
    int32_t n_expert;         // experts per layer
    int32_t n_expert_used;    // chosen per token
    int32_t n_ff_exp;         // hidden size of one expert
    // multi-head latent attention (deepseek2): the latent's size (0: not MLA). Attention is
    // then MQA over it: n_head_kv 1, head_dim_k = mla_kv_rank + n_rot and head_dim_v =
    // mla_kv_rank, and the KV cache holds head_dim_k values per position and layer, no V
    // (V is the latent, the first head_dim_v values of the K row)
    int32_t mla_kv_rank;
    bool rope_yarn;           // YaRN scaling (deepseek2): rope_scale is its frequency scale
    // LongRoPE (phi3): rope_factors_long / _short.weight; a context whose n_ctx, rounded up
    // to 256, exceeds rope_orig_ctx uses the long ones (as llama.cpp); cos and sin are
    // multiplied by rope_attn_factor (1: none)
    bool rope_longrope;
    int32_t rope_orig_ctx;
    float rope_attn_factor;
    // granite's multipliers (0: none)
    float residual_scale;     // each block's output is multiplied by it before its residual add
    float logit_scale;        // the logits are divided by it
    // gpt-oss's routing: the top-k of the router's (biased) logits, their weights a softmax
    // over those k (llama.cpp's softmax_weight gating), not renormalised
    bool expert_softmax_k;
};
void lm_model_hparams(const struct lm_model *m, struct lm_model_hparams *out);

struct lm_model_layer_info {
    bool sliding;     // attends to the last n_swa positions only (else to all: global)
    bool qkv_bias;    // q, k or v has a bias
    bool qk_norm;     // per-head RMS norm on q and k
    bool post_norms;  // norms on the attention and FFN outputs before their residual adds
    bool no_rope;     // q and k are not rotated (smollm3: every 4th layer)
    bool attn_sinks;  // a learned sink logit per query head joins the softmax (gpt-oss)
    bool o_bias;      // the attention output projection has a bias (gpt-oss)
};
// LM_ERR_ARG (with a message) when layer is outside [0, n_layer); *out is then unchanged.
enum lm_status lm_model_layer_info(const struct lm_model *m, int32_t layer,
                                   struct lm_model_layer_info *out);

// Tensor element types are GGML's type ids as GGUF stores them (0 f32, 1 f16, 8 q8_0,
// 12 q4_K, 14 q6_K, ...); every tensor of a loaded model has one below LM_TENSOR_TYPE_COUNT.
#define LM_TENSOR_TYPE_COUNT 40
const char *lm_tensor_type_name(int32_t type); // "q4_K"; "?" for an id lumen does not know

struct lm_tensor_info {
    const char *name;     // name_len bytes, a view into the file
    size_t name_len;
    int32_t type;         // element type (lm_tensor_type_name)
    int32_t n_dims;
    int64_t ne[4];        // elements along each dimension, ne[0] the contiguous one; 1 beyond n_dims
    uint64_t n_elements;  // the product of ne
    uint64_t n_bytes;     // of its data in the file
};
// Tensor i of the file's table, in file order. LM_ERR_ARG (with a message) when i is not
// below lm_model_info's n_tensors; *out is then unchanged.
enum lm_status lm_model_tensor(const struct lm_model *m, uint64_t i, struct lm_tensor_info *out);

// ---------------------------------------------------------------- tokenizer
// Encode text. add_special: BOS/EOS per the vocab's add_bos/add_eos flags.
// parse_special: control-token text (e.g. "<start_of_turn>") becomes the token.
// *out is malloc'd (caller frees); *n_out its length.
enum lm_status lm_tokenize(const struct lm_tokenizer *t, const char *text, size_t len,
                           bool add_special, bool parse_special, int32_t **out, size_t *n_out);
// Bytes of one token (byte-fallback tokens give their byte; control tokens give ""
// unless render_special). Returns the byte count; writes at most cap bytes.
size_t lm_token_to_piece(const struct lm_tokenizer *t, int32_t id, char *buf, size_t cap,
                         bool render_special);
int32_t lm_tokenizer_n_vocab(const struct lm_tokenizer *t);
int32_t lm_tokenizer_bos(const struct lm_tokenizer *t);
int32_t lm_tokenizer_eos(const struct lm_tokenizer *t);
bool lm_tokenizer_is_eog(const struct lm_tokenizer *t, int32_t id); // eos, eot, end_of_turn...
// Whether lm_tokenize with add_special prepends BOS / appends EOS (the vocabulary's flags).
bool lm_tokenizer_add_bos(const struct lm_tokenizer *t);
bool lm_tokenizer_add_eos(const struct lm_tokenizer *t);
// Longest piece of any token, in bytes (sizes lm_detok_push's buffer).
size_t lm_tokenizer_max_piece(const struct lm_tokenizer *t);
enum lm_tokenizer_kind {
    LM_TOKENIZER_SPM = 0, // SentencePiece BPE with byte fallback (tokenizer.ggml.model "llama")
    LM_TOKENIZER_BPE = 1, // byte-level BPE with a regex pre-tokenizer ("gpt2")
    LM_TOKENIZER_WPM = 2, // WordPiece with the BERT normaliser ("bert")
    LM_TOKENIZER_UGM = 3, // SentencePiece Unigram with a precompiled charsmap ("t5")
};
enum lm_tokenizer_kind lm_tokenizer_kind(const struct lm_tokenizer *t);
// A tokenizer alone, from a GGUF file's tokenizer.ggml.* metadata (a model of any
// architecture, or a vocabulary-only file such as llama.cpp's ggml-vocab-*.gguf); the GGUF is
// closed again before it returns. Free it with lm_tokenizer_close (not for a model's own).
enum lm_status lm_tokenizer_open(struct lm_tokenizer **out, const char *path);
void lm_tokenizer_close(struct lm_tokenizer *t);

// ---- streaming detokenizer

// Holds back the bytes of a UTF-8 sequence that is split across tokens (byte-fallback
// tokens of an emoji, say) so every chunk handed out ends on a character boundary.
// Invalid bytes (stray continuation bytes, 0xF8..0xFF) are passed through, never held.
struct lm_detok {
    uint8_t pend[4];
    uint8_t n_pend;
    bool render_special;
};

void lm_detok_init(struct lm_detok *d, bool render_special);
// Appends the piece of id; writes the complete characters to out and sets *n_out.
// cap must be >= lm_tokenizer_max_piece(t) + 4, else LM_ERR_ARG and d is unchanged.
enum lm_status lm_detok_push(const struct lm_tokenizer *t, struct lm_detok *d, int32_t id, char *out,
                             size_t cap, size_t *n_out);
// Emits whatever is still held (an incomplete sequence at end of stream); at most 4 bytes.
size_t lm_detok_flush(struct lm_detok *d, char *out, size_t cap);

// ---- chat templates

enum lm_chat_template {
    LM_CHAT_TEMPLATE_NONE = -1,   // not detected / not supported
    LM_CHAT_TEMPLATE_GEMMA = 0,   // <start_of_turn>role\n...<end_of_turn>\n
    LM_CHAT_TEMPLATE_LLAMA3 = 1,  // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
    LM_CHAT_TEMPLATE_CHATML = 2,  // <|im_start|>role\n...<|im_end|>\n
    LM_CHAT_TEMPLATE_PHI3 = 3,    // <|role|>\n...<|end|>\n (Phi-3, Phi-3.5, Phi-4-mini)
    LM_CHAT_TEMPLATE_GRANITE = 4, // <|start_of_role|>role<|end_of_role|>...<|end_of_text|>\n
                                  // (IBM Granite 3.x)
    LM_CHAT_TEMPLATE_HARMONY = 5, // <|start|>role<|channel|>ch<|message|>...<|end|> (gpt-oss;
                                  // lm_chat_apply_harmony)
    LM_CHAT_TEMPLATE_DEEPSEEK_R1 = 6, // system<｜User｜>...<｜Assistant｜>...<｜end▁of▁sentence｜>, the
                                      // generation prompt opening a <think> span (R1 distills)
};

// A tool call an assistant message made (OpenAI's message.tool_calls[i]).
struct lm_chat_tool_call {
    const char *id;        // "call_..." (may be NULL)
    const char *name;      // the function's name
    const char *arguments; // its arguments: JSON text of an object (OpenAI's string)
};

struct lm_chat_msg {
    const char *role;    // "system", "user", "assistant" (Gemma: -> "model"), "tool", or any other
    const char *content;
};

// The tool parts of one message (beside its lm_chat_msg; zeroed: none).
struct lm_chat_msg_tools {
    const struct lm_chat_tool_call *tool_calls; // assistant: the calls it made
    size_t n_tool_calls;
    const char *tool_call_id; // role "tool": the call this message answers (may be NULL)
};

// How a template's family writes tool calls (docs/structured.md, "Tool calls"):
// QWEN (ChatML):  <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, results in
//                 <tool_response>, the tools in the system message inside <tools></tools>;
// LLAMA3 (3.1+):  {"name": ..., "parameters": {...}}, results in the "ipython" role;
// GENERIC (Gemma 3 and any other): one JSON object as the whole answer,
//                 {"tool_calls": [{"name": ..., "arguments": {...}}]} or {"response": "..."}.
// HARMONY (gpt-oss): <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{...}<|call|>,
//                 results from "functions.NAME to=assistant", the tools as a TypeScript namespace.
enum lm_chat_tool_format {
    LM_CHAT_TOOLS_GENERIC = 0,
    LM_CHAT_TOOLS_QWEN = 1,
    LM_CHAT_TOOLS_LLAMA3 = 2,
    LM_CHAT_TOOLS_HARMONY = 3,
};
enum lm_chat_tool_format lm_chat_tool_format(enum lm_chat_template tmpl);

// Writes the prompt text for msgs as llama.cpp's llm_chat_apply_template does (Gemma:
// system messages are trimmed and merged into the next non-model turn; contents are
// trimmed of ASCII whitespace). add_generation_prompt appends the opening of a model turn.
// *out is malloc'd and NUL-terminated; *n_out excludes the NUL.
enum lm_status lm_chat_apply(enum lm_chat_template tmpl, const struct lm_chat_msg *msgs, size_t n,
                             bool add_generation_prompt, char **out, size_t *n_out);
// lm_chat_apply with tools: parts[n] (NULL: none) holds each message's tool calls / the call
// it answers, rendered in the family's format (lm_chat_tool_format; "tool" messages are
// results); tools (len bytes; NULL or 0: none) is the JSON text of OpenAI's "tools" array
// ([{"type": "function", "function": {"name", "description", "parameters"}}]), presented to
// the model in the system prompt as the family's template does (JSON re-written as the
// template's tojson writes it; arguments that are not JSON, e.g. cut by max_tokens, as they
// are). LM_ERR_ARG when tools is not a JSON array or a call has no name.
enum lm_status lm_chat_apply_tools(enum lm_chat_template tmpl, const struct lm_chat_msg *msgs,
                                   const struct lm_chat_msg_tools *parts, size_t n, const char *tools,
                                   size_t len, bool add_generation_prompt, char **out, size_t *n_out);

// The harmony format (gpt-oss's official template, byte for byte): the system message (identity,
// knowledge cutoff, date, "Reasoning: <effort>", the channels), the first system/developer
// message as the developer's "# Instructions" with the tools as a TypeScript namespace, user
// turns, assistant finals (prior reasoning dropped; an assistant turn with tool calls keeps its
// analysis until a later answer, and renders its first call), tool results as JSON strings.
// lm_chat_apply / lm_chat_apply_tools with LM_CHAT_TEMPLATE_HARMONY use the defaults (NULL opts).
struct lm_chat_harmony_opts {
    const char *reasoning_effort; // "low", "medium", "high" (written as given); NULL: "medium"
    const char *date;             // "YYYY-MM-DD" after "Current date: "; NULL: today (local time)
    const char *model_identity;   // NULL: "You are ChatGPT, a large language model trained by OpenAI."
    const char *const *reasoning; // NULL, or one per message: an assistant's reasoning (reasoning_content,
                                  // the template's "thinking"; NULL entries: none)
};
enum lm_status lm_chat_apply_harmony(const struct lm_chat_harmony_opts *opts, const struct lm_chat_msg *msgs,
                                     const struct lm_chat_msg_tools *parts, size_t n, const char *tools,
                                     size_t len, bool add_generation_prompt, char **out, size_t *n_out);

// Picks the template for a model. template_text (tokenizer.chat_template, may be NULL) is
// matched as llama.cpp's llm_chat_detect_template does (a bare name "chatml", "llama3",
// "gemma" or the markers in the Jinja text), returning NONE when it names a template lumen
// lacks. Without a template text: the vocabulary's turn tokens (<|start_header_id|> +
// <|eot_id|>, <|im_start|> + <|im_end|>, <start_of_turn>), then arch ("gemma*"). The turn
// end tokens of all three are end-of-generation tokens (lm_tokenizer_is_eog).
enum lm_chat_template lm_chat_template_detect(const struct lm_tokenizer *t, const char *arch,
                                              const char *template_text);
const char *lm_chat_template_name(enum lm_chat_template tmpl); // "gemma", ..., "none"
// The template named "gemma", "llama3" or "chatml" (NONE for any other name).
enum lm_chat_template lm_chat_template_from_name(const char *name);
// The model's tokenizer.chat_template text (NUL-terminated, owned by the model), or NULL.
const char *lm_model_chat_template(const struct lm_model *m);


// ---------------------------------------------------------------- context + batch
// A context runs the forward pass for any number of sequences that share one KV pool
// (blocks of 16 positions, see docs/kv_cache.md). Not thread-safe: one thread at a
// time calls the functions taking a context (lm_engine wraps one for many threads).
struct lm_context;

// Element type of the KV cache's K or V rows (lm_context_params.kv_type_k / kv_type_v; the
// -ctk / -ctv options, docs/kv_cache.md). Q8_0 halves the pool's memory (blocks of 32 values
// in 34 bytes) and needs head sizes that are multiples of 32.
enum lm_kv_type {
    LM_KV_F16 = 0,  // the default
    LM_KV_Q8_0 = 1,
};
// "f16", "q8_0"; NULL for another value.
const char *lm_kv_type_name(enum lm_kv_type t);
// The type named s ("f16", "q8_0", as llama.cpp's --cache-type-k). LM_ERR_ARG with a message
// naming s and the accepted names for anything else (NULL too).
enum lm_status lm_kv_type_from_name(const char *s, enum lm_kv_type *out);

struct lm_context_params {
    int32_t n_ctx;      // max positions of one sequence (0 = model's training context)
    int32_t n_seq_max;  // sequence ids are 0 .. n_seq_max-1 (0 = 1; at most 4096)
    int32_t n_batch;    // max entries per lm_decode call (0 = 512)
    int32_t n_threads;  // 0 = physical cores
    int32_t kv_tokens;  // KV pool capacity in positions, shared by all sequences, rounded up
                        // to whole blocks (0 = n_ctx); memory grows with the blocks in use
    bool no_prefix_cache; // do not index full blocks for reuse by later sequences
    int32_t n_logits_max; // entries of one batch that may want logits (0 = n_batch); the
                          // logits buffer holds this many rows of n_vocab floats
    // K / V row types of the pool (0 = f16). lm_context_init: LM_ERR_ARG for a value that is
    // no lm_kv_type, LM_ERR_UNSUPPORTED for q8_0 with a head size (or a draft model's) that is
    // not a multiple of 32. A draft context (lm_context_init_pair) shares the target's types.
    enum lm_kv_type kv_type_k, kv_type_v;
};

// One entry of a batch: token at position pos of sequence seq; logits computed iff want_logits.
struct lm_batch_entry {
    int32_t token;
    int32_t pos;
    int32_t seq;
    bool want_logits;
};

enum lm_status lm_context_init(struct lm_context **out, struct lm_model *m,
                               const struct lm_context_params *params);
void lm_context_free(struct lm_context *c);
int32_t lm_context_n_threads(const struct lm_context *c);
int32_t lm_context_n_ctx(const struct lm_context *c);
int32_t lm_context_n_seq(const struct lm_context *c);
int32_t lm_context_n_batch(const struct lm_context *c);
// Bytes of the scratch buffers sized at init (activations, logits, attention rows).
uint64_t lm_context_scratch_bytes(const struct lm_context *c);
// Barrier waits of thread ith of the context's pool since the last reset (profiling).
struct lm_context_thread_stats {
    uint64_t wait_ns;
    uint64_t n_barriers;
};
void lm_context_thread_stats(const struct lm_context *c, int ith, struct lm_context_thread_stats *out);
void lm_context_thread_stats_reset(struct lm_context *c);

// Runs the forward pass over n entries: prefill, decode, batched decode of many sequences,
// speculative verification and any mix of them are all this call, and each entry's
// results are the same whatever else shares the batch (batch invariance, bit for bit).
// Entries of one sequence must have consecutive positions continuing that sequence
// (lm_kv_cache_seq_pos). LM_ERR_KV_FULL: the pool lacks blocks for the batch; nothing
// was changed (free sequences or wait, then retry).
enum lm_status lm_decode(struct lm_context *c, const struct lm_batch_entry *entries, int32_t n);
// Logits (n_vocab floats) of the i-th entry of the last lm_decode that asked for them
// (i counts only entries with want_logits), or NULL. Valid until the next lm_decode on
// this context or lm_context_free.
const float *lm_get_logits(const struct lm_context *c, int32_t i);

// ---- Embeddings (docs/embeddings.md)
// The pooling of a sequence's final normed hidden states into one vector: the values of
// llama.cpp's pooling_type (GGUF key <arch>.pooling_type). NONE: one vector per token.
enum lm_pooling {
    LM_POOLING_UNSPECIFIED = -1, // the model's (requests)
    LM_POOLING_NONE = 0,
    LM_POOLING_MEAN = 1,
    LM_POOLING_CLS = 2,          // the first token's
    LM_POOLING_LAST = 3,         // the last token's (decoder embedding models: Qwen3-Embedding)
    LM_POOLING_RANK = 4,         // rerankers: the last token's row (causal; the first's when
                                 // not) through the classification head cls.output
};
// The model's <arch>.pooling_type (LM_POOLING_NONE when the file has none: chat models).
enum lm_pooling lm_model_pooling(const struct lm_model *m);
int32_t lm_model_n_embd(const struct lm_model *m);
// Rerankers: the classification head's outputs (cls.output.weight rows; 0: none) and the
// rerank prompt with {query} and {document} (tokenizer.chat_template.rerank; NULL: none).
int32_t lm_model_n_cls_out(const struct lm_model *m);
const char *lm_model_rerank_template(const struct lm_model *m);
// A reranker's input for (query, document), as llama-server makes it: the rerank template with
// {query} and {document} filled in, tokenized with special-token text parsed and no BOS/EOS
// added; without a template, [BOS] query [EOS] document [EOS] (BOS / EOS as the vocabulary
// adds them). *ids is malloc'd (free it). Thread-safe (reads the model only).
enum lm_status lm_rerank_tokens(const struct lm_model *m, const char *query, size_t qlen,
                                const char *doc, size_t dlen, int32_t **ids, size_t *n);
const char *lm_pooling_name(enum lm_pooling p); // "none", "mean", "cls", "last", "rank"
// "none", "mean", "cls", "last", "rank" -> *out; LM_ERR_ARG otherwise.
enum lm_status lm_pooling_from_name(const char *s, enum lm_pooling *out);
// Embedding mode of sequence seq (off at init): its entries that want logits get their final
// normed hidden state (n_embd floats, lm_get_embeddings) instead, without the LM head, and
// do not count against n_logits_max. Other sequences of the same batch are unaffected.
enum lm_status lm_context_seq_set_embd(struct lm_context *c, int32_t seq, bool on);
// Final normed hidden state (n_embd floats) of the i-th entry of the last lm_decode that
// wanted logits in a sequence in embedding mode (i counts only those, in batch order), or
// NULL. Valid until the next lm_decode on this context or lm_context_free.
const float *lm_get_embeddings(const struct lm_context *c, int32_t i);
// Causal attention (the default: a token attends to the positions up to its own) or not:
// every token of a sequence attends to all of that sequence's positions up to the last one
// the batch holds (encoders). Non-causal results are a sequence's own only when the whole
// sequence is in one batch; latent attention (deepseek2) is always causal.
void lm_context_set_causal(struct lm_context *c, bool causal);

// ---- Top-k selection fused into the LM head
// The LM head's row pass can also select, for every entry that wants logits, its k largest
// logits while each chunk of logits it wrote is still in cache, so a sampler that needs no
// more than those (lm_sampler_top_k_need) skips its own pass over the n_vocab logits. The
// full logits are still computed (lm_get_logits). Candidates rank by logit descending, then
// by id ascending (NaN as -inf); lm_sampler_sample ranks the same way, so sampling from
// lm_get_top_k gives the token lm_sampler_sample gives on the full row, bit for bit.
#define LM_TOP_K_MAX 256
struct lm_token_logit {
    int32_t id;
    float logit;
};
// From the next lm_decode on, select the k best logits of each entry that wants logits
// (k = 0: off, the default; k in [1, LM_TOP_K_MAX], else LM_ERR_ARG). Allocates here, and
// only for a k larger than any before on this context (cheap to call every step).
enum lm_status lm_context_set_top_k(struct lm_context *c, int32_t k);
// The i-th logits entry's min(k, n_vocab) best logits, best first, in *out (valid as long
// as lm_get_logits' rows); returns their count, 0 when the last lm_decode selected none.
int32_t lm_get_top_k(const struct lm_context *c, int32_t i, const struct lm_token_logit **out);

// ---------------------------------------------------------------- KV cache sequences
// Every function validates its sequence ids and ranges: LM_ERR_ARG with a message, no
// change made. Rollback is exact at any depth: every position's K/V stays in the pool
// until removed (sliding-window layers included).
// Next position of seq (positions [0, pos) are held or were removed as a hole), or -1 if
// seq is out of range.
int32_t lm_kv_cache_seq_pos(const struct lm_context *c, int32_t seq);
// Same as lm_kv_cache_seq_pos (older name).
int32_t lm_kv_cache_seq_len(const struct lm_context *c, int32_t seq);
// Removes positions [p0, p1) of seq (p1 < 0: to the end). A range reaching the end is a
// rollback: the sequence continues at p0. A range inside leaves a hole that attention
// skips; later positions keep theirs. p0 = 0, p1 = -1 clears the sequence.
enum lm_status lm_kv_cache_seq_rm(struct lm_context *c, int32_t seq, int32_t p0, int32_t p1);
// Gives the empty sequence dst the first n_pos positions of src (n_pos < 0: all) by
// sharing src's blocks, no data copied; whichever writes into a shared block first
// copies it (copy-on-write).
enum lm_status lm_kv_cache_seq_cp(struct lm_context *c, int32_t src, int32_t dst, int32_t n_pos);
// Removes every sequence but seq.
enum lm_status lm_kv_cache_seq_keep(struct lm_context *c, int32_t seq);
// Prefix cache: attaches to the empty sequence seq the longest run of cached full blocks
// whose tokens begin tokens[0, n) (at least one token is left to compute, for logits);
// *n_attached positions are then held and decoding continues at that position.
enum lm_status lm_kv_cache_prefix_attach(struct lm_context *c, int32_t seq,
                                         const int32_t *tokens, int32_t n,
                                         int32_t *n_attached);

struct lm_kv_cache_stats {
    int32_t block_size;       // positions per block
    int32_t n_blocks;         // pool capacity
    int32_t n_used;           // held by at least one sequence
    int32_t n_cached_free;    // held by none, kept for the prefix cache (evicted LRU first)
    int32_t n_free;           // neither
    uint64_t block_bytes;     // K and V of all layers for one block
    uint64_t bytes_used;      // n_used * block_bytes
    uint64_t prefix_queries, prefix_query_tokens, prefix_hit_tokens;
    uint64_t evictions, cow_copies;
};
void lm_kv_cache_stats(const struct lm_context *c, struct lm_kv_cache_stats *out);

// ---------------------------------------------------------------- sampling
struct lm_sampler_params {
    float temperature;    // <= 0: greedy
    int32_t top_k;        // <= 0: off
    float top_p;          // >= 1: off
    float min_p;          // <= 0: off
    float repeat_penalty; // 1: off
    int32_t repeat_last_n;// window of the penalties: the last n accepted tokens (default 64)
    uint64_t seed;
    // OpenAI's penalties over the same window (llama.cpp's order: after repeat_penalty):
    // logit -= count * frequency_penalty + (count > 0) * presence_penalty. 0: off.
    float presence_penalty;
    float frequency_penalty;
};
struct lm_sampler;
enum lm_status lm_sampler_init(struct lm_sampler **out, const struct lm_sampler_params *p,
                               int32_t n_vocab);
void lm_sampler_free(struct lm_sampler *s);
int32_t lm_sampler_sample(struct lm_sampler *s, const float *logits);
// How many of the best logits the chain needs to draw its token: 1 for greedy, top_k when
// top-k is on (at most LM_TOP_K_MAX) and no penalty is; 0 when it needs every logit
// (penalties, top-k off). Set lm_context_set_top_k to it, then lm_sampler_sample_top_k.
int32_t lm_sampler_top_k_need(const struct lm_sampler *s);
// Draws from the n best logits of a row, best first (lm_get_top_k): the token
// lm_sampler_sample would draw from the whole row, and the same RNG step. -1 (LM_ERR_ARG) if
// n < lm_sampler_top_k_need(s) or the chain needs every logit.
int32_t lm_sampler_sample_top_k(struct lm_sampler *s, const struct lm_token_logit *top, int32_t n);
// The chain on the tokens allowed by mask, a bitset of (n_vocab + 31) / 32 words (bit (id & 31)
// of word id >> 5; lm_grammar_matcher_fill_mask): the others count as logit -inf, so none is
// ever drawn. -1 (LM_ERR_ARG) when the mask allows no token, (LM_ERR_NOMEM) without memory for
// the masked row (allocated at the first call).
int32_t lm_sampler_sample_masked(struct lm_sampler *s, const float *logits, const uint32_t *mask);
void lm_sampler_accept(struct lm_sampler *s, int32_t token); // feeds the repetition window
struct lm_sampler_params lm_sampler_params_default(void);
// Speculative verification of a drafted token (docs/speculative.md): returns the token to
// emit at this position, drawn so that its distribution is exactly lm_sampler_sample's on
// the same logits (the whole chain: penalties, top-k, top-p, min-p, temperature); *accepted
// tells whether it is the draft. q: the drafter's probabilities (n_vocab floats), or NULL
// for a point mass at draft (prompt lookup): then the token is lm_sampler_sample's own
// draw, so a seeded run gives the same text with and without drafting. With q: accept
// with probability min(1, p/q), else draw from max(0, p - q) renormalised. Greedy: the
// argmax, accepted iff it is the draft. draft < 0: plain sampling. Does not call accept.
int32_t lm_sampler_verify(struct lm_sampler *s, const float *logits, int32_t draft, const float *q,
                          bool *accepted);

// ---------------------------------------------------------------- structured output
// Grammars in llama.cpp's GBNF (docs/structured.md) constrain generation: a matcher follows the
// text generated so far and gives, before each token, the set of tokens that keep the text a
// prefix of a sentence of the grammar (end-of-generation tokens: once the text is a sentence).

struct lm_grammar; // compiled for one tokenizer; immutable, shared by any threads; refcounted

struct lm_grammar_options {
    const char *root;            // start rule (NULL: "root")
    // Lazy grammar (tool_choice auto): generation is free until one of the trigger strings
    // appears in the output; the grammar then matches the output from the trigger's first
    // byte (so the grammar's root starts with the trigger). n_triggers 0: constrained from the
    // first token.
    const char *const *triggers;
    int32_t n_triggers;
    // Limits against hostile grammars (0: the defaults, documented in docs/structured.md):
    size_t max_rules;            // rules after expanding repetitions
    uint64_t max_compile_ms;     // wall time of compiling (LM_ERR_ARG "... exceeds ... ms")
};
struct lm_grammar_options lm_grammar_options_default(void);

// Compiles GBNF text for tokenizer t. LM_ERR_ARG with one message naming line and column of a
// syntax error, an undefined or unused-but-missing rule, left recursion, a rule that can reach
// no end, or an exceeded limit. *out is NULL on failure.
enum lm_status lm_grammar_compile(struct lm_grammar **out, const struct lm_tokenizer *t,
                                  const char *gbnf, size_t len,
                                  const struct lm_grammar_options *opt);
struct lm_grammar *lm_grammar_ref(struct lm_grammar *g); // +1 reference, returns g
void lm_grammar_free(struct lm_grammar *g);              // -1 reference; NULL is fine

// One sequence's position in a grammar: used by one thread at a time.
struct lm_grammar_matcher;
enum lm_status lm_grammar_matcher_init(struct lm_grammar_matcher **out, struct lm_grammar *g);
void lm_grammar_matcher_free(struct lm_grammar_matcher *m);
// The allowed tokens as a bitset of (n_vocab + 31) / 32 words, bit (id & 31) of word id >> 5.
// End-of-generation tokens are allowed iff the text so far is a sentence of the grammar.
// Lazy grammar before its trigger: every token.
void lm_grammar_matcher_fill_mask(struct lm_grammar_matcher *m, uint32_t *bits);
// Advances by one token: false (state unchanged) if the token is not allowed.
bool lm_grammar_matcher_accept(struct lm_grammar_matcher *m, int32_t token);
bool lm_grammar_matcher_can_end(const struct lm_grammar_matcher *m); // the text is a sentence
// The text can continue no further (a sentence and nothing may follow): the request is done.
bool lm_grammar_matcher_is_done(const struct lm_grammar_matcher *m);
// Jump-forward: the text the grammar forces from here (each byte the only one allowed: the rest
// of a key, "\": \"", closing brackets) cut into the longest tokens along it, up to max, written to
// out, not accepted. Every one is allowed, but the model may spell the same text with other
// tokens: the engine verifies them as drafts (the text and its distribution stay exact).
int32_t lm_grammar_matcher_forced(struct lm_grammar_matcher *m, int32_t *out, int32_t max);
// Undoes the last n accepted tokens (speculative rejection); false if n exceeds
// LM_GRAMMAR_MAX_ROLLBACK or the tokens accepted.
#define LM_GRAMMAR_MAX_ROLLBACK 64
bool lm_grammar_matcher_rollback(struct lm_grammar_matcher *m, int32_t n);

// JSON Schema (text) -> GBNF text (root rule "root"), malloc'd, NUL-terminated. LM_ERR_ARG with one
// message naming the JSON pointer and the keyword for an unsupported keyword or value, a bad
// schema, or an exceeded limit (depth, size, compile time). Never ignores a keyword silently.
enum lm_status lm_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf, size_t *n_gbnf);

// ---------------------------------------------------------------- engine (scheduler)
// The engine loop that serves many requests on one context: requests are queued,
// admitted while sequences and KV blocks allow, and run in steps. Each step decodes one
// token for every running request and fills the rest of its token budget with prefill
// chunks of the others, so a long prompt delays running streams by at most one chunk.
// Full prefix blocks of earlier requests are reused (prefix cache). When the KV pool
// runs out, admission waits; preemption (free a request's blocks, recompute it later,
// bit-identical) is the last resort. A request's tokens do not depend on what else
// runs beside it.
//
// Thread-safety: lm_engine_submit, lm_engine_cancel and lm_engine_stats may be called
// from any thread at any time. Steps run either on the engine's own thread
// (lm_engine_start) or on one caller thread that calls lm_engine_step; never both.
// Events are delivered on the thread running the steps, in order per request; a callback
// must return quickly and may call submit, cancel and stats (not step or free).
// lm_engine_free must not race any other call on the engine.
struct lm_engine;

struct lm_engine_params {
    int32_t max_running;   // requests decoding at once (0 = 8)
    int32_t max_waiting;   // requests held beyond max_running: submit returns LM_ERR_BUSY once
                           // running + queued reach max_running + max_waiting (0 = 64)
    int32_t step_tokens;   // token budget of one step (0 = 256; >= max_running)
    int32_t n_ctx;         // max positions of one request, prompt + generated (0 = model's)
    int32_t kv_tokens;     // KV pool capacity in positions, shared (0 = n_ctx)
    int32_t n_threads;     // 0 = physical cores
    bool no_prefix_cache;
    // Speculative decoding with a draft model (docs/speculative.md): a smaller model of the
    // same vocabulary (lm_engine_init refuses another with LM_ERR_ARG naming both files and
    // the first token id that differs) drafts for the requests that ask for it
    // (lm_request_params.use_draft). It runs on the engine's thread pool and KV pool: the
    // pool gets as many blocks again for the draft's positions (kv_tokens counts the
    // target's). NULL: none. The engine does not own it (free it after lm_engine_free).
    struct lm_model *draft_model;
    enum lm_kv_type kv_type_k, kv_type_v; // KV cache row types (lm_context_params)
    // Embedding tokens a step carries at most while requests decode (docs/embeddings.md: the
    // streams' inter-token gaps stay near a decode step's; prompts go first and count against
    // it; without decodes embeddings take the whole budget). 0 = 16; >= step_tokens: no cap.
    int32_t embed_step_tokens;
};

enum lm_finish {
    LM_FINISH_NONE = 0,   // more events follow
    LM_FINISH_EOG,        // an end-of-generation token, or the end of the request's grammar
                          // (the text can go no further), delivered with this event
    LM_FINISH_LENGTH,     // max_tokens reached
    LM_FINISH_CONTEXT,    // the request's context (n_ctx) is full
    LM_FINISH_CANCELLED,  // lm_engine_cancel or lm_engine_free
    LM_FINISH_ERROR,      // the forward pass failed (message in the event)
};
const char *lm_finish_name(enum lm_finish f); // "stop", "length", ...

#define LM_MAX_TOP_LOGPROBS 20

struct lm_request_params {
    struct lm_sampler_params sampling;
    int32_t max_tokens;   // generated tokens at most (0 = until end of generation / context)
    bool ignore_eos;      // end-of-generation tokens do not finish the request
    int32_t n_logprobs;   // 0: none; 1..LM_MAX_TOP_LOGPROBS+1: log-probability of each
                          // sampled token and the n_logprobs - 1 most likely alternatives
    const int32_t *bias_tokens; // logit bias: logits[bias_tokens[i]] += bias_values[i]
    const float *bias_values;   // (copied at submit; NULL with n_bias 0)
    int32_t n_bias;
    // Speculative decoding (docs/speculative.md): drafts from the request's own tokens
    // (prompt lookup: the tokens that followed the latest earlier occurrence of its last
    // few tokens), verified in the step's one forward pass; the text is the same as without.
    // Drafts only take budget left after every running request's decode token, and their
    // length adapts to the measured acceptance and the measured cost of longer steps.
    bool lookup;
    int32_t draft_max;    // drafted tokens per step at most (0 = LM_DRAFT_MAX_DEFAULT)
    // Drafts from the engine's draft model (lm_engine_params.draft_model; LM_ERR_ARG on an
    // engine without one): k small forwards of the draft per step, verified in the step's
    // forward pass; greedy text is the same as without, sampled text has the same
    // distribution (accept with probability min(1, p/q), else draw from max(0, p - q)).
    // With lookup too, the draft model drafts (lookup is ignored).
    bool use_draft;
    // With use_draft: draft min(draft_max, room) tokens every step instead of the length the
    // cost model picks (tests and measurements of acceptance; not faster).
    bool draft_fixed;
    // Structured output (docs/structured.md): every sampled token keeps the generated text a
    // prefix of a sentence of this grammar (compiled for the model's tokenizer); the request
    // finishes ("stop") when the grammar can go no further, and end-of-generation tokens are
    // drawn only where the text is a sentence. Tokens the grammar forces (the rest of a key,
    // closing brackets) join the next step as certain drafts (jump-forward). The engine holds
    // a reference from submit to the request's end. NULL: unconstrained.
    struct lm_grammar *grammar;
    // Sample from the whole logits row even where the chain needs only its best k (the LM
    // head's fused top-k selection, lm_context_set_top_k, is then not asked for): the same
    // tokens, for comparisons and measurements (lumen run --no-fused-top-k).
    bool full_logits;
    // Embedding (docs/embeddings.md): the prompt's final normed hidden states pooled into one
    // vector (no generation, no sampling), L2-normalised, delivered in the request's one
    // event (lm_event.embd, finish LM_FINISH_EOG). The prompt may fill the whole context.
    // With rank pooling (a reranker: the model has a classification head) the event's
    // vector is the head's outputs instead (n_cls_out values, softmaxed for qwen3 as llama.cpp
    // does: Qwen3-Reranker's P(yes), P(no)); the first is llama-server's relevance_score.
    bool embed;
    enum lm_pooling pooling; // MEAN, CLS, LAST or RANK; NONE (0) or UNSPECIFIED: the model's,
                             // and LM_ERR_ARG when that is NONE (a chat model), or RANK
                             // without a head
    int32_t dimensions;      // Matryoshka: the first `dimensions` values, renormalised (0: all)
    // A thinking span (reasoning models; docs/server.md, "Reasoning"): the tokens
    // think_start[0, n_think_start) open it as the answer's first tokens (or think_open: the
    // prompt opened it already), think_end[0, n_think_end) close it. With think_budget >= 0,
    // once the span holds think_budget generated tokens the engine delivers think_end's
    // (remaining) tokens as the next ones whatever the logits say (0: at once), then the
    // answer runs on; max_tokens counts every generated token, the span's too. The grammar
    // constrains only the answer after the span: its mask also allows think_start[0] at the
    // first token, and it sees no token of the span. Arrays copied at submit; n_think_end 0:
    // no span (think_budget ignored). -1 <= think_budget, else LM_ERR_ARG.
    const int32_t *think_start, *think_end;
    int32_t n_think_start, n_think_end;
    bool think_open;
    int32_t think_budget;  // -1: no budget (lm_request_params_default)
    // The first n_think_close tokens of think_end end the span when the model writes them
    // (0: all of them). harmony's span ends at <|end|><|start|>assistant (3) though the budget
    // delivers <|end|><|start|>assistant<|channel|>final<|message|>: the grammar then sees the
    // forced tokens past the first n_think_close as the answer's, as it sees them when the
    // model writes them. A start marker whose first token the grammar did not allow is
    // completed once begun (the mask allows only its next token).
    int32_t n_think_close;
    // The budget delivers think_end's first n_think_force tokens (0: all; else n_think_close..
    // n_think_end). Fewer than all (harmony with tools: <|end|><|start|>assistant) leaves the model
    // the choice of how the answer goes on (a final answer or a tool call), and the span cannot
    // open again: the start marker's last token is masked after its others, for the rest of the
    // answer (the budget is spent; LM_ERR_ARG outside the range).
    int32_t n_think_force;
};
#define LM_DRAFT_MAX_DEFAULT 8
#define LM_DRAFT_MAX_LIMIT 32
struct lm_request_params lm_request_params_default(void);

struct lm_event {
    uint64_t id;            // the request (lm_engine_submit)
    int32_t token;          // the sampled token, or -1 (an event that only finishes)
    int32_t index;          // its index among the request's generated tokens
    uint64_t t_ns;          // when it was sampled (CLOCK_MONOTONIC)
    enum lm_finish finish;  // LM_FINISH_NONE until the request's last event
    int32_t n_prompt;       // prompt tokens
    int32_t n_cached;       // prompt tokens taken from the prefix cache
    uint64_t t_submit_ns, t_admit_ns; // queued at, first scheduled at
    float logprob;          // of token (n_logprobs > 0)
    int32_t n_top;          // alternatives below, most likely first
    const int32_t *top_tokens;   // valid during the callback
    const float *top_logprobs;
    const char *error;      // LM_FINISH_ERROR: what failed
    const float *embd;      // an embedding request's vector (n_embd floats), valid during
    int32_t n_embd;         // the callback; NULL / 0 otherwise
};
typedef void (*lm_event_fn)(void *user, const struct lm_event *ev);

enum lm_status lm_engine_init(struct lm_engine **out, struct lm_model *m,
                              const struct lm_engine_params *params);
// Cancels what is left (each request gets its LM_FINISH_CANCELLED event), stops the
// engine thread, frees everything.
void lm_engine_free(struct lm_engine *e);
// Queues a request; events go to cb(user, ...). LM_ERR_ARG: empty or out-of-range prompt,
// prompt + max_tokens beyond n_ctx or the pool, bad sampling parameters; LM_ERR_BUSY: the
// engine holds max_running + max_waiting requests (running or queued; a burst fills the free
// sequences and the queue). *id (may be NULL) names the request.
enum lm_status lm_engine_submit(struct lm_engine *e, const int32_t *prompt, int32_t n_prompt,
                                const struct lm_request_params *rp, lm_event_fn cb, void *user,
                                uint64_t *id);
// Cancels a request at any stage: its KV blocks are freed and its last event
// (LM_FINISH_CANCELLED) delivered by the next step. Unknown or finished ids are ignored.
void lm_engine_cancel(struct lm_engine *e, uint64_t id);
// Starts the engine thread: it runs steps while there is work and sleeps otherwise.
enum lm_status lm_engine_start(struct lm_engine *e);
// Runs one step on the calling thread (engines not started); returns the number of
// requests still waiting or running, or -1 on a failure (lm_error_msg).
int32_t lm_engine_step(struct lm_engine *e);

struct lm_engine_stats {
    int32_t running, waiting;          // now
    uint64_t steps, submitted, finished, cancelled, preempted, refused_busy;
    uint64_t prompt_tokens, generated_tokens, prefilled_tokens; // prefilled: computed (not cached)
    int32_t last_step_tokens, last_step_decode; // tokens in the last step, of which decode
    uint64_t forward_ns, sample_ns;    // summed over the steps: time in the forward pass, and
                                       // in sampling + event delivery (CLOCK_MONOTONIC)
    struct lm_kv_cache_stats kv;       // as of the end of the last step
    // speculative decoding: tokens drafted and accepted, steps that verified drafts, and
    // those steps' forward time against the estimated time of the same steps without the
    // drafts (the engine's measured cost of steps by token count): verify_ns / plain_ns is
    // what verifying cost relative to a plain step
    uint64_t drafted_tokens, accepted_tokens, verify_steps, verify_ns, verify_plain_ns;
    // draft model: its forward passes (catching up, drafting) and their time
    uint64_t draft_forwards, draft_forward_ns;
    // grammars: forced tokens that joined a step as certain drafts (jump-forward; counted in
    // drafted and accepted too): each is a step saved
    uint64_t forced_tokens;
};
void lm_engine_stats(struct lm_engine *e, struct lm_engine_stats *out);
// The engine's context, for single-threaded use with step mode only (profiling, tests).
struct lm_context *lm_engine_context(struct lm_engine *e);

// ---------------------------------------------------------------- machine
// For programs that time lumen or measure the machine the way lumen loads it (lumen bench).

// CLOCK_MONOTONIC in ns: the clock of lm_event's t_ns, t_submit_ns and t_admit_ns.
uint64_t lm_time_ns(void);
// Physical cores (online CPUs when that is unknown): the thread count lumen defaults to.
int lm_cpu_physical_cores(void);

// The thread pool lm_decode runs on (the same spin-then-sleep workers), for code that must
// load the machine as lumen does: lumen bench's read-bandwidth probe.
struct lm_threadpool;
// n_threads workers, the caller counted as thread 0. LM_ERR_ARG outside [1, 512];
// LM_ERR_NOMEM when a thread cannot be started. *out is NULL on failure.
enum lm_status lm_threadpool_create(struct lm_threadpool **out, int32_t n_threads);
// Runs fn(arg, ith, nth) on every thread (ith = 0 on the caller) and returns when all are done.
void lm_threadpool_run(struct lm_threadpool *p, void (*fn)(void *arg, int ith, int nth), void *arg);
void lm_threadpool_free(struct lm_threadpool *p); // NULL is fine

#ifdef __cplusplus
}
#endif
#endif
