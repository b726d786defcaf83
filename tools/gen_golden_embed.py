#!/usr/bin/env python3
"""Golden embeddings for tests/test_model_embed.sh: reduced Qwen3 copies (tools/make_arch_gguf.py
--family qwen3 --layers 2 --vocab 2048, real width 1024) as embedding models, pooling 'last'
with EOS appended (as Qwen3-Embedding) and 'mean', embedded by llama.cpp (llama-cpp-python's
Llama(embedding=True).embed: its pooling, L2-normalised as llama-server's embd_normalize) and
by the float64 reference (tools/ref_forward.py RefModel.embedding).

Writes tests/golden/embed_<name>.txt: 'sha256 <hex>', then per input 'input <text>',
'n_tokens <n>', 'ids <token ids>', 'llama <values>' and 'ref <values>' (%.8g), 'cos_llama_ref <c>',
and for the mean copy 'ref_noncausal <values>': the reference with non-causal attention (every
position attends to all: what encoders do; tests/test_runtime_embed.c).

tests/golden/embed_bert_mean.txt: a reduced bge-small copy (tools/make_bert_gguf.py: width 384,
12 heads, 2 layers, the real WordPiece vocabulary), mean and cls pooled (write_bert_golden);
embed_bert_rank.txt: the same with bge-reranker's head (write_bert_rank_golden); embed_nomic_mean.txt:
a reduced nomic-embed-text-v1.5 copy (nomic-bert: width 768, RoPE, SwiGLU, 2 layers), mean.

usage: gen_golden_embed.py [--dir /tmp/lumen-embed] [--golden tests/golden] [--bert-only]
"""
import argparse
import hashlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_arch_gguf  # noqa: E402
import make_bert_gguf  # noqa: E402
import ref_forward  # noqa: E402

# (name, pooling, extra for make_arch_gguf.write_model)
CASES = [
    ("qwen3_last", "last", {"pooling_type": 3, "add_eos": True}),
    ("qwen3_mean", "mean", {"pooling_type": 1}),
]
INPUTS = ["w1 w2 w3", "w500 w17 w1000 w9 w44 w123 w7", "w5"]
# the reranker copy (pooling rank: cls.output.weight, the rerank template of make_arch_gguf.py)
RERANK = ("qwen3_rank", {"pooling_type": 4}, "w7 w8 w9", ["w7 w8 w9", "w1 w2", "w300 w7 w12 w8", "w5"])


# the bert copy: bge-small-en-v1.5's shape (make_bert_gguf.BGE_SMALL) with 2 layers, its whole
# WordPiece vocabulary, f16 matrices; embedded with mean (the file's) and cls pooling
BERT = ("bert_mean", ["mean", "cls"],
        ["The quick brown fox jumps over the lazy dog.", "hello",
         "What is the capital of France? Paris is the capital and most populous city of France, "
         "with an estimated population of 2,102,650 residents in January 2023.",
         "Embeddings turn text into vectors; similar sentences land close together."])


# the bert cross-encoder copy (bge-reranker's head: cls, tanh, cls.output (1, E))
BERT_RANK = ("bert_rank", "what is a panda?",
             ["The giant panda is a bear species endemic to China.", "hi",
              "Paris is the capital of France.", "Pandas eat bamboo."])


# the nomic-bert copy: nomic-embed-text-v1.5's shape with 2 layers, the same vocabulary, mean
NOMIC = ("nomic_mean", ["mean"], BERT[2])


def write_bert_model(d):
    make_bert_gguf.write(model_path(d, BERT[0]), shape=dict(make_bert_gguf.BGE_SMALL, L=2), nv=None,
                         scale=0.05, mat_type="f16", quiet=True)
    make_bert_gguf.write(model_path(d, BERT_RANK[0]), shape=dict(make_bert_gguf.BGE_SMALL, L=2),
                         nv=None, scale=0.05, mat_type="f16", quiet=True, rerank=True)
    make_bert_gguf.write(model_path(d, NOMIC[0]), shape=dict(make_bert_gguf.NOMIC_V15, L=2), nv=None,
                         scale=0.035, mat_type="f16", quiet=True, arch="nomic-bert")


