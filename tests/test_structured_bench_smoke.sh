#!/usr/bin/env bash
# bench/structured.py --smoke: two schemas compiled and their documents replayed through the mask
# at the default model's and the Qwen2 vocabularies (build/grammar_replay_bench); about a second.
# LM_TEST_LABELS: model
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
PY="$ROOT/.venv/bin/python"
export LUMEN_REPLAY_BENCH="${LUMEN_REPLAY_BENCH:-$ROOT/build/grammar_replay_bench}"
[ -f "$ROOT/models/gemma-3-270m-q4_k_m.gguf" ] || { echo "SKIP: no default model" >&2; exit 77; }
"$PY" -c 'import httpx, jsonschema' 2>/dev/null || { echo "FAIL: httpx/jsonschema missing from .venv" >&2; exit 1; }
cd "$ROOT" || exit 1
out=$(timeout -k 5 120 "$PY" bench/structured.py --smoke) || { echo "$out"; echo "FAIL: structured.py --smoke" >&2; exit 1; }
for want in "one per schema" "first compile" "qwen2"; do
    grep -q "$want" <<<"$out" || { echo "$out"; echo "FAIL: no '$want' in the report" >&2; exit 1; }
done
echo "ok"
