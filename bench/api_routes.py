#!/usr/bin/env python3
"""Do the agent APIs cost anything? One `lumen serve` on one model, driven through chat
completions, Anthropic Messages and OpenAI Responses in alternating rounds (chat, messages,
responses, then messages, responses, chat, ...: the order rotates), the same load in each: S closed-loop streaming clients, the
same prompts (one set per round, sent to every route), max_tokens, temperature 0 and ignore_eos,
so every answer has max_tokens tokens. The prefix cache is off (--no-prefix-cache) so that a
route never reuses the KV of the same prompt sent through the route before it.

Per stream count S and route: aggregate tokens/s and TTFT p50 of each round, and per round the
ratio to that round's chat completions (throughput: route / chat, higher is better; TTFT:
route / chat, lower is better); the report gives each ratio's median over the rounds with its
spread (min-max), and whether the median is within --goal (issue 36: 3%). The requests, the
streaming and the statistics are bench/serve_load.py's (its --endpoint machinery).

Writes --out/api-routes-<date>.md and .json. The machine is shared: run it with nothing else
heavy going on, and read the spread before the medians.

usage: .venv/bin/python bench/api_routes.py [-m model.gguf] [--streams 1,8] [--rounds 5]
"""
import argparse
import asyncio
import datetime
import json
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_load as sl  # noqa: E402
import servers  # noqa: E402

ROOT = servers.ROOT
ROUTES = ("chat", "messages", "responses")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=str(servers.default_model()), help="GGUF model")
    ap.add_argument("-t", "--threads", type=sl.positive, default=2, help="threads of the server")
    ap.add_argument("--parallel", type=sl.positive, default=8, help="the server's --parallel")
    ap.add_argument("--ctx", type=sl.positive, default=8192, help="the server's --ctx-size (KV pool tokens)")
    ap.add_argument("--lumen-bin", default=str(ROOT / "build" / "lumen"), help="lumen binary")
    ap.add_argument("--lumen-args", default="", help="extra arguments for lumen serve (one string)")
    ap.add_argument("--routes", default=",".join(ROUTES),
                    help="routes in round order; the first is the baseline (default chat,messages,responses)")
    ap.add_argument("--streams", type=sl.int_list, default=[1, 8], help="concurrent streams S, e.g. 1,8")
    ap.add_argument("--rounds", type=sl.positive, default=5, help="rounds per stream count (each runs every route)")
    ap.add_argument("--requests-per-stream", type=sl.positive, default=2,
                    help="requests each stream sends, one after another, per route and round")
    ap.add_argument("--prompt-tokens", type=sl.positive, default=128, help="prompt length (calibrated)")
    ap.add_argument("--max-tokens", type=sl.positive, default=64, help="max_tokens of every request")
    ap.add_argument("--goal", type=float, default=0.03, help="allowed cost of a route against the baseline")
    ap.add_argument("--request-timeout", type=float, default=300.0, help="seconds without a byte before a request fails")
    ap.add_argument("--time-limit", type=float, default=300.0, help="seconds one route of one round may take")
    ap.add_argument("--seed", type=int, default=1, help="seed of the prompt words")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"), help="folder of api-routes-<date>.md/.json")
    ap.add_argument("--no-write", action="store_true", help="print the report, write nothing but the server log")
    a = ap.parse_args(argv)
    a.routes = [r.strip() for r in a.routes.split(",") if r.strip()]
    bad = [r for r in a.routes if r not in ROUTES]
    if bad or len(a.routes) < 2 or len(set(a.routes)) != len(a.routes):
        ap.error("--routes: two or more of %s, each once (got %s)" % (", ".join(ROUTES), ",".join(a.routes)))
    return a


# ============================================================== one route, one round

async def run_route(client, url, route, texts, max_tokens, time_limit):
    """len(texts) closed-loop streams on route, stream c sending texts[c] one after another;
    serve_load's summary (agg_tok_s, ttft_ms, ...) of all their requests."""
    results = []

    async def loop(mine):
        for text in mine:
            r = await sl.stream(client, url, route, sl.request_body(route, text, max_tokens))
            results.append(r)
            if not r.ok:
                break

    t0 = time.perf_counter()
    tasks = [asyncio.create_task(loop(mine)) for mine in texts]
    _, pending = await asyncio.wait(tasks, timeout=time_limit)
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending)
    s = sl.summarize(results, t0, time.perf_counter())
    s["timed_out"] = bool(pending)
    s["finish"] = dict(sorted(sl._count(str(r.finish) for r in results).items()))
    return s


