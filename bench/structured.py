#!/usr/bin/env python3
"""Structured output benchmark (issue 23): the token mask, schema compiles, decode speed with and
without a JSON schema in lumen and in llama.cpp's llama-server, jump-forward, output validity.

Parts (--parts, comma-separated; default all):
  mask     per-token mask time (mean, p50, p99, max; thread CPU and wall) over a corpus of schemas
           and documents replayed token by token (build/grammar_replay_bench), at the default
           model's vocabulary and at the Qwen2 vocabulary (151,936 tokens); warm (one compiled
           grammar per schema) and cold (a fresh grammar per document)
  compile  schema -> GBNF -> lm_grammar_compile per schema (p50/p90/max), the first compile per
           tokenizer (the vocabulary trie) apart; from the same replay runs as mask
  decode   lumen: tok/s with a schema (greedy) and without (ignore_eos, max_tokens = the schema
           answer's token count), single stream and --streams concurrent streams through
           `lumen serve` (response_format json_schema); where the server refuses the field,
           single stream through `lumen run` (whose plain path is not the engine's: noted);
           jump-forward steps from `lumen run --json-schema`'s stats line
  llama    the same prompts and schemas through llama-server (`json_schema` field), same rounds

Every output of both engines (greedy and sampled) is validated with `jsonschema`; generated
documents join the corpus's valid examples as documents for the mask replay. Rounds alternate the
order of the compared runs (schema/plain, lumen/llama, 262k/151k) and ratios are medians of the
per-round ratios: the machine is shared and noisy. Run it under the benchmark lock:

  flock /tmp/lumen-bench.lock .venv/bin/python bench/structured.py [--parts ...] [--rounds N]
  .venv/bin/python bench/structured.py --smoke     # 2 schemas, mask+compile only, seconds

Writes bench/results/structured-<date>.md and .json (--out).
"""
import argparse
import asyncio
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import servers  # noqa: E402

ROOT = servers.ROOT
SCHEMA_DIR = ROOT / "tests" / "data" / "schemas"
QWEN_VOCAB = [ROOT / ".reference/src/llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-qwen2.gguf",
              ROOT / "models/vocab/ggml-vocab-qwen2.gguf"]
# ~20 schemas of tests/data/schemas: objects as agents and pydantic send them, $ref recursion,
# formats, oneOf, open maps, arrays, tuples, patterns, bounded numbers, enums, strings
CORPUS = ["person", "openai_strict", "pydantic_model", "pydantic_discriminated", "recursive_tree",
          "defs_ref", "formats", "oneof_objects", "additional_schema", "anyof_siblings_required",
          "optional_chain", "map_only", "object_any", "array_bounds", "tuple_min", "string_len",
          "enum_mixed", "pattern_phone", "num_range", "int_range_neg"]
# the decode part's schemas: objects, whose answers are long enough to time (8: one per stream)
DECODE = ["person", "openai_strict", "pydantic_model", "pydantic_discriminated", "recursive_tree",
          "formats", "oneof_objects", "optional_chain"]
SMOKE = ["person", "pydantic_model"]
GOALS = {"mask_mean_us": 50, "mask_mean_floor_us": 200, "mask_p99_us": 1000, "single": 0.95,
         "multi": 0.90, "multi_floor": 0.85, "vs_llama": 10, "vs_llama_floor": 3, "compile_p50_ms": 10}


def log(*a):
    print("[structured]", *a, file=sys.stderr, flush=True)


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def load_schemas(names):
    out = {}
    for n in names:
        d = json.loads((SCHEMA_DIR / (n + ".json")).read_text())
        out[n] = {"schema": d["schema"], "valid": d.get("valid", [])}
    return out


def dumps(v):
    """The spacing lumen's grammars write (json.dumps defaults)."""
    return json.dumps(v, ensure_ascii=False)


def validate(schema, text):
    """(ok, why) for an output text against its schema."""
    import jsonschema
    try:
        v = json.loads(text)
    except ValueError as e:
        return False, "not JSON: %s" % e
    cls = jsonschema.validators.validator_for(schema)
    fmt = cls.FORMAT_CHECKER
    errs = sorted(cls(schema, format_checker=fmt).iter_errors(v), key=lambda e: e.path)
    return (not errs), (errs[0].message[:120] if errs else "")


def prompt_for(name, schema):
    return ("Write one realistic example of a JSON value that matches this JSON Schema. Reply with the "
            "JSON only.\n\nSchema (%s):\n%s" % (name, json.dumps(schema)))


# ============================================================== mask + compile (C replay)

def replay_once(exe, gguf, manifest, rounds, compiles):
    p = subprocess.run([str(exe), str(gguf), str(manifest), str(rounds), str(compiles)],
                       capture_output=True, text=True, cwd=ROOT, timeout=900)
    if p.returncode not in (0, 3):
        raise RuntimeError("%s failed (%d): %s" % (exe, p.returncode, p.stderr[-2000:]))
    r = {"vocab": None, "first": [], "compile": {}, "mask": {"warm": [], "cold": []},
         "mask_by_schema": {}, "docs": [], "fails": []}
    for line in p.stdout.splitlines():
        f = line.split(" ")
        if f[0] == "vocab":
            r["vocab"] = int(f[1])
        elif f[0] == "first":
            r["first"].append((f[1], int(f[2]), int(f[3])))
        elif f[0] == "compile":
            r["compile"].setdefault(f[1], []).append((int(f[2]), int(f[3])))
        elif f[0] == "mask":
            w, c = int(f[3]), int(f[4])
            r["mask"][f[2]].append((w, c))
            if f[2] == "warm":
                r["mask_by_schema"].setdefault(f[1], []).append(c)
        elif f[0] == "doc":
            r["docs"].append((f[1], int(f[2]), int(f[3]), int(f[4])))
        elif f[0] == "fail":
            r["fails"].append(line[5:])
    return r


