#!/usr/bin/env python3
"""lumen vs llama.cpp on the same GGUF files: pp512, tg128, TTFT, load time, read bandwidth
and each engine's fraction of the decode roofline, at -t 1 and 2, engines alternating run
by run. Writes bench/results/compare-<date>.md/.json and bench/results/latest.md.

usage: .venv/bin/python bench/compare.py [-r 3] [-t 1,2] [--models A.gguf B.gguf ...]

llama.cpp is the pinned llama-cpp-python in .venv (built from source with
CMAKE_ARGS=-DGGML_NATIVE=ON by scripts/setup.sh --reference), driven through its low-level
API: llama_decode over batches of 512 (logits only on the last prompt token) for pp, one
token per call for tg, n_threads = n_threads_batch, flash attention off. lumen is
build/lumen run as `lumen bench -o json` (one process per repetition and thread count).
"""
import argparse
import ctypes
import datetime
import json
import os
import platform
import re
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

def bench_text():
    """The fixed English text of `lumen bench` (src/cli/cli_bench.c), so both engines see
    the same prompt; each engine tokenizes it itself."""
    src = (ROOT / "src" / "cli" / "cli_bench.c").read_text()
    m = re.search(r"const char lm_bench_text\[\] =(.*?);\n", src, re.S)
    if not m:
        sys.exit("compare.py: cannot find lm_bench_text in src/cli/cli_bench.c")
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))


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


# ============================================================== lumen

