#!/usr/bin/env python3
"""Trace-driven load for lumen replicas behind HAProxy (deploy/haproxy/): multi-turn chat
conversations of several tenants, each tenant with its own long system prompt; conversations
arrive as a Poisson process, each turn is sent when the previous answer has arrived plus a
think time, and the answer joins the history. The skewed trace has one tenant start most of
the conversations. The same trace (same seed: same arrivals, tenants, turns and texts; greedy
answers, the same on any replica) runs against each balancing policy:

  prefix      the committed configuration: consistent hash of the conversation's first
              messages, bounded load (hash-balance-factor 150)
  roundrobin  / leastconn: the same file with HAProxy's balance line replaced
  single      one replica with all the threads and all the KV pool, no balancer

Per run: the prefix-cache hit rate in tokens (usage.prompt_tokens_details.cached_tokens over
prompt_tokens; and each replica's /metrics), TTFT p50/p90, aggregate generated tok/s, requests
and in-flight requests per replica (HAProxy's stats sampled every 0.25 s), how often a turn
landed on its conversation's previous replica. Writes --out/serve-trace-<date>.md and .json.

usage: .venv/bin/python bench/serve_trace.py [--policies prefix,roundrobin,leastconn,single]
           [--traces balanced,skewed] [--replicas 3] [-t 1] [--duration 90] [--rate 0.2]
"""
import argparse
import asyncio
import datetime
import json
import math
import os
import re
import random
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cluster  # noqa: E402
import servers  # noqa: E402
from serve_load import VOCAB, dist_ms, machine_info, stream  # noqa: E402

ROOT = servers.ROOT
# the committed load bound (hash-balance-factor 150 in deploy/haproxy/haproxy.cfg) as a factor
BALANCE_FACTOR = int(re.search(r"^\s*hash-balance-factor (\d+)", cluster.CONFIG.read_text(), re.M).group(1)) / 100


# ============================================================== the trace

class Conversation:
    __slots__ = ("cid", "tenant", "t_arrive", "users", "thinks")

    def __init__(self, cid, tenant, t_arrive, users, thinks):
        self.cid, self.tenant, self.t_arrive = cid, tenant, t_arrive
        self.users = users      # the user's message of each turn
        self.thinks = thinks    # seconds between an answer and the next turn


def system_prompt(tenant, n_words, seed):
    rng = random.Random(seed * 1000 + tenant)
    return ("You are the assistant of tenant %d. Follow these notes: " % tenant +
            " ".join(rng.choice(VOCAB) for _ in range(n_words)))


def make_trace(a, skewed, seed):
    """Conversations arriving as a Poisson process of rate a.rate over a.duration seconds;
    tenants uniform, or tenant 0 with probability a.skew (the skewed trace)."""
    rng = random.Random(seed)
    convs, t = [], 0.0
    while True:
        t += rng.expovariate(a.rate)
        if t >= a.duration:
            break
        if skewed:
            tenant = 0 if rng.random() < a.skew else 1 + rng.randrange(a.tenants - 1)
        else:
            tenant = rng.randrange(a.tenants)
        n = rng.randint(a.turns_min, a.turns_max)
        users = ["(conversation %d, turn %d) " % (len(convs), k) +
                 " ".join(rng.choice(VOCAB) for _ in range(a.user_words)) for k in range(n)]
        thinks = [rng.expovariate(1.0 / a.think) for _ in range(n)]
        convs.append(Conversation(len(convs), tenant, t, users, thinks))
    return convs


# ============================================================== running it

class Turn:
    __slots__ = ("cid", "tenant", "k", "res", "replica")

    def __init__(self, cid, tenant, k, res):
        self.cid, self.tenant, self.k, self.res = cid, tenant, k, res
        self.replica = res.headers.get("x-lumen-replica", "single")


async def run_conversation(client, url, conv, systems, a, t0, out):
    await asyncio.sleep(max(0.0, t0 + conv.t_arrive - time.perf_counter()))
    msgs = [{"role": "system", "content": systems[conv.tenant]}]
    for k, user in enumerate(conv.users):
        msgs.append({"role": "user", "content": user})
        body = {"messages": msgs, "max_tokens": a.max_tokens, "temperature": 0.0, "stream": True,
                "stream_options": {"include_usage": True}}
        res = await stream(client, url, "chat", body, tag=(conv.cid, k))
        out.append(Turn(conv.cid, conv.tenant, k, res))
        if not res.ok:
            return  # a failed turn ends its conversation (its history is lost)
        msgs.append({"role": "assistant", "content": "".join(res.text)})
        await asyncio.sleep(conv.thinks[k])


