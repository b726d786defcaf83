#!/usr/bin/env bash
# `lumen bench`: bad flags give one line and exit 2; on the tiny random-weight model
# (tools/make_tiny_gguf.py) the md, csv and json outputs carry the expected fields.
# LM_TEST_LABELS: unit;cli
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
BIN="${LUMEN_BIN:-$ROOT/build/lumen}"
PY="$ROOT/.venv/bin/python"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
source "$ROOT/tests/lib.sh" # expect (and ok, bad)

# ---- help and bad flags (no model needed: parsed before loading)
if "$BIN" bench --help >"$TMP/out" 2>&1 && grep -q "usage: lumen bench" "$TMP/out"; then ok; else bad "bench --help"; fi
if "$BIN" --help | grep -q "bench"; then ok; else bad "lumen --help lacks bench"; fi
expect 2 "unknown option '--bogus'" -- "$BIN" bench --bogus
expect 2 "needs a value" -- "$BIN" bench -p
expect 2 "not an integer" -- "$BIN" bench -p 128,abc
expect 2 "out of range" -- "$BIN" bench -r 0
expect 2 "out of range" -- "$BIN" bench -t 0
expect 2 "out of range" -- "$BIN" bench -t 1,1000
expect 2 "empty list" -- "$BIN" bench -n ,
expect 2 "not one of md, csv, json" -- "$BIN" bench -o xml
expect 2 "not an integer" -- "$BIN" bench --warmup x
expect 2 "nope.gguf" -- "$BIN" bench -m "$TMP/nope.gguf"
# --parallel's own flags
expect 2 "apply to --parallel runs" -- "$BIN" bench --arrival 100
expect 2 "apply to --parallel runs" -- "$BIN" bench --step-tokens 256
expect 2 "--trace, --perfetto and --profile apply to --parallel" -- "$BIN" bench --trace "$TMP/t.jsonl"
expect 2 "--trace, --perfetto and --profile apply to --parallel" -- "$BIN" bench --profile
expect 2 "needs a value" -- "$BIN" bench --parallel 2 --trace
expect 2 "out of range" -- "$BIN" bench --parallel 2 --arrival 0
expect 2 "out of range" -- "$BIN" bench --parallel 2 --step-tokens 9000
expect 2 "--step-tokens 4 < N = 8" -- "$BIN" bench --parallel 1,8 --step-tokens 4
expect 2 "budget of 9 leaves no prefill chunk beside N = 8" -- "$BIN" bench --parallel 8 --arrival 100 --step-tokens 9
expect 2 "--parallel takes one -p value" -- "$BIN" bench --parallel 2 -n 1
# the sampling flags: run's table (cli_args.c), so the same refusals word for word
"$BIN" bench --help | grep -qE -- '--temp T .*temperature' && ok || bad "bench --help lacks the sampling flags"
for args in "--temp 200" "--top-p 1.5" "--top-k -1" "--min-p x" "--repeat-penalty 0" \
            "--presence-penalty 3" "--frequency-penalty -2.5" "--seed -1" "--seed"; do
  # shellcheck disable=SC2086
  expect 2 "" -- "$BIN" bench $args
  b=$(sed 's/^lumen bench: //' "$TMP/err")
  # shellcheck disable=SC2086
  "$BIN" run $args >/dev/null 2>"$TMP/err"
  r=$(sed 's/^lumen run: //' "$TMP/err")
  [[ -n "$b" && "$b" == "$r" ]] && ok || bad "bench $args: '$b', run says '$r'"
done

if [[ ! -x "$PY" ]]; then
  echo "test_cli_bench: $PY missing, skipping the tiny-model runs" >&2
  echo "test_cli_bench: $pass passed, $fail failed"
  [[ $fail -eq 0 ]]; exit
fi
"$PY" "$ROOT/tools/make_tiny_gguf.py" "$TMP" >/dev/null || bad "make_tiny_gguf.py failed"
M="$TMP/tiny_ok.gguf"
Q=(-m "$M" -p 16,32 -n 4 -r 2 --warmup 0 --bw-mib 8)

# tests longer than the model's context (256) are a usage error
expect 2 "context is 256" -- "$BIN" bench -m "$M" -p 1000 --bw-mib 0

