#!/usr/bin/env python3
"""Connection floods and adversarial bodies against `lumen serve` and llama.cpp's llama-server
(same model, threads, parallel slots and context; engines alternating, in one run; loopback only,
bounded in connections, bytes and time, stops by itself).

Scenarios (each engine's server started afresh for each, one warm-up request first):
  idle     --conns connections from 127.0.0.1 that send nothing; each one the server closes is
           opened again on the next round (every --interval s), so the flood stays at --conns
  trickle  the same, each connection sending one more byte of a header that never ends every
           --interval s (a slowloris)
  bodies   --bodies concurrent maximum-size adversarial bodies, --body-rounds times: a prompt
           plus an unknown field holding as many `{}` as the body limit allows (lumen: its
           default --max-body, read from the context it reports; llama-server: --llama-body-bytes);
           the server's RSS high-water mark (VmHWM, /proc/PID/status) before and after
  prompts  the same with a body of one long prompt (words filling the limit: tokenized, then
           refused as beyond the context)

During idle and trickle, a real client (also from 127.0.0.1, a new connection each time)
alternates GET /health and a short POST /v1/completions, --samples of each: the time from its
connect to the end of the answer, and whether it was answered, reset or closed without an
answer, or not served within --sample-timeout. The flood's own connections are counted too:
closed by the server with an answer, with a plain close, or with a reset.

Writes --out/flood-<date>.md and .json (the command at the top).

usage: .venv/bin/python bench/serve_flood.py [--engines lumen,llama] [-t 2] [--conns 300]
"""
import argparse
import datetime
import json
import os
import shlex
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import servers  # noqa: E402
from serve_load import machine_info, positive  # noqa: E402

ROOT = servers.ROOT
ENGINES = ("lumen", "llama")
ENGINE_NAMES = {"lumen": "lumen serve", "llama": "llama.cpp llama-server"}
MIB = 1 << 20
# lumen serve's default --max-body: 64 bytes per token of a request's context, at least 1 MiB
LUMEN_BODY_BYTES_PER_TOKEN = 64
LUMEN_MIN_MAX_BODY = 1 << 20
GOALS = {"served_s": 1.0, "served_floor_s": 10.0, "hwm_mib": 256, "hwm_floor_mib": 1024}


# ============================================================== /proc

def proc_status_value(pid, key):
    """The number of a `key:` line of /proc/PID/status (VmHWM, VmRSS: KiB; Threads), None once
    the process is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def proc_threads(pid):
    return proc_status_value(pid, "Threads")


# ============================================================== one HTTP exchange, raw

def exchange(host, port, head, body=b"", timeout=12.0):
    """Connect, send head (+ body), read until the server closes (the request says Connection:
    close). Returns {outcome, status, seconds, bytes}: outcome is "answered" (a status line came),
    "reset" (a reset before any byte of an answer), "closed" (the server closed without a byte),
    "timeout" (no complete answer within `timeout`) or "connect_error"."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    data = b""
    outcome = None
    err = None
    sk = None
    try:
        sk = socket.create_connection((host, port), timeout=timeout)
        sk.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            sk.sendall(head + body)
        except (BrokenPipeError, ConnectionResetError) as e:
            err = "send: %s" % e.__class__.__name__  # an early answer (413) may be readable still
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                outcome = "timeout"
                break
            sk.settimeout(left)
            chunk = sk.recv(65536)
            if not chunk:
                outcome = "answered" if data.startswith(b"HTTP/") else "closed"
                break
            data += chunk
    except socket.timeout:
        outcome = "timeout"
    except ConnectionResetError:
        outcome = "answered" if data.startswith(b"HTTP/") else "reset"
        err = "reset after %d bytes" % len(data) if data else err
    except OSError as e:
        outcome = "connect_error" if sk is None else ("answered" if data.startswith(b"HTTP/") else "reset")
        err = "%s: %s" % (e.__class__.__name__, e)
    finally:
        if sk is not None:
            sk.close()
    status = None
    if data.startswith(b"HTTP/"):
        try:
            status = int(data.split(b" ", 2)[1])
        except (IndexError, ValueError):
            pass
    rec = {"outcome": outcome, "status": status, "seconds": round(time.monotonic() - t0, 4), "bytes": len(data)}
    if status is not None and status != 200:
        rec["answer"] = data.partition(b"\r\n\r\n")[2][:400].decode("utf-8", "replace")
    if err:
        rec["error"] = err
    return rec