async def sample_load(c, samples, stop):
    """HAProxy's in-flight requests per replica (scur), every 0.25 s until stop is set."""
    while not stop.is_set():
        try:
            st = c.stats()
            samples.append({name: int(row.get("scur") or 0) for name, row in st.items()})
        except OSError:
            pass
        try:
            await asyncio.wait_for(stop.wait(), 0.25)
        except asyncio.TimeoutError:
            pass


async def drive(url, trace, systems, a, lb=None):
    """Runs the trace against url; (turns, wall seconds, load samples)."""
    out, samples, stop = [], [], asyncio.Event()
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=httpx.Timeout(a.timeout, connect=10), limits=limits) as client:
        sampler = asyncio.ensure_future(sample_load(lb, samples, stop)) if lb else None
        t0 = time.perf_counter()
        tasks = [asyncio.ensure_future(run_conversation(client, url, cv, systems, a, t0, out)) for cv in trace]
        _, pending = await asyncio.wait(tasks, timeout=a.duration + a.grace)
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.wait(pending)
        wall = time.perf_counter() - t0
        stop.set()
        if sampler:
            await sampler
    return out, wall, samples


# ============================================================== figures

def summarize(turns, wall, samples, per_replica, names):
    ok = [t for t in turns if t.res.ok]
    prompt = sum(t.res.usage["prompt_tokens"] for t in ok if t.res.usage)
    cached = sum((t.res.usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
                 for t in ok if t.res.usage)
    gen = sum(t.res.tokens for t in ok)
    by_conv = {}
    for t in sorted(ok, key=lambda t: (t.cid, t.k)):
        by_conv.setdefault(t.cid, []).append(t.replica)
    follow = [b == a for reps in by_conv.values() for a, b in zip(reps, reps[1:])]
    counts = {n: sum(1 for t in turns if t.replica == n) for n in names}
    mean_count = statistics.fmean(counts.values()) if counts else 0
    inflight = {n: [s.get(n, 0) for s in samples] for n in names} if samples else {}
    # the load bound, checked where HAProxy applies it: at every sample, the busiest replica's
    # in-flight requests against the mean over replicas (samples with at least one per replica)
    ratios, above_bound, busy = [], 0, 0
    for s in samples:
        tot = sum(s.get(n, 0) for n in names)
        if tot >= len(names):
            ratios.append(max(s.get(n, 0) for n in names) / (tot / len(names)))
        if tot:  # HAProxy's own bound: ceil(factor x the mean), whole requests
            busy += 1
            above_bound += max(s.get(n, 0) for n in names) > math.ceil(BALANCE_FACTOR * tot / len(names) - 1e-9)
    means = {n: statistics.fmean(v) for n, v in inflight.items()} if samples else None
    return {
        "requests": len(turns), "ok": len(ok),
        "failed": len(turns) - len(ok),
        "errors": sorted({str(t.res.status) + " " + (t.res.error or "")[:120] for t in turns if not t.res.ok})[:5],
        "conversations": len(by_conv),
        "prompt_tokens": prompt, "cached_tokens": cached,
        "hit_rate": cached / prompt if prompt else None,
        "ttft_ms": dist_ms([t.res.ttft for t in ok]),
        # first turns miss under any placement (only the system prompt can be cached); the
        # later turns are where placement decides whether the conversation's history is there
        "ttft_first_turn_ms": dist_ms([t.res.ttft for t in ok if t.k == 0]),
        "ttft_later_turns_ms": dist_ms([t.res.ttft for t in ok if t.k > 0]),
        "e2e_ms": dist_ms([t.res.e2e for t in ok]),
        "generated_tokens": gen, "wall_s": wall, "agg_tok_s": gen / wall if wall else None,
        "same_replica_as_previous_turn": sum(follow) / len(follow) if follow else None,
        "requests_per_replica": counts,
        "max_over_mean_requests": max(counts.values()) / mean_count if mean_count else None,
        "inflight_mean": means,
        "inflight_mean_max_over_mean": (max(means.values()) / statistics.fmean(means.values())
                                        if means and statistics.fmean(means.values()) else None),
        "samples_above_bound": {"above": above_bound, "busy_samples": busy,
                                "factor": BALANCE_FACTOR} if samples else None,
        "inflight_max": {n: max(v) for n, v in inflight.items()} if samples else None,
        "inflight_max_over_mean": {"p50": statistics.median(ratios), "max": max(ratios),
                                   "samples": len(ratios)} if ratios else None,
        "replica_metrics": per_replica,
    }


def replica_counters(metrics_list):
    keys = ("lumen_prefix_cache_hits_total", "lumen_prefix_cache_queries_total",
            "lumen_prompt_tokens_total", "lumen_generation_tokens_total")
    return [{k: m.get(k, 0.0) for k in keys} for m in metrics_list]


def delta(after, before):
    out = []
    for a, b in zip(after, before):
        d = {k: a[k] - b.get(k, 0.0) for k in a}
        q = d["lumen_prefix_cache_queries_total"]
        d["hit_rate"] = d["lumen_prefix_cache_hits_total"] / q if q else None
        out.append(d)
    return out


async def warm(url):
    """One request, so the first turn of the trace does not pay for a cold start."""
    async with httpx.AsyncClient(timeout=120) as client:
        r = await client.post(url + "/v1/chat/completions",
                              json={"messages": [{"role": "user", "content": "warm up"}], "max_tokens": 2})
        r.raise_for_status()


def run_policy(a, policy, trace, systems, log_dir):
    """Starts the replicas (and HAProxy), runs the trace, stops them; the summary."""
    if policy == "single":
        threads = a.single_threads or a.replicas * a.threads
        ctx = a.ctx * a.replicas  # the same KV memory in one pool
        argv = servers.lumen_serve_argv(a.bin, threads=threads, parallel=a.parallel * a.replicas,
                                        ctx=ctx, queue=a.queue)
        with servers.Server("single", argv, log_path=log_dir / "single.log") as s:
            asyncio.run(warm(s.url))
            before = replica_counters([cluster.parse_metrics(s.get("/metrics")[1])])
            turns, wall, samples = asyncio.run(drive(s.url, trace, systems, a))
            after = replica_counters([cluster.parse_metrics(s.get("/metrics")[1])])
        summary = summarize(turns, wall, samples, delta(after, before), ["single"])
        summary["setup"] = "1 replica, -t %d, --parallel %d, -c %d" % (threads, a.parallel * a.replicas, ctx)
        return summary
    with cluster.Cluster(a.replicas, a.bin, threads=a.threads, parallel=a.parallel, queue=a.queue, ctx=a.ctx,
                         policy=policy, log_dir=log_dir / policy) as c:
        for i in range(a.replicas):  # one warm-up per replica, straight to it
            asyncio.run(warm(c.replicas[i].url))
        before = replica_counters([c.metrics(i) for i in range(a.replicas)])
        turns, wall, samples = asyncio.run(drive(c.url, trace, systems, a, lb=c))
        after = replica_counters([c.metrics(i) for i in range(a.replicas)])
    summary = summarize(turns, wall, samples, delta(after, before), [r.name for r in c.replicas])
    summary["setup"] = "%d replicas, -t %d each, --parallel %d, -c %d each, HAProxy %s" % (
        a.replicas, a.threads, a.parallel, a.ctx, policy)
    return summary


# ============================================================== report

def f(x, nd=1):
    return "-" if x is None else ("%.*f" % (nd, x))


def write_md(rep, path):
    a = rep["args"]
    L = ["# lumen replicas behind HAProxy: one trace, four placements (%s)" % rep["date"], ""]
    L.append("Command: `%s`" % rep["command"])
    L.append("")
    L.append("Machine: %s (%s cores), git %s. **Shared**: other builds and tests ran at the same time; "
             "load average at the start %.2f, at the end %.2f. One run, no repetitions." % (
                 rep["machine"].get("cpu", "?"), rep["machine"].get("nproc", "?"), rep["machine"].get("git", "?"),
                 rep["load_start"], rep["load_end"]))
    L.append("")
    single = a["single_threads"] or a["replicas"] * a["threads"]
    L.append("Threads: %d replicas x %d = %d, the single replica %d, on %s cores%s." % (
        a["replicas"], a["threads"], a["replicas"] * a["threads"], single, rep["machine"].get("nproc", "?"),
        " (over-subscribed: the replicas share the cores with each other and with HAProxy and the client)"
        if a["replicas"] * a["threads"] > (rep["machine"].get("nproc") or 0) else
        " (HAProxy and the client share them too)"))
    L.append("")
    L.append("Trace: %d tenants, system prompts of %d words, conversations arriving at %.2f/s "
             "(Poisson) for %d s, %d-%d turns of %d words, think time %.1f s (exponential), "
             "max_tokens %d, greedy. Skewed: tenant 0 starts %.0f%% of the conversations." % (
                 a["tenants"], a["system_words"], a["rate"], a["duration"], a["turns_min"], a["turns_max"],
                 a["user_words"], a["think"], a["max_tokens"], 100 * a["skew"]))
    L.append("")
    for tr, runs in rep["runs"].items():
        L.append("## %s trace" % tr)
        L.append("")
        L.append("| placement | ok / requests | hit rate (tokens) | TTFT p50 ms | TTFT p90 ms | tok/s | "
                 "same replica as last turn | requests per replica | max/mean requests | "
                 "in-flight max/mean (p50, max) | mean in-flight max/mean | samples above bound | setup |")
        L.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for pol, s in runs.items():
            tt = s["ttft_ms"] or {}
            im = s.get("inflight_max_over_mean") or {}
            ab = s.get("samples_above_bound")
            L.append("| %s | %d / %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                pol, s["ok"], s["requests"], f(100 * s["hit_rate"] if s["hit_rate"] is not None else None) + "%",
                f(tt.get("p50"), 0), f(tt.get("p90"), 0), f(s["agg_tok_s"]),
                f(100 * s["same_replica_as_previous_turn"] if s["same_replica_as_previous_turn"] is not None
                  else None) + "%",
                " ".join("%s:%d" % kv for kv in s["requests_per_replica"].items()),
                f(s["max_over_mean_requests"], 2),
                "%s, %s" % (f(im.get("p50"), 2), f(im.get("max"), 2)) if im else "-",
                f(s.get("inflight_mean_max_over_mean"), 2),
                "%d / %d" % (ab["above"], ab["busy_samples"]) if ab else "-", s["setup"]))
        L.append("")
        L.append("TTFT p50 / p90 ms of first turns and of later turns: " + "; ".join(
            "%s: %s / %s and %s / %s" % (pol, f((s.get("ttft_first_turn_ms") or {}).get("p50"), 0),
                                         f((s.get("ttft_first_turn_ms") or {}).get("p90"), 0),
                                         f((s.get("ttft_later_turns_ms") or {}).get("p50"), 0),
                                         f((s.get("ttft_later_turns_ms") or {}).get("p90"), 0))
            for pol, s in runs.items()))
        L.append("")
        L.append("Per replica (its /metrics: prefix-cache hits / queries in tokens): " + "; ".join(
            "%s: %s" % (pol, ", ".join(f(100 * r["hit_rate"]) + "%" if r["hit_rate"] is not None else "-"
                                       for r in s["replica_metrics"]))
            for pol, s in runs.items()))
        L.append("")
    if rep.get("goals"):
        L.append("## Against the goals")
        L.append("")
        if rep.get("balanced_from"):
            L.append("The balanced trace's figures below come from %s (its own run)." % rep["balanced_from"])
            L.append("")
        for g in rep["goals"]:
            L.append("- " + g)
        L.append("")
    L.append("Errors, if any: " + json.dumps({tr: {p: s["errors"] for p, s in runs.items() if s["errors"]}
                                              for tr, runs in rep["runs"].items()}))
    path.write_text("\n".join(L) + "\n")


