#!/usr/bin/env python3
"""Full-size random-weight models of real shapes for bench/compare.py: TinyLlama 1.1B and
Qwen2.5 0.5B as Q4_K_M, plus Qwen2.5 0.5B as F16.

The F16 files come from tools/make_arch_gguf.py (real layer count and vocabulary, its
deterministic N(0, 0.02) weights and synthetic SentencePiece vocabulary, the same
generator the per-architecture golden tests use). The Q4_K_M files are made from them by
llama.cpp's own quantizer (llama_model_quantize of the pinned llama-cpp-python, nthread 2),
so the tensor type mix is exactly the one llama-quantize picks for a real checkpoint of
that shape (e.g. Q5_0/Q8_0 fallbacks for Qwen2.5's 896-wide rows). The TinyLlama F16
intermediate is deleted; the Qwen2.5 F16 file is kept as the F16 benchmark model.

Unless --no-check, every produced file is loaded by llama.cpp and a short prompt evaluated:
every position's logits must be finite and not degenerate (random weights at full depth
could in principle blow up or collapse the residual stream).

Files that already exist are kept unless --force. Writes go to <name>.tmp and are renamed,
so an interrupted run leaves no truncated model behind.

--shape NAME [--layers N] [--formats q4_k_m,q5_k_m,q6_k,q8_0,q4_0] [--keep-f16]: one model at
a real shape (tools/make_arch_gguf.py FAMILIES: the hyper-parameters and their config.json
sources are there), cached outside the tree (default ~/.cache/lumen/shapes) as
<shape>[-<N>L]-random-<fmt>.gguf (-<N>L only when N is not the real layer count). The F16 is
written tensor by tensor (make_arch_gguf.py's stream mode: the file can exceed memory), then
quantized by .reference/bin/llama-quantize (2 threads) to each format asked, so the tensor
type mix is the one llama-quantize picks for a real checkpoint of that shape. The F16 is
deleted afterwards unless --keep-f16 or f16 is one of --formats (an F16 that was already
there is reused and kept). Shapes, with times measured here (2 cores shared with other jobs,
load 4-8; F16 write, then each quantization, then llama.cpp's check of each file, ~10 s); disk
at the peak: the F16 plus the outputs:
  llama-3.2-1b    16 layers, n_embd 2048, tied. F16 2.5 GB; Q4_K_M 0.80 GB, Q5_K_M 0.91 GB in
                  150 s, Q6_K 1.02 GB in 126 s, Q8_0 1.32 GB in 27 s, Q4_0 0.77 GB in 40 s
  llama-3.2-3b    28 layers, n_embd 3072, tied. F16 6.4 GB in 111 s; Q4_K_M 2.0 GB in 416 s
  llama-3.1-8b    32 layers, n_embd 4096. F16 16.1 GB in 230 s; Q4_K_M 4.9 GB in 21 min
  qwen3-4b        36 layers, n_embd 2560, tied, qk-norm. F16 8.0 GB in 49 s; Q4_K_M 2.5 GB in
                  605 s
  qwen3-8b        36 layers, n_embd 4096, qk-norm. F16 ~16.4 GB; Q4_K_M ~5 GB (estimated ~25 min)
  gemma3-1b       26 layers, n_embd 1152 (rows fall back to Q5_0/Q8_0), vocabulary 262144.
                  F16 2.0 GB in 10 s; Q4_K_M 0.81 GB in 25 s
  gemma3-4b       34 layers, n_embd 2560, vocabulary 262208. F16 ~8.6 GB; Q4_K_M ~2.6 GB
  phi-3.5-mini    32 layers, n_embd 3072, fused attn_qkv / ffn_up, LongRoPE, vocabulary 32064.
                  F16 ~7.6 GB (estimated, not yet run)
  phi-4-mini      32 layers, n_embd 3072, 24 heads (8 KV), partial RoPE, tied, vocabulary
                  200064. F16 ~7.7 GB (estimated, not yet run)
                  (estimated ~12 min)
  qwen3-30b-a3b   Qwen3-30B-A3B (qwen3moe): n_embd 2048, 32 q / 4 kv heads of 128, 128
                  experts of 768, 8 used, vocabulary 151936; 48 layers in the real model,
                  8 by default. 8 layers: F16 ~11 GB (peak disk), Q4_K_M ~3.2 GB; ~6 min.
  deepseek-v2-lite  DeepSeek-V2-Lite (deepseek2, multi-head latent attention, YaRN): n_embd
                  2048, 16 heads, kv_lora_rank 512, 64 experts of 1408, 6 used, 2 shared, the
                  first layer dense (10944), vocabulary 102400; 27 layers in the real model, 4
                  by default (1 dense + 3 MoE): F16 ~4.5 GB, Q4_K_M ~1.4 GB (estimated).
  phi-3.5-mini, phi-4-mini: issue 37's
                  families, once tools/make_arch_gguf.py has their families (bench/scale.py
                  --families); formats also q2_k, q3_k_s/m/l, iq4_xs, iq4_nl, q5_1, q4_1, q5_0,
                  and mxfp4_moe (MoE shapes: MXFP4 experts, Q8_0 elsewhere)
  granite-3.3-2b  IBM Granite 3.3 2B: 40 layers, n_embd 2048, 32 q / 8 kv heads of 64, FFN 8192,
                  vocabulary 49155, tied; its four multipliers. F16 ~5 GB (not yet timed)
  smollm3-3b      SmolLM3-3B: 36 layers, n_embd 2048, 16 q / 4 kv heads of 128, FFN 11008,
                  vocabulary 128256, tied; no RoPE in every 4th layer. F16 ~6.2 GB (not yet timed)
  gpt-oss-20b     gpt-oss-20b (gpt-oss): n_embd 2880, 64 q / 8 kv heads of 64, attention sinks,
                  32 experts of 2880, 4 used, biases, sliding window 128 on even layers, YaRN,
                  vocabulary 201088; 24 layers in the real model, 4 by default: F16 ~8.7 GB
                  (1.6 GB a layer, 2.3 GB of embeddings and head; estimated, not yet timed)
The K-quant formats take ~1-1.5 min per GB of F16 here (Q8_0 / Q4_0 and the Q5_0 / Q8_0
fallbacks of 1152-wide rows a few times less).
Each new file is then checked by llama.cpp (below) unless --no-check.

usage:
  .venv/bin/python bench/make_shapes.py [--out models/shapes] [--force] [--no-check]
  .venv/bin/python bench/make_shapes.py --shape llama-3.1-8b [--layers N] [--formats LIST]
                                        [--keep-f16] [--out DIR] [--force]
  .venv/bin/python bench/compare.py [--no-default] --models models/shapes/*.gguf
(--no-default unless models/gemma-3-270m-q4_k_m.gguf is present). Needs
requirements-reference.txt (bash scripts/setup.sh --reference). Takes ~2 min on 2 cores
(most of it quantizing TinyLlama) and ~4.3 GB of disk at the peak, 2.1 GB afterwards.
"""
import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import make_arch_gguf as mk  # noqa: E402

