#!/usr/bin/env python3
"""Random-weight GGUF models of real architecture shapes (TinyLlama 1.1B, Llama 3.2 1B/3B,
Llama 3.1 8B, Qwen2.5 0.5B, Qwen3 0.6B/4B/8B, Gemma 3 1B/4B, Qwen3-30B-A3B, Granite 3.3 2B,
SmolLM3 3B, gpt-oss-20b) for lumen's
per-architecture golden tests and bench/make_shapes.py.

Weights are deterministic in (family, seed): N(0, 0.02) matrices (embeddings 0.05, so
logits are not degenerate), norms ~ 1 + N(0, 0.05), biases N(0, 0.02). Gemma 3 scales its
tied embeddings by sqrt(n_embd), so with random weights every position would predict its
own input token by a margin of ~30: its embeddings are N(0, 0.06) and its post-attention /
post-FFN norms ~12, so the blocks' outputs dominate the residual stream. The tokenizer is a
synthetic SentencePiece ('llama') vocabulary of exactly as many tokens as the embedding
has rows (3 specials, 256 <0xXX> byte tokens, then '\u2581w<n>' pieces), so lumen and
llama.cpp can load every family before lumen has a byte-level BPE tokenizer.

Mixture of experts (qwen3moe, as convert_hf_to_gguf writes Qwen3-MoE): per layer the router
blk.N.ffn_gate_inp.weight (n_expert, n_embd) in F32 (the converter and llama-quantize keep it
so) and the experts as 3-D tensors ffn_gate_exps / ffn_up_exps (n_expert, n_ff_exp, n_embd)
and ffn_down_exps (n_expert, n_embd, n_ff_exp) in numpy order (GGUF ne reversed), with
qwen3moe.expert_count / expert_used_count / expert_feed_forward_length; no shared expert.
Mixtral-style llama files with experts ('mixtral_tiny') use the same tensors, experts n_ff
wide. The CI copies ('qwen3moe_tiny', 'mixtral_tiny') are small (n_embd 256, 8 experts of 256, 2 used) so the
router's choices, not the widths, are what the golden test covers; its LM head (std 0.15)
gives logits of std ~2.4 at that width, so few positions are near-ties.

dtype 'f16': matrices F16, vectors F32. dtype 'qmix': a Q4_K_M-like mix written without
llama.cpp: Q4_K for q/k/o/gate/up, Q6_K for v/down/embeddings/output where the row length
is a multiple of 256; rows that are not (n_embd 896, 1152) fall back to Q5_0 / Q8_0 as
llama.cpp's quantizer does. The K-quant packers below are simple min/max quantizers (not
llama.cpp's search), which is fine: the golden data comes from llama.cpp on the same file.
dtypes 'qmix_q2k' / 'qmix_q3k': llama-quantize's Q2_K / Q3_K_M mixes for a tied-head llama
(KMIX_RULES), with Q2_K / Q3_K / Q5_K packers of the same kind; every packer agrees with
gguf.quants.dequantize.

dtype 'q4_1' / 'q5_1': every matrix in that type (gguf-py's quantizer, as llama-quantize
--pure), vectors F32 (tests/test_runtime_tables_q1.sh); 'q4_0' and 'q8_0' likewise (q8_0: the
gpt-oss copy, whose 2-D expert biases stay F32 like every .bias).

dtype 'iq4nl' / 'iq4xs': every matrix IQ4_NL / IQ4_XS (IQ4_NL where a row is not a multiple
of 256), output.weight Q6_K (Q8_0), as llama-quantize's IQ4_NL / IQ4_XS write them without
their attn_v / first-ffn_down upgrades.

dtype 'mxfp4moe': llama-quantize's MXFP4_MOE (every 3-D expert tensor MXFP4, every other
matrix Q8_0, output.weight Q8_0, the router F32; gguf-py's quantizers on the F16 copy's
values: the tensor bytes llama-quantize writes from that copy, tools/check_mxfp4_quantize.py). dtype 'mxfp4': MXFP4 experts and F16 for
the rest, as gpt-oss ships.

usage:
  make_arch_gguf.py --family qwen3 [--layers N] [--vocab N] [--dtype f16|qmix|qmix_q2k|qmix_q3k|q4_1|q5_1|q4_0|q8_0] OUT.gguf
  make_arch_gguf.py --ci OUT_DIR     # the reduced copies the tests use (+ OUT_DIR/manifest.txt)
  make_arch_gguf.py --ci-shapes OUT_DIR   # the larger shapes' reduced copies (slow test)

Draft-model pairs (tests/test_runtime_spec_draft.c): the same family, vocabulary and seed
with fewer layers share the target's embeddings and first layers (one random stream in
tensor order); --sliding-window N shortens gemma3's window so short sequences cross it;
--token-text ID=TEXT rewrites one token's text (a vocabulary that differs in one id);
--token-type ID=TYPE its type (the reasoning tests' <think> markers are user-defined, as in
Qwen3's vocabulary); --chat-template FILE writes tokenizer.chat_template.
"""
import argparse
import hashlib
import math
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf import quants

