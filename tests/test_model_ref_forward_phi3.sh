#!/usr/bin/env bash
# tests/test_model_ref_forward.sh on the two phi3 copies the default suite's
# test_model_ref_forward_arch.sh leaves out (Phi-3.5-mini's F16, Phi-4-mini's quant mix; tools/
# make_arch_gguf.py --ci, one layer of the real widths): lumen's KL to the float64 reference
# against llama.cpp's. Slow: ~10 s each on a busy machine, the copies are 0.1-0.3 GB.
# LM_TEST_LABELS: model;arch;slow
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
export LUMEN_REF_CASES='arch_phi35_f16 arch_phi4_qmix'
exec bash "$ROOT/tests/test_model_ref_forward.sh"
