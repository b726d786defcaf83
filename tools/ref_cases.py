"""The models and token sequences on which lumen and llama.cpp are compared with the float64
reference (tools/ref_forward.py): shared by tools/gen_golden_ref.py (llama.cpp's figures,
tests/golden/ref_kl.txt) and tests/ref_forward_check.py (lumen's, at test time).

Each case: (name, model source, golden file whose `tokens` lines are the sequences, longest
sequence taken or None for all of them).
Model sources:
  default         models/gemma-3-270m-q4_k_m.gguf (or $LUMEN_MODEL)
  f32             that file with every tensor dequantized to F32 by the gguf package
                  (ref_forward.write_f32_copy), cached in the work directory: both engines then
                  run on the reference's exact weights, with no 8-bit activations
  arch:FILE       a random-weight model of tools/make_arch_gguf.py --ci (real widths, few
                  layers, 8192-token vocabulary), in $LUMEN_ARCH_DIR (/tmp/lumen-arch-<uid>)
  shape:FILE      one of make_arch_gguf.py --ci-shapes (the larger real shapes, 1-2 layers),
                  in $LUMEN_ARCH_DIR/shapes
The default model's sequences are the golden prompts of tests/golden/gemma3_logits.txt (the
longest, 864 tokens, runs past Gemma 3's 512-token sliding window); gemma3's random copy has
a 600-token sequence for the same reason. The `-short` cases take the prompts of up to 100
tokens only (6 prompts, 177 positions): the default suite's fast variant.
"""
import hashlib
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import make_arch_gguf as mk  # noqa: E402
import ref_forward  # noqa: E402

ARCH = ["tinyllama", "llama32", "qwen25", "qwen3", "gemma3", "qwen3moe", "mixtral", "deepseek2", "phi35",
        "phi4", "granite", "smollm3"]
SHORT = 100
CASES = [("gemma3-270m-q4_k_m", "default", "tests/golden/gemma3_logits.txt", None),
         ("gemma3-270m-q4_k_m-short", "default", "tests/golden/gemma3_logits.txt", SHORT),
         ("gemma3-270m-f32", "f32", "tests/golden/gemma3_logits.txt", None),
         ("gemma3-270m-f32-short", "f32", "tests/golden/gemma3_logits.txt", SHORT)]
for _a in ARCH:
    for _dt in ("f16", "qmix"):
        CASES.append(("arch_%s_%s" % (_a, _dt), "arch:arch_%s_%s.gguf" % (_a, _dt),
                      "tests/golden/arch_%s_%s.txt" % (_a, _dt), None))
# the Q2_K / Q3_K_M mixes of the llama32 copy (make_arch_gguf's qmix_q2k / qmix_q3k; kind qmix)
for _dt in ("qmix_q2k", "qmix_q3k"):
    CASES.append(("arch_llama32_%s" % _dt, "arch:arch_llama32_%s.gguf" % _dt,
                  "tests/golden/arch_llama32_%s.txt" % _dt, None))
# deepseek2's V3 / Moonlight form (q low-rank, sigmoid + bias + groups) is written in F16 only
CASES.append(("arch_deepseek2v3_f16", "arch:arch_deepseek2v3_f16.gguf",
              "tests/golden/arch_deepseek2v3_f16.txt", None))
# the IQ4 mixes (make_arch_gguf.py CI_MODELS' 'iq4nl' / 'iq4xs' entries)
for _a, _dt in (("qwen25", "iq4nl"), ("llama32", "iq4xs")):
    CASES.append(("arch_%s_%s" % (_a, _dt), "arch:arch_%s_%s.gguf" % (_a, _dt),
                  "tests/golden/arch_%s_%s.txt" % (_a, _dt), None))
# gpt-oss: F16, and every matrix Q8_0 (make_arch_gguf.py's 'q8_0')
for _dt in ("f16", "q8_0"):
    CASES.append(("arch_gptoss_%s" % _dt, "arch:arch_gptoss_%s.gguf" % _dt,
                  "tests/golden/arch_gptoss_%s.txt" % _dt, None))
# MXFP4 experts on the qwen3moe copy (make_arch_gguf.py's 'mxfp4moe': llama-quantize's
# MXFP4_MOE; 'mxfp4': F16 elsewhere, as shipped)
for _dt in ("mxfp4moe", "mxfp4"):
    CASES.append(("arch_qwen3moe_%s" % _dt, "arch:arch_qwen3moe_%s.gguf" % _dt,
                  "tests/golden/arch_qwen3moe_%s.txt" % _dt, None))
