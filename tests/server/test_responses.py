"""lumen serve's OpenAI Responses API (POST /v1/responses) through the official `openai` SDK and
raw HTTP: whole answers (the same text as chat completions: one generation path), streams (deltas
== whole for greedy, the event sequence with its sequence_number), .parse with a pydantic model
(text.format json_schema), a function-call round trip with a named tool_choice (exactly one
call), the stateless decision (previous_response_id a named 400) and, for malformed bodies, a
400 in OpenAI's error shape."""
import json
from typing import Literal

import jsonschema
import openai
import pytest
from pydantic import BaseModel

from conftest import QUICK, client

N_GEN = 8 if QUICK else 16
ASK = "Name three colors."
WEATHER = {"type": "function", "name": "get_weather", "description": "The current weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                          "unit": {"enum": ["celsius", "fahrenheit"]}},
                          "required": ["city"], "additionalProperties": False}}
TIME = {"type": "function", "name": "get_time", "description": "The local time of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def create(c, **kw):
    kw.setdefault("model", "lumen")
    kw.setdefault("max_output_tokens", N_GEN)
    kw.setdefault("input", ASK)
    kw.setdefault("temperature", 0)
    return c.responses.create(**kw)


def sse_events(data):
    """(event name, parsed data) of each event of a raw SSE body."""
    out = []
    for block in data.decode().split("\n\n"):
        if block.strip():
            lines = dict(line.split(": ", 1) for line in block.split("\n"))
            out.append((lines["event"], json.loads(lines["data"])))
    return out


# ---------------------------------------------------------------- answers


def test_create_whole(server):
    c = client(server)
    r = create(c, instructions="You are terse.", metadata={"run": "t1"})
    assert r.object == "response" and r.id.startswith("resp_") and r.metadata == {"run": "t1"}
    assert r.status in ("completed", "incomplete") and r.output_text
    assert len(r.output) == 1 and r.output[0].type == "message" and r.output[0].content[0].type == "output_text"
    assert 0 < r.usage.output_tokens <= N_GEN and r.usage.input_tokens > 0
    assert r.usage.input_tokens_details.cached_tokens <= r.usage.input_tokens
    if r.status == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens" and r.usage.output_tokens == N_GEN
    # one generation path: the chat completion of the same conversation says the same
    cc = c.chat.completions.create(model="lumen", max_tokens=N_GEN, temperature=0, messages=[
        {"role": "system", "content": "You are terse."}, {"role": "user", "content": ASK}])
    assert cc.choices[0].message.content == r.output_text
    assert cc.usage.prompt_tokens == r.usage.input_tokens
    # input as items (a developer message and a user message with parts) is the same prompt
    r2 = create(c, input=[{"role": "developer", "content": "You are terse."},
                          {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ASK}]}])
    assert r2.output_text == r.output_text
    # a short answer: completed, max_output_tokens honoured
    r3 = create(c, max_output_tokens=2)
    assert r3.status == "incomplete" and r3.usage.output_tokens == 2


