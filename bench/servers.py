#!/usr/bin/env python3
"""Start and stop the HTTP servers that bench/serve_load.py and the server tests talk to: `lumen
serve` and llama.cpp's llama-server, on a free loopback port (--port 0; each prints the address it
listens on), each in its own session so that only what we started is ever stopped.

    from servers import Server, lumen_serve_argv, llama_server_argv
    with Server("lumen", lumen_serve_argv("build/lumen", model, threads=2, parallel=4)) as s:
        print(s.url, s.rss_kib())

The stderr of each server goes to a log file (Server.log_path); Server.sanitizer_report() finds
AddressSanitizer / LeakSanitizer / UBSan reports in it.
"""
import atexit
import ctypes
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = ROOT / "models" / "gemma-3-270m-q4_k_m.gguf"

# `lumen serve: listening on http://127.0.0.1:PORT`, llama-server: `... listening on http://...`
LISTEN_RE = re.compile(r"listening on (http://[^\s/]+)")
SANITIZER_RE = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer|ThreadSanitizer)|runtime error:|"
                          r"SUMMARY: (AddressSanitizer|UndefinedBehaviorSanitizer|LeakSanitizer)")


def default_model() -> Path:
    env = os.environ.get("LUMEN_MODEL")
    return Path(env) if env else DEFAULT_MODEL


def is_asan_binary(path) -> bool:
    """True when `path` was linked with AddressSanitizer (its symbols name __asan_ functions)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return False
    return b"__asan_init" in data or b"__asan_report_" in data


def lumen_serve_argv(binary, model=None, threads=2, parallel=None, ctx=None, queue=None,
                     host="127.0.0.1", extra=()):
    """argv of `lumen serve` on a free port (flag names as in `lumen serve --help`)."""
    argv = [str(binary), "serve", "-m", str(model or default_model()), "--host", host,
            "--port", "0", "-t", str(threads)]
    if parallel is not None:
        argv += ["--parallel", str(parallel)]
    if ctx is not None:
        argv += ["--ctx-size", str(ctx)]
    if queue is not None:
        argv += ["--queue", str(queue)]
    return argv + [str(a) for a in extra]


def llama_server_argv(exe, model=None, threads=2, parallel=4, ctx=None, host="127.0.0.1",
                      static_path=None, extra=()):
    """argv of llama.cpp's llama-server set up like `lumen serve`: `parallel` slots sharing one
    unified KV cache of `ctx` cells (-kvu; so one slot may use all of it, as in lumen's pool),
    continuous batching on, prompt cache on (its default), /metrics on, its web UI off unless
    static_path names a folder to serve at / (the tests point it at src/server/web)."""
    argv = [str(exe), "-m", str(model or default_model()), "--host", host, "--port", "0",
            "-t", str(threads), "-tb", str(threads), "--parallel", str(parallel), "-kvu",
            "--cont-batching", "--metrics"]
    if ctx is not None:
        argv += ["-c", str(ctx)]
    if static_path is not None:
        argv += ["--path", str(static_path)]
    return argv + [str(a) for a in extra]


class ServerError(RuntimeError):
    pass


_LIVE = set()  # servers started and not yet stopped: stopped at exit and on SIGTERM


def _die_with_parent():
    """In the child before exec: SIGKILL it when the process that started it dies, so a killed
    test or benchmark never leaves a server behind (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _stop_live():
    for s in list(_LIVE):
        s.stop(timeout=10.0)


def stop_servers_on_sigterm():
    """SIGTERM (ctest's or `timeout`'s) raises KeyboardInterrupt in the main thread, so pytest and
    the benchmark unwind and stop their servers; atexit stops any left."""
    def handler(signum, frame):
        raise KeyboardInterrupt("SIGTERM")
    signal.signal(signal.SIGTERM, handler)


atexit.register(_stop_live)


class Server:
    """One server process: start() waits for its `listening on` line and a 200 from /health."""

    def __init__(self, name, argv, env=None, log_path=None, cwd=ROOT):
        self.name = name
        self.argv = [str(a) for a in argv]
        self.env = env
        self.cwd = cwd
        self._own_log = log_path is None
        self.log_path = Path(log_path) if log_path else Path(
            tempfile.mkstemp(prefix="%s-" % re.sub(r"\W", "_", name), suffix=".log")[1])
        self.proc = None
        self.url = None
        self.exit_code = None
        self.started_at = None
        self.ready_s = None

    # ---------------------------------------------------------------- life cycle
    def start(self, timeout=120.0):
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")
        env = dict(os.environ)
        if self.env:
            env.update(self.env)
        self.started_at = time.monotonic()
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, cwd=self.cwd,
                                         env=env, start_new_session=True,
                                         preexec_fn=_die_with_parent)
        finally:
            log.close()
        _LIVE.add(self)
        deadline = self.started_at + timeout
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                raise ServerError("%s exited with %d before listening: %s\n%s" % (
                    self.name, code, " ".join(self.argv), self.log_tail()))
            m = LISTEN_RE.search(self.log_text())
            if m:
                self.url = m.group(1).replace("0.0.0.0", "127.0.0.1")
                break
            time.sleep(0.05)
        if self.url is None:
            self.stop()
            raise ServerError("%s printed no 'listening on http://...' within %.0f s\n%s" % (
                self.name, timeout, self.log_tail()))
        while time.monotonic() < deadline:  # llama-server listens before its model is loaded
            if self.health() == 200:
                self.ready_s = time.monotonic() - self.started_at
                return self
            if self.proc.poll() is not None:
                raise ServerError("%s exited with %d while loading\n%s" % (
                    self.name, self.proc.returncode, self.log_tail()))
            time.sleep(0.1)
        self.stop()
        raise ServerError("%s: /health never answered 200 within %.0f s\n%s" % (
            self.name, timeout, self.log_tail()))

    def stop(self, timeout=30.0):
        """SIGINT (graceful: sanitizers get to write their reports), then SIGTERM, then SIGKILL
        to the process group that start() made; returns the exit code."""
        if self.proc is None:
            return None
        _LIVE.discard(self)
        if self.proc.poll() is None:
            for sig, wait in ((signal.SIGINT, timeout), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self.exit_code = self.proc.wait(5.0)
        # anything else left in its session (none expected)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return self.exit_code

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        if self._own_log and exc[0] is None:
            try:
                self.log_path.unlink()
            except OSError:
                pass
        return False

    # ---------------------------------------------------------------- looking at it
    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def health(self):
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except (urllib.error.URLError, OSError):
            return None

    def get(self, path, timeout=10):
        with urllib.request.urlopen(self.url + path, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")

    def rss_kib(self):
        """VmRSS of the server process in KiB (None once it has gone)."""
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except (OSError, ValueError, AttributeError):
            return None
        return None

    def cpu_s(self):
        """CPU seconds (user + system, all threads) the server process has used so far."""
        try:
            with open("/proc/%d/stat" % self.proc.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError, AttributeError):
            return None

    def log_text(self):
        try:
            return self.log_path.read_text("utf-8", "replace")
        except OSError:
            return ""

    def log_tail(self, n=40):
        return "\n".join(self.log_text().splitlines()[-n:])

    def sanitizer_report(self):
        """The first sanitizer report in the log and what follows it ('' when there is none)."""
        text = self.log_text()
        m = SANITIZER_RE.search(text)
        return text[max(0, m.start() - 200):m.start() + 4000] if m else ""
