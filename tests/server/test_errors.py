"""Every error contract of lumen serve: OpenAI-shaped 400s for malformed or wrong-typed
bodies, context overflow before any stream event, 401 / 404 / 405 / 413, and odd bodies
that must never crash the server."""
import json
import socket

import openai
import pytest

from conftest import API_KEY, client


def assert_error(status, body, want_status, code=None, param=None):
    assert status == want_status, (status, body)
    assert isinstance(body, dict) and set(body) == {"error"}, body
    e = body["error"]
    assert {"message", "type", "code"} <= set(e), e
    assert isinstance(e["message"], str) and e["message"], e
    if code:
        assert e["code"] == code, e
    if param:
        assert e["param"] == param, e


@pytest.mark.parametrize("body,code,param", [
    ('{"prompt": "x", ', "invalid_json", None),
    ('[1, 2]', "invalid_type", "body"),
    ('"just a string"', "invalid_json", None),
    ('{}', "missing_field", "prompt"),
    ('{"prompt": 5}', "invalid_type", "prompt"),
    ('{"prompt": {"a": 1}}', "invalid_type", "prompt"),
    ('{"prompt": []}', "invalid_value", "prompt"),
    ('{"prompt": ["a", "b"]}', "unsupported", "prompt"),
    ('{"prompt": [1, "x"]}', "invalid_type", "prompt"),
    ('{"prompt": [1, -4]}', "invalid_value", "prompt"),
    ('{"prompt": [1, 99999999]}', "invalid_value", "prompt"),
    ('{"prompt": "x", "max_tokens": "ten"}', "invalid_type", "max_tokens"),
    ('{"prompt": "x", "max_tokens": 0}', "invalid_value", "max_tokens"),
    ('{"prompt": "x", "max_tokens": 2.5}', "invalid_type", "max_tokens"),
    ('{"prompt": "x", "temperature": "hot"}', "invalid_type", "temperature"),
    ('{"prompt": "x", "temperature": -1}', "invalid_value", "temperature"),
    ('{"prompt": "x", "top_p": 1.5}', "invalid_value", "top_p"),
    ('{"prompt": "x", "top_k": true}', "invalid_type", "top_k"),
    ('{"prompt": "x", "seed": "7"}', "invalid_type", "seed"),
    ('{"prompt": "x", "stop": 3}', "invalid_type", "stop"),
    ('{"prompt": "x", "stop": ["a", 3]}', "invalid_type", "stop"),
    ('{"prompt": "x", "presence_penalty": 3}', "invalid_value", "presence_penalty"),
    ('{"prompt": "x", "frequency_penalty": null, "logit_bias": []}', "invalid_type", "logit_bias"),
    ('{"prompt": "x", "logit_bias": {"abc": 1}}', "invalid_value", "logit_bias"),
    ('{"prompt": "x", "logit_bias": {"5": 500}}', "invalid_value", "logit_bias"),
    # one token under several spellings would add up beyond [-100, 100]: canonical ids only
    ('{"prompt": "x", "logit_bias": {"01": 1}}', "invalid_value", "logit_bias"),
    ('{"prompt": "x", "logit_bias": {"+1": 1}}', "invalid_value", "logit_bias"),
    ('{"prompt": "x", "logit_bias": {" 1": 1}}', "invalid_value", "logit_bias"),
    ('{"prompt": "x", "logit_bias": {"1 ": 1}}', "invalid_value", "logit_bias"),
    ('{"prompt": "x", "logit_bias": {"1e0": 1}}', "invalid_value", "logit_bias"),
    ('{"prompt": "x", "logit_bias": {"-0": 1}}', "invalid_value", "logit_bias"),
    ('{"prompt": "x", "logit_bias": {"1": 100, "1": 100}}', "invalid_json", None),
    ('{"prompt": "x", "logprobs": 21}', "invalid_value", "logprobs"),
    ('{"prompt": "x", "stream": "yes"}', "invalid_type", "stream"),
    ('{"prompt": "x", "stream_options": 1}', "invalid_type", "stream_options"),
    ('{"prompt": "x", "n": 2}', "unsupported", "n"),
    ('{"prompt": "x", "best_of": 3}', "unsupported", "best_of"),
    ('{"prompt": "x", "echo": true}', "unsupported", "echo"),
    ('{"prompt": "x", "model": 5}', "invalid_type", "model"),
    ('{"prompt": "x", "lookup": "yes"}', "invalid_type", "lookup"),
    ('{"prompt": "x", "draft_max": 0}', "invalid_value", "draft_max"),
    ('{"prompt": "x", "draft_max": 33}', "invalid_value", "draft_max"),
    ('{"prompt": "x", "draft_max": "4"}', "invalid_type", "draft_max"),
    ('{"prompt": "x", "max_tokens": 1e400}', "invalid_json", None),
    ('{"prompt": "x", "temperature": NaN}', "invalid_json", None),
    ('{"prompt": "\\u0000"}', "invalid_json", None),
])
def test_completions_400(server, body, code, param):
    st, _, b = server.post("/v1/completions", body)
    assert_error(st, b, 400, code, param)


