"""lumen serve's Anthropic Messages API (POST /v1/messages, /v1/messages/count_tokens) through
the official `anthropic` SDK and raw HTTP: whole and streamed answers (stream == whole for
greedy), stop sequences, max_tokens, a tool round trip with a named tool_choice, count_tokens,
errors as the SDK's typed exceptions and, for malformed bodies, a 4xx in Anthropic's shape."""
import json
import os
import signal

import anthropic  # pinned in requirements.txt; tests/server/test_server.sh checks it is installed
import jsonschema
import pytest

from conftest import API_KEY, QUICK, ROOT, Server

N_GEN = 8 if QUICK else 16
GREEDY = {"temperature": 0}  # the SDK has no sampling arguments: clients send them in the body
ASK = [{"role": "user", "content": "Name three colors."}]
WEATHER = {"name": "get_weather", "description": "The current weather of a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"},
                                                             "unit": {"enum": ["celsius", "fahrenheit"]}},
                            "required": ["city"], "additionalProperties": False}}
TIME = {"name": "get_time", "description": "The local time of a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def sdk(server, key=API_KEY):
    return anthropic.Anthropic(base_url=server.url, api_key=key, max_retries=0, timeout=600)


def create(c, **kw):
    kw.setdefault("model", "lumen")
    kw.setdefault("max_tokens", N_GEN)
    kw.setdefault("messages", ASK)
    kw.setdefault("extra_body", GREEDY)
    return c.messages.create(**kw)


def text_of(msg):
    return "".join(b.text for b in msg.content if b.type == "text")


def sse_events(data):
    """(event name, parsed data) of each event of a raw SSE body."""
    out = []
    for block in data.decode().split("\n\n"):
        if not block.strip():
            continue
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        out.append((lines["event"], json.loads(lines["data"])))
    return out


# ---------------------------------------------------------------- answers


def test_create_whole(server):
    c = sdk(server)
    r = create(c, system="You are terse.")
    assert r.type == "message" and r.role == "assistant" and r.id.startswith("msg_")
    assert len(r.content) == 1 and r.content[0].type == "text" and r.content[0].text
    assert r.stop_reason in ("end_turn", "max_tokens") and r.stop_sequence is None
    assert 0 < r.usage.output_tokens <= N_GEN
    n = c.messages.count_tokens(model="lumen", messages=ASK, system="You are terse.").input_tokens
    assert r.usage.input_tokens + (r.usage.cache_read_input_tokens or 0) == n


def test_stream_equals_whole(server):
    c = sdk(server)
    whole = create(c)
    with c.messages.stream(model="lumen", max_tokens=N_GEN, messages=ASK, extra_body=GREEDY) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == text_of(whole) == text_of(final)
    assert final.stop_reason == whole.stop_reason and final.usage.output_tokens == whole.usage.output_tokens
    # the raw event sequence, as Anthropic sends it
    st, hd, data = server.request("POST", "/v1/messages", {"model": "lumen", "max_tokens": 4, "stream": True,
                                                           "messages": ASK, "temperature": 0})
    assert st == 200 and hd["Content-Type"].startswith("text/event-stream")
    ev = sse_events(data)
    names = [n for n, _ in ev]
    assert names[:3] == ["message_start", "ping", "content_block_start"], names
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"], names
    assert set(names[3:-3]) == {"content_block_delta"}
    assert all(d["type"] == n for n, d in ev)
    assert ev[-2][1]["delta"]["stop_reason"] == "max_tokens" and ev[-2][1]["usage"]["output_tokens"] == 4


def test_stop_sequences_and_max_tokens(server):
    c = sdk(server)
    r = create(c, max_tokens=3)
    assert r.stop_reason == "max_tokens" and r.usage.output_tokens == 3
    whole = text_of(create(c, max_tokens=N_GEN))
    words = [w for w in whole.split() if whole.index(w) > 0]
    assert words, whole
    stop = words[0]
    r = create(c, max_tokens=N_GEN, stop_sequences=[stop, "\x01never"])
    assert r.stop_reason == "stop_sequence" and r.stop_sequence == stop
    assert text_of(r) == whole[:whole.index(stop)]


def test_tool_round_trip(server):
    c = sdk(server)
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = create(c, messages=ask, max_tokens=64, tools=[WEATHER, TIME],
               tool_choice={"type": "tool", "name": "get_weather"})
    calls = [b for b in r.content if b.type == "tool_use"]
    assert len(calls) == 1 and r.stop_reason == "tool_use", r
    call = calls[0]
    assert call.name == "get_weather" and call.id.startswith("toolu_")
    jsonschema.validate(call.input, WEATHER["input_schema"])
    # the same call streamed: one tool_use block whose input_json_delta pieces parse to the same input
    with c.messages.stream(model="lumen", max_tokens=64, messages=ask, tools=[WEATHER, TIME], extra_body=GREEDY,
                           tool_choice={"type": "tool", "name": "get_weather"}) as s:
        final = s.get_final_message()
    scalls = [b for b in final.content if b.type == "tool_use"]
    assert len(scalls) == 1 and scalls[0].input == call.input and final.stop_reason == "tool_use"
    # the result goes back; the answer is text
    follow = ask + [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in r.content]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                                  "content": [{"type": "text", "text": "18 C, sunny"}]}]}]
    r2 = create(c, messages=follow, tools=[WEATHER, TIME], tool_choice={"type": "none"})
    assert r2.content[0].type == "text" and r2.stop_reason in ("end_turn", "max_tokens")
    # "any" with disable_parallel_tool_use: exactly one call, to some tool
    r3 = create(c, messages=ask, max_tokens=64, tools=[WEATHER, TIME],
                tool_choice={"type": "any", "disable_parallel_tool_use": True})
    calls = [b for b in r3.content if b.type == "tool_use"]
    assert len(calls) == 1 and calls[0].name in ("get_weather", "get_time") and r3.stop_reason == "tool_use", r3
    # "any" with parallel calls: several tool_use blocks, streamed as whole (the last may be cut by max_tokens)
    kw = dict(messages=[{"role": "user", "content": "Weather and time in Paris and London?"}], max_tokens=48,
              tools=[WEATHER, TIME], tool_choice={"type": "any"})
    r4 = create(c, **kw)
    with c.messages.stream(model="lumen", extra_body=GREEDY, **kw) as s:
        f4 = s.get_final_message()
    assert [b.type for b in f4.content] == [b.type for b in r4.content] and r4.content[0].type == "tool_use", r4
    assert [(b.name, b.id[:6]) for b in f4.content] == [(b.name, "toolu_") for b in r4.content]
    assert [b.input for b in f4.content[:-1]] == [b.input for b in r4.content[:-1]]
    # count_tokens sees the tools and the whole conversation
    n_plain = c.messages.count_tokens(model="lumen", messages=follow).input_tokens
    n_tools = c.messages.count_tokens(model="lumen", messages=follow, tools=[WEATHER, TIME]).input_tokens
    assert n_tools > n_plain > 0


