#!/usr/bin/env python3
"""Golden prompts of the Phi-3 chat format (tests/golden/chat_phi3/*.txt) for
tests/test_tokenizer_chat_phi3.c: the cases below rendered by Phi-3.5-mini-instruct's own Jinja
template (llama.cpp keeps it as models/templates/microsoft-Phi-3.5-mini-instruct.jinja; copied
to tests/golden/chat_phi3/template.jinja, which the test also feeds to template detection),
through jinja2 as Hugging Face's apply_chat_template sets it up (trim_blocks, lstrip_blocks).
Every case asks for the generation prompt and has no empty system message: there the template
and llama.cpp's built-in LLM_CHAT_TEMPLATE_PHI_3 (which lumen mirrors) agree.

Run: .venv/bin/python tools/gen_golden_chat_phi3.py  (needs jinja2; no model)
"""
import os
import sys

import jinja2

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SRC = os.environ.get("LUMEN_REFERENCE_SRC") or os.path.join(
    ROOT, ".reference/src/llama_cpp_python-0.3.36/vendor/llama.cpp")
TEMPLATE = os.path.join(SRC, "models/templates/microsoft-Phi-3.5-mini-instruct.jinja")
OUT = os.path.join(ROOT, "tests/golden/chat_phi3")

# (name, messages): the same cases as tests/test_tokenizer_chat_phi3.c's k_cases
CASES = [
    ("system", [("system", "You are terse."), ("user", "Hi there")]),
    ("turns", [("user", "What is 2+2?"), ("assistant", "4"), ("user", "  and 3+3?\n")]),
    ("user", [("user", "caf\u00e9 <b>\n\nline")]),
]


def main():
    text = open(TEMPLATE, encoding="utf-8").read()
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    t = env.from_string(text)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "template.jinja"), "w", encoding="utf-8", newline="") as f:
        f.write(text)
    for name, msgs in CASES:
        out = t.render(messages=[{"role": r, "content": c} for r, c in msgs],
                       add_generation_prompt=True, eos_token="<|endoftext|>")
        with open(os.path.join(OUT, name + ".txt"), "w", encoding="utf-8", newline="") as f:
            f.write(out)
        print("wrote %s (%d bytes)" % (name, len(out.encode("utf-8"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