def request_head(method, path, host, port, body_len=None):
    h = "%s %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n" % (method, path, host, port)
    if body_len is not None:
        h += "Content-Type: application/json\r\nContent-Length: %d\r\n" % body_len
    return (h + "\r\n").encode()


def real_client(host, port, kind, timeout):
    if kind == "health":
        return exchange(host, port, request_head("GET", "/health", host, port), timeout=timeout)
    body = json.dumps({"prompt": "Hello", "max_tokens": 4, "temperature": 0}).encode()
    return exchange(host, port, request_head("POST", "/v1/completions", host, port, len(body)), body,
                    timeout=timeout)


# ============================================================== the flood

class Flood:
    """--conns connections from 127.0.0.1, driven by one thread in rounds of `interval` s:
    idle ones send nothing, trickling ones one more byte of a header that never ends; a
    connection the server closed is opened again on the next round."""

    TRICKLE = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100000

    def __init__(self, host, port, n, mode, interval):
        self.host, self.port, self.n, self.mode, self.interval = host, port, n, mode, interval
        self.socks = [None] * n
        self.sent = [0] * n
        self.stats = {"opened": 0, "connect_errors": 0, "closed_with_answer": 0, "closed_plain": 0,
                      "closed_reset": 0, "answer_statuses": {}, "rounds": 0, "max_open": 0}
        self._stop = threading.Event()
        self._thread = None
        self.open_s = None

    def _open(self, i):
        try:
            sk = socket.create_connection((self.host, self.port), timeout=2.0)
        except OSError:
            self.stats["connect_errors"] += 1
            self.socks[i] = None
            return
        sk.setblocking(False)
        self.socks[i] = sk
        self.sent[i] = 0
        self.stats["opened"] += 1

    def _closed(self, i, how, data=b""):
        if how == "answer":
            self.stats["closed_with_answer"] += 1
            try:
                st = data.split(b" ", 2)[1].decode()
            except (IndexError, UnicodeDecodeError):
                st = "?"
            self.stats["answer_statuses"][st] = self.stats["answer_statuses"].get(st, 0) + 1
        elif how == "reset":
            self.stats["closed_reset"] += 1
        else:
            self.stats["closed_plain"] += 1
        try:
            self.socks[i].close()
        except OSError:
            pass
        self.socks[i] = None

    def _poll(self, i):
        """Whether the server ended connection i (read what it sent: an answer, EOF, a reset)."""
        sk = self.socks[i]
        data = b""
        try:
            while True:
                chunk = sk.recv(65536)
                if not chunk:
                    self._closed(i, "answer" if data.startswith(b"HTTP/") else "plain", data)
                    return True
                data += chunk
        except BlockingIOError:
            if data:  # an answer, the connection still open: counted once it closes
                self._closed(i, "answer", data)
                return True
            return False
        except OSError:  # ConnectionResetError and kin
            self._closed(i, "answer" if data.startswith(b"HTTP/") else "reset", data)
            return True

    def start(self):
        t0 = time.monotonic()
        for i in range(self.n):
            self._open(i)
        self.open_s = time.monotonic() - t0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            t_round = time.monotonic()
            for i in range(self.n):
                if self.socks[i] is None:
                    self._open(i)
                    continue
                if self._poll(i):
                    continue
                if self.mode == "trickle" and self.sent[i] < len(self.TRICKLE):
                    try:
                        self.socks[i].send(self.TRICKLE[self.sent[i]:self.sent[i] + 1])
                        self.sent[i] += 1
                    except BlockingIOError:
                        pass
                    except OSError:  # the server ended it: read what it left
                        if not self._poll(i):
                            self._closed(i, "reset")
            self.stats["rounds"] += 1
            self.stats["max_open"] = max(self.stats["max_open"], sum(s is not None for s in self.socks))
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - t_round)))

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(30)
        for i in range(self.n):
            if self.socks[i] is not None:
                self.socks[i].close()
                self.socks[i] = None


