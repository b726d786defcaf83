#!/usr/bin/env python3
"""lumen vs llama.cpp on models at real shapes (bench/make_shapes.py --shape): pp and tg at each
thread count against llama-bench, lumen's tg roofline fraction and both engines' peak RSS;
optionally decode at depth (llama-bench -d D, -fa 0 and -fa 1, the faster counts) and batched
decode (llama-batched-bench).
Writes bench/results/scale-<date>.md/.json.

usage: .venv/bin/python bench/scale.py [MODEL.gguf ...] [-r 3] [--threads 1,2] [--pp 512]
           [--tg 128] [--shapes llama-3.2-1b,...] [--formats [q4_k_m,...]] [--families [LIST]]
           [--make] [--layers N] [--fa-best]
           [--depth 4096,16384] [--parallel 8,16] [--parallel-prompt 64] [--parallel-gen 128]
Without MODEL arguments: every <shape>[-NL]-random-<fmt>.gguf in ~/.cache/lumen/shapes
(F16 files only if --formats names f16), filtered by --shapes / --formats. Run it under
`flock /tmp/lumen-bench.lock` on a shared host.

--make: make the files that --shapes x --formats name and the cache lacks first
(bench/make_shapes.py --shape S --formats F [--layers N]: an F16 from tools/make_arch_gguf.py,
then .reference/bin/llama-quantize). --fa-best: llama-bench runs with -fa off and with -fa on
(each its own process, in the round's alternation), and per metric the faster counts.
--formats with no list: issue 37's format comparison, the same as
`--shapes llama-3.2-1b --formats q4_k_m,q2_k,q3_k_m,iq4_xs,iq4_nl,q5_1,q4_1 --make --fa-best`
(Q4_K_M is the baseline row); a summary table per format follows the main one.
--families [phi-4-mini,granite-3.3-2b,smollm3-3b,deepseek-v2-lite]: each new family at its real
per-layer shape (make_shapes.py SHAPES; DeepSeek-V2-Lite 8 of its 27 layers), in --formats
(default q4_k_m), with --make and --fa-best; a family whose make_arch_gguf.py entry does not
exist yet is skipped with a note.
MXFP4 experts (issue 35): `--shapes qwen3-30b-a3b --formats q4_k_m,mxfp4_moe --make --fa-best`
(llama-quantize's MXFP4_MOE: experts MXFP4, every other matrix Q8_0); gpt-oss-20b (4 of its 24
layers): `--shapes gpt-oss-20b --formats mxfp4_moe --make --fa-best --parallel 8`.

Per model, per repetition and thread count, one process of each engine, the engine that goes
first alternating (bench/compare.py's Lumen.run / LlamaBench.run: lumen bench -p PP,16 -n TG,
llama-bench -p PP,16 -n 0 and -p 0 -n TG -d 16, -fa off, f16 KV). Each round gives a
lumen / llama.cpp ratio per metric; the table's ratio is the median of those per-round ratios
[min–max], so a bandwidth swing between rounds moves both engines of a round together. The
roofline column is lumen's own tg roofline fraction: the weight GB/s lumen bench reports for tg
(weights read per token x tok/s) over lumen's read-bandwidth probe at the same thread count, run
once per round in a process of its own (its buffer would inflate the bench's RSS). RSS is
lumen bench's own report when it has one (a key with "rss" in its json "model"/"memory"
objects), else the process's peak resident set (ru_maxrss = VmHWM) measured here; llama.cpp's
is always measured (the larger of its pp and tg processes).

--depth D1,D2: tg TG after D positions already in the KV cache: `lumen bench -p 0 -n TG -d D`
against `llama-bench -p 0 -n TG -d D` with -fa 0 and with -fa 1 (two processes, their order
alternating per round), per depth the faster of the two counting (llama.cpp's best setting: on
CPUs -fa 0 is often the faster at depth), alternating with lumen per round as above. The table
gives lumen's roofline fraction at each depth: (weights + KV bytes per token, lumen bench's
bytes_per_token + kv_bytes_per_token) x tok/s over the round's read-bandwidth probe (needs
--bw-mib > 0). Skipped with a note when lumen bench has no -d.
--parallel N1,N2: bench/compare.py's batched decode (lumen bench --parallel vs
llama-batched-bench, same prompt / gen lengths; the ratio is lumen's forward-pass t/s over
llama.cpp's S_TG, aggregate over the N sequences), alternating per round.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare  # noqa: E402
import make_shapes  # noqa: E402
import reference  # noqa: E402

ROOT = compare.ROOT
SHAPE_DIR = Path.home() / ".cache" / "lumen" / "shapes"
# --formats with no list: issue 37's formats on the Llama 3.2 1B shape, Q4_K_M the baseline
FORMAT_SET = ("q4_k_m", "q2_k", "q3_k_m", "iq4_xs", "iq4_nl", "q5_1", "q4_1")
FORMAT_SHAPE = "llama-3.2-1b"
# --families with no list: issue 37's families at their real shapes (make_shapes.py SHAPES)
DRY_VOCAB = 512  # --dry-run's reduced vocabulary
FAMILY_SET = ("phi-4-mini", "granite-3.3-2b", "smollm3-3b", "deepseek-v2-lite")
NAME_RE = re.compile(r"^(?P<shape>.+?)(?:-(?P<layers>\d+)L)?-random-(?P<fmt>[a-z0-9_]+)\.gguf$")


def die(msg):
    sys.exit(f"scale.py: {msg}")


def parse_name(path):
    """(shape, layers or None for the real count, format) from a make_shapes.py file name."""
    m = NAME_RE.match(Path(path).name)
    if not m:
        return Path(path).stem, None, "?"
    return m["shape"], int(m["layers"]) if m["layers"] else None, m["fmt"]


def ints(opt, s):
    try:
        v = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        die(f"{opt}: '{s}' is not a comma-separated list of integers")
    if not v or min(v) < 1:
        die(f"{opt}: values must be >= 1")
    return v


def med(xs):
    """median [min, max] of the non-None values, or None."""
    xs = [x for x in xs if x is not None]
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "samples": xs} if xs else None


def reported_rss(raw):
    """Peak RSS in bytes from lumen bench's json when it reports one, else None."""
    best = None
    for obj in (raw.get("model", {}), raw.get("memory", {}), raw):
        if not isinstance(obj, dict):
            continue
        for k, v in obj.items():
            if "rss" in k.lower() and isinstance(v, (int, float)) and v > 0:
                v = v * (1 << 20) if k.lower().endswith("_mb") else v
                if best is None or ("peak" in k.lower() or "hwm" in k.lower()):
                    best = int(v)
    return best


