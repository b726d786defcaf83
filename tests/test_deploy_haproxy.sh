#!/usr/bin/env bash
# lumen replicas behind HAProxy (deploy/haproxy/haproxy.cfg): tests/test_deploy_haproxy.py starts
# three `lumen serve` (one thread each) and HAProxy on 127.0.0.1 and checks prefix affinity, the
# client's Host passed on, idle connections closed by the replicas costing no request, the load
# bound, drain + restart without a failed request, and a stopped or killed replica failing only
# its own requests, cleanly. Bounded (~2 min; 10 at most). Label slow: CI leaves it out.
# Exits 77 (skipped) when haproxy is not installed (bash scripts/setup.sh --haproxy).
# LM_TEST_LABELS: model;server;slow
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
export LUMEN_BIN="${LUMEN_BIN:-$ROOT/build/lumen}"
export LUMEN_TEST_ARTIFACTS="${LUMEN_TEST_ARTIFACTS:-$(dirname "$LUMEN_BIN")/test-artifacts/deploy_haproxy}"
PY="$ROOT/.venv/bin/python"
if ! command -v haproxy >/dev/null 2>&1 && [ ! -x /usr/sbin/haproxy ]; then
    echo "SKIP: haproxy is not installed (bash scripts/setup.sh --haproxy)"
    exit 77
fi
"$PY" -c 'import pytest, httpx' 2>/dev/null ||
    { echo "FAIL: pytest/httpx missing from .venv (bash scripts/setup.sh)" >&2; exit 1; }
cd "$ROOT" || exit 1
rm -rf "$LUMEN_TEST_ARTIFACTS"
mkdir -p "$LUMEN_TEST_ARTIFACTS"
timeout -k 20 600 "$PY" -m pytest -q -p no:cacheprovider -o console_output_style=classic \
    tests/test_deploy_haproxy.py "$@"
rc=$?
[ $rc -ne 0 ] && echo "logs: $LUMEN_TEST_ARTIFACTS (r1.log .. r3.log, haproxy.log)"
exit $rc
