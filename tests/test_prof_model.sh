#!/usr/bin/env bash
# Profiled run on the default model: JSONL trace validates and its per-op spans add up to
# the forward-pass (prefill/decode phase) time within 5%; the Perfetto file is valid JSON
# with complete events per thread; lumen analyze reads the trace (text + HTML with charts);
# --profile prints the summary tables. A batched `lumen bench --parallel --trace` run gives
# engine step events that lumen analyze counts right (tokens, decode/prefill, sequences).
# LM_TEST_LABELS: model
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
BIN="${LUMEN_BIN:-$ROOT/build/lumen}"
PY="$ROOT/.venv/bin/python"
MODEL="${LUMEN_MODEL:-$ROOT/models/gemma-3-270m-q4_k_m.gguf}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
source "$ROOT/tests/lib.sh" # ok, bad, expect

# The spans must add up to each forward pass within 5%. On a loaded machine a thread
# descheduled between two spans shows as a gap that is not the profiler's: the profiled run
# is repeated (at most 3 times) while only that coverage check fails.
for attempt in 1 2 3; do
if "$BIN" run -m "$MODEL" -p "The history of the printing press" -n 24 --temp 0 -t 2 \
    --trace "$TMP/t.jsonl" --perfetto "$TMP/t.json" --profile >"$TMP/out" 2>"$TMP/err"; then :
else bad "profiled run failed: $(tail -3 "$TMP/err")"; break; fi
"$PY" - "$TMP/t.jsonl" "$TMP/t.json" <<'PY'
import json, sys
from collections import defaultdict
lines = [json.loads(l) for l in open(sys.argv[1])]
assert lines[0]["type"] == "header" and lines[0]["version"] == 3, lines[0]
assert lines[-1]["type"] == "end" and lines[-1]["events"] == len(lines) - 2, lines[-1]
need = {"phase": ["tid", "ts_ns", "dur_ns", "phase", "step", "n_tokens"],
        "op": ["tid", "ts_ns", "dur_ns", "phase", "step", "op", "layer"],
        "barrier": ["tid", "ts_ns", "dur_ns", "phase", "step", "op", "layer"],
        "matmul": ["op", "layer", "weight", "m", "n", "k", "dtype", "variant", "reason", "bytes", "flops"],
        "variant": ["kernel", "variant", "reason"],
        "memory": ["weights_mapped", "kv_cache", "scratch", "rss", "rss_peak"]}
kinds = defaultdict(int)
for e in lines[1:-1]:
    kinds[e["type"]] += 1
    for k in need.get(e["type"], []):
        assert k in e, (k, e)
for t in ("phase", "op", "barrier", "matmul", "variant", "memory"):
    assert kinds[t] > 0, ("no events of type", t)
# per forward pass (prefill / decode phase): thread 0's op + barrier spans vs the phase span
phases = [e for e in lines if e["type"] == "phase" and e["phase"] in ("prefill", "decode")]
assert len(phases) >= 20, len(phases)
spans = [e for e in lines if e["type"] in ("op", "barrier") and e["tid"] == 0]
spans.sort(key=lambda e: e["ts_ns"])
import bisect
starts = [e["ts_ns"] for e in spans]
tot_phase = tot_ops = 0
worst = 0.0
for ph in phases:
    a, b = ph["ts_ns"], ph["ts_ns"] + ph["dur_ns"]
    i = bisect.bisect_left(starts, a)
    s = 0
    while i < len(spans) and spans[i]["ts_ns"] < b:
        s += spans[i]["dur_ns"]; i += 1
    tot_phase += ph["dur_ns"]; tot_ops += s
    worst = max(worst, abs(ph["dur_ns"] - s) / ph["dur_ns"])
