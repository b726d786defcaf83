#!/usr/bin/env python3
"""Speed of one lumen build against another (before / after a change), in one run, rounds
alternating the builds so that both see the same machine: per round and build
  single    `lumen bench -p 512 -n 128` at each -t (pp512, tg128 tok/s)
  run       `lumen run -n 128 --ignore-eos` at each -t, greedy and seeded (the stats line's
            generation tok/s: the command line's own loop through the engine)
  parallel  `lumen bench --parallel 8 -p 64 -n 128` at the largest -t (forward tok/s)
  serve     bench/serve_load.py --concurrency at --clients (aggregate tok/s of lumen serve)
and reports per metric the median of the per-round ratios new / old, with their range.
The builds alternate order from round to round (old first, then new first, ...).

  .venv/bin/python bench/ab.py OLD NEW [-r 5] [-t 1,2] [--parts single,run,parallel,serve]

OLD and NEW are lumen binaries or trees holding build/lumen. Writes
bench/results/ab-<date>.md and .json (--out DIR). The machine is shared and noisy: quote
the medians of ratios, never one run's absolute rate.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def binary(p):
    b = os.path.join(p, "build", "lumen") if os.path.isdir(p) else p
    if not os.access(b, os.X_OK):
        sys.exit(f"ab: {b} is not an executable lumen")
    return os.path.abspath(b)


def bench_json(argv):
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def run_single(lumen, model, threads):
    d = bench_json([lumen, "bench", "-m", model, "-p", "512", "-n", "128", "-r", "3", "--warmup", "1",
                    "-t", ",".join(map(str, threads)), "--bw-mib", "0", "-o", "json"])
    res = {}
    for t in d["tests"]:
        if t["kind"] in ("pp", "tg"):
            res[f"{t['test']} t{t['n_threads']}"] = t["median_ts"]
    return res


RUN_PROMPT = "Once upon a time, in a small village by the sea,"


def run_run(lumen, model, threads):
    res = {}
    for t in threads:
        for name, flags in (("greedy", ["--temp", "0"]), ("seeded", ["--seed", "7"])):
            p = subprocess.run([lumen, "run", "-m", model, "-p", RUN_PROMPT, "-n", "128", "--ignore-eos",
                                "-t", str(t)] + flags, check=True, capture_output=True, text=True)
            m = re.search(r"gen (\d+) tok, ([0-9.]+) tok/s", p.stderr)
            if not m:
                sys.exit(f"ab: no stats line from {lumen} run: {p.stderr[-300:]}")
            res[f"run {name} t{t}"] = float(m.group(2))
    return res


def run_parallel(lumen, model, threads, n):
    d = bench_json([lumen, "bench", "-m", model, "--parallel", str(n), "-p", "64", "-n", "128", "-r", "1",
                    "-t", str(threads), "--bw-mib", "0", "-o", "json"])
    t = d["tests"][0]
    return {f"parallel {n} fwd t{threads}": t["fwd_tok_s"], f"parallel {n} gen t{threads}": t["gen_tok_s"]}


def run_serve(lumen, model, threads, clients, tmp):
    out = os.path.join(tmp, "serve")
    subprocess.run([sys.executable, os.path.join(HERE, "serve_load.py"), "--engines", "lumen",
                    "--lumen-bin", lumen, "-m", model, "-t", str(threads), "--concurrency",
                    "--clients", str(clients), "--chat-template", "gemma", "--out", out],
                   check=True, capture_output=True, text=True)
    files = sorted(f for f in os.listdir(out) if f.startswith("serve-") and f.endswith(".json"))
    d = json.load(open(os.path.join(out, files[-1])))
    res = {}
    for sc in d["scenarios"]["concurrency"]:
        for r in sc["runs"]:
            res[f"serve {sc['clients']} streams agg t{threads}"] = r["result"]["agg_tok_s"]
    for f in os.listdir(out):  # one report per run
        if f.startswith("serve-"):
            os.remove(os.path.join(out, f))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("-r", "--rounds", type=int, default=5)
    ap.add_argument("-t", "--threads", default="1,2")
    ap.add_argument("-m", "--model", default=os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--parts", default="single,parallel,serve")
    ap.add_argument("--parallel-n", type=int, default=8)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    builds = {"old": binary(args.old), "new": binary(args.new)}
    threads = [int(x) for x in args.threads.split(",")]
    parts = args.parts.split(",")
    rates = {"old": {}, "new": {}}  # metric -> [per round]
    tmp = tempfile.mkdtemp(prefix="lumen-ab-")
    for rnd in range(args.rounds):
        order = ["old", "new"] if rnd % 2 == 0 else ["new", "old"]
        for side in order:
            lumen = builds[side]
            res = {}
            if "single" in parts:
                res.update(run_single(lumen, args.model, threads))
            if "run" in parts:
                res.update(run_run(lumen, args.model, threads))
            if "parallel" in parts:
                res.update(run_parallel(lumen, args.model, max(threads), args.parallel_n))
            if "serve" in parts:
                res.update(run_serve(lumen, args.model, max(threads), args.clients, tmp))
            for k, v in res.items():
                rates[side].setdefault(k, []).append(v)
            print(f"round {rnd + 1} {side}: " + ", ".join(f"{k} {v:.1f}" for k, v in res.items()), flush=True)
    rows = []
    for k in rates["old"]:
        o, n = rates["old"][k], rates["new"].get(k, [])
        ratios = [b / a for a, b in zip(o, n) if a > 0]
        rows.append({"metric": k, "old_median": statistics.median(o), "new_median": statistics.median(n),
                     "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
                     "ratio_max": max(ratios), "ratios": ratios})
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    os.makedirs(args.out, exist_ok=True)
    base = os.path.join(args.out, f"ab-{stamp}")
    load = os.getloadavg()
    with open(base + ".json", "w") as f:
        json.dump({"date": stamp, "old": builds["old"], "new": builds["new"], "rounds": args.rounds,
                   "threads": threads, "model": args.model, "loadavg_end": load, "rates": rates,
                   "rows": rows}, f, indent=1)
    lines = [f"# lumen A/B: {builds['new']} against {builds['old']}", "",
             f"`{' '.join(sys.argv)}`: {args.rounds} rounds, builds alternating (order swapped each "
             f"round), model {os.path.basename(args.model)}; load average at the end "
             f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}. Ratio: new / old per round.", "",
             "| metric | old median | new median | new / old (median of rounds) | range |",
             "| --- | ---: | ---: | ---: | --- |"]
    for r in rows:
        lines.append(f"| {r['metric']} | {r['old_median']:.1f} | {r['new_median']:.1f} | "
                     f"{r['ratio_median']:.3f} | {r['ratio_min']:.3f}-{r['ratio_max']:.3f} |")
    text = "\n".join(lines) + "\n"
    with open(base + ".md", "w") as f:
        f.write(text)
    print(text)
    print(f"ab: wrote {base}.md and .json")


if __name__ == "__main__":
    main()