def test_stream_equals_whole(server):
    c = client(server)
    whole = create(c)
    deltas, types = [], []
    with c.responses.stream(model="lumen", input=ASK, max_output_tokens=N_GEN, temperature=0) as s:
        for ev in s:
            types.append(ev.type)
            if ev.type == "response.output_text.delta":
                deltas.append(ev.delta)
            if ev.type in ("response.completed", "response.incomplete"):
                final = ev.response
    assert "".join(deltas) == whole.output_text == final.output_text
    assert final.status == whole.status and final.usage.output_tokens == whole.usage.output_tokens
    assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"], types
    # the raw event sequence: each event's type as its name, sequence_number 0, 1, 2, ...
    st, hd, data = server.request("POST", "/v1/responses", {"model": "lumen", "max_output_tokens": 4, "stream": True,
                                                            "input": ASK, "temperature": 0})
    assert st == 200 and hd["Content-Type"].startswith("text/event-stream")
    ev = sse_events(data)
    names = [n for n, _ in ev]
    assert [d["sequence_number"] for _, d in ev] == list(range(len(ev)))
    assert all(d["type"] == n for n, d in ev)
    assert names[:4] == types[:4] and set(names[4:-4]) == {"response.output_text.delta"}, names
    assert names[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.incomplete"], names
    done = ev[-1][1]["response"]
    assert done["status"] == "incomplete" and done["incomplete_details"] == {"reason": "max_output_tokens"}
    assert done["usage"]["output_tokens"] == 4 and done["output"][0]["content"][0]["text"] == ev[-4][1]["text"]


class Pick(BaseModel):
    color: Literal["red", "green", "blue"]
    bright: bool


def test_parse_json_schema(server):
    c = client(server)
    r = c.responses.parse(model="lumen", input="Pick a color.", text_format=Pick, max_output_tokens=48, temperature=0)
    assert r.status == "completed", r
    assert isinstance(r.output_parsed, Pick), r.output_text
    assert Pick.model_validate_json(r.output_text) == r.output_parsed
    # json_object: a JSON object (within the token budget, or cut there)
    st, _, j = server.post("/v1/responses", {"input": "A JSON object, please.", "max_output_tokens": 24,
                                             "temperature": 0, "text": {"format": {"type": "json_object"}}})
    assert st == 200 and j["output_text"].lstrip().startswith("{") and j["text"]["format"]["type"] == "json_object"


def test_function_call_round_trip(server):
    c = client(server)
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    kw = dict(input=ask, max_output_tokens=64, tools=[WEATHER, TIME],
              tool_choice={"type": "function", "name": "get_weather"})
    r = create(c, **kw)
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1 and r.status == "completed", r
    call = calls[0]
    assert call.name == "get_weather" and call.call_id.startswith("call_") and call.id.startswith("fc_")
    jsonschema.validate(json.loads(call.arguments), WEATHER["parameters"])
    # the same call streamed: one function_call item whose argument deltas join to the same text
    args = []
    with c.responses.stream(model="lumen", temperature=0, **kw) as s:
        for ev in s:
            if ev.type == "response.function_call_arguments.delta":
                args.append(ev.delta)
        final = s.get_final_response()
    scalls = [o for o in final.output if o.type == "function_call"]
    assert len(scalls) == 1 and scalls[0].arguments == "".join(args) == call.arguments
    # the output goes back; the answer is text
    follow = ask + [o.model_dump(exclude_none=True) for o in r.output] + [
        {"type": "function_call_output", "call_id": call.call_id, "output": "18 C, sunny"}]
    r2 = create(c, input=follow, tools=[WEATHER, TIME], tool_choice="none")
    assert [o.type for o in r2.output] == ["message"] and r2.output_text
    # required with parallel_tool_calls false: exactly one call, to some tool
    r3 = create(c, input=ask, max_output_tokens=64, tools=[WEATHER, TIME], tool_choice="required",
                parallel_tool_calls=False)
    calls = [o for o in r3.output if o.type == "function_call"]
    assert len(calls) == 1 and calls[0].name in ("get_weather", "get_time"), r3


def test_stateless_and_sdk_errors(server):
    c = client(server)
    with pytest.raises(openai.BadRequestError) as ei:
        create(c, previous_response_id="resp_1")
    assert ei.value.body["param"] == "previous_response_id" and ei.value.body["code"] == "unsupported"
    with pytest.raises(openai.BadRequestError, match="web_search"):
        create(c, tools=[{"type": "web_search"}])
    with pytest.raises(openai.NotFoundError):
        c.responses.retrieve("resp_1")
    # store, reasoning, include and truncation-free fields Codex sends: accepted
    r = create(c, store=False, reasoning={"effort": "low", "summary": "auto"},
               include=["reasoning.encrypted_content"], max_output_tokens=2)
    assert r.store is False and r.status == "incomplete"
    m = server.metrics()
    assert m.get('lumen_requests_total{route="/v1/responses",status="200"}', 0) >= 1
    assert m.get('lumen_requests_total{route="/v1/responses",status="400"}', 0) >= 1


# ---------------------------------------------------------------- malformed bodies: a 400 in OpenAI's shape

CALL = {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}
BAD = [
    ({}, "input"),
    ({"input": 5}, "input"),
    ({"input": []}, "input"),
    ({"input": [5]}, "input[0]"),
    ({"input": [{"role": "tool", "content": "x"}]}, "role"),
    ({"input": [{"role": "user", "content": 5}]}, "content"),
    ({"input": [{"role": "user"}]}, "content"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input_image"),
    ({"input": [{"role": "user", "content": [{"type": "input_text", "text": 1}]}]}, "text"),
    ({"input": [{"type": "video"}]}, "video"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "item_reference"),
    ({"input": [CALL, {"type": "function_call_output", "call_id": "call_2", "output": "x"}]}, "call_2"),
    ({"input": [dict(CALL, arguments={"city": "Paris"})]}, "arguments"),
    ({"input": [dict(CALL, name="bad name")]}, "name"),
    ({"input": "hi", "instructions": 5}, "instructions"),
    ({"input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": "hi", "max_output_tokens": "8"}, "max_output_tokens"),
    ({"input": "hi", "temperature": 3}, "temperature"),
    ({"input": "hi", "top_p": -1}, "top_p"),
    ({"input": "hi", "stream": "yes"}, "stream"),
    ({"input": "hi", "metadata": "x"}, "metadata"),
    ({"input": "hi", "metadata": {"k": 1}}, "metadata"),
    ({"input": "hi", "previous_response_id": "resp_1"}, "stateless"),
    ({"input": "hi", "conversation": "conv_1"}, "conversation"),
    ({"input": "hi", "background": True}, "background"),
    ({"input": "hi", "include": ["message.output_text.logprobs"]}, "logprobs"),
    ({"input": "hi", "reasoning": {"effort": "max"}}, "effort"),
    ({"input": "hi", "text": {"format": {"type": "yaml"}}}, "yaml"),
    ({"input": "hi", "text": {"format": {"type": "json_schema", "name": "x"}}}, "schema"),
    ({"input": "hi", "tools": [{"type": "file_search"}]}, "function tools"),
    ({"input": "hi", "tools": [{"type": "function"}]}, "name"),
    ({"input": "hi", "tools": [WEATHER, WEATHER]}, "two tools"),
    ({"input": "hi", "tools": [WEATHER], "tool_choice": {"type": "function", "name": "nope"}}, "nope"),
    ({"input": "hi", "tools": [WEATHER], "tool_choice": "any"}, "tool_choice"),
    ({"input": "hi", "tool_choice": "required"}, "tools"),
    ({"input": "hi", "tools": [WEATHER], "text": {"format": {"type": "json_object"}}}, "tools"),
    ({"input": "hi", "parallel_tool_calls": 1}, "parallel_tool_calls"),
    # a schema the compiler refuses: a 400 naming the tool
    ({"input": "hi", "tool_choice": "required", "tools": [
        {"type": "function", "name": "f", "parameters": {"type": "object", "not": {}}}]}, "tools[0].parameters"),
]


@pytest.mark.parametrize("body,word", BAD, ids=[str(i) for i in range(len(BAD))])
def test_malformed(server, body, word):
    st, _, r = server.post("/v1/responses", dict(body, model="lumen"))
    assert st == 400, r
    err = r["error"]
    assert set(r) == {"error"} and err["type"] == "invalid_request_error" and set(err) == {"message", "type", "param",
                                                                                            "code"}, r
    assert word in err["message"] or word == err["param"], r


def test_malformed_raw(server):
    st, _, r = server.post("/v1/responses", "{not json")
    assert st == 400 and r["error"]["code"] == "invalid_json"
    st, hd, r = server.request("GET", "/v1/responses")
    assert st == 405 and hd.get("Allow") == "POST"
    st, _, r = server.post("/v1/responses", {"input": "hi"}, key=None)
    assert st == 401 and r["error"]["type"] == "authentication_error"
