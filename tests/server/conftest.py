"""Fixtures for lumen serve's end-to-end tests: a live `lumen serve` on a free 127.0.0.1
port (--port 0, the port read from its "listening on" line), stopped with SIGTERM at the
end of the module; a clean exit (0, no sanitizer report) is part of every test module.

Env: LUMEN_BIN (the build's binary; ctest sets it), LUMEN_MODEL, LUMEN_TEST_QUICK=1 (the
sanitizer pass: fewer and shorter generations).
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("LUMEN_BIN") or os.path.join(ROOT, "build", "lumen")
MODEL = os.environ.get("LUMEN_MODEL") or os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf")
QUICK = os.environ.get("LUMEN_TEST_QUICK") == "1"
API_KEY = "test-key-123"
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "ThreadSanitizer", "SUMMARY: UndefinedBehaviorSanitizer")


class Server:
    """A `lumen serve` process; its stderr is collected line by line."""

    def __init__(self, *args, env=None, wait_ready=True, model=None):
        self.args = [BIN, "serve", "-m", model or MODEL, "--port", "0", "-t", "2", *args]
        e = dict(os.environ)
        e.pop("LUMEN_API_KEY", None)
        e.update(env or {})
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=e, text=True, errors="replace")
        self.lines = []
        self.cv = threading.Condition()
        self.url = None
        self.loading_url = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        if wait_ready:
            self.wait_ready()

    def _read(self):
        for line in self.proc.stderr:
            with self.cv:
                self.lines.append(line.rstrip("\n"))
                m = re.search(r"loading .* \((http://[^ ]+)/health", line)
                if m:
                    self.loading_url = m.group(1)
                m = re.search(r"lumen serve: listening on (http://\S+)", line)
                if m:
                    self.url = m.group(1)
                self.cv.notify_all()
        with self.cv:
            self.cv.notify_all()

    def wait_for(self, pred, timeout):
        with self.cv:
            ok = self.cv.wait_for(lambda: pred() or self.proc.poll() is not None, timeout=timeout)
        return ok and pred()

    def wait_ready(self, timeout=180):
        if not self.wait_for(lambda: self.url is not None, timeout):
            raise RuntimeError("lumen serve did not start:\n" + self.log())
        m = re.match(r"http://([^:]+):(\d+)", self.url)
        self.host, self.port = m.group(1), int(m.group(2))

    def log(self):
        with self.cv:
            return "\n".join(self.lines)

    def stop(self):
        """SIGTERM; the server must exit 0 with no sanitizer report."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("lumen serve did not stop within 120 s of SIGTERM:\n" + self.log()[-4000:])
        self.reader.join(timeout=10)
        text = self.log()
        bad = [m for m in SANITIZER_MARKS if m in text]
        assert rc == 0 and not bad, f"lumen serve exited {rc} {bad}:\n{text[-6000:]}"

    # ---- raw HTTP helpers (http.client: exact status, headers and bytes)
    def request(self, method, path, body=None, headers=None, key=API_KEY, timeout=300):
        h = {"Content-Type": "application/json"}
        if key:
            h["Authorization"] = "Bearer " + key
        h.update(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            return r.status, dict(r.getheaders()), data
        finally:
            c.close()

    def post(self, path, body, **kw):
        st, hd, data = self.request("POST", path, body, **kw)
        try:
            return st, hd, json.loads(data)
        except ValueError:
            return st, hd, data

    def metrics(self):
        st, _, data = self.request("GET", "/metrics")
        assert st == 200
        out = {}
        for line in data.decode().splitlines():
            if line.startswith("#") or not line.strip():
                continue
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
        return out

    def wait_metric(self, pred, timeout=30.0):
        """Polls /metrics until pred(metrics) holds; returns (metrics, seconds)."""
        t0 = time.monotonic()
        while True:
            try:
                m = self.metrics()
            except AssertionError:  # a 503 at a connection cap (tests that fill it)
                m = None
            if m is not None and pred(m):
                return m, time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise AssertionError(f"metrics condition not met in {timeout} s: " +
                                     json.dumps({k: v for k, v in (m or {}).items() if "bucket" not in k}))
            time.sleep(0.005)

    def open_stream(self, body, rcvbuf=None, path="/v1/completions"):
        """Sends a request on a raw socket and returns it unread (disconnect tests)."""
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.connect((self.host, self.port))
        data = json.dumps(body).encode()
        s.sendall((f"POST {path} HTTP/1.1\r\n"
                   f"Host: {self.host}\r\nAuthorization: Bearer {API_KEY}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n").encode() + data)
        return s


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long tests (tests/server/test_server_slow.sh; ctest -L slow)")


def client(server):
    import openai
    return openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0, timeout=600)


@pytest.fixture(scope="module")
def server():
    """The shared server: 16 parallel requests (batch invariance among 15 others), an API
    key, a 1 MiB body limit."""
    s = Server("--parallel", "16", "--api-key", API_KEY, "--max-body", "1048576", "-c", "16384")
    yield s
    s.stop()