def goals(runs):
    out = []
    b = runs.get("balanced", {})
    if "prefix" in b and "single" in b and b["single"]["hit_rate"]:
        r = b["prefix"]["hit_rate"] / b["single"]["hit_rate"]
        out.append("hit rate with affinity / a single replica's: %.2f (goal >= 0.90, floor 0.75)" % r)
    if "prefix" in b and "roundrobin" in b and b["prefix"]["ttft_ms"] and b["roundrobin"]["ttft_ms"]:
        r = b["roundrobin"]["ttft_ms"]["p90"] / b["prefix"]["ttft_ms"]["p90"]
        out.append("p90 TTFT round robin / affinity: %.2fx (goal >= 3x, floor 2x)" % r)
    s = runs.get("skewed", {}).get("prefix")
    if s:
        ab = s.get("samples_above_bound") or {}
        out.append("skewed trace, affinity: busiest replica's requests / mean %.2f; its mean in-flight "
                   "requests / the replicas' mean %s; in-flight, busiest / mean at a sample with at least "
                   "one request per replica: median %s, max %s; samples with the busiest above HAProxy's "
                   "bound ceil(%.1f x mean in flight): %s of %s (goal: no replica above 1.5x the mean)" % (
                       s["max_over_mean_requests"] or 0, f(s.get("inflight_mean_max_over_mean"), 2),
                       f((s["inflight_max_over_mean"] or {}).get("p50"), 2),
                       f((s["inflight_max_over_mean"] or {}).get("max"), 2),
                       BALANCE_FACTOR, ab.get("above", "-"), ab.get("busy_samples", "-")))
        if "prefix" in b and b["prefix"]["hit_rate"]:
            out.append("skewed hit rate / balanced: %.2f (goal >= 0.70)" % (s["hit_rate"] / b["prefix"]["hit_rate"]))
    return out


