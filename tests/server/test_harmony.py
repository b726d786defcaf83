"""gpt-oss's harmony format through lumen serve, on every API (docs/server.md, "Reasoning" and
"Harmony"): a tiny model with the harmony control tokens and gpt-oss's own template whose answers
follow a bigram chain (tools/make_harmony_gguf.py): after the generation prompt it writes
<|channel|>analysis<|message|>Hmm ok.<|return|>, so the analysis channel is reasoning and a
thinking budget cuts it and forces <|end|><|start|>assistant<|channel|>final<|message|>, after
which the final channel's body is the chain again. Through the real openai and anthropic clients:
reasoning apart (reasoning_content, thinking blocks, a reasoning item), whole == streamed; budgets
0 / N / none; reasoning_effort (none/minimal: no analysis; low/medium/high in the system message;
Anthropic's from its budget); earlier turns' reasoning rendered before a tool call; a truncated
analysis; a grammar driving the answer byte by byte; bad values; thinking then a JSON schema (the
final channel's message constrained); a budget with tools that still ends in a tool call."""
import os
import subprocess
import sys

import pytest

from conftest import API_KEY, ROOT, Server, client

CHAIN = "Hmm ok."
MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}]


@pytest.fixture(scope="module")
def hserver(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("harmony") / "harmony.gguf")
    subprocess.check_call([sys.executable, os.path.join(ROOT, "tools", "make_harmony_gguf.py"), path])
    s = Server("--parallel", "2", model=path)
    assert "chat template harmony" in s.log()
    yield s
    s.stop()


def chat(c, extra=None, **kw):
    kw.setdefault("max_tokens", 40)
    kw.setdefault("temperature", 0)
    return c.chat.completions.create(model="lumen", messages=kw.pop("messages", MSGS), extra_body=extra or {}, **kw)


def chat_streamed(c, extra=None, **kw):
    kw.setdefault("max_tokens", 40)
    kw.setdefault("temperature", 0)
    reason, content, finish = "", "", None
    for ch in c.chat.completions.create(model="lumen", messages=kw.pop("messages", MSGS), extra_body=extra or {},
                                        stream=True, **kw):
        if ch.choices:
            d = ch.choices[0].delta
            reason += (d.model_extra or {}).get("reasoning_content") or ""
            content += d.content or ""
            finish = ch.choices[0].finish_reason or finish
    return reason, content, finish


def whole(r):
    m = r.choices[0].message
    return (m.model_extra or {}).get("reasoning_content") or "", m.content or "", r.choices[0].finish_reason


def test_chat_budgets(hserver):
    c = client(hserver)
    # budget: (reasoning, content); the budget counts the analysis body's tokens (Hmm, " ok", ".")
    cases = {None: (CHAIN, ""), 0: ("", CHAIN), 1: ("Hmm", CHAIN), 2: ("Hmm ok", CHAIN)}
    for budget, want in cases.items():
        extra = {} if budget is None else {"thinking_budget_tokens": budget}
        r = chat(c, extra)
        assert whole(r) == (*want, "stop"), budget
        assert chat_streamed(c, extra) == whole(r), budget
        # the span's tokens: <|message|>, the body so far, <|end|> (forced) or <|return|>
        n = 3 if budget is None else budget
        assert r.usage.completion_tokens_details.reasoning_tokens == n + 2, budget
    # no budget, but the server's --reasoning-budget is absent: the analysis ends the answer
    # inline: the raw channels as content
    r = chat(c, {"reasoning_format": "none", "thinking_budget_tokens": 1})
    assert whole(r)[1] == ("<|channel|>analysis<|message|>Hmm<|end|><|start|>assistant<|channel|>final"
                           "<|message|>Hmm ok.<|return|>")


def test_reasoning_effort(hserver):
    c = client(hserver)
    for eff in ("none", "minimal"):  # no analysis, as a budget of 0
        assert whole(chat(c, {"reasoning_effort": eff})) == ("", CHAIN, "stop")
    n = {eff: chat(c, {"reasoning_effort": eff}, max_tokens=1).usage.prompt_tokens
         for eff in ("low", "medium", "high", "none")}
    base = chat(c, max_tokens=1).usage.prompt_tokens
    # "Reasoning: low|medium|high" in the system message (the template's default: medium); none: low
    assert base == n["medium"] and n["none"] == n["low"] and len({n["low"], n["medium"], n["high"]}) == 3
    st, _, body = hserver.post("/v1/chat/completions", {"messages": MSGS, "reasoning_effort": "extreme"})
    assert st == 400 and body["error"]["param"] == "reasoning_effort"
    st, _, body = hserver.post("/v1/responses", {"input": "hi", "reasoning": {"effort": "extreme"}})
    assert st == 400 and body["error"]["param"] == "reasoning.effort"


