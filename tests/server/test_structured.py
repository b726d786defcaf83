"""Structured output and tool calls through the official `openai` client: response_format
json_schema / json_object (answers parse and validate with `jsonschema`), the SDK's
beta.chat.completions.parse with a pydantic model, llama-server's json_schema and grammar
fields, tools with tool_choice required / named (always a valid call: the default model is a
base model, the grammar makes it valid), calls whole and streamed equal, a full round trip in
each family's format, and a 400 for every invalid request."""
import json

import jsonschema
import openai
import pydantic
import pytest

from conftest import QUICK, client

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather now in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20},
                           "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The time now in a timezone",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string", "maxLength": 12}},
                       "required": ["tz"], "additionalProperties": False},
    },
}
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}
ASK = [{"role": "user", "content": "What is the weather in Paris? Use the tool."}]


@pytest.fixture(scope="module")
def grammar(server):
    """The structured-output tests: the server answers a json_object request."""
    st, _, body = server.post("/v1/chat/completions", {
        "messages": ASK, "max_tokens": 1, "response_format": {"type": "json_object"}})
    assert st == 200, body
    return True


def chat(c, **kw):
    kw.setdefault("messages", ASK)
    kw.setdefault("max_tokens", 96)
    kw.setdefault("temperature", 0)
    return c.chat.completions.create(model="lumen", **kw)


def stream_chat(c, **kw):
    """(content, calls [{id, name, arguments}], finish reasons, chunks) of a streamed answer."""
    kw.setdefault("messages", ASK)
    kw.setdefault("max_tokens", 96)
    kw.setdefault("temperature", 0)
    content, calls, finishes, chunks = None, {}, [], 0
    for ch in c.chat.completions.create(model="lumen", stream=True, **kw):
        chunks += 1
        for choice in ch.choices:
            d = choice.delta
            if d.content:
                content = (content or "") + d.content
            for tc in d.tool_calls or []:
                if tc.index not in calls:  # the first chunk of a call: id, type and name
                    assert tc.id and tc.type == "function" and tc.function.name
                    calls[tc.index] = {"id": tc.id, "name": tc.function.name, "arguments": ""}
                else:
                    assert tc.id is None and tc.function.name is None
                calls[tc.index]["arguments"] += tc.function.arguments or ""
            if choice.finish_reason is not None:
                finishes.append(choice.finish_reason)
    return content, [calls[k] for k in sorted(calls)], finishes, chunks


def check_call(call, tool):
    assert call.function.name == tool["function"]["name"]
    assert call.type == "function" and call.id.startswith("call_")
    args = json.loads(call.function.arguments)  # a JSON string, as OpenAI sends it
    jsonschema.validate(args, tool["function"]["parameters"])
    return args


# ---------------------------------------------------------------- 400s (no grammar needed)

BAD = [
    ({"response_format": {"type": "xml"}}, "response_format", "'xml'"),
    ({"response_format": {"type": "json_schema"}}, "response_format", "json_schema"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": 3}}},
     "response_format.json_schema.schema", "schema"),
    ({"response_format": "json"}, "response_format", "type"),
    ({"json_schema": {"type": "object"}, "grammar": "root ::= \"a\""}, "grammar", "give one"),
    ({"response_format": {"type": "json_object"}, "json_schema": {}}, "json_schema", "give one"),
    ({"grammar": 5}, "grammar", "GBNF"),
    ({"tools": {"type": "function"}}, "tools", "array"),
    ({"tools": [{"type": "function"}]}, "tools[0].function", "required"),
    ({"tools": [{"type": "retrieval", "function": {"name": "f"}}]}, "tools[0]", "'function'"),
    ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools[0].function.name", "letters"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]},
     "tools[0].function.parameters", "JSON Schema"),
    ({"tools": [WEATHER, WEATHER]}, "tools[1].function.name", "two tools"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice", "'nope'"),
    ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice", "sometimes"),
    ({"tool_choice": "required"}, "tool_choice", "empty"),
    ({"tools": [WEATHER], "parallel_tool_calls": "yes"}, "parallel_tool_calls", "boolean"),
    ({"tools": [WEATHER], "response_format": {"type": "json_object"}}, "response_format", "together"),
    ({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}]},
     "messages[1].tool_calls[0]", "function"),
    ({"messages": [{"role": "user", "content": "x", "tool_calls": []}]}, "messages[0].tool_calls", "assistant"),
    ({"tools": [{"type": "function", "function": {"name": "f", "description": "a <end_of_turn> b"}}]}, "messages",
     "special token"),
]


@pytest.mark.parametrize("extra,param,words", BAD, ids=[str(i) for i in range(len(BAD))])
def test_invalid_requests(server, extra, param, words):
    body = {"messages": ASK, "max_tokens": 4}
    body.update(extra)
    st, _, r = server.post("/v1/chat/completions", body)
    assert st == 400, r
    assert r["error"]["param"] == param and words in r["error"]["message"], r