# ============================================================== command line

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=str(ROOT / "build" / "lumen"))
    p.add_argument("--policies", default="prefix,roundrobin,leastconn,single")
    p.add_argument("--traces", default="balanced,skewed")
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("-t", "--threads", type=int, default=1, help="threads of each replica")
    p.add_argument("--single-threads", type=int, default=0,
                   help="threads of the single replica (default: replicas x threads)")
    p.add_argument("--parallel", type=int, default=8, help="--parallel of each replica")
    p.add_argument("--queue", type=int, default=64)
    p.add_argument("--ctx", type=int, default=8192, help="KV pool tokens of each replica")
    p.add_argument("--tenants", type=int, default=8)
    p.add_argument("--system-words", type=int, default=250)
    p.add_argument("--rate", type=float, default=0.2, help="conversations per second")
    p.add_argument("--duration", type=float, default=90, help="seconds of arrivals")
    p.add_argument("--grace", type=float, default=240, help="seconds after the last arrival")
    p.add_argument("--turns-min", type=int, default=4)
    p.add_argument("--turns-max", type=int, default=8)
    p.add_argument("--user-words", type=int, default=80)
    p.add_argument("--think", type=float, default=2.0, help="mean think time, seconds")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--skew", type=float, default=0.7, help="skewed: tenant 0's share")
    p.add_argument("--timeout", type=float, default=300, help="one request's client timeout")
    p.add_argument("--seed", type=int, default=25)
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    p.add_argument("--balanced-from", default=None,
                   help="a serve-trace JSON whose balanced trace the goals compare with, when this "
                        "run has none (the traces run as separate runs)")
    return p.parse_args(argv)