# Real shapes. rope_freqs: llama3 scaling (factor, low_freq_factor, high_freq_factor,
# original_context_length) written as the rope_freqs.weight tensor as convert_hf_to_gguf does.
FAMILIES = {
    "tinyllama": dict(arch="llama", n_embd=2048, n_layer=22, n_head=32, n_head_kv=4, head_dim=64,
                      n_ff=5632, n_vocab=32000, n_ctx=2048, rope_base=10000.0, eps=1e-5,
                      tied=False, bias=False, qk_norm=False),
    "llama32": dict(arch="llama", n_embd=2048, n_layer=16, n_head=32, n_head_kv=8, head_dim=64,
                    n_ff=8192, n_vocab=128256, n_ctx=131072, rope_base=500000.0, eps=1e-5,
                    tied=True, bias=False, qk_norm=False, rope_freqs=(32.0, 1.0, 4.0, 8192)),
    "qwen25": dict(arch="qwen2", n_embd=896, n_layer=24, n_head=14, n_head_kv=2, head_dim=64,
                   n_ff=4864, n_vocab=151936, n_ctx=32768, rope_base=1000000.0, eps=1e-6,
                   tied=True, bias=True, qk_norm=False),
    "qwen3": dict(arch="qwen3", n_embd=1024, n_layer=28, n_head=16, n_head_kv=8, head_dim=128,
                  n_ff=3072, n_vocab=151936, n_ctx=40960, rope_base=1000000.0, eps=1e-6,
                  tied=True, bias=False, qk_norm=True),
    "qwen3moe": dict(arch="qwen3moe", n_embd=2048, n_layer=48, n_head=32, n_head_kv=4,
                     head_dim=128, n_ff=6144, n_vocab=151936, n_ctx=40960, rope_base=1000000.0,
                     eps=1e-6, tied=False, bias=False, qk_norm=True, n_expert=128,
                     n_expert_used=8, n_ff_exp=768),
    "qwen3moe_tiny": dict(arch="qwen3moe", n_embd=256, n_layer=2, n_head=4, n_head_kv=2,
                          head_dim=64, n_ff=512, n_vocab=8192, n_ctx=4096,
                          rope_base=1000000.0, eps=1e-6, tied=False, bias=False, qk_norm=True,
                          n_expert=8, n_expert_used=2, n_ff_exp=256, out_std=0.15),
    # a tiny dense qwen3 (the reasoning tests' server model: thinking markers in its vocabulary)
    "qwen3_tiny": dict(arch="qwen3", n_embd=256, n_layer=2, n_head=4, n_head_kv=2, head_dim=64,
                       n_ff=512, n_vocab=4096, n_ctx=4096, rope_base=1000000.0, eps=1e-6,
                       tied=False, bias=False, qk_norm=True, out_std=0.15),
    # Mixtral-style llama with experts (llama.expert_count > 0; experts n_ff wide, no
    # expert_feed_forward_length: llama.cpp's llama loader ignores it), tiny
    "mixtral_tiny": dict(arch="llama", n_embd=256, n_layer=2, n_head=4, n_head_kv=2,
                         head_dim=64, n_ff=256, n_vocab=8192, n_ctx=4096, rope_base=1000000.0,
                         eps=1e-5, tied=False, bias=False, qk_norm=False, n_expert=4,
                         n_expert_used=2, n_ff_exp=256, out_std=0.15),
    "gemma3": dict(arch="gemma3", n_embd=1152, n_layer=26, n_head=4, n_head_kv=1, head_dim=256,
                   n_ff=6912, n_vocab=262144, n_ctx=32768, rope_base=1000000.0,
                   rope_base_swa=10000.0, eps=1e-6, tied=True, bias=False, qk_norm=True,
                   sliding_window=512, emb_std=0.06, post_norm_mean=12.0),
    # The larger real shapes (bench/make_shapes.py --shape), from each model's config.json
    # (hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
    # intermediate_size, vocab_size, max_position_embeddings, rope_theta, rope_scaling,
    # rms_norm_eps, tie_word_embeddings) as convert_hf_to_gguf maps them:
    #   Llama-3.2-3B: 3072, 28, 24, 8, 128, 8192, 128256, 131072, 5e5, llama3 (32, 1, 4, 8192),
    #     1e-5, tied
    #   Llama-3.1-8B: 4096, 32, 32, 8, 128, 14336, 128256, 131072, 5e5, llama3 (8, 1, 4, 8192),
    #     1e-5, untied
    #   Qwen3-4B: 2560, 36, 32, 8, 128, 9728, 151936, 40960, 1e6, none, 1e-6, tied; qk-norm
    #   Qwen3-8B: 4096, 36, 32, 8, 128, 12288, 151936, 40960, 1e6, none, 1e-6, untied; qk-norm
    #   Gemma-3-4B (text_config): 2560, 34, 8, 4, 256, 10240, 262208, 131072, 1e6 (local layers
    #     rope_local_base_freq 1e4), linear scaling 8 (global layers only), 1e-6, tied;
    #     sliding_window 1024, every 6th layer global (llama.cpp's default pattern), qk-norm
    #   (Gemma-3-1B is "gemma3" above: 1152, 26, 4, 1, 256, 6912, 262144, 32768, 1e6/1e4,
    #    no scaling, sliding_window 512.)
    "llama32_3b": dict(arch="llama", n_embd=3072, n_layer=28, n_head=24, n_head_kv=8,
                       head_dim=128, n_ff=8192, n_vocab=128256, n_ctx=131072,
                       rope_base=500000.0, eps=1e-5, tied=True, bias=False, qk_norm=False,
                       rope_freqs=(32.0, 1.0, 4.0, 8192)),
    "llama31_8b": dict(arch="llama", n_embd=4096, n_layer=32, n_head=32, n_head_kv=8,
                       head_dim=128, n_ff=14336, n_vocab=128256, n_ctx=131072,
                       rope_base=500000.0, eps=1e-5, tied=False, bias=False, qk_norm=False,
                       rope_freqs=(8.0, 1.0, 4.0, 8192)),
    "qwen3_4b": dict(arch="qwen3", n_embd=2560, n_layer=36, n_head=32, n_head_kv=8, head_dim=128,
                     n_ff=9728, n_vocab=151936, n_ctx=40960, rope_base=1000000.0, eps=1e-6,
                     tied=True, bias=False, qk_norm=True),
    "qwen3_8b": dict(arch="qwen3", n_embd=4096, n_layer=36, n_head=32, n_head_kv=8, head_dim=128,
                     n_ff=12288, n_vocab=151936, n_ctx=40960, rope_base=1000000.0, eps=1e-6,
                     tied=False, bias=False, qk_norm=True),
    "gemma3_4b": dict(arch="gemma3", n_embd=2560, n_layer=34, n_head=8, n_head_kv=4,
                      head_dim=256, n_ff=10240, n_vocab=262208, n_ctx=131072,
                      rope_base=1000000.0, rope_base_swa=10000.0, rope_scale_linear=8.0,
                      eps=1e-6, tied=True, bias=False, qk_norm=True, sliding_window=1024,
                      emb_std=0.06, post_norm_mean=12.0),
    # deepseek2 (multi-head latent attention, as the converter writes DeepSeek-V2-Lite's
    # config.json: hidden 2048, 27 layers (first_k_dense_replace 1), 16 heads, kv_lora_rank
    # 512, q_lora_rank none, qk_nope 128, qk_rope 64, v_head 128, 64 routed experts of 1408,
    # 6 used, 2 shared, intermediate 10944, vocab 102400, rms 1e-6, routed_scaling_factor 1,
    # softmax gating, norm_topk_prob false); head_dim = kv_lora_rank + qk_rope (the MQA
    # view llama.cpp runs); YaRN rope scaling (factor 40, original context 4096, mscale_all_dim
    # 0.707, written as the converter does: yarn_log_multiplier = 0.1 x mscale_all_dim).
    "deepseek2_lite": dict(arch="deepseek2", n_embd=2048, n_layer=27, n_head=16, n_head_kv=1,
                           head_dim=576, n_ff=10944, n_vocab=102400, n_ctx=163840,
                           rope_base=10000.0, eps=1e-6, tied=False, bias=False, qk_norm=False,
                           n_expert=64, n_expert_used=6, n_ff_exp=1408, kv_lora=512, q_lora=0,
                           qk_nope=128, qk_rope=64, v_head=128, n_shared=2, dense_lead=1,
                           w_scale=1.0, yarn=(40.0, 4096, 0.707)),
    # tiny copies for CI: Lite's form (q straight from attn_q, softmax), and V3 / Moonlight's
    # (the q low-rank pair, sigmoid gating with exp_probs_b, group-limited top-k,
    # renormalised and scaled weights) with GLM-4.7-Flash's trailing multi-token-prediction
    # block (nextn_predict_layers 1: block_count 3, two layers run)
    "deepseek2_tiny": dict(arch="deepseek2", n_embd=256, n_layer=2, n_head=4, n_head_kv=1,
                           head_dim=96, n_ff=512, n_vocab=8192, n_ctx=4096, rope_base=10000.0,
                           eps=1e-6, tied=False, bias=False, qk_norm=False, n_expert=8,
                           n_expert_used=2, n_ff_exp=128, kv_lora=64, q_lora=0, qk_nope=32,
                           qk_rope=32, v_head=32, n_shared=1, dense_lead=1, w_scale=1.0,
                           out_std=0.15, yarn=(40.0, 4096, 0.707)),
    "deepseek2_v3_tiny": dict(arch="deepseek2", n_embd=256, n_layer=3, n_head=4, n_head_kv=1,
                              head_dim=96, n_ff=512, n_vocab=8192, n_ctx=4096,
                              rope_base=10000.0, eps=1e-6, tied=False, bias=False,
                              qk_norm=False, n_expert=8, n_expert_used=2, n_ff_exp=128,
                              kv_lora=64, q_lora=96, qk_nope=32, qk_rope=32, v_head=32,
                              n_shared=1, dense_lead=1, w_scale=2.5, norm_w=True, gating=2,
                              groups=(4, 2), out_std=0.15, nextn=1),
    # phi3 (convert_hf_to_gguf's Phi3MiniModel): fused attn_qkv and ffn_up (gate rows, then up
    # rows), NeoX RoPE over rope.dimension_count = partial_rotary_factor * head_dim, LongRoPE:
    # rope_factors_long / _short.weight (n_rot/2) chosen by context length against
    # rope.scaling.original_context_length, rope.scaling.attn_factor =
    # sqrt(1 + ln(ctx / orig) / ln(orig)); sliding_window written (llama.cpp ignores it).
    #   Phi-3.5-mini-instruct: 3072, 32, 32, 32, 96, 8192, 32064, 131072 (orig 4096), 1e4,
    #     longrope, full rotary, 1e-5, untied, sliding_window 262144
    #   Phi-4-mini-instruct: 3072, 32, 24, 8, 128, 8192, 200064, 131072 (orig 4096), 1e4,
    #     longrope, partial_rotary_factor 0.75 (96 of 128), 1e-5, tied, sliding_window 262144
    "phi35_mini": dict(arch="phi3", n_embd=3072, n_layer=32, n_head=32, n_head_kv=32, head_dim=96,
                       n_ff=8192, n_vocab=32064, n_ctx=131072, rope_base=10000.0, eps=1e-5,
                       tied=False, bias=False, qk_norm=False, n_rot=96, rope_orig_ctx=4096,
                       sliding_window=262144),
    "phi4_mini": dict(arch="phi3", n_embd=3072, n_layer=32, n_head=24, n_head_kv=8, head_dim=128,
                      n_ff=8192, n_vocab=200064, n_ctx=131072, rope_base=10000.0, eps=1e-5,
                      tied=True, bias=False, qk_norm=False, n_rot=96, rope_orig_ctx=4096,
                      sliding_window=262144),
    # IBM Granite 3.3 2B (config.json: hidden_size 2048, 40 layers, 32 heads, 8 kv heads,
    # intermediate_size 8192, vocab 49155, max_position_embeddings 131072, rope_theta 1e7,
    # rms_norm_eps 1e-5, tied; embedding_multiplier 12, residual_multiplier 0.22,
    # attention_multiplier 0.015625, logits_scaling 8): llama + the four multipliers
    # (granite.embedding_scale / residual_scale / attention.scale / logit_scale)
    "granite": dict(arch="granite", n_embd=2048, n_layer=40, n_head=32, n_head_kv=8,
                    head_dim=64, n_ff=8192, n_vocab=49155, n_ctx=131072, rope_base=10000000.0,
                    eps=1e-5, tied=True, bias=False, qk_norm=False,
                    granite=(12.0, 0.22, 0.015625, 8.0)),
    # the CI copy: untied, its head std 0.4 so the logits (divided by 8) spread as the other
    # families' (std ~2.3); tied, the embeddings x 12 would make every position predict its
    # own token by a wide margin (see gemma3 above). seed_add (added to the family's random
    # stream's seed) picks weights whose 80 golden positions have no near-tie in the float64
    # reference (top1-top2 gap >= 0.017; the first stream had one of 0.0008, where llama.cpp's
    # batched path picks the other token and tools/gen_golden_ref.py refuses to write)
    "granite_ci": dict(arch="granite", n_embd=2048, n_layer=40, n_head=32, n_head_kv=8,
                       head_dim=64, n_ff=8192, n_vocab=49155, n_ctx=131072,
                       rope_base=10000000.0, eps=1e-5, tied=False, bias=False, qk_norm=False,
                       granite=(12.0, 0.22, 0.015625, 8.0), out_std=0.4, seed_add=10),
    # SmolLM3-3B (config.json: 2048, 36 layers, 16 heads, 4 kv heads, intermediate_size
    # 11008, vocab 128256, max_position_embeddings 65536, rope_theta 5e6, rms_norm_eps 1e-6,
    # tied): llama with no RoPE in every 4th layer (llama.cpp's fixed step, no key)
    "smollm3": dict(arch="smollm3", n_embd=2048, n_layer=36, n_head=16, n_head_kv=4,
                    head_dim=128, n_ff=11008, n_vocab=128256, n_ctx=65536, rope_base=5000000.0,
                    eps=1e-6, tied=True, bias=False, qk_norm=False),
    # the CI copy: SmolLM3's head size and GQA ratio at n_embd 512, untied (head std 0.15,
    # as qwen3moe_tiny), 4 layers so layer 3 is the one without RoPE; seed_add as granite_ci's
    # (the reference's smallest top1-top2 gap 0.024). Its quant mix is noisy at this width
    # (lumen, llama.cpp's GEMV and its batched path each differ from the others by KL ~8e-4,
    # mean |d logit| 0.05): of the streams tried (0, 2, 10, 1), 0 and 2 put a golden position
    # within that noise (a top-1 flip at gap 0.14), 1 a logit 0.299 off (limit 0.3)
    # gpt-oss-20b (conversion/gpt_oss.py, config.json: hidden 2880, 24 layers, 64 heads of 64,
    # 8 kv heads, 32 experts of intermediate 2880, 4 used, sliding_window 128 on even layers,
    # rope_theta 150000 with YaRN factor 32 over original_max_position_embeddings 4096,
    # rms 1e-5, vocab 201088, untied): biases on q/k/v/o, the router and the experts, learned
    # attention sinks (attn_sinks.weight, one per head), post_attention_norm as the FFN's
    # pre-norm. Its experts ship in MXFP4; here F16 / Q8_0 (the MXFP4 copies: llama-quantize).
    "gptoss_20b": dict(arch="gpt-oss", n_embd=2880, n_layer=24, n_head=64, n_head_kv=8,
                       head_dim=64, n_ff=2880, n_vocab=201088, n_ctx=131072, rope_base=150000.0,
                       eps=1e-5, tied=False, bias=True, qk_norm=False, n_expert=32,
                       n_expert_used=4, n_ff_exp=2880, sliding_window=128, yarn=(32.0, 4096, 0.0)),
    # the CI copy: the head size, head counts' ratio (4 query heads a KV head at 8 / 2), top-4
    # routing and YaRN of the real model at n_embd 256, 8 experts of 256; a 32-token window so
    # the golden 64-token sequence crosses it; head std 0.15 as qwen3moe_tiny's; seed_add 2: the
    # first stream's Q8_0 copy had a router near-tie (position 31 of 64, a logit 0.44 off
    # llama.cpp's, limit 0.3), stream 1 three top-1 near-ties
    "gptoss_tiny": dict(arch="gpt-oss", n_embd=256, n_layer=2, n_head=8, n_head_kv=2,
                        head_dim=64, n_ff=256, n_vocab=8192, n_ctx=131072, rope_base=150000.0,
                        eps=1e-5, tied=False, bias=True, qk_norm=False, n_expert=8,
                        n_expert_used=4, n_ff_exp=256, sliding_window=32, out_std=0.15, seed_add=2,
                        yarn=(32.0, 4096, 0.0)),
    "smollm3_tiny": dict(arch="smollm3", n_embd=512, n_layer=4, n_head=4, n_head_kv=1,
                         head_dim=128, n_ff=1536, n_vocab=8192, n_ctx=65536,
                         rope_base=5000000.0, eps=1e-6, tied=False, bias=False, qk_norm=False,
                         out_std=0.15, seed_add=10),
}

