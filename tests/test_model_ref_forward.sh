#!/usr/bin/env bash
# lumen, llama.cpp and the float64 reference (tools/ref_forward.py) on the same positions:
# lumen's mean KL(reference || lumen) over all positions must not exceed llama.cpp's
# (tests/golden/ref_kl.txt, from tools/gen_golden_ref.py) beyond the limits of
# tests/ref_forward_check.py, and its top-1 agreement with the reference must not fall below.
# This default-suite variant (~55 s on 2 cores): the default model's golden prompts of up to
# 100 tokens (177 positions), as Q4_K_M and as an all-F32 copy (written once by the gguf
# package into $LUMEN_REF_DIR, default /tmp/lumen-ref-<uid>; 1.1 GB, never committed).
# tests/test_model_ref_forward_full.sh (slow) runs all 1041 positions, past the 512-token
# sliding window; tests/test_model_ref_forward_arch.sh the random-weight llama / qwen2 / qwen3 /
# gemma3 copies. Both run through this script with LUMEN_REF_CASES.
# LUMEN_TEST_QUICK=1 (sanitizer and generic-kernel passes): the random-weight quant mixes only
# (the 270M model's reference pass would dominate; ~12 s on the generic kernels).
# LUMEN_REF_CASES: the cases to run (globs of case names, spaces between), instead of the above.
# LUMEN_REF_SKIP: cases to leave out (globs, spaces between).
# LM_TEST_LABELS: model
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
PY="${LUMEN_PYTHON:-$ROOT/.venv/bin/python}"
MODEL="${LUMEN_MODEL:-$ROOT/models/gemma-3-270m-q4_k_m.gguf}"
DUMP="${LUMEN_LOGITS_DUMP:-}"
if [[ -z "$DUMP" && -n "${LUMEN_BIN:-}" ]]; then DUMP="$(dirname "$LUMEN_BIN")/logits_dump"; fi
[[ -n "$DUMP" ]] || DUMP="$ROOT/build/logits_dump"
if [[ ! -x "$DUMP" ]]; then echo "FAIL: helper not built: $DUMP (cmake --build <dir> --target logits_dump)"; exit 1; fi
if [[ ! -x "$PY" ]] || ! "$PY" -c "import numpy, gguf" 2>/dev/null; then
  if [[ "${LUMEN_ALLOW_SKIP:-}" == 1 ]]; then echo "SKIP: no python with numpy + gguf at $PY"; exit 0; fi
  echo "FAIL: no python with numpy + gguf at $PY (bash scripts/setup.sh; LUMEN_ALLOW_SKIP=1 to skip)"; exit 1
fi
cases=('gemma3-270m-*-short')
if [[ -n "${LUMEN_TEST_QUICK:-}" && "${LUMEN_TEST_QUICK}" != 0 ]]; then cases=('arch_*_qmix'); fi
if [[ -n "${LUMEN_REF_CASES:-}" ]]; then read -ra cases <<<"$LUMEN_REF_CASES"; fi
args=()
for c in "${cases[@]}"; do args+=(--only "$c"); done
read -ra skips <<<"${LUMEN_REF_SKIP:-}"
for c in "${skips[@]}"; do args+=(--skip "$c"); done
if [[ ! -f "$MODEL" ]]; then
  if [[ "${LUMEN_ALLOW_SKIP:-}" == 1 ]]; then echo "SKIP: no model at $MODEL: random-weight copies only"; args+=(--skip 'gemma3-270m*')
  else echo "FAIL: no model at $MODEL"; exit 1; fi
fi
export LUMEN_MODEL="$MODEL"
exec "$PY" "$ROOT/tests/ref_forward_check.py" "$DUMP" "${args[@]}"