def main(argv=None):
    a = parse_args(argv)
    servers.stop_servers_on_sigterm()
    policies = [x for x in a.policies.split(",") if x]
    traces = [x for x in a.traces.split(",") if x]
    for p in policies:
        if p not in cluster.POLICIES + ("single",):
            sys.exit("serve_trace: unknown policy %r" % p)
    if any(p != "single" for p in policies) and not cluster.haproxy_binary():
        sys.exit("serve_trace: haproxy is not installed (bash scripts/setup.sh --haproxy)")
    date = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    out = Path(a.out)
    log_dir = out / "logs" / ("serve-trace-" + date)
    log_dir.mkdir(parents=True, exist_ok=True)
    rep = {"date": date, "command": " ".join([".venv/bin/python", "bench/serve_trace.py"] + (argv or sys.argv[1:])),
           "args": vars(a), "machine": machine_info(), "load_start": os.getloadavg()[0], "runs": {}}
    systems = [system_prompt(t, a.system_words, a.seed) for t in range(a.tenants)]
    for tr in traces:
        trace = make_trace(a, tr == "skewed", a.seed)
        rep["runs"][tr] = {}
        for p in policies:
            if tr == "skewed" and p == "single":
                continue  # one replica has no balance to keep
            print("serve_trace: %s trace (%d conversations, %d turns), %s ..." % (
                tr, len(trace), sum(len(c.users) for c in trace), p), flush=True)
            s = run_policy(a, p, trace, systems, log_dir / tr)
            rep["runs"][tr][p] = s
            print("  ok %d/%d, hit rate %s, TTFT p50 %s p90 %s ms, %s tok/s, per replica %s" % (
                s["ok"], s["requests"], f(100 * (s["hit_rate"] or 0)), f((s["ttft_ms"] or {}).get("p50"), 0),
                f((s["ttft_ms"] or {}).get("p90"), 0), f(s["agg_tok_s"]), s["requests_per_replica"]), flush=True)
    rep["load_end"] = os.getloadavg()[0]
    runs = dict(rep["runs"])
    if a.balanced_from and "balanced" not in runs:
        runs["balanced"] = json.loads(Path(a.balanced_from).read_text())["runs"]["balanced"]
        rep["balanced_from"] = Path(a.balanced_from).name
    rep["goals"] = goals(runs)
    md = out / ("serve-trace-%s.md" % date)
    (out / ("serve-trace-%s.json" % date)).write_text(json.dumps(rep, indent=1, default=str))
    write_md(rep, md)
    print("serve_trace: wrote %s" % md)
    for g in rep["goals"]:
        print("  " + g)


if __name__ == "__main__":
    main()
