#!/usr/bin/env python3
"""Load generator for OpenAI-compatible servers: `lumen serve` against llama.cpp's llama-server
(same model, threads, parallel slots and load; engines alternating, in one run). Streaming
clients on loopback; per request the time to first token (TTFT), every inter-token gap (ITL) and
the end-to-end time; per scenario percentiles, aggregate tok/s, answered / refused / failed
counts and the server's peak RSS. Bounded: each scenario has a request budget and a time limit,
after which outstanding requests are cancelled (the client closes the connection).

Scenarios (each a flag; none given = all four):
  --concurrency  (a) N concurrent streams of a fixed prompt length and max_tokens, N in --clients
  --prefix       (b) a shared --prefix-tokens system prompt: one request (cold), then the next
                     one's TTFT (prefix reuse), then --prefix-group such requests arriving together
  --interference (c) --decode-streams streams decoding; one --long-prompt-tokens prompt arrives:
                     the streams' worst inter-token gap before vs during its prefill
  --overload     (d) --overload-requests requests at once against --overload-queue: 429s counted,
                     TTFT percentiles of the admitted

Each scenario starts each engine's server afresh (its own log under --out/logs/), sends one
warm-up request, runs, samples VmRSS and the CPU time the server got, stops it. Writes
--out/serve-<date>.md and .json. The machine is shared: the report says so and gives the load.

usage: .venv/bin/python bench/serve_load.py [--engines lumen,llama] [scenario flags] [-t 2]
"""
import argparse
import asyncio
import datetime
import json
import os
import platform
import random
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import servers  # noqa: E402

ROOT = servers.ROOT
ENGINES = ("lumen", "llama")
ENGINE_NAMES = {"lumen": "lumen serve", "llama": "llama.cpp llama-server"}


# ============================================================== prompts

def _vocabulary():
    """Plain English words (from the fixed text of `lumen bench`, src/bench/prompt.c)."""
    src = (ROOT / "src" / "bench" / "prompt.c").read_text()
    m = re.search(r"const char lm_bench_text\[\] =(.*?);\n", src, re.S)
    text = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1))) if m else ""
    words = sorted({w.lower() for w in re.findall(r"[A-Za-z]{2,}", text)})
    return words or ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog"]


VOCAB = _vocabulary()


def words(seed, n):
    """n pseudo-random words, different for every seed from the first word on (no two prompts
    share a prefix, so no prefix cache helps where a scenario does not want it to)."""
    rng = random.Random(seed)
    return "Note %d: " % seed + " ".join(rng.choice(VOCAB) for _ in range(n))


class Prompts:
    """Text of a given token length for this model: the words-per-token ratio is measured once
    on the first server (usage.prompt_tokens of a max_tokens=1 request) and reused for both
    engines, so both see the same text; every result records the prompt tokens each server
    reported."""

    def __init__(self):
        self.ratio = None   # prompt tokens per word, chat template included
        self.overhead = 0   # tokens of a near-empty prompt (template, BOS)

    async def calibrate(self, client, url, endpoint):
        if self.ratio is not None:
            return
        n0 = await count_prompt_tokens(client, url, endpoint, words(999_001, 1))
        n1 = await count_prompt_tokens(client, url, endpoint, words(999_002, 400))
        self.overhead = max(0, n0 - 4)
        self.ratio = max(0.2, (n1 - n0) / 399.0)

    def text(self, seed, tokens):
        n = max(1, round((tokens - self.overhead) / self.ratio))
        return words(seed, n)


async def count_prompt_tokens(client, url, endpoint, text):
    body = request_body(endpoint, text, max_tokens=1, stream=False)
    r = await client.post(url + ENDPOINT_PATH[endpoint], json=body)
    r.raise_for_status()
    u = r.json()["usage"]
    if endpoint == "messages":  # Anthropic's: the prompt is input + cache-read tokens
        return int(u["input_tokens"]) + int(u.get("cache_read_input_tokens") or 0)
    if endpoint == "responses":  # OpenAI Responses': input_tokens is the whole prompt
        return int(u["input_tokens"])
    return int(u["prompt_tokens"])


# ============================================================== one streaming request

ENDPOINT_PATH = {"chat": "/v1/chat/completions", "completions": "/v1/completions", "messages": "/v1/messages",
                 "responses": "/v1/responses"}
SAMPLING = {"temperature": 0.0, "ignore_eos": True}  # set from the command line in main()


def request_body(endpoint, text, max_tokens, stream=True, system=None):
    body = {"max_tokens": max_tokens, "stream": stream}
    body.update(SAMPLING)
    if endpoint == "messages":  # Anthropic's: the system prompt is a top-level field, no stream_options
        if system:
            body["system"] = system
        body["messages"] = [{"role": "user", "content": text}]
        return body
    if endpoint == "responses":  # OpenAI Responses': instructions, input, max_output_tokens
        body["max_output_tokens"] = body.pop("max_tokens")
        if system:
            body["instructions"] = system
        body["input"] = text
        return body
    if endpoint == "chat":
        msgs = [{"role": "system", "content": system}] if system else []
        body["messages"] = msgs + [{"role": "user", "content": text}]
    else:
        body["prompt"] = (system + "\n\n" if system else "") + text
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


