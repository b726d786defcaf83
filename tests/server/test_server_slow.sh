#!/usr/bin/env bash
# The long tests of tests/server/ (marked slow: connections held through a whole deadline and
# the like), run by tests/server/test_server.sh with pytest's -m slow (the last -m wins). Label slow:
# CI leaves it out (LUMEN_SLOW=1).
# LM_TEST_LABELS: model;server;slow
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
exec bash "$ROOT/tests/server/test_server.sh" -m slow "$@"
