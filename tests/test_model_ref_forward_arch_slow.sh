#!/usr/bin/env bash
# tests/test_model_ref_forward.sh on the copies the default suite's test_model_ref_forward_arch.sh
# leaves out to keep the suite's time: phi3's other two (Phi-3.5-mini's F16, Phi-4-mini's quant
# mix; one layer of the real widths, 0.1-0.3 GB each), granite's and smollm3's quant mixes, the
# Q3_K_M mix (its Q2_K twin stays in the default pass) and deepseek2's V3 form: lumen's KL to the
# float64 reference against llama.cpp's. Slow: ~5-12 s each.
# LM_TEST_LABELS: model;arch;slow
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
export LUMEN_REF_CASES="${LUMEN_ARCH_SLOW_CASES:-arch_phi35_f16 arch_phi4_qmix arch_granite_qmix arch_smollm3_qmix arch_llama32_qmix_q3k arch_deepseek2v3_f16}"
exec bash "$ROOT/tests/test_model_ref_forward.sh"