def test_anthropic_thinking_blocks(hserver):
    import anthropic
    a = anthropic.Anthropic(base_url=hserver.url, api_key=API_KEY, max_retries=0, timeout=600)
    # thinking_budget_tokens (lumen's) lets a budget below Anthropic's minimum of 1024 through; -1: none
    cases = [({"thinking": {"type": "enabled", "budget_tokens": 1024}, "extra_body": {"thinking_budget_tokens": -1}},
              [("thinking", CHAIN), ("text", "")]),
             ({"thinking": {"type": "enabled", "budget_tokens": 1024}, "extra_body": {"thinking_budget_tokens": 1}},
              [("thinking", "Hmm"), ("text", CHAIN)]),
             ({}, [("text", CHAIN)])]  # thinking left out: no analysis (a budget of 0)
    for kw, want in cases:
        kw = dict(model="lumen", max_tokens=40, messages=MSGS[1:], system="Be brief.", **kw)
        m = a.messages.create(**kw)
        got = [(b.type, b.thinking if b.type == "thinking" else b.text) for b in m.content]
        assert got == want and m.stop_reason == "end_turn", kw
        with a.messages.stream(**kw) as s:
            final = s.get_final_message()
        assert [b.model_dump() for b in final.content] == [b.model_dump() for b in m.content]
    # the effort follows the budget: 1024 -> low, 20000 -> high (the prompt's length differs)
    n = [a.messages.create(model="lumen", max_tokens=1, messages=MSGS[1:], thinking={"type": "enabled",
                           "budget_tokens": b}, extra_body={"thinking_budget_tokens": 0}).usage.input_tokens
         for b in (1024, 20000)]
    assert n[0] != n[1]


def test_responses_reasoning_item(hserver):
    c = client(hserver)
    for extra, want in (({}, [("reasoning", CHAIN), ("message", "")]),
                        ({"thinking_budget_tokens": 1}, [("reasoning", "Hmm"), ("message", CHAIN)])):
        kw = dict(model="lumen", input="Weather in Paris?", max_output_tokens=40, temperature=0, extra_body=extra)
        r = c.responses.create(**kw)
        got = [(o.type, o.content[0].text if o.type == "reasoning" else o.content[0].text) for o in r.output]
        assert got == want, extra
        done, deltas = None, ""
        for ev in c.responses.create(stream=True, **kw):
            if ev.type == "response.reasoning_text.delta":
                deltas += ev.delta
            if ev.type in ("response.completed", "response.incomplete"):
                done = ev.response
        assert deltas == want[0][1]
        assert [o.model_dump(exclude={"id"}) for o in done.output] == [o.model_dump(exclude={"id"}) for o in r.output]
    r = c.responses.create(model="lumen", input="Weather in Paris?", max_output_tokens=40, reasoning={"effort": "none"})
    assert [o.type for o in r.output] == ["message"] and r.output[0].content[0].text == CHAIN


def test_prior_reasoning_rendered(hserver):
    c = client(hserver)
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]

    def turns(reasoning):
        a = {"role": "assistant", "content": None, "tool_calls": [call]}
        if reasoning:
            a["reasoning_content"] = reasoning
        return [*MSGS, a, {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]

    n0 = chat(c, messages=turns(None), tools=tools, max_tokens=1).usage.prompt_tokens
    n1 = chat(c, messages=turns("Need the weather."), tools=tools, max_tokens=1).usage.prompt_tokens
    assert n1 > n0  # <|start|>assistant<|channel|>analysis<|message|>...<|end|> before the call
    # special-token text in the reasoning stays text (the prompt is tokenized piece by piece)
    n2 = [chat(c, messages=turns(t), tools=tools, max_tokens=1).usage.prompt_tokens for t in ("a  b", "a <|end|> b")]
    assert n2[1] >= n2[0] + 4  # "<|end|>" as text: several tokens, not the control token
    # after a final answer the template drops it: the same prompt with and without
    done = [*MSGS, {"role": "assistant", "content": "Sunny.", "reasoning_content": "Easy."},
            {"role": "user", "content": "Thanks"}]
    plain = [*MSGS, {"role": "assistant", "content": "Sunny."}, {"role": "user", "content": "Thanks"}]
    assert chat(c, messages=done, max_tokens=1).usage.prompt_tokens == \
        chat(c, messages=plain, max_tokens=1).usage.prompt_tokens
    # the same through Messages (a thinking block) and Responses (a reasoning item)
    import anthropic
    a = anthropic.Anthropic(base_url=hserver.url, api_key=API_KEY, max_retries=0, timeout=600)
    def msgs(thinking):
        blocks = ([{"type": "thinking", "thinking": thinking, "signature": ""}] if thinking else []) + \
            [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]
        return [{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": blocks},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}]
    atools = [{"name": "get_weather", "input_schema": {"type": "object"}}]
    m = [a.messages.count_tokens(model="lumen", messages=msgs(t), tools=atools).input_tokens
         for t in (None, "Need the weather.")]
    assert m[1] > m[0]
    def items(reasoning):
        r = [{"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": reasoning}]}] \
            if reasoning else []
        return [{"role": "user", "content": "Weather in Paris?"}, *r,
                {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}]
    rt = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    n = [c.responses.create(model="lumen", input=items(t), tools=rt, max_output_tokens=1).usage.input_tokens
         for t in (None, "Need the weather.")]
    assert n[1] > n[0]


def test_truncated_and_grammar(hserver):
    c = client(hserver)
    # max_tokens ends the answer inside the analysis: what was thought so far is reasoning
    assert whole(chat(c, max_tokens=5)) == ("Hmm ok", "", "length")
    assert chat_streamed(c, max_tokens=5) == ("Hmm ok", "", "length")
    # a grammar constrains the answer after the analysis, from the next message's <|channel|> on
    # (as it does an answer without analysis): here the analysis is cut at once (effort none)
    g = 'root ::= "<|channel|>final<|message|>" "Sunny." "<|return|>"'
    for extra in ({"reasoning_effort": "none"}, {"thinking_budget_tokens": 2}):
        r = chat(c, {"grammar": g, **extra})
        assert whole(r) == ("Hmm ok"[:6 if extra.get("thinking_budget_tokens") else 0], "Sunny.", "stop")
        assert chat_streamed(c, {"grammar": g, **extra}) == whole(r)


SCHEMA = {"type": "object", "properties": {"sky": {"type": "string", "enum": ["sunny", "rainy"]}},
          "required": ["sky"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "enum": ["Paris"]}}, "required": ["city"],
    "additionalProperties": False}}}]