def dist_us(ns):
    if not ns:
        return None
    us = [x / 1e3 for x in ns]
    return {"n": len(us), "mean": sum(us) / len(us), "p50": pct(us, 50), "p99": pct(us, 99),
            "max": max(us), "over_1ms": sum(1 for x in us if x > 1000)}


def part_mask(a, schemas, docs):
    """Replays every schema's documents at each vocabulary, rounds alternating the vocabularies;
    per round the distribution's statistics, then their medians over rounds."""
    exe = Path(os.environ.get("LUMEN_REPLAY_BENCH") or ROOT / "build" / "grammar_replay_bench")
    if not exe.exists():
        raise SystemExit("structured: %s missing: cmake --build build --target grammar_replay_bench" % exe)
    tmp = Path(tempfile.mkdtemp(prefix="structured-"))
    lines = []
    for n, s in schemas.items():
        (tmp / (n + ".schema.json")).write_text(json.dumps(s["schema"]))
        (tmp / (n + ".docs")).write_text("".join(d.replace("\n", " ") + "\n" for d in docs.get(n, [])))
        lines.append("%s\t%s\t%s\n" % (n, tmp / (n + ".schema.json"), tmp / (n + ".docs")))
    (tmp / "manifest").write_text("".join(lines))
    qwen = next((p for p in QWEN_VOCAB if p.exists()), None)
    vocabs = [("default", Path(a.model))] + ([("qwen2", qwen)] if qwen else [])
    runs = {v: [] for v, _ in vocabs}
    for r in range(a.mask_rounds):
        order = vocabs if r % 2 == 0 else vocabs[::-1]
        for v, path in order:
            log("mask round %d/%d: %s vocabulary (%s)" % (r + 1, a.mask_rounds, v, path.name))
            runs[v].append(replay_once(exe, path, tmp / "manifest", a.replay_rounds, a.compiles))
    shutil.rmtree(tmp, ignore_errors=True)
    out = {}
    for v, path in vocabs:
        rs = runs[v]
        res = {"path": str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path),
               "vocab": rs[0]["vocab"], "fails": sorted(set(f for x in rs for f in x["fails"]))}
        for mode in ("warm", "cold"):
            for clock, k in (("cpu", 1), ("wall", 0)):
                per = [dist_us([m[k] for m in x["mask"][mode]]) for x in rs]
                per = [p for p in per if p]
                res["%s_%s" % (mode, clock)] = {key: med([p[key] for p in per]) for key in
                                                ("n", "mean", "p50", "p99", "max", "over_1ms")} if per else None
        # compile: all later compiles of all rounds, per schema the median, then the distribution
        per_schema = {}
        for x in rs:
            for n, cs in x["compile"].items():
                per_schema.setdefault(n, []).extend((c + g) / 1e6 for c, g in cs)
        conv = [c / 1e6 for x in rs for cs in x["compile"].values() for c, g in cs]
        ms = sorted(med(v) for v in per_schema.values())
        res["compile"] = {"schemas": len(ms), "p50": pct(ms, 50), "p90": pct(ms, 90), "max": max(ms) if ms else None,
                          "conv_p50": pct(conv, 50), "worst": max(per_schema, key=lambda n: med(per_schema[n]))
                          if per_schema else None,
                          "first_ms": med([(x["first"][0][1] + x["first"][0][2]) / 1e6 for x in rs if x["first"]])}
        res["per_schema_compile_ms"] = {n: med(v) for n, v in per_schema.items()}
        res["per_schema_mask_cpu_us"] = {n: dist_us([c for x in rs for c in x["mask_by_schema"].get(n, [])])
                                         for n in schemas}
        d = rs[0]["docs"]
        res["replay_forced"] = {"docs": len(d), "tokens": sum(x[1] for x in d), "forced": sum(x[2] for x in d),
                                "steps": sum(x[3] for x in d)}
        out[v] = res
    return out


# ============================================================== generation through the engines

RUN_RE = re.compile(r"gen (\d+) tok, ([\d.]+) tok/s.*?(?:grammar forced (\d+))?$", re.M)


def lumen_run(a, prompt, schema=None, n=256, temp=0.0, seed=0, ignore_eos=False):
    """One `lumen run --chat`; (text, gen tokens, tok/s, forced or None)."""
    argv = [str(a.lumen), "run", "-m", str(a.model), "--chat", "-p", prompt, "-n", str(n), "-t", str(a.threads),
            "--temp", str(temp), "--seed", str(seed)]
    tmpf = None
    if schema is not None:
        tmpf = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump(schema, tmpf)
        tmpf.close()
        argv += ["--json-schema", tmpf.name]
    if ignore_eos:
        argv.append("--ignore-eos")
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT)
    finally:
        if tmpf:
            os.unlink(tmpf.name)
    if p.returncode != 0:
        return {"error": p.stderr.strip()[-300:]}
    m = RUN_RE.search(p.stderr)
    if not m:
        return {"error": "no stats line: " + p.stderr[-300:]}
    return {"text": p.stdout.strip(), "tokens": int(m.group(1)), "tps": float(m.group(2)),
            "forced": int(m.group(3)) if m.group(3) else None}


