#!/usr/bin/env python3
# Writes a tiny random-weight gpt-oss file as people download one, for the harmony tests: the
# gptoss_tiny shape of tools/make_arch_gguf.py (1 layer, 2048 tokens) with MXFP4 experts and F16
# elsewhere (as gpt-oss ships) and gpt-oss's own tokenizer (harmony_vocab: byte-level BPE, pre
# "gpt-4o", the harmony control tokens <|start|> <|end|> <|message|> <|channel|> <|constrain|>
# <|return|> <|call|> ... at their offsets from the end, the official chat template). Its answers
# are random; tests/server/test_harmony.py drives them with a GBNF grammar written byte by byte.
#
# Usage: .venv/bin/python tools/make_harmony_gguf.py OUT.gguf
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import make_arch_gguf  # noqa: E402

VOCAB = 2048


def main():
    make_arch_gguf.write_model(sys.argv[1], "gptoss_tiny", 1, VOCAB, "mxfp4", extra={"harmony": True},
                               quiet=True)


if __name__ == "__main__":
    main()
