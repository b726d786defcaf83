"""Soak of `lumen serve` on loopback: 32 clients for 2 minutes (LUMEN_SOAK_SECONDS) send a mix of
streaming and non-streaming chat and completion requests of random lengths, cancel some streams
midway (closing the connection), send a few malformed requests, and poll /v1/models, /health and
/metrics. Every request must be answered in full (200 with a complete body: [DONE] for a stream)
or cleanly refused (4xx with a JSON error); nothing else. The server's RSS (VmRSS, sampled every
second) must stay flat after the warm-up, it must be idle and healthy once the clients stop, and
it must exit cleanly on SIGINT. With an AddressSanitizer build of lumen (the ASan variant) its
log must hold no sanitizer report, leaks included (LeakSanitizer runs at its exit).

Env: LUMEN_BIN, LUMEN_MODEL, LUMEN_SOAK_SECONDS (default 120), LUMEN_SOAK_CLIENTS (default 32),
LUMEN_TEST_ARTIFACTS (server log, RSS samples and counts as JSON), LUMEN_SOAK_SERVER=llama-server
(the same load against llama.cpp's server, for working on this test without lumen serve).
"""
import asyncio
import json
import os
import random
import re
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import servers  # noqa: E402

servers.stop_servers_on_sigterm()  # a timeout's SIGTERM still stops the server we started

BIN = Path(os.environ.get("LUMEN_BIN", ROOT / "build" / "lumen"))
SECONDS = float(os.environ.get("LUMEN_SOAK_SECONDS", "120"))
CLIENTS = int(os.environ.get("LUMEN_SOAK_CLIENTS", "32"))
ARTIFACTS = Path(os.environ.get("LUMEN_TEST_ARTIFACTS", BIN.parent / "test-artifacts" / "server_soak"))
KIND = os.environ.get("LUMEN_SOAK_SERVER", "lumen")  # or llama-server (its /metrics differ)
ASAN = KIND == "lumen" and servers.is_asan_binary(BIN)
PARALLEL = 8
QUEUE = 16  # 32 clients > 8 running + 16 waiting: some requests are refused (429) by design
WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing "
         "matches in the old town square near the river").split()


class Tally:
    def __init__(self):
        self.kinds = {}
        self.bad = []     # (kind, detail): neither answered nor cleanly refused
        self.requests = 0
        self.answered = 0
        self.refused = 0
        self.cancelled = 0

    def add(self, kind, outcome, detail=""):
        self.requests += 1
        k = self.kinds.setdefault(kind, {})
        k[outcome] = k.get(outcome, 0) + 1
        if outcome == "answered":
            self.answered += 1
        elif outcome == "refused":
            self.refused += 1
        elif outcome == "cancelled":
            self.cancelled += 1
        else:
            self.bad.append((kind, outcome, detail[:300]))