def lumen_run_supports_schema(a):
    p = subprocess.run([str(a.lumen), "run", "--help"], capture_output=True, text=True)
    return "--json-schema" in (p.stdout + p.stderr)


async def chat(client, url, body):
    """One streaming chat request: text, completion tokens, finish, decode tok/s ((tokens - 1) over
    first to last text chunk), times. Never raises."""
    import httpx
    body = dict(body, stream=True, stream_options={"include_usage": True})
    r = {"text": "", "tokens": None, "finish": None, "error": None, "t_send": time.perf_counter(),
         "t_first": None, "t_last": None, "chunks": 0}
    try:
        async with client.stream("POST", url + "/v1/chat/completions", json=body) as resp:
            if resp.status_code != 200:
                r["error"] = "HTTP %d: %s" % (resp.status_code, (await resp.aread()).decode("utf-8", "replace")[:300])
                return r
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                j = json.loads(data)
                if j.get("error"):
                    r["error"] = str(j["error"])[:300]
                    break
                for c in j.get("choices") or []:
                    t = (c.get("delta") or {}).get("content")
                    if t:
                        now = time.perf_counter()
                        r["t_first"] = r["t_first"] or now
                        r["t_last"] = now
                        r["text"] += t
                        r["chunks"] += 1
                    if c.get("finish_reason"):
                        r["finish"] = c["finish_reason"]
                if j.get("usage"):
                    r["tokens"] = j["usage"].get("completion_tokens")
    except (httpx.HTTPError, OSError, ValueError) as e:
        r["error"] = "%s: %s" % (type(e).__name__, e)
    r["t_end"] = time.perf_counter()
    if r["tokens"] is None:
        r["tokens"] = r["chunks"]
    if r["t_first"] and r["t_last"] and r["t_last"] > r["t_first"] and r["tokens"] > 1:
        r["tps"] = (r["tokens"] - 1) / (r["t_last"] - r["t_first"])
    else:
        r["tps"] = None
    return r


def body_for(engine, prompt, schema=None, max_tokens=256, temp=0.0, seed=0, ignore_eos=False):
    b = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "temperature": temp,
         "seed": seed}
    if temp > 0:
        b.update(top_k=40, top_p=0.95)
    if ignore_eos:
        b["ignore_eos"] = True
    if schema is not None:
        if engine == "lumen":
            b["response_format"] = {"type": "json_schema", "json_schema": {"name": "bench", "schema": schema,
                                                                           "strict": True}}
        else:
            b["json_schema"] = schema
    return b


async def gather_limited(coros, limit):
    sem = asyncio.Semaphore(limit)

    async def one(c):
        async with sem:
            return await c
    return await asyncio.gather(*(one(c) for c in coros))