# ---- json (two thread counts, TTFT, breakdown)
if "$BIN" bench "${Q[@]}" -t 1,2 --ttft 8 --breakdown -o json >"$TMP/b.json" 2>"$TMP/err"; then
  "$PY" - "$TMP/b.json" <<'EOF' || bad "json output: fields"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "lumen-bench" and d["version"] == 1
assert d["params"]["sampling"] == {"temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
    "repeat_penalty": 1, "presence_penalty": 0, "frequency_penalty": 0, "seed": 0}, d["params"]
m = d["model"]
assert m["bytes_per_token"] > 0 and m["n_params"] > 0 and m["size_bytes"] > 0 and m["load_ms"] >= 0
assert sum(m["bytes_per_token_by_group"].values()) == m["bytes_per_token"]
assert [b["threads"] for b in d["bandwidth"]] == [1, 2] and all(b["gbps"] > 0 for b in d["bandwidth"])
names = [(t["test"], t["n_threads"]) for t in d["tests"]]
for want in [("pp16", 1), ("pp32", 1), ("tg4", 1), ("ttft8", 1), ("pp16", 2), ("tg4", 2),
             ("ttft8", 2), ("tokenize", 1), ("sample", 1)]:
    assert want in names, (want, names)
for t in d["tests"]:
    assert t["reps"] == 2 and len(t["samples_ns"]) == 2, t
    assert t["avg_ts"] > 0 and t["median_ts"] > 0 and t["stddev_ts"] >= 0, t
    assert t["min_ts"] <= t["median_ts"] <= t["max_ts"], t
    if t["kind"] == "tg":
        assert t["gbps"] > 0 and t["roofline_frac"] > 0, t
    else:
        assert t["gbps"] is None, t
bd = d["breakdown"]
assert set(bd["phases"]) == {"tokenize", "prefill", "sample", "decode", "detokenize"}
assert bd["phases"]["sample"]["count"] == 4 and bd["phases"]["decode"]["count"] == 3
assert bd["n_threads"] == 2 and bd["findings"] and bd["suggestions"]
assert bd["moe"] is None  # a dense model: no expert table
assert all(x["ms"] >= 0 and x["count"] > 0 for x in bd["matmul_by_dtype"]), bd["matmul_by_dtype"]
if bd["per_op_recorded"]:
    assert len(bd["layers"]) == 2 and bd["components"]
if bd["prefill_per_op_recorded"]:  # the prefill by component: every op in one of them
    pc = {c["name"]: c["ms"] for c in bd["prefill_components"]}
    assert pc["lm_head (output matmul)"] > 0 and pc["matmul ffn_gate+up"] > 0, pc
    pre = bd["phases"]["prefill"]["ms"]
    assert bd["prefill_barrier_ms"] >= 0 and -0.02 * pre <= bd["prefill_other_ms"] <= pre, bd
    assert abs(sum(pc.values()) + bd["prefill_barrier_ms"] + bd["prefill_other_ms"] - pre) < 1e-3, (pc, pre)
EOF
  ok
else
  bad "bench -o json: exit $?: $(head -c 300 "$TMP/err")"
fi

# ---- csv
if "$BIN" bench "${Q[@]}" -t 1 -o csv >"$TMP/b.csv" 2>"$TMP/err"; then
  "$PY" - "$TMP/b.csv" <<'EOF' || bad "csv output: fields"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for k in ["model", "threads", "test", "avg_ts", "stddev_ts", "median_ts", "gbps", "roofline_frac",
          "bytes_per_token"]:
    assert k in rows[0], k
tests = [r["test"] for r in rows]
assert tests == ["pp16", "pp32", "tg4", "tokenize", "sample", "membw"], tests
assert float(rows[2]["gbps"]) > 0 and float(rows[0]["avg_ts"]) > 0
EOF
  ok
else
  bad "bench -o csv: exit $?: $(head -c 300 "$TMP/err")"
fi

# ---- depth (-d): pp and tg after cached positions, a row per depth with its KV bytes
if "$BIN" bench -m "$M" -p 16 -n 4 -d 0,64 -r 2 --warmup 0 --bw-mib 8 -t 1 -o csv >"$TMP/d.csv" 2>"$TMP/err"; then
  "$PY" - "$TMP/d.csv" <<'EOF' || bad "csv output with -d: fields"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
