"""Reasoning kept apart from the answer (docs/server.md, "Reasoning"), through the official
openai client on a tiny random-weight Qwen3 copy whose vocabulary has Qwen3's markers
(<|im_start|>, <|im_end|>, <think>, </think>): a logit bias on <think> makes the model think
(every token it draws is <think>, so the span holds exactly what the budget lets in). Whole and
streamed answers equal; budgets of 0, N and none; thinking then a JSON schema; thinking then a
tool call; inline reasoning; enable_thinking; earlier turns' thinking dropped; bad fields 400."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, Server, client

THINK, END = 302, 303
MARKERS = ["--token-text", "300=<|im_start|>", "--token-type", "300=3", "--token-text", "301=<|im_end|>",
           "--token-type", "301=3", "--token-text", "302=<think>", "--token-type", "302=4",
           "--token-text", "303=</think>", "--token-type", "303=4"]
BIAS = {"logit_bias": {str(THINK): 100}}
MSGS = [{"role": "user", "content": "What is 2 + 2?"}]


@pytest.fixture(scope="module")
def rserver(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("reasoning") / "qwen3_think.gguf")
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "make_arch_gguf.py"), "--family", "qwen3_tiny",
                    "--vocab", "512", *MARKERS, path], check=True, stdout=subprocess.DEVNULL)
    s = Server("--parallel", "4", model=path)
    yield s
    s.stop()


def chat(c, extra=None, **kw):
    kw.setdefault("max_tokens", 12)
    kw.setdefault("temperature", 0)
    return c.chat.completions.create(model="lumen", messages=kw.pop("messages", MSGS), extra_body=extra or {}, **kw)


def streamed(c, extra=None, **kw):
    """The stream's reasoning, content, tool calls (name, arguments) and finish reason, joined."""
    kw.setdefault("max_tokens", 12)
    kw.setdefault("temperature", 0)
    reasoning, content, calls, finish = "", "", {}, None
    for ch in c.chat.completions.create(model="lumen", messages=kw.pop("messages", MSGS), extra_body=extra or {},
                                        stream=True, **kw):
        if not ch.choices:
            continue
        d = ch.choices[0].delta
        reasoning += getattr(d, "reasoning_content", None) or ""
        content += d.content or ""
        for t in d.tool_calls or []:
            name, args = calls.get(t.index, ("", ""))
            calls[t.index] = (name + (t.function.name or ""), args + (t.function.arguments or ""))
        finish = ch.choices[0].finish_reason or finish
    return reasoning, content, [calls[k] for k in sorted(calls)], finish


def reasoning_of(r):
    return getattr(r.choices[0].message, "reasoning_content", None) or ""


def reasoning_tokens(r):
    return r.usage.completion_tokens_details.reasoning_tokens


def test_budget_n_whole_equals_streamed(rserver):
    c = client(rserver)
    for n in (1, 3, 5):
        r = chat(c, {**BIAS, "thinking_budget_tokens": n})
        # the span: <think>, n tokens, the inserted </think>; then the answer runs on
        assert reasoning_of(r) == "<think>" * n
        assert reasoning_tokens(r) == n + 2
        assert r.choices[0].message.content == "<think>" * (12 - n - 2)
        assert r.choices[0].finish_reason == "length"
        assert streamed(c, {**BIAS, "thinking_budget_tokens": n}) == \
            (reasoning_of(r), r.choices[0].message.content, [], "length")


def test_no_budget_and_budget_zero(rserver):
    c = client(rserver)
    r = chat(c, BIAS)  # no budget: the span never closes, all of it is reasoning
    assert reasoning_of(r) == "<think>" * 11 and r.choices[0].message.content == ""
    assert streamed(c, BIAS)[:2] == (reasoning_of(r), "")
    r = chat(c, {**BIAS, "thinking_budget_tokens": 0})  # no thinking: an empty span in the prompt
    assert reasoning_of(r) == "" and r.choices[0].message.content == "<think>" * 10
    assert reasoning_tokens(r) == 2  # the span the model opened anyway is closed at once
    plain = chat(c)
    assert r.usage.prompt_tokens > plain.usage.prompt_tokens  # "<think>\n\n</think>\n\n"


def test_thinking_then_json_schema(rserver):
    c = client(rserver)
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}
    extra = {**BIAS, "thinking_budget_tokens": 2}
    r = chat(c, extra, max_tokens=40, response_format=fmt)
    assert reasoning_of(r) == "<think>" * 2
    assert isinstance(json.loads(r.choices[0].message.content)["ok"], bool)
    assert streamed(c, extra, max_tokens=40, response_format=fmt) == \
        (reasoning_of(r), r.choices[0].message.content, [], r.choices[0].finish_reason)


