#!/usr/bin/env bash
# tests/test_runtime_tables.c on q4_1 and q5_1 models: random-weight one-layer copies of the
# Qwen2.5 0.5B layout (n_embd 896, a 20480-token vocabulary) with every matrix in that type
# (tools/make_arch_gguf.py --dtype q4_1 / q5_1), LM head included: the generic, AVX2 and
# AVX-512 tables give the same logits bit for bit (kernels.h's q4_1 / q5_1 il contract), in
# chunked prefill, with a hole and in batched decode, at 1 and 2 threads. ~5 s.
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
for d in q4_1 q5_1; do
    if ! "$py" "$ROOT/tools/make_arch_gguf.py" --family qwen25 --layers 1 --vocab 20480 --dtype "$d" \
        "$tmp/qwen25_$d.gguf" >/dev/null; then
        if [[ "${LUMEN_ALLOW_SKIP:-0}" == 1 ]]; then echo "SKIP: cannot write the $d model (needs numpy + gguf)"; exit 0; fi
        echo "FAIL: cannot write the $d model (needs numpy + gguf: bash scripts/setup.sh)"; exit 1
    fi
    echo "== $d"
    LUMEN_MODEL="$tmp/qwen25_$d.gguf" "$t" || fail=1
done
[[ $fail == 0 ]] && echo "test_runtime_tables_q1: ok" || echo "test_runtime_tables_q1: FAIL"
exit $fail