got = [(r["test"], r["n_depth"]) for r in rows]
assert got[:4] == [("pp16", "0"), ("tg4", "0"), ("pp16 @ d64", "64"), ("tg4 @ d64", "64")], got
kv0, kv64 = float(rows[1]["kv_bytes_per_token"]), float(rows[3]["kv_bytes_per_token"])
assert 0 < kv0 <= kv64, (kv0, kv64)  # the tiny model's layers all slide over a short window
assert float(rows[3]["gbps"]) > 0 and float(rows[2]["avg_ts"]) > 0
EOF
  ok
else
  bad "bench -d -o csv: exit $?: $(head -c 300 "$TMP/err")"
fi
expect 2 "context is 256" -- "$BIN" bench -m "$M" -p 16 -n 4 -d 250 --bw-mib 0

# ---- markdown (default) with the breakdown report
if "$BIN" bench "${Q[@]}" -t 1 --breakdown >"$TMP/b.md" 2>"$TMP/err"; then
  for pat in '^\| model \| size \| params \| backend \| threads \| test \| t/s' '\| pp16 \|' '\| tg4 \|' \
             '^read bandwidth' '^weights read per decoded token' 'TIMING BREAKDOWN' \
             '4\. Decode forward' 'PREFILL BY COMPONENT' 'BOTTLENECK ANALYSIS' 'Suggestions:' \
             '^sampling: .*\(default chain: temp 0\.8, top-k 40, top-p 0\.95, min-p 0\.05 over' \
             '\(default sampler, seed 0, EOS ignored\)'; do
    grep -qE -- "$pat" "$TMP/b.md" && ok || bad "md output lacks /$pat/"
  done
else
  bad "bench (md): exit $?: $(head -c 300 "$TMP/err")"
fi

# ---- sampling flags: the sample, ttft and breakdown tests' chain, in the md notes and json params
S=(-m "$M" -p 16 -n 4 -r 1 --warmup 0 --bw-mib 0 -t 1 --ttft 8 --breakdown --temp 0.5 --top-k 7
   --presence-penalty 0.25 --seed 3)
if "$BIN" bench "${S[@]}" >"$TMP/s.md" 2>"$TMP/err"; then
  for pat in '^sampling: .*\(chain: temp 0\.5, top-k 7, top-p 0\.95, min-p 0\.05, presence penalty 0\.25, seed 3 over' \
             'tokens \(chain: temp 0\.5, top-k 7, .*seed 3, EOS ignored\)'; do
    grep -qE -- "$pat" "$TMP/s.md" && ok || bad "md with sampling flags lacks /$pat/"
  done
else
  bad "bench with sampling flags (md): exit $?: $(head -c 300 "$TMP/err")"
fi
if "$BIN" bench "${S[@]}" -o json >"$TMP/s.json" 2>"$TMP/err"; then
  "$PY" - "$TMP/s.json" <<'EOF' || bad "json with sampling flags: params.sampling"
import json, sys
s = json.load(open(sys.argv[1]))["params"]["sampling"]
assert s == {"temperature": 0.5, "top_k": 7, "top_p": 0.95, "min_p": 0.05, "repeat_penalty": 1,
             "presence_penalty": 0.25, "frequency_penalty": 0, "seed": 3}, s
EOF
  ok
else
  bad "bench with sampling flags -o json: exit $?: $(head -c 300 "$TMP/err")"
fi

# ---- breakdown of a run with no decode step (-n 1: the one token comes from the prefill)
if "$BIN" bench "${Q[@]}" -n 1 -t 1 --breakdown >"$TMP/b1.md" 2>"$TMP/err"; then
  grep -q 'per-op times: no decode step ran' "$TMP/b1.md" && ok || bad "-n 1 breakdown lacks the no-decode-step line"
  grep -q 'does not call lm_prof_op' "$TMP/b1.md" && bad "-n 1 breakdown blames the forward pass" || ok
else
  bad "bench -n 1 --breakdown: exit $?: $(head -c 300 "$TMP/err")"
fi

