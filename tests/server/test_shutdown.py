"""Stopping lumen serve: SIGTERM drains (no new work, /health 503, running requests finish
within --shutdown-grace, then the rest is cancelled: every stream ends with an error event
and [DONE], whole answers with a 503 unavailable_error), exit 0 within the grace plus a
second; a second signal exits at once; a signal during the model load is honoured."""
import json
import re
import signal
import socket
import threading
import time

from conftest import API_KEY, Server


def read_sse(sock, out):
    """Reads a streamed answer to its end (EOF); out["events"]: the data lines in order."""
    buf = b""
    sock.settimeout(60)
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
    except OSError as e:
        out["error"] = repr(e)
    head, _, body = buf.partition(b"\r\n\r\n")
    out["status"] = head.split(b" ")[1].decode() if head else None
    out["events"] = [m.decode() for m in re.findall(rb"data: (.*?)\n\n", body, re.S)]


def start_streams(s, n, max_tokens):
    socks, outs, threads = [], [], []
    for i in range(n):
        sk = s.open_stream({"prompt": f"Story number {i}:", "max_tokens": max_tokens, "stream": True,
                            "ignore_eos": True, "temperature": 0})
        out = {}
        t = threading.Thread(target=read_sse, args=(sk, out), daemon=True)
        t.start()
        socks.append(sk)
        outs.append(out)
        threads.append(t)
    return socks, outs, threads


def wait_exit(s, timeout):
    t0 = time.monotonic()
    rc = s.proc.wait(timeout=timeout)
    s.reader.join(timeout=10)
    return rc, time.monotonic() - t0


def test_sigterm_drains_then_cancels_streams():
    grace = 3
    s = Server("--parallel", "8", "--api-key", API_KEY, "-c", "16384", "--shutdown-grace", str(grace))
    socks, outs, threads = start_streams(s, 8, 1500)
    try:
        s.wait_metric(lambda m: m["lumen_requests_running"] == 8)
        time.sleep(0.2)
        t0 = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)
        assert s.wait_for(lambda: "draining (8 requests running" in s.log(), 10), s.log()[-2000:]
        # no new work while draining: /health and new requests get 503
        st, hd, b = s.request("GET", "/health")
        assert st == 503 and json.loads(b)["error"]["code"] == "shutting_down", (st, b)
        assert hd.get("Connection") == "close"
        st, _, b = s.post("/v1/completions", {"prompt": "x", "max_tokens": 1})
        assert st == 503 and b["error"]["type"] == "unavailable_error", (st, b)
        rc = s.proc.wait(timeout=grace + 30)
        dt = time.monotonic() - t0
        for t in threads:
            t.join(timeout=30)
    finally:
        for sk in socks:
            sk.close()
    s.reader.join(timeout=10)
    assert rc == 0, s.log()[-3000:]
    print(f"SIGTERM -> exit: {dt:.2f} s (grace {grace} s)")
    assert dt < grace + 2.5, dt  # the grace, a second to write the ends, and the machine's slack
    for out in outs:
        ev = out["events"]
        assert out["status"] == "200" and ev[-1] == "[DONE]", out
        err = json.loads(ev[-2])["error"]
        assert err["type"] == "unavailable_error" and err["code"] == "shutting_down", err
        assert len(ev) > 3  # tokens came before the cut
    assert "the grace ran out: cancelling 8 requests" in s.log()


def test_sigterm_lets_running_requests_finish():
    """Requests that end within the grace end normally: the whole answer and the stream."""
    s = Server("--parallel", "4", "--api-key", API_KEY, "--shutdown-grace", "60")
    socks, outs, threads = start_streams(s, 1, 40)
    whole = {}

    def run_whole():
        whole["r"] = s.post("/v1/completions", {"prompt": "Hello", "max_tokens": 40, "ignore_eos": True})

    tw = threading.Thread(target=run_whole)
    tw.start()
    try:
        s.wait_metric(lambda m: m["lumen_requests_running"] == 2)
        s.proc.send_signal(signal.SIGTERM)
        rc, dt = wait_exit(s, 60)
        tw.join(timeout=30)
        threads[0].join(timeout=30)
    finally:
        socks[0].close()
    assert rc == 0 and dt < 30, (rc, dt)
    st, _, b = whole["r"]
    assert st == 200 and b["usage"]["completion_tokens"] == 40, (st, b)
    ev = outs[0]["events"]
    assert ev[-1] == "[DONE]" and json.loads(ev[-2])["choices"][0]["finish_reason"] == "length", ev[-3:]


def test_whole_answer_cancelled_at_shutdown_is_503_unavailable():
    s = Server("--parallel", "2", "--api-key", API_KEY, "--shutdown-grace", "0")
    box = {}

    def run():
        box["r"] = s.post("/v1/completions", {"prompt": "Hello", "max_tokens": 3000, "ignore_eos": True})

    t = threading.Thread(target=run)
    t.start()
    s.wait_metric(lambda m: m["lumen_requests_running"] == 1)
    s.proc.send_signal(signal.SIGTERM)
    rc, _ = wait_exit(s, 30)
    t.join(timeout=30)
    assert rc == 0
    st, _, b = box["r"]
    assert st == 503 and b["error"]["type"] == "unavailable_error" and b["error"]["code"] == "shutting_down", b


def test_second_signal_exits_at_once():
    s = Server("--parallel", "2", "--api-key", API_KEY, "--shutdown-grace", "600")
    socks, outs, threads = start_streams(s, 1, 3000)
    try:
        s.wait_metric(lambda m: m["lumen_requests_running"] == 1)
        s.proc.send_signal(signal.SIGTERM)
        assert s.wait_for(lambda: "draining" in s.log(), 10)
        s.proc.send_signal(signal.SIGINT)
        rc, dt = wait_exit(s, 30)
    finally:
        socks[0].close()
    assert rc == 128 + signal.SIGINT and dt < 5, (rc, dt)
    assert "SIGINT again: exiting now" in s.log()


def test_signal_during_load_is_honoured():
    s = Server(env={"LUMEN_SERVE_LOAD_DELAY_MS": "20000"}, wait_ready=False)
    assert s.wait_for(lambda: s.loading_url is not None, 60), s.log()
    t0 = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    rc = s.proc.wait(timeout=60)
    dt = time.monotonic() - t0
    s.reader.join(timeout=10)
    assert rc == 0 and dt < 5, (rc, dt, s.log())
    assert "SIGTERM while loading: stopped" in s.log()
