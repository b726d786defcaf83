#!/usr/bin/env python3
"""Writes tests/golden/mxfp4_dequant.txt: MXFP4 blocks and their values as gguf-py's
gguf.quants decodes them (an independent decoder of ggml's format), for
tests/test_kernels_mxfp4.c. Blocks: every edge scale byte (0, 1, 2, 126..128, 254, 255) and
random ones, random codes (all 16 in the first block); seeded, so the file is reproducible.

One line per block: the 17 block bytes in hex, then its 32 float32 values as 8-hex-digit bit
patterns. usage: .venv/bin/python tools/gen_mxfp4_golden.py [OUT]
"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import quants

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests/golden/mxfp4_dequant.txt")
    rng = np.random.default_rng(35)
    edges = [0, 1, 2, 126, 127, 128, 254, 255]
    es = edges + list(rng.integers(0, 256, 40 - len(edges)))
    blocks = np.zeros((len(es), 17), dtype=np.uint8)
    blocks[:, 0] = es
    blocks[:, 1:] = rng.integers(0, 256, (len(es), 16))
    blocks[0, 1:] = [(j | (15 - j) << 4) for j in range(16)]  # every code, both nibbles
    with np.errstate(over="ignore"):  # e = 255: 2^127 * 12 is inf, as in ggml
        vals = quants.dequantize(blocks.reshape(1, -1), QT.MXFP4).reshape(len(es), 32).astype(np.float32)
    with open(out, "w") as f:
        f.write("# mxfp4 blocks (17 bytes hex) and gguf.quants' float32 values (bits); "
                "tools/gen_mxfp4_golden.py\n")
        for b, v in zip(blocks, vals):
            f.write(b.tobytes().hex() + " " + " ".join("%08x" % u for u in v.view(np.uint32)) + "\n")
    print("wrote %s (%d blocks)" % (out, len(es)))


if __name__ == "__main__":
    main()
