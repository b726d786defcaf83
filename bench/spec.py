#!/usr/bin/env python3
"""Speculative decoding benchmark: `lumen run --lookup` against plain `lumen run` on the
committed prompts (bench/spec_prompts.jsonl: input-grounded ones, greedy; open-ended ones,
sampled with a seed), alternating the two in one run (plain/lookup, then lookup/plain, ...)
and reporting the median decode tok/s of each, the speed-up, drafted / accepted tokens, and
whether the texts are identical (they must be: greedy, and seeded sampling too, see
docs/speculative.md). Also, on the same prompts, llama.cpp's own lookup decoding
(llama-lookup, built by `scripts/setup.sh --reference`), and with --serve, `lumen serve`
with 2, 4 and 8 concurrent clients (one request each: a closed batch; or several each, one
after another: a loaded server): aggregate tok/s with every request "lookup": true vs false.

With --lock FILE (or $LUMEN_BENCH_LOCK), each prompt's runs hold an exclusive flock on FILE,
so on a shared machine they are not interleaved with other jobs that take the same lock; only
the ratios, measured within one run, mean anything.

usage: .venv/bin/python bench/spec.py [-n 128] [-t 2] [--reps 3] [--only NAME,...] [--serve]
       [--serve-only] [--serve-reps N] [--no-llama] [--out bench/results]
"""
import argparse
import concurrent.futures as cf
import contextlib
import datetime
import fcntl
import http.client
import json
import os
import re
import statistics
import subprocess
import threading
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "lumen"))
    ap.add_argument("--llama-lookup", default=None, help="llama-lookup binary (default: .reference/bin)")
    ap.add_argument("--prompts", default=os.path.join(ROOT, "bench", "spec_prompts.jsonl"))
    ap.add_argument("-n", type=int, default=128, help="tokens to generate per run")
    ap.add_argument("-t", type=int, default=2, help="threads")
    ap.add_argument("--reps", type=int, default=3, help="runs of each engine per prompt (alternating)")
    ap.add_argument("--draft-max", type=int, default=0, help="lumen --draft-max (0: its default)")
    ap.add_argument("--only", default="", help="comma-separated prompt names")
    ap.add_argument("--no-llama", action="store_true")
    ap.add_argument("--serve", action="store_true",
                    help="also the server comparison (2, 4 and 8 streams; closed and sustained)")
    ap.add_argument("--serve-only", action="store_true", help="only the server comparison")
    ap.add_argument("--serve-reps", type=int, default=0,
                    help="alternating runs of each server configuration (0: --reps)")
    ap.add_argument("--lock", default=os.environ.get("LUMEN_BENCH_LOCK", ""))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    return ap.parse_args()


@contextlib.contextmanager
def cpu_lock(path):
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


GEN_RE = re.compile(r"gen (\d+) tok, ([\d.]+) tok/s")
DRAFT_RE = re.compile(r"drafted (\d+), accepted (\d+)")


