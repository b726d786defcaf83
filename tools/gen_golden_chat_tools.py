#!/usr/bin/env python3
"""Golden prompts with tools (tests/golden/chat_tools/*.txt) for tests/test_tokenizer_chat_tools.c:
the cases below rendered by the official Jinja templates that llama.cpp keeps in
models/templates (Qwen3-0.6B, Qwen2.5-7B-Instruct, Llama-3.1-8B-Instruct), through jinja2 set up
as Hugging Face's apply_chat_template does (trim_blocks, lstrip_blocks, tojson = json.dumps with
ensure_ascii=False). The tool calls' arguments are passed as objects, as llama.cpp does.

Two deliberate differences, both in the template text given to jinja2 here, never in the output:
Llama 3.1's template quotes a string tool result as JSON (a string "is iterable"); lumen writes
the result as it is (Meta's documented ipython turns), so the test patches that test away.
Qwen 2.5 adds a default system text when none is given; lumen's ChatML does not (Qwen 3 neither),
so Qwen 2.5 is only rendered for cases that have a system message.

Run: .venv/bin/python tools/gen_golden_chat_tools.py  (needs jinja2; no model)
"""
import json
import os
import sys

import jinja2

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TEMPLATES = os.path.join(ROOT, ".reference/src/llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates")
OUT = os.path.join(ROOT, "tests/golden/chat_tools")

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather now in a city \u2014 \u00b0C, \"quoted\"\\path",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "the city"},
            "days": {"type": "integer", "minimum": 1, "maximum": 7}},
            "required": ["city"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "noop", "description": "does nothing", "parameters": {"type": "object", "properties": {}}}},
]

def call(id_, name, args):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": args}}

# name -> (messages, with tools); tool call arguments as objects (the C test passes the same
# text as JSON with other spacing)
CASES = {
    "system": ([{"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Weather in Paris?"}], True),
    "call": ([{"role": "user", "content": "Weather in Paris?"},
              {"role": "assistant", "content": "", "tool_calls": [call("call_1", "get_weather", {"city": "Paris", "days": 2})]},
              {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"}], True),
    "parallel": ([{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "Paris and Rome?"},
                  {"role": "assistant", "content": "Checking both.", "tool_calls": [
                      call("call_a", "get_weather", {"city": "Paris"}), call("call_b", "get_weather", {"city": "Rome"})]},
                  {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
                  {"role": "tool", "tool_call_id": "call_b", "content": "rain"},
                  {"role": "assistant", "content": "Paris sunny, Rome rain."},
                  {"role": "user", "content": "Thanks"}], True),
    "history": ([{"role": "user", "content": "Weather in Paris?"},
                 {"role": "assistant", "content": "", "tool_calls": [call("call_1", "get_weather", {"city": "Paris"})]},
                 {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
                 {"role": "user", "content": "ok"}], False),
}

def env():
    e = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, loader=jinja2.BaseLoader())
    e.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    def raise_exception(msg):
        raise jinja2.TemplateError(msg)
    e.globals["raise_exception"] = raise_exception
    return e

def main():
    os.makedirs(OUT, exist_ok=True)
    e = env()
    tmpls = {}
    for name, file in (("qwen3", "Qwen-Qwen3-0.6B.jinja"), ("qwen25", "Qwen-Qwen2.5-7B-Instruct.jinja"),
                       ("llama31", "meta-llama-Llama-3.1-8B-Instruct.jinja")):
        text = open(os.path.join(TEMPLATES, file)).read()
        if name == "llama31":
            patched = text.replace("message.content is mapping or message.content is iterable",
                                   "message.content is mapping")
            assert patched != text
            text = patched
        tmpls[name] = e.from_string(text)
    n = 0
    for case, (msgs, with_tools) in CASES.items():
        for name, t in tmpls.items():
            if name == "qwen25" and msgs[0]["role"] != "system" and with_tools:
                continue
            if name == "llama31" and any(len(m.get("tool_calls", [])) > 1 for m in msgs):
                continue  # the template allows one call per message
            if name == "llama31" and not with_tools:
                continue  # without tools lumen keeps llama.cpp's built-in Llama 3 template
            if name == "qwen25" and not with_tools:
                continue
            kw = {"messages": msgs, "add_generation_prompt": True, "bos_token": ""}
            if with_tools:
                kw["tools"] = TOOLS
            if name == "llama31":
                kw["tools_in_user_message"] = False
            out = t.render(**kw)
            with open(os.path.join(OUT, f"{name}_{case}.txt"), "w", newline="") as f:
                f.write(out)
            n += 1
    print(f"wrote {n} prompts to {OUT}", file=sys.stderr)

if __name__ == "__main__":
    main()