class Result:
    __slots__ = ("tag", "t_send", "t_first", "t_end", "times", "status", "error", "usage",
                 "finish", "cancelled", "done", "text", "headers")

    def __init__(self, tag=None):
        self.tag = tag
        self.t_send = time.perf_counter()
        self.t_first = self.t_end = None
        self.times = []        # arrival time of every chunk that carried text
        self.status = None     # HTTP status
        self.error = None
        self.usage = None
        self.finish = None
        self.cancelled = False
        self.done = False      # [DONE] seen
        self.text = []         # the streamed text, chunk by chunk
        self.headers = {}      # the response's headers (a balancer's X-Lumen-Replica)

    @property
    def ok(self):
        return self.status == 200 and self.error is None and self.done

    @property
    def refused(self):
        return self.status is not None and 400 <= self.status < 500

    @property
    def tokens(self):
        if self.usage and isinstance(self.usage.get("completion_tokens"), int):
            return self.usage["completion_tokens"]
        return len(self.times)

    @property
    def prompt_tokens(self):
        return self.usage.get("prompt_tokens") if self.usage else None

    @property
    def ttft(self):
        return self.t_first - self.t_send if self.t_first is not None else None

    @property
    def e2e(self):
        return self.t_end - self.t_send if self.t_end is not None else None

    def gaps(self, t0=None, t1=None):
        """Inter-token gaps whose later token arrived in [t0, t1)."""
        g = []
        for a, b in zip(self.times, self.times[1:]):
            if (t0 is None or b >= t0) and (t1 is None or b < t1):
                g.append(b - a)
        return g


def _anthropic_event(res, j, on_token):
    """One /v1/messages stream event into res (usage in chat's names); True at message_stop."""
    t = j.get("type")
    if t == "message_start":
        u = j["message"].get("usage") or {}
        res.usage = {"prompt_tokens": u.get("input_tokens", 0) + (u.get("cache_read_input_tokens") or 0)}
    elif t == "content_block_delta" and j["delta"].get("type") == "text_delta" and j["delta"].get("text"):
        now = time.perf_counter()
        if res.t_first is None:
            res.t_first = now
        res.times.append(now)
        res.text.append(j["delta"]["text"])
        if on_token:
            on_token(res)
    elif t == "message_delta":
        u = j.get("usage") or {}
        res.usage = {"prompt_tokens": u.get("input_tokens", 0) + (u.get("cache_read_input_tokens") or 0),
                     "completion_tokens": u.get("output_tokens")}
        res.finish = (j.get("delta") or {}).get("stop_reason")
    elif t == "message_stop":
        res.done = True
        return True
    return False


def _responses_event(res, j, on_token):
    """One /v1/responses stream event into res (usage in chat's names); True at its end."""
    t = j.get("type")
    if t == "response.output_text.delta" and j.get("delta"):
        now = time.perf_counter()
        if res.t_first is None:
            res.t_first = now
        res.times.append(now)
        res.text.append(j["delta"])
        if on_token:
            on_token(res)
    elif t in ("response.completed", "response.incomplete", "response.failed"):
        r = j.get("response") or {}
        u = r.get("usage") or {}
        res.usage = {"prompt_tokens": u.get("input_tokens", 0), "completion_tokens": u.get("output_tokens")}
        res.finish = "length" if r.get("status") == "incomplete" else r.get("status")
        res.done = True
        return True
    elif t == "error":
        res.error = str(j.get("message"))[:300]
        return True
    return False


async def stream(client, url, endpoint, body, tag=None, on_token=None):
    """One streaming request; returns its Result (never raises; a cancelled task returns what it
    had, after closing the connection: the server sees the client go away)."""
    res = Result(tag)
    chat = endpoint == "chat"
    try:
        async with client.stream("POST", url + ENDPOINT_PATH[endpoint], json=body) as r:
            res.status = r.status_code
            res.headers = dict(r.headers)
            if r.status_code != 200:
                res.error = (await r.aread()).decode("utf-8", "replace")[:300]
                return res
            async for line in r.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    res.done = True
                    break
                try:
                    j = json.loads(data)
                except ValueError:
                    res.error = "bad JSON in the stream: %r" % data[:100]
                    break
                if j.get("error"):
                    res.error = str(j["error"])[:300]
                    break
                if endpoint == "messages":  # Anthropic's events, read into the same Result
                    if _anthropic_event(res, j, on_token):
                        break
                    continue
                if endpoint == "responses":  # OpenAI Responses' events, likewise
                    if _responses_event(res, j, on_token):
                        break
                    continue
                ch = j.get("choices") or []
                if ch:
                    c = ch[0]
                    text = (c.get("delta") or {}).get("content") if chat else c.get("text")
                    if text:
                        t = time.perf_counter()
                        if res.t_first is None:
                            res.t_first = t
                        res.times.append(t)
                        res.text.append(text)
                        if on_token:
                            on_token(res)
                    if c.get("finish_reason"):
                        res.finish = c["finish_reason"]
                if j.get("usage"):
                    res.usage = j["usage"]
    except asyncio.CancelledError:
        res.cancelled = True
    except (httpx.HTTPError, OSError) as e:
        res.error = "%s: %s" % (type(e).__name__, e)
    finally:
        res.t_end = time.perf_counter()
    return res


# ============================================================== statistics

