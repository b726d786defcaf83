"""The operator's drain for a balancer (deploy/haproxy/): SIGUSR1 turns /health and new requests
into 503 `draining` (with Connection: close) while running requests finish untouched and
/metrics keeps counting them; SIGUSR2 takes work again; nothing stops, and SIGTERM still stops
a drained server cleanly. A SIGUSR1 during the model load holds once the model is ready."""
import json
import signal
import threading
import time

from conftest import API_KEY, Server


def _stream(s, out):
    st, hd, data = s.request("POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 400,
                                                         "stream": True, "ignore_eos": True,
                                                         "temperature": 0})
    out["status"] = st
    out["events"] = [e for e in data.decode().split("\n\n") if e.startswith("data: ")]


def test_sigusr1_drains_sigusr2_resumes():
    s = Server("--parallel", "2", "--api-key", API_KEY)
    try:
        out = {}
        t = threading.Thread(target=_stream, args=(s, out), daemon=True)
        t.start()
        s.wait_metric(lambda m: m["lumen_requests_running"] == 1)
        s.proc.send_signal(signal.SIGUSR1)
        assert s.wait_for(lambda: any("SIGUSR1: draining" in ln for ln in s.lines), 10), s.log()
        st, hd, body = s.request("GET", "/health", key=None)
        assert st == 503 and json.loads(body)["error"]["code"] == "draining"
        st, hd, body = s.post("/v1/completions", {"prompt": "hi", "max_tokens": 2})
        assert st == 503 and body["error"]["code"] == "draining", body
        assert hd.get("Connection", "").lower() == "close"
        # the running request is still counted and finishes whole
        assert s.metrics()["lumen_requests_running"] == 1
        t.join(120)
        assert out["status"] == 200 and out["events"][-1] == "data: [DONE]", out
        assert not any('"error"' in e for e in out["events"])
        s.proc.send_signal(signal.SIGUSR2)
        assert s.wait_for(lambda: any("SIGUSR2: serving again" in ln for ln in s.lines), 10), s.log()
        assert s.request("GET", "/health", key=None)[0] == 200
        st, _, body = s.post("/v1/completions", {"prompt": "hi", "max_tokens": 2})
        assert st == 200, body
        # held again, then SIGTERM: the shutdown drain still runs and exits 0
        s.proc.send_signal(signal.SIGUSR1)
        assert s.wait_for(lambda: sum("SIGUSR1: draining" in ln for ln in s.lines) == 2, 10), s.log()
    finally:
        s.stop()


def test_sigusr1_while_loading_holds_once_ready():
    s = Server("--api-key", API_KEY, env={"LUMEN_SERVE_LOAD_DELAY_MS": "1500"}, wait_ready=False)
    try:
        assert s.wait_for(lambda: s.loading_url is not None, 60), s.log()
        s.proc.send_signal(signal.SIGUSR1)
        s.wait_ready()
        t0 = time.monotonic()
        st, _, body = s.request("GET", "/health", key=None)
        assert st == 503 and json.loads(body)["error"]["code"] == "draining", (st, body)
        s.proc.send_signal(signal.SIGUSR2)
        while s.request("GET", "/health", key=None)[0] != 200:
            assert time.monotonic() - t0 < 10, s.log()
            time.sleep(0.05)
    finally:
        s.stop()
