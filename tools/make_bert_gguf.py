#!/usr/bin/env python3
# Writes tiny random-weight bert GGUFs (the shape of llama.cpp's bert: token types, learned
# positions, post-norm LayerNorms with biases, GELU FFN) for tests/test_model_bert_load.c:
#   tests/data/bert_tiny.gguf            valid: 2 layers, n_embd 16, 2 heads, n_ff 32, ctx 32,
#                                        the first 200 tokens of llama.cpp's bert-bge vocabulary
#   tests/data/bert_tiny_no_pos.gguf     without position_embd.weight
#   tests/data/bert_tiny_no_types.gguf   without tokenizer.ggml.token_type_count
#   tests/data/bert_tiny_bad_pos.gguf    position_embd.weight one value wider than n_embd
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


def vocab(nv=NV):
    """The first nv tokens (all: None) of llama.cpp's bert-bge vocabulary, and their types."""
    r = gguf.GGUFReader(VOCAB)
    t = r.fields["tokenizer.ggml.tokens"]
    tt = r.fields["tokenizer.ggml.token_type"]
    toks = [bytes(t.parts[i]).decode("utf-8") for i in t.data[:nv]]
    types = [int(tt.parts[i][0]) for i in tt.data[:nv]]
    return toks, types


# the real bge-small-en-v1.5 shape (width 384, 12 heads of 32, n_ff 1536, 512 positions)
BGE_SMALL = dict(E=384, L=12, H=12, F=1536, CTX=512)
# nomic-embed-text-v1.5's (width 768, 12 heads of 64, n_ff 3072, 2048 positions, RoPE base 1000)
NOMIC_V15 = dict(E=768, L=12, H=12, F=3072, CTX=2048)


def write(path, drop_tensor=None, token_types=True, bad_shape=None, shape=None, nv=NV, scale=0.2, mat_type=None,
          pooling=gguf.PoolingType.MEAN, quiet=False, rerank=False, arch="bert"):
    """A random-weight bert file: the tiny test shape, or shape (a dict like BGE_SMALL, L the
    layer count) over the first nv tokens (None: all) of the bge vocabulary (rerank: a
    bge-reranker's head, cls.weight / cls.bias / cls.output.weight (1, E) / cls.output.bias, and
    pooling rank; arch "nomic-bert": no position_embd, RoPE base 1000, fused attn_qkv, a
    SwiGLU FFN, no biases but the LayerNorms'); matrices of
    std `scale` (f32, or mat_type: "f16"; token_types and position_embd stay f32, as
    llama.cpp's graph adds a view of token_types to f32 rows), norm weights 1 + N(0, 0.04), biases of std 0.2."""
    sh = dict(E=E, L=L, H=H, F=F, CTX=CTX) if shape is None else shape
    e_, l_, h_, f_, ctx_ = sh["E"], sh["L"], sh["H"], sh["F"], sh["CTX"]
    rng = np.random.default_rng(1234)
    nomic = arch == "nomic-bert"
    w = gguf.GGUFWriter(path, arch)
    w.add_context_length(ctx_)
    w.add_embedding_length(e_)
    w.add_block_count(l_)
    w.add_feed_forward_length(f_)
    w.add_head_count(h_)
    w.add_layer_norm_eps(1e-12)
    w.add_causal_attention(False)
    if nomic:
        w.add_rope_freq_base(1000.0)
    w.add_pooling_type(gguf.PoolingType.RANK if rerank else pooling)
    toks, types = vocab(nv)
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

    nvo = len(toks)

    def t(name, *shape, one=False):
        if name == drop_tensor:
            return
        big = len(shape) == 2
        x = rng.standard_normal(shape).astype(np.float32) * (scale if big else 0.2)
        if name == bad_shape:  # one column too many
            x = np.concatenate([x, x[..., :1]], axis=-1)
        if one:
            x += 1.0
        if big and mat_type == "f16" and name not in ("token_types.weight", "position_embd.weight"):
            x = x.astype(np.float16)
        w.add_tensor(name, x)

    t("token_embd.weight", nvo, e_)
    t("token_types.weight", 2, e_)
    if not nomic:
        t("position_embd.weight", ctx_, e_)
    t("token_embd_norm.weight", e_, one=True)
    t("token_embd_norm.bias", e_)
    for i in range(l_):
        b = "blk.%d." % i
        if nomic:
            t(b + "attn_qkv.weight", 3 * e_, e_)
            t(b + "attn_output.weight", e_, e_)
            t(b + "attn_output_norm.weight", e_, one=True)
            t(b + "attn_output_norm.bias", e_)
            for x in ("ffn_up", "ffn_gate"):
                t(b + x + ".weight", f_, e_)
            t(b + "ffn_down.weight", e_, f_)
            t(b + "layer_output_norm.weight", e_, one=True)
            t(b + "layer_output_norm.bias", e_)
            continue
        for x in ("attn_q", "attn_k", "attn_v", "attn_output"):
            t(b + x + ".weight", e_, e_)
            t(b + x + ".bias", e_)
        t(b + "attn_output_norm.weight", e_, one=True)
        t(b + "attn_output_norm.bias", e_)
        t(b + "ffn_up.weight", f_, e_)
        t(b + "ffn_up.bias", f_)
        t(b + "ffn_down.weight", e_, f_)
        t(b + "ffn_down.bias", e_)
        t(b + "layer_output_norm.weight", e_, one=True)
        t(b + "layer_output_norm.bias", e_)
    if rerank:
        t("cls.weight", e_, e_)
        t("cls.bias", e_)
        t("cls.output.weight", 1, e_)
        t("cls.output.bias", 1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if not quiet:
        print("wrote %s (%d bytes)" % (os.path.relpath(path, ROOT), os.path.getsize(path)))


def main():
    d = os.path.join(ROOT, "tests/data")
    write(os.path.join(d, "bert_tiny.gguf"))
    write(os.path.join(d, "bert_tiny_no_pos.gguf"), drop_tensor="position_embd.weight")
    write(os.path.join(d, "bert_tiny_no_types.gguf"), token_types=False)
    write(os.path.join(d, "bert_tiny_bad_pos.gguf"), bad_shape="position_embd.weight")
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
