#!/usr/bin/env bash
# The profiler's matmul events name the path the matmul took (kernels/matmul.h), on the
# default model: repacked weights run il16 everywhere; with LUMEN_NO_REPACK=1, q5_0 / q8_0
# decode runs the u8 GEMM on AVX-512 VNNI (it used to be labelled per_row: the label was
# re-derived, with gemm_u8 only above 4 tokens) and one dot per row elsewhere; the last
# layer's prefill matmuls report the rows they computed (the prompt's last token).
# LM_TEST_LABELS: model
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
BIN="${LUMEN_BIN:-$ROOT/build/lumen}"
PY="$ROOT/.venv/bin/python"
[[ -x "$PY" ]] || PY=python3
MODEL="${LUMEN_MODEL:-$ROOT/models/gemma-3-270m-q4_k_m.gguf}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
source "$ROOT/tests/lib.sh" # ok, bad, expect

for mode in repack norepack; do
  env_set=""
  [[ $mode == norepack ]] && env_set="LUMEN_NO_REPACK=1"
  if env $env_set "$BIN" run -m "$MODEL" -p "The history of the printing press" -n 4 --temp 0 -t 2 \
      --trace "$TMP/$mode.jsonl" >"$TMP/out" 2>"$TMP/err"; then ok
  else bad "$mode: profiled run failed: $(tail -3 "$TMP/err")"; continue; fi
  "$PY" - "$TMP/$mode.jsonl" "$mode" <<'PY' && ok || bad "$mode: matmul labels"
import json, sys
mode = sys.argv[2]
ev = [json.loads(l) for l in open(sys.argv[1])]
mm = [e for e in ev if e["type"] == "matmul"]
assert mm, "no matmul events"
table = "avx512" if "_avx512_" in mm[0]["variant"] else None
errs = []
for e in mm:
    v, dt, n = e["variant"], e["dtype"], e["n"]
    if mode == "repack":
        want = "_il16"  # every matmul weight of this model has an il layout
    elif dt in ("q5_0", "q8_0"):
        want = "_gemm_u8" if table == "avx512" else "_per_row"
    elif n == 1:
        want = "_per_row"
    else:
        want = None
    if want and not v.endswith(want):
        errs.append("%s %s layer %d n %d: %s, want *%s" % (e["phase"], e["op"], e["layer"], n, v, want))
# prefill: the last layer after attention computes the one row that wants logits
pre = [e for e in mm if e["phase"] == "prefill"]
last = max(e["layer"] for e in pre)
n_prompt = max(e["n"] for e in pre)
assert n_prompt > 4, n_prompt
for e in pre:
    if e["op"] == "lm_head":
        continue
    want_n = 1 if e["layer"] == last and e["op"] != "qkv" else n_prompt
    if e["n"] != want_n:
        errs.append("prefill %s layer %d: n %d, want %d" % (e["op"], e["layer"], e["n"], want_n))
for x in errs[:10]:
    print(x, file=sys.stderr)
print("%s: %d matmul events, %d wrong" % (mode, len(mm), len(errs)))
sys.exit(1 if errs else 0)
PY
done
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
