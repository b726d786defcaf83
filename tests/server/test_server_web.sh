#!/usr/bin/env bash
# The chat page at GET / of `lumen serve` in a real browser: tests/server/web.py (pytest +
# playwright driving Debian's chromium, headless, --no-sandbox since the tests run as root) on a
# free loopback port; screenshots and the server log go to $LUMEN_TEST_ARTIFACTS (default
# build/test-artifacts/server_web/). Exits 77 (skipped) when the binary has no `serve`.
# LM_TEST_LABELS: model;server;browser
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
BIN="${LUMEN_BIN:-$ROOT/build/lumen}"
PY="$ROOT/.venv/bin/python"
MODEL="${LUMEN_MODEL:-$ROOT/models/gemma-3-270m-q4_k_m.gguf}"
export LUMEN_BIN="$BIN" LUMEN_MODEL="$MODEL"
export LUMEN_TEST_ARTIFACTS="${LUMEN_TEST_ARTIFACTS:-$(dirname "$BIN")/test-artifacts/server_web}"

[ -x "$PY" ] || { echo "FAIL: $PY missing (bash scripts/setup.sh)" >&2; exit 1; }
"$PY" -c 'import playwright, pytest, httpx' 2>/dev/null ||
    { echo "FAIL: playwright/pytest/httpx missing from .venv (bash scripts/setup.sh)" >&2; exit 1; }
[ -x "${LUMEN_CHROMIUM:-/usr/bin/chromium}" ] ||
    { echo "FAIL: ${LUMEN_CHROMIUM:-/usr/bin/chromium} missing (apt-get install chromium; scripts/setup.sh does)" >&2; exit 1; }
[ -s "$MODEL" ] || { echo "FAIL: model $MODEL missing" >&2; exit 1; }
if ! "$BIN" serve --help >/dev/null 2>&1; then
    echo "SKIP: $BIN has no 'serve' subcommand"
    exit 77
fi

# bounded: pytest's own waits are 60 s each (x4 under ASan); `timeout` ends a hang, and SIGTERM
# makes the test stop the server it started (bench/servers.py)
cd "$ROOT" || exit 1
rm -rf "$LUMEN_TEST_ARTIFACTS"
mkdir -p "$LUMEN_TEST_ARTIFACTS"
timeout -k 20 800 "$PY" -m pytest -q -p no:cacheprovider tests/server/web.py "$@"
rc=$?
echo "artifacts: $LUMEN_TEST_ARTIFACTS ($(ls "$LUMEN_TEST_ARTIFACTS" | tr '\n' ' '))"
exit $rc
