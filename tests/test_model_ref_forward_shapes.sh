#!/usr/bin/env bash
# tests/test_model_ref_forward.sh on the reduced copies of the larger real shapes (tools/
# make_arch_gguf.py --ci-shapes: Llama 3.2 3B, Llama 3.1 8B, Qwen3 4B / 8B with one layer, Gemma 3
# 4B with two; real widths, 8192-token vocabulary; F16 and a quant mix): lumen's KL to the float64
# reference against llama.cpp's (issue 22's fidelity goal). Slow: the copies are 0.1-0.4 GB each.
# LM_TEST_LABELS: model;arch;slow
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
export LUMEN_REF_CASES='shape_*'
exec bash "$ROOT/tests/test_model_ref_forward.sh"
