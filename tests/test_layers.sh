#!/usr/bin/env bash
# The include rule (tools/check_layers.py, docs/architecture.md): every #include in src/ goes
# down a layer. Also proves the checker fails: a copy of a small tree with an upward edge
# (model/ including runtime/) and an unlisted one (cli/ including model/) must be refused.
# And no circle between the files of a folder (tools/check_cycles.py, on the object files of
# the build tree: LUMEN_BUILD_DIR, else LUMEN_BIN's folder, else build/), proven to refuse one.
# And the size limits (tools/check_sizes.py: files <= 700 lines, C functions <= 150), proven to
# refuse a long function and a long file.
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

# ---- circles between files (symbols of the build tree's object files)
BUILD=${LUMEN_BUILD_DIR:-}
if [ -z "$BUILD" ] && [ -n "${LUMEN_BIN:-}" ]; then BUILD=$(dirname "$LUMEN_BIN"); fi
if [ -z "$BUILD" ] && [ -d "$ROOT/build/CMakeFiles" ]; then BUILD=$ROOT/build; fi
if [ -n "$BUILD" ]; then
    python3 "$ROOT/tools/check_cycles.py" "$BUILD" || fail=1
else
    echo "FAIL: no build tree to read circles from (set LUMEN_BUILD_DIR or LUMEN_BIN)"; fail=1
fi
# a tree with a.c <-> b.c (c.c only calls a.c) must be refused, and accepted once listed
D="$TMP/b/CMakeFiles/t.dir/src/demo"
mkdir -p "$D"
printf 'int b_fn(int);\nint a_fn(int x) { return x ? b_fn(x - 1) : 0; }\n' >"$TMP/a.c"
printf 'int a_fn(int);\nint b_fn(int x) { return x ? a_fn(x - 1) : 1; }\n' >"$TMP/b.c"
printf 'int a_fn(int);\nint c_fn(int x) { return a_fn(x); }\n' >"$TMP/c.c"
for f in a b c; do ${CC:-cc} -c "$TMP/$f.c" -o "$D/$f.c.o" || fail=1; done
out=$(python3 "$ROOT/tools/check_cycles.py" "$TMP/b")
if [ $? -ne 1 ]; then echo "FAIL: the cycle checker accepted a circle: $out"; fail=1; fi
for want in "src/demo: a circle between 2 files: a.c, b.c" "demo/: a.c -(b_fn)-> b.c -(a_fn)-> a.c"; do
    grep -qF "$want" <<<"$out" || { echo "FAIL: missing '$want' in: $out"; fail=1; }
done
if grep -qE "[ >]c\.c" <<<"$out"; then echo "FAIL: c.c is in no circle: $out"; fail=1; fi
python3 "$ROOT/tools/check_cycles.py" "$TMP/b" --allow demo:a.c,b.c >/dev/null ||
    { echo "FAIL: a listed circle was refused"; fail=1; }
out=$(python3 "$ROOT/tools/check_cycles.py" "$TMP/b" --allow demo:a.c,b.c --allow demo:b.c,c.c)
grep -qF "the exception {b.c, c.c} is no longer a circle" <<<"$out" ||
    { echo "FAIL: a stale exception was not reported: $out"; fail=1; }

# ---- sizes: files at most 700 lines, C functions at most 150
python3 "$ROOT/tools/check_sizes.py" "$ROOT" || fail=1
# a tree (not a git work tree: every file counts) with a 151-line function, a 150-line one, a
# one-line one, a 200-line table and a 701-line header: the first and the last are refused
S="$TMP/sz/src/demo"
mkdir -p "$S"
{
    echo '// demo'
    echo 'static int too_long(int x) {'
    for i in $(seq 148); do echo "    x += $i;"; done
    echo '    return x;'
    echo '}'
    echo 'static int just_fits(int x) {'
    for i in $(seq 147); do echo "    x += $i;"; done
    echo '    return x;'
    echo '}'
    echo 'static int one_line(int x) { return x + 1; }'
    echo 'static const int table[] = {'
    for i in $(seq 200); do echo "    $i,"; done
    echo '};'
} >"$S/long.c"
for i in $(seq 701); do echo "// $i"; done >"$S/big.h"
out=$(python3 "$ROOT/tools/check_sizes.py" "$TMP/sz")
if [ $? -ne 1 ]; then echo "FAIL: the size checker accepted a long function and file: $out"; fail=1; fi
for want in "src/demo/long.c:2: function too_long is 151 lines (limit 150)" \
            "src/demo/big.h:1: file is 701 lines (limit 700)"; do
    grep -qF "$want" <<<"$out" || { echo "FAIL: missing '$want' in: $out"; fail=1; }
done
if grep -qE "just_fits|one_line|table|long\.c:1:" <<<"$out"; then
    echo "FAIL: the size checker refused what fits: $out"; fail=1
fi
[ $fail = 0 ] && echo "test_layers: ok"
exit $fail
