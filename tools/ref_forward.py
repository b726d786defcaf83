#!/usr/bin/env python3
"""An exact reference: the forward pass of a GGUF model in float64 NumPy, on the file's own
weights dequantized by the `gguf` package's dequantizer (gguf.quants.dequantize).

Agreement between lumen and llama.cpp shows that lumen computes what llama.cpp computes,
not that either is right; this computes what both approximate (float64 everywhere, no
8-bit activations, no f16 KV cache, exact GELU), so each engine's distance from it can be
measured (KL-divergence, top-1 agreement). Architectures, as llama.cpp builds them
(src/models/<arch>.cpp of the pinned sdist):

  llama    RMSNorm, RoPE on adjacent pairs (rope_freqs.weight divides the frequencies,
           Llama 3), causal attention, SwiGLU FFN
  qwen2    llama + q/k/v biases, RoPE on halves (NeoX)
  qwen3    qwen2 without biases + per-head RMSNorm of q and k before RoPE
  qwen3moe qwen3 with a mixture-of-experts FFN: router logits (ffn_gate_inp), softmax over
           the experts, the expert_used_count most probable (ties: lower index), their
           probabilities renormalised to sum 1, the weighted sum of those experts' SwiGLU FFNs
           (3-D ffn_gate_exps / ffn_up_exps / ffn_down_exps); no shared expert. llama with
           expert_count > 0 (Mixtral) has the same expert FFN
  gemma3   embeddings x sqrt(n_embd); q/k norms; RoPE on halves with base freq_base on global
           layers and freq_base_swa (default 10000) on sliding-window layers (window
           sliding_window, pattern from sliding_window_pattern, default 6: five local, one
           global); q x 1/sqrt(head_dim); post-attention and post-FFN norms; GELU (tanh) FFN;
           optional final logit soft-capping
  deepseek2 multi-head latent attention in its decompressed (MHA) form, which lumen and
           llama.cpp compute absorbed: latent c = rmsnorm(kv_a_mqa's first kv_lora_rank
           outputs), per head k_nope = k_b^T c and v = v_b c, the shared RoPE key (adjacent
           pairs) from kv_a_mqa's tail, q straight (attn_q) or through q_a / q_a_norm / q_b,
           scale 1/sqrt(key_length_mla), or YaRN (rope.scaling.type yarn) as llama.cpp sets
           it up for deepseek2 (ramped frequencies, magnitude factor, kq_scale); the first leading_dense_block_count layers dense,
           then routed experts (softmax or sigmoid gating, exp_probs_b for the choice only,
           group-limited top-k, optional renormalisation and scale) plus the shared experts
  phi3     llama with fused attn_qkv (q, k, v rows) and ffn_up (gate rows, then up rows),
           RoPE on halves over rope.dimension_count dims (partial: Phi-4-mini), LongRoPE:
           rope_factors_long / _short.weight divide the frequencies (long when the context,
           rounded up to 256 as llama.cpp does, exceeds rope.scaling.original_context_length;
           RefModel's n_ctx, default 1024) and cos/sin are multiplied by
           rope.scaling.attn_factor; no sliding window (llama.cpp turns Phi's off)
  granite  llama x embedding_scale on the embeddings, q.k x attention.scale (instead of
           1/sqrt(head_dim)), each block's output x residual_scale before its residual add,
           logits / logit_scale; rope.scaling.finetuned = false: no RoPE at all
  smollm3  llama without RoPE in every 4th layer (il + 1 a multiple of 4), rope_freqs unused
  gpt-oss  qwen2-like (q/k/v biases, RoPE on halves) + attn_output.bias, YaRN (rope.scaling.type
           yarn: ramped frequencies, magnitude factor 0.1 ln(factor) + 1, as llama.cpp sets it
           up for any family but deepseek2) on every layer, a sliding window (sliding_window)
           on layers il % pattern < pattern - 1 (pattern 2: the even ones), learned sinks
           (attn_sinks.weight: one logit per head in each softmax's denominator),
           post_attention_norm as the FFN's pre-norm, experts: the top-k of the router's
           biased logits, weights a softmax over those k, biased experts with the clamped
           SwiGLU (x = min(gate, 7), y = clamp(up, -7, 7), x sigmoid(1.702 x) (y + 1))

  bert     an encoder: LayerNorm (with bias, attention.layer_norm_epsilon) of the token +
           token type 0 + learned position embeddings, post-norm blocks (x = LN(x + attn),
           x = LN(x + FFN)), q/k/v/output and FFN biases, no RoPE, non-causal attention
           unless attention.causal, GELU (tanh) FFN without a gate, no final norm, no LM head
  nomic-bert bert without position_embd: RoPE on halves (rope.freq_base) of q and k, fused
           attn_qkv, SwiGLU FFN (ffn_gate, ffn_up, ffn_down; no FFN biases)

Optional biases (attn_q/k/v/output.bias) are applied wherever present. Not supported (an
error names them): YaRN scaling, per-layer head counts, experts in other families
(shared experts, fused gate_up).

Library:
    m = RefModel("model.gguf")
    for p0, logp in m.log_probs(tokens, chunk=64):  # float64 (n, n_vocab) log-softmax rows
        ...
    m.logits(tokens)                                 # all positions at once (small models)
CLI:
    ref_forward.py MODEL --tokens 2,818,5279 [--top 5]        top tokens per position
    ref_forward.py MODEL --write-f32 OUT.gguf                 every tensor dequantized to F32
"""
import argparse
import math
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

