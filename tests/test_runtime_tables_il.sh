#!/usr/bin/env bash
# tests/test_runtime_tables.c on the other il dtypes: random-weight one-layer copies written by
# tools/make_arch_gguf.py (a 20480-token vocabulary): llama32 in the Q2_K and Q3_K_M mixes
# (q2_K, q3_K, q4_K, q5_K, q6_K), qwen25 in the qmix mix (its 896-wide rows: q5_0, q8_0) and
# all q4_0, and the tiny qwen3moe in llama-quantize's MXFP4_MOE mix (mxfp4 experts). The generic, AVX2 and AVX-512 tables give the same logits bit for bit (kernels.h's
# il contracts; il_avx2.c, il_kq_avx2.c, il_q23_K_avx2.c), in chunked prefill, with a hole and
# in batched decode, at 1 and 2 threads. ~13 s.
# LM_TEST_LABELS: model;tables
set -uo pipefail
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
py="${LUMEN_PYTHON:-$ROOT/.venv/bin/python}"
[[ -x "$py" ]] || py=python3
bin_dir="$(dirname "${LUMEN_BIN:-$ROOT/build/lumen}")"
t="$bin_dir/test_runtime_tables"
[[ -x "$t" ]] || { echo "FAIL: not built: $t (cmake --build <dir> --target test_runtime_tables)"; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail=0
for fd in llama32:qmix_q2k llama32:qmix_q3k qwen25:qmix qwen25:q4_0 qwen3moe_tiny:mxfp4moe; do
    f="${fd%%:*}" d="${fd#*:}"
    if ! "$py" "$ROOT/tools/make_arch_gguf.py" --family "$f" --layers 1 --vocab 20480 --dtype "$d" \
        "$tmp/${f}_$d.gguf" >/dev/null; then
        if [[ "${LUMEN_ALLOW_SKIP:-0}" == 1 ]]; then echo "SKIP: cannot write the $f $d model (needs numpy + gguf)"; exit 0; fi
        echo "FAIL: cannot write the $f $d model (needs numpy + gguf: bash scripts/setup.sh)"; exit 1
    fi
    echo "== $f $d"
    LUMEN_MODEL="$tmp/${f}_$d.gguf" "$t" || fail=1
    rm -f "$tmp/${f}_$d.gguf"
done
[[ $fail == 0 ]] && echo "test_runtime_tables_il: ok" || echo "test_runtime_tables_il: FAIL"
exit $fail
