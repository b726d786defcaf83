#!/usr/bin/env python3
"""Checks that the files llama-quantize writes load in lumen and agree with llama.cpp (not CI:
it needs llama.cpp). An F16 random-weight copy (tools/make_arch_gguf.py) is quantized by
llama-quantize (or, without the tool, llama-cpp-python's llama_model_quantize) to each mix; for each file llama.cpp (pinned llama-cpp-python, the settings
of tools/gen_golden_arch.py) writes golden logits and greedy continuations, and
build/test_model_arch_golden's ad-hoc mode compares lumen against them (top-1 per position,
|logit| differences, greedy text), and both engines' KL to the float64 reference
(tools/ref_forward.py) on one sequence is measured: a mix passes when lumen's KL is at
most 1.1x llama.cpp's (issue 37's measure).

Usage: .venv/bin/python tools/check_quantize_mixes.py [--quantize .reference/bin/llama-quantize]
           [--family llama32] [--layers 2] [--types Q2_K,Q3_K_S,Q3_K_M,Q3_K_L] [--dir DIR]
           [--max-abs 0.3]
Exit status 0 when every mix loads and agrees.
"""
import argparse
import hashlib
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import gen_golden_arch as gga  # noqa: E402
import make_arch_gguf as mk  # noqa: E402


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


# llama_ftype of each mix (include/llama.h), for the library path when the tool is missing
FTYPES = {"Q2_K": 10, "Q3_K_S": 11, "Q3_K_M": 12, "Q3_K_L": 13, "Q4_K_M": 15}


def quantize(tool, src, dst, qt):
    """src -> dst as mix qt: llama-quantize when the tool is there, else the same code through
    llama-cpp-python's llama_model_quantize."""
    if os.path.exists(tool):
        r = subprocess.run([tool, src, dst, qt], capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL %s: llama-quantize exit %d\n%s" % (qt, r.returncode, r.stderr[-2000:]))
        return r.returncode == 0
    import llama_cpp
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = FTYPES[qt]
    p.nthread = 2
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), p)
    if rc != 0:
        print("FAIL %s: llama_model_quantize returned %d" % (qt, rc))
    return rc == 0


def kl_to_reference(path, dump, n=48):
    """Mean KL(float64 reference || engine) over n positions of one token sequence, for lumen
    (build/logits_dump) and llama.cpp (n_batch 1, gen_golden_arch's settings): the issue's
    fidelity measure (lumen's at most 1.1x llama.cpp's)."""
    import numpy as np
    import ref_forward
    from llama_cpp import Llama
    toks = [int(t) for t in np.random.default_rng(5).integers(3, 8192, n)]
    r = subprocess.run([dump, path, "8"], input=(" ".join(map(str, toks)) + "\n").encode(),
                       capture_output=True, check=True)
    lum = np.frombuffer(r.stdout, np.float32).reshape(n, -1).astype(np.float64)
    llm = Llama(model_path=path, **dict(gga.SETTINGS, n_ctx=256))
    llm.eval(toks)
    lcp = np.array(llm.scores[:n], dtype=np.float64)
    del llm
    ref = ref_forward.RefModel(path).logits(toks)

    def lsm(x):
        x = x - x.max(1, keepdims=True)
        return x - np.log(np.exp(x).sum(1, keepdims=True))
    lp = lsm(ref)
    return [float((np.exp(lp) * (lp - lsm(x))).sum(1).mean()) for x in (lum, lcp)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quantize", default=os.path.join(ROOT, ".reference/bin/llama-quantize"))
    ap.add_argument("--family", default="llama32", choices=sorted(mk.FAMILIES))
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--types", default="Q2_K,Q3_K_S,Q3_K_M,Q3_K_L")
    ap.add_argument("--dir", default="/tmp/lumen-quant-mixes-%d" % os.getuid())
    ap.add_argument("--test-bin", default=os.path.join(ROOT, "build/test_model_arch_golden"))
    ap.add_argument("--max-abs", default="0.3", help="limit on |lumen - llama.cpp| logits")
    ap.add_argument("--dump", default=os.path.join(ROOT, "build/logits_dump"))
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    f16 = os.path.join(a.dir, "%s_%dL_f16.gguf" % (a.family, a.layers))
    if not os.path.exists(f16):
        mk.write_model(f16, a.family, a.layers, a.vocab, "f16", mk.CI_SEED, {})
    results = []
    for qt in a.types.split(","):
        name = "%s_%dL_%s" % (a.family, a.layers, qt.lower())
        out = os.path.join(a.dir, name + ".gguf")
        if not quantize(a.quantize, f16, out, qt):
            results.append((qt, False))
            continue
        types = {}
        from gguf import GGUFReader
        for t in GGUFReader(out).tensors:
            types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
        golden = os.path.join(a.dir, name + ".txt")
        sha = sha256(out)
        gga.run_one(out, sha, a.family, qt, golden)
        with open(os.path.join(a.dir, "manifest.txt"), "w") as fh:  # the test's sha check
            fh.write("%s %s\n" % (os.path.basename(out), sha))
        r = subprocess.run([a.test_bin, a.dir, os.path.basename(out), golden, a.max_abs],
                           capture_output=True, text=True, cwd=ROOT)
        # the golden comparison's strict part (a top-1 or greedy miss at a gap over 0.1) is
        # reported, not required: on these 2-layer copies llama-quantize's Q4_K_M, whose
        # kernels are long proven, misses that too (mean |d| ~0.03 from the 8-bit activations)
        strict = r.returncode == 0
        kl_l, kl_c = kl_to_reference(out, a.dump)
        ok = kl_l <= 1.1 * kl_c
        summary = [ln for ln in r.stdout.splitlines() if ln.startswith(name)]
        print("%s %s: tensor types %s" % ("ok  " if ok else "FAIL", qt, types))
        print("     KL to the float64 reference: lumen %.4g, llama.cpp %.4g (ratio %.3f, limit 1.1)"
              % (kl_l, kl_c, kl_l / kl_c if kl_c else float("inf")))
        for ln in summary:
            print("     " + ln + ("" if strict else "  [a miss at a gap > 0.1]"))
        results.append((qt, ok))
    bad = [q for q, ok in results if not ok]
    print("%d of %d mixes agree with llama.cpp%s" % (len(results) - len(bad), len(results),
                                                     "; failed: " + ",".join(bad) if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
