#!/usr/bin/env python3
"""Checks (by hand, not CI: it needs llama-quantize) that tools/make_arch_gguf.py's 'mxfp4moe'
copy is what llama-quantize's MXFP4_MOE writes: the tiny qwen3moe CI copy in F16 goes through
.reference/bin/llama-quantize MXFP4_MOE, and every tensor of the result must have the type and
the bytes of make_arch_gguf.py's own 'mxfp4moe' file (MXFP4 experts, Q8_0 for every other
matrix, output included, the router and the norms F32). Then lumen loads the quantized file
(`lumen info`).

Result (llama.cpp 0.3.36 llama-quantize): all 16 quantized tensors identical (gguf-py's MXFP4 and
Q8_0 quantizers on the F16 copy's values are ggml's reference quantizers), file_type 38.

usage: .venv/bin/python tools/check_mxfp4_quantize.py [--bin DIR] [--build build] [--dir D]
Exit 1 if a tensor's type or bytes differ or lumen refuses the file.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import gguf
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import make_arch_gguf as mk  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, ".reference", "bin"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    a = ap.parse_args()
    d = a.dir or tempfile.mkdtemp(prefix="lumen-mxfp4-")
    os.makedirs(d, exist_ok=True)
    f16, ours, theirs = (os.path.join(d, n) for n in ("f16.gguf", "mxfp4moe.gguf", "lq.gguf"))
    for path, dt in ((f16, "f16"), (ours, "mxfp4moe")):
        mk.write_model(path, "qwen3moe_tiny", 2, 8192, dt, mk.CI_SEED, quiet=True)
    subprocess.run([os.path.join(a.bin, "llama-quantize"), f16, theirs, "MXFP4_MOE"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ta = {t.name: t for t in gguf.GGUFReader(theirs).tensors}
    tb = {t.name: t for t in gguf.GGUFReader(ours).tensors}
    bad = sorted(set(ta) ^ set(tb))
    for n in sorted(set(ta) & set(tb)):
        x, y = ta[n], tb[n]
        same = x.tensor_type == y.tensor_type and np.array_equal(
            np.asarray(x.data).view(np.uint8), np.asarray(y.data).view(np.uint8))
        print("%-28s %-6s %s" % (n, x.tensor_type.name, "same" if same else
                                 "DIFFERS (ours %s)" % y.tensor_type.name))
        if not same:
            bad.append(n)
    r = subprocess.run([os.path.join(a.build, "lumen"), "info", theirs], capture_output=True, text=True)
    print("lumen info: exit %d" % r.returncode)
    if r.returncode != 0:
        print(r.stderr.strip())
        bad.append("lumen info")
    print("check_mxfp4_quantize: %s" % ("ok" if not bad else "FAIL: " + ", ".join(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
