#!/usr/bin/env python3
"""Golden prompts of the reasoning families' chat formats (tests/golden/chat_reasoning/*.txt) for
tests/test_tokenizer_chat_reasoning.c: DeepSeek-R1 distills (LM_CHAT_TEMPLATE_DEEPSEEK_R1) by
their own templates as llama.cpp keeps them (models/templates/deepseek-ai-DeepSeek-R1-Distill-
Qwen-32B.jinja, with enable_thinking; -Llama-8B.jinja, without), Qwen3 (ChatML plus the empty
span the server appends for enable_thinking false) by Qwen-Qwen3-0.6B.jinja, and QwQ (ChatML plus
the opening "<think>\\n", and "</think>" when off, that the server appends) by Qwen-QwQ-32B.jinja;
each template is copied beside its goldens for the detection test. Rendered through jinja2 as Hugging Face's
apply_chat_template sets it up (trim_blocks, lstrip_blocks), bos_token empty: lumen's tokenizer
adds BOS. enable_thinking is passed true (llama.cpp's default) unless the case says off.

Run: .venv/bin/python tools/gen_golden_chat_reasoning.py  (needs jinja2; no model)
"""
import os
import sys

import jinja2

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SRC = os.environ.get("LUMEN_REFERENCE_SRC") or os.path.join(
    ROOT, ".reference/src/llama_cpp_python-0.3.36/vendor/llama.cpp")
TEMPLATES = {
    "r1_qwen": "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
    "r1_llama": "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
    "qwen3": "Qwen-Qwen3-0.6B.jinja",
    "qwq": "Qwen-QwQ-32B.jinja",
}
OUT = os.path.join(ROOT, "tests/golden/chat_reasoning")

# (name, messages, enable_thinking): the same cases as tests/test_tokenizer_chat_reasoning.c's
CASES = [
    ("system", [("system", "You are terse."), ("user", "Hi there")], True),
    ("turns", [("user", "What is 2+2?"), ("assistant", "<think>\nadd them\n</think>\n\n4"),
               ("user", "  and 3+3?\n")], True),
    ("off", [("user", "caf\u00e9 <b>\n\nline")], False),
]
# the families whose case renders each golden (Qwen3's turns: the server drops the earlier
# span before ChatML renders, so its golden is the server's prompt, checked end to end instead)
SKIP = {("qwen3", "turns"), ("qwq", "turns")}


def main():
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    os.makedirs(OUT, exist_ok=True)
    for fam, fname in TEMPLATES.items():
        text = open(os.path.join(SRC, "models/templates", fname), encoding="utf-8").read()
        with open(os.path.join(OUT, fam + ".jinja"), "w", encoding="utf-8", newline="") as f:
            f.write(text)
        t = env.from_string(text)
        for name, msgs, think in CASES:
            if (fam, name) in SKIP:
                continue
            out = t.render(messages=[{"role": r, "content": c} for r, c in msgs], add_generation_prompt=True,
                           bos_token="", eos_token="", enable_thinking=think)
            path = os.path.join(OUT, "%s_%s.txt" % (fam, name))
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(out)
            print("wrote %s (%d bytes)" % (path, len(out.encode("utf-8"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