class Lumen:
    name = "lumen"

    def __init__(self, binary):
        self.bin = str(binary)
        if not os.access(self.bin, os.X_OK):
            sys.exit(f"compare.py: {self.bin} not found: build it first "
                     "(cmake -S . -B build && cmake --build build -j2)")

    def run(self, model, threads, a):
        """One process: load, warm-up, one timed pp / tg / ttft each."""
        cmd = [self.bin, "bench", "-m", str(model), "-p", str(a.pp), "-n", str(a.tg),
               "--ttft", str(a.ttft), "-r", "1", "--warmup", str(a.warmup), "-t", str(threads),
               "--bw-mib", "0", "-o", "json"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"compare.py: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
        d = json.loads(p.stdout)
        tests = {t["test"]: t for t in d["tests"]}
        ns = lambda k: tests[k]["samples_ns"][0]
        return {"pp_ts": a.pp / (ns(f"pp{a.pp}") * 1e-9), "tg_ts": a.tg / (ns(f"tg{a.tg}") * 1e-9),
                "ttft_ms": ns(f"ttft{a.ttft}") / 1e6, "load_ms": d["model"]["load_ms"],
                "ctx_ms": d["model"].get("ctx_init_ms"),
                "bytes_per_token": d["model"]["bytes_per_token"], "desc": d["model"]["desc"],
                "kernels": d["system"]["kernels"]}

    def probe(self, model, threads, mib):
        cmd = [self.bin, "bench", "-m", str(model), "-p", "0", "-n", "0", "-r", "1", "--warmup", "0", "-t",
               ",".join(map(str, threads)), "--bw-mib", str(mib), "-o", "json"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            return {}
        return {b["threads"]: b["gbps"] for b in json.loads(p.stdout)["bandwidth"]}


# ============================================================== llama.cpp

class LlamaCpp:
    name = "llama.cpp"

    def __init__(self):
        import llama_cpp as L
        self.L = L
        L.llama_backend_init()
        # silence llama.cpp's log (keep a reference to the callback)
        self._log_cb = L.llama_log_callback(lambda level, text, user: None)
        L.llama_log_set(self._log_cb, ctypes.c_void_p(0))
        self.version = L.__version__
        self.system_info = L.llama_print_system_info().decode(errors="replace").strip()

    def tokens(self, vocab, n, text):
        L = self.L
        b = text.encode()
        buf = (L.llama_token * (len(b) + 16))()
        k = L.llama_tokenize(vocab, b, len(b), buf, len(buf), False, False)
        if k < 0:  # buffer too small: -k tokens needed
            buf = (L.llama_token * (-k))()
            k = L.llama_tokenize(vocab, b, len(b), buf, len(buf), False, False)
        if k <= 0:
            sys.exit("compare.py: llama.cpp tokenized the bench text to nothing")
        body = list(buf[:k])
        ids = []
        bos = L.llama_vocab_bos(vocab)
        if bos >= 0 and n > 0:
            ids.append(bos)
        j = 0
        while len(ids) < n:
            ids.append(body[j % len(body)])
            j += 1
        return ids

    def _batch(self, ids, pos0, logits_last):
        L = self.L
        b = L.llama_batch_init(len(ids), 0, 1)
        for i, t in enumerate(ids):
            b.token[i] = t
            b.pos[i] = pos0 + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1 if (logits_last and i == len(ids) - 1) else 0
        b.n_tokens = len(ids)
        return b

    def _prefill_batches(self, ids):
        return [self._batch(ids[o:o + N_BATCH], o, o + N_BATCH >= len(ids))
                for o in range(0, len(ids), N_BATCH)]

    def _decode(self, ctx, batches):
        for b in batches:
            rc = self.L.llama_decode(ctx, b)
            if rc != 0:
                sys.exit(f"compare.py: llama_decode returned {rc}")
        self.L.llama_synchronize(ctx)

    def run(self, model, threads, a, text):
        """Fresh model + context (as lumen's fresh process), warm-up, one timed pp/tg/ttft."""
        L = self.L
        need = max(a.pp, TG_PROMPT + a.tg, a.ttft)
        mp = L.llama_model_default_params()
        mp.n_gpu_layers = 0
        t0 = time.perf_counter_ns()
        mdl = L.llama_model_load_from_file(str(model).encode(), mp)
        t1 = time.perf_counter_ns()
        if not mdl:
            sys.exit(f"compare.py: llama.cpp cannot load {model}")
        cp = L.llama_context_default_params()
        cp.n_ctx = need
        cp.n_batch = cp.n_ubatch = N_BATCH
        cp.n_seq_max = 1
        cp.n_threads = cp.n_threads_batch = threads
        cp.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_DISABLED  # = llama-cpp-python's Llama default
        cp.no_perf = True
        t2 = time.perf_counter_ns()
        ctx = L.llama_init_from_model(mdl, cp)
        t3 = time.perf_counter_ns()
        if not ctx:
            sys.exit("compare.py: llama_init_from_model failed")
        vocab = L.llama_model_get_vocab(mdl)
        ids = self.tokens(vocab, need, text)
        mem = L.llama_get_memory(ctx)
        smpl = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
        for s in (L.llama_sampler_init_top_k(40), L.llama_sampler_init_top_p(0.95, 1),
                  L.llama_sampler_init_min_p(0.05, 1), L.llama_sampler_init_temp(0.8),
                  L.llama_sampler_init_dist(0)):
            L.llama_sampler_chain_add(smpl, s)
        # batches built before any timer starts
        pp_b = self._prefill_batches(ids[:a.pp]) if a.pp else []
        tg_pre = self._prefill_batches(ids[:TG_PROMPT])
        tg_b = [self._batch([ids[TG_PROMPT + i]], TG_PROMPT + i, True) for i in range(a.tg)]
        tt_b = self._prefill_batches(ids[:a.ttft]) if a.ttft else []
        keep = pp_b + tg_pre + tg_b + tt_b

        def pp():
            L.llama_memory_clear(mem, True)
            t = time.perf_counter_ns()
            self._decode(ctx, pp_b)
            return time.perf_counter_ns() - t

        def tg():
            L.llama_memory_clear(mem, True)
            self._decode(ctx, tg_pre)
            t = time.perf_counter_ns()
            self._decode(ctx, tg_b)
            return time.perf_counter_ns() - t

        def ttft():
            L.llama_memory_clear(mem, True)
            t = time.perf_counter_ns()
            self._decode(ctx, tt_b)
            L.llama_sampler_sample(smpl, ctx, -1)
            return time.perf_counter_ns() - t

        res = {"load_ms": (t1 - t0) / 1e6, "ctx_ms": (t3 - t2) / 1e6}
        for key, fn, n in (("pp_ts", pp, a.pp), ("tg_ts", tg, a.tg), ("ttft_ms", ttft, a.ttft)):
            if not n:
                res[key] = None
                continue
            for _ in range(a.warmup):
                fn()
            ns = fn()
            res[key] = ns / 1e6 if key == "ttft_ms" else n / (ns * 1e-9)
        for b in keep:
            L.llama_batch_free(b)
        L.llama_sampler_free(smpl)
        L.llama_free(ctx)
        L.llama_model_free(mdl)
        return res


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
    o.append(f"- lumen: `{s['lumen_bin']}` (kernels {s['lumen_kernels']}), run as "
             "`lumen bench -o json`, one process per repetition and thread count")
    o.append(f"- llama.cpp: llama-cpp-python {s['llama_cpp_version']}, built from source with "
             f"CMAKE_ARGS=-DGGML_NATIVE=ON ({s['llama_cpp_build']}); system info: "
             f"`{s['llama_cpp_system_info']}`")
    o.append(f"- pp{s['pp']}: prefill in llama_decode/lm_decode batches of {N_BATCH}, logits only "
             f"for the last token. tg{s['tg']}: {s['tg']} one-token decode calls (logits each, no "
             f"sampling) after a {TG_PROMPT}-token prompt. TTFT: prompt eval of {s['ttft']} tokens "
             "+ one sample (top-k 40, top-p 0.95, min-p 0.05, temp 0.8), tokenization excluded.")
    o.append(f"- both: same GGUF file, same prompt text (each engine tokenizes it), n_ctx "
             f"{s['n_ctx']}, f16 KV cache, n_threads = n_threads_batch, flash attention off "
             "(llama-cpp-python's Llama default; the low-level default is auto), mmap, warm page "
             f"cache; {s['warmup']} warm-up run per test; engines alternate run by run; "
             f"{s['reps']} reps; cells are median [min–max]")
    o.append(f"- load: lumen = lm_model_load (mmap, validate, tokenizer) + lm_context_init; "
             "llama.cpp = llama_model_load_from_file (vocab + weights) + llama_init_from_model"
             + ("; llama.cpp's CPU backend repacks quantized weights at load (REPACK = 1), "
                "which is most of its load time" if "REPACK = 1" in s["llama_cpp_system_info"] else ""))
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
            row(f"TTFT ms ({s['ttft']} tokens)", "ttft_ms", 1, " (<1: lumen faster)")
            row("model load ms", "load_ms", 1)
            row("context init ms", "ctx_ms", 1)
        o.append("")
    Path(path).write_text("\n".join(o) + "\n")


# ============================================================== main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
    a = ap.parse_args()
    try:
        threads = [int(x) for x in a.threads.split(",")]
    except ValueError:
        sys.exit(f"compare.py: -t: '{a.threads}' is not a list of integers")
    if a.reps < 1 or a.pp < 1 or a.tg < 1 or a.ttft < 1 or min(threads) < 1:
        sys.exit("compare.py: -r, --pp, --tg, --ttft and -t must be >= 1")
    models = ([] if a.no_default else [DEFAULT_MODEL]) + [Path(m) for m in a.models]
    for m in models:
        if not Path(m).is_file():
            sys.exit(f"compare.py: model {m} not found")
    text = bench_text()
    lumen, llama = Lumen(a.bin), LlamaCpp()

    # ---- bandwidth: the script's own numpy probe and lumen's; the roofline uses the higher
    print("compare.py: read-bandwidth probes...", file=sys.stderr)
    lp = lumen.probe(models[0], threads, a.bw_mib)
    bw = {}
    for t in threads:
        n = numpy_bandwidth(t, a.bw_mib)
        l = lp.get(t)
        bw[t] = {"numpy": n, "lumen": l, "used": max(n, l or 0.0)}

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
    date = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    res = {"date": date, "setup": {
        "cpu": cpu, "cores": os.cpu_count(), "l3_bytes": l3, "platform": platform.platform(),
        "lumen_bin": os.path.relpath(a.bin, ROOT), "lumen_kernels": None,
        "llama_cpp_version": llama.version, "llama_cpp_system_info": llama.system_info,
        "llama_cpp_build": "wheel built locally by scikit-build-core; AVX512 flags in the "
                           "system info come from -march=native" if "AVX512 = 1" in llama.system_info
                           else "check the system info",
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
                    r = eng.run(model, t, a) if eng is lumen else eng.run(model, t, a, text)
                    if eng is lumen:
                        desc = r["desc"]
                        res["setup"]["lumen_kernels"] = r["kernels"]
                        if r["bytes_per_token"] != bpt:
                            print(f"compare.py: note: lumen counts {r['bytes_per_token']} bytes/token,"
                                  f" the script {bpt}", file=sys.stderr)
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