def pct(xs, p):
    """Percentile p (0-100) by linear interpolation between closest ranks; None if empty."""
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def dist_ms(xs):
    xs = [x * 1000.0 for x in xs if x is not None]
    if not xs:
        return None
    return {"n": len(xs), "p50": pct(xs, 50), "p90": pct(xs, 90), "p99": pct(xs, 99),
            "max": max(xs), "mean": statistics.fmean(xs)}


def summarize(results, t0, t1):
    ok = [r for r in results if r.ok]
    toks = sum(r.tokens for r in ok)
    gaps = [g for r in ok for g in r.gaps()]
    wall = max(1e-9, t1 - t0)
    return {
        "requests": len(results), "ok": len(ok), "refused": sum(1 for r in results if r.refused),
        "failed": sum(1 for r in results if not r.ok and not r.refused and not r.cancelled),
        "cut": sum(1 for r in results if r.cancelled),  # cancelled by us at the time limit
        "status": dict(sorted(_count((str(r.status) if r.status else "none (cut)" if r.cancelled else "none")
                                     for r in results).items())),
        "errors": sorted({r.error for r in results if r.error and not r.refused})[:5],
        "prompt_tokens": _mean([r.prompt_tokens for r in ok]),
        "completion_tokens": toks, "wall_s": wall, "agg_tok_s": toks / wall,
        "ttft_ms": dist_ms([r.ttft for r in ok]), "itl_ms": dist_ms(gaps),
        "e2e_ms": dist_ms([r.e2e for r in ok]),
        "per_stream_tok_s": _mean([(r.tokens - 1) / (r.times[-1] - r.times[0])
                                   for r in ok if len(r.times) > 1 and r.times[-1] > r.times[0]]),
    }


def _count(xs):
    d = {}
    for x in xs:
        d[x] = d.get(x, 0) + 1
    return d


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


# ============================================================== scenarios

def task_result(t):
    """A finished stream() task's Result (a task cancelled before it ran has none: make one)."""
    if t.cancelled():
        r = Result()
        r.cancelled = True
        r.t_end = time.perf_counter()
        return r
    return t.result()


async def run_budget(tasks, deadline):
    """Wait for the tasks until the deadline, then cancel what is left; their results."""
    left = deadline - time.perf_counter()
    done, pending = await asyncio.wait(tasks, timeout=max(0.0, left))
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending)
    return [task_result(t) for t in tasks]


async def scenario_concurrency(ctx, n):
    """(a) n closed-loop clients; ctx.args.requests_per_client requests each."""
    a = ctx.args
    results = []
    seeds = iter(range(ctx.seed_base, ctx.seed_base + 10**6))

    async def client_loop():
        for _ in range(a.requests_per_client):
            body = request_body(a.endpoint, ctx.prompts.text(next(seeds), a.prompt_tokens), a.max_tokens)
            r = await stream(ctx.client, ctx.url, a.endpoint, body)
            results.append(r)
            if not r.ok:
                break

    t0 = time.perf_counter()
    tasks = [asyncio.create_task(client_loop()) for _ in range(n)]
    done, pending = await asyncio.wait(tasks, timeout=a.time_limit)
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending)
    t1 = time.perf_counter()
    s = summarize(results, t0, t1)
    s.update(clients=n, timed_out=bool(pending))
    return s