def write_bert_rank_golden(a, llama_cpp):
    """tests/golden/embed_bert_rank.txt: 'sha256', 'query', per document 'document', 'ids'
    (llama-server's prompt for a vocabulary without a rerank template: [CLS] query [SEP]
    document, as WordPiece's add_bos / add_sep say) and 'llama' / 'ref' scores (the [CLS] row
    through cls, tanh, cls.output)."""
    name, query, docs = BERT_RANK
    path = model_path(a.dir, name)
    out = ["sha256 " + hashlib.sha256(open(path, "rb").read()).hexdigest(), "query " + query]
    llm = llama_cpp.Llama(model_path=path, embedding=True, n_ctx=512, n_batch=512, n_ubatch=512,
                          n_threads=2, verbose=False, pooling_type=4)
    ref = ref_forward.RefModel(path)
    for doc in docs:
        toks = [101] + llm.tokenize(query.encode(), add_bos=False) + [102] + llm.tokenize(doc.encode(), add_bos=False)
        llm._batch.reset()
        llm._batch.add_sequence(toks, 0, True)
        llm._ctx.kv_cache_clear()
        llm._ctx.decode(llm._batch)
        s_ll = llama_cpp.llama_get_embeddings_seq(llm._ctx.ctx, 0)[0]
        h = np.tanh(ref.w("cls.weight") @ ref.hidden(toks)[0] + ref.w("cls.bias"))
        s_ref = float((ref.w("cls.output.weight") @ h + ref.w("cls.output.bias")).ravel()[0])
        out += ["document " + doc, "ids " + " ".join(map(str, toks)), "llama %.8g" % s_ll, "ref %.8g" % s_ref]
        print("%s %r: %d tokens, llama.cpp %.6f, ref %.6f" % (name, doc, len(toks), s_ll, s_ref))
    with open(os.path.join(a.golden, "embed_%s.txt" % name), "w") as f:
        f.write("\n".join(out) + "\n")


def write_bert_golden(a, llama_cpp, case=BERT):
    """tests/golden/embed_bert_mean.txt: 'sha256', then per input 'input <text>', 'n_tokens',
    'ids' ([CLS] ... [SEP], llama.cpp's tokenizer) and per pooling 'llama_<pooling>' (llama.cpp's
    vector, L2-normalised) and 'ref_<pooling>' (the float64 reference's, non-causal)."""
    name, poolings, texts = case
    path = model_path(a.dir, name)
    out = ["sha256 " + hashlib.sha256(open(path, "rb").read()).hexdigest()]
    ref = ref_forward.RefModel(path)
    lls = {p: llama_cpp.Llama(model_path=path, embedding=True, n_ctx=512, n_batch=512, n_ubatch=512,
                              n_threads=2, verbose=False, pooling_type={"mean": 1, "cls": 2}[p])
           for p in poolings}
    for text in texts:
        toks = lls[poolings[0]].tokenize(text.encode())
        out += ["input " + text, "n_tokens %d" % len(toks), "ids " + " ".join(map(str, toks))]
        for p in poolings:
            e_ll = np.array(lls[p].embed(text, normalize=True), dtype=np.float64)
            e_ref = ref.embedding(toks, p)
            out += ["llama_%s " % p + " ".join("%.8g" % v for v in e_ll),
                    "ref_%s " % p + " ".join("%.8g" % v for v in e_ref)]
            print("%s %s %r: %d tokens, cos(llama.cpp, ref) %.9f" % (name, p, text[:30], len(toks),
                                                                      float(e_ll @ e_ref)))
    with open(os.path.join(a.golden, "embed_%s.txt" % name), "w") as f:
        f.write("\n".join(out) + "\n")


def model_path(d, name):
    return os.path.join(d, "embed_%s.gguf" % name)


