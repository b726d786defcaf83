#!/usr/bin/env bash
# lumen run / lumen chat with --json-schema and --grammar on the default model: greedy and
# sampled answers validate against the schema (the jsonschema package) and follow the grammar
# (llama.cpp's json.gbnf: the text parses as JSON), each chat reply too; refused schemas and
# grammars and bad flag combinations are one line naming the file and the problem, exit 2.
# LM_TEST_LABELS: model;cli
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
BIN="${LUMEN_BIN:-$ROOT/build/lumen}"
MODEL="${LUMEN_MODEL:-$ROOT/models/gemma-3-270m-q4_k_m.gguf}"
PY="$ROOT/.venv/bin/python"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
source "$ROOT/tests/lib.sh" # expect (and ok, bad)

cat >"$TMP/person.json" <<'EOF'
{"type": "object", "additionalProperties": false, "required": ["name", "age", "tags"],
 "properties": {"name": {"type": "string", "maxLength": 24},
                "age": {"type": "integer", "minimum": 0, "maximum": 120},
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3}}}
EOF
# validate SCHEMA FILE: the file's text is one JSON value valid against the schema
validate() {
  "$PY" - "$1" "$2" <<'EOF'
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
text = open(sys.argv[2], encoding="utf-8").read().strip()
jsonschema.validate(json.loads(text), schema)
EOF
}

for args in "--temp 0" "--temp 0.9 --seed 5" "--temp 1.2 --top-k 0 --top-p 1 --min-p 0 --seed 9"; do
  # shellcheck disable=SC2086
  if "$BIN" run -m "$MODEL" -t 2 -n 96 $args -p "A person record as JSON: " \
       --json-schema "$TMP/person.json" >"$TMP/out" 2>"$TMP/err" && validate "$TMP/person.json" "$TMP/out" &&
     grep -q "grammar forced [1-9]" "$TMP/err"; then ok
  else bad "run --json-schema ($args): $(cat "$TMP/out" "$TMP/err")"; fi
done
if "$BIN" run -m "$MODEL" -t 2 -n 200 --temp 0 -p "The config file, in JSON: " \
     --grammar "$ROOT/tests/data/gbnf/json.gbnf" >"$TMP/out" 2>"$TMP/err" &&
   "$PY" -c 'import json,sys; json.loads(open(sys.argv[1]).read())' "$TMP/out"; then ok
else bad "run --grammar json.gbnf: $(cat "$TMP/out" "$TMP/err")"; fi
# chat: every reply is a record
printf 'Tell me about Ada.\nAnd about Alan.\n' >"$TMP/chat_in"
if "$BIN" chat -m "$MODEL" -t 2 -n 96 --seed 2 --json-schema "$TMP/person.json" <"$TMP/chat_in" \
     >"$TMP/out" 2>"$TMP/err"; then
  n=0
  while IFS= read -r line; do
    [[ "$line" == \{* ]] || continue
    printf '%s\n' "$line" >"$TMP/reply"
    if validate "$TMP/person.json" "$TMP/reply"; then n=$((n + 1)); fi
  done <"$TMP/out"
  if [[ $n -eq 2 ]]; then ok; else bad "chat --json-schema: $n of 2 replies valid: $(cat "$TMP/out")"; fi
else bad "chat --json-schema: $(cat "$TMP/err")"; fi

# refusals
echo '{"type": "integer", "multipleOf": 3}' >"$TMP/mult.json"
printf 'root ::= "a" undefined-rule\n' >"$TMP/undef.gbnf"
printf 'root ::= "a\n' >"$TMP/unterminated.gbnf"
expect 2 "mult.json: json schema: .*unsupported keyword 'multipleOf'" -- \
  "$BIN" run -m "$MODEL" -p hi --json-schema "$TMP/mult.json"
expect 2 "undef.gbnf: .*undefined-rule" -- "$BIN" run -m "$MODEL" -p hi --grammar "$TMP/undef.gbnf"
expect 2 "unterminated.gbnf: gbnf:1:" -- "$BIN" chat -m "$MODEL" --grammar "$TMP/unterminated.gbnf"
expect 2 "cannot read schema file" -- "$BIN" run -m "$MODEL" -p hi --json-schema "$TMP/nope.json"
expect 2 "either --grammar or --json-schema" -- \
  "$BIN" run -m "$MODEL" -p hi --grammar "$TMP/undef.gbnf" --json-schema "$TMP/mult.json"
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