SUPPORTED = ("llama", "qwen2", "qwen3", "qwen3moe", "gemma3", "deepseek2", "phi3", "granite",
             "smollm3", "gpt-oss", "bert", "nomic-bert")
ROPE_NEOX = {"llama": False, "qwen2": True, "qwen3": True, "qwen3moe": True, "gemma3": True,
             "deepseek2": False, "phi3": True, "granite": False, "smollm3": False,
             "gpt-oss": True, "bert": False, "nomic-bert": True}


def field_value(f):
    """A reader field's value as Python data (scalar, str, or list)."""
    return f.contents()


class RefModel:
    def __init__(self, path, n_ctx=1024):
        self.path = path
        self.causal = True  # False: every position attends to all (encoders; embeddings)
        self.r = gguf.GGUFReader(path)
        self.kv = {k: f for k, f in self.r.fields.items()}
        self.arch = self.get("general.architecture")
        if self.arch not in SUPPORTED:
            raise SystemExit("ref_forward: %s: architecture %r not supported (%s)" % (
                path, self.arch, ", ".join(SUPPORTED)))
        a = self.arch
        self.n_embd = self.get(a + ".embedding_length")
        self.n_layer = self.get(a + ".block_count")
        self.n_head = self.get(a + ".attention.head_count")
        self.n_head_kv = self.get(a + ".attention.head_count_kv", self.n_head)
        if isinstance(self.n_head, list) or isinstance(self.n_head_kv, list):
            raise SystemExit("ref_forward: per-layer head counts are not supported")
        self.head_k = self.get(a + ".attention.key_length", self.n_embd // self.n_head)
        self.head_v = self.get(a + ".attention.value_length", self.n_embd // self.n_head)
        self.n_rot = self.get(a + ".rope.dimension_count", self.head_k)
        self.eps = self.get(a + (".attention.layer_norm_epsilon" if a in ("bert", "nomic-bert") else
                                 ".attention.layer_norm_rms_epsilon"))
        if a in ("bert", "nomic-bert"):  # an encoder: non-causal unless the file says
            self.causal = bool(self.get(a + ".attention.causal", False))
        self.rope_base = self.get(a + ".rope.freq_base", 10000.0)
        scaling = self.get(a + ".rope.scaling.type", "linear")
        if scaling not in ("linear", "none") and not (a in ("deepseek2", "gpt-oss") and scaling == "yarn"):
            raise SystemExit("ref_forward: rope scaling %r is not supported" % scaling)
        factor = self.get(a + ".rope.scaling.factor", 0.0) or self.get(a + ".rope.scale_linear", 0.0)
        self.rope_scale = 1.0 / factor if factor else 1.0
        self.swa = [False] * self.n_layer
        self.n_swa = 0
        self.rope_base_swa, self.rope_scale_swa = 10000.0, 1.0  # llama_hparams defaults
        self.softcap = 0.0
        if a == "gemma3":
            self.n_swa = self.get(a + ".attention.sliding_window", 0)
            if self.n_swa > 0:
                pat = self.get(a + ".attention.sliding_window_pattern", 6)
                if isinstance(pat, list):
                    self.swa = [bool(x) for x in pat]
                else:
                    self.swa = [pat == 0 or (il % pat < pat - 1) for il in range(self.n_layer)]
                self.rope_base_swa = self.get(a + ".rope.freq_base_swa", 10000.0)
            self.softcap = self.get(a + ".final_logit_softcapping", 0.0)
            self.attn_scale = 1.0 / math.sqrt(self.head_k)
        # granite's multipliers (0: none); attention scale of the non-gemma families
        self.embd_scale = self.residual_scale = self.logit_scale = 0.0
        self.qk_scale = 1.0 / math.sqrt(self.head_k)
        self.rope_layers = [True] * self.n_layer
        if a == "granite":
            self.embd_scale = self.get(a + ".embedding_scale", 0.0)
            self.residual_scale = self.get(a + ".residual_scale", 0.0)
            self.logit_scale = self.get(a + ".logit_scale")
            self.qk_scale = self.get(a + ".attention.scale", 0.0) or self.qk_scale
            if not self.get(a + ".rope.scaling.finetuned", True):
                self.rope_layers = [False] * self.n_layer
        if a == "smollm3":
            self.rope_layers = [(il + 1) % 4 != 0 for il in range(self.n_layer)]
        self.yarn = None
        if a == "gpt-oss":
            self.gptoss_init()
        self.n_expert = self.get(a + ".expert_count", 0) if a in ("qwen3moe", "llama", "gpt-oss") else 0
        if self.n_expert:
            self.n_expert_used = self.get(a + ".expert_used_count")
        if a == "deepseek2":
            self.ds2_init()
        self.tensors = {t.name: t for t in self.r.tensors}
        self.mscale = self.get(a + ".rope.scaling.attn_factor", 1.0)
        orig = self.get(a + ".rope.scaling.original_context_length",
                        self.get(a + ".context_length", 4096))
        self.rope_long = (n_ctx + 255) // 256 * 256 > orig  # llama_model::get_rope_factors
        self.n_vocab = int(self.tensors["token_embd.weight"].shape[1])
        self._cache = {}

    def get(self, key, default=None):
        f = self.kv.get(key)
        if f is None:
            if default is None:
                raise SystemExit("ref_forward: %s: key %s missing" % (self.path, key))
            return default
        return field_value(f)

    def has(self, name):
        return name in self.tensors

    def w(self, name):
        """Tensor `name` as float64, numpy order (rows = outputs: (n_out, n_in))."""
        if name in self._cache:
            return self._cache[name]
        t = self.tensors[name]
        if t.tensor_type in (QT.F32, QT.F16):
            x = np.asarray(t.data).astype(np.float64)
        else:
            x = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)
        x = x.reshape([int(d) for d in reversed(t.shape)])
        self._cache[name] = x
        return x

    # ------------------------------------------------------------ pieces

    def rmsnorm(self, x, weight):
        """x (..., n) / rms(x) * weight"""
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * weight

    def linear(self, x, name):
        y = x @ self.w(name + ".weight").T
        if self.has(name + ".bias"):
            y = y + self.w(name + ".bias")
        return y

    def rope(self, x, pos, base, scale, factors):
        """x (n, heads, head_dim) rotated by position: adjacent pairs (llama) or halves (NeoX)."""
        d = self.n_rot
        i = np.arange(d // 2, dtype=np.float64)
        inv = base ** (-2.0 * i / d)
        if factors is not None:
            inv = inv / factors
        theta = scale * pos[:, None].astype(np.float64) * inv[None, :]      # (n, d/2)
        c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
        c, s = c * self.mscale, s * self.mscale
        out = x.copy()
        if ROPE_NEOX[self.arch]:
            a, b = x[..., : d // 2], x[..., d // 2: d]
            out[..., : d // 2] = a * c - b * s
            out[..., d // 2: d] = a * s + b * c
        else:
            a, b = x[..., 0:d:2], x[..., 1:d:2]
            out[..., 0:d:2] = a * c - b * s
            out[..., 1:d:2] = a * s + b * c
        return out

    def attention(self, q, k, v, il):
        """q (n, H, dk), k (n, Hkv, dk), v (n, Hkv, dv) -> (n, H*dv); causal, sliding window."""
        n = q.shape[0]
        group = self.n_head // self.n_head_kv
        scale = 1.0 if self.arch == "gemma3" else self.qk_scale  # gemma: q pre-scaled
        qi = np.arange(n)[:, None]
        ki = np.arange(n)[None, :]
        masked = ki > qi if self.causal else np.zeros((n, n), bool)  # causal False: encoders
        if self.swa[il] and self.n_swa > 0:
            masked = masked | (qi - ki >= self.n_swa)
        out = np.empty((n, self.n_head, self.head_v))
        sname = "blk.%d.attn_sinks.weight" % il  # gpt-oss: a logit per head in each softmax
        sinks = self.w(sname) if self.has(sname) else None
        for h in range(self.n_head):
            kh = h // group
            s = (q[:, h, :] @ k[:, kh, :].T) * scale
            s[masked] = -np.inf
            mx = s.max(axis=1, keepdims=True)
            if sinks is not None:
                mx = np.maximum(mx, sinks[h])
            p = np.exp(s - mx)
            den = p.sum(axis=1, keepdims=True)
            if sinks is not None:
                den = den + np.exp(sinks[h] - mx)
            p /= den
            out[:, h, :] = p @ v[:, kh, :]
        return out.reshape(n, -1)

    @staticmethod
    def gelu(x):
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

    @staticmethod
    def silu(x):
        return x / (1.0 + np.exp(-x))

    def moe(self, h, p):
        """The experts' FFN of h (n, n_embd): per token the top-k experts of the router's
        softmax, weights renormalised, sum of weight x down(silu(gate) * up)."""
        logits = h @ self.w(p + "ffn_gate_inp.weight").T                   # (n, n_expert)
        pr = np.exp(logits - logits.max(axis=1, keepdims=True))
        pr /= pr.sum(axis=1, keepdims=True)
        gate = self.w(p + "ffn_gate_exps.weight")                          # (X, F, E)
        up = self.w(p + "ffn_up_exps.weight")
        down = self.w(p + "ffn_down_exps.weight")                          # (X, E, F)
        out = np.zeros_like(h)
        for i in range(h.shape[0]):
            sel = np.argsort(-pr[i], kind="stable")[: self.n_expert_used]
            w = pr[i, sel] / pr[i, sel].sum()
            for e, we in zip(sel, w):
                f = self.silu(gate[e] @ h[i]) * (up[e] @ h[i])
                out[i] += we * (down[e] @ f)
        return out

    # ------------------------------------------------------------ gpt-oss

    def gptoss_init(self):
        a = self.arch
        self.n_swa = self.get(a + ".attention.sliding_window")
        pat = self.get(a + ".attention.sliding_window_pattern", 2)
        self.swa = [pat == 0 or (il % pat < pat - 1) for il in range(self.n_layer)]
        if self.get(a + ".rope.scaling.type", "none") == "yarn":
            factor = self.get(a + ".rope.scaling.factor")
            orig = self.get(a + ".rope.scaling.original_context_length", self.get(a + ".context_length"))
            corr = lambda beta: self.n_rot * math.log(orig / (beta * 2 * math.pi)) / (2 * math.log(self.rope_base))
            lo, hi = max(0.0, math.floor(corr(32.0))), min(self.n_rot - 1.0, math.ceil(corr(1.0)))
            # llama_context: attn_factor = mscale(factor) / (1 + 0.1 ln factor), then ggml's
            # rope multiplies it by 1 + 0.1 ln factor again: the magnitude is mscale(factor)
            self.yarn = (1.0 / factor, 0.1 * math.log(factor) + 1.0, lo, hi)
            self.rope_scale = 1.0 / factor
        self.rope_base_swa, self.rope_scale_swa = self.rope_base, self.rope_scale

    def yarn_rope(self, x, pos):
        """YaRN RoPE of x (n, heads, n_rot) on halves (gpt-oss)."""
        fs, mscale, lo, hi = self.yarn
        d = self.n_rot
        i = np.arange(d // 2, dtype=np.float64)
        extrap = pos[:, None].astype(np.float64) * (self.rope_base ** (-2.0 * i / d))[None, :]
        mix = 1.0 - np.clip((i - lo) / max(0.001, hi - lo), 0.0, 1.0)
        theta = fs * extrap * (1.0 - mix) + extrap * mix
        c, s = (np.cos(theta) * mscale)[:, None, :], (np.sin(theta) * mscale)[:, None, :]
        out = x.copy()
        a, b = x[..., : d // 2], x[..., d // 2: d]
        out[..., : d // 2] = a * c - b * s
        out[..., d // 2: d] = a * s + b * c
        return out

    def gptoss_moe(self, h, p):
        """gpt-oss's experts: top-k of the biased router logits, softmax over those k, biased
        gate/up/down, the clamped SwiGLU."""
        logits = self.linear(h, p + "ffn_gate_inp")                      # (n, n_expert)
        out = np.zeros_like(h)
        W = {k: self.w(p + "ffn_%s_exps.weight" % k) for k in ("gate", "up", "down")}
        B = {k: self.w(p + "ffn_%s_exps.bias" % k) for k in ("gate", "up", "down")}
        for i in range(h.shape[0]):
            sel = np.argsort(-logits[i], kind="stable")[: self.n_expert_used]
            w = np.exp(logits[i, sel] - logits[i, sel].max())
            w /= w.sum()
            for e, we in zip(sel, w):
                g = np.minimum(W["gate"][e] @ h[i] + B["gate"][e], 7.0)
                u = np.clip(W["up"][e] @ h[i] + B["up"][e], -7.0, 7.0)
                f = g / (1.0 + np.exp(-1.702 * g)) * (u + 1.0)
                out[i] += we * (W["down"][e] @ f + B["down"][e])
        return out

    # ------------------------------------------------------------ deepseek2

    def ds2_init(self):
        a = self.arch
        self.n_layer -= self.get(a + ".nextn_predict_layers", 0)  # MTP blocks: not run
        self.kv_lora = self.get(a + ".attention.kv_lora_rank")
        self.head_k_mla = self.get(a + ".attention.key_length_mla")
        self.head_v_mla = self.get(a + ".attention.value_length_mla")
        self.dense_lead = self.get(a + ".leading_dense_block_count", 0)
        self.n_expert = self.get(a + ".expert_count", 0)
        self.n_expert_used = self.get(a + ".expert_used_count", 0)
        self.ds2_gating = self.get(a + ".expert_gating_func", 1)
        self.ds2_norm_w = bool(self.get(a + ".expert_weights_norm", False))
        self.ds2_scale = self.get(a + ".expert_weights_scale", 0.0)
        self.ds2_groups = (self.get(a + ".expert_group_count", 0),
                           self.get(a + ".expert_group_used_count", 0))
        # YaRN as llama.cpp sets it up for deepseek2 (llama_context, the graph's kq_scale)
        self.ds2_yarn = None
        self.ds2_kq_scale = 1.0 / math.sqrt(self.head_k_mla)
        if self.get(a + ".rope.scaling.type", "none") == "yarn":
            factor = self.get(a + ".rope.scaling.factor")
            orig = self.get(a + ".rope.scaling.original_context_length", self.get(a + ".context_length"))
            log_mul = self.get(a + ".rope.scaling.yarn_log_multiplier", 0.0) / 0.1
            ms = lambda s, m: 1.0 if s <= 1.0 else 0.1 * m * math.log(s) + 1.0
            if log_mul:
                af = ms(factor, log_mul if log_mul != 1.0 else 1.0) / ms(factor, log_mul)
            else:
                af = ms(factor, 1.0)
            af /= 1.0 + 0.1 * math.log(factor)
            corr = lambda beta: self.n_rot * math.log(orig / (beta * 2 * math.pi)) / (2 * math.log(self.rope_base))
            lo, hi = max(0.0, math.floor(corr(32.0))), min(self.n_rot - 1.0, math.ceil(corr(1.0)))
            self.ds2_yarn = (1.0 / factor, af * (1.0 + 0.1 * math.log(factor)), lo, hi)
            m = af * (1.0 + 0.1 * math.log(factor)) * (1.0 + 0.1 * log_mul * math.log(factor))
            self.ds2_kq_scale = m * m / math.sqrt(self.head_k_mla)

    def ds2_rope(self, x, pos):
        """RoPE of x (n, heads, n_rot) on adjacent pairs, YaRN-scaled when the file says."""
        if self.ds2_yarn is None:
            return self.rope(x, pos, self.rope_base, 1.0, None)
        fs, mscale, lo, hi = self.ds2_yarn
        d = self.n_rot
        i = np.arange(d // 2, dtype=np.float64)
        extrap = pos[:, None].astype(np.float64) * (self.rope_base ** (-2.0 * i / d))[None, :]
        mix = 1.0 - np.clip((i - lo) / max(0.001, hi - lo), 0.0, 1.0)
        theta = fs * extrap * (1.0 - mix) + extrap * mix
        c, s = (np.cos(theta) * mscale)[:, None, :], (np.sin(theta) * mscale)[:, None, :]
        out = x.copy()
        a, b = x[..., 0:d:2], x[..., 1:d:2]
        out[..., 0:d:2] = a * c - b * s
        out[..., 1:d:2] = a * s + b * c
        return out

    def mla(self, h, p, pos):
        """deepseek2's attention output (n, n_embd) of normed h (n, n_embd)."""
        n, H, kvr, rot = h.shape[0], self.n_head, self.kv_lora, self.n_rot
        hk, hv = self.head_k_mla, self.head_v_mla
        nope = hk - rot
        if self.has(p + "attn_q_a.weight"):
            qa = self.rmsnorm(self.linear(h, p + "attn_q_a"), self.w(p + "attn_q_a_norm.weight"))
            q = self.linear(qa, p + "attn_q_b")
        else:
            q = self.linear(h, p + "attn_q")
        q = q.reshape(n, H, hk)
        kv = self.linear(h, p + "attn_kv_a_mqa")                             # (n, kvr + rot)
        c = self.rmsnorm(kv[:, :kvr], self.w(p + "attn_kv_a_norm.weight"))
        k_pe = self.ds2_rope(kv[:, None, kvr:], pos)                        # (n, 1, rot)
        q_pe = self.ds2_rope(q[:, :, nope:], pos)                           # (n, H, rot)
        kb = self.w(p + "attn_k_b.weight")                                  # (H, kvr, nope)
        vb = self.w(p + "attn_v_b.weight")                                  # (H, hv, kvr)
        masked = np.arange(n)[None, :] > np.arange(n)[:, None]
        out = np.empty((n, H, hv))
        for hh in range(H):
            k_nope = c @ kb[hh]                                             # (n, nope)
            v = c @ vb[hh].T                                                # (n, hv)
            s = (q[:, hh, :nope] @ k_nope.T + q_pe[:, hh, :] @ k_pe[:, 0, :].T) * self.ds2_kq_scale
            s[masked] = -np.inf
            s -= s.max(axis=1, keepdims=True)
            pr = np.exp(s)
            pr /= pr.sum(axis=1, keepdims=True)
            out[:, hh, :] = pr @ v
        return self.linear(out.reshape(n, H * hv), p + "attn_output")

    def ds2_ffn(self, h, p, il):
        """deepseek2's FFN of normed h: dense, or routed + shared experts."""
        def swiglu(x, pre):
            g = self.linear(x, pre + "gate" + suf)
            return self.linear(self.silu(g) * self.linear(x, pre + "up" + suf), pre + "down" + suf)
        if il < self.dense_lead or not self.n_expert:
            suf = ""
            return swiglu(h, p + "ffn_")
        logits = h @ self.w(p + "ffn_gate_inp.weight").T                   # (n, n_expert)
        if self.ds2_gating == 2:
            pr = 1.0 / (1.0 + np.exp(-logits))
        else:
            pr = np.exp(logits - logits.max(axis=1, keepdims=True))
            pr /= pr.sum(axis=1, keepdims=True)
        sc = pr + self.w(p + "exp_probs_b.bias") if self.has(p + "exp_probs_b.bias") else pr.copy()
        ng, nu = self.ds2_groups
        gate = self.w(p + "ffn_gate_exps.weight")
        up = self.w(p + "ffn_up_exps.weight")
        down = self.w(p + "ffn_down_exps.weight")
        out = np.zeros_like(h)
        for i in range(h.shape[0]):
            s = sc[i].copy()
            if ng > 1:
                g = s.reshape(ng, -1)
                gs = np.sort(g, axis=1)[:, ::-1][:, :2].sum(axis=1)
                keep = np.argsort(-gs, kind="stable")[:nu]
                mask = np.ones(ng, bool)
                mask[keep] = False
                g[mask] = -np.inf
                s = g.reshape(-1)
            sel = np.argsort(-s, kind="stable")[: self.n_expert_used]
            w = pr[i, sel]
            if self.ds2_norm_w:
                w = w / max(w.sum(), 6.103515625e-5)
            if self.ds2_scale not in (0.0, 1.0):
                w = w * self.ds2_scale
            for e, we in zip(sel, w):
                f = self.silu(gate[e] @ h[i]) * (up[e] @ h[i])
                out[i] += we * (down[e] @ f)
        suf = "_shexp"
        return out + swiglu(h, p + "ffn_") if self.has(p + "ffn_gate_shexp.weight") else out

    # ------------------------------------------------------------ forward

    def hidden(self, tokens):
        """The final normed hidden states (n, n_embd) of a token sequence at positions 0..n-1."""
        if self.arch in ("bert", "nomic-bert"):
            return self.bert_hidden(tokens)
        tokens = np.asarray(tokens, dtype=np.int64)
        n = len(tokens)
        pos = np.arange(n)
        x = self.w("token_embd.weight")[tokens]
        if self.arch == "gemma3":
            x = x * math.sqrt(self.n_embd)
        if self.embd_scale:
            x = x * self.embd_scale
        factors = self.w("rope_freqs.weight") if self.has("rope_freqs.weight") else None
        lr = "rope_factors_%s.weight" % ("long" if self.rope_long else "short")
        if factors is None and self.has(lr):
            factors = self.w(lr)
        if self.arch == "smollm3":  # llama.cpp's graph passes no frequency factors
            factors = None
        rs = self.residual_scale or 1.0
        for il in range(self.n_layer):
            p = "blk.%d." % il
            h = self.rmsnorm(x, self.w(p + "attn_norm.weight"))
            if self.arch == "deepseek2":
                x = x + self.mla(h, p, pos)
                x = x + self.ds2_ffn(self.rmsnorm(x, self.w(p + "ffn_norm.weight")), p, il)
                continue
            if self.has(p + "attn_qkv.weight"):  # phi3: q, k, v rows
                qkv = self.linear(h, p + "attn_qkv")
                qd, kd = self.n_head * self.head_k, self.n_head_kv * self.head_k
                q, k, v = qkv[:, :qd], qkv[:, qd:qd + kd], qkv[:, qd + kd:]
            else:
                q, k, v = (self.linear(h, p + "attn_" + x) for x in "qkv")
            q = q.reshape(n, self.n_head, self.head_k)
            k = k.reshape(n, self.n_head_kv, self.head_k)
            v = v.reshape(n, self.n_head_kv, self.head_v)
            if self.has(p + "attn_q_norm.weight"):
                q = self.rmsnorm(q, self.w(p + "attn_q_norm.weight"))
                k = self.rmsnorm(k, self.w(p + "attn_k_norm.weight"))
            if self.swa[il]:
                base, scale = self.rope_base_swa, self.rope_scale_swa
            else:
                base, scale = self.rope_base, self.rope_scale
            if self.yarn is not None:
                q, k = self.yarn_rope(q, pos), self.yarn_rope(k, pos)
            elif self.rope_layers[il]:
                q = self.rope(q, pos, base, scale, factors)
                k = self.rope(k, pos, base, scale, factors)
            if self.arch == "gemma3":
                q = q * self.attn_scale
            a = self.linear(self.attention(q, k, v, il), p + "attn_output")
            if self.arch == "gemma3":
                a = self.rmsnorm(a, self.w(p + "post_attention_norm.weight"))
            x = x + a * rs
            if self.arch == "gpt-oss":  # its attn_post_norm is the FFN's pre-norm
                f = self.gptoss_moe(self.rmsnorm(x, self.w(p + "post_attention_norm.weight")), p)
                x = x + f
                continue
            h = self.rmsnorm(x, self.w(p + "ffn_norm.weight"))
            if self.n_expert:
                f = self.moe(h, p)
            elif not self.has(p + "ffn_gate.weight"):  # phi3: gate rows, then up rows
                gu = self.linear(h, p + "ffn_up")
                ff = gu.shape[1] // 2
                f = self.linear(self.silu(gu[:, :ff]) * gu[:, ff:], p + "ffn_down")
            else:
                g = self.linear(h, p + "ffn_gate")
                u = self.linear(h, p + "ffn_up")
                act = self.gelu(g) if self.arch == "gemma3" else self.silu(g)
                f = self.linear(act * u, p + "ffn_down")
            if self.arch == "gemma3":
                f = self.rmsnorm(f, self.w(p + "post_ffw_norm.weight"))
            x = x + f * rs
        return self.rmsnorm(x, self.w("output_norm.weight"))

    def layernorm(self, x, name):
        """LayerNorm of x (..., n) with name.weight and name.bias"""
        d = x - x.mean(axis=-1, keepdims=True)
        y = d / np.sqrt(np.mean(d * d, axis=-1, keepdims=True) + self.eps)
        return y * self.w(name + ".weight") + self.w(name + ".bias")

    def bert_hidden(self, tokens):
        """bert (src/models/bert.cpp): LN(token + type 0 + position embeddings), then per layer
        x = LN(x + attn(x)) (q/k/v/output biases, no RoPE, scale 1/sqrt(head_dim), non-causal
        unless attention.causal), x = LN(x + down(GELU(up x + b)) + b); no final norm."""
        tokens = np.asarray(tokens, dtype=np.int64)
        n = len(tokens)
        x = self.w("token_embd.weight")[tokens]
        if self.has("token_types.weight"):
            x = x + self.w("token_types.weight")[0]
        if self.has("position_embd.weight"):  # bert; nomic-bert rotates q and k instead
            x = x + self.w("position_embd.weight")[:n]
        x = self.layernorm(x, "token_embd_norm")
        pos = np.arange(n)
        for il in range(self.n_layer):
            p = "blk.%d." % il
            if self.has(p + "attn_qkv.weight"):  # nomic-bert: q, k, v rows
                qkv = self.linear(x, p + "attn_qkv")
                qd = self.n_head * self.head_k
                q, k, v = qkv[:, :qd], qkv[:, qd:2 * qd], qkv[:, 2 * qd:]
            else:
                q, k, v = (self.linear(x, p + "attn_" + c) for c in "qkv")
            q = q.reshape(n, self.n_head, self.head_k)
            k = k.reshape(n, self.n_head_kv, self.head_k)
            if self.arch == "nomic-bert":
                q = self.rope(q, pos, self.rope_base, 1.0, None)
                k = self.rope(k, pos, self.rope_base, 1.0, None)
            a = self.attention(q, k, v.reshape(n, self.n_head_kv, self.head_v), il)
            x = self.layernorm(x + self.linear(a, p + "attn_output"), p + "attn_output_norm")
            if self.has(p + "ffn_gate.weight"):  # nomic-bert: SwiGLU, no biases
                f = (self.silu(x @ self.w(p + "ffn_gate.weight").T) * (x @ self.w(p + "ffn_up.weight").T)
                     ) @ self.w(p + "ffn_down.weight").T
            else:
                f = self.linear(self.gelu(self.linear(x, p + "ffn_up")), p + "ffn_down")
            x = self.layernorm(x + f, p + "layer_output_norm")
        return x

    def head(self, h):
        """Logits (n, n_vocab) of final hidden states h (n, n_embd)."""
        name = "output.weight" if self.has("output.weight") else "token_embd.weight"
        y = h @ self.w(name).T
        if self.logit_scale:
            y = y / self.logit_scale
        if self.softcap:
            y = np.tanh(y / self.softcap) * self.softcap
        return y

    def logits(self, tokens):
        return self.head(self.hidden(tokens))

    def embedding(self, tokens, pooling, dims=0):
        """A sequence's embedding as llama-server returns it: the final normed hidden states
        pooled ('mean', 'cls': the first row, 'last'), the first dims values (0: all), L2-normalised."""
        h = self.hidden(tokens)
        v = {"mean": lambda: h.mean(axis=0), "cls": lambda: h[0], "last": lambda: h[-1]}[pooling]()
        v = v[:dims] if dims else v
        return v / np.linalg.norm(v)

    def log_probs(self, tokens, chunk=64):
        """Yields (first position, log-softmax rows float64 (m, n_vocab)) in chunks of positions."""
        h = self.hidden(tokens)
        for p0 in range(0, len(tokens), chunk):
            y = self.head(h[p0:p0 + chunk])
            y -= y.max(axis=1, keepdims=True)
            y -= np.log(np.exp(y).sum(axis=1, keepdims=True))
            yield p0, y


# ================================================================ engine comparison helpers

def log_softmax(logits):
    """float32/64 rows -> float64 log-softmax rows."""
    y = np.asarray(logits, dtype=np.float64)
    y = y - y.max(axis=1, keepdims=True)
    return y - np.log(np.exp(y).sum(axis=1, keepdims=True))


def kl_rows(ref_logp, eng_logp):
    """KL(ref || engine) per row (float64)."""
    return (np.exp(ref_logp) * (ref_logp - eng_logp)).sum(axis=1)


class StreamRows:
    """An engine's logits read from a binary stream of float32 rows (tests/tools/logits_dump.c)."""

    def __init__(self, f, n_vocab):
        self.f, self.n_vocab = f, n_vocab

    def rows(self, m):
        want = m * self.n_vocab * 4
        buf = self.f.read(want)
        if len(buf) != want:
            raise RuntimeError("engine stream ended early (%d of %d bytes)" % (len(buf), want))
        return np.frombuffer(buf, dtype=np.float32).reshape(m, self.n_vocab)


class ArrayRows:
    """An engine's logits from arrays, one (n, n_vocab) array per sequence, in order."""

    def __init__(self, arrays):
        self.arrays, self.i, self.p = list(arrays), 0, 0

    def rows(self, m):
        a = self.arrays[self.i]
        out = a[self.p:self.p + m]
        self.p += m
        if self.p >= len(a):
            self.i, self.p = self.i + 1, 0
        return out


def compare(ref, seqs, engines, chunk=64):
    """Every position of every sequence: KL(reference || engine) and whether the engine's
    top token is the reference's. engines: {name: object with rows(m) giving the next m
    rows of float32 logits, sequences and positions in order}. Returns {name: stats}."""
    kl = {e: [] for e in engines}
    top1 = {e: 0 for e in engines}
    for toks in seqs:
        for p0, lp in ref.log_probs(toks, chunk):
            best = lp.argmax(axis=1)
            for name, eng in engines.items():
                logits = eng.rows(len(lp))
                kl[name].append(kl_rows(lp, log_softmax(logits)))
                top1[name] += int((np.asarray(logits).argmax(axis=1) == best).sum())
    out = {}
    for name in engines:
        k = np.concatenate(kl[name])
        out[name] = dict(n=len(k), kl_mean=float(k.mean()), kl_median=float(np.median(k)),
                         kl_p99=float(np.percentile(k, 99)), kl_max=float(k.max()), top1=top1[name])
    return out


# ================================================================ F32 copy

def write_f32_copy(src, dst):
    """Writes dst: src's metadata with every tensor dequantized to F32 (gguf's dequantizer),
    general.file_type 0 (ALL_F32). Both engines then read the reference's exact weights."""
    r = gguf.GGUFReader(src)
    arch = field_value(r.fields["general.architecture"])
    tmp = dst + ".tmp"
    w = gguf.GGUFWriter(tmp, arch)
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        if key == "general.file_type":
            w.add_uint32(key, 0)
            continue
        vtype = f.types[0]
        sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(key, field_value(f), vtype, sub)
    for t in r.tensors:
        if t.tensor_type == QT.F32:
            x = np.asarray(t.data, dtype=np.float32)
        elif t.tensor_type == QT.F16:
            x = np.asarray(t.data).astype(np.float32)
        else:
            x = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        x = x.reshape([int(d) for d in reversed(t.shape)])
        w.add_tensor(t.name, x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, dst)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", help="comma-separated token ids")
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--write-f32", metavar="OUT", help="write an all-F32 copy of the model")
    a = ap.parse_args()
    if a.write_f32:
        write_f32_copy(a.model, a.write_f32)
        print("wrote %s (%.1f MB)" % (a.write_f32, os.path.getsize(a.write_f32) / 1e6))
        return 0
    if not a.tokens:
        ap.error("--tokens or --write-f32")
    toks = [int(t) for t in a.tokens.split(",")]
    m = RefModel(a.model)
    for p0, lp in m.log_probs(toks):
        for i, row in enumerate(lp):
            top = np.argsort(-row, kind="stable")[: a.top]
            print("pos %d: %s" % (p0 + i, " ".join("%d:%.6f" % (t, row[t]) for t in top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
