#!/usr/bin/env python3
# Writes a tiny random-weight model that speaks the harmony format as far as the server can tell:
# tools/make_arch_gguf.py's mixtral_tiny shape (1 layer, 512 tokens) whose last seven tokens are
# gpt-oss's control tokens (<|start|> <|end|> <|message|> <|channel|> <|constrain|> <|return|>
# <|call|>) and whose tokenizer.chat_template is gpt-oss's official template; the four before them
# are the header words (assistant analysis final commentary) as user-defined tokens, one token each
# as in gpt-oss's o200k vocabulary (so the thinking markers are 3 and 6 tokens, as there).
# Its answers are not random: the layer's outputs are zero (attention and experts), so the next
# token depends on the last one only, and the LM head is set to write a bigram chain:
#   assistant -> <|channel|> -> analysis -> <|message|> -> Hmm -> " ok" -> "." -> <|return|>
# so after the generation prompt (<|start|>assistant) the model writes an analysis "Hmm ok." that
# ends the answer; a thinking budget cuts it and forces the final channel, whose body is the same
# chain ("Hmm ok." then <|return|>). tests/server/test_harmony.py reads every API off it.
# A second choice after "analysis" (taken only where <|message|> is masked: after a budget cut the
# analysis cannot open again when the request has tools) writes a call header, one token each:
#   analysis -> " to=functions.get_weather" -> <|constrain|> -> json -> <|message|>
# so a budget with tools ends in a get_weather call whose arguments the tool grammar drives.
#
# Usage: .venv/bin/python tools/make_harmony_gguf.py OUT.gguf
#        .venv/bin/python tools/make_harmony_gguf.py --gptoss OUT.gguf   (a gpt-oss file as downloaded)
import os
import sys

import gguf
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import make_arch_gguf  # noqa: E402

TEMPLATE = make_arch_gguf.HARMONY_TEMPLATE  # gpt-oss's official template (committed copy)
HARMONY = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"]
WORDS = ["assistant", "analysis", "final", "commentary"]
CHAIN = ["Hmm", "\u2581ok", "."]  # the body's tokens (SentencePiece pieces: "\u2581" is a space)
CALL = [" to=functions.get_weather", "json"]  # the call header's words (user-defined, one token each)
VOCAB = 512


def bigram(t, pairs, seconds=()):
    """Zeroes the layer's outputs (the residual stream is the last token's embedding) and sets the
    LM head's row of each pair's second token to point along the first's normed embedding (summed
    where a token follows several); `seconds` pairs get half the weight: the runner-up."""
    t["blk.0.attn_output.weight"][:] = 0
    t["blk.0.ffn_down_exps.weight"][:] = 0
    emb = t["token_embd.weight"].astype(np.float64)
    g = t["output_norm.weight"].astype(np.float64)
    head = t["output.weight"]
    every = [(y, x, 1.0) for y, x in pairs] + [(y, x, 0.5) for y, x in seconds]
    h = {y: emb[y] / np.sqrt(np.mean(emb[y] ** 2) + 1e-5) * g for y, _, _ in every}
    scale = 4 * max(float(np.max(np.abs(head.astype(np.float64) @ v))) for v in h.values())
    rows = {}
    for y, x, w in every:
        rows[x] = rows.get(x, 0) + w * scale * h[y] / np.dot(h[y], h[y])
    for x, v in rows.items():
        head[x] = v.astype(head.dtype)
    for y, x, w in every:  # each pair's token wins (the runner-up comes second) by a wide margin
        logits = head.astype(np.float64) @ h[y]
        order = np.argsort(logits)[::-1]
        k = 0 if w == 1.0 else 1
        assert order[k] == x and logits[order[k]] - logits[order[k + 1]] > 1.0, (y, x, order[:3], logits[order[:3]])


def main():
    if sys.argv[1] == "--gptoss":  # a gpt-oss file as people download one (test_harmony.py's gserver):
        # the gptoss_tiny shape, MXFP4 experts and F16 elsewhere, gpt-oss's own tokenizer (BPE, pre
        # "gpt-4o", its control tokens at their offsets from the end) and template; random answers
        make_arch_gguf.write_model(sys.argv[2], "gptoss_tiny", 1, 2048, "mxfp4", extra={"harmony": True},
                                   quiet=True)
        return
    out = sys.argv[1]
    tmp = out + ".base"
    first = VOCAB - len(HARMONY)
    words = first - len(WORDS)
    names = {first + k: t for k, t in enumerate(HARMONY)}
    names.update({words + k: t for k, t in enumerate(WORDS)})
    chain = words - len(CHAIN)
    names.update({chain + k: t for k, t in enumerate(CHAIN)})
    call = chain - len(CALL)
    names.update({call + k: t for k, t in enumerate(CALL)})
    make_arch_gguf.write_model(tmp, "mixtral_tiny", 1, VOCAB, "f16", extra={"token_text": names}, quiet=True)
    r = gguf.GGUFReader(tmp)
    w = gguf.GGUFWriter(out, r.fields["general.architecture"].contents())
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        val = f.contents()
        if name == "tokenizer.ggml.token_type":
            # CONTROL, as gpt-oss's are; the header words USER_DEFINED (always one token)
            val = [3 if i >= first else 4 if i >= words or call <= i < chain else v for i, v in enumerate(val)]
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, val, f.types[0], sub_type=f.types[-1])
        else:
            w.add_key_value(name, val, f.types[0])
    w.add_chat_template(open(TEMPLATE).read())
    tensors = {t.name: np.array(t.data) for t in r.tensors}
    ids = {**{t: first + k for k, t in enumerate(HARMONY)}, **{t: words + k for k, t in enumerate(WORDS)}}
    seq = [ids["assistant"], ids["<|channel|>"], ids["analysis"], ids["<|message|>"], chain, chain + 1, chain + 2,
           ids["<|return|>"]]
    head = [ids["analysis"], call, ids["<|constrain|>"], call + 1, ids["<|message|>"]]
    bigram(tensors, list(zip(seq[:-1], seq[1:])) + list(zip(head[1:-1], head[2:])), [(head[0], head[1])])
    for t in r.tensors:
        w.add_tensor(t.name, tensors[t.name], raw_shape=t.data.shape, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.remove(tmp)


if __name__ == "__main__":
    main()