# gpt-oss with MXFP4 experts (the same two mixes) and its own tokenizer, as downloaded
for _dt in ("mxfp4moe", "mxfp4"):
    CASES.append(("arch_gptoss_%s" % _dt, "arch:arch_gptoss_%s.gguf" % _dt,
                  "tests/golden/arch_gptoss_%s.txt" % _dt, None))
# the larger shapes' reduced copies (make_arch_gguf.SHAPE_CI_MODELS): the sequences of the CI
# copy of the same family (gemma3's up to 64 tokens: its 600-token one would take minutes)
SHAPE_SEQS = {"llama32_3b": ("llama32", None), "llama31_8b": ("llama32", None),
              "qwen3_4b": ("qwen3", None), "qwen3_8b": ("qwen3", None),
              "gemma3_4b": ("gemma3", 64)}
for _a, _fam, _l, _v, _dts, _x in mk.SHAPE_CI_MODELS:
    _src, _ml = SHAPE_SEQS[_a]
    for _dt in _dts:
        CASES.append(("shape_%s_%s" % (_a, _dt), "shape:shape_%s_%s.gguf" % (_a, _dt),
                      "tests/golden/arch_%s_f16.txt" % _src, _ml))


def kind(name, source):
    """The weights' kind, which sets how sharp a comparison is (tests/ref_forward_check.py)."""
    if source == "default":
        return "q4_k_m"
    if source == "f32":
        return "f32"
    if "_qmix_" in name:  # arch_<family>_qmix_<q2k|q3k>: the quant mixes' margins
        return "qmix"
    if name.endswith("_q8_0"):  # every matrix Q8_0 (gpt-oss): 8-bit activations, as the mixes
        return "q8_0"
    return name.rsplit("_", 1)[-1]  # arch_<family>_<f16|qmix|iq4nl|iq4xs|mxfp4moe|mxfp4>


def work_dir():
    d = os.environ.get("LUMEN_REF_DIR") or "/tmp/lumen-ref-%d" % os.getuid()
    os.makedirs(d, exist_ok=True)
    return d


def default_model():
    return os.environ.get("LUMEN_MODEL") or os.path.join(ROOT, "models/gemma-3-270m-q4_k_m.gguf")


def sha256_file(path):
    return mk.sha256_file(path)


def _f32_copy():
    """The F32 copy of the default model, rewritten when the source or the writer changes."""
    src = default_model()
    dst = os.path.join(work_dir(), "gemma-3-270m-f32.gguf")
    with open(ref_forward.__file__, "rb") as fh:
        code = hashlib.sha256(fh.read()).hexdigest()
    st = os.stat(src)
    stamp_txt = "%s %d %d %s\n" % (src, st.st_size, int(st.st_mtime), code)
    stamp = dst + ".stamp"
    if os.path.exists(dst) and os.path.exists(stamp) and open(stamp).read() == stamp_txt:
        return dst
    print("ref_cases: writing %s" % dst, flush=True)
    ref_forward.write_f32_copy(src, dst)
    with open(stamp, "w") as fh:
        fh.write(stamp_txt)
    return dst


def ref_source(source):
    """The model file the reference reads for a case's source. The F32 copy holds exactly the
    values the gguf dequantizer gives for the default file (F32 and F16 tensors are copied
    exactly), so the reference of both is the same and one pass serves the two."""
    return "default" if source == "f32" else source


def model_path(source):
    if source == "default":
        return default_model()
    if source == "f32":
        return _f32_copy()
    if source.startswith("arch:"):
        # the directory tests/test_model_arch_golden.c uses (write_ci skips current files)
        d = os.environ.get("LUMEN_ARCH_DIR") or "/tmp/lumen-arch-%d" % os.getuid()
        mk.write_ci(d)
        return os.path.join(d, source[5:])
    if source.startswith("shape:"):
        d = os.path.join(os.environ.get("LUMEN_ARCH_DIR") or "/tmp/lumen-arch-%d" % os.getuid(),
                         "shapes")
        mk.write_ci(d, mk.SHAPE_CI_MODELS, "shape")
        return os.path.join(d, source[6:])
    raise ValueError(source)


def sequences(golden, max_len=None):
    """The token-id lists of a golden logits file's `tokens` lines (those of up to max_len)."""
    out = []
    with open(os.path.join(ROOT, golden)) as fh:
        for line in fh:
            if line.startswith("tokens "):
                out.append([int(t) for t in line.split()[1:]])
    return [s for s in out if max_len is None or len(s) <= max_len]