async def run_all(a, log):
    argv = servers.lumen_serve_argv(a.lumen_bin, a.model, threads=a.threads, parallel=a.parallel, ctx=a.ctx,
                                    extra=["--no-prefix-cache"] + shlex.split(a.lumen_args))
    srv = servers.Server("lumen", argv, log_path=log)
    srv.start(timeout=180)
    prompts = sl.Prompts()
    out = {"argv": argv, "ready_s": srv.ready_s, "by_streams": []}
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=64)
    timeout = httpx.Timeout(a.request_timeout, connect=30.0)
    try:
        async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
            await prompts.calibrate(client, srv.url, a.routes[0])
            for route in a.routes:  # warm-up: each route answers once before anything is measured
                w = await sl.stream(client, srv.url, route, sl.request_body(route, sl.words(a.seed - 1, 20), 8))
                if not w.ok:
                    raise RuntimeError("warm-up on %s failed: %s %s" % (route, w.status, w.error))
            cpu0, t0 = srv.cpu_s(), time.perf_counter()
            for n in a.streams:
                rounds = []
                for k in range(a.rounds):
                    base = a.seed * 10**6 + n * 10**4 + k * 100
                    texts = [[prompts.text(base + c * a.requests_per_stream + i, a.prompt_tokens)
                              for i in range(a.requests_per_stream)] for c in range(n)]
                    rec = {}
                    order = a.routes[k % len(a.routes):] + a.routes[:k % len(a.routes)]  # rotated per round
                    for route in order:
                        rec[route] = await run_route(client, srv.url, route, texts, a.max_tokens, a.time_limit)
                        print("[api_routes] S=%d round %d %-9s %6.1f tok/s  TTFT p50 %s ms" % (
                            n, k + 1, route, rec[route]["agg_tok_s"], sl.d(rec[route]["ttft_ms"], "p50")),
                            file=sys.stderr)
                    rounds.append(rec)
                out["by_streams"].append({"streams": n, "rounds": rounds, "ratios": ratios(a.routes, rounds)})
            cpu1, t1 = srv.cpu_s(), time.perf_counter()
            if cpu0 is not None and cpu1 is not None:
                out["cpu"] = {"cpu_s": cpu1 - cpu0, "wall_s": t1 - t0, "cores": (cpu1 - cpu0) / max(1e-9, t1 - t0)}
    finally:
        out["exit_code"] = srv.stop()
    out["prompt_ratio"], out["prompt_overhead"] = prompts.ratio, prompts.overhead
    return out


# ============================================================== ratios and the report

