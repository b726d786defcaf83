#!/usr/bin/env bash
# tests/test_model_ref_forward.sh on the random-weight llama / qwen2 / qwen3 / gemma3 copies of
# tools/make_arch_gguf.py --ci (real widths, few layers; F16 and a quant mix; gemma3's 600-token
# sequence runs past its sliding window): lumen's KL to the float64 reference per architecture
# against llama.cpp's. ~45 s on 2 cores. LUMEN_TEST_QUICK=1: the quant mixes only (the main
# script's quick mode runs the F16 copies).
# LM_TEST_LABELS: model;arch
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
export LUMEN_REF_CASES='arch_*'
if [[ -n "${LUMEN_TEST_QUICK:-}" && "${LUMEN_TEST_QUICK}" != 0 ]]; then export LUMEN_REF_CASES='arch_*_qmix'; fi
exec bash "$ROOT/tests/test_model_ref_forward.sh"