DEFAULT_OUT = os.path.join(ROOT, "models", "shapes")
N_THREADS = 2
CHECK_PROMPT = "Hello world, this is a test."

# (file name, family, kind): kind 'f16' = make_arch_gguf.py's F16 file as is, 'q4_k_m' =
# that file through llama.cpp's quantizer. Order matters: the Qwen2.5 F16 file is written
# first and reused as the quantizer's input.
MODELS = [
    ("qwen2.5-0.5b-random-f16.gguf", "qwen25", "f16"),
    ("qwen2.5-0.5b-random-q4_k_m.gguf", "qwen25", "q4_k_m"),
    ("tinyllama-1.1b-random-q4_k_m.gguf", "tinyllama", "q4_k_m"),
]


# --shape NAME -> (make_arch_gguf.py family, default layers: 0 = the real count)
SHAPES = {
    "llama-3.2-1b": ("llama32", 0),
    "llama-3.2-3b": ("llama32_3b", 0),
    "llama-3.1-8b": ("llama31_8b", 0),
    "qwen3-4b": ("qwen3_4b", 0),
    "qwen3-8b": ("qwen3_8b", 0),
    "gemma3-1b": ("gemma3", 0),
    "gemma3-4b": ("gemma3_4b", 0),
    "qwen3-30b-a3b": ("qwen3moe", 8),  # 48 real layers: the F16 would be 61 GB
    # issue 37's families (bench/scale.py --families); each needs its make_arch_gguf.py family
    "granite-3.3-2b": ("granite", 0),
    "smollm3-3b": ("smollm3", 0),
    "deepseek-v2-lite": ("deepseek2_lite", 4),  # 27 real layers: the F16 would be 31 GB
    "phi-3.5-mini": ("phi35_mini", 0),
    "phi-4-mini": ("phi4_mini", 0),
    "gpt-oss-20b": ("gptoss_20b", 4),  # 24 real layers: the F16 would be 39 GB
}
# llama-quantize's ftypes, lower case; the second line: issue 37's formats (scale.py --formats)
FORMATS = ("q4_k_m", "q5_k_m", "q6_k", "q8_0", "q4_0",
           "q2_k", "q3_k_s", "q3_k_m", "q3_k_l", "iq4_xs", "iq4_nl", "q5_1", "q4_1", "q5_0")