def test_thinking_then_json_schema(hserver):
    # issue 35: response_format constrains the final channel's message only; the analysis stays
    # free (the budget cuts it here and forces <|channel|>final<|message|>, which the grammar takes)
    import json
    c = client(hserver)
    rf = {"type": "json_schema", "json_schema": {"name": "sky", "schema": SCHEMA, "strict": True}}
    for extra in ({"thinking_budget_tokens": 2}, {"thinking_budget_tokens": 0}):
        r = chat(c, extra, response_format=rf, max_tokens=60)
        reason, content, finish = whole(r)
        assert finish == "stop" and reason == ("Hmm ok" if extra["thinking_budget_tokens"] else ""), (extra, r)
        assert json.loads(content)["sky"] in ("sunny", "rainy") and set(json.loads(content)) == {"sky"}, content
        assert chat_streamed(c, extra, response_format=rf, max_tokens=60) == whole(r)
        # the same through the openai client's parse helper (a strict schema, a typed answer)
        p = c.chat.completions.parse(model="lumen", messages=MSGS, max_tokens=60, temperature=0, response_format=rf,
                                     extra_body=extra)
        assert p.choices[0].message.parsed is None or p.choices[0].message.content == content
    # with tools and tool_choice none: the format (tools with a format are a 400, as for every family)
    r = chat(c, {"thinking_budget_tokens": 2}, response_format=rf, tools=TOOLS, tool_choice="none", max_tokens=60)
    assert whole(r)[0] == "Hmm ok" and json.loads(whole(r)[1])["sky"] in ("sunny", "rainy") and \
        not r.choices[0].message.tool_calls, r
    # json_object: an object after the analysis (a random model's keys: whole == streamed, it opens "{")
    r = chat(c, {"thinking_budget_tokens": 2}, response_format={"type": "json_object"}, max_tokens=30)
    assert whole(r)[0] == "Hmm ok" and whole(r)[1].startswith("{")
    assert chat_streamed(c, {"thinking_budget_tokens": 2}, response_format={"type": "json_object"},
                         max_tokens=30) == whole(r)
    # a schema that does not compile is the client's 400, as elsewhere
    st, _, body = hserver.post("/v1/chat/completions", {"messages": MSGS, "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nope"}}}})
    assert st == 400 and body["error"]["param"] == "response_format", body