async def serve_part(a, engines, schemas, result):
    """Both servers up at once (only one is sent requests at a time); validity runs, then
    single-stream and concurrent rounds alternating engines and the schema/plain order."""
    import httpx
    limits = httpx.Limits(max_connections=64)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0), limits=limits) as client:
        # ---- validity: greedy and sampled, every schema; learn each engine's answer lengths
        for eng, url in engines.items():
            log("%s: validity runs (%d schemas x greedy + %d sampled)" % (eng, len(schemas), a.samples))
            jobs, keys = [], []
            for n, s in schemas.items():
                for k in range(1 + a.samples):
                    temp = 0.0 if k == 0 else 0.8
                    jobs.append(chat(client, url, body_for(eng, prompt_for(n, s["schema"]), s["schema"],
                                                           a.max_tokens, temp, seed=k)))
                    keys.append((n, k))
            outs = await gather_limited(jobs, 4)
            v = result.setdefault("validity", {}).setdefault(eng, {})
            for (n, k), r in zip(keys, outs):
                ok, why = (False, r["error"]) if r["error"] else validate(schemas[n]["schema"], r["text"])
                v.setdefault(n, []).append({"greedy": k == 0, "ok": ok, "why": why, "finish": r["finish"],
                                            "tokens": r["tokens"], "text": r["text"][:400]})
                if ok:
                    result.setdefault("docs", {}).setdefault(n, []).append(dumps(json.loads(r["text"])))
        # ---- single stream: rounds alternate the engines and the schema/plain order
        dec = [n for n in DECODE if n in schemas][:max(1, a.streams)]
        length = {}
        for eng in engines:
            for n in dec:
                g = [x for x in result["validity"][eng][n] if x["greedy"]][0]
                length[(eng, n)] = max(8, g["tokens"] or 0)
        single = result.setdefault("single", {e: {} for e in engines})
        multi = result.setdefault("multi", {e: [] for e in engines})
        for r in range(a.rounds):
            order = list(engines) if r % 2 == 0 else list(engines)[::-1]
            for eng in order:
                url = engines[eng]
                log("round %d/%d: %s single stream x %d schemas, then %d streams" % (r + 1, a.rounds, eng, len(dec),
                                                                                     a.streams))
                for i, n in enumerate(dec):
                    s = schemas[n]["schema"]
                    p = prompt_for(n, s)
                    bs = body_for(eng, p, s, a.max_tokens)
                    bp = body_for(eng, p, None, length[(eng, n)], ignore_eos=True)
                    first_schema = (r + i) % 2 == 0
                    x = await chat(client, url, bs if first_schema else bp)
                    y = await chat(client, url, bp if first_schema else bs)
                    rs, rp = (x, y) if first_schema else (y, x)
                    single[eng].setdefault(n, []).append({"schema_tps": rs["tps"], "plain_tps": rp["tps"],
                                                          "schema_tokens": rs["tokens"], "plain_tokens": rp["tokens"],
                                                          "error": rs["error"] or rp["error"]})
                # concurrent streams: one request per decode schema, all at once
                if a.streams > 1:
                    async def batch(constrained):
                        t0 = time.perf_counter()
                        rs = await asyncio.gather(*(chat(client, url, body_for(
                            eng, prompt_for(n, schemas[n]["schema"]), schemas[n]["schema"] if constrained else None,
                            a.max_tokens if constrained else length[(eng, n)], ignore_eos=not constrained))
                            for n in dec))
                        wall = time.perf_counter() - t0
                        toks = sum(x["tokens"] or 0 for x in rs)
                        # decode-phase rate: tokens after each stream's first, over first first-token to last token
                        t_f = [x["t_first"] for x in rs if x["t_first"]]
                        t_l = [x["t_last"] for x in rs if x["t_last"]]
                        dec_rate = (sum(max(0, (x["tokens"] or 0) - 1) for x in rs) / (max(t_l) - min(t_f))
                                    if t_f and t_l and max(t_l) > min(t_f) else None)
                        return {"tokens": toks, "wall_tps": toks / wall, "decode_tps": dec_rate,
                                "errors": [x["error"] for x in rs if x["error"]]}
                    if r % 2 == 0:
                        bs_, bp_ = await batch(True), await batch(False)
                    else:
                        bp_, bs_ = await batch(False), await batch(True)
                    multi[eng].append({"schema": bs_, "plain": bp_})


