#!/usr/bin/env bash
# lumen tokenize on the default model: --ids match llama.cpp's ids for the same text
# (tests/golden/tokens_gemma3.tsv: with and without BOS, with --parse-special), pieces
# match, the token count matches the prompt count of `lumen run`; a WordPiece vocabulary-only
# file tokenizes too; bad flags: one line, exit 2.
# LM_TEST_LABELS: model;cli
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
BIN="${LUMEN_BIN:-$ROOT/build/lumen}"
MODEL="${LUMEN_MODEL:-$ROOT/models/gemma-3-270m-q4_k_m.gguf}"
GOLD="$ROOT/tests/golden/tokens_gemma3.tsv"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

# golden lines: hex(text) add_bos special ids hex(detok); every 67th case (about 17 runs)
# whose text has no NUL byte (a file can hold it, but keep -f text-like)
has_nul() { local h=$1 i; for ((i = 0; i < ${#h}; i += 2)); do [[ ${h:i:2} == 00 ]] && return 0; done; return 1; }
n=0
while IFS=$'\t' read -r hex bos special ids _; do
  n=$((n + 1))
  ((n % 67 == 1)) || continue
  [[ $hex == - ]] && hex=""
  [[ $ids == - ]] && ids=""
  has_nul "$hex" && continue
  printf '%b' "$(sed 's/../\\x&/g' <<<"$hex")" >"$TMP/text"
  flags=()
  ((bos == 0)) && flags+=(--no-bos)
  ((special == 1)) && flags+=(--parse-special)
  got=$("$BIN" tokenize -m "$MODEL" -f "$TMP/text" --ids "${flags[@]}" 2>"$TMP/err")
  want="[${ids// /, }]"
  if [[ "$got" == "$want" ]]; then ok; else bad "case $n (hex $hex, bos $bos, special $special): got $got, want $want $(cat "$TMP/err")"; fi
done < <(awk -F'\t' -v OFS='\t' '{ for (i = 1; i <= 5; i++) if ($i == "") $i = "-"; print }' "$GOLD")

# pieces and the default table
out=$("$BIN" tokenize -m "$MODEL" -p "Hello world" --pieces)
if [[ "$out" == $'<bos>\nHello\n world' ]]; then ok; else bad "--pieces: '$out'"; fi
out=$("$BIN" tokenize -m "$MODEL" -p $'Hello world\n')
want=$'     2 -> \'<bos>\'\n  9259 -> \'Hello\'\n  1902 -> \' world\'\n   107 -> \'\\n\''
if [[ "$out" == "$want" ]]; then ok; else bad "table: '$out' want '$want'"; fi
# escapes: a byte-fallback piece of an emoji split across tokens shows as \xHH, not raw bytes
"$BIN" tokenize -m "$MODEL" -p "🦩🦩 x" --pieces | iconv -f UTF-8 -t UTF-8 >/dev/null 2>&1 && ok ||
  bad "--pieces output is not valid UTF-8"

# the count matches `lumen run`'s prompt count
text="The history of the printing press begins in the fifteenth century."
n_tok=$("$BIN" tokenize -m "$MODEL" -p "$text" --ids | tr -cd ',' | wc -c)
n_tok=$((n_tok + 1))
"$BIN" run -m "$MODEL" -p "$text" -n 1 -t 2 --temp 0 >/dev/null 2>"$TMP/err"
if grep -q "prompt $n_tok tok" "$TMP/err"; then ok; else bad "run's prompt count != $n_tok: $(cat "$TMP/err")"; fi

# a vocabulary-only encoder file (WordPiece, bert-bge): only the tokenizer is loaded; ids as
# llama.cpp's (tests/golden/tokens_bert-bge.tsv: "Hello World! Ça va? 我爱北京 naïve résumé")
BGE="$ROOT/tests/data/vocab/ggml-vocab-bert-bge.gguf"
got=$("$BIN" tokenize -m "$BGE" -p "Hello World! Ça va? 我爱北京 naïve résumé" --ids 2>&1)
want="[101, 7592, 2088, 999, 6187, 12436, 1029, 1855, 100, 1781, 1755, 15743, 13746, 102]"
if [[ "$got" == "$want" ]]; then ok; else bad "bert-bge ids: got $got, want $want"; fi
out=$("$BIN" tokenize -m "$BGE" -p "Hello, WORLD" --pieces --no-bos)
if [[ "$out" == $' hello\n ,\n world' ]]; then ok; else bad "bert-bge pieces: '$out'"; fi

# bad flags, values, paths: one line on stderr, exit 2
expect2() {
  "$@" >/dev/null 2>"$TMP/err"
  local rc=$?
  if ((rc == 2)) && (($(wc -l <"$TMP/err") == 1)); then ok; else bad "$*: rc $rc, stderr: $(cat "$TMP/err")"; fi
}
expect2 "$BIN" tokenize -m "$MODEL" -p hi --bogus
expect2 "$BIN" tokenize -m "$MODEL"
expect2 "$BIN" tokenize -m "$MODEL" -p hi -f x
expect2 "$BIN" tokenize -m "$MODEL" -f "$TMP/nope.txt"
expect2 "$BIN" tokenize -m "$TMP/nope.gguf" -p hi
expect2 "$BIN" tokenize -m "$MODEL" -p

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
