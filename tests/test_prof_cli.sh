#!/usr/bin/env bash
# `lumen analyze`: text report and --html page from a committed trace fixture, usage
# errors (exit 2), malformed traces (exit 1, one stderr line naming file:line); the
# JSONL fixture and a freshly written Perfetto file parse as JSON (python3, if present).
# LM_TEST_LABELS: unit;cli
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
BIN="${LUMEN_BIN:-$ROOT/build/lumen}"
DATA="$ROOT/tests/data"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
source "$ROOT/tests/lib.sh" # ok, bad, expect

# help and usage errors
if "$BIN" analyze --help >"$TMP/out" 2>&1 && grep -q "usage: lumen analyze" "$TMP/out"; then ok; else bad "analyze --help"; fi
if "$BIN" --help | grep -q "analyze"; then ok; else bad "lumen --help lacks analyze"; fi
expect 2 "no input file" -- "$BIN" analyze
expect 2 "unknown option '--bogus'" -- "$BIN" analyze "$DATA/prof_small.jsonl" --bogus
expect 2 "needs a value" -- "$BIN" analyze "$DATA/prof_small.jsonl" --html
expect 2 "more than one input" -- "$BIN" analyze a.jsonl b.jsonl

# text report
if "$BIN" analyze "$DATA/prof_small.jsonl" >"$TMP/report.txt" 2>"$TMP/err"; then ok; else bad "analyze prof_small: $(cat "$TMP/err")"; fi
for s in "Total events: 660" "Event type summary:" "By phase:" "By phase/op" "Per-layer totals" \
         "Op aggregate" "Matmul shape x variant" "GB/s" "Barrier wait by phase:" \
         "Barrier wait by phase/op" "Variant selection" "Memory \(2 records\)" \
         "decode :: block_1: count=6 " "p95=.*p99="; do
  if grep -qE -- "$s" "$TMP/report.txt"; then ok; else bad "report lacks /$s/"; fi
done

# HTML report: one self-contained page with four SVG charts
if "$BIN" analyze "$DATA/prof_small.jsonl" --html "$TMP/r.html" >/dev/null 2>"$TMP/err"; then ok; else bad "--html: $(cat "$TMP/err")"; fi
n_svg=$(grep -o "<svg" "$TMP/r.html" | wc -l)
[[ $n_svg -eq 4 ]] && ok || bad "html has $n_svg svg charts, expected 4"
for s in "Time by op" "Per-layer time" "Decode step latency over time" "Decode step latency histogram" \
         "Matmul shape" "</html>"; do
  if grep -q -- "$s" "$TMP/r.html"; then ok; else bad "html lacks '$s'"; fi
done
if grep -qE "https?://|<script src|<link " "$TMP/r.html"; then bad "html references the network"; else ok; fi
expect 1 "cannot|No such file|nonexistent" -- "$BIN" analyze "$DATA/prof_small.jsonl" --html /nonexistent_dir/r.html

# malformed traces: exit 1, one line with file:line
expect 1 "prof_bad_truncated.jsonl:[0-9]+: truncated" -- "$BIN" analyze "$DATA/prof_bad_truncated.jsonl"
expect 1 "prof_bad_version.jsonl:1: unsupported trace version 7" -- "$BIN" analyze "$DATA/prof_bad_version.jsonl"
expect 1 "prof_bad_json.jsonl:5: bad JSON" -- "$BIN" analyze "$DATA/prof_bad_json.jsonl"
expect 1 "nope.jsonl" -- "$BIN" analyze "$TMP/nope.jsonl"
head -n 100 "$DATA/prof_small.jsonl" >"$TMP/cut.jsonl"
expect 1 "cut.jsonl:100: truncated: no end record" -- "$BIN" analyze "$TMP/cut.jsonl"

# independent JSON check of the fixture and of a fresh Perfetto file
PY="$(command -v python3 || true)"
GEN="$(dirname "$BIN")/test_prof_record"
if [[ -n "$PY" && -x "$GEN" ]]; then
  if LM_PROF_DEMO="$TMP/demo" LM_PROF_DEMO_LAYERS=3 LM_PROF_DEMO_STEPS=4 "$GEN" >/dev/null; then ok; else bad "demo trace"; fi
  if "$PY" - "$DATA/prof_small.jsonl" "$TMP/demo.jsonl" "$TMP/demo.perfetto.json" <<'PYEOF'
import json, sys
for p in sys.argv[1:3]:
    for i, line in enumerate(open(p), 1):
        o = json.loads(line)
        assert isinstance(o, dict) and "type" in o, (p, i)
t = json.load(open(sys.argv[3]))
ev = t["traceEvents"]
x = [e for e in ev if e["ph"] == "X"]
assert x and all({"ts", "dur", "tid", "name"} <= e.keys() for e in x)
assert {e["tid"] for e in x} == {0, 1}
PYEOF
  then ok; else bad "python json validation"; fi
fi

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