# issue 35: llama-quantize's MXFP4_MOE (experts MXFP4, every other matrix Q8_0), for MoE shapes
FORMATS += ("mxfp4_moe",)
SHAPE_OUT = os.path.join(os.path.expanduser("~"), ".cache", "lumen", "shapes")
LLAMA_QUANTIZE = os.path.join(os.environ.get("LUMEN_REFERENCE_BIN") or
                              os.path.join(ROOT, ".reference", "bin"), "llama-quantize")


def mb(path):
    return os.path.getsize(path) / 1e6


def quantize_q4_k_m(src, dst, name=None):
    """llama.cpp's Q4_K_M quantization of src into dst (as llama-quantize src dst Q4_K_M),
    with general.name set to name. Its per-tensor report (printed by the C++ code straight to stdout/stderr) goes to
    dst.quantize.log, which is removed on success and shown on failure."""
    import ctypes

    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.nthread = N_THREADS
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M
    if name:  # general.name; llama.cpp would copy the F16 file's
        kv = (llama_cpp.llama_model_kv_override * 2)()  # key "" ends the list
        kv[0].tag = llama_cpp.LLAMA_KV_OVERRIDE_TYPE_STR
        kv[0].key = b"general.name"
        kv[0].value.val_str = name.encode()
        params.kv_overrides = kv
    tmp, log = dst + ".tmp", dst + ".quantize.log"
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(log, "wb") as fh:
        os.dup2(fh.fileno(), 1)
        os.dup2(fh.fileno(), 2)
        try:
            rc = llama_cpp.llama_model_quantize(src.encode(), tmp.encode(), ctypes.byref(params))
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
    if rc != 0:
        if os.path.exists(tmp):
            os.remove(tmp)
        with open(log, errors="replace") as fh:
            sys.stderr.write("".join(fh.readlines()[-20:]))
        sys.exit("make_shapes: llama_model_quantize(%s) failed (%d), log in %s" % (src, rc, log))
    os.remove(log)
    os.replace(tmp, dst)


