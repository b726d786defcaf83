#!/usr/bin/env bash
# Bounded soak of `lumen serve` (tests/server/soak.py): 32 clients for 2 minutes on loopback,
# every request answered or cleanly refused (4xx), RSS flat, idle and healthy afterwards, a clean
# exit on SIGINT; with an AddressSanitizer build of lumen, no sanitizer report (leaks included).
# Label slow: CI leaves it out. LUMEN_SOAK_SECONDS / LUMEN_SOAK_CLIENTS shorten or widen it.
# Exits 77 (skipped) when the binary has no `serve`.
# LM_TEST_LABELS: model;server;slow
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
BIN="${LUMEN_BIN:-$ROOT/build/lumen}"
PY="$ROOT/.venv/bin/python"
MODEL="${LUMEN_MODEL:-$ROOT/models/gemma-3-270m-q4_k_m.gguf}"
export LUMEN_BIN="$BIN" LUMEN_MODEL="$MODEL"
export LUMEN_TEST_ARTIFACTS="${LUMEN_TEST_ARTIFACTS:-$(dirname "$BIN")/test-artifacts/server_soak}"

[ -x "$PY" ] || { echo "FAIL: $PY missing (bash scripts/setup.sh)" >&2; exit 1; }
"$PY" -c 'import pytest, httpx' 2>/dev/null ||
    { echo "FAIL: pytest/httpx missing from .venv (bash scripts/setup.sh)" >&2; exit 1; }
[ -s "$MODEL" ] || { echo "FAIL: model $MODEL missing" >&2; exit 1; }
if ! "$BIN" serve --help >/dev/null 2>&1; then
    echo "SKIP: $BIN has no 'serve' subcommand"
    exit 77
fi

cd "$ROOT" || exit 1
rm -rf "$LUMEN_TEST_ARTIFACTS"
mkdir -p "$LUMEN_TEST_ARTIFACTS"
# bounded: the soak itself (LUMEN_SOAK_SECONDS), at most 3 minutes of stragglers, start and stop
timeout -k 20 $((${LUMEN_SOAK_SECONDS:-120} + 600)) "$PY" -m pytest -q -s -p no:cacheprovider \
    tests/server/soak.py "$@"
rc=$?
echo "artifacts: $LUMEN_TEST_ARTIFACTS ($(ls "$LUMEN_TEST_ARTIFACTS" | tr '\n' ' '))"
exit $rc