def dist(xs):
    if not xs:
        return None
    return {"n": len(xs), "median_s": round(statistics.median(xs), 4), "max_s": round(max(xs), 4),
            "min_s": round(min(xs), 4)}


def scenario_flood(a, srv, mode):
    host, port = "127.0.0.1", int(srv.url.rsplit(":", 1)[1])
    baseline = []  # the same requests before the flood
    for k in range(4):
        rec = real_client(host, port, "health" if k % 2 == 0 else "completion", a.sample_timeout)
        rec["kind"] = "health" if k % 2 == 0 else "completion"
        baseline.append(rec)
    flood = Flood(host, port, a.conns, mode, a.interval)
    threads0 = proc_threads(srv.pid)
    flood.start()
    samples = []
    threads_max = threads0 or 0
    try:
        time.sleep(a.settle)  # the flood in place (trickle: a few bytes sent by every connection)
        t_end = time.monotonic() + a.phase_limit
        for k in range(2 * a.samples):
            if time.monotonic() > t_end:
                break
            kind = "health" if k % 2 == 0 else "completion"
            rec = real_client(host, port, kind, a.sample_timeout)
            rec["kind"] = kind
            rec["t"] = round(time.monotonic(), 3)
            samples.append(rec)
            threads_max = max(threads_max, proc_threads(srv.pid) or 0)
            time.sleep(a.sample_gap)
    finally:
        flood.stop()
    for r in samples:
        r.pop("t", None)
    ok = [r for r in samples if r["outcome"] == "answered" and r["status"] == 200]
    # a sample not served counts with the time it was kept out (at least the timeout)
    kept_out = [r["seconds"] for r in samples]
    res = {
        "mode": mode, "conns": a.conns, "interval_s": a.interval, "flood_open_s": round(flood.open_s, 3),
        "samples": samples, "baseline": baseline,
        "baseline_health_s": dist([r["seconds"] for r in baseline if r["kind"] == "health" and r["status"] == 200]),
        "baseline_completion_s": dist([r["seconds"] for r in baseline if r["kind"] == "completion" and r["status"] == 200]),
        "health": dist([r["seconds"] for r in ok if r["kind"] == "health"]),
        "completion": dist([r["seconds"] for r in ok if r["kind"] == "completion"]),
        "all": dist(kept_out),
        "served": len(ok), "asked": len(samples),
        "not_served": [r for r in samples if not (r["outcome"] == "answered" and r["status"] == 200)],
        "real_client_resets": sum(r["outcome"] in ("reset", "closed") for r in samples),
        "flood": flood.stats, "server_threads": {"before": threads0, "max": threads_max},
        "max_kept_out_s": round(max(kept_out), 4) if kept_out else None,
    }
    return res


# ============================================================== adversarial bodies

