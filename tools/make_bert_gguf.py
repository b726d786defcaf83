#!/usr/bin/env python3
# Writes tiny random-weight bert GGUFs (the shape of llama.cpp's bert: token types, learned
# positions, post-norm LayerNorms with biases, GELU FFN) for tests/test_model_bert_load.c:
#   tests/data/bert_tiny.gguf            valid: 2 layers, n_embd 16, 2 heads, n_ff 32, ctx 32,
#                                        the first 200 tokens of llama.cpp's bert-bge vocabulary
#   tests/data/bert_tiny_no_pos.gguf     without position_embd.weight
#   tests/data/bert_tiny_no_types.gguf   without tokenizer.ggml.token_type_count
# and checks that llama.cpp (the pinned llama-cpp-python) loads the valid one and embeds a
# text with it (mean pooling), printing the first values for the forward pass to come.
#
# Usage: .venv/bin/python tools/make_bert_gguf.py
import os
import sys

import numpy as np
import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(ROOT, "tests/data/vocab/ggml-vocab-bert-bge.gguf")
E, L, H, F, CTX, NV = 16, 2, 2, 32, 32, 200


def vocab():
    r = gguf.GGUFReader(VOCAB)
    t = r.fields["tokenizer.ggml.tokens"]
    tt = r.fields["tokenizer.ggml.token_type"]
    toks = [bytes(t.parts[i]).decode("utf-8") for i in t.data[:NV]]
    types = [int(tt.parts[i][0]) for i in tt.data[:NV]]
    return toks, types


def write(path, drop_tensor=None, token_types=True):
    rng = np.random.default_rng(1234)
    w = gguf.GGUFWriter(path, "bert")
    w.add_context_length(CTX)
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_layer_norm_eps(1e-12)
    w.add_causal_attention(False)
    w.add_pooling_type(gguf.PoolingType.MEAN)
    toks, types = vocab()
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_types(types)
    if token_types:
        w.add_token_type_count(2)
    w.add_unk_token_id(100)
    w.add_uint32("tokenizer.ggml.cls_token_id", 101)
    w.add_sep_token_id(102)
    w.add_pad_token_id(0)
    w.add_mask_token_id(103)

    def t(name, *shape, scale=0.2, one=False):
        if name == drop_tensor:
            return
        x = rng.standard_normal(shape).astype(np.float32) * scale
        if one:
            x += 1.0
        w.add_tensor(name, x)

    t("token_embd.weight", NV, E)
    t("token_types.weight", 2, E)
    t("position_embd.weight", CTX, E)
    t("token_embd_norm.weight", E, one=True)
    t("token_embd_norm.bias", E)
    for i in range(L):
        b = "blk.%d." % i
        for x in ("attn_q", "attn_k", "attn_v", "attn_output"):
            t(b + x + ".weight", E, E)
            t(b + x + ".bias", E)
        t(b + "attn_output_norm.weight", E, one=True)
        t(b + "attn_output_norm.bias", E)
        t(b + "ffn_up.weight", F, E)
        t(b + "ffn_up.bias", F)
        t(b + "ffn_down.weight", E, F)
        t(b + "ffn_down.bias", E)
        t(b + "layer_output_norm.weight", E, one=True)
        t(b + "layer_output_norm.bias", E)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote %s (%d bytes)" % (os.path.relpath(path, ROOT), os.path.getsize(path)))


def main():
    d = os.path.join(ROOT, "tests/data")
    write(os.path.join(d, "bert_tiny.gguf"))
    write(os.path.join(d, "bert_tiny_no_pos.gguf"), drop_tensor="position_embd.weight")
    write(os.path.join(d, "bert_tiny_no_types.gguf"), token_types=False)
    try:
        import llama_cpp
    except ImportError:
        print("llama_cpp not importable: skipping the llama.cpp check", file=sys.stderr)
        return
    llm = llama_cpp.Llama(model_path=os.path.join(d, "bert_tiny.gguf"), embedding=True, verbose=False,
                          n_ctx=CTX)
    ids = llm.tokenize(b"the a", add_bos=True)
    emb = llm.embed("the a", normalize=False)
    print("llama.cpp: ids %s, embedding[:4] %s" % (ids, [round(v, 5) for v in np.asarray(emb).ravel()[:4]]))


if __name__ == "__main__":
    main()