def test_budget_then_tool_call(hserver):
    # issue 35: with tools, the budget closes the analysis only (<|end|><|start|>assistant) and the
    # model chooses: it may not think again (after <|channel|>analysis, <|message|> is masked), so
    # this model takes its runner-up, a call header; the tool grammar drives the arguments
    import json
    c = client(hserver)
    for n in (0, 2):
        extra = {"thinking_budget_tokens": n}
        r = chat(c, extra, tools=TOOLS, max_tokens=60)
        m = r.choices[0].message
        assert r.choices[0].finish_reason == "tool_calls", r
        assert ((m.model_extra or {}).get("reasoning_content") or "") == "Hmm ok"[:6 if n else 0], m
        assert [(t.function.name, json.loads(t.function.arguments)) for t in m.tool_calls] == \
            [("get_weather", {"city": "Paris"})], m
        calls, reason, finish = {}, "", None
        for ch in c.chat.completions.create(model="lumen", messages=MSGS, tools=TOOLS, max_tokens=60, temperature=0,
                                            stream=True, extra_body=extra):
            if ch.choices:
                d = ch.choices[0].delta
                reason += (d.model_extra or {}).get("reasoning_content") or ""
                for t in d.tool_calls or []:
                    nm, a = calls.get(t.index, ("", ""))
                    calls[t.index] = (nm + (t.function.name or ""), a + (t.function.arguments or ""))
                finish = ch.choices[0].finish_reason or finish
        assert (reason, list(calls.values()), finish) == \
            ("Hmm ok"[:6 if n else 0], [(t.function.name, t.function.arguments) for t in m.tool_calls], "tool_calls")
    # tool_choice none: no tools in play, the budget forces the final channel as before
    assert whole(chat(c, {"thinking_budget_tokens": 2}, tools=TOOLS, tool_choice="none")) == ("Hmm ok", CHAIN, "stop")


# ---------------------------------------------------------------- a gpt-oss file as downloaded

@pytest.fixture(scope="module")
def gserver(tmp_path_factory):
    """gpt-oss's tokenizer (BPE, pre gpt-4o) and template, MXFP4 experts (make_harmony_gguf.py
    --gptoss); random answers, driven byte by byte by a grammar."""
    path = str(tmp_path_factory.mktemp("gptoss") / "gptoss.gguf")
    subprocess.check_call([sys.executable, os.path.join(ROOT, "tools", "make_harmony_gguf.py"), "--gptoss", path])
    s = Server(model=path)
    assert "chat template harmony" in s.log()
    yield s
    s.stop()



def test_gptoss_file_loads(gserver):
    # the file as downloaded serves: a plain answer (random text) through gpt-oss's BPE tokenizer
    r = client(gserver).chat.completions.create(model="lumen", messages=MSGS, max_tokens=8)
    assert r.choices[0].finish_reason in ("stop", "length") and r.usage.prompt_tokens > 100


def test_gptoss_file_final_and_ends(gserver):
    # no analysis (reasoning_effort none: budget 0 forces the final channel at once), the final's
    # body driven by the grammar (it constrains what follows the analysis: the next message from
    # its <|channel|> on, docs/server.md), then each of gpt-oss's
    # end tokens <|return|> and <|call|> ends generation (its end-of-generation set) well before
    # max_tokens; the body comes back as content through gpt-oss's BPE tokenizer
    for end in ("<|return|>", "<|call|>"):
        g = 'root ::= "<|channel|>final<|message|>" "It is sunny in Paris." "%s"' % end
        r = client(gserver).chat.completions.create(model="lumen", messages=MSGS, max_tokens=200,
                                                    extra_body={"grammar": g, "reasoning_effort": "none"})
        m = r.choices[0].message
        assert r.choices[0].finish_reason == "stop" and r.usage.completion_tokens < 100, (end, r)
        assert m.content == "It is sunny in Paris." and not (m.model_extra or {}).get("reasoning_content"), (end, m)


def test_gptoss_file_grammar_shares_channel(gserver):
    # issue 35: the grammar's first token <|channel|> is also the analysis marker's; the next token
    # is the grammar's or the marker's, never one neither allows (a 500 before), with or without
    # a budget; "assistant" is several tokens in this vocabulary, so the span's close prefix is
    # counted from the tokens (the forced final header's rest goes to the grammar)
    c = client(gserver)
    for extra in ({}, {"reasoning_effort": "none"}, {"thinking_budget_tokens": 3}):
        for g in ('root ::= "<|channel|>final<|message|>" "It" "<|return|>"', 'root ::= "<|channel|>" [a-z]+'):
            r = chat(c, {"grammar": g, **extra}, max_tokens=60)
            assert r.choices[0].finish_reason in ("stop", "length"), (extra, g, r)


def test_gptoss_file_tools(gserver):
    # tools declared (the lazy call grammar, armed from the first token: a call may start the
    # answer, the analysis marker's <|channel|> goes to it too): a random answer never draws a
    # token the grammar refuses, whole == streamed; a random model cannot be driven to a call here
    # (a request grammar with tools is a 400), test_runtime_think.c drives one through the engine
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    c = client(gserver)
    for extra in ({}, {"reasoning_effort": "none"}):
        r = chat(c, extra, tools=tools, max_tokens=60)
        assert r.choices[0].finish_reason in ("stop", "length", "tool_calls"), (extra, r)
        m = r.choices[0].message
        assert chat_streamed(c, extra, tools=tools, max_tokens=60)[1:] == (m.content or "", r.choices[0].finish_reason)