@pytest.mark.parametrize("body,code,param", [
    ({}, "missing_field", "messages"),
    ({"messages": "hi"}, "invalid_type", "messages"),
    ({"messages": []}, "invalid_value", "messages"),
    ({"messages": [5]}, "invalid_type", "messages[0]"),
    ({"messages": [{"content": "hi"}]}, "missing_field", "messages[0].role"),
    ({"messages": [{"role": 1, "content": "hi"}]}, "invalid_type", "messages[0].role"),
    ({"messages": [{"role": "user", "content": "hi"}, {"role": "narrator", "content": "x"}]},
     "invalid_value", "messages[1].role"),
    ({"messages": [{"role": "", "content": "hi"}]}, "invalid_value", "messages[0].role"),
    ({"messages": [{"role": "user", "content": 5}]}, "invalid_type", "messages[0].content"),
    ({"messages": [{"role": "user"}]}, "missing_field", "messages[0].content"),
    ({"messages": [{"role": "system", "content": None}]}, "missing_field", "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "unsupported", "messages[0].content"),
    ({"messages": [{"role": "user", "content": "hi"}], "logprobs": 1}, "invalid_type", "logprobs"),
    ({"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 3}, "invalid_value", "top_logprobs"),
    ({"messages": [{"role": "user", "content": "hi"}], "n": 3}, "unsupported", "n"),
    ({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}, "missing_field",
     "tools[0].function"),
    ({"messages": [{"role": "user", "content": "hi"}], "functions": [{"name": "f"}]}, "unsupported", "functions"),
    ({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "xml"}},
     "invalid_value", "response_format"),
])
def test_chat_400(server, body, code, param):
    st, _, b = server.post("/v1/chat/completions", body)
    assert_error(st, b, 400, code, param)


def test_logit_bias_entry_cap(server):
    ok = {str(i): 1 for i in range(1024)}
    st, _, b = server.post("/v1/completions", {"prompt": "x", "max_tokens": 1, "logit_bias": ok})
    assert st == 200, b
    over = {str(i): 1 for i in range(1025)}
    st, _, b = server.post("/v1/completions", {"prompt": "x", "max_tokens": 1, "logit_bias": over})
    assert_error(st, b, 400, "invalid_value", "logit_bias")
    assert "at most 1024" in b["error"]["message"], b


def test_log_lines_escape_client_text(server):
    """A newline in the path (%0A) or in a field the error message quotes cannot forge a log
    line: control characters are written as \\xNN."""
    st, _, _ = server.request("GET", "/v1/nothing%0Alumen%20serve:%20forged-by-path")
    assert st == 404
    st, _, b = server.post("/v1/completions", '{"prompt": "x", "logit_bias": {"1\\nlumen serve: forged-by-key": 1}}')
    assert st == 400, b
    assert server.wait_for(lambda: "forged-by-key" in server.log(), 10)
    lines = server.log().splitlines()
    assert not [l for l in lines if l.startswith("lumen serve: forged")], lines[-5:]
    assert any("\\x0alumen serve: forged-by-path" in l for l in lines), lines[-5:]


def test_openai_client_sees_400(server):
    c = client(server)
    with pytest.raises(openai.BadRequestError) as ei:
        c.completions.create(model="lumen", prompt="x", n=2)
    assert "n must be 1" in str(ei.value)


def test_context_overflow_is_400_before_any_event(server):
    too_many = 20000  # the server was started with -c 16384
    for stream in (False, True):
        st, hd, b = server.post("/v1/completions", {"prompt": "hello", "max_tokens": too_many, "stream": stream})
        assert_error(st, b, 400, "context_length_exceeded")
        assert hd.get("Content-Type", "").startswith("application/json")
    long_prompt = "word " * 17000
    st, _, b = server.post("/v1/chat/completions",
                           {"messages": [{"role": "user", "content": long_prompt}], "stream": True})
    assert_error(st, b, 400, "context_length_exceeded")


def test_body_too_large_413(server):
    big = '{"prompt": "' + "a" * (1 << 20) + '"}'  # the server was started with --max-body 1 MiB
    st, _, b = server.post("/v1/completions", big)
    assert_error(st, b, 413, "request_too_large")
    # chunked upload without a Content-Length: refused at the end of the body
    s = socket.create_connection((server.host, server.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + API_KEY.encode() +
              b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"a" * 65536
    for _ in range(20):
        s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
    s.sendall(b"0\r\n\r\n")
    head = s.recv(4096).decode("latin-1")
    s.close()
    assert head.startswith("HTTP/1.1 413"), head[:200]
    # a client that waits for 100 Continue is answered before it sends the body
    s = socket.create_connection((server.host, server.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + API_KEY.encode() +
              b"\r\nContent-Type: application/json\r\nContent-Length: 5000000\r\nExpect: 100-continue\r\n\r\n")
    head = s.recv(4096).decode("latin-1")
    s.close()
    assert head.startswith("HTTP/1.1 413"), head[:200]


def test_auth(server):
    st, hd, b = server.post("/v1/completions", {"prompt": "x", "max_tokens": 1}, key=None)
    assert_error(st, b, 401, "invalid_api_key")
    assert hd.get("WWW-Authenticate") == "Bearer"
    st, _, b = server.post("/v1/completions", {"prompt": "x", "max_tokens": 1}, key="wrong")
    assert_error(st, b, 401, "invalid_api_key")
    for path in ("/v1/models", "/metrics"):
        st, _, b = server.request("GET", path, key=None)
        assert st == 401
    st, _, b = server.request("GET", "/health", key=None)  # /health stays open
    assert st == 200 and json.loads(b) == {"status": "ok"}
    st, hd, b = server.request("GET", "/", key=None)  # so does the page
    assert st == 200 and hd["Content-Type"].startswith("text/html") and b"<html" in b.lower()
    bad = openai.OpenAI(base_url=server.url + "/v1", api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()


def test_not_found_and_method(server):
    st, _, b = server.request("GET", "/v2/nothing")
    assert_error(st, json.loads(b), 404, "not_found")
    st, hd, b = server.request("GET", "/v1/completions")
    assert_error(st, json.loads(b), 405, "method_not_allowed")
    assert hd.get("Allow") == "POST"
    st, hd, b = server.request("POST", "/health", body="{}")
    assert st == 405


@pytest.mark.parametrize("body", [
    b"",
    b"\xff\xfe\x00garbage",
    b'{"prompt": "\xff\xfe"}',            # invalid UTF-8 inside a string
    b"[" * 100000,                        # deep nesting
    b'{"prompt": "x", "max_tokens": 99999999999999999999999}',
    b'{"prompt": "x", "logit_bias": {"1": "x"}}',
    b'{"messages": [{"role": "user", "content": [1, 2]}]}',
    b'{"prompt": "x"}' + b" " * 1000 + b"trailing",
    b'{"prompt": "x", "prompt": 7}',
    b"null",
])
def test_odd_bodies_never_crash(server, body):
    for path in ("/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"):
        st, _, b = server.request("POST", path, body=body)
        assert st == 400, (path, body[:40], st, b[:200])
        assert_error(st, json.loads(b), 400)
    st, _, _ = server.request("GET", "/health")
    assert st == 200


def test_tokenize_errors(server):
    st, _, b = server.post("/tokenize", {"text": "x"})
    assert_error(st, b, 400, "missing_field", "content")
    st, _, b = server.post("/detokenize", {"tokens": [1, "a"]})
    assert_error(st, b, 400, "invalid_type", "tokens")
    st, _, b = server.post("/detokenize", {"tokens": [1 << 40]})
    assert_error(st, b, 400, "invalid_value", "tokens")
