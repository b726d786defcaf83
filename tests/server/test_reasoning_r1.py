"""Reasoning with a DeepSeek-R1 distill's template (docs/server.md, "Reasoning"): a tiny
random-weight Qwen2-shaped copy with R1's turn tokens, <think> / </think> and the template of
DeepSeek-R1-Distill-Qwen (tests/golden/chat_reasoning/r1_qwen.jinja), whose generation prompt
opens the span ("<｜Assistant｜><think>\\n"): the answer is thought until </think>, which the
budget inserts; whole and streamed equal; enable_thinking false closes the span in the prompt;
tools through the generic tool prompt (the template declares none), a call after the span."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT, Server, client
from test_reasoning import reasoning_of, reasoning_tokens, streamed

MARKERS = ["--token-text", "300=<\uff5cUser\uff5c>", "--token-type", "300=3",
           "--token-text", "301=<\uff5cAssistant\uff5c>", "--token-type", "301=3",
           "--token-text", "302=<\uff5cend\u2581of\u2581sentence\uff5c>", "--token-type", "302=3",
           "--token-text", "303=<think>", "--token-type", "303=4",
           "--token-text", "304=</think>", "--token-type", "304=4"]
MSGS = [{"role": "user", "content": "What is 2 + 2?"}]
SAMPLED = {"temperature": 1.0, "seed": 7}


@pytest.fixture(scope="module")
def r1server(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("reasoning_r1") / "r1_think.gguf")
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "make_arch_gguf.py"), "--family", "qwen3_tiny",
                    "--vocab", "512", *MARKERS, "--chat-template",
                    os.path.join(ROOT, "tests", "golden", "chat_reasoning", "r1_qwen.jinja"), path],
                   check=True, stdout=subprocess.DEVNULL)
    s = Server("--parallel", "4", model=path)
    assert "chat template deepseek-r1" in s.log()
    yield s
    s.stop()


def chat(c, extra=None, **kw):
    kw.setdefault("max_tokens", 12)
    return c.chat.completions.create(model="lumen", messages=kw.pop("messages", MSGS), extra_body=extra or {}, **kw)


def test_span_opened_by_the_prompt(r1server):
    c = client(r1server)
    r = chat(c, **SAMPLED)  # no budget: never closed, all of it is thought
    assert reasoning_of(r) and r.choices[0].message.content == ""
    assert reasoning_tokens(r) == 12
    assert streamed(c, messages=MSGS, **SAMPLED)[:2] == (reasoning_of(r), "")


def test_budget_inserts_the_end(r1server):
    c = client(r1server)
    for n in (0, 1, 4):
        r = chat(c, {"thinking_budget_tokens": n, "enable_thinking": True}, **SAMPLED)
        # n thought tokens and the inserted </think>; 0: this template closes the span in the
        # prompt (as for enable_thinking false), nothing is thought
        assert reasoning_tokens(r) == (n + 1 if n else 0)
        assert r.usage.completion_tokens == 12  # the answer runs on after the span
        if n == 0:
            assert reasoning_of(r) == "" and r.usage.prompt_tokens == chat(c, max_tokens=1).usage.prompt_tokens + 1
        got = streamed(c, {"thinking_budget_tokens": n, "enable_thinking": True}, messages=MSGS, **SAMPLED)
        assert got == (reasoning_of(r), r.choices[0].message.content or "", [], "length")


def test_enable_thinking_false_closes_the_span(r1server):
    c = client(r1server)
    on = chat(c, max_tokens=1)
    off = chat(c, {"chat_template_kwargs": {"enable_thinking": False}}, **SAMPLED)
    assert off.usage.prompt_tokens == on.usage.prompt_tokens + 1  # "</think>" after the opening
    assert reasoning_of(off) == "" and reasoning_tokens(off) == 0


def test_anthropic_thinking_blocks(r1server):
    import anthropic
    from conftest import API_KEY
    a = anthropic.Anthropic(base_url=r1server.url, api_key=API_KEY, max_retries=0, timeout=600)
    kw = dict(model="lumen", max_tokens=12, messages=MSGS,
              thinking={"type": "enabled", "budget_tokens": 1024},
              extra_body={"temperature": 1.0, "seed": 7, "thinking_budget_tokens": 4})  # a budget below 1024: lumen's
    m = a.messages.create(**kw)
    assert [b.type for b in m.content] == ["thinking", "text"]
    assert m.content[0].thinking and m.content[0].signature == ""
    with a.messages.stream(**kw) as s:
        events = list(s)
        final = s.get_final_message()
    assert [b.model_dump() for b in final.content] == [b.model_dump() for b in m.content]
    assert any(e.type == "content_block_delta" and e.delta.type == "signature_delta" for e in events)
    # thinking left out (Anthropic's default): not thinking, the span closed in the prompt
    plain = a.messages.create(model="lumen", max_tokens=4, messages=MSGS)
    assert [b.type for b in plain.content] == ["text"]
    assert plain.usage.input_tokens + (plain.usage.cache_read_input_tokens or 0) == \
        m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0) + 1


def test_responses_reasoning_item(r1server):
    c = client(r1server)
    kw = dict(model="lumen", input="What is 2 + 2?", max_output_tokens=12, temperature=1.0,
              extra_body={"seed": 7, "thinking_budget_tokens": 4})
    r = c.responses.create(**kw)
    assert [o.type for o in r.output] == ["reasoning", "message"]
    assert r.output[0].content[0].text and r.usage.output_tokens_details.reasoning_tokens == 5
    done = None
    deltas = ""
    for ev in c.responses.create(stream=True, **kw):
        if ev.type == "response.reasoning_text.delta":
            deltas += ev.delta
        if ev.type in ("response.completed", "response.incomplete"):
            done = ev.response
    assert deltas == r.output[0].content[0].text
    assert [o.model_dump(exclude={"id"}) for o in done.output] == [o.model_dump(exclude={"id"}) for o in r.output]


def test_tools_generic_prompt(r1server):
    # issue 35: R1 distills' official templates declare no tools (no `tools` variable; they only
    # render earlier calls and results in R1's markers), so lumen gives tools to R1 as the generic
    # tool prompt (docs/server.md): the tools in the system text, calls as {"tool_calls": [...]};
    # the thinking span stays apart and the grammar applies after it
    import json
    c = client(r1server)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "enum": ["Paris"]}}, "required": ["city"],
        "additionalProperties": False}}}]
    plain = chat(c, max_tokens=1).usage.prompt_tokens
    assert chat(c, max_tokens=1, tools=tools).usage.prompt_tokens > plain + 20
    kw = dict(max_tokens=120, tools=tools, tool_choice="required", parallel_tool_calls=False, **SAMPLED)
    extra = {"thinking_budget_tokens": 2, "enable_thinking": True}
    r = chat(c, extra, **kw)
    m = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls" and reasoning_of(r) and reasoning_tokens(r) == 3, r
    assert [(t.function.name, json.loads(t.function.arguments)) for t in m.tool_calls] == \
        [("get_weather", {"city": "Paris"})]
    assert streamed(c, extra, messages=MSGS, **kw) == \
        (reasoning_of(r), m.content or "", [("get_weather", m.tool_calls[0].function.arguments)], "tool_calls")
    # a tool loop: the earlier call and its result render (the generic prompt's forms), the
    # assistant's reasoning dropped as R1's template drops it
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}
    turns = [*MSGS, {"role": "assistant", "content": None, "tool_calls": [call], "reasoning_content": "Need it."},
             {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    n = [chat(c, max_tokens=1, tools=tools, messages=t).usage.prompt_tokens for t in (MSGS, turns)]
    assert n[1] > n[0]
    r = chat(c, {"thinking_budget_tokens": 2, "enable_thinking": True}, messages=turns, tools=tools, max_tokens=8,
             **SAMPLED)
    assert reasoning_tokens(r) == 3 and r.choices[0].finish_reason in ("stop", "length", "tool_calls")
