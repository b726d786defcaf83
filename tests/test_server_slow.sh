#!/usr/bin/env bash
# The long tests of tests/server/ (marked slow: connections held through a whole deadline and
# the like), against the build's lumen serve. Label slow: CI leaves it out (LUMEN_SLOW=1).
# LM_TEST_LABELS: model;server;slow
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
export LUMEN_BIN="${LUMEN_BIN:-$ROOT/build/lumen}"
PY="$ROOT/.venv/bin/python"
if ! "$PY" -c 'import openai, pytest' 2>/dev/null; then
  echo "FAIL: $PY lacks openai or pytest (run scripts/setup.sh)" >&2
  exit 1
fi
cd "$ROOT/tests/server" || exit 1
exec "$PY" -m pytest -q -p no:cacheprovider -o console_output_style=classic -m slow "$@" .