# ---- --parallel with --arrival (json and md) and a trace of the arrival run
P=(-m "$M" --parallel 1,2 -p 8 -n 4 -r 2 --warmup 0 -t 1 --bw-mib 0)
expect 2 "context is 256" -- "$BIN" bench "${P[@]}" --arrival 300
if "$BIN" bench "${P[@]}" --arrival 40 --step-tokens 16 --trace "$TMP/a.jsonl" -o json >"$TMP/p.json" 2>"$TMP/err"; then
  "$PY" - "$TMP/p.json" <<'EOF' || bad "--parallel --arrival json: fields"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["params"]["sampling"]["temperature"] == 0, d["params"]  # --parallel: greedy by default
t = d["tests"]
assert [x["n_seq"] for x in t] == [1, 2] and all(x["kind"] == "batched" for x in t), t
for x in t:
    assert x["step_tokens"] == 16 and x["gen_tok_s"] > 0 and x["fwd_tok_s"] >= x["gen_tok_s"] * 0.5, x
    assert x["gen_tok_s_min"] <= x["gen_tok_s"] <= x["gen_tok_s_max"], x
    a = x["arrival"]
    assert a["n_prompt"] == 40 and a["step_tokens"] == 16 and a["chunk_tokens"] == 16 - x["n_seq"], a
    assert a["reps"] == 2 and a["n_chunk_steps"] == 40 // (16 - x["n_seq"]), a
    for k in ("gap_base_max_ms", "gap_during_max_ms", "chunk_step_ms", "decode_step_ms", "long_ttft_ms"):
        assert a[k] > 0, (k, a)
    assert a["gap_during_max_worst_ms"] >= a["gap_during_max_ms"], a
    assert abs(a["increase_ms"] - (a["gap_during_max_ms"] - a["gap_base_max_ms"])) < 0.01, a
    assert a["chunk_step_max_ms"] >= a["chunk_step_ms"] > 0, a
    assert abs(a["increase_over_longest_chunk_step"] - a["increase_ms"] / a["chunk_step_max_ms"]) < 0.01, a
EOF
  ok
else
  bad "bench --parallel --arrival -o json: exit $?: $(head -c 300 "$TMP/err")"
fi
# --parallel with a temperature: the requests sample (json params say so)
if "$BIN" bench "${P[@]}" --parallel 2 -r 1 --arrival 40 --temp 0.7 --seed 5 -o json >"$TMP/pt.json" 2>"$TMP/err"; then
  "$PY" - "$TMP/pt.json" <<'EOF' || bad "--parallel --temp json: params.sampling"
import json, sys
d = json.load(open(sys.argv[1]))
s = d["params"]["sampling"]
assert s["temperature"] == 0.7 and s["seed"] == 5 and s["top_k"] == 40, s
assert d["tests"][0]["gen_tok_s"] > 0 and d["tests"][0]["arrival"]["long_ttft_ms"] > 0, d["tests"]
EOF
  ok
else
  bad "bench --parallel --temp -o json: exit $?: $(head -c 300 "$TMP/err")"
fi
if "$BIN" analyze "$TMP/a.jsonl" >"$TMP/a.txt" 2>"$TMP/err"; then
  # the profiled run is N = 2's arrival run: steps with prefill and decode-only steps
  grep -qE '^  with prefill: count=[0-9]+' "$TMP/a.txt" && ok || bad "arrival trace: no steps with prefill"
  grep -qE '^  decode only: count=[0-9]+' "$TMP/a.txt" && ok || bad "arrival trace: no decode-only steps"
  grep -qE '^  sequences per step: .*max=3 ' "$TMP/a.txt" && ok || bad "arrival trace: no step with 3 sequences"
else
  bad "analyze of the arrival trace: $(cat "$TMP/err")"
fi
if "$BIN" bench "${P[@]}" --arrival 40 >"$TMP/p.md" 2>"$TMP/err"; then
  for pat in '^\| model \| threads \| test \| n_seq \| gen t/s \| gen t/s vs N=1 \| fwd t/s' \
             '^\| threads \| n_seq \| arrival \| step budget \| chunk \| worst gap before ms' \
             '^\| 1 \| 2 \| 40 \| 256 \| 254 \|' '^arrival: after the N streams' '^compute roof: .*\(pp256,'; do
    grep -qE -- "$pat" "$TMP/p.md" && ok || bad "--parallel --arrival md lacks /$pat/"
  done
else
  bad "bench --parallel --arrival (md): exit $?: $(head -c 300 "$TMP/err")"
fi

echo "test_cli_bench: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