def prompt(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def clean_refusal(r, body):
    """4xx with a JSON body that names an error."""
    if not 400 <= r.status_code < 500:
        return False
    try:
        j = json.loads(body)
    except ValueError:
        return False
    return isinstance(j, dict) and "error" in j


async def one_stream(client, url, rng, tally, chat):
    kind = "chat-stream" if chat else "completion-stream"
    body = {"max_tokens": rng.randint(1, 48), "stream": True, "temperature": rng.choice([0, 0.7, 1.0]),
            "stream_options": {"include_usage": True}}
    text = prompt(rng, rng.choice([3, 20, 80, 250]))
    if chat:
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = text
    cancel_after = rng.randint(1, 8) if rng.random() < 0.15 else None
    path = "/v1/chat/completions" if chat else "/v1/completions"
    got, done, usage = 0, False, None
    try:
        async with client.stream("POST", url + path, json=body) as r:
            if r.status_code != 200:
                b = (await r.aread()).decode("utf-8", "replace")
                tally.add(kind, "refused" if clean_refusal(r, b) else "bad-status", "%d %s" % (r.status_code, b))
                return r.status_code
            async for line in r.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                j = json.loads(data)
                if "error" in j:
                    tally.add(kind, "error-in-stream", data)
                    return 200
                if j.get("usage"):
                    usage = j["usage"]
                for c in j.get("choices") or []:
                    if (c.get("delta") or {}).get("content") if chat else c.get("text"):
                        got += 1
                if cancel_after is not None and got >= cancel_after:
                    break  # leaving the block closes the connection: the server cancels
        if cancel_after is not None and not done:
            tally.add(kind, "cancelled")
        elif not done:
            tally.add(kind, "truncated", "no [DONE] after %d chunks" % got)
        elif usage is None or usage.get("completion_tokens", 0) > body["max_tokens"]:
            tally.add(kind, "bad-usage", repr(usage))
        else:
            tally.add(kind, "answered")
        return 200
    except (httpx.HTTPError, OSError, ValueError) as e:
        tally.add(kind, "exception", "%s: %s" % (type(e).__name__, e))
        return None


async def one_plain(client, url, rng, tally):
    kind = "chat"
    body = {"messages": [{"role": "user", "content": prompt(rng, rng.choice([5, 40, 120]))}],
            "max_tokens": rng.randint(1, 24), "temperature": 0}
    try:
        r = await client.post(url + "/v1/chat/completions", json=body)
        if r.status_code == 200:
            j = r.json()
            ok = j["choices"][0]["message"]["role"] == "assistant" and j["usage"]["completion_tokens"] <= body["max_tokens"]
            tally.add(kind, "answered" if ok else "bad-body", r.text)
        else:
            tally.add(kind, "refused" if clean_refusal(r, r.text) else "bad-status", "%d %s" % (r.status_code, r.text))
        return r.status_code
    except (httpx.HTTPError, OSError, ValueError, KeyError, IndexError, TypeError) as e:
        tally.add(kind, "exception", "%s: %s" % (type(e).__name__, e))
        return None


async def one_malformed(client, url, rng, tally):
    kind = "malformed"
    # each invalid for both routes (a chat body lacks 'prompt', a completion body 'messages')
    bodies = [b"{not json", b'{"messages": "nope"}', b'{"messages": [], "max_tokens": -5}',
              b'{"prompt": 12}', b"[]", b'{"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}',
              b'{"prompt": "x", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}',
              b'{"prompt": "x", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}',
              b"\xff\xfe not utf-8",
              b'{"messages": [{"role": "user"}], "max_tokens": 4}']  # no content (chat), no prompt: 400
    try:
        r = await client.post(url + rng.choice(["/v1/chat/completions", "/v1/completions"]),
                              content=rng.choice(bodies), headers={"Content-Type": "application/json"})
        tally.add(kind, "refused" if clean_refusal(r, r.text) else "bad-status", "%d %s" % (r.status_code, r.text))
    except (httpx.HTTPError, OSError) as e:
        tally.add(kind, "exception", "%s: %s" % (type(e).__name__, e))


async def one_get(client, url, rng, tally):
    path = rng.choice(["/v1/models", "/health", "/metrics"])
    try:
        r = await client.get(url + path)
        if r.status_code == 200 and (path != "/v1/models" or r.json().get("data")):
            tally.add("GET " + path, "answered")
        else:
            tally.add("GET " + path, "bad-status", "%d %s" % (r.status_code, r.text))
    except (httpx.HTTPError, OSError, ValueError) as e:
        tally.add("GET " + path, "exception", "%s: %s" % (type(e).__name__, e))


async def client_loop(i, url, deadline, tally):
    rng = random.Random(1000 + i)
    limits = httpx.Limits(max_connections=4)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(120.0, connect=20.0)) as client:
        while time.monotonic() < deadline:
            x = rng.random()
            if x < 0.55:
                status = await one_stream(client, url, rng, tally, chat=True)
            elif x < 0.75:
                status = await one_stream(client, url, rng, tally, chat=False)
            elif x < 0.88:
                status = await one_plain(client, url, rng, tally)
            elif x < 0.93:
                status = await one_malformed(client, url, rng, tally)
            else:
                status = await one_get(client, url, rng, tally)
            if status == 429:  # back off as a client should (more answered than refused)
                await asyncio.sleep(rng.uniform(0.3, 1.5))


async def fill_kv_pool(srv, limit_s):
    """Before the soak: write every KV block once (unique ~900-token prompts, max_tokens 1, four at
    a time; the prefix cache keeps their blocks), so that the pool's pages, which are first
    written lazily, are in the RSS baseline. Returns (seconds, blocks with data, total)."""
    t0 = time.monotonic()
    rng = random.Random(7)
    used = total = None
    async with httpx.AsyncClient(timeout=httpx.Timeout(300.0, connect=20.0)) as client:
        i = 0
        while time.monotonic() - t0 < limit_s:
            bodies = [{"prompt": "%d %s" % (i + j, prompt(rng, 900)), "max_tokens": 1} for j in range(4)]
            i += 4
            rs = await asyncio.gather(*[client.post(srv.url + "/v1/completions", json=b) for b in bodies])
            assert all(r.status_code == 200 for r in rs), [r.text for r in rs]
            text = (await asyncio.to_thread(srv.get, "/metrics"))[1]
            used = (metric(text, "lumen_kv_blocks_used") or 0) + (metric(text, "lumen_kv_blocks_cached") or 0)
            total = metric(text, "lumen_kv_blocks_total")
            if total and used >= 0.98 * total:  # (a block or two may stay free)
                break
    return time.monotonic() - t0, used, total


