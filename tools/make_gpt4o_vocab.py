#!/usr/bin/env python3
# Writes tests/data/vocab/ggml-vocab-gpt-4o.gguf: llama.cpp's GPT-2 test vocabulary
# (tests/data/vocab/ggml-vocab-gpt-2.gguf) with tokenizer.ggml.pre rewritten to "gpt-4o", the
# o200k pre-tokenizer of gpt-oss; every other key and array is copied as it is. The golden ids
# (tools/gen_golden_bpe_tokens.py gpt-4o) then come from llama.cpp on this file.
#
# Usage: .venv/bin/python tools/make_gpt4o_vocab.py
import os

import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "tests/data/vocab/ggml-vocab-gpt-2.gguf")
DST = os.path.join(ROOT, "tests/data/vocab/ggml-vocab-gpt-4o.gguf")


def main():
    r = gguf.GGUFReader(SRC)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(DST, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vt = f.types[0]
        val = "gpt-4o" if name == "tokenizer.ggml.pre" else f.contents()
        if vt == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, val, vt, sub_type=f.types[-1])
        else:
            w.add_key_value(name, val, vt)
    assert len(r.tensors) == 0, "a vocabulary file has no tensors"
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    print("wrote %s (pre gpt-4o, %d keys)" % (os.path.relpath(DST, ROOT), len(r.fields)))


if __name__ == "__main__":
    main()