def test_invalid_completions(server):
    st, _, r = server.post("/v1/completions", {"prompt": "x", "tools": [WEATHER]})
    assert st == 400 and r["error"]["param"] == "tools"
    st, _, r = server.post("/v1/completions", {"prompt": "x", "json_schema": {}, "grammar": "root ::= \"a\""})
    assert st == 400 and r["error"]["param"] == "grammar"
    c = client(server)
    with pytest.raises(openai.BadRequestError):
        c.completions.create(model="lumen", prompt="x", max_tokens=2, extra_body={"response_format": {"type": "yaml"}})


def test_tool_choice_none_and_history(server):
    """tool_choice none: no tools in the prompt, a plain answer; a history with calls and
    results is rendered and answered."""
    c = client(server)
    r = chat(c, tools=[WEATHER], tool_choice="none", max_tokens=8)
    assert r.choices[0].message.tool_calls is None and r.choices[0].finish_reason in ("stop", "length")
    msgs = ASK + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                              "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
    ]
    r = chat(c, messages=msgs, tools=[WEATHER], tool_choice="none", max_tokens=8)
    assert r.choices[0].message.role == "assistant" and r.usage.prompt_tokens > 40
    # arguments cut short by max_tokens come back as they were: rendered as written
    msgs[1]["tool_calls"][0]["function"]["arguments"] = "{\"city\": \"Par"
    r = chat(c, messages=msgs, max_tokens=4)
    assert r.choices[0].message.role == "assistant"


# ---------------------------------------------------------------- with the grammar engine

@pytest.mark.parametrize("temperature", [0, 0.9])
def test_json_schema(server, grammar, temperature):
    c = client(server)
    for seed in range(1 if QUICK else 3):
        r = chat(c, messages=[{"role": "user", "content": "Describe a person as JSON."}], temperature=temperature,
                 seed=seed, max_tokens=160,
                 response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}})
        assert r.choices[0].finish_reason == "stop", r
        jsonschema.validate(json.loads(r.choices[0].message.content), PERSON)


def test_json_object(server, grammar):
    c = client(server)
    r = chat(c, response_format={"type": "json_object"}, max_tokens=200, temperature=0.7, seed=3)
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(r.choices[0].message.content), dict)
    else:
        assert r.choices[0].finish_reason == "length" and r.choices[0].message.content.startswith("{")


class Person(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=24)
    age: int = pydantic.Field(ge=0, le=130)
    retired: bool


def test_sdk_parse(server, grammar):
    c = client(server)
    r = c.beta.chat.completions.parse(model="lumen", messages=[{"role": "user", "content": "A person, as JSON."}],
                                      response_format=Person, max_tokens=128, temperature=0)
    p = r.choices[0].message.parsed
    assert isinstance(p, Person) and 0 <= p.age <= 130


def test_llama_server_fields(server, grammar):
    """json_schema and grammar on /v1/completions and /v1/chat/completions."""
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3, "maximum": 9}},
              "required": ["n"], "additionalProperties": False}
    st, _, r = server.post("/v1/completions", {"prompt": "A number:", "json_schema": schema, "max_tokens": 32,
                                               "temperature": 0})
    assert st == 200, r
    jsonschema.validate(json.loads(r["choices"][0]["text"]), schema)
    gbnf = 'root ::= ("yes" | "no") " " [0-9]'
    for path, body in (("/v1/completions", {"prompt": "Answer:"}), ("/v1/chat/completions", {"messages": ASK})):
        body.update({"grammar": gbnf, "max_tokens": 16, "temperature": 0.8, "seed": 5})
        st, _, r = server.post(path, body)
        assert st == 200, r
        ch = r["choices"][0]
        text = ch["text"] if "text" in ch else ch["message"]["content"]
        assert text.split(" ")[0] in ("yes", "no") and len(text) in (5, 6) and text[-1].isdigit(), text


def test_schema_refused(server, grammar):
    for schema, word in (({"type": "object", "patternProperties": {"a": {}}}, "patternProperties"),
                         ({"type": "string", "format": "email"}, "email")):
        st, _, r = server.post("/v1/chat/completions", {"messages": ASK, "response_format": {
            "type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}}})
        assert st == 400 and word in r["error"]["message"], r
    st, _, r = server.post("/v1/chat/completions", {"messages": ASK, "tools": [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "not": {}}}}], "tool_choice": "required"})
    assert st == 400 and "'not'" in r["error"]["message"] and r["error"]["param"] == "tools[0].function.parameters", r
    st, _, r = server.post("/v1/chat/completions", {"messages": ASK, "grammar": "root ::= \"a\" undefined-rule"})
    assert st == 400 and r["error"]["code"] == "invalid_grammar" and r["error"]["param"] == "grammar", r
    assert "undefined-rule" in r["error"]["message"], r


@pytest.mark.parametrize("choice", ["required", "named"])
def test_tool_choice_forces_call(server, grammar, choice):
    c = client(server)
    tc = "required" if choice == "required" else {"type": "function", "function": {"name": "get_time"}}
    for seed in range(1 if QUICK else 3):
        r = chat(c, tools=[WEATHER, TIME], tool_choice=tc, temperature=0 if seed == 0 else 1.0, seed=seed,
                 parallel_tool_calls=False)
        ch = r.choices[0]
        assert ch.finish_reason == "tool_calls", r
        assert ch.message.content is None and len(ch.message.tool_calls) == 1
        call = ch.message.tool_calls[0]
        tool = {"get_weather": WEATHER, "get_time": TIME}[call.function.name]
        if choice == "named":
            assert call.function.name == "get_time"
        check_call(call, tool)


