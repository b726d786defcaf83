#!/usr/bin/env python3
"""Write tiny Gemma 3-shaped GGUF files (random weights, small SentencePiece vocab)
for loader tests: one valid model and variants that are each broken in one way.

usage: make_tiny_gguf.py OUT_DIR
Writes OUT_DIR/tiny_ok.gguf and OUT_DIR/tiny_<defect>.gguf; prints one line per file."""
import sys
from pathlib import Path

import numpy as np
import gguf

E, L, H, HKV, HD, FF = 64, 2, 2, 1, 32, 128


# defects that store blk.0.ffn_down.weight in a type lumen refuses
RAW_TYPES = {"iq2_dtype": gguf.GGMLQuantizationType.IQ2_XXS,
             "tq1_dtype": gguf.GGMLQuantizationType.TQ1_0}


def vocab():
    toks, scores, types = ["<pad>", "<eos>", "<bos>", "<unk>"], [0.0] * 4, [3, 3, 3, 2]
    for b in range(256):
        toks.append(f"<0x{b:02X}>"); scores.append(0.0); types.append(6)
    words = ["\u2581the", "\u2581a", "\u2581cat", "\u2581dog", "th", "he", "\u2581", "e", "t", "h",
             "<start_of_turn>", "<end_of_turn>"]
    for i, w in enumerate(words):
        toks.append(w); scores.append(-float(i)); types.append(3 if w.startswith("<") else 1)
    return toks, scores, types


def write(path, defect=None):
    rng = np.random.default_rng(0)
    arch = "llama2000" if defect == "bad_arch" else "gemma3"
    w = gguf.GGUFWriter(str(path), arch)
    def u32(k, v):
        if defect != f"no_{k}": w.add_uint32(f"{arch}.{k}", v)
    u32("context_length", 256)
    u32("embedding_length", E)
    u32("block_count", L)
    u32("feed_forward_length", FF)
    u32("attention.head_count", H)
    u32("attention.head_count_kv", HKV)
    u32("attention.key_length", HD)
    u32("attention.value_length", HD)
    u32("attention.sliding_window", 16)
    if defect != "no_eps":
        w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)
    if defect == "softcap":  # not a defect: Gemma 2's final soft-capping of the logits
        w.add_float32(f"{arch}.final_logit_softcapping", 3.0)
    if defect == "eps_wrong_type":
        w.add_string(f"{arch}.attention.layer_norm_rms_epsilon", "tiny")
    toks, scores, types = vocab()
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(False)
    V = len(toks)

    def t(name, shape, f32=False):
        # GGUF shapes are listed innermost-first; numpy arrays are outermost-first
        arr = (rng.standard_normal(tuple(reversed(shape))) * 0.05).astype(np.float32)
        if name.endswith("norm.weight"):
            arr = np.ones(tuple(reversed(shape)), np.float32)
        if defect == "missing_tensor" and name == "blk.1.ffn_up.weight":
            return
        if defect == "wrong_shape" and name == "blk.0.attn_q.weight":
            arr = arr[:, :-1].copy()
        if defect in RAW_TYPES and name == "blk.0.ffn_down.weight":
            # a type lumen cannot run: raw blocks, rows of a multiple of its block size
            qt = RAW_TYPES[defect]
            blk, size = gguf.GGML_QUANT_SIZES[qt]
            n = arr.size
            row = max(blk, shape[0] // blk * blk)
            raw = rng.integers(0, 256, (n // row, row // blk * size), dtype=np.uint8)
            w.add_tensor(name, raw, raw_dtype=qt)
            return
        w.add_tensor(name, arr if f32 or len(shape) == 1 else arr.astype(np.float16))

    t("token_embd.weight", [E, V])
    t("output_norm.weight", [E])
    for i in range(L):
        p = f"blk.{i}."
        t(p + "attn_norm.weight", [E]); t(p + "attn_q.weight", [E, H * HD])
        t(p + "attn_k.weight", [E, HKV * HD]); t(p + "attn_v.weight", [E, HKV * HD])
        t(p + "attn_q_norm.weight", [HD]); t(p + "attn_k_norm.weight", [HD])
        t(p + "attn_output.weight", [H * HD, E]); t(p + "post_attention_norm.weight", [E])
        t(p + "ffn_norm.weight", [E]); t(p + "ffn_gate.weight", [E, FF])
        t(p + "ffn_up.weight", [E, FF]); t(p + "ffn_down.weight", [FF, E])
        t(p + "post_ffw_norm.weight", [E])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(path)


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    write(out / "tiny_ok.gguf")
    write(out / "tiny_softcap.gguf", "softcap")
    for d in ["bad_arch", "no_embedding_length", "no_eps", "missing_tensor", "wrong_shape",
              *RAW_TYPES]:
        write(out / f"tiny_{d}.gguf", d)


if __name__ == "__main__":
    main()
