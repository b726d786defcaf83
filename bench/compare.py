#!/usr/bin/env python3
"""lumen vs llama.cpp's own tools on the same GGUF files: pp512, tg128, TTFT (a 16-token
prefill), read bandwidth and each engine's fraction of the decode roofline, at -t 1 and 2,
engines alternating run by run. Writes bench/results/compare-<date>.md/.json and bench/results/latest.md.
With --batched LIST, also batched decode of N sequences against llama-batched-bench
(bench/results/batched-<date>.md/.json, batched-latest.md; see "batched decode" below).

usage: .venv/bin/python bench/compare.py [-r 3] [-t 1,2] [--models A.gguf B.gguf ...]
       .venv/bin/python bench/compare.py --batched 1,8,16 [--batched-prompt 64]
                                         [--batched-gen 128] [--batched-only]

llama.cpp is its own llama-bench, built by `bash scripts/setup.sh --reference` from the
llama.cpp tree vendored in the pinned llama-cpp-python sdist (the same commit as the binding;
.reference/bin, found by bench/reference.py). The Python binding's figures differ from
llama.cpp's own tools on the same machine (its decode loop is Python), so the binding is kept
only where a test needs logits (tools/gen_golden_*.py). Per repetition and thread count, one
process of each engine, engines alternating:
  - lumen: `lumen bench -p PP,TTFT -n TG -r 1 --warmup W -o json`: pp PP and pp TTFT (prefill
    in batches of 512, logits for the last token), tg TG (TG one-token decode calls with
    logits, nothing sampled, after an untimed 16-token prompt).
  - llama.cpp: `llama-bench -p PP,TTFT -n 0 -r W+1` and `llama-bench -p 0 -n TG -d 16 -r W+1`
    (-b 512 -ub 512 -fa off -t T, f16 KV, mmap, repack as built): the same tests (-d 16: the
    decode starts after an untimed 16-token prefill, as lumen's); each test runs W+1 times
    after llama-bench's own warm-up and the last run counts, as lumen's W untimed runs.
TTFT here is the pp TTFT time (a TTFT-token prefill, logits for the last token, no sampling:
llama-bench does not sample). Prompts: lumen BOS + the bench text, llama-bench BOS + random
tokens (the content does not change the work). llama-bench does not time model loading, so
load is reported for lumen alone (json).

Batched decode (--batched N1,N2,...; off by default: it needs llama.cpp's own
llama-batched-bench, which `bash scripts/setup.sh --reference` builds from the llama.cpp tree
vendored in the pinned llama-cpp-python sdist, and it adds minutes to a run whose default
output is the README's single-stream table). For each thread count and repetition, engines
alternating, one process of each: `lumen bench --parallel LIST -p P -n G+1 -o json` and
`llama-batched-bench -npp P -ntg G -npl LIST`, same model, threads, N, prompt P and G decode
steps. What is timed:
  - llama-batched-bench: one llama_decode of the N prompts (T_PP), then G steps of one
    llama_decode of N tokens (logits for all, nothing sampled); S_TG = N*G / time of those
    G steps.
  - lumen: the engine's first step prefills the N prompts (step budget N*P) and samples each
    sequence's first token; then G decode steps of N tokens reach the same positions
    (P .. P+G-1) and the same KV size N*(P+G), hence -n G+1. `fwd t/s` = N*G / the summed
    forward-pass time (lm_decode, engine stats forward_ns) of those G steps: S_TG's
    definition, the ratio column. `gen t/s` = N*G / the time from the last sequence's first
    token to the last token: the same G steps with greedy sampling of every token and event
    delivery, what a client sees (llama-batched-bench does no such work).
  - TTFT: lumen, submit to each sequence's first token (the end of the prompt step's forward
    pass), p50 / p99 over the N sequences; llama.cpp, T_PP (every sequence's first logits
    come at the end of the one prompt batch, so its p50 = p99 = T_PP).
Both use distinct prompts per sequence (llama.cpp random tokens, no -pps; lumen BOS + the
bench text from a different offset per sequence, prefix cache off), f16 KV, flash attention
off (--batched-flash-attn), n_threads = n_threads_batch, mmap, and the same warm-up: lumen
--warmup W runs each N W times untimed, llama-batched-bench gets each N W+1 times in -npl
and the last result counts. llama.cpp's context: n_ctx = max(N)*(P+G) (non-unified KV: one
stream per sequence, as lumen's per-sequence block tables), n_batch = n_ubatch = max(N)*P
(capped at 8192 like lumen's step) so every prompt is one batch in both engines.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = ROOT / "models" / "gemma-3-270m-q4_k_m.gguf"
N_BATCH = 512
TG_PROMPT = 16  # tokens prefilled (untimed) before a tg test, as in `lumen bench`


# ============================================================== helpers

def summary(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs),
            "mean": statistics.fmean(xs), "sd": statistics.stdev(xs) if len(xs) > 1 else 0.0,
            "n": len(xs), "samples": xs}


def weight_bytes_per_token(path):
    """Bytes of weights one decode step reads, from the GGUF tensor table: every tensor but
    the token embedding (one row of it), the whole embedding when it is the tied output."""
    import gguf
    r = gguf.GGUFReader(str(path))
    names = {t.name: t for t in r.tensors}
    tied = "output.weight" not in names
    total = 0
    for t in r.tensors:
        if t.name == "token_embd.weight":
            rows = int(t.shape[1]) if len(t.shape) > 1 else 1
            total += int(t.n_bytes) if tied else int(t.n_bytes) // rows
            if tied:
                total += int(t.n_bytes) // rows
        else:
            total += int(t.n_bytes)
    return total


def numpy_bandwidth(threads, mib):
    """STREAM-like read test: np.sum over a mib MiB int64 buffer split over `threads`
    Python threads (numpy releases the GIL in the reduction); best of 3 after one pass."""
    a = np.arange(mib * (1 << 20) // 8, dtype=np.int64)
    parts = np.array_split(a, threads)
    best = 0.0
    for p in range(4):
        out = [0] * threads
        def work(i):
            out[i] = int(parts[i].sum())
        ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        dt = time.perf_counter() - t0
        if p > 0:
            best = max(best, a.nbytes / dt / 1e9)
    return best


def run_rss(cmd):
    """subprocess.run(cmd, capture_output=True, text=True) that also sets .rss_bytes: the
    child's peak resident set (ru_maxrss from wait4, its VmHWM)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    bufs = {}
    def drain(name, fh):
        bufs[name] = fh.read()
    ts = [threading.Thread(target=drain, args=(k, getattr(p, k))) for k in ("stdout", "stderr")]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    r = subprocess.CompletedProcess(cmd, p.returncode, bufs["stdout"], bufs["stderr"])
    r.rss_bytes = ru.ru_maxrss * 1024  # KiB on Linux
    return r


