#!/usr/bin/env bash
# tests/test_model_ref_forward.sh on all 1041 positions of the default model's golden prompts
# (the longest, 864 tokens, runs past Gemma 3's 512-token sliding window), as Q4_K_M and as the
# all-F32 copy: the figures docs/accuracy.md reports. ~4 min on 2 cores (the float64 reference:
# ~1.5 min per model), so labelled slow (scripts/test.sh runs it with LUMEN_SLOW=1).
# LUMEN_TEST_QUICK=1 (sanitizer pass): the short prompts of both instead.
# LM_TEST_LABELS: model;slow
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
export LUMEN_REF_CASES="gemma3-270m-q4_k_m gemma3-270m-f32"
if [[ -n "${LUMEN_TEST_QUICK:-}" && "${LUMEN_TEST_QUICK}" != 0 ]]; then
  export LUMEN_REF_CASES="gemma3-270m-q4_k_m-short gemma3-270m-f32-short"
fi
exec bash "$ROOT/tests/test_model_ref_forward.sh"