def spread(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def ratios(routes, rounds):
    """Per route but the baseline: its throughput and TTFT p50 over the baseline's, per round."""
    base = routes[0]
    out = {}
    for route in routes[1:]:
        tp, ttft, ttfm = [], [], []
        for rec in rounds:
            b, r = rec[base], rec[route]
            tp.append(r["agg_tok_s"] / b["agg_tok_s"] if b["agg_tok_s"] and r["ok"] == r["requests"] else None)
            bt, rt = (b["ttft_ms"] or {}).get("p50"), (r["ttft_ms"] or {}).get("p50")
            ttft.append(rt / bt if bt and rt else None)
            bm, rm = (b["ttft_ms"] or {}).get("mean"), (r["ttft_ms"] or {}).get("mean")
            ttfm.append(rm / bm if bm and rm else None)
        out[route] = {"throughput": spread(tp), "ttft_p50": spread(ttft), "ttft_mean": spread(ttfm),
                      "per_round_throughput": tp, "per_round_ttft_p50": ttft, "per_round_ttft_mean": ttfm}
    return out


def _ratio_cell(s):
    if not s:
        return "-"
    return "%.3f (%.3f-%.3f)" % (s["median"], s["min"], s["max"])


def _verdict(q, goal):
    # TTFT judged on each round's mean over its requests: with S streams arriving together, a
    # round's p50 swings with the order the prefills happen to run in (the p50 ratio is shown too)
    tp, tt = q["throughput"], q.get("ttft_mean")
    if not tp or not tt:
        return "no data"
    ok = tp["median"] >= 1.0 - goal and tt["median"] <= 1.0 + goal
    return "yes" if ok else "no"


def write_md(rep, path):
    a, res = rep["settings"], rep["result"]
    base = a["routes"][0]
    L = ["# The API routes against %s: lumen serve, %s" % (base, rep["date"]), "",
         "Model `%s`, %d threads, --parallel %d, prefix cache off; %d rounds per stream count, routes in the order "
         "%s in the first round, rotating by one each round; per route and round %d request(s) per stream, prompt ~%d tokens, max_tokens %d, "
         "temperature 0, ignore_eos." % (Path(a["model"]).name, a["threads"], a["parallel"], a["rounds"],
                                         ", ".join(a["routes"]), a["requests_per_stream"], a["prompt_tokens"],
                                         a["max_tokens"]), "",
         "Ratios are per round against that round's %s; the cell is the median over the rounds (min-max). "
         "The routes' order rotates from round to round. Within goal: throughput ratio >= %.2f and TTFT mean "
         "ratio <= %.2f (a round's mean over its requests; its p50 swings with the order in which the "
         "streams' prefills happen to run)." % (base, 1 - a["goal"], 1 + a["goal"]), ""]
    for s in res["by_streams"]:
        n, rounds = s["streams"], s["rounds"]
        L += ["## %d stream%s" % (n, "" if n == 1 else "s"), "",
              "| route | tok/s (median) | TTFT p50 ms (median) | prompt tokens | completion tokens | ok / requests "
              "| tok/s vs %s | TTFT mean vs %s | TTFT p50 vs %s | within %g%% |" % (base, base, base, a["goal"] * 100),
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
        for route in a["routes"]:
            recs = [rec[route] for rec in rounds]
            tps = statistics.median(r["agg_tok_s"] for r in recs)
            ttfts = [(r["ttft_ms"] or {}).get("p50") for r in recs]
            ttft = statistics.median([x for x in ttfts if x is not None]) if any(x is not None for x in ttfts) else None
            pt = sl._mean([r["prompt_tokens"] for r in recs])
            ct = sum(r["completion_tokens"] for r in recs)
            ok = "%d / %d" % (sum(r["ok"] for r in recs), sum(r["requests"] for r in recs))
            q = s["ratios"].get(route)
            L.append("| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s |" % (
                route, sl.f(tps), sl.f(ttft), sl.f(pt), ct, ok, _ratio_cell(q["throughput"]) if q else "1",
                _ratio_cell(q.get("ttft_mean")) if q else "1", _ratio_cell(q["ttft_p50"]) if q else "1",
                _verdict(q, a["goal"]) if q else "-"))
        L.append("")
    m = rep["machine"]
    L += ["## Run", "", "- command: `%s`" % rep["command"], "- server: `%s`" % " ".join(res["argv"]),
          "- machine: %s, %s CPUs, load average %s at the start, %s at the end" % (
              m["cpu"], m["nproc"], " ".join("%.2f" % x for x in m["loadavg_start"]),
              " ".join("%.2f" % x for x in rep["loadavg_end"])),
          "- server CPU: %s cores on average while measuring" % sl.f((res.get("cpu") or {}).get("cores"), 2),
          "- git %s; prompt text calibrated at %.3f tokens per word (+%d)" % (
              m["git"], res.get("prompt_ratio") or 0, res.get("prompt_overhead") or 0), ""]
    Path(path).write_text("\n".join(L))


def main(argv=None):
    a = parse_args(argv)
    servers.stop_servers_on_sigterm()
    sl.SAMPLING.update({"temperature": 0.0, "ignore_eos": True})
    now = datetime.datetime.now()
    out = Path(a.out)
    log_dir = out / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / ("api-routes-%s.log" % now.strftime("%Y-%m-%d-%H%M"))
    machine = sl.machine_info()
    res = asyncio.run(run_all(a, log))
    rep = {"date": now.strftime("%Y-%m-%d %H:%M"), "machine": machine, "loadavg_end": os.getloadavg(),
           "command": " ".join(shlex.quote(x) for x in [sys.executable, *sys.argv]),
           "settings": dict(vars(a)), "result": res}
    if a.no_write:
        tmp = log_dir / "api-routes-report.md"
        write_md(rep, tmp)
        print(tmp.read_text())
        return 0
    stem = out / ("api-routes-" + now.strftime("%Y-%m-%d-%H%M"))
    stem.with_suffix(".json").write_text(json.dumps(rep, indent=1, default=str) + "\n")
    write_md(rep, stem.with_suffix(".md"))
    print(stem.with_suffix(".md").read_text())
    print("[api_routes] wrote %s.md and .json; server log %s" % (stem, log), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