# ============================================================== lumen

class Lumen:
    name = "lumen"

    def __init__(self, binary):
        self.bin = str(binary)
        if not os.access(self.bin, os.X_OK):
            sys.exit(f"compare.py: {self.bin} not found: build it first "
                     "(cmake -S . -B build && cmake --build build -j2)")

    def run(self, model, threads, a, bw_mib=0):
        """One process: load, warm-up, one timed pp / tg / ttft each (with bw_mib, after
        lumen's read-bandwidth probe: its tg roofline fraction is in "raw")."""
        cmd = [self.bin, "bench", "-m", str(model), "-p", f"{a.pp},{a.ttft}", "-n", str(a.tg),
               "-r", "1", "--warmup", str(a.warmup), "-t", str(threads), "--bw-mib", str(bw_mib),
               "-o", "json"]
        p = run_rss(cmd)
        if p.returncode != 0:
            sys.exit(f"compare.py: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
        d = json.loads(p.stdout)
        tests = {t["test"]: t for t in d["tests"]}
        ns = lambda k: tests[k]["samples_ns"][0]
        return {"pp_ts": a.pp / (ns(f"pp{a.pp}") * 1e-9), "tg_ts": a.tg / (ns(f"tg{a.tg}") * 1e-9),
                "ttft_ms": ns(f"pp{a.ttft}") / 1e6, "load_ms": d["model"]["load_ms"],
                "ctx_ms": d["model"].get("ctx_init_ms"),
                "bytes_per_token": d["model"]["bytes_per_token"], "desc": d["model"]["desc"],
                "kernels": d["system"]["kernels"], "rss_bytes": p.rss_bytes, "raw": d}

    def probe(self, model, threads, mib):
        cmd = [self.bin, "bench", "-m", str(model), "-p", "0", "-n", "0", "-r", "1", "--warmup", "0", "-t",
               ",".join(map(str, threads)), "--bw-mib", str(mib), "-o", "json"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            return {}
        return {b["threads"]: b["gbps"] for b in json.loads(p.stdout)["bandwidth"]}


# ============================================================== llama.cpp

class LlamaBench:
    """llama.cpp's llama-bench (.reference/bin): pp / tg / TTFT-prefill, one run counted."""
    name = "llama.cpp"
    fa = "off"  # llama-bench -fa; bench/scale.py --fa-best runs "off" and "on" and keeps the faster

    def __init__(self, exe):
        self.exe = exe
        self.build_commit = None
        self.cmds = []

    def _bench(self, model, threads, a, args):
        cmd = [self.exe, "-m", str(model), "-t", str(threads), "-r", str(a.warmup + 1),
               "-b", str(N_BATCH), "-ub", str(N_BATCH), "-fa", self.fa, "-o", "jsonl"] + args
        p = run_rss(cmd)
        self.rss_bytes = p.rss_bytes
        if p.returncode != 0:
            tail = " | ".join(p.stderr.strip().splitlines()[-3:])
            sys.exit(f"compare.py: {' '.join(cmd)} failed ({p.returncode}): {tail}")
        rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
        if rows:
            self.build_commit = rows[0].get("build_commit")
        if len(self.cmds) < 4:
            shown = cmd[1:]
            shown[shown.index("-t") + 1] = "T"
            self.cmds.append(" ".join(shown).replace(f"{ROOT}/", ""))
        # the last of the W+1 runs of each test counts (the first W are the warm-up)
        return {(r["n_prompt"], r["n_gen"]): r["samples_ns"][-1] for r in rows}

    def run(self, model, threads, a):
        pp = self._bench(model, threads, a, ["-p", f"{a.pp},{a.ttft}", "-n", "0"])
        rss = self.rss_bytes
        tg = self._bench(model, threads, a, ["-p", "0", "-n", str(a.tg), "-d", str(TG_PROMPT)])
        try:
            return {"pp_ts": a.pp / (pp[(a.pp, 0)] * 1e-9), "ttft_ms": pp[(a.ttft, 0)] / 1e6,
                    "tg_ts": a.tg / (tg[(0, a.tg)] * 1e-9), "load_ms": None, "ctx_ms": None,
                    "rss_bytes": max(rss, self.rss_bytes)}
        except KeyError as e:
            sys.exit(f"compare.py: llama-bench gave no result for test {e}")


# ============================================================== batched decode

BATCHED_MAX_STEP = 8192  # lumen's largest step budget (lm_engine_init)


def batched_llama_settings(nlist, P, G, fa):
    """llama-batched-bench's context and batch sizes for a run over nlist."""
    nmax = max(nlist)
    n_batch = nmax * P
    return {"n_ctx": nmax * (P + G), "n_batch": n_batch, "n_ubatch": min(n_batch, BATCHED_MAX_STEP),
            "flash_attn": fa, "kv_unified": False, "pp_shared": False}


def lumen_batched(bin_, model, t, a, nlist):
    """One `lumen bench --parallel` process: per N, the decode rates, TTFT, ITL, roof."""
    cmd = [bin_, "bench", "-m", str(model), "--parallel", ",".join(map(str, nlist)),
           "-p", str(a.batched_prompt), "-n", str(a.batched_gen + 1), "-r", "1",
           "--warmup", str(a.warmup), "-t", str(t), "--bw-mib", "0", "-o", "json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"compare.py: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    d = json.loads(p.stdout)
    out = {}
    for x in d["tests"]:
        if x.get("kind") != "batched":
            continue
        out[x["n_seq"]] = {
            "fwd_ts": x["fwd_tok_s"], "gen_ts": x["gen_tok_s"], "ttft_p50": x["ttft_ms_p50"],
            "ttft_p99": x["ttft_ms_p99"], "itl_p50": x["itl_ms_p50"], "itl_p99": x["itl_ms_p99"],
            "roof_ts": x["roof_tok_s"], "prefill_ts": x["prefill_tok_s"],
            "sample_ms": x["sample_ms_per_step"], "kv_bytes": x["kv_bytes"],
            "step_tokens": x["step_tokens"], "pp_ts": x["pp_tok_s"]}
    missing = [n for n in nlist if n not in out]
    if missing:
        sys.exit(f"compare.py: lumen bench --parallel gave no result for N = {missing}")
    return out, {"desc": d["model"]["desc"], "kernels": d["system"]["kernels"], "cmd": cmd}


def llama_batched(exe, model, t, a, nlist, s):
    """One llama-batched-bench process; each N is run warmup+1 times, the last one counts."""
    npl = [n for n in nlist for _ in range(a.warmup + 1)]
    cmd = [exe, "-m", str(model), "-c", str(s["n_ctx"]), "-b", str(s["n_batch"]),
           "-ub", str(s["n_ubatch"]), "-npp", str(a.batched_prompt), "-ntg", str(a.batched_gen),
           "-npl", ",".join(map(str, npl)), "-t", str(t), "-tb", str(t), "-fa", s["flash_attn"],
           "--output-format", "jsonl"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        tail = " | ".join(p.stderr.strip().splitlines()[-3:])
        sys.exit(f"compare.py: {' '.join(cmd)} failed ({p.returncode}): {tail}")
    out, info = {}, {}
    for line in p.stdout.splitlines():
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        info = {k: r[k] for k in ("n_kv_max", "n_batch", "n_ubatch", "flash_attn", "is_pp_shared",
                                  "n_threads", "n_threads_batch")}
        out[r["pl"]] = {"s_tg": r["speed_tg"], "ttft": r["t_pp"] * 1e3, "s_pp": r["speed_pp"],
                        "t_tg": r["t_tg"], "n_kv": r["n_kv"]}
    missing = [n for n in nlist if n not in out]
    if missing:  # it skips an N whose N*(P+G) exceeds its n_kv_max
        sys.exit(f"compare.py: llama-batched-bench gave no result for N = {missing} "
                 f"(n_kv_max {info.get('n_kv_max')}); command: {' '.join(cmd)}")
    return out, dict(info, cmd=cmd)


def batched(a, models, threads, lumen, exe, nlist, machine):
    """--batched: both engines per model, thread count and repetition; md + json."""
    import reference
    P, G = a.batched_prompt, a.batched_gen
    s = batched_llama_settings(nlist, P, G, a.batched_flash_attn)
    date = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    res = {"date": date, "setup": dict(machine, **{
        "lumen_bin": os.path.relpath(a.bin, ROOT), "lumen_kernels": None,
        "llama_batched_bench": os.path.relpath(exe, ROOT) if exe.startswith(str(ROOT)) else exe,
        "llama_cpp_built_from": reference.built_from(), "n_list": nlist, "n_prompt": P,
        "n_gen": G, "lumen_n_gen": G + 1, "reps": a.reps, "warmup": a.warmup, "threads": threads,
        "llama": s, "lumen_cmd": None, "llama_cmd": None, "llama_info": None}), "models": []}
    for model in models:
        raw = {t: {"lumen": [], "llama.cpp": []} for t in threads}
        desc = Path(model).name
        for rep in range(a.reps):
            for ti, t in enumerate(threads):
                for eng in (("lumen", "llama.cpp") if (rep + ti) % 2 == 0 else ("llama.cpp", "lumen")):
                    if eng == "lumen":
                        r, info = lumen_batched(lumen.bin, model, t, a, nlist)
                        desc = info["desc"]
                        res["setup"]["lumen_kernels"] = info["kernels"]
                        res["setup"]["lumen_cmd"] = " ".join(info["cmd"][1:]).replace(f"{ROOT}/", "")
                        line = ", ".join(f"N={n} fwd {r[n]['fwd_ts']:.1f} gen {r[n]['gen_ts']:.1f}"
                                         for n in nlist)
                    else:
                        r, info = llama_batched(exe, model, t, a, nlist, s)
                        res["setup"]["llama_cmd"] = " ".join(info["cmd"][1:]).replace(f"{ROOT}/", "")
                        res["setup"]["llama_info"] = {k: v for k, v in info.items() if k != "cmd"}
                        line = ", ".join(f"N={n} S_TG {r[n]['s_tg']:.1f}" for n in nlist)
                    raw[t][eng].append(r)
                    print(f"compare.py: batched {Path(model).name} rep {rep + 1}/{a.reps} t={t} "
                          f"{eng}: {line} tok/s", file=sys.stderr)
        mr = {"model": str(model), "desc": desc, "threads": {}}
        for t in threads:
            lu, ll = raw[t]["lumen"], raw[t]["llama.cpp"]
            per_n = {}
            for n in nlist:
                d = {"lumen": {k: summary([r[n][k] for r in lu]) for k in lu[0][n]},
                     "llama.cpp": {k: summary([r[n][k] for r in ll]) for k in ll[0][n]}}
                L, C = d["lumen"], d["llama.cpp"]
                d["ratio_fwd"] = ratio(L["fwd_ts"], C["s_tg"])
                d["ratio_gen"] = ratio(L["gen_ts"], C["s_tg"])
                d["roof_fwd"] = L["fwd_ts"]["median"] / L["roof_ts"]["median"] if L["roof_ts"] else None
                d["roof_gen"] = L["gen_ts"]["median"] / L["roof_ts"]["median"] if L["roof_ts"] else None
                per_n[str(n)] = d
            if 1 in nlist:  # each engine's scaling vs its own N = 1
                b = per_n["1"]
                for n in nlist:
                    d = per_n[str(n)]
                    d["scale_lumen_fwd"] = ratio(d["lumen"]["fwd_ts"], b["lumen"]["fwd_ts"])
                    d["scale_lumen_gen"] = ratio(d["lumen"]["gen_ts"], b["lumen"]["gen_ts"])
                    d["scale_llama"] = ratio(d["llama.cpp"]["s_tg"], b["llama.cpp"]["s_tg"])
            mr["threads"][str(t)] = per_n
        res["models"].append(mr)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    js, md = out / f"batched-{stamp}.json", out / f"batched-{stamp}.md"
    js.write_text(json.dumps(res, indent=1, default=str) + "\n")
    write_batched_md(res, md)
    (out / "batched-latest.md").write_text(md.read_text())
    print(md.read_text())
    print(f"compare.py: wrote {md}, {js}, {out / 'batched-latest.md'}", file=sys.stderr)


def write_batched_md(res, path):
    s = res["setup"]
    ls, P, G = s["llama"], s["n_prompt"], s["n_gen"]
    li = s["llama_info"] or {}
    o = [f"# lumen vs llama.cpp, batched decode: {res['date']}\n"]
    o.append(f"- machine: {s['cpu']} ({s['cores']} cores), {s['platform']}; shared, 2 cores: "
             "compare ratios within one run, not absolute numbers")
    o.append(f"- workload: N sequences (N = {', '.join(map(str, s['n_list']))}), each a distinct "
             f"prompt of {P} tokens, then {G} decode steps of N tokens (positions {P}..{P + G - 1}; "
             f"KV holds N x {P + G} positions at the end); engines alternate process by process; "
             f"{s['reps']} reps after {s['warmup']} untimed pass(es) of each N; cells are median "
             "[min–max]")
    o.append(f"- lumen: `{s['lumen_bin']} {s['lumen_cmd']}` (kernels {s['lumen_kernels']}): the "
             f"engine (lm_engine_step) with step budget N x {P} (every prompt in the first step), "
             f"-n {G + 1} (the first token comes from the prompt step, then {G} decode steps), "
             "distinct prompts (BOS + the bench text from a different offset per sequence), prefix "
             "cache off, greedy sampling, end of generation ignored, f16 KV in 16-position blocks, "
             "one process per repetition and thread count")
    o.append(f"- llama.cpp: `{s['llama_batched_bench']} {s['llama_cmd']}` built from "
             f"{s['llama_cpp_built_from'] or '?'} (scripts/setup.sh --reference): n_ctx "
             f"{ls['n_ctx']} (n_kv_max {li.get('n_kv_max', '?')}), n_batch {ls['n_batch']}, n_ubatch "
             f"{ls['n_ubatch']} (every prompt in one batch), flash_attn {ls['flash_attn']}, "
             "non-unified KV (one stream per sequence), prompts not shared (no -pps; random "
             "tokens per sequence), n_threads = n_threads_batch, f16 KV, its own 16-token "
             "warm-up, each N repeated in -npl for the warm-up pass(es) (the last result counts)")
    o.append(f"- llama.cpp S_TG = N x {G} / time of the {G} llama_decode calls of N tokens (logits "
             "for all, nothing sampled). lumen fwd t/s = N x "
             f"{G} / summed forward-pass time (lm_decode) of the same {G} steps: the same quantity, "
             f"the ratio column. lumen gen t/s = N x {G} / time from the last sequence's first token "
             "to the last token: those steps with greedy sampling (from the LM head's fused top-1 "
             "selection) and token "
             "delivery included (what a client sees; llama-batched-bench does not sample)")
    o.append("- TTFT: lumen = submit to each sequence's first token (end of the prompt step's "
             "forward pass), p50 / p99 over the N sequences; llama.cpp = T_PP, the one prompt "
             "batch (every sequence's first logits at its end: p50 = p99)")
    o.append("- roof: lumen's compute roof = its own pp512 prefill rate x layer MACs / (layer + "
             "LM head MACs) per decode token (`lumen bench --parallel`); fraction = fwd t/s / roof")
    o.append("")
    for mr in res["models"]:
        o.append(f"## {Path(mr['model']).name}: {mr['desc']}\n")
        o.append("| threads | N | lumen fwd t/s | llama.cpp S_TG t/s | lumen / llama.cpp | lumen gen t/s "
                 "| gen / llama.cpp | scaling vs N=1 lumen fwd / gen / llama.cpp | lumen roof | "
                 "TTFT p50 ms lumen / llama.cpp | TTFT p99 ms lumen / llama.cpp | lumen ITL p50 / p99 ms "
                 "| lumen sampling ms/step |")
        o.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- | --- | --- | ---: |")
        for t, per_n in mr["threads"].items():
            for n, d in per_n.items():
                L, C = d["lumen"], d["llama.cpp"]
                q = lambda v: "-" if v is None else f"{v:.2f}"
                sc = " / ".join(q(d.get(k)) for k in ("scale_lumen_fwd", "scale_lumen_gen", "scale_llama"))
                roof = "-" if d["roof_fwd"] is None else f"{d['roof_fwd']:.0%}"
                o.append(f"| {t} | {n} | {fmt(L['fwd_ts'])} | {fmt(C['s_tg'])} | {q(d['ratio_fwd'])} | "
                         f"{fmt(L['gen_ts'])} | {q(d['ratio_gen'])} | {sc} | {roof} | "
                         f"{fmt(L['ttft_p50'])} / {fmt(C['ttft'])} | {fmt(L['ttft_p99'])} / {fmt(C['ttft'])} | "
                         f"{fmt(L['itl_p50'], 2)} / {fmt(L['itl_p99'], 2)} | {fmt(L['sample_ms'], 2)} |")
        o.append("")
    Path(path).write_text("\n".join(o) + "\n")


# ============================================================== report

def fmt(s, nd=1):
    if not s:
        return "-"
    return f"{s['median']:.{nd}f} [{s['min']:.{nd}f}–{s['max']:.{nd}f}]"


def ratio(a, b):
    return a["median"] / b["median"] if a and b and b["median"] else None


def write_md(res, path):
    o = []
    o.append(f"# lumen vs llama.cpp: {res['date']}\n")
    s = res["setup"]
    o.append(f"- machine: {s['cpu']} ({s['cores']} cores), {s['platform']}; shared, 2 cores: "
             "compare ratios, not absolute numbers")
    o.append(f"- lumen: `{s['lumen_bin']} {s['lumen_cmd']}` (kernels {s['lumen_kernels']}), "
             "one process per repetition and thread count T")
    o.append(f"- llama.cpp: llama-bench (`{s['llama_bench']}`, build {s['llama_build_commit']}) built "
             f"from {s['llama_cpp_built_from'] or '?'} by scripts/setup.sh --reference (Release, "
             f"GGML_NATIVE=ON, CPU only): `{s['llama_cmds'][0]}` and `{s['llama_cmds'][1]}`, one "
             "process each per repetition and thread count")
    o.append(f"- pp{s['pp']}: prefill in batches of {N_BATCH}, logits only for the last token. "
             f"tg{s['tg']}: {s['tg']} one-token decode calls (logits each, no sampling) after an "
             f"untimed {TG_PROMPT}-token prompt (llama-bench -d {TG_PROMPT}). TTFT: the prefill of "
             f"{s['ttft']} tokens (pp{s['ttft']}, logits for the last token; no sampling, which "
             "llama-bench does not do; tokenization excluded).")
    o.append(f"- both: same GGUF file, n_ctx >= {s['n_ctx']}, f16 KV cache, n_threads = "
             "n_threads_batch, flash attention off, mmap, warm page cache; lumen prompts are BOS + "
             "the bench text, llama-bench's BOS + random tokens; each test runs "
             f"{s['warmup']} untimed time(s) then once timed (llama-bench: -r {s['warmup'] + 1}, the "
             "last run counts, after its own warm-up); engines alternate process by process; "
             f"{s['reps']} reps; cells are median [min–max]. llama-bench does not time model "
             "loading: lumen's load time is in the json only")
    bw = s["bandwidth"]
    o.append("- read bandwidth (best of 3, sum over %d MiB): %s" % (s["bw_mib"], "; ".join(
        f"{t} thread{'s' if int(t) > 1 else ''}: numpy {v['numpy']:.2f} GB/s, lumen probe "
        f"{v['lumen'] if v['lumen'] is not None else float('nan'):.2f} GB/s -> roofline uses "
        f"{v['used']:.2f}" for t, v in bw.items())))
    o.append("")
    for mr in res["models"]:
        o.append(f"## {Path(mr['model']).name}: {mr['desc']}, {mr['bytes_per_token'] / 1e6:.1f} MB "
                 "of weights read per decoded token\n")
        if s["l3_bytes"] and mr["bytes_per_token"] <= s["l3_bytes"]:
            o.append(f"Note: the weights read per token fit in the {s['l3_bytes'] >> 20} MiB L3 "
                     "cache: the DRAM-bandwidth roofline does not bound this model.\n")
        o.append("| threads | metric | lumen | llama.cpp | lumen / llama.cpp |")
        o.append("| ---: | --- | ---: | ---: | ---: |")
        for t, r in mr["threads"].items():
            lu, ll = r["lumen"], r["llama.cpp"]
            def row(metric, k, nd=1, note=""):
                q = ratio(lu[k], ll[k])
                o.append(f"| {t} | {metric} | {fmt(lu[k], nd)} | {fmt(ll[k], nd)} | "
                         f"{'-' if q is None else f'{q:.2f}'}{note} |")
            row(f"pp{s['pp']} tok/s", "pp_ts", 1, " (>1: lumen faster)")
            row(f"tg{s['tg']} tok/s", "tg_ts", 2, " (>1: lumen faster)")
            row(f"tg{s['tg']} GB/s of weights", "tg_gbps", 2)
            o.append(f"| {t} | tg{s['tg']} fraction of roofline ({r['roofline_ts']:.1f} tok/s at "
                     f"{r['bw_gbps']:.2f} GB/s) | {lu['roof']:.0%} | {ll['roof']:.0%} | |")
            row(f"TTFT ms (pp{s['ttft']})", "ttft_ms", 1, " (<1: lumen faster)")
        o.append("")
    Path(path).write_text("\n".join(o) + "\n")


# ============================================================== main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=[],
                    help="more GGUF files (e.g. tools/make_arch_gguf.py shapes)")
    ap.add_argument("--no-default", action="store_true", help="skip " + str(DEFAULT_MODEL))
    ap.add_argument("-r", "--reps", type=int, default=3, help="repetitions (default 3: quick)")
    ap.add_argument("-t", "--threads", default="1,2")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--ttft", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--bw-mib", type=int, default=512)
    ap.add_argument("--bin", default=str(ROOT / "build" / "lumen"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--batched", default="", metavar="LIST",
                    help="also compare batched decode of N sequences (e.g. 1,8,16) with "
                         "llama-batched-bench (needs setup.sh --reference); off by default")
    ap.add_argument("--batched-prompt", type=int, default=64, metavar="P",
                    help="prompt tokens per sequence (default 64)")
    ap.add_argument("--batched-gen", type=int, default=128, metavar="G",
                    help="decode steps after the prompts, llama-batched-bench's -ntg (default 128; "
                         "lumen runs -n G+1: its first token comes from the prompt step)")
    ap.add_argument("--batched-flash-attn", default="off", choices=("off", "on", "auto"),
                    help="llama.cpp's flash attention in the batched runs (default off, as above)")
    ap.add_argument("--batched-only", action="store_true",
                    help="run only the batched comparison")
    a = ap.parse_args()
    try:
        threads = [int(x) for x in a.threads.split(",")]
    except ValueError:
        sys.exit(f"compare.py: -t: '{a.threads}' is not a list of integers")
    if a.reps < 1 or a.pp < 1 or a.tg < 1 or a.ttft < 1 or min(threads) < 1:
        sys.exit("compare.py: -r, --pp, --tg, --ttft and -t must be >= 1")
    nlist = []
    if a.batched:
        try:
            nlist = [int(x) for x in a.batched.split(",")]
        except ValueError:
            sys.exit(f"compare.py: --batched: '{a.batched}' is not a list of integers")
        if min(nlist) < 1 or max(nlist) > 256 or len(set(nlist)) != len(nlist):
            sys.exit("compare.py: --batched: N values must be distinct, in [1, 256]")
        if a.batched_prompt < 1 or a.batched_gen < 1:
            sys.exit("compare.py: --batched-prompt and --batched-gen must be >= 1")
    elif a.batched_only:
        sys.exit("compare.py: --batched-only needs --batched LIST")
    models = ([] if a.no_default else [DEFAULT_MODEL]) + [Path(m) for m in a.models]
    for m in models:
        if not Path(m).is_file():
            sys.exit(f"compare.py: model {m} not found")
    lumen = Lumen(a.bin)
    exe = None
    if nlist:  # fail before any run when the tool is missing or stale
        import reference
        try:
            exe = reference.tool("llama-batched-bench")
        except reference.ReferenceMissing as e:
            sys.exit(f"compare.py: --batched: {e}")
    machine = machine_info()
    if not a.batched_only:
        single_stream(a, models, threads, lumen, machine)
    if nlist:
        batched(a, models, threads, lumen, exe, nlist, machine)


def machine_info():
    cpu = "unknown"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    l3 = 0
    try:  # last-level cache size, e.g. "32768K"
        for idx in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
            v = (idx / "size").read_text().strip()
            l3 = max(l3, int(v[:-1]) * {"K": 1 << 10, "M": 1 << 20}.get(v[-1], 1) if v[-1] in "KM" else int(v))
    except (OSError, ValueError):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "l3_bytes": l3, "platform": platform.platform()}


def single_stream(a, models, threads, lumen, machine):
    """pp / tg / TTFT against llama.cpp's llama-bench (the default comparison)."""
    import reference
    try:
        llama = LlamaBench(reference.tool("llama-bench"))
    except reference.ReferenceMissing as e:
        sys.exit(f"compare.py: {e}")

    # ---- bandwidth: the script's own numpy probe and lumen's; the roofline uses the higher
    print("compare.py: read-bandwidth probes...", file=sys.stderr)
    lp = lumen.probe(models[0], threads, a.bw_mib)
    bw = {}
    for t in threads:
        n = numpy_bandwidth(t, a.bw_mib)
        l = lp.get(t)
        bw[t] = {"numpy": n, "lumen": l, "used": max(n, l or 0.0)}

    date = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    res = {"date": date, "setup": {
        "cpu": machine["cpu"], "cores": machine["cores"], "l3_bytes": machine["l3_bytes"],
        "platform": machine["platform"], "lumen_bin": os.path.relpath(a.bin, ROOT), "lumen_kernels": None,
        "llama_bench": os.path.relpath(llama.exe, ROOT) if llama.exe.startswith(str(ROOT)) else llama.exe,
        "llama_cpp_built_from": reference.built_from(), "llama_build_commit": None,
        "llama_cmds": None, "lumen_cmd": None,
        "pp": a.pp, "tg": a.tg, "ttft": a.ttft, "reps": a.reps, "warmup": a.warmup,
        "n_ctx": max(a.pp, TG_PROMPT + a.tg, a.ttft), "threads": threads, "bw_mib": a.bw_mib,
        "bandwidth": bw, "flash_attn": False, "n_batch": N_BATCH, "tg_prompt": TG_PROMPT},
        "models": []}

    for model in models:
        bpt = weight_bytes_per_token(model)
        raw = {t: {"lumen": [], "llama.cpp": []} for t in threads}
        desc = Path(model).name
        for rep in range(a.reps):
            for ti, t in enumerate(threads):
                order = [lumen, llama] if (rep + ti) % 2 == 0 else [llama, lumen]
                for eng in order:
                    r = eng.run(model, t, a)
                    if eng is lumen:
                        desc = r["desc"]
                        res["setup"]["lumen_kernels"] = r["kernels"]
                        res["setup"]["lumen_cmd"] = (f"bench -m {os.path.relpath(model, ROOT)} -p {a.pp},{a.ttft} "
                                                     f"-n {a.tg} -r 1 --warmup {a.warmup} -t T --bw-mib 0 -o json")
                        if r["bytes_per_token"] != bpt:
                            print(f"compare.py: note: lumen counts {r['bytes_per_token']} bytes/token,"
                                  f" the script {bpt}", file=sys.stderr)
                    else:
                        res["setup"]["llama_build_commit"] = llama.build_commit
                        res["setup"]["llama_cmds"] = llama.cmds
                    raw[t][eng.name].append(r)
                    print(f"compare.py: {Path(model).name} rep {rep + 1}/{a.reps} t={t} {eng.name}: "
                          f"pp {r['pp_ts']:.1f} tok/s, tg {r['tg_ts']:.2f} tok/s, TTFT "
                          f"{r['ttft_ms']:.1f} ms", file=sys.stderr)
        mr = {"model": str(model), "desc": desc, "bytes_per_token": bpt, "threads": {}}
        for t in threads:
            b = bw[t]["used"]
            entry = {"bw_gbps": b, "roofline_ts": b * 1e9 / bpt}
            for e in ("lumen", "llama.cpp"):
                runs = raw[t][e]
                d = {k: summary([r[k] for r in runs]) for k in ("pp_ts", "tg_ts", "ttft_ms", "load_ms", "ctx_ms")}
                d["tg_gbps"] = summary([r["tg_ts"] * bpt / 1e9 for r in runs])
                d["roof"] = d["tg_gbps"]["median"] / b if b > 0 else float("nan")
                entry[e] = d
            mr["threads"][str(t)] = entry
        res["models"].append(mr)

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    js = out / f"compare-{stamp}.json"
    md = out / f"compare-{stamp}.md"
    js.write_text(json.dumps(res, indent=1, default=str) + "\n")
    write_md(res, md)
    (out / "latest.md").write_text(md.read_text())
    print(md.read_text())
    print(f"compare.py: wrote {md}, {js}, {out / 'latest.md'}", file=sys.stderr)


if __name__ == "__main__":
    main()