async def soak(srv, rss):
    fill = await fill_kv_pool(srv, 240 if ASAN else 60)
    print("soak: KV pool filled before the soak in %.0f s: %s of %s blocks" % fill)
    tally = Tally()
    t0 = time.monotonic()
    deadline = t0 + SECONDS
    stop = asyncio.Event()

    async def sample():
        while not stop.is_set():
            v = srv.rss_kib()
            try:  # KV blocks holding data (running + prefix cache) vs the pool's size
                text = (await asyncio.to_thread(srv.get, "/metrics"))[1]
                kv = ((metric(text, "lumen_kv_blocks_used") or 0) + (metric(text, "lumen_kv_blocks_cached") or 0),
                      metric(text, "lumen_kv_blocks_total"))
            except OSError:
                kv = (None, None)
            if v:
                rss.append((time.monotonic() - t0, v, kv[0], kv[1]))
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
            except asyncio.TimeoutError:
                pass

    sampler = asyncio.create_task(sample())
    clients = [asyncio.create_task(client_loop(i, srv.url, deadline, tally)) for i in range(CLIENTS)]
    # bounded: a client still inside a request after the deadline gets 3 minutes more, then
    # it is cancelled (and that counts against the server)
    done, pending = await asyncio.wait(clients, timeout=SECONDS + 180)
    for t in pending:
        t.cancel()
    stop.set()
    await sampler
    for t in done:
        if t.exception():
            raise t.exception()
    return tally, len(pending)


def metric(text, name):
    m = re.search(r"^%s(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


def test_soak():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    env = {}
    if ASAN:
        # a small quarantine keeps freed memory from looking like growth; leaks are checked at exit
        env["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "detect_leaks=1") + ":quarantine_size_mb=16"
    if KIND == "llama-server":  # developing the client side: no queue bound, no 429s
        import reference
        argv = servers.llama_server_argv(reference.tool("llama-server"), threads=2, parallel=PARALLEL, ctx=16384)
    else:
        # under ASan prefill is ~10x slower: a half-size KV pool (4096 tokens) fills in half the time
        argv = servers.lumen_serve_argv(BIN, threads=2, parallel=PARALLEL, queue=QUEUE, ctx=4096 if ASAN else None)
    srv = servers.Server(KIND, argv, env=env, log_path=ARTIFACTS / ("%s.log" % KIND))
    srv.start(timeout=240 if ASAN else 60)
    rss = []
    try:
        tally, stuck = asyncio.run(soak(srv, rss))
        # idle and healthy afterwards
        assert srv.health() == 200, "/health after the soak: %s" % srv.health()
        idle = None
        for _ in range(40):
            st, text = srv.get("/metrics")
            running = metric(text, "lumen_requests_running")
            waiting = metric(text, "lumen_requests_waiting")
            idle = (running, waiting)
            if running in (None, 0) and waiting in (None, 0):
                break
            time.sleep(0.5)
    finally:
        code = srv.stop(timeout=60)
    report = srv.sanitizer_report()
    # RSS grows while the KV pool's pages are first written (blocks are handed out lazily, and the
    # prefix cache keeps them filled): judge flatness from the moment every block has held data,
    # else (a pool the load never fills) over the whole soak
    full_at = next((t for t, _, used, total in rss if total and used is not None and used >= 0.98 * total), None)
    window = "after the KV pool was full (%.0f s)" % full_at if full_at is not None else "whole soak"
    samples = [v for t, v, _, _ in rss if t <= SECONDS and (full_at is None or t >= full_at + 3)]
    if len(samples) < 10:
        window = "whole soak (the pool filled too late)"
        samples = [v for t, v, _, _ in rss if t <= SECONDS]
    result = {"seconds": SECONDS, "clients": CLIENTS, "asan": ASAN, "requests": tally.requests,
              "answered": tally.answered, "refused": tally.refused, "cancelled": tally.cancelled,
              "bad": tally.bad[:20], "kinds": tally.kinds, "stuck_clients": stuck, "exit_code": code,
              "idle_metrics": idle, "rss_window": window, "rss_kib_t_used_total": rss}
    (ARTIFACTS / "soak.json").write_text(json.dumps(result, indent=1) + "\n")
    print("soak: %d requests in %.0f s: %d answered, %d refused (4xx), %d cancelled by the client, %d bad; "
          "RSS %s..%s MiB %s" % (tally.requests, SECONDS, tally.answered, tally.refused, tally.cancelled,
                                 len(tally.bad), samples and min(samples) // 1024, samples and max(samples) // 1024,
                                 window))

    assert not report, "sanitizer report in %s:\n%s" % (srv.log_path, report)
    assert KIND != "lumen" or code in (0, -2, 130), "lumen serve exited with %s on SIGINT:\n%s" % (code, srv.log_tail())
    assert stuck == 0, "%d clients were still waiting 3 minutes after the end" % stuck
    assert not tally.bad, "requests neither answered nor cleanly refused: %s" % tally.bad[:10]
    assert tally.answered >= max(20, CLIENTS), tally.kinds
    assert tally.kinds.get("malformed", {}).get("refused", 0) > 0, tally.kinds
    # RSS flat over that window: its last third's peak may exceed its first third's median by
    # 3% + 16 MiB at most (ASan: + 48 MiB for its allocator's quarantine and metadata)
    n = len(samples)
    assert n >= 10, "too few RSS samples: %s" % samples
    first = statistics.median(samples[: n // 3])
    last = max(samples[2 * n // 3:])
    slack = first * 0.03 + (64 if ASAN else 16) * 1024
    assert last <= first + slack, "RSS grew (%s): first third median %d KiB, last third peak %d KiB" % (
        window, first, last)
