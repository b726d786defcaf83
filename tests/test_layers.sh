#!/usr/bin/env bash
# The include rule (tools/check_layers.py, docs/architecture.md): every #include in src/ goes
# down a layer. Also proves the checker fails: a copy of a small tree with an upward edge
# (model/ including runtime/) and an unlisted one (cli/ including model/) must be refused.
# LM_TEST_LABELS: unit
set -uo pipefail
ROOT=${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
fail=0
python3 "$ROOT/tools/check_layers.py" "$ROOT" || fail=1

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/include" "$TMP/src/model" "$TMP/src/runtime" "$TMP/src/cli"
echo '// public' >"$TMP/include/lumen.h"
printf '#include "lumen.h"\n#include "runtime/context.h"\n' >"$TMP/src/model/model.c"
printf '#include "model/model.h"\n' >"$TMP/src/runtime/context.h"
printf '#include "lumen.h"\n#include "model/model.h"\n' >"$TMP/src/cli/main.c"
out=$(python3 "$ROOT/tools/check_layers.py" "$TMP")
if [ $? -ne 1 ]; then
    echo "FAIL: the checker accepted a tree with bad edges"; fail=1
fi
for want in "src/model/model.c:2: model -> runtime (runtime/context.h): upward edge" \
            "src/cli/main.c:2: cli -> model (model/model.h): unlisted edge"; do
    grep -qF "$want" <<<"$out" || { echo "FAIL: missing '$want' in: $out"; fail=1; }
done
if grep -q "runtime/context.h:1" <<<"$out"; then echo "FAIL: a downward edge was refused: $out"; fail=1; fi
[ $fail = 0 ] && echo "test_layers: ok"
exit $fail