def lumen_run(a, pfile, p, lookup, seed):
    cmd = [a.bin, "run", "-m", a.model, "-f", pfile, "-n", str(a.n), "-t", str(a.t)]
    cmd += ["--temp", "0"] if p["kind"] == "grounded" else ["--seed", str(seed)]
    if lookup:
        cmd.append("--lookup")
        if a.draft_max:
            cmd += ["--draft-max", str(a.draft_max)]
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        sys.exit(f"spec.py: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    g = GEN_RE.search(r.stderr)
    d = DRAFT_RE.search(r.stderr)
    return {"text": r.stdout, "n": int(g.group(1)), "tps": float(g.group(2)),
            "drafted": int(d.group(1)) if d else 0, "accepted": int(d.group(2)) if d else 0}


def llama_lookup(a, binp, pfile, p, seed):
    cmd = [binp, "-m", a.model, "-f", pfile, "-n", str(a.n), "-t", str(a.t)]
    cmd += ["--temp", "0"] if p["kind"] == "grounded" else ["--temp", "0.8", "--seed", str(seed)]
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    out = r.stdout + r.stderr
    m = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s", out)
    if r.returncode != 0 or not m:
        return None
    dr = re.search(r"n_drafted\s*=\s*(\d+)", out)
    ac = re.search(r"n_accept\s*=\s*(\d+)", out)
    return {"tps": float(m.group(3)), "drafted": int(dr.group(1)) if dr else 0,
            "accepted": int(ac.group(1)) if ac else 0}


def bench_prompt(a, p, lbin):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(p["prompt"])
        pfile = f.name
    res = {"name": p["name"], "kind": p["kind"], "plain": [], "lookup": [], "llama": [],
           "identical": True}
    try:
        with cpu_lock(a.lock):
            lumen_run(a, pfile, p, False, 1)  # warm-up (page cache, CPU clocks)
            for rep in range(a.reps):
                seed = 1 + rep
                order = (False, True) if rep % 2 == 0 else (True, False)
                got = {}
                for lk in order:
                    got[lk] = lumen_run(a, pfile, p, lk, seed)
                res["plain"].append(got[False])
                res["lookup"].append(got[True])
                if got[False]["text"] != got[True]["text"]:
                    res["identical"] = False
                if lbin:
                    ll = llama_lookup(a, lbin, pfile, p, seed)
                    if ll:
                        res["llama"].append(ll)
    finally:
        os.unlink(pfile)
    med = lambda xs, k: statistics.median(x[k] for x in xs) if xs else float("nan")
    res["plain_tps"] = med(res["plain"], "tps")
    res["lookup_tps"] = med(res["lookup"], "tps")
    res["speedup"] = res["lookup_tps"] / res["plain_tps"]
    dr = sum(x["drafted"] for x in res["lookup"])
    ac = sum(x["accepted"] for x in res["lookup"])
    res["drafted"], res["accepted"] = dr, ac
    res["acceptance"] = ac / dr if dr else 0.0
    res["llama_tps"] = med(res["llama"], "tps")
    dr = sum(x["drafted"] for x in res["llama"])
    res["llama_acceptance"] = sum(x["accepted"] for x in res["llama"]) / dr if dr else 0.0
    for k in ("plain", "lookup"):
        for x in res[k]:
            x.pop("text")
    return res


# ---------------------------------------------------------------- server, N streams

def serve_compare(a, prompts, label, streams, per_client):
    """streams clients, each sending per_client requests one after another (prompt i of
    the set for request i, cycling): aggregate generated tok/s, "lookup" false vs true."""
    proc = subprocess.Popen([a.bin, "serve", "-m", a.model, "--port", "0", "-t", str(a.t),
                             "--parallel", str(streams)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port = None
    for line in proc.stderr:
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        sys.exit("spec.py: lumen serve did not start")
    # keep reading its log (a line per request): a full pipe would block the server
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()

    def one(body):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = json.loads(c.getresponse().read())
        c.close()
        return r["choices"][0]["text"], r["usage"]["completion_tokens"]

    def batch(lookup):
        n_req = streams * per_client
        bodies = [{"prompt": prompts[i % len(prompts)]["prompt"], "max_tokens": a.n,
                   "temperature": 0 if prompts[i % len(prompts)]["kind"] == "grounded" else 0.8,
                   "seed": i, "lookup": lookup} for i in range(n_req)]
        t0 = time.monotonic()
        with cf.ThreadPoolExecutor(streams) as ex:  # client c sends requests c, c + streams, ...
            per = list(ex.map(lambda c: [one(b) for b in bodies[c::streams]], range(streams)))
        dt = time.monotonic() - t0
        out = [None] * n_req
        for c in range(streams):
            out[c::streams] = per[c]
        return [o[0] for o in out], sum(o[1] for o in out) / dt

    rows = {"plain": [], "lookup": []}
    identical = True
    try:
        with cpu_lock(a.lock):
            batch(False)  # warm-up
            for rep in range(a.serve_reps or a.reps):
                order = (False, True) if rep % 2 == 0 else (True, False)
                got = {}
                for lk in order:
                    got[lk] = batch(lk)
                    rows["lookup" if lk else "plain"].append(got[lk][1])
                identical = identical and got[False][0] == got[True][0]
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    p, l = statistics.median(rows["plain"]), statistics.median(rows["lookup"])
    return {"label": label, "streams": streams, "per_client": per_client, "plain_tps": p,
            "lookup_tps": l, "ratio": l / p, "identical": identical, "runs": rows}


def main():
    a = parse_args()
    prompts = [json.loads(l) for l in open(a.prompts) if l.strip()]
    if a.only:
        keep = set(a.only.split(","))
        prompts = [p for p in prompts if p["name"] in keep]
    lbin = None
    if not a.no_llama:
        for cand in [a.llama_lookup, os.path.join(ROOT, ".reference", "bin", "llama-lookup"),
                     "/work/main/.reference/bin/llama-lookup"]:
            if cand and os.access(cand, os.X_OK):
                lbin = cand
                break
    load = os.getloadavg()[0]
    results = []
    if a.serve_only:
        a.serve = True
    for p in ([] if a.serve_only else prompts):
        r = bench_prompt(a, p, lbin)
        results.append(r)
        print(f"{r['name']:<20} {r['kind']:<8} plain {r['plain_tps']:7.1f}  lookup {r['lookup_tps']:7.1f} "
              f"tok/s  x{r['speedup']:.2f}  accepted {r['accepted']}/{r['drafted']} "
              f"({100 * r['acceptance']:.0f}%)  identical {r['identical']}  "
              f"llama-lookup {r['llama_tps']:.1f} tok/s ({100 * r['llama_acceptance']:.0f}%)",
              file=sys.stderr)
    serve = []
    if a.serve:  # the prompts as listed (mostly grounded), then open-ended ones only
        opn = [p for p in prompts if p["kind"] == "open"]
        for label, sel, streams, per in (("mixed", prompts, 8, 1), ("mixed", prompts, 8, 4),
                                         ("open-ended only", opn, 8, 1), ("mixed", prompts, 4, 2),
                                         ("mixed", prompts, 2, 4)):
            if sel:
                serve.append(serve_compare(a, sel, label, streams, per))

    def gmean(xs):
        xs = [x for x in xs if x == x and x > 0]
        return (statistics.geometric_mean(xs) if xs else float("nan"))

    lines = [f"# Speculative decoding (prompt lookup): lumen run --lookup vs plain, {a.t} threads, "
             f"-n {a.n}, {a.reps} alternating runs each (medians)", "",
             f"Model `{os.path.relpath(a.model, ROOT)}`; load average at start {load:.2f} (shared "
             "2-core machine: ratios within this run only). Grounded prompts greedy, open-ended "
             "sampled (temp 0.8, top-k 40, top-p 0.95, min-p 0.05, seed = run).", "",
             ]
    if results:
        lines += ["| prompt | kind | plain tok/s | lookup tok/s | speed-up | accepted / drafted | "
                  "same text | llama-lookup tok/s (accept) | lumen lookup / llama-lookup |",
                  "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |"]
    for r in results:
        lines.append(f"| {r['name']} | {r['kind']} | {r['plain_tps']:.1f} | {r['lookup_tps']:.1f} | "
                     f"{r['speedup']:.2f}x | {r['accepted']} / {r['drafted']} "
                     f"({100 * r['acceptance']:.0f}%) | {'yes' if r['identical'] else 'NO'} | "
                     f"{r['llama_tps']:.1f} ({100 * r['llama_acceptance']:.0f}%) | "
                     f"{r['lookup_tps'] / r['llama_tps']:.2f}x |")
    for kind in ("grounded", "open"):
        sel = [r for r in results if r["kind"] == kind]
        if sel:
            lines.append(f"| **{kind} (geometric mean)** | | | | **{gmean([r['speedup'] for r in sel]):.2f}x** "
                         f"| | | | {gmean([r['lookup_tps'] / r['llama_tps'] for r in sel]):.2f}x |")
    if serve:
        lines += ["", f"`lumen serve --parallel S`: S clients, each sending its requests one after "
                  f"another (-n {a.n}; request i gets prompt i of the set, cycling): aggregate "
                  f"generated tok/s from the first request to the last answer, medians of "
                  f"{a.serve_reps or a.reps} alternating runs. One request per client is a closed batch (it ends "
                  f"with its slowest request); several keep the server loaded.", "",
                  "| prompts | streams x requests each | \"lookup\": false | \"lookup\": true | ratio | same texts |",
                  "| --- | --- | ---: | ---: | ---: | --- |"]
        for sv in serve:
            lines.append(f"| {sv['label']} | {sv['streams']} x {sv['per_client']} | {sv['plain_tps']:.1f} | "
                         f"{sv['lookup_tps']:.1f} | {sv['ratio']:.2f}x | {'yes' if sv['identical'] else 'NO'} |")
    lines += ["", "Command: `" + " ".join([".venv/bin/python bench/spec.py"] + sys.argv[1:]) + "`"]
    md = "\n".join(lines) + "\n"
    print(md)
    os.makedirs(a.out, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    with open(os.path.join(a.out, f"spec-{stamp}.md"), "w") as f:
        f.write(md)
    with open(os.path.join(a.out, f"spec-{stamp}.json"), "w") as f:
        json.dump({"args": vars(a), "load": load, "results": results, "serve": serve}, f, indent=1)
    if not all(r["identical"] for r in results) or not all(sv["identical"] for sv in serve):
        sys.exit("spec.py: a lookup run's text differs from plain decoding")


if __name__ == "__main__":
    main()