cover = tot_ops / tot_phase
print("per-op spans cover %.2f%% of forward time (worst single pass %.2f%% off)" % (100 * cover, 100 * worst))
if abs(1 - cover) >= 0.05: sys.exit(3) # the caller retries: see above
# Perfetto: valid JSON, complete events with non-negative durations, per-thread nesting
pf = json.load(open(sys.argv[2]))
ev = pf["traceEvents"] if isinstance(pf, dict) else pf
xs = defaultdict(list)
for e in ev:
    if e.get("ph") == "X":
        assert e["dur"] >= 0
        xs[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    elif e.get("ph") in ("B", "E"):
        raise AssertionError("expected complete events")
assert len(xs) == 2, list(xs)
for tid, iv in xs.items():
    iv.sort(key=lambda x: (x[0], -x[1]))
    stack = []
    for s, e in iv:
        while stack and stack[-1] <= s + 1e-3:
            stack.pop()
        assert not stack or e <= stack[-1] + 1e-3, ("overlap without nesting", tid, s, e, stack[-1])
        stack.append(e)
PY
rc=$?
if [[ $rc == 3 && $attempt -lt 3 ]]; then echo "coverage off by 5% or more: again (attempt $attempt)"; continue; fi
if [[ $rc == 0 ]]; then ok; ok; else bad "trace checks failed (rc $rc)"; fi
break
done
for sec in "ops, decode" "threads (busy" "matmul shape x variant" "kernel variants" "memory:"; do
  if grep -q "$sec" "$TMP/err"; then ok; else bad "--profile summary lacks '$sec'"; fi
done


if "$BIN" analyze "$TMP/t.jsonl" --html "$TMP/r.html" >"$TMP/rep" 2>"$TMP/err2"; then ok
else bad "lumen analyze failed: $(cat "$TMP/err2")"; fi
for sec in "p95" "p99" "attention" "lm_head"; do
  if grep -q "$sec" "$TMP/rep"; then ok; else bad "analyze report lacks '$sec'"; fi
done
n_svg=$(grep -o "<svg" "$TMP/r.html" | wc -l)
if [[ $n_svg -ge 4 ]]; then ok; else bad "html has $n_svg charts"; fi
if grep -qE "https?://" "$TMP/r.html"; then bad "html references the network"; else ok; fi

# ---- batched: 1 and 4 sequences of 16 prompt tokens, 8 generated each; the profiled run is
# N = 4: step 0 prefills 4 x 16 tokens (budget N x prompt), then 7 steps decode 4 tokens
if "$BIN" bench -m "$MODEL" --parallel 1,4 -p 16 -n 8 -r 1 --warmup 0 -t 2 --bw-mib 0 \
    --trace "$TMP/b.jsonl" --perfetto "$TMP/b.json" --profile >"$TMP/bout" 2>"$TMP/berr"; then ok
else bad "bench --parallel --trace failed: $(tail -3 "$TMP/berr")"; fi
grep -q "engine steps (span" "$TMP/berr" && ok || bad "--profile summary lacks the engine steps"
grep -q "tokens: 92 in 8 steps (decode 28 = 30.4%, prefill 64 = 69.6%)" "$TMP/berr" && ok || \
  bad "--profile summary: wrong step token counts: $(grep 'tokens:' "$TMP/berr")"
if "$BIN" analyze "$TMP/b.jsonl" >"$TMP/brep" 2>"$TMP/err3"; then ok
else bad "lumen analyze (batched) failed: $(cat "$TMP/err3")"; fi
for s in "^Engine steps \(one per lm_engine_step" "^  all: count=8 " "^  decode only: count=7 " \
         "^  with prefill: count=1 " "^  tokens per step: count=8 \| total=92 \| avg=11.50 \| min=4 \| max=64 " \
         "^  decode tokens per step: count=8 \| total=28 " "^  prefill tokens per step: count=8 \| total=64 " \
         "^  sequences per step: count=8 \| total=32 \| avg=4.00 \| min=4 \| max=4 " \
         "^  tokens: 92 = decode 28 \(30.4%\) \+ prefill 64 \(69.6%\)" "^    decode: 28 tokens"; do
  grep -qE -- "$s" "$TMP/brep" && ok || bad "batched analyze report lacks /$s/"
done
"$PY" - "$TMP/b.jsonl" "$TMP/b.json" <<'PY' && ok || bad "batched trace checks failed"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
steps = [e for e in lines if e["type"] == "step"]
assert [s["step"] for s in steps] == list(range(8)), steps
assert [(s["n_tokens"], s["n_decode"], s["n_prefill"], s["n_seqs"]) for s in steps] == \
    [(64, 0, 64, 4)] + [(4, 4, 0, 4)] * 7, steps
# every op of thread 0 falls in exactly one step span and carries that step's index
spans = [(s["ts_ns"], s["ts_ns"] + s["dur_ns"], s["step"]) for s in steps]
ops = [e for e in lines if e["type"] == "op" and e["tid"] == 0]
assert ops
for o in ops:
    inside = [k for a, b, k in spans if a <= o["ts_ns"] < b]
    assert inside == [o["step"]], (o, inside)
pf = json.load(open(sys.argv[2]))
es = [e for e in pf["traceEvents"] if e.get("name") == "engine step"]
assert len(es) == 8 and es[0]["args"]["n_prefill"] == 64, es[:1]
PY

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