def adversarial_body(limit, shape):
    """A completions request of at most `limit` bytes. "objects": a prompt, then an unknown field
    holding as many `{}` as fit (an array of empty objects: the most JSON values per body byte);
    "prompt": a prompt of words filling the body (the most tokenizer work per byte); k is the
    number of `{}`, or of words."""
    if shape == "objects":
        head = b'{"prompt":"Hello","max_tokens":1,"x":['
        tail = b"]}"
        k = (limit - len(head) - len(tail) + 1) // 3
        body = head + b"{}," * (k - 1) + b"{}" + tail
    else:
        head = b'{"max_tokens":1,"prompt":"'
        tail = b'"}'
        words = b"the quick brown fox jumps over a lazy dog and keeps on running "
        n = limit - len(head) - len(tail)
        text = (words * (n // len(words) + 1))[:n]
        k = text.count(b" ")
        body = head + text + tail
    assert len(body) <= limit, (len(body), limit)
    return body, k


def lumen_max_body(srv):
    """lumen serve's default --max-body for the context it reports in /v1/models."""
    st, text = srv.get("/v1/models")
    n_ctx = json.loads(text)["data"][0]["meta"]["n_ctx"]
    return max(n_ctx * LUMEN_BODY_BYTES_PER_TOKEN, LUMEN_MIN_MAX_BODY), n_ctx


def probe_limit(srv, limit):
    """The status of a body one byte over `limit`, announced with Expect: 100-continue (a server
    that refuses by Content-Length answers at once; one that does not gets the body)."""
    host, port = "127.0.0.1", int(srv.url.rsplit(":", 1)[1])
    body = b" " * (limit + 1)
    head = request_head("POST", "/v1/completions", host, port, len(body))
    return exchange(host, port, head, body, timeout=30)["status"]


def scenario_bodies(a, srv, engine, shape):
    host, port = "127.0.0.1", int(srv.url.rsplit(":", 1)[1])
    if engine == "lumen":
        limit, n_ctx = lumen_max_body(srv)
        where = "lumen serve's default --max-body for a %d-token context (64 B per token, at least 1 MiB)" % n_ctx
    else:
        limit = a.llama_body_bytes
        where = "--llama-body-bytes (the issue's measurement: 2.6 million `{}`)"
    body, k = adversarial_body(limit, shape)
    head = request_head("POST", "/v1/completions", host, port, len(body))
    hwm0, rss0 = proc_status_value(srv.pid, "VmHWM"), proc_status_value(srv.pid, "VmRSS")
    rounds = []
    for _ in range(a.body_rounds):
        out = [None] * a.bodies
        t0 = time.monotonic()

        def one(i):
            out[i] = exchange(host, port, head, body, timeout=a.body_timeout)

        ts = [threading.Thread(target=one, args=(i,)) for i in range(a.bodies)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        rounds.append({"seconds": round(time.monotonic() - t0, 3), "answers": out})
    hwm1, rss1 = proc_status_value(srv.pid, "VmHWM"), proc_status_value(srv.pid, "VmRSS")
    alive = srv.health()
    statuses = {}
    for r in rounds:
        for x in r["answers"]:
            key = str(x["status"]) if x["outcome"] == "answered" else x["outcome"]
            statuses[key] = statuses.get(key, 0) + 1
    return {
        "shape": shape, "limit_bytes": limit, "limit_from": where, "body_bytes": len(body), "empty_objects": k,
        "bodies": a.bodies, "rounds": rounds, "statuses": statuses,
        "vmhwm_kib": {"before": hwm0, "after": hwm1}, "vmrss_kib": {"before": rss0, "after": rss1},
        "hwm_increase_mib": round((hwm1 - hwm0) / 1024, 1) if hwm0 and hwm1 else None,
        "health_after": alive,
        "over_limit_status": probe_limit(srv, limit) if engine == "lumen" else None,
    }


# ============================================================== servers

def server_argv(a, engine):
    if engine == "lumen":
        return servers.lumen_serve_argv(a.lumen_bin, a.model, threads=a.threads, parallel=a.parallel,
                                        ctx=a.ctx, extra=shlex.split(a.lumen_args))
    return servers.llama_server_argv(a.llama_server, a.model, threads=a.threads, parallel=a.parallel,
                                     ctx=a.ctx, extra=shlex.split(a.llama_args))


def with_server(a, engine, name, body, log_dir):
    argv = server_argv(a, engine)
    log = log_dir / ("%s-%s.log" % (name, engine))
    srv = servers.Server(engine, argv, log_path=log)
    srv.start(timeout=180)
    rec = {"engine": engine, "argv": argv, "log": str(log)}
    try:
        host, port = "127.0.0.1", int(srv.url.rsplit(":", 1)[1])
        w = real_client(host, port, "completion", 60)
        if w["status"] != 200:
            raise RuntimeError("%s: warm-up request failed: %s" % (engine, w))
        rec["result"] = body(srv)
    finally:
        rec["exit_code"] = srv.stop()
    return rec


# ============================================================== report

def verdict(x, goal, floor):
    if x is None:
        return "-"
    return "goal met" if x <= goal else ("floor met" if x <= floor else "MISSED")


def ms(x):
    return "-" if x is None else "%.0f ms" % (x * 1000) if x < 10 else "%.1f s" % x


def write_md(rep, path):
    L = ["# serve_flood: %s" % " vs ".join(ENGINE_NAMES[e] for e in rep["settings"]["engines"]), ""]
    L.append("Command: `%s`" % rep["command"])
    L.append("")
    m = rep["machine"]
    L.append("%s, git %s; %s (%s cores); load average %s at start, %s at end. The machine is shared "
             "(another helper's builds); benchmarks ran under a lock, but compare the engines within "
             "this run." % (rep["date"], m["git"], m["cpu"], m["nproc"],
                            "/".join("%.2f" % x for x in m["loadavg_start"]),
                            "/".join("%.2f" % x for x in rep["loadavg_end"])))
    L.append("")
    s = rep["settings"]
    L.append("Both servers: model `%s`, %d threads, %d parallel sequences, %d context cells (lumen "
             "--ctx-size, llama-server -c with -kvu), otherwise their defaults." % (
                 Path(s["model"]).name, s["threads"], s["parallel"], s["ctx"]))
    L.append("")
    for e in s["engines"]:
        L.append("- %s: `%s`" % (ENGINE_NAMES[e], " ".join(rep["argv"][e])))
    L.append("")
    L.append("## Goals (issue 24)")
    L.append("")
    L.append("| | %s |" % " | ".join(ENGINE_NAMES[e] for e in s["engines"]))
    L.append("| --- |%s" % (" --- |" * len(s["engines"])))
    g = rep["goals"]
    for key, label in (("idle", "%d idle connections: a real client kept out at most (goal 1 s, floor 10 s)" % s["conns"]),
                       ("trickle", "%d trickling connections: the same" % s["conns"]),
                       ("resets", "real-client requests reset or closed without an answer (goal 0)"),
                       ("hwm", "%d concurrent adversarial bodies (`{}`): VmHWM increase (goal 256 MiB, floor 1 GiB)" % s["bodies"]),
                       ("hwm_prompt", "%d concurrent bodies of one long prompt: the same" % s["bodies"])):
        L.append("| %s | %s |" % (label, " | ".join(g[e][key] for e in s["engines"])))
    L.append("")
    L.append("## Floods: a real client's time to be served")
    L.append("")
    L.append("A new connection from the flood's own address each time, connect to the end of the answer; "
             "%d samples each of GET /health and POST /v1/completions (`max_tokens` 4), %.1f s apart, after "
             "%.1f s of flood; a sample not answered within %.0f s counts as kept out that long. The flood "
             "keeps %d connections: each round (%.1f s) it reopens the ones the server closed." % (
                 s["samples"], s["sample_gap"], s["settle"], s["sample_timeout"], s["conns"], s["interval"]))
    L.append("")
    L.append("| flood | engine | /health median / max | completion median / max | served | real client reset | "
             "no flood: /health, completion | flood conns opened | closed: answered / plain / reset | server threads max |")
    L.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for mode in ("idle", "trickle"):
        for run in rep["scenarios"].get(mode, []):
            r = run["result"]
            fl = r["flood"]
            ans = ", ".join("%s x%d" % kv for kv in sorted(fl["answer_statuses"].items()))
            bh, bc = r["baseline_health_s"], r["baseline_completion_s"]
            L.append("| %s | %s | %s / %s | %s / %s | %d / %d | %d | %s, %s | %d | %d%s / %d / %d | %s |" % (
                mode, ENGINE_NAMES[run["engine"]],
                ms(r["health"] and r["health"]["median_s"]), ms(r["health"] and r["health"]["max_s"]),
                ms(r["completion"] and r["completion"]["median_s"]), ms(r["completion"] and r["completion"]["max_s"]),
                r["served"], r["asked"], r["real_client_resets"], ms(bh and bh["median_s"]),
                ms(bc and bc["median_s"]), fl["opened"], fl["closed_with_answer"],
                " (%s)" % ans if ans else "", fl["closed_plain"], fl["closed_reset"],
                r["server_threads"]["max"]))
    L.append("")
    for mode in ("idle", "trickle"):
        for run in rep["scenarios"].get(mode, []):
            bad = run["result"]["not_served"]
            if bad:
                L.append("- %s, %s: not served: %s" % (mode, ENGINE_NAMES[run["engine"]], "; ".join(
                    "%s %s after %.1f s%s" % (x["kind"], x["outcome"] if x["outcome"] != "answered" else x["status"],
                                              x["seconds"], " (%s)" % x["error"] if x.get("error") else "")
                    for x in bad)))
    L.append("")
    L.append("## Adversarial bodies: the RSS high-water mark")
    L.append("")
    L.append("%d concurrent POST /v1/completions, %d rounds, each body filled to the server's limit, a fresh "
             "server for each shape: `objects` is `{\"prompt\":\"Hello\",\"max_tokens\":1,\"x\":[{},{},...]}` "
             "(the issue's), `prompt` is `{\"max_tokens\":1,\"prompt\":\"the quick brown fox ...\"}` (a prompt "
             "far beyond the context: tokenized, then refused). VmHWM of /proc/PID/status after the warm-up "
             "request and after the rounds." % (s["bodies"], s["body_rounds"]))
    L.append("")
    lims = {run["engine"]: run["result"] for run in rep["scenarios"].get("bodies", []) + rep["scenarios"].get("prompts", [])}
    for e, r in lims.items():
        L.append("- %s: %.2f MiB bodies (%s)." % (ENGINE_NAMES[e], r["body_bytes"] / MIB, r["limit_from"]))
    L.append("")
    L.append("| shape | engine | `{}` or words | answers | per round | VmHWM before -> after | increase |")
    L.append("| --- | --- | --- | --- | --- | --- | --- |")
    for run in rep["scenarios"].get("bodies", []) + rep["scenarios"].get("prompts", []):
        r = run["result"]
        L.append("| %s | %s | %d | %s | %s | %.0f -> %.0f MiB | **%.0f MiB** |" % (
            r["shape"], ENGINE_NAMES[run["engine"]], r["empty_objects"],
            ", ".join("%s x%d" % kv for kv in sorted(r["statuses"].items())),
            ", ".join("%.1f s" % x["seconds"] for x in r["rounds"]),
            r["vmhwm_kib"]["before"] / 1024, r["vmhwm_kib"]["after"] / 1024, r["hwm_increase_mib"]))
    L.append("")
    for run in rep["scenarios"].get("bodies", []):
        r = run["result"]
        if r.get("over_limit_status") is not None:
            L.append("- %s: a body one byte over the limit: %s." % (ENGINE_NAMES[run["engine"]], r["over_limit_status"]))
    for run in rep["scenarios"].get("bodies", []) + rep["scenarios"].get("prompts", []):
        seen = set()
        for rd in run["result"]["rounds"]:
            for x in rd["answers"]:
                if x.get("answer") and x["answer"] not in seen:
                    seen.add(x["answer"])
                    L.append("- %s, %s: %s `%s`" % (ENGINE_NAMES[run["engine"]], run["result"]["shape"], x["status"],
                                                   x["answer"].strip()[:300]))
    for n in rep["notes"]:
        L.append("- %s" % n)
    L.append("")
    path.write_text("\n".join(L) + "\n")


def goals(rep, engines):
    out = {}
    for e in engines:
        g = {}
        resets = 0
        for mode in ("idle", "trickle"):
            run = next((x for x in rep["scenarios"].get(mode, []) if x["engine"] == e), None)
            if run is None:
                g[mode] = "-"
                continue
            r = run["result"]
            resets += r["real_client_resets"]
            x = r["max_kept_out_s"]
            g[mode] = "%s (%s)" % (ms(x), verdict(x, GOALS["served_s"], GOALS["served_floor_s"]))
        g["resets"] = "%d (%s)" % (resets, "goal met" if resets == 0 else "MISSED")
        for key, name in (("hwm", "bodies"), ("hwm_prompt", "prompts")):
            run = next((x for x in rep["scenarios"].get(name, []) if x["engine"] == e), None)
            x = run["result"]["hwm_increase_mib"] if run else None
            g[key] = "-" if x is None else "%.0f MiB (%s)" % (x, verdict(x, GOALS["hwm_mib"], GOALS["hwm_floor_mib"]))
        out[e] = g
    return out


# ============================================================== main

def parse_args(argv=None):
    class Fmt(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
        pass

    ap = argparse.ArgumentParser(prog="serve_flood.py", description=__doc__.rsplit("\nusage:", 1)[0],
                                 formatter_class=Fmt)
    g = ap.add_argument_group("servers")
    g.add_argument("--engines", default="lumen,llama", help="comma-separated, from: lumen, llama")
    g.add_argument("-m", "--model", default=str(servers.default_model()), help="GGUF model for both servers")
    g.add_argument("-t", "--threads", type=positive, default=2, help="threads of each server")
    g.add_argument("--parallel", type=positive, default=8, help="parallel sequences (slots) of each server")
    g.add_argument("--ctx", type=positive, default=8192, help="KV cells: lumen --ctx-size, llama-server -c")
    g.add_argument("--lumen-bin", default=str(ROOT / "build" / "lumen"), help="lumen binary")
    g.add_argument("--llama-server", default=None,
                   help="llama-server binary (default: .reference/bin's, or $LUMEN_REFERENCE_BIN's)")
    g.add_argument("--lumen-args", default="", help="extra arguments for lumen serve (one string)")
    g.add_argument("--llama-args", default="", help="extra arguments for llama-server (one string)")
    g = ap.add_argument_group("floods")
    g.add_argument("--scenarios", default="idle,trickle,bodies,prompts",
                   help="comma-separated, from: idle, trickle, bodies, prompts")
    g.add_argument("--conns", type=positive, default=300, help="flood connections (at most 1000)")
    g.add_argument("--interval", type=float, default=0.5, help="seconds per flood round (a trickled byte, reopening)")
    g.add_argument("--settle", type=float, default=2.0, help="seconds of flood before the first sample")
    g.add_argument("--samples", type=positive, default=8, help="real-client samples of each kind")
    g.add_argument("--sample-gap", type=float, default=1.0, help="seconds between samples")
    g.add_argument("--sample-timeout", type=float, default=12.0, help="seconds a sample waits for its answer")
    g.add_argument("--phase-limit", type=float, default=45.0, help="seconds of sampling per flood and engine at most")
    g = ap.add_argument_group("bodies")
    g.add_argument("--bodies", type=positive, default=8, help="concurrent adversarial bodies")
    g.add_argument("--body-rounds", type=positive, default=1, help="rounds of them")
    g.add_argument("--llama-body-bytes", type=positive, default=7_800_000,
                   help="llama-server's body size (it has no default limit of its own this small)")
    g.add_argument("--body-timeout", type=float, default=120.0, help="seconds one body waits for its answer")
    g = ap.add_argument_group("output")
    g.add_argument("--out", default=str(ROOT / "bench" / "results"), help="folder of flood-<date>.md/.json (and logs/)")
    g.add_argument("--no-write", action="store_true", help="print the report, write nothing but the server logs")
    a = ap.parse_args(argv)
    a.engines = [e.strip() for e in a.engines.split(",") if e.strip()]
    if not a.engines or any(e not in ENGINES for e in a.engines) or len(set(a.engines)) != len(a.engines):
        ap.error("--engines: use lumen and/or llama")
    a.scenarios = [x.strip() for x in a.scenarios.split(",") if x.strip()]
    if not a.scenarios or any(x not in ("idle", "trickle", "bodies", "prompts") for x in a.scenarios):
        ap.error("--scenarios: from idle, trickle, bodies, prompts")
    if a.conns > 1000:
        ap.error("--conns: at most 1000 (bounded by design)")
    if not Path(a.model).is_file():
        ap.error("model %s not found" % a.model)
    if "lumen" in a.engines and not os.access(a.lumen_bin, os.X_OK):
        ap.error("lumen binary %s not found (cmake --build build)" % a.lumen_bin)
    a.notes = []
    if "llama" in a.engines and a.llama_server is None:
        import reference
        try:
            a.llama_server = reference.tool("llama-server")
        except reference.ReferenceMissing as e:
            a.engines.remove("llama")
            a.notes.append("llama-server skipped: %s" % e)
            print("[serve_flood] llama-server skipped: %s" % e, file=sys.stderr)
            if not a.engines:
                ap.error("no engine left")
    return a


def main(argv=None):
    a = parse_args(argv)
    servers.stop_servers_on_sigterm()
    now = datetime.datetime.now()
    out = Path(a.out)
    log_dir = out / "logs" / ("flood-" + now.strftime("%Y-%m-%d-%H%M"))
    log_dir.mkdir(parents=True, exist_ok=True)
    machine = machine_info()
    sc = {}
    flip = False
    for name in a.scenarios:
        es = list(reversed(a.engines)) if flip else list(a.engines)
        flip = not flip
        runs = []
        for e in es:
            print("[serve_flood] %s: %s ..." % (name, e), file=sys.stderr, flush=True)
            if name in ("bodies", "prompts"):
                shape = "objects" if name == "bodies" else "prompt"
                body = lambda srv, e=e, shape=shape: scenario_bodies(a, srv, e, shape)  # noqa: E731
            else:
                body = lambda srv, name=name: scenario_flood(a, srv, name)  # noqa: E731
            runs.append(with_server(a, e, name, body, log_dir))
        sc[name] = sorted(runs, key=lambda r: a.engines.index(r["engine"]))
    settings = {k: v for k, v in vars(a).items() if k != "notes"}
    rep = {
        "date": now.strftime("%Y-%m-%d %H:%M"), "machine": machine, "loadavg_end": os.getloadavg(),
        "command": " ".join(shlex.quote(x) for x in [sys.executable, *sys.argv]),
        "settings": settings, "argv": {e: server_argv(a, e) for e in a.engines},
        "scenarios": sc, "notes": a.notes,
    }
    rep["goals"] = goals(rep, a.engines)
    if a.no_write:
        tmp = log_dir / "report.md"
        write_md(rep, tmp)
        (log_dir / "report.json").write_text(json.dumps(rep, indent=1, default=str) + "\n")
        print(tmp.read_text())
        return 0
    stem = out / ("flood-" + now.strftime("%Y-%m-%d-%H%M"))
    stem.with_suffix(".json").write_text(json.dumps(rep, indent=1, default=str) + "\n")
    write_md(rep, stem.with_suffix(".md"))
    print(stem.with_suffix(".md").read_text())
    print("[serve_flood] wrote %s.md and .json; server logs in %s" % (stem, log_dir), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
