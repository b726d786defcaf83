"""What a request may cost lumen serve before the queue's gate: bodies up to a limit derived
from the context, JSON bounded in values and depth before a tree is built (an unknown field
of a million `{}` is refused without parsing it), and parsing, templating and tokenizing
only for the --parallel + --queue requests the server holds (/tokenize and /detokenize
included)."""
import concurrent.futures as cf
import json
import socket
import time

import pytest

from conftest import API_KEY, Server


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def post_raw(s, path, body, timeout=120):
    """POST a bytes body on a raw socket; returns (status, body)."""
    sk = socket.create_connection((s.host, s.port), timeout=timeout)
    try:
        sk.sendall((f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {API_KEY}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                    f"Connection: close\r\n\r\n").encode() + body)
        data = b""
        while True:
            chunk = sk.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        sk.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), rest


@pytest.fixture(scope="module")
def dflt():
    """The default limits (context 8192 tokens: a 1 MiB body)."""
    s = Server("--api-key", API_KEY)
    yield s
    s.stop()


def adversarial(size):
    """A prompt and an unknown field holding `{}` up to size bytes."""
    head, tail = b'{"prompt": "Hello", "max_tokens": 1, "junk": [', b"]}"
    n = (size - len(head) - len(tail)) // 3
    return head + b"{}," * (n - 1) + b"{}" + tail


def test_adversarial_bodies_cost_no_tree(dflt):
    """8 bodies at the body limit, each a million-ish `{}`, at once: refused by the value
    count before jansson builds a tree; the server's RSS high-water mark barely moves (a
    tree of them costs ~25 MB per body)."""
    body = adversarial(1 << 20)
    assert len(body) <= 1 << 20
    hwm0 = vm_hwm_kib(dflt.proc.pid)
    with cf.ThreadPoolExecutor(8) as ex:
        got = list(ex.map(lambda _: post_raw(dflt, "/v1/completions", body), range(8)))
    for st, b in got:
        assert st == 413 and json.loads(b)["error"]["code"] == "request_too_large", (st, b[:200])
        assert "values" in json.loads(b)["error"]["message"]
    grew = vm_hwm_kib(dflt.proc.pid) - hwm0
    assert grew < 48 * 1024, f"VmHWM grew {grew} KiB"
    # one byte past the limit: 413 by Content-Length
    st, b = post_raw(dflt, "/v1/completions", adversarial((1 << 20) + 3))
    assert st == 413, (st, b[:200])


def test_json_bounds(dflt):
    many = b'{"prompt": "Hi", "max_tokens": 1, "junk": [' + b",".join([b"1"] * 90000) + b"]}"
    st, b = post_raw(dflt, "/v1/completions", many)
    assert st == 413 and "values" in json.loads(b)["error"]["message"], (st, b[:200])
    deep = b'{"prompt": "Hi", "junk": ' + b"[" * 65 + b"]" * 65 + b"}"
    st, b = post_raw(dflt, "/v1/completions", deep)
    assert st == 400 and "deeper than 64" in json.loads(b)["error"]["message"], (st, b[:200])
    ok = b'{"prompt": "Hi", "max_tokens": 1, "junk": ' + b"[" * 60 + b"]" * 60 + b"}"
    st, b = post_raw(dflt, "/v1/completions", ok)
    assert st == 200, (st, b[:200])
    # the same bounds on /tokenize and /detokenize
    st, b = post_raw(dflt, "/detokenize", b'{"tokens": [' + b",".join([b"1"] * 90000) + b"]}")
    assert st == 413, (st, b[:200])
    st, b = post_raw(dflt, "/tokenize", b'{"content": "x", "junk": ' + b"[" * 65 + b"]" * 65 + b"}")
    assert st == 400, (st, b[:200])


def test_body_limit_follows_the_context():
    """--max-body defaults to 64 bytes per token of a request's context, at least 1 MiB."""
    text = b'{"prompt": "' + b"word " * 300000 + b'", "max_tokens": 1}'  # 1.5 MB, ~300k tokens
    s = Server("--api-key", API_KEY, "-c", "32768")  # 2 MiB
    try:
        st, b = post_raw(s, "/v1/completions", text)
        assert st == 400 and json.loads(b)["error"]["code"] == "context_length_exceeded", (st, b[:200])
    finally:
        s.stop()
    s = Server("--api-key", API_KEY)  # context 8192: 1 MiB
    try:
        st, b = post_raw(s, "/v1/completions", text)
        assert st == 413, (st, b[:200])
    finally:
        s.stop()


def test_tokenize_behind_the_gate():
    """/tokenize and /detokenize take a place among --parallel + --queue like a generation."""
    s = Server("--parallel", "1", "--queue", "1", "--api-key", API_KEY)
    try:
        held = [s.open_stream({"prompt": "Once upon a time", "max_tokens": 2000, "stream": True,
                               "ignore_eos": True}) for _ in range(2)]
        try:
            s.wait_metric(lambda m: m["lumen_requests_running"] == 1 and m["lumen_requests_waiting"] == 1)
            for path, body in (("/tokenize", {"content": "hi"}), ("/detokenize", {"tokens": [1, 2]}),
                               ("/v1/completions", {"prompt": "x", "max_tokens": 1})):
                st, hd, b = s.post(path, body)
                assert st == 429 and hd.get("Retry-After") == "1" and b["error"]["code"] == "queue_full", (path, st, b)
        finally:
            for h in held:
                h.close()
        s.wait_metric(lambda m: m["lumen_requests_running"] == 0 and m["lumen_requests_waiting"] == 0)
        deadline = time.monotonic() + 30
        while True:  # the places come back once the closed connections are complete
            st, _, b = s.post("/tokenize", {"content": "hi"})
            if st == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert st == 200, b
    finally:
        s.stop()
