#!/usr/bin/env python3
"""Golden logits from llama.cpp (pinned llama-cpp-python) for the default model.

Writes tests/golden/gemma3_logits.txt, read by tests/test_model_gemma3_golden.c:
per prompt the text (hex UTF-8), llama.cpp's token ids, the top-20 (id, logit) of
every position, and a 64-step greedy continuation with llama.cpp's top-1/top-2 gap.

Two files are written, because llama.cpp's own logits depend on its batch size here: with
n_ubatch=1 every matmul is a GEMV; with n_ubatch=512 llama.cpp switches to its repacked /
llamafile GEMM kernels, whose other summation order moves its logits by ~0.2 on average on
this model (mean |d| 0.20, max 1.84 over the top-20 of all positions). llama.cpp reproduces
each file exactly; lumen reproduces position 0 of every prompt (attention over one cell) to
the printed precision and differs from both files about as much as they differ from each
other after that (tests/test_model_gemma3_golden.c states the measured figures and limits).
  tests/golden/gemma3_logits.txt          --ubatch 1
  tests/golden/gemma3_logits_batched.txt  --ubatch 512   (same prompts)

Usage: .venv/bin/python tools/gen_golden_logits.py [--model PATH] [--ubatch N] [--out PATH]
Needs requirements-reference.txt (bash scripts/setup.sh --reference).
"""
import argparse
import hashlib
import os
import platform
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

N_TOP = 20
N_GREEDY = 64
SETTINGS = dict(
    n_ctx=2048,
    n_batch=512,
    n_ubatch=512,
    n_threads=2,
    n_threads_batch=2,
    seed=1234,
    logits_all=True,
    flash_attn=False,  # llama-cpp-python's default (maps to LLAMA_FLASH_ATTN_TYPE_DISABLED)
    n_gpu_layers=0,
    use_mmap=True,
    verbose=False,
)


def long_text(min_chars=4200):
    """Deterministic English prose (a fixed LCG picks sentences) long enough to exceed
    Gemma 3's 512-token sliding window by a wide margin."""
    topics = [
        ("the old lighthouse", "the harbour", "storms"),
        ("the village library", "the river", "winter evenings"),
        ("the railway station", "the valley", "early trains"),
        ("the mountain observatory", "the night sky", "comets"),
        ("the market square", "the cathedral", "summer festivals"),
        ("the small bakery", "the bridge", "the morning fog"),
    ]
    templates = [
        "For many years {a} stood near {b}, and people said it remembered {c}.",
        "Every traveller who came to {b} asked first about {a}.",
        "The keeper of {a} wrote long letters about {c} and sent them across {b}.",
        "Nobody could explain why {c} always seemed to begin at {a}.",
        "Children from {b} learned to count by walking the steps of {a}.",
        "In the archives there is a drawing of {a}, made during one of the {c}.",
        "When the council proposed to close {a}, the whole of {b} objected.",
        "Some evenings the light from {a} reached all the way to {b}.",
        "Old maps show {b} much smaller than it is today, with {a} at its edge.",
        "A visiting scholar once spent three months studying {c} from {a}.",
        "The accounts of {c} do not agree, but all of them mention {a}.",
        "It was said that anyone who listened carefully at {a} could hear {b}.",
    ]
    state = 12345

    def rnd(n):
        nonlocal state
        state = (state * 1103515245 + 12345) % (1 << 31)
        return (state >> 8) % n

    paras = []
    total = 0
    chapter = 1
    while total < min_chars:
        a, b, c = topics[rnd(len(topics))]
        sents = [templates[rnd(len(templates))].format(a=a, b=b, c=c) for _ in range(4 + rnd(3))]
        sents[0] = sents[0][0].upper() + sents[0][1:]
        p = "Chapter %d. " % chapter + " ".join(sents)
        chapter += 1
        paras.append(p)
        total += len(p) + 2
    return "\n\n".join(paras) + "\n\nIn the end, the story of"


PROMPTS = [
    ("short_english", False, "The capital of France is"),
    ("question", False,
     "Question: Why is the sky blue during the day but red at sunset?\nAnswer:"),
    ("code", False,
     "def fibonacci(n):\n"
     "    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
     "    a, b = 0, 1\n"
     "    for _ in range(n):\n"
     "        a, b = b, a + b\n"
     "    return a\n"
     "\n"
     "\n"
     "# Print the first ten values\n"
     "for i in range(10):\n"),
    ("multilingual", False,
     "Café au lait, naïve façade — déjà vu! Grüße aus Zürich. "
     "日本語のテキストと中文字符。Привет, мир! 🚀🎉 ½ × π ≈ 3.14159, 안녕하세요.\n"),
    ("whitespace", False, "  leading spaces\n\n\ttabs\tand   multiple   spaces  \n  end"),
    ("chat", True,
     "<start_of_turn>user\nWrite a haiku about the ocean.<end_of_turn>\n"
     "<start_of_turn>model\n"),
    ("long", False, long_text()),
]