def part_serve(a, schemas, result):
    engines_wanted = [e for e in ("lumen", "llama") if e in a.parts_set or (e == "lumen" and "decode" in a.parts_set)]
    svs, urls = [], {}
    try:
        if "lumen" in engines_wanted:
            s = servers.Server("lumen", servers.lumen_serve_argv(a.lumen, a.model, threads=a.threads,
                                                                 parallel=a.streams, ctx=a.ctx))
            svs.append(s.start())
            # does it take response_format json_schema?
            import httpx
            probe = httpx.post(s.url + "/v1/chat/completions", json=body_for(
                "lumen", "Say hi", {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                16), timeout=120)
            if probe.status_code == 200:
                urls["lumen"] = s.url
            else:
                result["notes"].append("lumen serve refused response_format json_schema (HTTP %d: %s): lumen decode "
                                       "measured through `lumen run` only" % (probe.status_code, probe.text[:200]))
                s.stop()
                svs.remove(s)
        if "llama" in engines_wanted:
            try:
                import reference
                exe = reference.tool("llama-server")
                s = servers.Server("llama", servers.llama_server_argv(exe, a.model, threads=a.threads,
                                                                      parallel=a.streams, ctx=a.ctx))
                svs.append(s.start())
                urls["llama"] = s.url
            except Exception as e:  # noqa: BLE001 (a missing tool is reported, the rest runs)
                result["notes"].append("llama-server not run: %s" % e)
        if urls:
            asyncio.run(serve_part(a, urls, schemas, result))
    finally:
        for s in svs:
            s.stop()
    return urls


def part_run(a, schemas, result):
    """`lumen run`: jump-forward steps (its stats line) and, without a server that takes schemas,
    single-stream tok/s with and without a schema."""
    if not lumen_run_supports_schema(a):
        result["notes"].append("`lumen run` has no --json-schema: run part skipped")
        return
    dec = [n for n in DECODE if n in schemas]
    rows = result.setdefault("run", {})
    length = {}
    for r in range(a.run_rounds):
        log("lumen run round %d/%d" % (r + 1, a.run_rounds))
        for i, n in enumerate(dec):
            s = schemas[n]["schema"]
            p = prompt_for(n, s)
            plain_first = n in length and (r + i) % 2 == 1  # alternate once the length is known
            y = lumen_run(a, p, None, length[n], ignore_eos=True) if plain_first else None
            x = lumen_run(a, p, s, a.max_tokens)
            if "error" in x:
                rows.setdefault(n, []).append({"error": x["error"]})
                continue
            length.setdefault(n, max(2, x["tokens"]))
            if y is None:
                y = lumen_run(a, p, None, length[n], ignore_eos=True)
            ok, why = validate(s, x["text"])
            rows.setdefault(n, []).append({"tokens": x["tokens"], "forced": x["forced"], "schema_tps": x["tps"],
                                           "plain_tps": y.get("tps"), "plain_tokens": y.get("tokens"), "ok": ok,
                                           "why": why, "text": x["text"][:300]})
            if ok and r == 0:
                result.setdefault("docs", {}).setdefault(n, []).append(dumps(json.loads(x["text"])))


# ============================================================== summary and report

def summarize(result):
    s = {}
    for eng, per in result.get("single", {}).items():
        pairs = [x for rows in per.values() for x in rows if x["schema_tps"] and x["plain_tps"]]
        s.setdefault("single", {})[eng] = {
            "pairs": len(pairs), "schema_tps": med([x["schema_tps"] for x in pairs]),
            "plain_tps": med([x["plain_tps"] for x in pairs]),
            "ratio": med([x["schema_tps"] / x["plain_tps"] for x in pairs]),
            "overhead_ms": med([1e3 / x["schema_tps"] - 1e3 / x["plain_tps"] for x in pairs]),
            "errors": sorted({x["error"] for rows in per.values() for x in rows if x["error"]})}
    for eng, rounds in result.get("multi", {}).items():
        ok = [x for x in rounds if x["schema"]["decode_tps"] and x["plain"]["decode_tps"]]
        s.setdefault("multi", {})[eng] = {
            "rounds": len(ok), "schema_tps": med([x["schema"]["decode_tps"] for x in ok]),
            "plain_tps": med([x["plain"]["decode_tps"] for x in ok]),
            "ratio": med([x["schema"]["decode_tps"] / x["plain"]["decode_tps"] for x in ok]),
            "wall_ratio": med([x["schema"]["wall_tps"] / x["plain"]["wall_tps"] for x in ok]),
            "overhead_ms": med([1e3 / x["schema"]["decode_tps"] - 1e3 / x["plain"]["decode_tps"] for x in ok])}
    runs = [x for rows in result.get("run", {}).values() for x in rows if "tokens" in x]
    if runs:
        s["run"] = {"n": len(runs), "tokens": sum(x["tokens"] for x in runs),
                    "forced": sum(x["forced"] or 0 for x in runs),
                    "ratio": med([x["schema_tps"] / x["plain_tps"] for x in runs if x["plain_tps"]]),
                    "overhead_ms": med([1e3 / x["schema_tps"] - 1e3 / x["plain_tps"] for x in runs if x["plain_tps"]]),
                    "schema_tps": med([x["schema_tps"] for x in runs]), "plain_tps": med([x["plain_tps"] for x in runs]),
                    "valid": sum(1 for x in runs if x["ok"])}
    sl = s.get("single", {})
    if "lumen" in sl and "llama" in sl and sl["llama"]["overhead_ms"] is not None and sl["lumen"]["overhead_ms"] is not None:
        lo, ll = sl["lumen"]["overhead_ms"], sl["llama"]["overhead_ms"]
        s["vs_llama"] = {"lumen_ms": lo, "llama_ms": ll, "ratio": (ll / lo) if lo > 0 else None,
                         "lumen_within_noise": lo <= 0}
    val = {}
    for eng, per in result.get("validity", {}).items():
        xs = [x for rows in per.values() for x in rows]
        val[eng] = {"outputs": len(xs), "valid": sum(x["ok"] for x in xs),
                    "length": sum(1 for x in xs if x["finish"] == "length"),
                    "refused": sum(1 for x in xs if (x["why"] or "").startswith("HTTP 4")),
                    "complete": sum(1 for x in xs if x["finish"] != "length"),
                    "complete_valid": sum(1 for x in xs if x["ok"] and x["finish"] != "length"),
                    "failures": [(n, "greedy" if x["greedy"] else "sampled", x["why"], x["text"][:160])
                                 for n, rows in per.items() for x in rows if not x["ok"]]}
    s["validity"] = val
    return s


def f(x, nd=1):
    return "-" if x is None else ("%.*f" % (nd, x))


def goal(ok):
    return "met" if ok else "**not met**"


def write_md(rep, path):
    a, res, sm = rep["settings"], rep["result"], rep["summary"]
    L = ["# structured: grammar mask, compile, decode with and without a JSON schema (lumen vs llama-server)", ""]
    m = rep["machine"]
    L.append("%s, git %s; %s (%s cores); load average %s at start, %s at end. **The machine is shared with other "
             "engineers' builds and tests: compare within this run (ratios of alternating rounds), not across runs.**"
             % (rep["date"], m["git"], m["cpu"], m["nproc"], "/".join("%.2f" % x for x in m["loadavg_start"]),
                "/".join("%.2f" % x for x in rep["loadavg_end"])))
    L += ["", "Command: `%s`" % rep["command"], "",
          "Model %s, %d threads; schemas (%d, tests/data/schemas): %s." % (a["model"], a["threads"], len(a["schemas"]),
                                                                         ", ".join(a["schemas"]))]
    for n in res.get("notes", []):
        L += ["", "Note: " + n]
    goals = []
    mk = res.get("mask") or {}
    if mk:
        L += ["", "## Mask time per token (build/grammar_replay_bench)", "",
              "Every document replayed token by token: a mask before each token and before the end (so every step "
              "the engine could sample at). Documents: the corpus's valid examples plus every valid output of the "
              "engines below, re-tokenized by each vocabulary. Statistics per run, medians over %d runs "
              "alternating the vocabularies (each run: %d passes over the documents). Thread CPU excludes "
              "preemption by other processes; wall includes it." % (a["mask_rounds"], a["replay_rounds"]), "",
              "| vocabulary | tokens | grammar | clock | masks | mean us | p50 us | p99 us | max us | > 1 ms |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for v, r in mk.items():
            for mode, label in (("warm", "one per schema"), ("cold", "new per document")):
                for clock in ("cpu", "wall"):
                    d = r.get("%s_%s" % (mode, clock))
                    if d:
                        L.append("| %s | %s | %s | %s | %d | %s | %s | %s | %s | %d |" % (
                            v, r["vocab"], label, "thread CPU" if clock == "cpu" else "wall", d["n"], f(d["mean"]),
                            f(d["p50"]), f(d["p99"]), f(d["max"], 0), d["over_1ms"]))
            if r["fails"]:
                L.append("")
                L.append("%s: %d documents or schemas failed: %s" % (v, len(r["fails"]), "; ".join(r["fails"][:5])))
        d0 = mk.get("default", {})
        w = d0.get("warm_cpu")
        if w:
            goals.append(("mask mean <= 50 us at 262k (floor 200 us), warm, thread CPU", f(w["mean"]) + " us",
                          goal(w["mean"] <= 50) if w["mean"] <= 200 else "**floor not met**"))
            goals.append(("mask p99 <= 1 ms at 262k, warm, thread CPU", f(w["p99"]) + " us", goal(w["p99"] <= 1000)))
        c = d0.get("cold_cpu")
        if c:
            goals.append(("the same, cold (new grammar per document)", "mean %s us, p99 %s us" % (f(c["mean"]), f(c["p99"])),
                          goal(c["mean"] <= 50 and c["p99"] <= 1000)))
        L += ["", "Slowest schemas (warm, thread CPU, default vocabulary, all runs pooled):", "",
              "| schema | masks | mean us | p99 us | max us |", "| --- | --- | --- | --- | --- |"]
        per = d0.get("per_schema_mask_cpu_us", {})
        for n in sorted((n for n in per if per[n]), key=lambda n: -per[n]["mean"])[:6]:
            L.append("| %s | %d | %s | %s | %s |" % (n, per[n]["n"], f(per[n]["mean"]), f(per[n]["p99"]), f(per[n]["max"], 0)))
        L += ["", "## Compile time per schema (schema -> GBNF -> lm_grammar_compile)", "",
              "Per schema the median of %d compiles per run over all runs; the first compile for a tokenizer "
              "(which builds the vocabulary trie) apart." % a["compiles"], "",
              "| vocabulary | schemas | first compile (trie) ms | p50 ms | p90 ms | max ms (schema) | schema->GBNF p50 ms |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
        for v, r in mk.items():
            c = r["compile"]
            L.append("| %s | %d | %s | %s | %s | %s (%s) | %s |" % (v, c["schemas"], f(c["first_ms"]), f(c["p50"], 2),
                                                                   f(c["p90"], 2), f(c["max"], 2), c["worst"],
                                                                   f(c["conv_p50"], 3)))
        if d0.get("compile"):
            goals.append(("compile p50 <= 10 ms", f(d0["compile"]["p50"], 2) + " ms", goal(d0["compile"]["p50"] <= 10)))
    sl = sm.get("single", {})
    if sl or sm.get("multi"):
        L += ["", "## Decode with and without a schema (%s)" % ", ".join(sorted(sl)), "",
              "Chat requests streamed; per schema (%s) a greedy answer with the schema (lumen: `response_format` "
              "json_schema; llama-server: its `json_schema` field) and one without (`ignore_eos`, `max_tokens` = that "
              "engine's schema answer's token count), the order alternating by round and schema; decode tok/s = "
              "(completion tokens - 1) over first to last streamed text. Ratio and per-token overhead "
              "(1/tps_schema - 1/tps_plain) are medians of the per-pair values, %d rounds." % (
                  ", ".join(res.get("decode_schemas", [])), a["rounds"]), "",
              "| engine | streams | pairs | tok/s schema | tok/s plain | ratio schema/plain | overhead ms/token |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
        for eng, x in sl.items():
            L.append("| %s | 1 | %d | %s | %s | %s | %s |" % (eng, x["pairs"], f(x["schema_tps"]), f(x["plain_tps"]),
                                                             f(x["ratio"], 3), f(x["overhead_ms"], 2)))
        for eng, x in sm.get("multi", {}).items():
            L.append("| %s | %d | %d rounds | %s | %s | %s (wall %s) | %s |" % (
                eng, a["streams"], x["rounds"], f(x["schema_tps"]), f(x["plain_tps"]), f(x["ratio"], 3),
                f(x["wall_ratio"], 3), f(x["overhead_ms"], 2)))
        if "lumen" in sl:
            goals.append(("decode with schema >= 0.95x plain, 1 stream (serve)", f(sl["lumen"]["ratio"], 3),
                          goal((sl["lumen"]["ratio"] or 0) >= 0.95)))
        ml = sm.get("multi", {}).get("lumen")
        if ml:
            goals.append(("decode with schema >= 0.9x plain at %d streams (floor 0.85x)" % a["streams"], f(ml["ratio"], 3),
                          goal((ml["ratio"] or 0) >= 0.9) if (ml["ratio"] or 0) >= 0.85 else "**floor not met**"))
        per = res.get("single", {})
        if per:
            engs = list(per)
            L += ["", "Per schema (medians over rounds):", "",
                  "| schema | " + " | ".join("%s tokens | %s ratio" % (e, e) for e in engs) + " |",
                  "| --- |" + " --- | --- |" * len(engs)]
            for n in res.get("decode_schemas", []):
                cells = []
                for e in engs:
                    rows = [x for x in per[e].get(n, []) if x["schema_tps"] and x["plain_tps"]]
                    cells += [f(med([x["schema_tokens"] for x in rows]), 0),
                              f(med([x["schema_tps"] / x["plain_tps"] for x in rows]), 3)]
                L.append("| %s | %s |" % (n, " | ".join(cells)))
        for eng, x in sl.items():
            if x["errors"]:
                L += ["", "%s request errors: %s" % (eng, "; ".join(x["errors"][:3]))]
        vs = sm.get("vs_llama")
        mean_mask = ((mk.get("default") or {}).get("warm_cpu") or {}).get("mean")
        if "llama" in sl and sl["llama"]["overhead_ms"] is not None and mean_mask:
            L += ["", "llama-server's grammar overhead per token (%s ms) over lumen's mean mask time at this "
                  "vocabulary (%s us, part 1): %sx." % (f(sl["llama"]["overhead_ms"], 3), f(mean_mask),
                                                       f(sl["llama"]["overhead_ms"] * 1e3 / mean_mask, 0))]
        if vs:
            L += ["", "Per-token grammar overhead (1/tps_schema - 1/tps_plain), single stream: lumen %s ms, llama-server "
                  "%s ms; llama-server / lumen = %s." % (
                      f(vs["lumen_ms"], 3), f(vs["llama_ms"], 3),
                      "- (lumen's schema answers decode faster than plain text of the same length: jump-forward "
                      "saves more than the masks cost, so its net overhead is negative; the mask time above is its "
                      "grammar cost)" if vs["lumen_within_noise"] else f(vs["ratio"], 1))]
            if vs["lumen_within_noise"]:
                mm = "; llama-server's overhead = %sx lumen's mean mask time" % f(vs["llama_ms"] * 1e3 / mean_mask, 0) \
                    if mean_mask and vs["llama_ms"] > 0 else ""
                goals.append((">= 10x less grammar overhead per token than llama-server (floor 3x)",
                              "lumen net <= 0 (%s ms), llama-server %s ms%s" % (f(vs["lumen_ms"], 2), f(vs["llama_ms"], 2), mm),
                              "met" if vs["llama_ms"] > 0 else "no llama-server overhead to compare"))
            else:
                goals.append((">= 10x less grammar overhead per token than llama-server (floor 3x)", f(vs["ratio"], 1) + "x",
                              goal(vs["ratio"] >= 10) if vs["ratio"] >= 3 else "**floor not met**"))
    rn = sm.get("run")
    if rn:
        L += ["", "## `lumen run --json-schema`: jump-forward and single-stream decode", "",
              "Greedy, %d rounds over the decode schemas; the stats line's `gen N tok, X tok/s` and `grammar forced N`. "
              "The plain run (`--ignore-eos -n N`) takes `lumen run`'s plain loop, the schema run the engine "
              "(step mode), so this ratio compares two code paths; the server's is the like-for-like one." % a["run_rounds"], "",
              "| runs | tokens | forced (drafted by jump-forward) | steps (tokens - forced) | steps/tokens | tok/s schema | tok/s plain | ratio | valid |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
              "| %d | %d | %d | %d | %s | %s | %s | %s | %d/%d |" % (rn["n"], rn["tokens"], rn["forced"], rn["tokens"] - rn["forced"],
                                                             f((rn["tokens"] - rn["forced"]) / max(1, rn["tokens"]), 3),
                                                             f(rn["schema_tps"]), f(rn["plain_tps"]), f(rn["ratio"], 3),
                                                             rn["valid"], rn["n"])]
        goals.append(("structured answers finish in fewer steps than tokens", "%d steps for %d tokens" % (
            rn["tokens"] - rn["forced"], rn["tokens"]), goal(rn["forced"] > 0)))
    if mk.get("default", {}).get("replay_forced"):
        rf = mk["default"]["replay_forced"]
        L += ["", "Replay estimate (default vocabulary, all corpus documents): %d of %d tokens were the forced run at "
              "their position (steps %d, %s of tokens)." % (rf["forced"], rf["tokens"], rf["steps"],
                                                           f(rf["steps"] / max(1, rf["tokens"]), 3))]
    val = sm.get("validity", {})
    if val:
        L += ["", "## Validity (`jsonschema`, formats checked)", "",
              "Every schema answered greedily and %d time(s) sampled (temperature 0.8, top-k 40, top-p 0.95), "
              "max_tokens %d." % (a["samples"], a["max_tokens"]), "",
              "| engine | outputs | valid | rate | schema refused (HTTP 4xx) | cut by max_tokens (incomplete JSON) | valid of the complete ones |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
        for eng, v in val.items():
            L.append("| %s | %d | %d | %s%% | %d | %d | %d/%d |" % (
                eng, v["outputs"], v["valid"], f(100.0 * v["valid"] / max(1, v["outputs"])), v["refused"], v["length"],
                v["complete_valid"], v["complete"] - v["refused"]))
        for eng, v in val.items():
            if v["failures"]:
                L += ["", "%s failures:" % eng, ""]
                for n, kind, why, text in v["failures"][:12]:
                    L.append("- %s (%s): %s; output `%s`" % (n, kind, why.replace("|", "/").replace("\n", " "),
                                                             text.replace("`", "'").replace("\n", " ")))
        if "lumen" in val:
            v = val["lumen"]
            goals.append(("100% of outputs validate (lumen)", "%d/%d; of those not cut by max_tokens %d/%d" % (
                v["valid"], v["outputs"], v["complete_valid"], v["complete"]),
                goal(v["valid"] == v["outputs"]) if v["complete_valid"] < v["complete"] or v["length"] == 0 else
                "every complete answer (%d cut by max_tokens)" % v["length"]))
    if goals:
        L += ["", "## Goals (issue 23)", "", "| goal | measured | |", "| --- | --- | --- |"]
        L += ["| %s | %s | %s |" % g for g in goals]
    path.write_text("\n".join(L) + "\n")


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="structured.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--parts", default="mask,compile,decode,llama", help="comma-separated: mask,compile,decode,llama")
    p.add_argument("--smoke", action="store_true", help="2 schemas, mask+compile, 1 round: seconds")
    p.add_argument("--schemas", default=",".join(CORPUS), help="names in tests/data/schemas (default: %d)" % len(CORPUS))
    p.add_argument("--model", default=str(servers.default_model()))
    p.add_argument("--lumen", default=str(ROOT / "build" / "lumen"))
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2, help="serve rounds (single stream and concurrent)")
    p.add_argument("--run-rounds", type=int, default=1, help="`lumen run` rounds (jump-forward counts)")
    p.add_argument("--mask-rounds", type=int, default=3, help="replay runs per vocabulary (alternating)")
    p.add_argument("--replay-rounds", type=int, default=3, help="passes over the documents per replay run")
    p.add_argument("--compiles", type=int, default=5, help="compiles per schema per replay run")
    p.add_argument("--streams", type=int, default=8, help="concurrent streams (and decode schemas, at most 8)")
    p.add_argument("--samples", type=int, default=1, help="sampled answers per schema for validity")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--ctx", type=int, default=8192)
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    a = p.parse_args(argv)
    if a.smoke:
        a.parts, a.schemas, a.mask_rounds, a.replay_rounds, a.compiles = "mask,compile", ",".join(SMOKE), 1, 1, 2
    a.parts_set = set(x.strip() for x in a.parts.split(",") if x.strip())
    bad = a.parts_set - {"mask", "compile", "decode", "llama"}
    if bad:
        p.error("unknown part(s): %s" % ", ".join(sorted(bad)))
    return a


def main(argv=None):
    a = parse_args(argv)
    servers.stop_servers_on_sigterm()
    names = [n.strip() for n in a.schemas.split(",") if n.strip()]
    schemas = load_schemas(names)
    result = {"notes": [], "decode_schemas": [n for n in DECODE if n in schemas][:max(1, a.streams)]}
    now = datetime.datetime.now(datetime.timezone.utc)
    import serve_load
    machine = serve_load.machine_info()
    t0 = time.monotonic()
    if "decode" in a.parts_set:
        part_run(a, schemas, result)
    if a.parts_set & {"decode", "llama"}:
        part_serve(a, schemas, result)
    if a.parts_set & {"mask", "compile"}:
        docs = {n: [dumps(v) for v in s["valid"]] for n, s in schemas.items()}
        for n, ds in result.get("docs", {}).items():
            docs.setdefault(n, []).extend(d for d in ds if d not in docs[n])
        result["mask"] = part_mask(a, schemas, docs)
    rep = {"date": now.strftime("%Y-%m-%d %H:%M UTC"), "machine": machine, "loadavg_end": os.getloadavg(),
           "command": " ".join(["bench/structured.py"] + (argv if argv is not None else sys.argv[1:])),
           "elapsed_s": time.monotonic() - t0,
           "settings": {k: v for k, v in vars(a).items() if k != "parts_set"} | {"schemas": names},
           "result": result}
    rep["summary"] = summarize(result)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / ("structured-%s%s" % (now.strftime("%Y-%m-%d-%H%M"), "-smoke" if a.smoke else ""))
    if a.smoke:  # the report on stdout only
        tmp = Path(tempfile.mkdtemp(prefix="structured-smoke-"))
        write_md(rep, tmp / "smoke.md")
        print((tmp / "smoke.md").read_text())
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        stem.with_suffix(".json").write_text(json.dumps(rep, indent=1, default=str))
        write_md(rep, stem.with_suffix(".md"))
        print(stem.with_suffix(".md").read_text())
        log("wrote %s.md and .json in %.0f s" % (stem, rep["elapsed_s"]))
    fails = [x for v in (result.get("mask") or {}).values() for x in v["fails"]]
    if a.smoke and fails:
        log("smoke: %d failures: %s" % (len(fails), "; ".join(fails[:3])))
    return 1 if (a.smoke and fails) else 0


if __name__ == "__main__":
    sys.exit(main())