async def scenario_prefix(ctx):
    """(b) shared system prompt: cold request, then the next (warm) one, then a group at once."""
    a = ctx.args
    system = ctx.prompts.text(ctx.seed_base + 7, a.prefix_tokens)
    q = lambda i: "Question %d: %s" % (i, words(ctx.seed_base + 100 + i, 12))  # noqa: E731
    deadline = time.perf_counter() + a.time_limit
    out = {}
    cold = await asyncio.wait_for(stream(ctx.client, ctx.url, a.endpoint,
                                         request_body(a.endpoint, q(0), a.prefix_max_tokens, system=system)),
                                  timeout=a.time_limit)
    warm = await asyncio.wait_for(stream(ctx.client, ctx.url, a.endpoint,
                                         request_body(a.endpoint, q(1), a.prefix_max_tokens, system=system)),
                                  timeout=max(1.0, deadline - time.perf_counter()))
    t0 = time.perf_counter()
    tasks = [asyncio.create_task(stream(ctx.client, ctx.url, a.endpoint,
                                        request_body(a.endpoint, q(2 + i), a.prefix_max_tokens, system=system)))
             for i in range(a.prefix_group)]
    group = await run_budget(tasks, deadline)
    t1 = time.perf_counter()
    # a different system prompt of the same length, alone: the cold TTFT once more, after the
    # group, so that "warm" has a baseline taken under the same conditions
    other = ctx.prompts.text(ctx.seed_base + 8, a.prefix_tokens)
    cold2 = await asyncio.wait_for(stream(ctx.client, ctx.url, a.endpoint,
                                          request_body(a.endpoint, q(99), a.prefix_max_tokens, system=other)),
                                   timeout=a.time_limit)

    def one(r):
        cached = None
        if r.usage:
            cached = (r.usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        return {"ok": r.ok, "status": r.status, "ttft_ms": r.ttft * 1000 if r.ttft else None,
                "prompt_tokens": r.prompt_tokens, "cached_tokens": cached,
                "e2e_ms": r.e2e * 1000 if r.e2e else None, "error": r.error}

    out["cold"] = one(cold)
    out["warm"] = one(warm)
    out["cold_again"] = one(cold2)
    g = summarize(group, t0, t1)
    g["each"] = [one(r) for r in group]
    out["group"] = g
    return out


async def scenario_interference(ctx, k):
    """(c) k streams decode; a long prompt arrives; gaps before vs during its prefill."""
    a = ctx.args
    started = asyncio.Event()
    decoding = set()

    def on_token(r):
        if len(r.times) >= 4:
            decoding.add(id(r))
            if len(decoding) >= k:
                started.set()

    deadline = time.perf_counter() + a.time_limit
    streams = [asyncio.create_task(stream(ctx.client, ctx.url, a.endpoint,
                                          request_body(a.endpoint, ctx.prompts.text(ctx.seed_base + i, a.prompt_tokens),
                                                       a.stream_max_tokens),
                                          tag="stream", on_token=on_token))
               for i in range(k)]
    try:
        await asyncio.wait_for(started.wait(), timeout=a.time_limit)
    except asyncio.TimeoutError:
        pass
    t_before0 = time.perf_counter()
    await asyncio.sleep(a.baseline_s)
    t_long = time.perf_counter()
    long_body = request_body(a.endpoint, ctx.prompts.text(ctx.seed_base + 500, a.long_prompt_tokens),
                             a.long_max_tokens)
    long_task = asyncio.create_task(stream(ctx.client, ctx.url, a.endpoint, long_body, tag="long"))
    (long_r,) = await run_budget([long_task], deadline)
    t_long_first = long_r.t_first or long_r.t_end
    await asyncio.sleep(a.after_s)
    t_stop = time.perf_counter()
    for t in streams:  # cancel: close the connections (the streams may still be decoding)
        if not t.done():
            t.cancel()
    await asyncio.wait(streams)
    res = [task_result(t) for t in streams]
    before = [g for r in res for g in r.gaps(t_before0, t_long)]
    during = [g for r in res for g in r.gaps(t_long, t_long_first + 1e-9)]
    after = [g for r in res for g in r.gaps(t_long_first, t_stop)]
    stalled = [r for r in res if not r.times or r.times[-1] < t_long]
    return {
        "streams": k, "streams_decoding_at_start": len(decoding),
        "stream_errors": sorted({r.error for r in res if r.error})[:3],
        "streams_without_tokens_after_long_arrived": len(stalled),
        "long": {"ok": long_r.ok, "status": long_r.status, "prompt_tokens": long_r.prompt_tokens,
                 "ttft_ms": long_r.ttft * 1000 if long_r.ttft else None,
                 "e2e_ms": long_r.e2e * 1000 if long_r.e2e else None, "error": long_r.error},
        "before": {"window_s": t_long - t_before0, "worst_gap_ms": max(before) * 1000 if before else None,
                   "itl_ms": dist_ms(before)},
        "during": {"window_s": t_long_first - t_long, "worst_gap_ms": max(during) * 1000 if during else None,
                   "itl_ms": dist_ms(during)},
        "after": {"window_s": t_stop - t_long_first, "worst_gap_ms": max(after) * 1000 if after else None,
                  "itl_ms": dist_ms(after)},
    }


async def scenario_overload(ctx):
    """(d) many requests at once against a small queue."""
    a = ctx.args
    t0 = time.perf_counter()
    tasks = [asyncio.create_task(stream(ctx.client, ctx.url, a.endpoint,
                                        request_body(a.endpoint, ctx.prompts.text(ctx.seed_base + i, a.prompt_tokens),
                                                     a.overload_max_tokens)))
             for i in range(a.overload_requests)]
    res = await run_budget(tasks, t0 + a.time_limit)
    t1 = time.perf_counter()
    s = summarize(res, t0, t1)
    s["refused_429"] = sum(1 for r in res if r.status == 429)
    s["first_refusal_ms"] = min(((r.t_end - r.t_send) * 1000 for r in res if r.status == 429), default=None)
    return s


# ============================================================== servers

class Ctx:
    pass


def server_argv(a, engine, parallel, queue=None):
    tmpl = ["--chat-template", a.chat_template] if a.chat_template else []
    if engine == "lumen":
        return servers.lumen_serve_argv(a.lumen_bin, a.model, threads=a.threads, parallel=parallel,
                                        ctx=a.ctx, queue=queue, extra=tmpl + shlex.split(a.lumen_args))
    # llama-server reads --chat-template as Jinja source unless --no-jinja selects its built-ins
    tmpl = ["--no-jinja"] + tmpl if tmpl else []
    return servers.llama_server_argv(a.llama_server, a.model, threads=a.threads, parallel=parallel,
                                     ctx=a.ctx, extra=tmpl + shlex.split(a.llama_args))


async def with_server(a, engine, name, parallel, queue, body, prompts, log_dir, seed_base):
    """Start `engine`'s server, warm it up, run body(ctx), stop it; the record of the run."""
    argv = server_argv(a, engine, parallel, queue)
    log = log_dir / ("%s-%s.log" % (name, engine))
    srv = servers.Server(engine, argv, log_path=log)
    srv.start(timeout=180)
    rss = []
    stop_sampling = asyncio.Event()

    async def sample():
        while not stop_sampling.is_set():
            v = srv.rss_kib()
            if v:
                rss.append(v)
            try:
                await asyncio.wait_for(stop_sampling.wait(), 0.25)
            except asyncio.TimeoutError:
                pass

    limits = httpx.Limits(max_connections=512, max_keepalive_connections=64)
    timeout = httpx.Timeout(a.request_timeout, connect=30.0)
    rec = {"engine": engine, "argv": argv, "log": str(log), "ready_s": srv.ready_s}
    try:
        async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
            ctx = Ctx()
            ctx.args, ctx.client, ctx.url, ctx.prompts, ctx.seed_base = a, client, srv.url, prompts, seed_base
            await prompts.calibrate(client, srv.url, a.endpoint)
            w = await stream(client, srv.url, a.endpoint, request_body(a.endpoint, words(seed_base - 1, 20), 8))
            if not w.ok:
                raise RuntimeError("%s: warm-up request failed: %s %s" % (engine, w.status, w.error))
            sampler = asyncio.create_task(sample())
            rss_start = srv.rss_kib()
            cpu0, t0 = srv.cpu_s(), time.perf_counter()
            try:
                rec["result"] = await body(ctx)
            finally:
                stop_sampling.set()
                await sampler
            cpu1, t1 = srv.cpu_s(), time.perf_counter()
            if cpu0 is not None and cpu1 is not None:
                # how much of the 2 cores the server got: on a loaded machine, less than it wanted
                rec["cpu"] = {"cpu_s": cpu1 - cpu0, "wall_s": t1 - t0, "cores": (cpu1 - cpu0) / max(1e-9, t1 - t0)}
            rec["rss_kib"] = {"start": rss_start, "peak": max(rss) if rss else None, "end": srv.rss_kib()}
    finally:
        code = srv.stop()
        rec["exit_code"] = code
        rep = srv.sanitizer_report()
        if rep:
            rec["sanitizer_report"] = rep[:2000]
    return rec


# ============================================================== report

def f(x, nd=1):
    return "-" if x is None else ("%.*f" % (nd, x))


def d(dist, key, nd=1):
    return "-" if not dist else f(dist.get(key), nd)


def machine_info():
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        git = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "-uno"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        git, dirty = "", ""
    return {"cpu": cpu, "nproc": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "httpx": httpx.__version__,
            "git": git + ("+dirty" if dirty else ""), "loadavg_start": os.getloadavg()}


def write_md(rep, path):
    a = rep["settings"]
    L = []
    L.append("# serve_load: %s vs %s" % tuple(ENGINE_NAMES[e] for e in a["engines"])
             if len(a["engines"]) == 2 else "# serve_load: %s" % ENGINE_NAMES[a["engines"][0]])
    L.append("")
    m = rep["machine"]
    L.append("%s, git %s; %s (%s cores); load average %s at start, %s at end. **This machine is shared "
             "with other engineers' builds and tests: it was loaded, so compare the engines within this run, "
             "not with other runs.**" % (rep["date"], m["git"], m["cpu"], m["nproc"],
                                        "/".join("%.2f" % x for x in m["loadavg_start"]),
                                        "/".join("%.2f" % x for x in rep["loadavg_end"])))
    L.append("")
    L.append("Command: `%s`" % rep["command"])
    L.append("")
    L.append("Client: %d-token prompts (measured text, see each table), endpoint %s, temperature %s, "
             "ignore_eos %s, streaming with `stream_options.include_usage`; TTFT = request sent to first "
             "content chunk; ITL = gaps between content chunks; tok/s from `usage.completion_tokens` "
             "over the scenario's wall time; percentiles interpolate between ranks." % (
                 a["prompt_tokens"], a["endpoint"], a["temperature"], a["ignore_eos"]))
    L.append("")
    L.append("Server CPU (cores) = CPU seconds the server process used during the scenario / its wall time: "
             "what it got of the 2 cores while other work ran on the machine.")
    L.append("")
    L.append("Servers (each scenario starts each afresh; engines alternate, order flipped every other scenario):")
    L.append("")
    for e in a["engines"]:
        L.append("- %s: `%s`" % (ENGINE_NAMES[e], " ".join(rep["argv_example"][e])))
    L.append("")
    for note in rep["notes"]:
        L.append("- " + note)
    L.append("")
    sc = rep["scenarios"]
    if "concurrency" in sc:
        L.append("## (a) concurrent streams: %d-token prompts, max_tokens %d, %d requests per client" % (
            a["prompt_tokens"], a["max_tokens"], a["requests_per_client"]))
        L.append("")
        L.append("| clients | engine | ok / refused / failed | prompt tok | agg tok/s | per-stream tok/s "
                 "| TTFT p50 / p90 / p99 ms | ITL p50 / p90 / p99 / max ms | E2E p50 / p99 ms | peak RSS MiB "
                 "| server CPU (cores) |")
        L.append("| ---: | --- | --- | ---: | ---: | ---: | --- | --- | --- | ---: | ---: |")
        for row in sc["concurrency"]:
            for rec in row["runs"]:
                r = rec["result"]
                L.append("| %d | %s | %d / %d / %d%s | %s | %s | %s | %s / %s / %s | %s / %s / %s / %s | %s / %s | %s | %s |" % (
                    row["clients"], rec["engine"], r["ok"], r["refused"], r["failed"],
                    " (%d cut at the time limit)" % r["cut"] if r["cut"] else "", f(r["prompt_tokens"], 0), f(r["agg_tok_s"]),
                    f(r["per_stream_tok_s"]),
                    d(r["ttft_ms"], "p50"), d(r["ttft_ms"], "p90"), d(r["ttft_ms"], "p99"),
                    d(r["itl_ms"], "p50"), d(r["itl_ms"], "p90"), d(r["itl_ms"], "p99"), d(r["itl_ms"], "max"),
                    d(r["e2e_ms"], "p50", 0), d(r["e2e_ms"], "p99", 0), f(_mib(rec), 0), _cores(rec)))
        L.append("")
    if "prefix" in sc:
        L.append("## (b) shared %d-token system prompt (prefix reuse), max_tokens %d, group of %d" % (
            a["prefix_tokens"], a["prefix_max_tokens"], a["prefix_group"]))
        L.append("")
        L.append("| engine | prompt tok | cold TTFT ms | next request TTFT ms (cached tok) | "
                 "group of %d TTFT p50 / max ms | cold again (other prompt) ms | peak RSS MiB | server CPU (cores) |"
                 % a["prefix_group"])
        L.append("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
        for rec in sc["prefix"]:
            r = rec["result"]
            g = r["group"]
            L.append("| %s | %s | %s | %s (%s) | %s / %s (%d ok) | %s | %s | %s |" % (
                rec["engine"], r["cold"]["prompt_tokens"], f(r["cold"]["ttft_ms"]), f(r["warm"]["ttft_ms"]),
                r["warm"]["cached_tokens"] if r["warm"]["cached_tokens"] is not None else "n/a",
                d(g["ttft_ms"], "p50"), d(g["ttft_ms"], "max"), g["ok"], f(r["cold_again"]["ttft_ms"]),
                f(_mib(rec), 0), _cores(rec)))
        L.append("")
    if "interference" in sc:
        L.append("## (c) a %d-token prompt arrives while streams decode (streams: %d-token prompts, "
                 "max_tokens %d)" % (a["long_prompt_tokens"], a["prompt_tokens"], a["stream_max_tokens"]))
        L.append("")
        L.append("\"during\" runs from the long request's arrival to its first token (its prefill); \"before\" "
                 "is the %.1f s before it arrived." % a["baseline_s"])
        L.append("")
        L.append("| streams | engine | long prompt tok | long TTFT ms | worst gap before ms | worst gap during ms "
                 "| ITL p50 before / during ms | during window ms | streams stalled | server CPU (cores) |")
        L.append("| ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
        for row in sc["interference"]:
            for rec in row["runs"]:
                r = rec["result"]
                L.append("| %d | %s | %s | %s | %s | %s | %s / %s | %s | %s | %s |" % (
                    r["streams"], rec["engine"], r["long"]["prompt_tokens"], f(r["long"]["ttft_ms"]),
                    f(r["before"]["worst_gap_ms"]), f(r["during"]["worst_gap_ms"]),
                    d(r["before"]["itl_ms"], "p50"), d(r["during"]["itl_ms"], "p50"),
                    f(r["during"]["window_s"] * 1000, 0), r["streams_without_tokens_after_long_arrived"], _cores(rec)))
        L.append("")
    if "overload" in sc:
        L.append("## (d) overload: %d requests at once, %d-token prompts, max_tokens %d, parallel %d, queue %d" % (
            a["overload_requests"], a["prompt_tokens"], a["overload_max_tokens"], a["overload_parallel"],
            a["overload_queue"]))
        L.append("")
        L.append("| engine | answered | refused 429 | failed | cut at the time limit | statuses | first refusal ms "
                 "| admitted TTFT p50 / p99 / max ms | agg tok/s | wall s | server CPU (cores) |")
        L.append("| --- | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: |")
        for rec in sc["overload"]:
            r = rec["result"]
            L.append("| %s | %d | %d | %d | %d | %s | %s | %s / %s / %s | %s | %s | %s |" % (
                rec["engine"], r["ok"], r["refused_429"], r["failed"], r["cut"],
                ", ".join("%s: %d" % kv for kv in r["status"].items()), f(r["first_refusal_ms"]),
                d(r["ttft_ms"], "p50"), d(r["ttft_ms"], "p99"), d(r["ttft_ms"], "max"), f(r["agg_tok_s"]),
                f(r["wall_s"], 1), _cores(rec)))
        L.append("")
    problems = [(rec["engine"], rec.get("sanitizer_report") or "") for rec in _records(sc)
                if rec.get("sanitizer_report")]
    for e, rep_ in problems:
        L.append("**%s: sanitizer report in its log** (%s)" % (e, rep_.splitlines()[0] if rep_ else ""))
    Path(path).write_text("\n".join(L) + "\n")


def _cores(rec):
    c = rec.get("cpu")
    return "%.2f" % c["cores"] if c else "-"


def _mib(rec):
    p = (rec.get("rss_kib") or {}).get("peak")
    return p / 1024.0 if p else None


def _records(sc):
    for k, v in sc.items():
        for item in v:
            if "runs" in item:
                yield from item["runs"]
            else:
                yield item


# ============================================================== main

def int_list(s):
    try:
        xs = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("not a comma-separated list of integers: %r" % s)
    if not xs or any(x < 1 for x in xs):
        raise argparse.ArgumentTypeError("need positive integers: %r" % s)
    return xs


def positive(s):
    v = int(s)
    if v < 1:
        raise argparse.ArgumentTypeError("must be >= 1: %r" % s)
    return v


def parse_args(argv=None):
    class Fmt(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
        pass

    ap = argparse.ArgumentParser(
        prog="serve_load.py", description=__doc__.rsplit("\nusage:", 1)[0],
        formatter_class=Fmt,
        epilog="Every scenario starts each engine's server with the same model, threads (-t), parallel "
               "sequences and context (--ctx); llama-server also gets -kvu (one KV cache shared by its "
               "slots, like lumen's pool) and --cont-batching. Loopback only.")
    g = ap.add_argument_group("servers")
    g.add_argument("--engines", default="lumen,llama",
                   help="comma-separated, from: lumen (lumen serve), llama (llama.cpp's llama-server)")
    g.add_argument("-m", "--model", default=str(servers.default_model()), help="GGUF model for both servers")
    g.add_argument("-t", "--threads", type=positive, default=2, help="threads of each server")
    g.add_argument("--parallel", type=positive, default=8,
                   help="sequences decoded together (lumen --parallel, llama-server --parallel slots); "
                        "(a) and (c) need at least their largest N")
    g.add_argument("--ctx", type=positive, default=32768,
                   help="KV cells of each server: lumen --ctx-size (its KV pool), llama-server -c (unified over its slots)")
    g.add_argument("--lumen-bin", default=str(ROOT / "build" / "lumen"), help="lumen binary")
    g.add_argument("--llama-server", default=None,
                   help="llama-server binary (default: .reference/bin's, from bench/reference.py)")
    g.add_argument("--chat-template", default=None,
                   help="built-in chat template for both servers (lumen --chat-template, llama-server "
                        "--no-jinja --chat-template), e.g. gemma; default: each server's own choice "
                        "for the model")
    g.add_argument("--lumen-args", default="", help="extra arguments for lumen serve (one string)")
    g.add_argument("--llama-args", default="", help="extra arguments for llama-server (one string)")

    g = ap.add_argument_group("client")
    g.add_argument("--endpoint", choices=("chat", "completions", "messages", "responses"), default="chat",
                   help="/v1/chat/completions, /v1/completions, /v1/messages (Anthropic's) or /v1/responses "
                        "(OpenAI Responses)")
    g.add_argument("--temperature", type=float, default=0.0, help="sampling temperature of every request")
    g.add_argument("--no-ignore-eos", dest="ignore_eos", action="store_false",
                   help="do not send ignore_eos=true (by default every request generates max_tokens)")
    g.add_argument("--prompt-tokens", type=positive, default=128,
                   help="prompt length of (a), of the streams of (c) and of (d)")
    g.add_argument("--request-timeout", type=float, default=300.0, help="seconds without a byte before a request fails")
    g.add_argument("--time-limit", type=float, default=180.0,
                   help="seconds per scenario step and engine; what is still running then is cancelled")
    g.add_argument("--seed", type=int, default=1, help="seed of the prompt words")

    g = ap.add_argument_group("scenarios (none given: all)")
    g.add_argument("--concurrency", action="store_true", help="(a) N concurrent streams, N in --clients")
    g.add_argument("--clients", type=int_list, default=[1, 4, 8], help="(a) the values of N")
    g.add_argument("--max-tokens", type=positive, default=64, help="(a) max_tokens of each request")
    g.add_argument("--requests-per-client", type=positive, default=3, help="(a) requests each client sends, one after another")
    g.add_argument("--prefix", action="store_true", help="(b) shared system prompt: cold, next, group")
    g.add_argument("--prefix-tokens", type=positive, default=1500, help="(b) system prompt length")
    g.add_argument("--prefix-group", type=positive, default=4, help="(b) requests arriving together")
    g.add_argument("--prefix-max-tokens", type=positive, default=16, help="(b) max_tokens of each request")
    g.add_argument("--interference", action="store_true", help="(c) a long prompt arrives while streams decode")
    g.add_argument("--decode-streams", type=int_list, default=[4], help="(c) numbers of decoding streams, e.g. 4,8")
    g.add_argument("--long-prompt-tokens", type=positive, default=3000, help="(c) the long prompt's length")
    g.add_argument("--long-max-tokens", type=positive, default=8, help="(c) max_tokens of the long request")
    g.add_argument("--stream-max-tokens", type=positive, default=2048,
                   help="(c) max_tokens of the streams (they are cancelled once the long request is done)")
    g.add_argument("--baseline-s", type=float, default=2.0, help="(c) seconds of decoding measured before the long prompt")
    g.add_argument("--after-s", type=float, default=1.0, help="(c) seconds the streams go on after the long request")
    g.add_argument("--overload", action="store_true", help="(d) many requests at once against a small queue")
    g.add_argument("--overload-requests", type=positive, default=64, help="(d) requests sent at once")
    g.add_argument("--overload-parallel", type=positive, default=4, help="(d) the servers' parallel sequences")
    g.add_argument("--overload-queue", type=positive, default=8,
                   help="(d) lumen serve --queue (requests held beyond --parallel: it answers 429 once running + queued reach parallel + queue); llama-server has no such limit")
    g.add_argument("--overload-max-tokens", type=positive, default=32, help="(d) max_tokens of each request")

    g = ap.add_argument_group("output")
    g.add_argument("--out", default=str(ROOT / "bench" / "results"), help="folder of serve-<date>.md/.json (and logs/)")
    g.add_argument("--no-write", action="store_true", help="print the report, write nothing but the server logs")
    a = ap.parse_args(argv)

    a.engines = [e.strip() for e in a.engines.split(",") if e.strip()]
    bad = [e for e in a.engines if e not in ENGINES]
    if bad or not a.engines or len(set(a.engines)) != len(a.engines):
        ap.error("--engines: %r: use lumen and/or llama" % ",".join(a.engines))
    if not (a.concurrency or a.prefix or a.interference or a.overload):
        a.concurrency = a.prefix = a.interference = a.overload = True
    if a.concurrency and max(a.clients) > a.parallel:
        ap.error("--clients %d exceeds --parallel %d" % (max(a.clients), a.parallel))
    if a.interference and max(a.decode_streams) + 1 > a.parallel:
        ap.error("--decode-streams %d needs --parallel of at least %d" % (max(a.decode_streams), max(a.decode_streams) + 1))
    if not Path(a.model).is_file():
        ap.error("model %s not found" % a.model)
    if "lumen" in a.engines and not os.access(a.lumen_bin, os.X_OK):
        ap.error("lumen binary %s not found (cmake --build build)" % a.lumen_bin)
    if "llama" in a.engines and a.llama_server is None:
        import reference
        try:
            a.llama_server = reference.tool("llama-server")
        except reference.ReferenceMissing as e:
            ap.error(str(e))
    return a


async def run_all(a, log_dir):
    prompts = Prompts()
    sc = {}
    flip = [False]

    def order():
        es = list(a.engines)
        if flip[0]:
            es.reverse()
        flip[0] = not flip[0]
        return es

    seed = a.seed * 1_000_000

    async def both(name, parallel, queue, body):
        nonlocal seed
        runs = []
        for e in order():
            seed += 10_000
            print("[serve_load] %s: %s ..." % (name, e), file=sys.stderr, flush=True)
            rec = await with_server(a, e, name, parallel, queue, body, prompts, log_dir, seed)
            runs.append(rec)
            print("[serve_load] %s: %s done" % (name, e), file=sys.stderr, flush=True)
        return sorted(runs, key=lambda r: a.engines.index(r["engine"]))

    if a.concurrency:
        sc["concurrency"] = []
        for n in a.clients:
            runs = await both("a-clients%d" % n, a.parallel, None, lambda ctx, n=n: scenario_concurrency(ctx, n))
            sc["concurrency"].append({"clients": n, "runs": runs})
    if a.prefix:
        sc["prefix"] = await both("b-prefix", a.parallel, None, scenario_prefix)
    if a.interference:
        sc["interference"] = []
        for k in a.decode_streams:
            runs = await both("c-streams%d" % k, a.parallel, None, lambda ctx, k=k: scenario_interference(ctx, k))
            sc["interference"].append({"streams": k, "runs": runs})
    if a.overload:
        sc["overload"] = await both("d-overload", a.overload_parallel, a.overload_queue, scenario_overload)
    return sc, prompts


def main(argv=None):
    a = parse_args(argv)
    servers.stop_servers_on_sigterm()
    SAMPLING["temperature"] = a.temperature
    if a.ignore_eos:
        SAMPLING["ignore_eos"] = True
    else:
        SAMPLING.pop("ignore_eos", None)
    now = datetime.datetime.now()
    out = Path(a.out)
    log_dir = out / "logs" / ("serve-" + now.strftime("%Y-%m-%d-%H%M"))
    log_dir.mkdir(parents=True, exist_ok=True)
    machine = machine_info()
    sc, prompts = asyncio.run(run_all(a, log_dir))
    notes = [
        "llama-server has no bound on waiting requests (no --queue): in (d) it queues all of them.",
        "llama-server keeps its prompt cache on (default; also --cache-ram 8192 MiB of host memory); "
        "lumen serve reuses prefixes through its KV pool's prefix index.",
        "Prompt text calibrated on the first server at %.3f tokens per word (+%d); both engines get the same text." % (
            prompts.ratio or 0, prompts.overhead),
    ]
    settings = {k: v for k, v in vars(a).items()}
    rep = {
        "date": now.strftime("%Y-%m-%d %H:%M"), "machine": machine, "loadavg_end": os.getloadavg(),
        "command": " ".join(shlex.quote(x) for x in [sys.executable, *sys.argv]),
        "settings": settings, "notes": notes,
        "argv_example": {e: server_argv(a, e, a.parallel) for e in a.engines},
        "scenarios": sc,
    }
    if a.no_write:
        tmp = log_dir / "report.md"
        write_md(rep, tmp)
        print(tmp.read_text())
        return 0
    stem = out / ("serve-" + now.strftime("%Y-%m-%d-%H%M"))
    stem.with_suffix(".json").write_text(json.dumps(rep, indent=1, default=str) + "\n")
    write_md(rep, stem.with_suffix(".md"))
    print(stem.with_suffix(".md").read_text())
    print("[serve_load] wrote %s.md and .json; server logs in %s" % (stem, log_dir), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