def write_models(d):
    os.makedirs(d, exist_ok=True)
    for name, _, extra in CASES + [(RERANK[0], "rank", RERANK[1])]:
        make_arch_gguf.write_model(model_path(d, name), "qwen3", 2, 2048, "f16",
                                   extra=dict(extra), quiet=True)
    write_bert_model(d)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/tmp/lumen-embed")
    ap.add_argument("--golden", default=os.path.join(os.path.dirname(__file__), "..", "tests", "golden"))
    ap.add_argument("--models-only", action="store_true", help="write the models, no goldens")
    ap.add_argument("--bert-only", action="store_true", help="only the bert model (and golden)")
    a = ap.parse_args()
    if a.bert_only:
        os.makedirs(a.dir, exist_ok=True)
        write_bert_model(a.dir)
    else:
        write_models(a.dir)
    if a.models_only:
        return 0
    import llama_cpp
    if a.bert_only:
        write_bert_golden(a, llama_cpp)
        write_bert_golden(a, llama_cpp, NOMIC)
        write_bert_rank_golden(a, llama_cpp)
        return 0
    for name, pooling, _ in CASES:
        path = model_path(a.dir, name)
        sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
        llm = llama_cpp.Llama(model_path=path, embedding=True, n_ctx=512, n_batch=512,
                              n_ubatch=512, n_threads=2, verbose=False,
                              pooling_type={"mean": 1, "last": 3}[pooling])
        ref = ref_forward.RefModel(path)
        out = ["sha256 " + sha]
        for text in INPUTS:
            toks = llm.tokenize(text.encode())
            e_ll = np.array(llm.embed(text, normalize=True), dtype=np.float64)
            e_ref = ref.embedding(toks, pooling)
            cos = float(e_ll @ e_ref / np.linalg.norm(e_ll) / np.linalg.norm(e_ref))
            out += ["input " + text, "n_tokens %d" % len(toks),
                    "llama " + " ".join("%.8g" % v for v in e_ll),
                    "ref " + " ".join("%.8g" % v for v in e_ref),
                    "cos_llama_ref %.9f" % cos]
            out.insert(len(out) - 3, "ids " + " ".join(map(str, toks)))
            if pooling == "mean":
                ref.causal = False
                out.append("ref_noncausal " + " ".join("%.8g" % v for v in ref.embedding(toks, pooling)))
                ref.causal = True
            print("%s %r: %d tokens, cos(llama.cpp, ref) %.9f" % (name, text, len(toks), cos))
        with open(os.path.join(a.golden, "embed_%s.txt" % name), "w") as f:
            f.write("\n".join(out) + "\n")
    write_rerank_golden(a, llama_cpp)
    write_bert_golden(a, llama_cpp)
    write_bert_golden(a, llama_cpp, NOMIC)
    write_bert_rank_golden(a, llama_cpp)
    return 0


def write_rerank_golden(a, llama_cpp):
    """tests/golden/embed_qwen3_rank.txt: 'sha256', 'query', then per document 'document <text>',
    'ids <prompt ids>' (the rerank template filled in, special text parsed, no BOS: llama-server's
    format_prompt_rerank), 'llama <scores>' (llama.cpp's rank pooling: the last row through
    cls.output, softmax) and 'ref <scores>' (the float64 reference's)."""
    name, extra, query, docs = RERANK
    path = model_path(a.dir, name)
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    llm = llama_cpp.Llama(model_path=path, embedding=True, n_ctx=512, n_batch=512, n_ubatch=512,
                          n_threads=2, verbose=False, pooling_type=4)
    ref = ref_forward.RefModel(path)
    tmpl = make_arch_gguf.RERANK_TEMPLATE
    w = ref.w("cls.output.weight")  # (2, n_embd)
    out = ["sha256 " + sha, "query " + query]
    for doc in docs:
        toks = llm.tokenize(tmpl.replace("{query}", query).replace("{document}", doc).encode(),
                            add_bos=False, special=True)
        llm._batch.reset()
        llm._batch.add_sequence(toks, 0, True)
        llm._ctx.kv_cache_clear()
        llm._ctx.decode(llm._batch)
        ptr = llama_cpp.llama_get_embeddings_seq(llm._ctx.ctx, 0)
        s_ll = [ptr[0], ptr[1]]
        y = w @ ref.hidden(toks)[-1]
        s_ref = np.exp(y - y.max()) / np.exp(y - y.max()).sum()
        out += ["document " + doc, "ids " + " ".join(map(str, toks)),
                "llama " + " ".join("%.8g" % v for v in s_ll), "ref " + " ".join("%.8g" % v for v in s_ref)]
        print("%s %r: %d tokens, llama.cpp %s, ref %s" % (name, doc, len(toks), s_ll, s_ref))
    with open(os.path.join(a.golden, "embed_%s.txt" % name), "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    sys.exit(main())