def test_named_is_one_call(server, grammar):
    """A named function gives exactly one call even with parallel_tool_calls left at its
    default (true), as OpenAI and vLLM do (the base model went on calling until max_tokens)."""
    c = client(server)
    r = chat(c, tools=[WEATHER, TIME], tool_choice={"type": "function", "function": {"name": "get_time"}}, max_tokens=120)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls" and len(ch.message.tool_calls) == 1, r
    assert ch.message.tool_calls[0].function.name == "get_time"


def test_parallel_calls(server, grammar):
    """parallel_tool_calls (the default): one call or more, each to a tool with valid arguments
    (the base model goes on calling until max_tokens: the last call may be cut)."""
    c = client(server)
    r = chat(c, tools=[WEATHER, TIME], tool_choice="required", max_tokens=120)
    ch = r.choices[0]
    assert ch.finish_reason in ("tool_calls", "length") and ch.message.tool_calls
    ids = [t.id for t in ch.message.tool_calls]
    assert len(set(ids)) == len(ids)
    whole = ch.message.tool_calls if ch.finish_reason == "tool_calls" else ch.message.tool_calls[:-1]
    for call in whole:
        check_call(call, {"get_weather": WEATHER, "get_time": TIME}[call.function.name])


def test_stream_equals_whole(server, grammar):
    c = client(server)
    for tc in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        whole = chat(c, tools=[WEATHER, TIME], tool_choice=tc, seed=1, parallel_tool_calls=False)
        content, calls, finishes, chunks = stream_chat(c, tools=[WEATHER, TIME], tool_choice=tc, seed=1,
                                                       parallel_tool_calls=False)
        w = whole.choices[0].message
        assert finishes == ["tool_calls"] and whole.choices[0].finish_reason == "tool_calls"
        assert content is None and w.content is None
        assert [(k["name"], k["arguments"]) for k in calls] == [(t.function.name, t.function.arguments)
                                                                  for t in w.tool_calls]
        assert chunks >= 3  # the call's first chunk, its arguments in pieces, the closing chunk


def test_round_trip(server, grammar):
    """A call, its result fed back as a tool message, then an answer (tool_choice auto)."""
    c = client(server)
    r = chat(c, tools=[WEATHER], tool_choice="required", parallel_tool_calls=False)
    call = r.choices[0].message.tool_calls[0]
    args = check_call(call, WEATHER)
    msgs = ASK + [r.choices[0].message.model_dump(exclude_none=True),
                  {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"city": args["city"], "temp": 21})}]
    r2 = chat(c, messages=msgs, tools=[WEATHER], max_tokens=24)
    ch = r2.choices[0]
    assert ch.finish_reason in ("stop", "length", "tool_calls")
    assert ch.message.content is not None or ch.message.tool_calls
    assert r2.usage.prompt_tokens > r.usage.prompt_tokens


def test_length_cuts_structured(server, grammar):
    c = client(server)
    r = chat(c, messages=[{"role": "user", "content": "A person."}], max_tokens=3,
             response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}})
    assert r.choices[0].finish_reason == "length" and r.choices[0].message.content.startswith("{")
    r = chat(c, tools=[WEATHER], tool_choice="required", max_tokens=6)
    assert r.choices[0].finish_reason == "length"  # the arguments are incomplete (documented)


# ---------------------------------------------------------------- the other families' formats

@pytest.fixture(scope="module", params=["chatml", "llama3"])
def fmt_server(request):
    """The default model with the ChatML (Qwen's tool format) or Llama 3 template."""
    from conftest import API_KEY, Server
    s = Server("--api-key", API_KEY, "--chat-template", request.param, "--parallel", "4")
    yield s
    s.stop()


def test_formats_forced_calls(fmt_server):
    c = client(fmt_server)
    for tc in ("required", {"type": "function", "function": {"name": "get_time"}}):
        whole = chat(c, tools=[WEATHER, TIME], tool_choice=tc, parallel_tool_calls=False)
        ch = whole.choices[0]
        assert ch.finish_reason == "tool_calls" and ch.message.content is None, whole
        call = ch.message.tool_calls[0]
        check_call(call, {"get_weather": WEATHER, "get_time": TIME}[call.function.name])
        content, calls, finishes, _ = stream_chat(c, tools=[WEATHER, TIME], tool_choice=tc, parallel_tool_calls=False)
        assert finishes == ["tool_calls"] and content is None
        assert [(k["name"], k["arguments"]) for k in calls] == [(call.function.name, call.function.arguments)]
    # the round trip renders the call and its result in the family's format
    msgs = ASK + [ch.message.model_dump(exclude_none=True),
                  {"role": "tool", "tool_call_id": call.id, "content": "{\"temp\": 21}"}]
    r = chat(c, messages=msgs, tools=[WEATHER, TIME], max_tokens=16)
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
