#!/usr/bin/env bash
# lumen serve end to end: the pytest suite in tests/server/ drives a live `lumen serve` (the
# build's own binary, LUMEN_BIN) through the official openai client and raw HTTP: answers,
# streams, errors, disconnects, backpressure, /health, /metrics, connections, limits, browser
# safety, draining. Tests marked slow are tests/server/test_server_slow.sh's.
# LM_TEST_LABELS: model;server
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
export LUMEN_BIN="${LUMEN_BIN:-$ROOT/build/lumen}"
PY="$ROOT/.venv/bin/python"
if ! "$PY" -c 'import openai, anthropic, pytest' 2>/dev/null; then
  echo "FAIL: $PY lacks openai, anthropic or pytest (run scripts/setup.sh)" >&2
  exit 1
fi
cd "$ROOT/tests/server" || exit 1
# LUMEN_SERVER_TESTS: the test files to run (default: all; scripts/test.sh's ThreadSanitizer
# pass runs the threaded front door's and the shutdown's)
# LUMEN_SERVER_IGNORE: test files left out (scripts/test.sh's AddressSanitizer pass leaves out
# the generation-heavy ones whose engine logic the C tests run under ASan)
ignore=()
for f in ${LUMEN_SERVER_IGNORE:-}; do ignore+=("--ignore=$f"); done
# shellcheck disable=SC2086
exec "$PY" -m pytest -q -p no:cacheprovider -o console_output_style=classic -m "not slow" "${ignore[@]}" "$@" ${LUMEN_SERVER_TESTS:-.}