def quantize_bin(src, dst, ftype="Q4_K_M"):
    """.reference/bin/llama-quantize src dst ftype (2 threads); its log to dst.quantize.log,
    removed on success, shown on failure."""
    import subprocess

    tmp, log = dst + ".tmp", dst + ".quantize.log"
    with open(log, "wb") as fh:
        rc = subprocess.call([LLAMA_QUANTIZE, src, tmp, ftype, str(N_THREADS)], stdout=fh,
                             stderr=subprocess.STDOUT)
    if rc != 0:
        if os.path.exists(tmp):
            os.remove(tmp)
        with open(log, errors="replace") as fh:
            sys.stderr.write("".join(fh.readlines()[-20:]))
        sys.exit("make_shapes: %s %s failed (%d), log in %s" % (LLAMA_QUANTIZE, src, rc, log))
    os.remove(log)
    os.replace(tmp, dst)


def shape_path(out, shape, layers, fmt):
    """<out>/<shape>[-<layers>L]-random-<fmt>.gguf; layers 0 or the real count: no suffix."""
    fam, _ = SHAPES[shape]
    full = layers in (0, mk.FAMILIES[fam]["n_layer"] if fam in mk.FAMILIES else 0)
    return os.path.join(out, "%s%s-random-%s.gguf" % (shape, "" if full else "-%dL" % layers, fmt))


def make_shape(a):
    """--shape: one model at a real per-layer shape in each format of --formats (an F16
    from make_arch_gguf.py's stream mode, then llama-quantize). Returns the paths."""
    family, default_layers = SHAPES[a.shape]
    if family not in mk.FAMILIES:
        sys.exit("make_shapes: shape %s needs family '%s', which tools/make_arch_gguf.py does "
                 "not have yet" % (a.shape, family))
    layers = a.layers if a.layers is not None else default_layers
    fmts = [x.strip().lower() for x in a.formats.split(",") if x.strip()]
    bad = [x for x in fmts if x not in FORMATS + ("f16",)]
    if bad:
        sys.exit("make_shapes: unknown format(s) %s (known: %s, f16)" % (
            ",".join(bad), ",".join(FORMATS)))
    if not os.access(LLAMA_QUANTIZE, os.X_OK) and any(x != "f16" for x in fmts):
        sys.exit("make_shapes: %s is missing: bash scripts/setup.sh --reference" % LLAMA_QUANTIZE)
    out = a.out or SHAPE_OUT
    os.makedirs(out, exist_ok=True)
    f16 = shape_path(out, a.shape, layers, "f16")
    keep_f16 = a.keep_f16 or "f16" in fmts or os.path.exists(f16)  # never delete one we did not write
    todo = [x for x in fmts if x != "f16" and (a.force or not os.path.exists(
        shape_path(out, a.shape, layers, x)))]
    for x in fmts:
        if x not in todo and x != "f16":
            p = shape_path(out, a.shape, layers, x)
            print("make_shapes: %s exists (%.1f MB), kept" % (p, mb(p)))
    made = []
    try:
        if (todo or "f16" in fmts) and (not os.path.exists(f16) or
                                        (a.force and "f16" in fmts)):
            t0 = time.time()
            mk.write_model(f16, family, layers or None, getattr(a, "vocab", None), "f16", a.seed,
                           quiet=True, stream=True)  # vocab: bench/scale.py --dry-run's tiny copy
            print("make_shapes: wrote %s (%.1f MB) in %.0f s" % (f16, mb(f16), time.time() - t0),
                  flush=True)
            if "f16" in fmts:
                made.append(f16)
        elif "f16" in fmts or todo:
            print("make_shapes: reusing %s (%.1f MB)" % (f16, mb(f16)), flush=True)
        for x in todo:
            t0 = time.time()
            p = shape_path(out, a.shape, layers, x)
            quantize_bin(f16, p, x.upper())
            print("make_shapes: wrote %s (%.1f MB) in %.0f s" % (p, mb(p), time.time() - t0),
                  flush=True)
            made.append(p)
    finally:
        if not keep_f16 and os.path.exists(f16):
            os.remove(f16)
    if not a.no_check:
        for p in made:
            print("make_shapes: check %s: %s" % (os.path.basename(p), check(p)), flush=True)
    return made


