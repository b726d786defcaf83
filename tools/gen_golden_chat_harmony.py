#!/usr/bin/env python3
"""Golden harmony prompts (tests/golden/chat_harmony/*.txt) for tests/test_tokenizer_chat_harmony.c:
the cases below rendered by gpt-oss's official template (models/templates/openai-gpt-oss-120b.jinja
in llama.cpp's tree) through jinja2 set up as Hugging Face's apply_chat_template does (trim_blocks,
lstrip_blocks, tojson = json.dumps with ensure_ascii=False), strftime_now fixed to DATE so the
output does not depend on the day. Tool call arguments are passed as objects (as llama.cpp does);
an assistant's reasoning goes in "thinking" (llama.cpp maps reasoning_content there for gpt-oss).
Each case's reasoning_effort is in its name's table below; the C test passes the same.

Run: .venv/bin/python tools/gen_golden_chat_harmony.py  (needs jinja2; no model)
"""
import json
import os
import sys

import jinja2

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TEMPLATE = os.path.join(ROOT, "tests/golden/chat_harmony/template.jinja")  # llama.cpp's models/templates/openai-gpt-oss-120b.jinja
OUT = os.path.join(ROOT, "tests/golden/chat_harmony")
DATE = "2026-01-15"

# Written to tests/golden/chat_harmony/tools.json too: the C test passes that text.
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather now in a city \u2014 \u00b0C, \"quoted\"",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "the city"},
            "days": {"type": "integer", "default": 1},
            "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "scores": {"type": "array", "items": {"type": "number"}, "nullable": True},
            "exact": {"type": "boolean", "description": "no rounding"},
            "where": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                      "required": ["lat"]},
            "pts": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "integer"}}}},
            "note": {"type": "string", "nullable": True},
            "any": {},
            "either": {"type": ["string", "number"]},
            "opt": {"type": "object"},
            "id": {"oneOf": [{"type": "string", "description": "a name"}, {"type": "integer", "default": 3}]},
            "shape": {"oneOf": [{"type": "object"}, {"type": "string"}]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "noop", "description": "does nothing", "parameters": {"type": "object", "properties": {}}}},
]


# Edge cases of the TypeScript rendering (tests/golden/chat_harmony/tools_edge.json, case "edge"):
# escapes in names and descriptions, an enum with non-string values (Python's str() of them),
# a default that is an object, a tool without parameters.
TOOLS_EDGE = [
    {"type": "function", "function": {
        "name": "f\u00e9", "description": "emoji \U0001F600 \" b \\ n \n",
        "parameters": {"type": "object", "properties": {
            "a\tb": {"type": "string", "enum": ["xA", 1, True, None, 2.5]},
            "o": {"oneOf": [{"type": "string"}, {"type": "number", "default": {"k": [1, "\u00e9"]}}]},
            "d": {"type": "number", "description": "", "default": 0.5},
            "arr": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}, "nullable": True},
            "long": {"type": "array", "items": {"type": "object", "properties": {
                "aaaaaaaaaaaa": {"type": "string"}, "bbbbbbbbbbbbbbb": {"type": "integer"}}}}},
            "required": ["o"]}}},
    {"type": "function", "function": {"name": "bare", "description": "no parameters"}},
]


def call(id_, name, args):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": args}}


# name -> (messages, tools (True: TOOLS, "edge": TOOLS_EDGE, False: none), reasoning_effort or None)
CASES = {
    "plain": ([{"role": "user", "content": "Hi there"}], False, None),
    "system": ([{"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Weather in Paris?"}], True, "high"),
    "history": ([{"role": "developer", "content": "Answer in French."},
                 {"role": "user", "content": "Hello"},
                 {"role": "assistant", "content": "Bonjour", "thinking": "The user greets me."},
                 {"role": "user", "content": "Ça va?"}], False, "low"),
    "call": ([{"role": "user", "content": "Weather in Paris?"},
              {"role": "assistant", "content": "", "thinking": "Need the weather tool.",
               "tool_calls": [call("call_1", "get_weather", {"city": "Paris", "days": 2})]},
              {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"}], True, None),
    "call_done": ([{"role": "user", "content": "Weather in Paris?"},
                   {"role": "assistant", "content": "Let me check.",
                    "tool_calls": [call("call_1", "get_weather", {"city": "Paris"})]},
                   {"role": "tool", "tool_call_id": "call_1", "content": "sunny \"and\" warm"},
                   {"role": "assistant", "content": "Sunny."},
                   {"role": "user", "content": "Thanks"}], True, "medium"),
    "edge": ([{"role": "user", "content": "x"}], "edge", None),
}


def env():
    e = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, loader=jinja2.BaseLoader())
    e.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)

    def raise_exception(msg):
        raise jinja2.TemplateError(msg)
    e.globals["raise_exception"] = raise_exception
    e.globals["strftime_now"] = lambda fmt: DATE if fmt == "%Y-%m-%d" else None
    return e


def main():
    os.makedirs(OUT, exist_ok=True)
    t = env().from_string(open(TEMPLATE).read())
    with open(os.path.join(OUT, "tools.json"), "w") as f:
        json.dump(TOOLS, f, ensure_ascii=False, indent=1)
    with open(os.path.join(OUT, "tools_edge.json"), "w") as f:
        json.dump(TOOLS_EDGE, f, ensure_ascii=True, indent=1)  # escapes in the JSON text
    for case, (msgs, with_tools, effort) in CASES.items():
        kw = {"messages": msgs, "add_generation_prompt": True}
        if with_tools:
            kw["tools"] = TOOLS_EDGE if with_tools == "edge" else TOOLS
        if effort:
            kw["reasoning_effort"] = effort
        with open(os.path.join(OUT, case + ".txt"), "w", newline="") as f:
            f.write(t.render(**kw))
    print("wrote %d prompts to %s" % (len(CASES), os.path.relpath(OUT, ROOT)), file=sys.stderr)


if __name__ == "__main__":
    main()
