#!/usr/bin/env python3
"""`lumen run` decode rate against `lumen bench` tg128 on the same model and threads.

`lumen bench -n 128` times 128 single-token forward passes (lm_decode only: no sampling, no
detokenization, no output). `lumen run -n 128` reports `gen N tok, X tok/s`: the tokens after
the first over the time from the first sampled token to the end of the run, so every step
there is one forward pass plus sampling, detokenization and writing the text. This script
runs both, alternating process by process, and reports each one's median and the ratio
run / bench, per thread count and sampling mode:
  - greedy:  `lumen run --temp 0`
  - sampled: `lumen run --seed S` with the default chain (temp 0.8, top-k 40, top-p 0.95,
             min-p 0.05)
  - greedy-unfused, sampled-unfused: the same with --no-fused-top-k (the sampler's own pass
             over the full logits instead of the LM head's fused top-k selection)
Both run modes generate -n tokens with --ignore-eos (text to /dev/null); bench runs
`lumen bench -p 0 -n N -r 1 --warmup 1 --bw-mib 0` (one timed tg run after one warm-up).
Each round runs, per thread count, bench and the run modes in an order that rotates from
round to round; the medians over the rounds and the median of the per-round ratios (each run
against the bench run of its own round) are both reported. Processes on a shared machine
differ by several percent from one to the next, more than what this compares, so the runs
also pass --verbose, whose last line splits the run's own decode steps into forward passes,
sampling and detokenization + output: their medians (us per token) and the share of the
steps' time spent outside the forward pass are measured within each process.

usage: .venv/bin/python bench/run_vs_bench.py [-r 7] [-t 1,2] [-n 128] [--model M]
                                              [--json out.json]
Run it when nothing else loads the cores (on a shared machine, under a lock the other jobs honour).
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "Once upon a time, in a small village by the sea,"
GEN_RE = re.compile(r"gen (\d+) tok, ([0-9.]+) tok/s")
STEPS_RE = re.compile(r"decode steps: forward ([0-9.]+) us/tok .*sampling ([0-9.]+) us/tok, "
                      r"detokenize \+ output ([0-9.]+) us/tok, other ([0-9.]+) us/tok")


def bench_tg(lumen, model, threads, n):
    out = subprocess.run([lumen, "bench", "-m", model, "-p", "0", "-n", str(n), "-r", "1",
                          "--warmup", "1", "--bw-mib", "0", "-t", str(threads), "-o", "json"],
                         check=True, capture_output=True, text=True).stdout
    for t in json.loads(out)["tests"]:
        if t["kind"] == "tg":
            return t["median_ts"]
    sys.exit("run_vs_bench.py: no tg row in lumen bench's output")


def run_gen(lumen, model, threads, n, mode, seed):
    args = [lumen, "run", "-m", model, "-p", PROMPT, "-n", str(n), "--ignore-eos",
            "-t", str(threads), "--verbose"]
    args += ["--temp", "0"] if mode.startswith("greedy") else ["--seed", str(seed)]
    if mode.endswith("-unfused"):
        args.append("--no-fused-top-k")
    p = subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    m, st = GEN_RE.search(p.stderr), STEPS_RE.search(p.stderr)
    if not m or int(m.group(1)) != n or not st:
        sys.exit("run_vs_bench.py: unexpected `lumen run` stats lines: %r" % p.stderr[-400:])
    fwd, smp, out, other = (float(x) for x in st.groups())
    return float(m.group(2)), {"sample_us": smp, "output_us": out,
                               "outside": (smp + out + other) / (fwd + smp + out + other)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-r", "--rounds", type=int, default=7)
    ap.add_argument("-t", "--threads", default="1,2")
    ap.add_argument("-n", type=int, default=128, help="tokens generated / decode steps")
    ap.add_argument("--model", default=str(ROOT / "models" / "gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--lumen", default=str(ROOT / "build" / "lumen"))
    ap.add_argument("--modes", default="greedy,sampled,greedy-unfused,sampled-unfused")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", help="also write the figures to this file")
    a = ap.parse_args()
    threads = [int(x) for x in a.threads.split(",")]
    modes = a.modes.split(",")
    kinds = ["bench"] + modes
    res = {t: {k: [] for k in kinds} for t in threads}
    steps = {t: {k: [] for k in modes} for t in threads}
    for r in range(a.rounds):
        for t in threads:
            order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
            for k in order:
                if k == "bench":
                    v = bench_tg(a.lumen, a.model, t, a.n)
                else:
                    v, sp = run_gen(a.lumen, a.model, t, a.n, k, a.seed)
                    steps[t][k].append(sp)
                res[t][k].append(v)
                print("round %d t=%d %-15s %8.2f tok/s" % (r + 1, t, k, v), file=sys.stderr)
    print("`lumen run` decode vs `lumen bench` tg%d: %s, %d rounds, medians (tok/s)\n"
          % (a.n, Path(a.model).name, a.rounds))
    print("| threads | bench tg%d | run mode | run | run / bench (medians) | "
          "run / bench (median of per-round ratios) | run: sampling us/tok | run: detokenize + "
          "output us/tok | run: steps' time outside the forward pass |" % a.n)
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    summary = []
    for t in threads:
        b = statistics.median(res[t]["bench"])
        for k in modes:
            v = statistics.median(res[t][k])
            pr = statistics.median(x / y for x, y in zip(res[t][k], res[t]["bench"]))
            sm = {q: statistics.median(x[q] for x in steps[t][k]) for q in ("sample_us", "output_us", "outside")}
            print("| %d | %.1f | %s | %.1f | %.3f | %.3f | %.1f | %.1f | %.2f%% |"
                  % (t, b, k, v, v / b, pr, sm["sample_us"], sm["output_us"], 100 * sm["outside"]))
            summary.append({"threads": t, "mode": k, "bench_tg_median": b, "run_median": v,
                            "ratio_of_medians": v / b, "median_ratio": pr, "steps_medians": sm,
                            "bench": res[t]["bench"], "run": res[t][k], "steps": steps[t][k]})
    if a.json:
        Path(a.json).write_text(json.dumps({"model": a.model, "n": a.n, "rounds": a.rounds,
                                            "prompt": PROMPT, "results": summary}, indent=1))


if __name__ == "__main__":
    main()
