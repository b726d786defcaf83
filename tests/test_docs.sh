#!/usr/bin/env bash
# The docs name what exists (tools/check_docs.py): every file, folder and function that
# README.md and docs/*.md name is in the tree. Also proves the checker fails: a small tree
# whose docs name a missing path, file name, function and field must be refused.
# LM_TEST_LABELS: unit
set -uo pipefail
ROOT=${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
fail=0
python3 "$ROOT/tools/check_docs.py" "$ROOT" || fail=1

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/include" "$TMP/src/runtime" "$TMP/docs"
printf 'int lm_engine_step(struct lm_engine *e) { return e->n_running; }\n' >"$TMP/src/runtime/engine.c"
echo '// public' >"$TMP/include/lumen.h"
cat >"$TMP/docs/architecture.md" <<'DOC'
The step is runtime/engine.c, `lm_engine_step`; the queue is runtime/queue.c, `lm_queue_push()`.
Prose such as prefill/decode and https://example.com/src/x.c is not a path.
```c
int32_t n = e->n_running + e->n_gone;
```
DOC
echo 'See src/runtime/engine.c and tests/test_gone.sh; `run_prompt(s)`; engine.c, gone.c.' >"$TMP/README.md"
out=$(python3 "$ROOT/tools/check_docs.py" "$TMP")
if [ $? -ne 1 ]; then
    echo "FAIL: the checker accepted docs naming missing things"; fail=1
fi
for want in "docs/architecture.md:1: missing path 'runtime/queue.c'" \
            "docs/architecture.md:1: missing name 'lm_queue_push'" \
            "docs/architecture.md:4: missing name 'n_gone'" \
            "README.md:1: missing path 'tests/test_gone.sh'" \
            "README.md:1: missing name 'run_prompt'" \
            "README.md:1: missing file 'gone.c'"; do
    grep -qF "$want" <<<"$out" || { echo "FAIL: missing '$want' in: $out"; fail=1; }
done
if grep -qE "engine\.c|lm_engine_step|n_running|prefill|example" <<<"$out"; then
    echo "FAIL: something that exists was refused: $out"; fail=1
fi
[ $fail = 0 ] && echo "test_docs: ok"
exit $fail