def top_k(row, k):
    # sort by value descending, ties by id ascending
    idx = np.argpartition(-row, k)[: k + 8]
    idx = sorted(idx.tolist(), key=lambda i: (-float(row[i]), i))
    return idx[:k]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--ubatch", type=int, default=0,
                    help="n_batch = n_ubatch for the prompt eval (default: write both files)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.ubatch == 0:
        for ub, name in ((1, "gemma3_logits.txt"), (512, "gemma3_logits_batched.txt")):
            argv = [sys.argv[0], "--model", args.model, "--ubatch", str(ub), "--out",
                    os.path.join(ROOT, "tests/golden", name)]
            import subprocess
            subprocess.run([sys.executable] + argv, check=True)
        return 0
    SETTINGS["n_batch"] = SETTINGS["n_ubatch"] = args.ubatch
    if args.out is None:
        args.out = os.path.join(ROOT, "tests/golden/gemma3_logits.txt")

    import llama_cpp
    from llama_cpp import Llama

    with open(args.model, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()

    llm = Llama(model_path=args.model, **SETTINGS)
    cp = llm.context_params
    n_vocab = llm.n_vocab()

    out = []
    w = out.append
    w("# lumen golden logits v1 (generated by tools/gen_golden_logits.py; do not edit)")
    w("# reference: llama-cpp-python %s, %s, python %s" % (
        llama_cpp.__version__, platform.machine(), platform.python_version()))
    sysinfo = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    w("# llama.cpp system info: %s" % sysinfo.replace("\n", " "))
    w("# model: %s sha256 %s n_vocab %d" % (os.path.basename(args.model), sha, n_vocab))
    w("# Llama(%s)" % ", ".join("%s=%r" % kv for kv in SETTINGS.items()))
    w("# context_params: n_ctx=%d n_batch=%d n_ubatch=%d n_threads=%d n_threads_batch=%d "
      "flash_attn_type=%d type_k=%d type_v=%d (1=f16) swa_full=%d offload_kqv=%d "
      "rope_freq_base=%g rope_freq_scale=%g" % (
          llm.n_ctx(), cp.n_batch, cp.n_ubatch, cp.n_threads, cp.n_threads_batch,
          cp.flash_attn_type, cp.type_k, cp.type_v, int(cp.swa_full), int(cp.offload_kqv),
          cp.rope_freq_base, cp.rope_freq_scale))
    w("# tokenize: add_bos=True, special=True only for prompts with 'special 1'")
    w("# prompt eval: Llama.eval() in batches of n_batch with logits for every position")
    w("# pos <p> lists the top-%d (id:logit) after position p, by logit desc, id asc" % N_TOP)
    w("# greedy: %d steps continuing the prompt eval: argmax of last logits, eval that one "
      "token, repeat (no stop at end-of-generation); each item is id:(top1-top2 logit gap)"
      % N_GREEDY)
    w("n_prompts %d" % len(PROMPTS))
    w("n_top %d" % N_TOP)
    w("n_greedy %d" % N_GREEDY)

    summary = []
    for pi, (name, special, text) in enumerate(PROMPTS):
        toks = llm.tokenize(text.encode("utf-8"), add_bos=True, special=special)
        n = len(toks)
        assert n + N_GREEDY <= SETTINGS["n_ctx"], (name, n)
        llm.reset()
        llm.eval(toks)
        scores = np.array(llm.scores[:n], dtype=np.float32)
        w("prompt %d %d %s" % (pi, n, name))
        w("special %d" % int(special))
        w("text %s" % text.encode("utf-8").hex())
        w("tokens %s" % " ".join(str(t) for t in toks))
        for p in range(n):
            row = scores[p]
            ids = top_k(row, N_TOP)
            w("pos %d %s" % (p, " ".join("%d:%.6f" % (i, row[i]) for i in ids)))
        greedy = []
        last = scores[n - 1].copy()
        for step in range(N_GREEDY):
            ids = top_k(last, 2)
            tok = ids[0]
            greedy.append("%d:%.6f" % (tok, float(last[ids[0]] - last[ids[1]])))
            llm.eval([tok])
            last = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        w("greedy %s" % " ".join(greedy))
        w("end")
        gen = llm.detokenize([int(g.split(":")[0]) for g in greedy]).decode("utf-8", "replace")
        summary.append("%-14s %4d tokens  greedy: %r" % (name, n, gen[:60]))

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="ascii", newline="\n") as f:
        f.write("\n".join(out) + "\n")
    for s in summary:
        print(s)
    print("wrote %s (%d bytes)" % (args.out, os.path.getsize(args.out)))


if __name__ == "__main__":
    sys.exit(main())
