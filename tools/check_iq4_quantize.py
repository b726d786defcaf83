#!/usr/bin/env python3
"""Checks (by hand, not CI) that the IQ4_NL / IQ4_XS files llama-quantize writes load in lumen
and give llama.cpp's greedy text: the F16 CI copies of tools/make_arch_gguf.py (qwen25: rows
of 896, which IQ4_XS falls back to IQ4_NL for; llama32: rows of 2048) quantized by the
reference llama-quantize (no imatrix: IQ4_* do not need one), then per file:
  - the tensor types llama-quantize chose (the mix lumen must load),
  - llama.cpp (pinned llama-cpp-python, n_ubatch 1) on a 32-token id sequence (the default
    model: an English question of the golden prompts) plus its greedy continuation of 32,
  - lumen (tests/tools/logits_dump, every position) on the same ids: its argmax at each
    position must be llama.cpp's greedy token (teacher forcing: the same greedy text), and
    its top-1 agreement with llama.cpp's logits over the prompt is printed.
Also --gemma: the default model requantized (--allow-requantize) to both types, for a real
vocabulary and real weights.

Result (llama.cpp 0.3.36 llama-quantize, this AVX-512 host): the four random-weight files 32/32
greedy tokens, prompt top-1 32/32 (IQ4_NL and qwen25's IQ4_XS, whose rows fall back to
IQ4_NL, bit-identical logits: max|d| 0.0000); gemma3-270m IQ4_NL 32/32 and max|d| 0.0000;
gemma3-270m IQ4_XS 31/32 (a near-tie at the first greedy step, top-1 17/19 over the prompt):
there both engines' KL to the float64 reference (tools/ref_forward.py, 51 positions) is the
same, lumen 8.43e-3 vs llama.cpp 8.26e-3 (1.02x; the default Q4_K_M file 5.91e-3 vs 5.92e-3).

usage: .venv/bin/python tools/check_iq4_quantize.py [--bin DIR] [--build build] [--dir D] [--gemma]
Exit 1 if a file does not load or a greedy token differs.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import gen_golden_arch as gga  # noqa: E402
import make_arch_gguf as mk  # noqa: E402

N_PROMPT, N_GREEDY = 32, 32


def tensor_types(path):
    from gguf import GGUFReader
    counts = {}
    for t in GGUFReader(path).tensors:
        counts[t.tensor_type.name] = counts.get(t.tensor_type.name, 0) + 1
    return " ".join("%s:%d" % kv for kv in sorted(counts.items()))


def llama_greedy(path, prompt):
    from llama_cpp import Llama
    llm = Llama(model_path=path, **gga.SETTINGS)
    llm.eval(prompt)
    scores = [np.array(llm.scores[:len(prompt)], dtype=np.float32)]
    out = []
    for _ in range(N_GREEDY):
        last = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        out.append(int(np.argmax(last)))
        llm.eval([out[-1]])
    del llm
    return out, scores[0]


def lumen_logits(dump, path, ids):
    r = subprocess.run([dump, path], input=(" ".join(map(str, ids)) + "\n").encode(), capture_output=True,
                       text=False)
    if r.returncode != 0:
        raise RuntimeError("logits_dump %s: exit %d: %s" % (path, r.returncode, r.stderr.decode()[-500:]))
    return np.frombuffer(r.stdout, dtype=np.float32).reshape(len(ids), -1)


def check(dump, path, label, prompt=None):
    """prompt: token ids (default: N_PROMPT ids of an LCG; random ids suit random weights, a
    trained model wants real text: on random ids its logits are near-ties everywhere)"""
    from llama_cpp import Llama
    if prompt is None:
        n_vocab = Llama(model_path=path, vocab_only=True, verbose=False).n_vocab()
        state, prompt = 12345, []
        for _ in range(N_PROMPT):
            state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            prompt.append(3 + (state >> 33) % (n_vocab - 3))
    n = len(prompt)
    greedy, ref = llama_greedy(path, prompt)
    ids = prompt + greedy
    lg = lumen_logits(dump, path, ids)
    mine = [int(np.argmax(lg[p])) for p in range(n - 1, len(ids) - 1)]
    same = sum(a == b for a, b in zip(mine, greedy))
    top1 = sum(int(np.argmax(lg[p])) == int(np.argmax(ref[p])) for p in range(n))
    print("%-34s %s" % (label, tensor_types(path)))
    print("%-34s greedy %d/%d tokens as llama.cpp, prompt top-1 %d/%d, max|d| over the prompt %.4f" % (
        "", same, N_GREEDY, top1, n, float(np.abs(lg[:n] - ref).max())))
    if same != N_GREEDY:
        first = next(i for i, (a, b) in enumerate(zip(mine, greedy)) if a != b)
        print("  first difference at greedy step %d: lumen %d, llama.cpp %d" % (first, mine[first], greedy[first]))
    return same == N_GREEDY


def golden_prompt(path, index):
    """token ids of prompt `index` of a golden logits file (tests/golden/gemma3_logits.txt)"""
    seen = -1
    for line in open(path):
        if line.startswith("tokens "):
            seen += 1
            if seen == index:
                return [int(t) for t in line.split()[1:]]
    raise ValueError("%s: no prompt %d" % (path, index))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, ".reference/bin"), help="llama.cpp tools")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="lumen build (logits_dump)")
    ap.add_argument("--dir", default="/tmp/lumen-iq4-quantize-%d" % os.getuid())
    ap.add_argument("--gemma", action="store_true", help="also requantize the default model")
    a = ap.parse_args()
    quant = os.path.join(a.bin, "llama-quantize")
    dump = os.path.join(a.build, "logits_dump")
    for p in (quant, dump):
        if not os.access(p, os.X_OK):
            print("missing %s" % p)
            return 2
    os.makedirs(a.dir, exist_ok=True)
    srcs = []
    for fam, layers in (("qwen25", 2), ("llama32", 1)):
        p = os.path.join(a.dir, "%s_f16.gguf" % fam)
        if not os.path.exists(p):
            mk.write_model(p, fam, layers, 8192, "f16", mk.CI_SEED, {}, quiet=True)
        srcs.append((fam, p, []))
    if a.gemma:  # its 19-token English question (tests/golden/gemma3_logits.txt prompt 1)
        srcs.append(("gemma3-270m", os.path.join(ROOT, "models/gemma-3-270m-q4_k_m.gguf"), ["--allow-requantize"]))
    gemma_prompt = golden_prompt(os.path.join(ROOT, "tests/golden/gemma3_logits.txt"), 1)
    ok = True
    for name, src, extra in srcs:
        for qt in ("IQ4_NL", "IQ4_XS"):
            out = os.path.join(a.dir, "%s_%s.gguf" % (name, qt.lower()))
            r = subprocess.run([quant] + extra + [src, out, qt], capture_output=True, text=True)
            if r.returncode != 0:
                print("llama-quantize %s %s: exit %d\n%s" % (src, qt, r.returncode, r.stderr[-2000:]))
                ok = False
                continue
            try:
                ok = check(dump, out, "%s %s" % (name, qt), gemma_prompt if extra else None) and ok
            except RuntimeError as e:
                print("FAIL %s" % e)
                ok = False
    print("all greedy tokens agree" if ok else "DIFFERENCES (see above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