def test_sdk_errors(server):
    c = sdk(server)
    with pytest.raises(anthropic.BadRequestError) as ei:
        create(c, extra_body={"temperature": "hot"})
    assert ei.value.body["error"]["type"] == "invalid_request_error" and "temperature" in str(ei.value)
    with pytest.raises(anthropic.BadRequestError, match="image"):
        create(c, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}])
    with pytest.raises(anthropic.AuthenticationError) as ei:
        create(sdk(server, key="wrong"))
    assert ei.value.body == {"type": "error", "error": {"type": "authentication_error",
                                                        "message": "Incorrect API key provided"}}
    with pytest.raises(anthropic.NotFoundError) as ei:
        c.messages.batches.retrieve("msgbatch_1")
    assert ei.value.body["type"] == "error" and ei.value.body["error"]["type"] == "not_found_error"


# ---------------------------------------------------------------- malformed bodies: a 4xx in Anthropic's shape

M = [{"role": "user", "content": "hi"}]
TOOL_USE = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                              "input": {"city": "Paris"}}]}
BAD = [
    ({"messages": M}, "max_tokens"),
    ({"max_tokens": "8", "messages": M}, "max_tokens"),
    ({"max_tokens": 0, "messages": M}, "max_tokens"),
    ({"max_tokens": 8}, "messages"),
    ({"max_tokens": 8, "messages": {"role": "user"}}, "messages"),
    ({"max_tokens": 8, "messages": []}, "messages"),
    ({"max_tokens": 8, "messages": [{"role": "system", "content": "x"}]}, "role"),
    ({"max_tokens": 8, "messages": [{"role": "user", "content": 5}]}, "content"),
    ({"max_tokens": 8, "messages": [{"role": "user"}]}, "content"),
    ({"max_tokens": 8, "system": 5, "messages": M}, "system"),
    ({"max_tokens": 8, "system": [{"type": "image"}], "messages": M}, "image"),
    ({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "video"}]}]}, "video"),
    ({"max_tokens": 8, "messages": [{"role": "user", "content": [{"text": "no type"}]}]}, "type"),
    ({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]}, "text"),
    ({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "document"}]}]}, "document"),
    ({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "f",
                                                                  "input": {}}]}]}, "tool_use"),
    ({"max_tokens": 8, "messages": [M[0], TOOL_USE, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "x"}]}]}, "toolu_2"),
    ({"max_tokens": 8, "messages": [M[0], {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "f", "input": "{}"}]}]}, "input"),
    ({"max_tokens": 8, "messages": M, "stop_sequences": "x"}, "stop_sequences"),
    ({"max_tokens": 8, "messages": M, "temperature": 1.5}, "temperature"),
    ({"max_tokens": 8, "messages": M, "top_k": -1}, "top_k"),
    ({"max_tokens": 8, "messages": M, "metadata": "x"}, "metadata"),
    ({"max_tokens": 8, "messages": M, "stream": "yes"}, "stream"),
    ({"max_tokens": 8, "messages": M, "tools": [{"name": "f"}]}, "input_schema"),
    ({"max_tokens": 8, "messages": M, "tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "client tools"),
    ({"max_tokens": 8, "messages": M, "tools": [WEATHER], "tool_choice": {"type": "tool", "name": "nope"}}, "nope"),
    ({"max_tokens": 8, "messages": M, "tools": [WEATHER], "tool_choice": "auto"}, "tool_choice"),
    ({"max_tokens": 8, "messages": M, "tool_choice": {"type": "any"}}, "tools"),
    ({"max_tokens": 8, "messages": M, "thinking": {"type": "enabled", "budget_tokens": 10}}, "budget_tokens"),
    ({"max_tokens": 2000, "messages": M, "thinking": {"type": "enabled", "budget_tokens": 4000}}, "budget_tokens"),
    # a schema the compiler refuses: a 400 naming the tool's input_schema
    ({"max_tokens": 8, "messages": M, "tool_choice": {"type": "any"}, "tools": [
        {"name": "f", "input_schema": {"type": "object", "not": {}}}]}, "tools[0].input_schema"),
]


@pytest.mark.parametrize("body,word", BAD, ids=[str(i) for i in range(len(BAD))])
def test_malformed(server, body, word):
    st, _, r = server.post("/v1/messages", dict(body, model="lumen"))
    assert st == 400, r
    assert r["type"] == "error" and r["error"]["type"] == "invalid_request_error" and set(r) == {"type", "error"}, r
    assert word in r["error"]["message"], r


def test_malformed_raw_and_headers(server):
    st, _, r = server.post("/v1/messages", "{not json")
    assert st == 400 and r["error"]["type"] == "invalid_request_error"
    st, _, r = server.post("/v1/messages/count_tokens", {"messages": 1})
    assert st == 400 and r["type"] == "error"
    st, hd, r = server.post("/v1/messages", {"max_tokens": 2, "messages": M}, key=None)
    assert st == 401 and r["error"]["type"] == "authentication_error" and "x-api-key" in r["error"]["message"]
    # x-api-key and anthropic-version, as Anthropic's clients send them; thinking and metadata accepted
    hd = {"x-api-key": API_KEY, "anthropic-version": "2023-06-01"}
    st, _, r = server.post("/v1/messages", {"max_tokens": 2, "messages": M, "temperature": 0,
                                            "metadata": {"user_id": "u1"}, "stop_sequences": []}, key=None, headers=hd)
    assert st == 200 and r["type"] == "message", r
    st, _, r = server.post("/v1/messages/count_tokens", {"max_tokens": 2000, "messages": M, "thinking": {
        "type": "enabled", "budget_tokens": 1024}}, key=None, headers=hd)
    assert st == 200 and r["input_tokens"] > 0, r
    st, _, r = server.post("/v1/messages", {"max_tokens": 2, "messages": M}, key="wrong")
    assert st == 401 and r == {"type": "error", "error": {"type": "authentication_error",
                                                          "message": "Incorrect API key provided"}}
    st, hd, r = server.request("GET", "/v1/messages")
    assert st == 405 and hd.get("Allow") == "POST" and json.loads(r)["error"]["type"] == "invalid_request_error"
    st, _, r = server.request("POST", "/v1/messages", body=b'{"max_tokens": 1, "messages": [], "pad": "' +
                              b"x" * (1 << 20) + b'"}')
    assert st == 413 and json.loads(r) == {"type": "error", "error": {"type": "request_too_large", "message": json.loads(
        r)["error"]["message"]}}
    m = server.metrics()
    assert m.get('lumen_requests_total{route="/v1/messages",status="200"}', 0) >= 1
    assert m.get('lumen_requests_total{route="/v1/messages/count_tokens",status="200"}', 0) >= 1
    assert m.get('lumen_requests_total{route="/v1/messages",status="400"}', 0) >= 1


def test_busy_and_draining_in_anthropic_shape():
    """429 rate_limit_error when --parallel + --queue are held (the SDK's RateLimitError); 503
    overloaded_error while drained (lumen's 503, which a balancer retries; the SDK retries it)."""
    s = Server("--parallel", "1", "--queue", "1", "--api-key", API_KEY)
    try:
        held = [s.open_stream({"max_tokens": 2000, "stream": True, "messages": M}, path="/v1/messages")
                for _ in range(2)]
        try:
            s.wait_metric(lambda m: m["lumen_requests_running"] == 1 and m["lumen_requests_waiting"] == 1)
            for path in ("/v1/messages", "/v1/messages/count_tokens"):
                st, hd, b = s.post(path, {"max_tokens": 1, "messages": M})
                assert st == 429 and hd.get("Retry-After") == "1", (path, st, b)
                assert b["type"] == "error" and b["error"]["type"] == "rate_limit_error", b
            with pytest.raises(anthropic.RateLimitError):
                create(sdk(s), max_tokens=1)
        finally:
            for h in held:
                h.close()
        s.wait_metric(lambda m: m["lumen_requests_running"] == 0 and m["lumen_requests_waiting"] == 0)
        s.proc.send_signal(signal.SIGUSR1)
        assert s.wait_for(lambda: any("SIGUSR1: draining" in ln for ln in s.lines), 10), s.log()
        st, _, b = s.post("/v1/messages", {"max_tokens": 1, "messages": M})
        assert st == 503 and b["error"]["type"] == "overloaded_error", b
    finally:
        s.stop()


QWEN = os.path.join(ROOT, "models", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")


def test_real_instruct_model():
    """A real instruct model (Qwen2.5-Coder-0.5B-Instruct, scripts/setup.sh --models): its own
    template (ChatML with tools), a named tool's one call, an end_turn answer, stream == whole."""
    if not os.path.exists(QWEN):
        pytest.skip("no %s (scripts/setup.sh --models)" % QWEN)
    s = Server("-m", QWEN, "--api-key", API_KEY)
    try:
        c = sdk(s)
        r = create(c, messages=[{"role": "user", "content": "What is the weather in Paris right now?"}],
                   max_tokens=64, tools=[WEATHER], tool_choice={"type": "tool", "name": "get_weather"})
        assert [b.type for b in r.content] == ["tool_use"] and r.stop_reason == "tool_use", r
        assert r.content[0].input["city"] == "Paris", r
        q = dict(max_tokens=24, system="Answer in one short sentence.",
                 messages=[{"role": "user", "content": "What is the capital of France?"}])
        whole = create(c, **q)
        assert whole.stop_reason == "end_turn" and "Paris" in text_of(whole), whole
        with c.messages.stream(model="lumen", extra_body=GREEDY, **q) as st:
            assert "".join(st.text_stream) == text_of(whole)
    finally:
        s.stop()