# The copies tests/test_model_arch_golden.c compares (and tools/gen_golden_arch.py feeds
# to llama.cpp): real widths, few layers, a reduced vocabulary so the whole test stays well
# under a minute. gemma3: sliding_window_pattern 2 makes layer 0 sliding and layer 1 global.
CI_MODELS = [
    # name, family, layers, vocab, dtype, extra metadata
    ("tinyllama", "tinyllama", 2, 8192, ("f16", "qmix"), {}),
    ("llama32", "llama32", 1, 8192, ("f16", "qmix"), {}),
    ("qwen25", "qwen25", 2, 8192, ("f16", "qmix"), {}),
    ("qwen3", "qwen3", 2, 8192, ("f16", "qmix"), {}),
    ("gemma3", "gemma3", 2, 8192, ("f16", "qmix"), {"sliding_window_pattern": 2}),
    ("qwen3moe", "qwen3moe_tiny", 2, 8192, ("f16", "qmix"), {}),
    ("mixtral", "mixtral_tiny", 2, 8192, ("f16", "qmix"), {}),
    # the Q2_K and Q3_K_M mixes (issue 37), on the llama32 copy's weights
    ("llama32", "llama32", 1, 8192, ("qmix_q2k", "qmix_q3k"), {}),
    ("deepseek2", "deepseek2_tiny", 2, 8192, ("f16", "qmix"), {}),
    ("deepseek2v3", "deepseek2_v3_tiny", 3, 8192, ("f16",), {}),
    # phi3: one layer each (113M / 100M weights a layer). phi4's original context 32 makes
    # every context (n_ctx > 32 after llama.cpp's rounding to 256) use the long factors;
    # phi35's 4096 keeps the tests' contexts (<= 1024) on the short ones
    # (phi4's 8064 tokens: with 8192 its F16 copy had a near-tie, gap 1e-3, where llama.cpp's
    # argmax differs from the float64 reference's, which tools/gen_golden_ref.py refuses)
    ("phi35", "phi35_mini", 1, 8192, ("f16", "qmix"), {}),
    ("phi4", "phi4_mini", 1, 8064, ("f16", "qmix"), {"rope_orig_ctx": 32}),
    ("granite", "granite_ci", 2, 8192, ("f16", "qmix"), {}),
    ("smollm3", "smollm3_tiny", 4, 8192, ("f16", "qmix"), {}),
    # gpt-oss: F16 and every matrix Q8_0 (its experts' MXFP4: the mxfp4 slice's copies)
    ("gptoss", "gptoss_tiny", 2, 8192, ("f16", "q8_0"), {}),
    # the IQ4 formats as llama-quantize mixes them (IQ4_XS: rows of 896 fall back to IQ4_NL)
    ("qwen25", "qwen25", 2, 8192, ("iq4nl",), {}),
    ("llama32", "llama32", 1, 8192, ("iq4xs",), {}),
    # MXFP4 experts (issue 35): llama-quantize's MXFP4_MOE mix and the "as shipped" one
    ("qwen3moe", "qwen3moe_tiny", 2, 8192, ("mxfp4moe", "mxfp4"), {}),
    # gpt-oss as people download it: MXFP4 experts (llama-quantize's MXFP4_MOE and as shipped)
    # with gpt-oss's tokenizer, special tokens and chat template (harmony_vocab)
    ("gptoss", "gptoss_tiny", 2, 8192, ("mxfp4moe", "mxfp4"), {"harmony": True}),
]
CI_SEED = 20240601