def check(path):
    """Evaluates CHECK_PROMPT with llama.cpp; fails unless every position's logits are
    finite and spread out. Returns a one-line summary."""
    from llama_cpp import Llama

    llm = Llama(model_path=path, n_ctx=256, n_threads=N_THREADS, n_threads_batch=N_THREADS,
                n_gpu_layers=0, logits_all=True, verbose=False)
    toks = llm.tokenize(CHECK_PROMPT.encode())
    llm.eval(toks)
    scores = np.array(llm.scores[:len(toks)], dtype=np.float32)  # every position's logits
    del llm
    if not np.all(np.isfinite(scores)):
        sys.exit("make_shapes: %s: non-finite logits" % path)
    std = scores.std(axis=1)
    if not (std.min() > 1e-3 and std.max() < 1e3):
        sys.exit("make_shapes: %s: degenerate logits (per-position std %g..%g)" % (
            path, std.min(), std.max()))
    top2 = np.sort(scores[-1])[-2:]
    return ("%d positions' logits finite, std %.2f..%.2f; last: max %.3f, top1-top2 gap %.3f"
            % (len(toks), std.min(), std.max(), float(top2[1]), float(top2[1] - top2[0])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None,
                    help="output directory (default models/shapes; with --shape %s)" % SHAPE_OUT)
    ap.add_argument("--shape", choices=sorted(SHAPES), help="one model at this real per-layer shape")
    ap.add_argument("--layers", type=int, default=None,
                    help="with --shape: layers (default the real count; qwen3-30b-a3b 8)")
    ap.add_argument("--formats", default="q4_k_m",
                    help="with --shape: comma-separated, of %s, f16 (default q4_k_m)"
                    % ",".join(FORMATS))
    ap.add_argument("--keep-f16", action="store_true",
                    help="with --shape: keep the F16 intermediate (default: deleted)")
    ap.add_argument("--force", action="store_true", help="rewrite files that already exist")
    ap.add_argument("--seed", type=int, default=mk.CI_SEED, help="make_arch_gguf.py weight seed")
    ap.add_argument("--no-check", action="store_true",
                    help="skip the llama.cpp finite-logits check of each file")
    a = ap.parse_args()
    if a.shape:
        make_shape(a)
        return 0
    a.out = a.out or DEFAULT_OUT
    os.makedirs(a.out, exist_ok=True)

    t_all = time.time()
    made = []
    for name, family, kind in MODELS:
        path = os.path.join(a.out, name)
        if os.path.exists(path) and not a.force:
            print("make_shapes: %s exists (%.1f MB), kept" % (name, mb(path)))
            continue
        t0 = time.time()
        if kind == "f16":
            mk.write_model(path, family, None, None, "f16", a.seed, quiet=True)
        else:
            f16 = os.path.join(a.out, "%s-random-f16.gguf" % family)  # intermediate
            kept = [os.path.join(a.out, n) for n, fam, k in MODELS if fam == family and k == "f16"]
            if kept and os.path.exists(kept[0]):
                f16 = kept[0]                                     # reuse the F16 we keep
            else:
                mk.write_model(f16, family, None, None, "f16", a.seed, quiet=True)
            try:
                quantize_q4_k_m(f16, path, "lumen-random-%s-q4_k_m" % family)
            finally:
                if not kept and os.path.exists(f16):
                    os.remove(f16)
        print("make_shapes: wrote %s (%.1f MB) in %.0f s" % (name, mb(path), time.time() - t0))
        made.append(path)

    if not a.no_check:
        for path in made:
            print("make_shapes: check %s: %s" % (os.path.basename(path), check(path)))

    print("make_shapes: done in %.0f s" % (time.time() - t_all))
    for name, _, _ in MODELS:
        path = os.path.join(a.out, name)
        print("  %-48s %8.1f MB" % (os.path.relpath(path, ROOT) if path.startswith(ROOT)
                                    else path, mb(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
