#!/usr/bin/env python3
# Writes tests/data/vocab/ggml-vocab-gpt-oss.gguf: the tokenizer of make_arch_gguf.py's gpt-oss CI
# copies (harmony_vocab: byte-level BPE with pre "gpt-4o", gpt-oss's 1090 special tokens at their
# offsets from the end of an 8192-token vocabulary, the official chat template) with the copy's
# metadata and no tensors, so llama.cpp loads it vocab-only. The golden ids
# (tools/gen_golden_bpe_tokens.py gpt-oss) then come from llama.cpp on this file.
#
# Usage: .venv/bin/python tools/make_gptoss_vocab.py
import os
import sys
import tempfile

import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import make_arch_gguf as mk  # noqa: E402

DST = os.path.join(ROOT, "tests/data/vocab/ggml-vocab-gpt-oss.gguf")


def main():
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "gptoss.gguf")
        mk.write_model(src, "gptoss_tiny", 1, 8192, "f16", mk.CI_SEED, {"harmony": True}, quiet=True)
        r = gguf.GGUFReader(src)
        w = gguf.GGUFWriter(DST, r.fields["general.architecture"].contents())
        for name, f in r.fields.items():
            if name.startswith("GGUF.") or name == "general.architecture":
                continue
            vt = f.types[0]
            if vt == gguf.GGUFValueType.ARRAY:
                w.add_key_value(name, f.contents(), vt, sub_type=f.types[-1])
            else:
                w.add_key_value(name, f.contents(), vt)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.close()
    print("wrote %s (%d bytes)" % (os.path.relpath(DST, ROOT), os.path.getsize(DST)))


if __name__ == "__main__":
    main()