# Reduced copies of the larger shapes (bench/make_shapes.py) for the slow fidelity test
# tests/test_model_ref_forward_shapes.sh (tools/ref_cases.py 'shape_*'): real widths, one
# layer, the 8192-token vocabulary; gemma3_4b two layers (one sliding with a 32-token window,
# so the 64-token sequence crosses it, one global with the linear RoPE scaling). Written by
# --ci-shapes, not --ci: at 4096-14336 wide they are 0.1-0.4 GB each, too slow for CI.
SHAPE_CI_MODELS = [
    ("llama32_3b", "llama32_3b", 1, 8192, ("f16", "qmix"), {}),
    ("llama31_8b", "llama31_8b", 1, 8192, ("f16", "qmix"), {}),
    ("qwen3_4b", "qwen3_4b", 1, 8192, ("f16", "qmix"), {}),
    # qwen3_8b's F16 copy has a near-tied position (llama.cpp's argmax differs from the float64
    # reference's at 1 of 80 positions at KL 3.6e-6), which tools/gen_golden_ref.py refuses
    ("qwen3_8b", "qwen3_8b", 1, 8192, ("qmix",), {}),
    ("gemma3_4b", "gemma3_4b", 2, 8192, ("f16", "qmix"),
     {"sliding_window_pattern": 2, "sliding_window": 32}),
]


# ============================================================ vocabulary

def spm_vocab(n):
    """n tokens: <unk> <s> </s>, 256 byte tokens, then word pieces with descending scores."""
    assert n >= 3 + 256 + 1
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    k = n - len(toks)
    toks += ["\u2581w%d" % i for i in range(k)]
    types += [1] * k
    scores = np.zeros(n, np.float32)
    scores[259:] = -np.arange(k, dtype=np.float32)
    return toks, scores.tolist(), types


# gpt-oss's tokenizer as people download it (o200k_harmony): a byte-level BPE ('gpt2') with
# pre-tokenizer "gpt-4o", then 1090 special tokens from id 199998 of its 201088 (<|startoftext|>,
# <|endoftext|>, <|return|> 200002, <|constrain|> 200003, <|channel|> 200005, <|start|> 200006,
# <|end|> 200007, <|message|> 200008, <|call|> 200012, <|endofprompt|> 200018, the rest
# <|reserved_N|>), all CONTROL; BOS <|startoftext|>, EOS <|return|>, padding <|endoftext|>, no
# BOS added; the official chat template. The reduced copy keeps the specials' offsets from the
# end of the vocabulary and fills the rest with llama.cpp's GPT-2 test vocabulary's first tokens
# (256 bytes, then tokens in merge order) and the merges among them.
GPTOSS_SPECIALS = {199998: "<|startoftext|>", 199999: "<|endoftext|>", 200002: "<|return|>",
                   200003: "<|constrain|>", 200005: "<|channel|>", 200006: "<|start|>",
                   200007: "<|end|>", 200008: "<|message|>", 200012: "<|call|>",
                   200018: "<|endofprompt|>"}
GPTOSS_VOCAB, GPTOSS_FIRST_SPECIAL = 201088, 199998
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPT2_VOCAB = os.path.join(_ROOT, "tests/data/vocab/ggml-vocab-gpt-2.gguf")
# gpt-oss's official template (llama.cpp's models/templates/openai-gpt-oss-120b.jinja, committed so
# that the CI copies need no llama.cpp tree)
HARMONY_TEMPLATE = os.path.join(_ROOT, "tests/golden/chat_harmony/template.jinja")


def harmony_vocab(n):
    """(tokens, types, merges, ids of (bos, eos, pad)) of a gpt-oss vocabulary of n tokens."""
    n_special = GPTOSS_VOCAB - GPTOSS_FIRST_SPECIAL
    base = n - n_special
    assert base >= 256 + 1, "a harmony vocabulary needs more than %d tokens" % (n_special + 256)
    r = gguf.GGUFReader(GPT2_VOCAB)
    toks = r.fields["tokenizer.ggml.tokens"].contents()[:base]
    kept = set(toks)
    merges = [m for m in r.fields["tokenizer.ggml.merges"].contents()
              if all(x in kept for x in m.split(" ")) and m.replace(" ", "") in kept]
    types = [1] * base
    for k in range(n_special):
        rid = GPTOSS_FIRST_SPECIAL + k
        toks.append(GPTOSS_SPECIALS.get(rid, "<|reserved_%d|>" % rid))
        types.append(3)
    rel = lambda rid: base + rid - GPTOSS_FIRST_SPECIAL  # noqa: E731
    return toks, types, merges, (rel(199998), rel(200002), rel(199999))


def write_harmony_tokenizer(w, n):
    toks, types, merges, (bos, eos, pad) = harmony_vocab(n)
    w.add_chat_template(open(HARMONY_TEMPLATE).read())
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-4o")
    w.add_token_list(toks)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    w.add_pad_token_id(pad)
    w.add_add_bos_token(False)


# ============================================================ weights