def test_thinking_then_tool_call(rserver):
    c = client(rserver)
    tools = [{"type": "function", "function": {"name": "check", "parameters": {
        "type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}]
    extra = {**BIAS, "thinking_budget_tokens": 2}
    r = chat(c, extra, max_tokens=90, tools=tools, tool_choice="required")
    m = r.choices[0].message
    assert reasoning_of(r) == "<think>" * 2 and r.choices[0].finish_reason == "tool_calls"
    assert m.tool_calls[0].function.name == "check"
    assert isinstance(json.loads(m.tool_calls[0].function.arguments)["ok"], bool)
    assert streamed(c, extra, max_tokens=90, tools=tools, tool_choice="required") == \
        (reasoning_of(r), m.content or "", [("check", m.tool_calls[0].function.arguments)], "tool_calls")


def test_inline_and_no_thinking(rserver):
    c = client(rserver)
    r = chat(c, {**BIAS, "thinking_budget_tokens": 2, "reasoning_format": "none"})
    assert reasoning_of(r) == ""
    assert r.choices[0].message.content == "<think><think><think></think>" + "<think>" * 8
    r = chat(c)  # a model that does not think: content only, no reasoning_content
    assert reasoning_of(r) == "" and reasoning_tokens(r) == 0


def test_enable_thinking_and_prior_turns(rserver):
    c = client(rserver)
    base = chat(c, max_tokens=1).usage.prompt_tokens
    off = [chat(c, {"enable_thinking": False}, max_tokens=1).usage.prompt_tokens,
           chat(c, {"chat_template_kwargs": {"enable_thinking": False}}, max_tokens=1).usage.prompt_tokens]
    assert off[0] == off[1] > base
    assert chat(c, {"enable_thinking": True}, max_tokens=1).usage.prompt_tokens == base
    # an earlier answer's thinking is dropped from the prompt, as Qwen3's template does
    turns = lambda a: [MSGS[0], {"role": "assistant", "content": a}, {"role": "user", "content": "And 3 + 3?"}]
    n_think = chat(c, messages=turns("<think>\nfour, clearly\n</think>\n\n4"), max_tokens=1).usage.prompt_tokens
    assert n_think == chat(c, messages=turns("4"), max_tokens=1).usage.prompt_tokens


def test_bad_fields(rserver):
    for body, param in (({"thinking_budget_tokens": -2}, "thinking_budget_tokens"),
                        ({"thinking_budget_tokens": 1 << 30}, "thinking_budget_tokens"),
                        ({"reasoning_format": "sometimes"}, "reasoning_format"),
                        ({"enable_thinking": "yes"}, "enable_thinking"),
                        ({"chat_template_kwargs": {"enable_thinking": 1}}, "chat_template_kwargs.enable_thinking"),
                        ({"chat_template_kwargs": []}, "chat_template_kwargs")):
        st, _, r = rserver.post("/v1/chat/completions", {"messages": MSGS, "max_tokens": 1, **body})
        assert st == 400 and r["error"]["param"] == param, (body, r)
    # a malformed budget or effort (issue 35): wrong types, absurd sizes, past 64 bits: one 400 each
    for body, param in (({"thinking_budget_tokens": "5"}, "thinking_budget_tokens"),
                        ({"thinking_budget_tokens": 1.5}, "thinking_budget_tokens"),
                        ({"thinking_budget_tokens": -(1 << 40)}, "thinking_budget_tokens"),
                        ({"thinking_budget_tokens": 1 << 62}, "thinking_budget_tokens"),
                        ({"reasoning_effort": 5}, "reasoning_effort"),
                        ({"reasoning_effort": "max"}, "reasoning_effort")):
        st, _, r = rserver.post("/v1/chat/completions", {"messages": MSGS, "max_tokens": 1, **body})
        assert st == 400 and r["error"]["param"] == param, (body, r)
    st, _, r = rserver.post("/v1/chat/completions", '{"messages": [{"role": "user", "content": "x"}], '
                            '"thinking_budget_tokens": 99999999999999999999999}')
    assert st == 400, r
    for budget in (-1, 100, 1 << 40, "2048"):  # Anthropic's thinking.budget_tokens: 1024 .. 2^24, an integer
        st, _, r = rserver.post("/v1/messages", {"model": "lumen", "max_tokens": 4096, "messages": MSGS,
                                                 "thinking": {"type": "enabled", "budget_tokens": budget}})
        assert st == 400 and r["error"]["message"] and "budget_tokens" in json.dumps(r), (budget, r)
    st, _, r = rserver.post("/v1/responses", {"input": "hi", "thinking_budget_tokens": -3})
    assert st == 400 and r["error"]["param"] == "thinking_budget_tokens", r


def test_prior_reasoning_in_a_tool_loop(rserver):
    # Qwen3's template keeps reasoning_content after the last user message (a tool loop:
    # "<think>\n...\n</think>\n\n" before the call) and drops it before
    c = client(rserver)
    tools = [{"type": "function", "function": {"name": "check", "parameters": {"type": "object"}}}]
    call = {"id": "call_1", "type": "function", "function": {"name": "check", "arguments": "{}"}}

    def loop(reasoning, later_user=False):
        a = {"role": "assistant", "content": "", "tool_calls": [call]}
        if reasoning:
            a["reasoning_content"] = reasoning
        m = [MSGS[0], a, {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]
        return m + [{"role": "user", "content": "And 3 + 3?"}] if later_user else m

    n = lambda m: chat(c, messages=m, tools=tools, max_tokens=1).usage.prompt_tokens
    assert n(loop("sum it")) > n(loop(None))
    assert n(loop("sum it", True)) == n(loop(None, True))
