#!/usr/bin/env bash
# tests/test_model_ref_forward.sh on the random-weight llama / qwen2 / qwen3 / gemma3 / qwen3moe /
# deepseek2 / phi3 / granite / smollm3 copies of tools/make_arch_gguf.py --ci (real widths, few
# layers; F16 and a quant mix; gemma3's 600-token sequence runs past its sliding window): lumen's
# KL to the float64 reference per architecture against llama.cpp's. LUMEN_TEST_QUICK=1: the F16 copies but gemma3's
# (its 680 positions take 50 s on the generic kernels; the main script's quick mode runs the
# quant mixes, gemma3's included).
# LM_TEST_LABELS: model;arch
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
export LUMEN_REF_CASES='arch_*'
# phi3's copies are 0.1-0.3 GB each: two of the four here (Phi-4-mini's F16: partial RoPE and
# the long factors; Phi-3.5-mini's quant mix), the other two in test_model_ref_forward_phi3.sh (slow)
export LUMEN_REF_SKIP='arch_phi35_f16 arch_phi4_qmix'
if [[ -n "${LUMEN_TEST_QUICK:-}" && "${LUMEN_TEST_QUICK}" != 0 ]]; then export LUMEN_REF_CASES='arch_tinyllama_f16 arch_llama32_f16 arch_qwen25_f16 arch_qwen3_f16 arch_qwen3moe_f16 arch_granite_f16 arch_smollm3_f16'; fi
exec bash "$ROOT/tests/test_model_ref_forward.sh"
