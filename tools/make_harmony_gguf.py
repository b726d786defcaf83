#!/usr/bin/env python3
# Writes a tiny random-weight model that speaks the harmony format as far as the server can tell:
# tools/make_arch_gguf.py's mixtral_tiny shape (1 layer, 512 tokens) whose last seven tokens are
# gpt-oss's control tokens (<|start|> <|end|> <|message|> <|channel|> <|constrain|> <|return|>
# <|call|>) and whose tokenizer.chat_template is gpt-oss's official template. Its answers are
# random; tests/server/test_harmony.py drives them with a GBNF grammar written byte by byte.
#
# Usage: .venv/bin/python tools/make_harmony_gguf.py OUT.gguf
import os
import sys

import gguf
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import make_arch_gguf  # noqa: E402

TEMPLATE = os.path.join(ROOT, ".reference/src/llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates",
                        "openai-gpt-oss-120b.jinja")
HARMONY = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"]
VOCAB = 512


def main():
    out = sys.argv[1]
    tmp = out + ".base"
    first = VOCAB - len(HARMONY)
    make_arch_gguf.write_model(tmp, "mixtral_tiny", 1, VOCAB, "f16",
                               extra={"token_text": {first + k: t for k, t in enumerate(HARMONY)}}, quiet=True)
    r = gguf.GGUFReader(tmp)
    w = gguf.GGUFWriter(out, r.fields["general.architecture"].contents())
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        val = f.contents()
        if name == "tokenizer.ggml.token_type":
            val = [3 if i >= first else v for i, v in enumerate(val)]  # CONTROL, as gpt-oss's are
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, val, f.types[0], sub_type=f.types[-1])
        else:
            w.add_key_value(name, val, f.types[0])
    w.add_chat_template(open(TEMPLATE).read())
    for t in r.tensors:
        w.add_tensor(t.name, np.array(t.data), raw_shape=t.data.shape, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.remove(tmp)


if __name__ == "__main__":
    main()