class Rand:
    """Fast deterministic pseudo-normal weights: a 65536-entry table of sorted N(0,1)
    samples indexed by random uint16 (a resample of that table; ~10x faster than
    drawing normals, which keeps test-time generation of ~300M weights short)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.lut = np.sort(self.rng.standard_normal(65536).astype(np.float32))

    def normal(self, shape, std, mean=0.0):
        n = int(np.prod(shape))
        idx = self.rng.integers(0, 65536, n, dtype=np.uint16)
        x = self.lut[idx]
        x *= np.float32(std)
        if mean:
            x += np.float32(mean)
        return x.reshape(shape)


def llama3_rope_factors(base, dim, factor, low, high, orig):
    """As convert_hf_to_gguf (conversion/llama.py) computes rope_freqs.weight."""
    freqs = 1.0 / (np.float32(base) ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))
    lo_wl, hi_wl = orig / low, orig / high
    out = []
    for f in freqs.astype(np.float32):
        wl = 2 * np.pi / float(f)
        if wl < hi_wl:
            out.append(1.0)
        elif wl > lo_wl:
            out.append(factor)
        else:
            s = (orig / wl - low) / (high - low)
            out.append(1.0 / ((1 - s) / factor + s))
    return np.array(out, np.float32)


# Phi-3's control tokens (the real vocabulary has them at 32000-32010), the last ids here
PHI3_SPECIALS = ("<|endoftext|>", "<|assistant|>", "<|system|>", "<|end|>", "<|user|>")


def longrope_factors(n):
    """LongRoPE's (rope_factors_long.weight, rope_factors_short.weight), n each: smooth
    deterministic stand-ins of the real ranges (short 1.0-1.3, long 1.0-60, rising with the
    dimension like Phi-3.5's)."""
    i = np.arange(n, dtype=np.float64) / max(n - 1, 1)
    return [("rope_factors_long.weight", (60.0 ** i).astype(np.float32)),
            ("rope_factors_short.weight", (1.0 + 0.3 * i * i).astype(np.float32))]


# ============================================================ K-quant packers

def _f16(x):
    return x.astype(np.float16)


def _kquant_affine(b, levels, scale_levels):
    """The affine K-quants' fit (Q2_K, Q4_K, Q5_K): b (nb, sub, k) float32 sub-blocks -> d,
    dmin (nb,) f16 super-block scales and per sub-block sc, m (nb, sub) uint8 in
    0..scale_levels and q (nb, sub, k) uint8 in 0..levels, x ~ (d sc) q - (dmin m)."""
    mn = np.minimum(b.min(axis=2), 0.0)                        # (nb, sub)
    scale = (b.max(axis=2) - mn) / float(levels)
    d = _f16(scale.max(axis=1) / float(scale_levels))          # (nb,)
    dmin = _f16((-mn).max(axis=1) / float(scale_levels))
    df, dminf = d.astype(np.float32), dmin.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(df[:, None] > 0, np.rint(scale / df[:, None]), 0)
        m = np.where(dminf[:, None] > 0, np.rint(-mn / dminf[:, None]), 0)
    sc = np.clip(sc, 0, scale_levels).astype(np.uint8)
    m = np.clip(m, 0, scale_levels).astype(np.uint8)
    step = df[:, None] * sc.astype(np.float32)                # (nb, sub)
    off = dminf[:, None] * m.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(step[:, :, None] > 0, np.rint((b + off[:, :, None]) / step[:, :, None]), 0)
    return d, dmin, sc, m, np.clip(q, 0, levels).astype(np.uint8)


def _pack_k_scales(sc, m):
    """Q4_K / Q5_K's 12 bytes of eight 6-bit scales and mins (nb, 8) -> (nb, 12)."""
    scales = np.empty((sc.shape[0], 12), np.uint8)
    scales[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    scales[:, 4:8] = m[:, 0:4] | ((m[:, 4:8] >> 4) << 6)
    scales[:, 8:12] = (sc[:, 4:8] & 0xF) | ((m[:, 4:8] & 0xF) << 4)
    return scales


def quant_q4_k(x):
    """x (rows, n) float32, n % 256 == 0 -> (rows, n/256*144) uint8 Q4_K blocks."""
    rows, n = x.shape
    d, dmin, sc, m, q = _kquant_affine(x.reshape(-1, 8, 32), 15, 63)   # q (nb, 8, 32)
    qs = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(-1, 128)  # pairs of sub-blocks
    out = np.concatenate([d.view(np.uint8).reshape(-1, 2), dmin.view(np.uint8).reshape(-1, 2),
                          _pack_k_scales(sc, m), qs], axis=1)
    return out.reshape(rows, -1)


def quant_q6_k(x):
    """x (rows, n) float32, n % 256 == 0 -> (rows, n/256*210) uint8 Q6_K blocks."""
    rows, n = x.shape
    b = x.reshape(-1, 16, 16)                                  # (nb, sub, 16)
    amax = np.abs(b).max(axis=2)
    scale = amax / 31.0
    d = _f16(scale.max(axis=1) / 127.0)
    df = d.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(df[:, None] > 0, np.rint(scale / df[:, None]), 0)
    sc = np.clip(sc, 0, 127).astype(np.int8)
    step = df[:, None] * sc.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(step[:, :, None] > 0, np.rint(b / step[:, :, None]), 0)
    q = (np.clip(q, -32, 31) + 32).astype(np.uint8).reshape(-1, 2, 128)  # two halves of 128
    ql = np.empty((q.shape[0], 2, 64), np.uint8)
    ql[:, :, 0:32] = (q[:, :, 0:32] & 0xF) | ((q[:, :, 64:96] & 0xF) << 4)
    ql[:, :, 32:64] = (q[:, :, 32:64] & 0xF) | ((q[:, :, 96:128] & 0xF) << 4)
    qh = ((q[:, :, 0:32] >> 4) | ((q[:, :, 32:64] >> 4) << 2) | ((q[:, :, 64:96] >> 4) << 4)
          | ((q[:, :, 96:128] >> 4) << 6)).astype(np.uint8)
    out = np.concatenate([ql.reshape(-1, 128), qh.reshape(-1, 64), sc.view(np.uint8),
                          d.view(np.uint8).reshape(-1, 2)], axis=1)
    return out.reshape(rows, -1)


def quant_q5_k(x):
    """x (rows, n) float32, n % 256 == 0 -> (rows, n/256*176) uint8 Q5_K blocks (quant_q4_k's
    scales and mins, 32 levels; bit 4 of element 32m + l is bit m of qh[l])."""
    rows, n = x.shape
    d, dmin, sc, m, q = _kquant_affine(x.reshape(-1, 8, 32), 31, 63)   # q (nb, 8, 32)
    qs = ((q[:, 0::2, :] & 0xF) | ((q[:, 1::2, :] & 0xF) << 4)).reshape(-1, 128)
    qh = np.zeros((q.shape[0], 32), np.uint8)
    for sub in range(8):
        qh |= ((q[:, sub, :] >> 4) << sub).astype(np.uint8)
    out = np.concatenate([d.view(np.uint8).reshape(-1, 2), dmin.view(np.uint8).reshape(-1, 2),
                          _pack_k_scales(sc, m), qh, qs], axis=1)
    return out.reshape(rows, -1)


def _pack_2bit(q):
    """(nb, 256) values 0..3 -> (nb, 64) bytes: element 128h + 32k + l in bits 2k of byte 32h + l."""
    q = q.reshape(-1, 2, 4, 32)
    return (q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)).reshape(-1, 64)


def quant_q2_k(x):
    """x (rows, n) float32, n % 256 == 0 -> (rows, n/256*84) uint8 Q2_K blocks: per 16
    elements a 4-bit scale and min, (d sc) q - (dmin mn) with q in 0..3."""
    rows, n = x.shape
    d, dmin, sc, m, q = _kquant_affine(x.reshape(-1, 16, 16), 3, 15)   # q (nb, 16, 16)
    packed = _pack_2bit(q.reshape(-1, 256))
    out = np.concatenate([sc | (m << 4), packed, d.view(np.uint8).reshape(-1, 2),
                          dmin.view(np.uint8).reshape(-1, 2)], axis=1)
    return out.reshape(rows, -1)


def quant_q3_k(x):
    """x (rows, n) float32, n % 256 == 0 -> (rows, n/256*110) uint8 Q3_K blocks: per 16
    elements a 6-bit scale (stored + 32), d sc q with q in -4..3 (low 2 bits in qs, the
    high bit of q + 4 in hmask: element 32m + l is bit m of hmask[l])."""
    rows, n = x.shape
    b = x.reshape(-1, 16, 16)
    # signed scales: the largest-magnitude element maps to q = -4 (the wider side)
    idx = np.abs(b).argmax(axis=2)
    scale = -np.take_along_axis(b, idx[:, :, None], axis=2)[:, :, 0] / 4.0
    d = _f16(np.abs(scale).max(axis=1) / 31.0)
    df = d.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(df[:, None] > 0, np.rint(scale / df[:, None]), 0)
    sc = np.clip(sc, -32, 31).astype(np.int32)
    step = df[:, None] * sc.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(step[:, :, None] != 0, np.rint(b / step[:, :, None]), 0)
    u = (np.clip(q, -4, 3) + 4).astype(np.uint8).reshape(-1, 256)   # 0..7
    hb = (u >> 2).reshape(-1, 8, 32)
    hmask = np.zeros((u.shape[0], 32), np.uint8)
    for m in range(8):
        hmask |= (hb[:, m, :] << m).astype(np.uint8)
    v = (sc + 32).astype(np.uint8)                             # (nb, 16) 6-bit
    scales = np.zeros((u.shape[0], 12), np.uint8)
    scales[:, 0:8] = (v[:, 0:8] & 0xF) | ((v[:, 8:16] & 0xF) << 4)
    for j in range(16):
        scales[:, 8 + j % 4] |= ((v[:, j] >> 4) << (2 * (j // 4))).astype(np.uint8)
    out = np.concatenate([hmask, _pack_2bit(u & 3), scales, d.view(np.uint8).reshape(-1, 2)], axis=1)
    return out.reshape(rows, -1)


# dtypes 'qmix_q2k' / 'qmix_q3k': the tensor types llama-quantize's Q2_K / Q3_K_M give a llama
# with grouped-query attention (n_gqa >= 4) and a tied head (src/llama-quant.cpp): the head
# Q6_K; Q2_K: attn_v Q4_K, attn_output and ffn_down Q3_K, the rest Q2_K; Q3_K_M: attn_v Q5_K
# (first two layers), attn_output and ffn_down Q4_K (past the first n_layer/16 layers), the
# rest Q3_K. Rows not a multiple of 256 fall back to Q8_0 / Q5_0 as in qmix.
KMIX_FILE_TYPE = {"qmix_q2k": 10, "qmix_q3k": 12}  # LLAMA_FTYPE_MOSTLY_Q2_K / _Q3_K_M
KMIX_RULES = {  # (name suffixes, type), first match (attn_output before the head's output)
    "qmix_q2k": ((("attn_v.weight",), QT.Q4_K), (("attn_output.weight", "ffn_down.weight"), QT.Q3_K),
                 (("token_embd.weight", "output.weight"), QT.Q6_K), ((), QT.Q2_K)),
    "qmix_q3k": ((("attn_v.weight",), QT.Q5_K), (("attn_output.weight", "ffn_down.weight"), QT.Q4_K),
                 (("token_embd.weight", "output.weight"), QT.Q6_K), ((), QT.Q3_K)),
}
KQUANT_PACKERS = {QT.Q2_K: quant_q2_k, QT.Q3_K: quant_q3_k, QT.Q4_K: quant_q4_k,
                  QT.Q5_K: quant_q5_k, QT.Q6_K: quant_q6_k}


# ============================================================ IQ4 packers
# Nearest table value under a per-block scale (not llama.cpp's search): the golden data
# comes from llama.cpp on the same file. The blocks' layouts: src/tensor/blocks.h.

IQ4_KV = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113],
                  np.float32)


def _iq4_index(v):
    """v (..., 32) in table units -> nearest table index (..., 32) uint8."""
    return np.abs(v[..., None] - IQ4_KV).argmin(axis=-1).astype(np.uint8)


def _signed_amax(b):
    """the element of largest magnitude along the last axis, with its sign"""
    return np.take_along_axis(b, np.abs(b).argmax(axis=-1)[..., None], axis=-1)[..., 0]


def quant_iq4_nl(x):
    """x (rows, n) float32, n % 32 == 0 -> (rows, n/32*18) uint8 IQ4_NL blocks."""
    rows, n = x.shape
    b = x.reshape(-1, 32)
    d = _f16(_signed_amax(b) / -127.0)
    df = d.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(df[:, None] != 0, b / df[:, None], 0)
    q = _iq4_index(v)
    qs = q[:, :16] | (q[:, 16:] << 4)
    return np.concatenate([d.view(np.uint8).reshape(-1, 2), qs], axis=1).reshape(rows, -1)


def quant_iq4_xs(x):
    """x (rows, n) float32, n % 256 == 0 -> (rows, n/256*136) uint8 IQ4_XS blocks."""
    rows, n = x.shape
    b = x.reshape(-1, 8, 32)
    s = _signed_amax(b) / -127.0                               # (nb, 8) sub-block scales
    d = _f16(-_signed_amax(s) / 32.0)
    df = d.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        l = np.where(df[:, None] != 0, np.rint(s / df[:, None]), 0)
    l = np.clip(l, -32, 31).astype(np.int32)
    dl = df[:, None] * l.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(dl[:, :, None] != 0, b / dl[:, :, None], 0)
    q = _iq4_index(v)                                          # (nb, 8, 32)
    ls = (l + 32).astype(np.uint16)
    scales_l = ((ls[:, 0::2] & 15) | ((ls[:, 1::2] & 15) << 4)).astype(np.uint8)
    scales_h = np.zeros(ls.shape[0], np.uint16)
    for j in range(8):
        scales_h |= ((ls[:, j] >> 4) & 3) << (2 * j)
    qs = (q[:, :, :16] | (q[:, :, 16:] << 4)).reshape(-1, 128)
    out = np.concatenate([d.view(np.uint8).reshape(-1, 2), scales_h.view(np.uint8).reshape(-1, 2),
                          scales_l, qs], axis=1)
    return out.reshape(rows, -1)


QMIX_HIGH = ("attn_v.weight", "ffn_down.weight", "ffn_down_exps.weight", "token_embd.weight",
             "output.weight")
IQ4_DTYPES = {"iq4nl": 25, "iq4xs": 30}  # dtype -> llama_ftype (MOSTLY_IQ4_NL / _XS)
F32_MATRICES = ("ffn_gate_inp.weight",)  # the MoE router stays F32 (converter, llama-quantize)
# dtypes that put every matrix in one type: the type and its GGUF file_type (LLAMA_FTYPE_*)
WHOLE_DTYPES = {"q4_1": (QT.Q4_1, 3), "q5_1": (QT.Q5_1, 9)}
WHOLE_DTYPES["q4_0"] = (QT.Q4_0, 2)  # every matrix q4_0 (tests/test_runtime_tables_il.sh)
WHOLE_DTYPES["q8_0"] = (QT.Q8_0, 7)  # every matrix q8_0 (gpt-oss's CI copy)
MXFP4_DTYPES = {"mxfp4moe": 38, "mxfp4": 1}  # dtype -> file_type (MOSTLY_MXFP4_MOE / _F16)


def encode(name, arr, dtype):
    """(array, raw_dtype) to hand to GGUFWriter.add_tensor for one tensor."""
    if arr.ndim == 1 or name.endswith(F32_MATRICES) or name.endswith(".bias"):
        return arr.astype(np.float32), None  # gpt-oss's expert biases are 2-D: F32 too
    if dtype == "f16":
        return arr.astype(np.float16), None
    if dtype in MXFP4_DTYPES:  # experts MXFP4; the rest Q8_0 (MXFP4_MOE) or F16 (as shipped)
        if arr.ndim == 2 and dtype == "mxfp4":
            return arr.astype(np.float16), None
        qt = QT.MXFP4 if arr.ndim == 3 else QT.Q8_0
        # from the F16 copy's values, as llama-quantize reads them: the same tensor bytes
        q = quants.quantize(arr.astype(np.float16).astype(np.float32).reshape(-1, arr.shape[-1]), qt)
        return q.reshape(arr.shape[:-1] + (q.shape[-1],)), qt
    if dtype in KMIX_RULES:
        lead, n = arr.shape[:-1], arr.shape[-1]
        flat = arr.reshape(-1, n)
        qt = next(t for sfx, t in KMIX_RULES[dtype] if not sfx or name.endswith(sfx))
        if n % 256 == 0:
            q = KQUANT_PACKERS[qt](flat)
        else:
            qt = QT.Q8_0 if qt == QT.Q6_K else QT.Q5_0
            q = quants.quantize(flat, qt)
        return q.reshape(lead + (q.shape[-1],)), qt
    if dtype in WHOLE_DTYPES:
        lead, n = arr.shape[:-1], arr.shape[-1]
        qt = WHOLE_DTYPES[dtype][0]
        q = quants.quantize(arr.reshape(-1, n), qt)
        return q.reshape(lead + (q.shape[-1],)), qt
    high = name.endswith(QMIX_HIGH)
    lead, n = arr.shape[:-1], arr.shape[-1]  # 3-D experts: rows of every expert
    flat = arr.reshape(-1, n)
    if dtype in IQ4_DTYPES:  # llama-quantize's IQ4_NL / IQ4_XS: output Q6_K (Q8_0), IQ4_XS
        if name == "output.weight":  # rows not of 256 fall back to IQ4_NL
            q, qt = (quant_q6_k(flat), QT.Q6_K) if n % 256 == 0 else (quants.quantize(flat, QT.Q8_0), QT.Q8_0)
        elif dtype == "iq4xs" and n % 256 == 0:
            q, qt = quant_iq4_xs(flat), QT.IQ4_XS
        else:
            q, qt = quant_iq4_nl(flat), QT.IQ4_NL
        return q.reshape(lead + (q.shape[-1],)), qt
    if n % 256 == 0:
        if high:
            q, qt = quant_q6_k(flat), QT.Q6_K
        else:
            q, qt = quant_q4_k(flat), QT.Q4_K
    else:
        qt = QT.Q8_0 if high else QT.Q5_0
        q = quants.quantize(flat, qt)
    return q.reshape(lead + (q.shape[-1],)), qt


# ============================================================ deepseek2 (MLA)

def deepseek2_meta(w, f):
    """deepseek2's keys as convert_hf_to_gguf writes them (MLA as MQA: key_length =
    kv_lora_rank + qk_rope, value_length = kv_lora_rank; the per-head sizes in *_mla).
    q_lora_rank is written even when 0: llama.cpp requires it of files that are not
    27/26-layer Lite models."""
    kvr = f["kv_lora"]
    w.add_q_lora_rank(f["q_lora"])
    w.add_kv_lora_rank(kvr)
    w.add_key_length(kvr + f["qk_rope"])
    w.add_value_length(kvr)
    w.add_key_length_mla(f["qk_nope"] + f["qk_rope"])
    w.add_value_length_mla(f["v_head"])
    w.add_leading_dense_block_count(f["dense_lead"])
    w.add_expert_shared_count(f["n_shared"])
    w.add_expert_weights_scale(f["w_scale"])
    if f.get("norm_w"):
        w.add_expert_weights_norm(True)
    if f.get("gating"):
        w.add_expert_gating_func(gguf.ExpertGatingFuncType(f["gating"]))
    if f.get("groups"):
        w.add_expert_group_count(f["groups"][0])
        w.add_expert_group_used_count(f["groups"][1])
    if f.get("nextn"):
        w.add_nextn_predict_layers(f["nextn"])
    if f.get("yarn"):
        factor, orig, mscale_all = f["yarn"]
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(factor)
        w.add_rope_scaling_orig_ctx_len(orig)
        w.add_rope_scaling_yarn_log_mul(0.1 * mscale_all)


def deepseek2_layer(t, f, p, i):
    """Layer i's tensors in numpy order: attn_k_b (n_head, kv_lora, qk_nope) and attn_v_b
    (n_head, v_head, kv_lora) as the converter splits kv_b_proj; the first dense_lead
    layers dense, the rest routed experts (+ exp_probs_b with sigmoid gating) and shared."""
    E, H, kvr, rot = f["n_embd"], f["n_head"], f["kv_lora"], f["qk_rope"]
    hk, nope, hv = f["qk_nope"] + rot, f["qk_nope"], f["v_head"]
    t(p + "attn_norm.weight", (E,), 0.05, 1.0)
    if f["q_lora"]:
        t(p + "attn_q_a.weight", (f["q_lora"], E))
        t(p + "attn_q_a_norm.weight", (f["q_lora"],), 0.05, 1.0)
        t(p + "attn_q_b.weight", (H * hk, f["q_lora"]), 0.05)
    else:
        t(p + "attn_q.weight", (H * hk, E))
    t(p + "attn_kv_a_mqa.weight", (kvr + rot, E))
    t(p + "attn_kv_a_norm.weight", (kvr,), 0.05, 1.0)
    t(p + "attn_k_b.weight", (H, kvr, nope), 0.1)
    t(p + "attn_v_b.weight", (H, hv, kvr), 0.1)
    t(p + "attn_output.weight", (E, H * hv))
    t(p + "ffn_norm.weight", (E,), 0.05, 1.0)
    if i < f["dense_lead"]:
        t(p + "ffn_gate.weight", (f["n_ff"], E))
        t(p + "ffn_up.weight", (f["n_ff"], E))
        t(p + "ffn_down.weight", (E, f["n_ff"]))
        return
    NX, FX, FS = f["n_expert"], f["n_ff_exp"], f["n_ff_exp"] * f["n_shared"]
    t(p + "ffn_gate_inp.weight", (NX, E), 0.15)
    if f.get("gating") == 2:
        t(p + "exp_probs_b.bias", (NX,), 0.05)
    t(p + "ffn_gate_exps.weight", (NX, FX, E))
    t(p + "ffn_up_exps.weight", (NX, FX, E))
    t(p + "ffn_down_exps.weight", (NX, E, FX))
    t(p + "ffn_gate_shexp.weight", (FS, E))
    t(p + "ffn_up_shexp.weight", (FS, E))
    t(p + "ffn_down_shexp.weight", (E, FS))
    if i >= f["n_layer"] - f.get("nextn", 0):  # a multi-token-prediction block (not run)
        t(p + "nextn.eh_proj.weight", (E, 2 * E))
        t(p + "nextn.enorm.weight", (E,), 0.05, 1.0)
        t(p + "nextn.hnorm.weight", (E,), 0.05, 1.0)


# ============================================================ gpt-oss

def gptoss_meta(w, f):
    """gpt-oss's keys beyond the common ones (conversion/gpt_oss.py: sliding_window,
    expert_feed_forward_length; YaRN from rope_scaling as the base converter writes it)."""
    factor, orig, _ = f["yarn"]
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(factor)
    w.add_rope_scaling_orig_ctx_len(orig)


def gptoss_layer(t, f, p):
    """Layer tensors in numpy order: experts (n_expert, out, in), their biases (n_expert,
    out) in F32, sinks ~N(0, 1) (logits of the order of the scores)."""
    E, H, HKV, HD = f["n_embd"], f["n_head"], f["n_head_kv"], f["head_dim"]
    NX, FX = f["n_expert"], f["n_ff_exp"]
    t(p + "attn_norm.weight", (E,), 0.05, 1.0)
    t(p + "attn_q.weight", (H * HD, E))
    t(p + "attn_q.bias", (H * HD,))
    t(p + "attn_k.weight", (HKV * HD, E))
    t(p + "attn_k.bias", (HKV * HD,))
    t(p + "attn_v.weight", (HKV * HD, E))
    t(p + "attn_v.bias", (HKV * HD,))
    t(p + "attn_output.weight", (E, H * HD))
    t(p + "attn_output.bias", (E,))
    t(p + "attn_sinks.weight", (H,), 1.0)
    t(p + "post_attention_norm.weight", (E,), 0.05, 1.0)
    t(p + "ffn_gate_inp.weight", (NX, E), 0.15)
    t(p + "ffn_gate_inp.bias", (NX,), 0.1)
    t(p + "ffn_gate_exps.weight", (NX, FX, E))
    t(p + "ffn_gate_exps.bias", (NX, FX), 0.1)
    t(p + "ffn_up_exps.weight", (NX, FX, E))
    t(p + "ffn_up_exps.bias", (NX, FX), 0.1)
    t(p + "ffn_down_exps.weight", (NX, E, FX))
    t(p + "ffn_down_exps.bias", (NX, E), 0.02)


# ============================================================ writer

# the rerank prompt of --pooling rank copies (Qwen3-Reranker's shape, in the synthetic vocabulary's words)
RERANK_TEMPLATE = "<Query>: {query}\n<Document>: {document}\n"


def write_model(path, family, n_layer=None, n_vocab=None, dtype="f16", seed=CI_SEED,
                extra=None, quiet=False, stream=False):
    """stream (dtype f16 only): tensors are generated and written one at a time (the same
    bytes as without), so a file far larger than memory can be written: the Qwen3-30B-A3B
    shape's F16 is ~1.3 GB per layer."""
    assert not stream or dtype == "f16"
    f = dict(FAMILIES[family])
    if n_layer:
        f["n_layer"] = n_layer
    if n_vocab:
        f["n_vocab"] = n_vocab
    extra = extra or {}
    arch = f["arch"]
    E, L, H, HKV, HD, FF, V = (f["n_embd"], f["n_layer"], f["n_head"], f["n_head_kv"],
                               f["head_dim"], f["n_ff"], f["n_vocab"])
    # one stream per family: the f16 and qmix files hold the same underlying weights
    rnd = Rand(seed + sum(map(ord, family)) + f.get("seed_add", 0))
    tmp = str(path) + ".tmp"
    w = gguf.GGUFWriter(tmp, arch)
    w.add_name("lumen-random-%s-%dL-%s" % (family, L, dtype))
    w.add_context_length(f["n_ctx"])
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(FF)
    w.add_head_count(H)
    w.add_head_count_kv(HKV)
    if arch == "gpt-oss":
        gptoss_meta(w, f)
    if arch == "deepseek2":
        deepseek2_meta(w, f)
    elif HD * H != E or arch in ("qwen3", "qwen3moe", "gemma3"):
        w.add_key_length(HD)
        w.add_value_length(HD)
    w.add_rope_dimension_count(f.get("n_rot", f.get("qk_rope", HD)))
    w.add_rope_freq_base(f["rope_base"])
    w.add_layer_norm_rms_eps(f["eps"])
    if f.get("n_expert"):
        w.add_expert_count(f["n_expert"])
        w.add_expert_used_count(f["n_expert_used"])
        if arch != "llama":
            w.add_expert_feed_forward_length(f["n_ff_exp"])
    if "granite" in f:  # as conversion/granite.py writes the *_multiplier / logits_scaling
        emb_s, res_s, att_s, logit_s = f["granite"]
        w.add_embedding_scale(emb_s)
        w.add_residual_scale(res_s)
        w.add_attention_scale(att_s)
        w.add_logit_scale(logit_s)
    if "sliding_window" in extra:
        f["sliding_window"] = extra["sliding_window"]
    if "rope_orig_ctx" in f:  # LongRoPE (phi3), as the converter writes it
        f["rope_orig_ctx"] = extra.get("rope_orig_ctx", f["rope_orig_ctx"])
        w.add_rope_scaling_orig_ctx_len(f["rope_orig_ctx"])
        scale = f["n_ctx"] / FAMILIES[family]["rope_orig_ctx"]  # the real model's factor
        w.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(scale) /
                                                  math.log(FAMILIES[family]["rope_orig_ctx"])))
    if "sliding_window" in f:
        w.add_sliding_window(f["sliding_window"])
        if "rope_base_swa" in f:
            w.add_float32("%s.rope.freq_base_swa" % arch, f["rope_base_swa"])
    if "rope_scale_linear" in f:  # as convert_hf_to_gguf writes rope_scaling {linear, 8}
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(f["rope_scale_linear"])
    if "sliding_window_pattern" in extra:
        w.add_uint32("%s.attention.sliding_window_pattern" % arch, extra["sliding_window_pattern"])
    if "pooling_type" in extra:  # an embedding model (0 none, 1 mean, 2 cls, 3 last, 4 rank)
        w.add_uint32("%s.pooling_type" % arch, extra["pooling_type"])
    if extra.get("pooling_type") == 4:  # a reranker as convert_hf_to_gguf writes Qwen3-Reranker:
        # labels, the rerank prompt, and cls.output.weight (2, n_embd) below (its "yes", "no" rows)
        w.add_array("%s.classifier.output_labels" % arch, ["yes", "no"])
        w.add_chat_template([{"name": "rerank", "template": RERANK_TEMPLATE}])
    w.add_file_type(1 if dtype == "f16" else WHOLE_DTYPES[dtype][1] if dtype in WHOLE_DTYPES
                    else IQ4_DTYPES[dtype] if dtype in IQ4_DTYPES
                    else MXFP4_DTYPES[dtype] if dtype in MXFP4_DTYPES
                    else KMIX_FILE_TYPE.get(dtype, 15))  # MOSTLY_F16 / _Q4_1 / _Q5_1 / IQ4 / mixes

    toks, scores, types = spm_vocab(V)
    if extra.get("harmony"):  # gpt-oss's own tokenizer and template (harmony_vocab)
        write_harmony_tokenizer(w, V)
        toks = None
    if toks is not None:
        if arch == "phi3":  # llama.cpp looks up <|endoftext|> in a vocabulary named phi3 (general.name)
            for k, text in enumerate(PHI3_SPECIALS):
                toks[V - len(PHI3_SPECIALS) + k], types[V - len(PHI3_SPECIALS) + k] = text, 3
        for tid, text in extra.get("token_text", {}).items():
            toks[tid] = text
        for tid, typ in extra.get("token_type", {}).items():
            types[tid] = typ
        if "chat_template" in extra:
            w.add_chat_template(extra["chat_template"])
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(toks)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_unk_token_id(0)
        w.add_add_bos_token(True)
        w.add_add_eos_token(bool(extra.get("add_eos", False)))  # Qwen3-Embedding appends EOS

    pending = []  # stream: (name, shape, std, mean, fixed array or None), in file order

    def t(name, shape, std=0.02, mean=0.0):
        # shape is numpy order (outermost first): matrices (n_out, n_in)
        if stream:
            pending.append((name, shape, std, mean, None))
            return
        arr = rnd.normal(shape, std, mean)
        data, raw = encode(name, arr, dtype)
        if raw is None:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_shape=data.shape, raw_dtype=raw)

    t("token_embd.weight", (V, E), f.get("emb_std", 0.05))
    if "rope_freqs" in f:
        fac, lo, hi, orig = f["rope_freqs"]
        rf = llama3_rope_factors(f["rope_base"], HD, fac, lo, hi, orig)
        if stream:
            pending.append(("rope_freqs.weight", rf.shape, 0, 0, rf))
        else:
            w.add_tensor("rope_freqs.weight", rf)
    if "rope_orig_ctx" in f:
        for name, arr in longrope_factors(f.get("n_rot", HD) // 2):
            if stream:
                pending.append((name, arr.shape, 0, 0, arr))
            else:
                w.add_tensor(name, arr)
    t("output_norm.weight", (E,), 0.05, 1.0)
    if not f["tied"]:
        t("output.weight", (V, E), f.get("out_std", 0.05))
    for i in range(L):
        p = "blk.%d." % i
        if arch == "deepseek2":
            deepseek2_layer(t, f, p, i)
            continue
        if arch == "gpt-oss":
            gptoss_layer(t, f, p)
            continue
        t(p + "attn_norm.weight", (E,), 0.05, 1.0)
        if arch == "phi3":  # fused: q rows, k rows, v rows
            t(p + "attn_qkv.weight", ((H + 2 * HKV) * HD, E))
        else:
            t(p + "attn_q.weight", (H * HD, E))
            t(p + "attn_k.weight", (HKV * HD, E))
            t(p + "attn_v.weight", (HKV * HD, E))
        if f["bias"]:
            t(p + "attn_q.bias", (H * HD,))
            t(p + "attn_k.bias", (HKV * HD,))
            t(p + "attn_v.bias", (HKV * HD,))
        if f["qk_norm"]:
            t(p + "attn_q_norm.weight", (HD,), 0.05, 1.0)
            t(p + "attn_k_norm.weight", (HD,), 0.05, 1.0)
        t(p + "attn_output.weight", (E, H * HD))
        if arch == "gemma3":
            t(p + "post_attention_norm.weight", (E,), 0.05, f.get("post_norm_mean", 1.0))
        t(p + "ffn_norm.weight", (E,), 0.05, 1.0)
        if f.get("n_expert"):
            NX, FX = f["n_expert"], f["n_ff_exp"]
            # router std 0.15 (logit std ~2.4 at n_embd 256): the experts' probabilities differ clearly (no near-ties in
            # the top-k that would make the golden test flaky)
            t(p + "ffn_gate_inp.weight", (NX, E), 0.15)
            t(p + "ffn_gate_exps.weight", (NX, FX, E))
            t(p + "ffn_up_exps.weight", (NX, FX, E))
            t(p + "ffn_down_exps.weight", (NX, E, FX))
        elif arch == "phi3":  # fused: gate rows, then up rows
            t(p + "ffn_up.weight", (2 * FF, E))
            t(p + "ffn_down.weight", (E, FF))
        else:
            t(p + "ffn_gate.weight", (FF, E))
            t(p + "ffn_up.weight", (FF, E))
            t(p + "ffn_down.weight", (E, FF))
        if arch == "gemma3":
            t(p + "post_ffw_norm.weight", (E,), 0.05, f.get("post_norm_mean", 1.0))
    if extra.get("pooling_type") == 4:
        t("cls.output.weight", (2, E), 0.05)
    if stream:
        for name, shape, _, _, fixed in pending:
            dt = np.dtype(np.float32 if len(shape) == 1 or name.endswith(F32_MATRICES)
                          or name.endswith(".bias") else np.float16)
            w.add_tensor_info(name, shape, dt, int(np.prod(shape)) * dt.itemsize)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        for name, shape, std, mean, fixed in pending:
            arr = fixed if fixed is not None else encode(name, rnd.normal(shape, std, mean),
                                                          dtype)[0]
            w.write_tensor_data(arr)
            del arr
    else:
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)
    if not quiet:
        print("wrote %s (%.1f MB)" % (path, os.path.getsize(path) / 1e6))


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def ci_files(models=None, prefix="arch"):
    """[(file name, family, layers, vocab, dtype, extra)] of the CI copies (or of models,
    named <prefix>_<name>_<dtype>.gguf)."""
    out = []
    for name, fam, layers, vocab, dtypes, extra in (models or CI_MODELS):
        for dt in dtypes:
            out.append(("%s_%s_%s.gguf" % (prefix, name, dt), fam, layers, vocab, dt, extra))
    return out


