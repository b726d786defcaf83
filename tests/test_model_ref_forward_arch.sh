#!/usr/bin/env bash
# tests/test_model_ref_forward.sh on the random-weight llama / qwen2 / qwen3 / gemma3 / qwen3moe /
# deepseek2 / phi3 / granite / smollm3 / gpt-oss copies of tools/make_arch_gguf.py --ci (real widths, few
# layers; F16 and a quant mix; gemma3's 600-token sequence runs past its sliding window): lumen's
# KL to the float64 reference per architecture against llama.cpp's. LUMEN_TEST_QUICK=1: the F16 copies but gemma3's
# (its 680 positions take 50 s on the generic kernels; the main script's quick mode runs the
# quant mixes, gemma3's included).
# LM_TEST_LABELS: model;arch
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
export LUMEN_REF_CASES='arch_*'
# To keep the suite's time, six copies run in test_model_ref_forward_arch_slow.sh (slow) instead:
# phi3's Phi-3.5-mini F16 and Phi-4-mini quant mix (here: Phi-4-mini's F16, partial RoPE and the
# long factors; Phi-3.5-mini's quant mix), granite's and smollm3's quant mixes (their F16 here),
# the Q3_K_M mix (Q2_K's here) and deepseek2's V3 form (Lite's here).
export LUMEN_REF_SKIP='arch_phi35_f16 arch_phi4_qmix arch_granite_qmix arch_smollm3_qmix arch_llama32_qmix_q3k arch_deepseek2v3_f16'
if [[ -n "${LUMEN_TEST_QUICK:-}" && "${LUMEN_TEST_QUICK}" != 0 ]]; then export LUMEN_REF_CASES='arch_tinyllama_f16 arch_llama32_f16 arch_qwen25_f16 arch_qwen3_f16 arch_qwen3moe_f16 arch_gptoss_f16'; fi
exec bash "$ROOT/tests/test_model_ref_forward.sh"
