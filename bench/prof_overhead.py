#!/usr/bin/env python3
"""Profiler overhead on the default model, all configurations measured in one run.

Builds build-noprof/ (cmake -DLUMEN_PROFILER=OFF: every hook compiled out) next to the
normal build/, then alternates, repetition by repetition, four configurations of
`lumen run -n N --temp 0 --ignore-eos -t T`:
  compiled-out   build-noprof/lumen
  off            build/lumen (hooks compiled in, level OFF)
  summary        build/lumen --profile
  trace          build/lumen --trace FILE --perfetto FILE
and reports the median decode tok/s of each and its ratio to the others (the stats line
of lumen run gives decode tok/s). Writes bench/results/prof_overhead.{md,json}.

usage: .venv/bin/python bench/prof_overhead.py [-r 7] [-n 128] [-t 2]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPT = "The history of the printing press begins"


def build_noprof():
    d = os.path.join(ROOT, "build-noprof")
    subprocess.run(["cmake", "-S", ROOT, "-B", d, "-DCMAKE_BUILD_TYPE=Release",
                    "-DLUMEN_PROFILER=OFF"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", d, "-j2", "--target", "lumen"], check=True,
                   stdout=subprocess.DEVNULL)
    return os.path.join(d, "lumen")


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), p.stderr[-2000:]))
    m = re.search(r"gen (\d+) tok, ([\d.]+) tok/s", p.stderr)
    if not m:
        sys.exit("no stats line in: %s" % p.stderr[-500:])
    return float(m.group(2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-r", type=int, default=7)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-m", default=os.path.join(ROOT, "models/gemma-3-270m-q4_k_m.gguf"))
    a = ap.parse_args()
    noprof = build_noprof()
    lumen = os.path.join(ROOT, "build/lumen")
    tmp = tempfile.mkdtemp()
    base = ["run", "-m", a.m, "-p", PROMPT, "-n", str(a.n), "--temp", "0", "--ignore-eos",
            "-t", str(a.t)]
    cfgs = {
        "compiled-out": [noprof] + base,
        "off": [lumen] + base,
        "summary": [lumen] + base + ["--profile"],
        "trace": [lumen] + base + ["--trace", os.path.join(tmp, "t.jsonl"),
                                   "--perfetto", os.path.join(tmp, "t.json")],
    }
    for c in cfgs.values():  # warm-up (page cache, clocks)
        run(c)
    res = {k: [] for k in cfgs}
    for rep in range(a.r):
        order = list(cfgs) if rep % 2 == 0 else list(reversed(cfgs))
        for k in order:
            res[k].append(run(cfgs[k]))
    med = {k: statistics.median(v) for k, v in res.items()}
    lines = ["# Profiler overhead (decode tok/s, lumen run -n %d -t %d, median of %d, one run)"
             % (a.n, a.t, a.r), "",
             "measured %s" % time.strftime("%Y-%m-%d %H:%M"), "",
             "| configuration | median tok/s | min | max | ratio to off | ratio to compiled-out |",
             "|---|---|---|---|---|---|"]
    for k in cfgs:
        lines.append("| %s | %.1f | %.1f | %.1f | %.3f | %.3f |" % (
            k, med[k], min(res[k]), max(res[k]), med[k] / med["off"], med[k] / med["compiled-out"]))
    lines += ["", "targets: off vs compiled-out within 1%; summary >= 0.95 x off; trace >= 0.85 x off"]
    out = "\n".join(lines) + "\n"
    print(out)
    os.makedirs(os.path.join(ROOT, "bench/results"), exist_ok=True)
    open(os.path.join(ROOT, "bench/results/prof_overhead.md"), "w").write(out)
    json.dump({"runs": res, "median": med, "n": a.n, "threads": a.t},
              open(os.path.join(ROOT, "bench/results/prof_overhead.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
