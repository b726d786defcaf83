#!/usr/bin/env bash
# The JSON-schema corpus (tests/data/schemas) through lumen's converter, checked by
# tests/grammar/test_schema_corpus.py: llama.cpp's grammar parser accepts every GBNF, random
# sentences validate with `jsonschema`, the valid examples are sentences. A few seconds.
# LM_TEST_LABELS: unit
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
PY="$ROOT/.venv/bin/python"
export LUMEN_SCHEMA_TO_GBNF="${LUMEN_SCHEMA_TO_GBNF:-$ROOT/build/schema_to_gbnf}"
# llama_cpp (scripts/setup.sh --reference) adds the check that llama.cpp's parser accepts each
# grammar; without it that check is left out (tests never need llama.cpp to run)
"$PY" -c 'import pytest, jsonschema' 2>/dev/null ||
    { echo "FAIL: pytest/jsonschema missing from .venv (bash scripts/setup.sh)" >&2; exit 1; }
cd "$ROOT" || exit 1
exec timeout -k 10 300 "$PY" -m pytest -q -p no:cacheprovider tests/grammar/test_schema_corpus.py "$@"