def lumen_has_depth(binary):
    p = subprocess.run([binary, "bench", "--help"], capture_output=True, text=True)
    return "--depth" in p.stdout + p.stderr


# ============================================================== decode at depth

def lumen_depth(binary, model, t, a, depths):
    cmd = [binary, "bench", "-m", str(model), "-p", "0", "-n", str(a.tg), "-d",
           ",".join(map(str, depths)), "-r", "1", "--warmup", str(a.warmup), "-t", str(t),
           "--bw-mib", "0", "-o", "json"]
    p = compare.run_rss(cmd)
    if p.returncode != 0:
        die(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    out, kv = {}, {}
    raw = json.loads(p.stdout)
    for x in raw["tests"]:
        if x.get("kind") == "tg" and x.get("n_depth") in depths:
            out[x["n_depth"]] = a.tg / (x["samples_ns"][0] * 1e-9)
            kv[x["n_depth"]] = x.get("kv_bytes_per_token")
    if set(out) != set(depths):
        die(f"lumen bench -d gave no tg result for depth(s) {sorted(set(depths) - set(out))}")
    # bytes one decode step reads at each depth: the weights and the KV cells it attends to
    wb = raw.get("model", {}).get("bytes_per_token")
    out_bytes = {d: (wb + kv[d] if wb and kv.get(d) is not None else None) for d in depths}
    return out, out_bytes, cmd


def llama_depth(exe, model, t, a, depths, fa="1"):
    """llama-bench tg at each depth, flash attention fa; the last of warmup+1 runs counts."""
    cmd = [exe, "-m", str(model), "-t", str(t), "-r", str(a.warmup + 1), "-p", "0", "-n",
           str(a.tg), "-d", ",".join(map(str, depths)), "-fa", fa, "-b", str(compare.N_BATCH),
           "-ub", str(compare.N_BATCH), "-o", "jsonl"]
    p = compare.run_rss(cmd)
    if p.returncode != 0:
        tail = " | ".join(p.stderr.strip().splitlines()[-3:])
        die(f"{' '.join(cmd)} failed ({p.returncode}): {tail}")
    out = {}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            out[r["n_depth"]] = a.tg / (r["samples_ns"][-1] * 1e-9)
    if set(out) != set(depths):
        die(f"llama-bench -d gave no result for depth(s) {sorted(set(depths) - set(out))}")
    return out, cmd


# ============================================================== llama-bench's best setting

def llama_best(llama, model, t, a):
    """llama-bench with -fa off and -fa on (two processes, in alternating order per round);
    per metric the faster counts, and the record says which setting gave it."""
    runs = {}
    llama.n_best = getattr(llama, "n_best", 0) + 1
    for fa in (("off", "on") if llama.n_best % 2 else ("on", "off")):
        llama.fa = fa
        runs[fa] = llama.run(model, t, a)
    llama.fa = "off"
    pp = max(runs, key=lambda k: runs[k]["pp_ts"])
    tg = max(runs, key=lambda k: runs[k]["tg_ts"])
    return {"pp_ts": runs[pp]["pp_ts"], "tg_ts": runs[tg]["tg_ts"],
            "ttft_ms": min(r["ttft_ms"] for r in runs.values()), "load_ms": None,
            "ctx_ms": None, "rss_bytes": max(r["rss_bytes"] for r in runs.values()),
            "fa": {"pp": pp, "tg": tg}, "by_fa": runs}


# ============================================================== one model

def bench_model(model, a, threads, lumen, llama, tools):
    shape, layers, fmt = parse_name(model)
    row = {"model": str(model), "shape": shape, "layers": layers, "format": fmt,
           "file_bytes": os.path.getsize(model), "threads": {}, "depth": {}, "parallel": {},
           "notes": []}
    name = Path(model).name
    raw = {t: {"lumen": [], "llama.cpp": []} for t in threads}
    for rep in range(a.reps):
        # lumen's read-bandwidth probe in a process of its own (its buffer would count in the
        # bench process's RSS), once per round for every thread count
        bw = lumen.probe(model, threads, a.bw_mib) if a.bw_mib else {}
        for ti, t in enumerate(threads):
            order = [lumen, llama] if (rep + ti) % 2 == 0 else [llama, lumen]
            for eng in order:
                r = llama_best(eng, model, t, a) if eng is llama and a.fa_best else eng.run(model, t, a)
                if eng is lumen:
                    row["desc"], row["bytes_per_token"] = r["desc"], r["bytes_per_token"]
                    row["n_layer"] = r["raw"]["model"].get("n_layer")
                    tg = [x for x in r["raw"]["tests"] if x["kind"] == "tg"]
                    # lumen's roofline fraction: its weight GB/s in tg over its probe's GB/s
                    r["bw_gbps"] = bw.get(t)
                    r["roof"] = (tg[0]["gbps"] / bw[t] if tg and tg[0].get("gbps") and bw.get(t)
                                 else None)
                    rep_rss = reported_rss(r["raw"])
                    r["rss_src"] = "lumen bench" if rep_rss else "VmHWM"
                    r["rss_bytes"] = rep_rss or r["rss_bytes"]
                    del r["raw"]
                raw[t][eng.name].append(r)
                print(f"scale.py: {name} rep {rep + 1}/{a.reps} t={t} {eng.name}: pp "
                      f"{r['pp_ts']:.1f} tg {r['tg_ts']:.2f} tok/s, RSS "
                      f"{r['rss_bytes'] / 1e6:.0f} MB", file=sys.stderr, flush=True)
    for t in threads:
        L, C = raw[t]["lumen"], raw[t]["llama.cpp"]
        row["threads"][str(t)] = {
            "pp_lumen": med([r["pp_ts"] for r in L]), "pp_llama": med([r["pp_ts"] for r in C]),
            "pp_ratio": med([x["pp_ts"] / y["pp_ts"] for x, y in zip(L, C)]),
            "tg_lumen": med([r["tg_ts"] for r in L]), "tg_llama": med([r["tg_ts"] for r in C]),
            "tg_ratio": med([x["tg_ts"] / y["tg_ts"] for x, y in zip(L, C)]),
            "roof": med([r["roof"] for r in L]),
            "llama_fa": ({k: sorted({r["fa"][k] for r in C}) for k in ("pp", "tg")}
                         if C and "fa" in C[0] else None),
            "rss_lumen": max(r["rss_bytes"] for r in L), "rss_src": L[0]["rss_src"],
            "rss_llama": max(r["rss_bytes"] for r in C), "raw": raw[t]}

    if a.depth and not tools["depth"]:
        row["notes"].append("--depth skipped: this lumen bench has no -d/--depth")
    elif a.depth:
        d_raw = {t: [] for t in threads}
        for rep in range(a.reps):
            for ti, t in enumerate(threads):
                first_lumen = (rep + ti) % 2 == 0
                res = {}
                for eng in (("lumen", "llama") if first_lumen else ("llama", "lumen")):
                    if eng == "lumen":
                        res[eng], res["bytes"], cmd = lumen_depth(lumen.bin, model, t, a, a.depth)
                        row.setdefault("depth_cmds", {})[eng] = " ".join(cmd[1:]).replace(
                            f"{ROOT}/", "")
                        continue
                    # llama.cpp's best: -fa 0 and -fa 1, their order alternating per round
                    by_fa = {}
                    for fa in (("0", "1") if rep % 2 == 0 else ("1", "0")):
                        by_fa[fa], cmd = llama_depth(llama.exe, model, t, a, a.depth, fa)
                        row.setdefault("depth_cmds", {})[f"llama -fa {fa}"] = " ".join(
                            cmd[1:]).replace(f"{ROOT}/", "")
                    res["llama"] = {d: max(by_fa["0"][d], by_fa["1"][d]) for d in a.depth}
                    res["llama_fa"] = {d: ("0" if by_fa["0"][d] >= by_fa["1"][d] else "1")
                                       for d in a.depth}
                    res["by_fa"] = by_fa
                # lumen's roofline fraction at depth: (weights + KV) bytes x tok/s over the probe
                bws = [r["bw_gbps"] for r in raw[t]["lumen"] if r.get("bw_gbps")]
                bw = statistics.median(bws) if bws else 0
                res["roof"] = {d: (res["bytes"][d] * res["lumen"][d] / (bw * 1e9)
                                   if bw and res["bytes"][d] else None) for d in a.depth}
                d_raw[t].append(res)
                print(f"scale.py: {name} depth rep {rep + 1} t={t}: " + ", ".join(
                    f"d{d} {res['lumen'][d]:.2f} vs {res['llama'][d]:.2f} (-fa {res['llama_fa'][d]})"
                    for d in a.depth), file=sys.stderr, flush=True)
        for t in threads:
            row["depth"][str(t)] = {str(d): {
                "lumen": med([r["lumen"][d] for r in d_raw[t]]),
                "llama": med([r["llama"][d] for r in d_raw[t]]),
                "llama_fa": sorted({r["llama_fa"][d] for r in d_raw[t]}),
                "bytes_per_token": d_raw[t][0]["bytes"][d],
                "roof": (med([r["roof"][d] for r in d_raw[t]])
                         if all(r["roof"][d] for r in d_raw[t]) else None),
                "ratio": med([r["lumen"][d] / r["llama"][d] for r in d_raw[t]])} for d in a.depth}

    if a.parallel:
        ns = argparse.Namespace(batched_prompt=a.parallel_prompt, batched_gen=a.parallel_gen,
                                warmup=a.warmup)
        s = compare.batched_llama_settings(a.parallel, a.parallel_prompt, a.parallel_gen, "off")
        p_raw = {t: [] for t in threads}
        for rep in range(a.reps):
            for ti, t in enumerate(threads):
                res = {}
                for eng in (("lumen", "llama") if (rep + ti) % 2 == 0 else ("llama", "lumen")):
                    if eng == "lumen":
                        res[eng], info = compare.lumen_batched(lumen.bin, model, t, ns, a.parallel)
                    else:
                        res[eng], info = compare.llama_batched(tools["batched"], model, t, ns,
                                                               a.parallel, s)
                    row.setdefault("parallel_cmds", {})[eng] = " ".join(
                        map(str, info["cmd"][1:])).replace(f"{ROOT}/", "")
                p_raw[t].append(res)
                print(f"scale.py: {name} parallel rep {rep + 1} t={t}: " + ", ".join(
                    f"N={n} {res['lumen'][n]['fwd_ts']:.1f} vs {res['llama'][n]['s_tg']:.1f}"
                    for n in a.parallel), file=sys.stderr, flush=True)
        for t in threads:
            row["parallel"][str(t)] = {str(n): {
                "lumen": med([r["lumen"][n]["fwd_ts"] for r in p_raw[t]]),
                "llama": med([r["llama"][n]["s_tg"] for r in p_raw[t]]),
                "ratio": med([r["lumen"][n]["fwd_ts"] / r["llama"][n]["s_tg"] for r in p_raw[t]])}
                for n in a.parallel}
    return row


# ============================================================== report

def q(s, nd=1):
    return "-" if not s else f"{s['median']:.{nd}f}"


def qr(s):
    return "-" if not s else f"**{s['median']:.2f}** [{s['min']:.2f}–{s['max']:.2f}]"


def summary_md(res):
    """One row per shape and format: the ratios at each thread count, and (--fa-best) which
    llama-bench -fa setting was the faster; the goals are issue 37's (decode >= 1.3x, floor
    1.0x; prefill >= 2x, floor 1.3x)."""
    threads = [str(t) for t in res["setup"]["threads"]]
    o = ["## Per format and family (ratio lumen / llama.cpp; goals: tg >= 1.3, floor 1.0; "
         "pp >= 2, floor 1.3)\n",
         "| shape | format | file MB | " + " | ".join(f"pp t{t}" for t in threads) + " | "
         + " | ".join(f"tg t{t}" for t in threads) + " | llama.cpp -fa (pp / tg) | floors |",
         "| --- | --- | ---: | " + " | ".join("---" for _ in threads * 2) + " | --- | --- |"]
    for m in res["models"]:
        rs = [m["threads"].get(t) for t in threads]
        fa = sorted({"/".join(",".join(r["llama_fa"][k]) for k in ("pp", "tg"))
                     for r in rs if r and r.get("llama_fa")}) or ["off (fixed)"]
        low = [f"{k} t{t}" for t, r in zip(threads, rs) if r for k, fl in (("pp", 1.3), ("tg", 1.0))
               if r[f"{k}_ratio"] and r[f"{k}_ratio"]["median"] < fl]
        o.append(f"| {m['shape']} | {m['format']} | {m['file_bytes'] / 1e6:.0f} | "
                 + " | ".join(qr(r["pp_ratio"]) if r else "-" for r in rs) + " | "
                 + " | ".join(qr(r["tg_ratio"]) if r else "-" for r in rs)
                 + f" | {'; '.join(fa)} | {'below: ' + ', '.join(low) if low else 'met'} |")
    return o + [""]


def write_md(res, path):
    s = res["setup"]
    o = [f"# lumen vs llama.cpp at real shapes: {res['date']}\n",
         f"- command: `{s['command']}`",
         f"- host: {s['cpu']} ({s['cores']} cores), load average (1/5/15 min) "
         f"{' / '.join(f'{x:.2f}' for x in s['load_before'])} before, "
         f"{' / '.join(f'{x:.2f}' for x in s['load_after'])} after; shared: compare ratios",
         f"- lumen `{s['lumen_cmd']}` (kernels {s['lumen_kernels']}); llama.cpp llama-bench "
         f"(build {s['llama_build_commit']}, from {s['llama_cpp_built_from'] or '?'}): "
         + " and ".join(f"`{c}`" for c in (s["llama_cmds"] or [])),
         f"- pp{s['pp']} / tg{s['tg']} (tg after a 16-token prompt), {s['reps']} rounds, "
         f"warm-up {s['warmup']}, engines alternating; ratio = median of per-round lumen / "
         "llama.cpp [min–max] (>1: lumen faster); tok/s columns are medians. roof = lumen's "
         "tg roofline fraction (its tg weight GB/s over its read-bandwidth probe, "
         f"`{s['lumen_probe_cmd']}` once per round). "
         "RSS = peak resident set (MB) of one bench process"
         + ("; llama-bench ran with -fa off and -fa on, per metric the faster counts"
            if s.get("fa_best") else ""),
         ""]
    o.append("| shape | layers | format | file MB | threads | pp lumen | pp llama.cpp | pp ratio "
             "| tg lumen | tg llama.cpp | tg ratio | lumen tg roof | RSS lumen / llama.cpp MB |")
    o.append("| --- | ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- | ---: | --- |")
    for m in res["models"]:
        layers = m.get("n_layer") if m["layers"] is None else m["layers"]
        for t, r in m["threads"].items():
            roof = "-" if not r["roof"] else f"{r['roof']['median']:.0%}"
            src = "" if r["rss_src"] == "lumen bench" else " (VmHWM)"
            o.append(f"| {m['shape']} | {layers}{'' if m['layers'] is None else ' (reduced)'} "
                     f"| {m['format']} | {m['file_bytes'] / 1e6:.0f} | {t} | {q(r['pp_lumen'])} "
                     f"| {q(r['pp_llama'])} | {qr(r['pp_ratio'])} | {q(r['tg_lumen'], 2)} "
                     f"| {q(r['tg_llama'], 2)} | {qr(r['tg_ratio'])} | {roof} "
                     f"| {r['rss_lumen'] / 1e6:.0f}{src} / {r['rss_llama'] / 1e6:.0f} |")
    o.append("")
    if s.get("fa_best") or len({m["format"] for m in res["models"]}) > 1:
        o += summary_md(res)
    if any(m["depth"] for m in res["models"]):
        o.append(f"## Decode at depth (tg{s['tg']} after D positions; llama.cpp's faster of "
                 f"-fa 0 / -fa 1)\n")
        o.append("lumen roof = (weights + KV bytes per token) x lumen's tok/s over its read-bandwidth "
                 "probe; llama -fa = the setting that was faster (both if the rounds differ).\n")
        o.append("| shape | format | threads | depth | MB per token | lumen tok/s | lumen roof "
                 "| llama.cpp tok/s | llama -fa | ratio |")
        o.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
        for m in res["models"]:
            for t, per in m["depth"].items():
                for d, r in per.items():
                    mb = f"{r['bytes_per_token'] / 1e6:.0f}" if r.get("bytes_per_token") else "-"
                    roof = f"{r['roof']['median']:.0%}" if r.get("roof") else "-"
                    o.append(f"| {m['shape']} | {m['format']} | {t} | {d} | {mb} "
                             f"| {q(r['lumen'], 2)} | {roof} | {q(r['llama'], 2)} "
                             f"| {','.join(r.get('llama_fa', []))} | {qr(r['ratio'])} |")
        o.append("")
    if any(m["parallel"] for m in res["models"]):
        o.append(f"## Batched decode (N sequences, prompt {s['parallel_prompt']}, "
                 f"{s['parallel_gen']} steps; lumen fwd t/s vs llama-batched-bench S_TG)\n")
        o.append("| shape | format | threads | N | lumen t/s | llama.cpp t/s | ratio |")
        o.append("| --- | --- | ---: | ---: | ---: | ---: | --- |")
        for m in res["models"]:
            for t, per in m["parallel"].items():
                for n, r in per.items():
                    o.append(f"| {m['shape']} | {m['format']} | {t} | {n} | {q(r['lumen'])} "
                             f"| {q(r['llama'])} | {qr(r['ratio'])} |")
        o.append("")
    notes = sorted({n for m in res["models"] for n in m["notes"]} | set(s.get("notes") or []))
    if notes:
        o += ["Notes:"] + [f"- {n}" for n in notes] + [""]
    Path(path).write_text("\n".join(o) + "\n")


# ============================================================== main

def make_missing(a, shapes, fmts):
    """--make: bench/make_shapes.py --shape S --formats F for each shape that lacks a file;
    returns the notes of shapes skipped (no make_arch_gguf.py family yet)."""
    notes = []
    for shape in shapes:
        if shape not in make_shapes.SHAPES:
            die(f"unknown shape '{shape}' (known: {', '.join(sorted(make_shapes.SHAPES))})")
        family, default_layers = make_shapes.SHAPES[shape]
        if family not in make_shapes.mk.FAMILIES:
            notes.append(f"{shape} skipped: tools/make_arch_gguf.py has no family '{family}' yet")
            print(f"scale.py: note: {notes[-1]}", file=sys.stderr)
            continue
        layers = a.layers if a.layers is not None else default_layers
        missing = [f for f in fmts if not os.path.exists(
            make_shapes.shape_path(str(a.shape_dir), shape, layers, f))]
        if missing:
            ns = argparse.Namespace(shape=shape, layers=layers, formats=",".join(missing),
                                    keep_f16=False, out=str(a.shape_dir), force=False,
                                    seed=make_shapes.mk.CI_SEED, no_check=a.dry_run,
                                    vocab=DRY_VOCAB if a.dry_run else None)
            make_shapes.make_shape(ns)
    return notes


def find_models(a):
    if a.models:
        for m in a.models:
            if not Path(m).is_file():
                die(f"model {m} not found")
        return [Path(m) for m in a.models]
    fmts = a.formats.split(",") if a.formats else None
    shapes = a.shapes.split(",") if a.shapes else None
    if a.make:
        bad = [f for f in fmts or [] if f not in make_shapes.FORMATS + ("f16",)]
        if bad or not fmts or not shapes:
            die("--make needs --shapes and --formats (formats: "
                f"{', '.join(make_shapes.FORMATS)}, f16)" + (f"; unknown: {bad}" if bad else ""))
        a.notes += make_missing(a, shapes, fmts)
        shapes = [x for x in shapes if not any(n.startswith(x + " skipped") for n in a.notes)]
        if not shapes:
            die("no shape left to run: " + "; ".join(a.notes))
    out = []
    for p in sorted(Path(a.shape_dir).glob("*-random-*.gguf")):
        shape, _, fmt = parse_name(p)
        if (fmts and fmt not in fmts) or (not fmts and fmt == "f16"):
            continue
        if shapes and shape not in shapes:
            continue
        if a.make and a.layers is not None and parse_name(p)[1] not in (a.layers, None):
            continue
        out.append(p)
    if fmts and shapes:  # in the order asked (the format comparison: the baseline first)
        out.sort(key=lambda p: (shapes.index(parse_name(p)[0]), fmts.index(parse_name(p)[2])))
    if not out:
        die(f"no model files in {a.shape_dir} match (make them with bench/make_shapes.py "
            "--shape, or --make)")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help="GGUF files (default: the shape cache)")
    ap.add_argument("--shapes", default="", help="with no files: these shapes only")
    ap.add_argument("--formats", nargs="?", default="", const="@set",
                    help="with no files: these formats only; with no list: issue 37's format "
                    "comparison (%s on %s, --make --fa-best)" % (",".join(FORMAT_SET), FORMAT_SHAPE))
    ap.add_argument("--families", nargs="?", default="", const=",".join(FAMILY_SET),
                    help="issue 37's families at their real shapes (default %s), --make "
                    "--fa-best; one make_arch_gguf.py lacks is skipped" % ",".join(FAMILY_SET))
    ap.add_argument("--make", action="store_true",
                    help="make missing --shapes x --formats files first (bench/make_shapes.py)")
    ap.add_argument("--layers", type=int, default=None,
                    help="with --make: layers of the files made and run (default: the shape's)")
    ap.add_argument("--fa-best", action="store_true",
                    help="llama-bench with -fa off and on, the faster counts per metric")
    ap.add_argument("-r", "--reps", type=int, default=3, help="rounds (default 3)")
    ap.add_argument("-t", "--threads", default="1,2")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--bw-mib", type=int, default=512,
                    help="lumen's read-bandwidth probe per run (its tg roofline; 0 = none)")
    ap.add_argument("--depth", default="", help="decode at these depths, e.g. 4096,16384")
    ap.add_argument("--parallel", default="", help="batched decode of N sequences, e.g. 8,16")
    ap.add_argument("--parallel-prompt", type=int, default=64)
    ap.add_argument("--parallel-gen", type=int, default=128)
    ap.add_argument("--shape-dir", default=str(SHAPE_DIR), help=f"the shape cache ({SHAPE_DIR})")
    ap.add_argument("--dry-run", action="store_true",
                    help="check the plumbing in a minute: 1-layer copies with a 512-token "
                    "vocabulary in a temporary folder, 1 round, pp16 / tg4, 1 thread")
    ap.add_argument("--bin", default=str(ROOT / "build" / "lumen"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    a = ap.parse_args()
    a.notes = []
    if a.formats == "@set":  # --formats alone: the format comparison
        a.formats, a.shapes = ",".join(FORMAT_SET), a.shapes or FORMAT_SHAPE
        a.make = a.fa_best = True
    if a.families:
        if a.models or a.shapes:
            die("--families takes no model files and no --shapes")
        a.shapes, a.formats = a.families, a.formats or "q4_k_m"
        a.make = a.fa_best = True
    if a.make and a.models:
        die("--make (and --formats / --families alone) take no model files")
    if a.dry_run:
        import tempfile
        a.shape_dir = a.out = tempfile.mkdtemp(prefix="scale-dry-")
        a.layers, a.reps, a.pp, a.tg, a.threads, a.bw_mib = 1, 1, 16, 4, "1", 0
        print(f"scale.py: dry run in {a.shape_dir} (delete it afterwards)", file=sys.stderr)
    threads = ints("--threads", a.threads)
    a.depth = ints("--depth", a.depth) if a.depth else []
    a.parallel = ints("--parallel", a.parallel) if a.parallel else []
    if a.reps < 1 or a.pp < 1 or a.tg < 1 or a.warmup < 0:
        die("-r, --pp and --tg must be >= 1, --warmup >= 0")
    a.ttft = 16  # compare.Lumen.run / LlamaBench.run also time a 16-token prefill (json only)
    if a.make:  # llama-quantize before anything is made
        try:
            reference.tool("llama-quantize")
        except reference.ReferenceMissing as e:
            die(str(e))
        make_shapes.LLAMA_QUANTIZE = str(reference.bin_dir() / "llama-quantize")
    models = find_models(a)

    # every tool up front, so a missing one fails before any run
    lumen = compare.Lumen(a.bin)
    tools = {"depth": bool(a.depth) and lumen_has_depth(lumen.bin), "batched": None}
    try:
        llama = compare.LlamaBench(reference.tool("llama-bench"))
        if a.parallel:
            tools["batched"] = reference.tool("llama-batched-bench")
    except reference.ReferenceMissing as e:
        die(str(e))
    if a.depth and not tools["depth"]:
        print("scale.py: note: this lumen bench has no -d/--depth: decode at depth skipped",
              file=sys.stderr)

    machine = compare.machine_info()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    res = {"date": date, "setup": dict(machine, **{
        "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
        "load_before": os.getloadavg(), "pp": a.pp, "tg": a.tg, "reps": a.reps,
        "warmup": a.warmup, "threads": threads, "bw_mib": a.bw_mib, "depth": a.depth,
        "parallel": a.parallel, "parallel_prompt": a.parallel_prompt,
        "parallel_gen": a.parallel_gen, "llama_cpp_built_from": reference.built_from(),
        "fa_best": a.fa_best, "notes": a.notes,
        "lumen_cmd": f"bench -m M -p {a.pp},16 -n {a.tg} -r 1 --warmup {a.warmup} -t T "
                     f"--bw-mib 0 -o json", "lumen_probe_cmd": f"bench -m M -p 0 -n 0 -r 1 "
                     f"--warmup 0 -t {a.threads} --bw-mib {a.bw_mib} -o json"}), "models": []}
    t0 = time.time()
    for m in models:
        # a file this lumen refuses (a format or family not merged yet) is a note, not a stop
        p = subprocess.run([lumen.bin, "info", "--no-tensors", str(m)], capture_output=True,
                           text=True)
        if p.returncode != 0:
            a.notes.append(f"{Path(m).name} skipped: {p.stderr.strip()[-300:]}")
            print(f"scale.py: note: {a.notes[-1]}", file=sys.stderr)
            continue
        res["models"].append(bench_model(m, a, threads, lumen, llama, tools))
    if not res["models"]:
        die("no model left to run: " + "; ".join(a.notes))
    res["setup"].update({"load_after": os.getloadavg(), "seconds": round(time.time() - t0),
                         "llama_build_commit": llama.build_commit, "llama_cmds": llama.cmds})
    for m in res["models"]:
        for r in m["threads"].values():
            res["setup"]["lumen_kernels"] = r["raw"]["lumen"][0]["kernels"]

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d-%H%M")
    js, md = out / f"scale-{stamp}.json", out / f"scale-{stamp}.md"
    js.write_text(json.dumps(res, indent=1, default=str) + "\n")
    write_md(res, md)
    print(md.read_text())
    print(f"scale.py: wrote {md}, {js} in {res['setup']['seconds']} s", file=sys.stderr)


if __name__ == "__main__":
    main()