def write_ci(out_dir, models=None, prefix="arch"):
    """Writes the CI copies (or models, see ci_files) into out_dir unless a stamp says they
    are current (same generator source, numpy and gguf versions); then writes
    out_dir/manifest.txt."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.abspath(__file__), "rb") as fh:
        src = hashlib.sha256(fh.read()).hexdigest()
    stamp_txt = "%s numpy %s gguf %s\n" % (src, np.__version__, getattr(gguf, "__version__", "?"))
    stamp = os.path.join(out_dir, "stamp.txt")
    manifest = os.path.join(out_dir, "manifest.txt")
    files = ci_files(models, prefix)
    current = (os.path.exists(stamp) and open(stamp).read() == stamp_txt and
               os.path.exists(manifest) and
               all(os.path.exists(os.path.join(out_dir, f[0])) for f in files))
    if current:
        print("make_arch_gguf: %s is current" % out_dir)
        return
    if os.path.exists(stamp):
        os.remove(stamp)
    lines = []
    for fname, fam, layers, vocab, dt, extra in files:
        p = os.path.join(out_dir, fname)
        write_model(p, fam, layers, vocab, dt, CI_SEED, extra)
        lines.append("%s %s" % (fname, sha256_file(p)))
    with open(manifest, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    with open(stamp, "w") as fh:
        fh.write(stamp_txt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="output .gguf (or directory with --ci)")
    ap.add_argument("--ci", action="store_true", help="write the CI copies into the directory")
    ap.add_argument("--ci-shapes", action="store_true",
                    help="write the larger shapes' reduced copies (shape_*) into the directory")
    ap.add_argument("--family", choices=sorted(FAMILIES))
    ap.add_argument("--layers", type=int, default=0, help="reduced layer count (0 = real)")
    ap.add_argument("--vocab", type=int, default=0, help="reduced vocabulary (0 = real)")
    ap.add_argument("--dtype", choices=("f16", "qmix", "qmix_q2k", "qmix_q3k", "iq4nl", "iq4xs")
                    + tuple(WHOLE_DTYPES) + tuple(MXFP4_DTYPES), default="f16")
    ap.add_argument("--seed", type=int, default=CI_SEED)
    ap.add_argument("--swa-pattern", type=int, default=0,
                    help="write <arch>.attention.sliding_window_pattern (gemma3)")
    ap.add_argument("--sliding-window", type=int, default=0,
                    help="gemma3's sliding window (0 = the family's)")
    ap.add_argument("--token-text", action="append", default=[], metavar="ID=TEXT",
                    help="rewrite token ID's text (repeatable)")
    ap.add_argument("--pooling", choices=("none", "mean", "cls", "last", "rank"),
                    help="write <arch>.pooling_type (an embedding model)")
    ap.add_argument("--add-eos", action="store_true",
                    help="the vocabulary appends EOS (as Qwen3-Embedding's)")
    ap.add_argument("--token-type", action="append", default=[], metavar="ID=TYPE",
                    help="set token ID's type (1 normal, 3 control, 4 user-defined; repeatable)")
    ap.add_argument("--chat-template", metavar="FILE", help="write FILE as tokenizer.chat_template")
    a = ap.parse_args()
    if a.ci:
        write_ci(a.out)
        return 0
    if a.ci_shapes:
        write_ci(a.out, SHAPE_CI_MODELS, "shape")
        return 0
    if not a.family:
        ap.error("--family is required without --ci")
    extra = {"sliding_window_pattern": a.swa_pattern} if a.swa_pattern else {}
    if a.sliding_window:
        extra["sliding_window"] = a.sliding_window
    if a.pooling:
        extra["pooling_type"] = ("none", "mean", "cls", "last", "rank").index(a.pooling)
    if a.add_eos:
        extra["add_eos"] = True
    if a.token_text:
        extra["token_text"] = {int(t.split("=", 1)[0]): t.split("=", 1)[1] for t in a.token_text}
    if a.token_type:
        extra["token_type"] = {int(t.split("=", 1)[0]): int(t.split("=", 1)[1]) for t in a.token_type}
    if a.chat_template:
        with open(a.chat_template, encoding="utf-8") as fh:
            extra["chat_template"] = fh.read()
    write_model(a.out, a.family, a.layers or None, a.vocab or None, a.dtype, a.seed, extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
