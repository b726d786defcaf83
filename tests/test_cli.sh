#!/usr/bin/env bash
# CLI behaviour: --help everywhere, bad flags/values/paths give one line and exit 2,
# malformed models give one line naming file + key/tensor and a non-zero exit.
# LM_TEST_LABELS: unit;cli
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
BIN="${LUMEN_BIN:-$ROOT/build/lumen}"
PY="$ROOT/.venv/bin/python"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
source "$ROOT/tests/lib.sh" # expect (and ok, bad)

# help
for sub in "" run info chat tokenize; do
  if "$BIN" $sub --help >"$TMP/out" 2>&1 && grep -q "usage" "$TMP/out"; then ok; else bad "lumen $sub --help"; fi
done
expect 2 "unknown command" -- "$BIN" frobnicate
expect 2 "unknown option '--bogus'" -- "$BIN" run --bogus
expect 2 "needs a value" -- "$BIN" run -p
expect 2 "not an integer" -- "$BIN" run -p hi -n many
expect 2 "out of range" -- "$BIN" run -p hi -n -5
expect 2 "not a number" -- "$BIN" run -p hi --temp warm
expect 2 "out of range" -- "$BIN" run -p hi --top-p 1.5
expect 2 "no prompt" -- "$BIN" run
# the sampling flags are one table (run and chat): OpenAI's penalties in the server's [-2, 2]
expect 2 "--presence-penalty: 2.5 is out of range \[-2, 2\]" -- "$BIN" run -p hi --presence-penalty 2.5
expect 2 "--frequency-penalty: -3 is out of range \[-2, 2\]" -- "$BIN" run -p hi --frequency-penalty -3
expect 2 "--frequency-penalty: 'lots' is not a number" -- "$BIN" chat --frequency-penalty lots
expect 2 "--presence-penalty: 9 is out of range" -- "$BIN" chat --presence-penalty 9
expect 2 "cannot read prompt file" -- "$BIN" run -f "$TMP/nope.txt"
expect 2 "nope.gguf" -- "$BIN" run -m "$TMP/nope.gguf" -p hi
expect 2 "nope.gguf" -- "$BIN" info "$TMP/nope.gguf"
expect 2 "unknown option" -- "$BIN" info --what
expect 2 "unknown option '--bogus'" -- "$BIN" tokenize --bogus
expect 2 "no text" -- "$BIN" tokenize
expect 2 "cannot read file" -- "$BIN" tokenize -f "$TMP/nope.txt"
expect 2 "unknown option '--bogus'" -- "$BIN" chat --bogus
expect 2 "not an integer" -- "$BIN" chat -n lots
expect 2 "unknown format 'nope'" -- "$BIN" chat --template nope
expect 2 "unknown format 'nope'" -- "$BIN" run -p hi --chat --template nope
expect 2 "--draft-max needs --lookup" -- "$BIN" run -p hi --draft-max 4
expect 2 "--draft-max: 40 is out of range" -- "$BIN" run -p hi --lookup --draft-max 40
expect 2 "apply to --parallel runs" -- "$BIN" bench --lookup
expect 2 "--draft-max: 0 is out of range" -- "$BIN" serve --draft-max 0
expect 2 "nope.gguf" -- "$BIN" chat -m "$TMP/nope.gguf" </dev/null
# KV cache types (-ctk / -ctv, long forms too): a bad value is one line, exit 2, in every command
expect 2 "-ctk: unknown KV cache type 'q4_0' \(f16 or q8_0\)" -- "$BIN" run -p hi -ctk q4_0
expect 2 "--cache-type-v: unknown KV cache type 'F16'" -- "$BIN" run -p hi --cache-type-v F16
expect 2 "-ctv: unknown KV cache type ''" -- "$BIN" chat -ctv "" </dev/null
expect 2 "--cache-type-k: unknown KV cache type 'q8'" -- "$BIN" perplexity -f x --cache-type-k q8
expect 2 "-ctk: unknown KV cache type 'bf16'" -- "$BIN" bench -ctk bf16
expect 2 "-ctv: unknown KV cache type 'x'" -- "$BIN" serve -ctv x
expect 2 "needs a value" -- "$BIN" serve -ctk
printf 'not a gguf file at all' >"$TMP/junk.gguf"
expect 1 "junk.gguf.*magic" -- "$BIN" info "$TMP/junk.gguf"
: >"$TMP/empty.gguf"
expect 1 "empty.gguf" -- "$BIN" info "$TMP/empty.gguf"

if [[ -x "$PY" ]]; then
  "$PY" "$ROOT/tools/make_tiny_gguf.py" "$TMP" >/dev/null || bad "make_tiny_gguf.py failed"
  expect 0 "" -- "$BIN" info "$TMP/tiny_ok.gguf"
  expect 1 "unsupported architecture 'llama2000' \(supported: .*gemma3" -- "$BIN" info "$TMP/tiny_bad_arch.gguf"
  expect 1 "tiny_no_embedding_length.gguf.*gemma3.embedding_length" -- "$BIN" info "$TMP/tiny_no_embedding_length.gguf"
  expect 1 "tiny_no_eps.gguf.*layer_norm_rms_epsilon" -- "$BIN" info "$TMP/tiny_no_eps.gguf"
  expect 1 "tiny_missing_tensor.gguf.*blk.1.ffn_up.weight" -- "$BIN" info "$TMP/tiny_missing_tensor.gguf"
  expect 1 "tiny_wrong_shape.gguf.*blk.0.attn_q.weight.*expected \[64, 64\]" -- "$BIN" info "$TMP/tiny_wrong_shape.gguf"
  # a tensor type lumen cannot run: one line naming the tensor, its type and the types that run
  # (the list comes from the dtype traits), from info and from any other load
  expect 1 "tiny_iq2_dtype.gguf: tensor 'blk.0.ffn_down.weight' has type iq2_xxs, which lumen cannot run \(supported: f32, f16, .*q4_K" -- "$BIN" info "$TMP/tiny_iq2_dtype.gguf"
  expect 1 "tiny_tq1_dtype.gguf: tensor 'blk.0.ffn_down.weight' has type tq1_0, which lumen cannot run \(supported: .*mxfp4" -- "$BIN" run -m "$TMP/tiny_tq1_dtype.gguf" -p hi -n 1
  # truncated copy of a valid file
  head -c 100000 "$TMP/tiny_ok.gguf" >"$TMP/trunc.gguf"
  expect 1 "trunc.gguf.*(past end|truncated)" -- "$BIN" info "$TMP/trunc.gguf"
  # the tiny model generates (random weights: any text) without crashing
  expect 0 "" -- "$BIN" run -m "$TMP/tiny_ok.gguf" -p "the cat" -n 8 -t 2 --seed 1
  if grep -q "gen .* tok/s" "$TMP/err"; then ok; else bad "stats line missing: $(cat "$TMP/err")"; fi
  expect 2 "exceeds the model's context length 256" -- "$BIN" run -m "$TMP/tiny_ok.gguf" -p hi --ctx 1000
  # the LM head's fused top-k (a small head: selected after its barrier) gives the text the
  # sampler's own pass over the logits gives; with soft-capping, selected after the cap
  for f in tiny_ok tiny_softcap; do
    for th in 1 2; do
      for smp in "--temp 0" "--seed 3" "--seed 5 --top-k 3 --temp 2"; do
        "$BIN" run -m "$TMP/$f.gguf" -p "the cat" -n 24 --ignore-eos -t $th $smp >"$TMP/fused" 2>/dev/null
        "$BIN" run -m "$TMP/$f.gguf" -p "the cat" -n 24 --ignore-eos -t $th $smp --no-fused-top-k \
          >"$TMP/unfused" 2>/dev/null
        if [[ -s "$TMP/fused" ]] && cmp -s "$TMP/fused" "$TMP/unfused"; then ok
        else bad "$f run -t $th $smp: fused and unfused text differ"; fi
      done
    done
  done
  # --presence-penalty / --frequency-penalty change the text (the tokens repeat without them)
  "$BIN" run -m "$TMP/tiny_ok.gguf" -p "the cat the dog" -n 40 --ignore-eos -t 2 --temp 0 >"$TMP/p0" 2>/dev/null
  for pen in "--presence-penalty 2" "--frequency-penalty 2"; do
    # shellcheck disable=SC2086
    "$BIN" run -m "$TMP/tiny_ok.gguf" -p "the cat the dog" -n 40 --ignore-eos -t 2 --temp 0 $pen >"$TMP/p1" 2>/dev/null
    if [[ -s "$TMP/p0" && -s "$TMP/p1" ]] && ! cmp -s "$TMP/p0" "$TMP/p1"; then ok
    else bad "$pen did not change the text: $(head -c 200 "$TMP/p1")"; fi
  done
  "$BIN" info "$TMP/tiny_softcap.gguf" 2>/dev/null | grep -q "logit softcap  3" && ok || bad "tiny_softcap.gguf has no softcap"
  # --lookup: the same greedy and seeded text as plain decoding; the stats line keeps its
  # form and appends the drafting counters
  for samp in "--temp 0" "--seed 3 --repeat-penalty 1.2"; do
    expect 0 "" -- "$BIN" run -m "$TMP/tiny_ok.gguf" -p "the cat the dog the cat the" -n 40 -t 2 $samp
    cp "$TMP/out" "$TMP/plain_out"
    expect 0 "" -- "$BIN" run -m "$TMP/tiny_ok.gguf" -p "the cat the dog the cat the" -n 40 -t 2 $samp --lookup
    if cmp -s "$TMP/out" "$TMP/plain_out"; then ok; else bad "--lookup ($samp) text differs"; fi
    if grep -qE "gen 40 tok, [0-9.]+ tok/s \| threads 2 \| drafted [0-9]+, accepted [0-9]+ \([0-9.]+%\)$" "$TMP/err"
    then ok; else bad "--lookup stats line: $(cat "$TMP/err")"; fi
  done
  # -md: a draft model of the same vocabulary (tiny_softcap: other weights), greedy: the same
  # text as plain decoding, the stats line with the drafting counters; the model as its own
  # draft accepts every draft; a draft of another vocabulary: one line naming both files
  expect 0 "" -- "$BIN" run -m "$TMP/tiny_ok.gguf" -p "the cat the dog" -n 40 -t 2 --temp 0 --ignore-eos
  cp "$TMP/out" "$TMP/plain_out"
  for d in tiny_softcap tiny_ok; do
    expect 0 "" -- "$BIN" run -m "$TMP/tiny_ok.gguf" -p "the cat the dog" -n 40 -t 2 --temp 0 --ignore-eos \
      -md "$TMP/$d.gguf" --draft-max 4 --draft-fixed
    if cmp -s "$TMP/out" "$TMP/plain_out"; then ok; else bad "-md $d text differs"; fi
    if grep -qE "gen 40 tok, [0-9.]+ tok/s \| threads 2 \| drafted [1-9][0-9]*, accepted [0-9]+ \([0-9.]+%\)$" "$TMP/err"
    then ok; else bad "-md $d stats line: $(cat "$TMP/err")"; fi
  done
  if grep -qE "accepted ([0-9]+) \(100.0%\)" "$TMP/err"; then ok; else bad "-md self: $(cat "$TMP/err")"; fi
  expect 0 "" -- "$BIN" run -m "$TMP/tiny_ok.gguf" -p "the cat" -n 16 -t 2 --seed 4 -md "$TMP/tiny_softcap.gguf"
  "$PY" "$ROOT/tools/make_arch_gguf.py" --family qwen3 --layers 1 --vocab 300 "$TMP/v300.gguf" >/dev/null
  expect 1 "draft model .*v300.gguf: vocabulary of 300 tokens.*tiny_ok.gguf" -- \
    "$BIN" run -m "$TMP/tiny_ok.gguf" -p "the cat" -n 8 -md "$TMP/v300.gguf"
  expect 2 "either --lookup or -md" -- "$BIN" run -m "$TMP/tiny_ok.gguf" -p hi --lookup -md "$TMP/tiny_ok.gguf"
  expect 2 "--draft-fixed needs -md" -- "$BIN" run -m "$TMP/tiny_ok.gguf" -p hi --draft-fixed
  # chat without a terminal: one reply per line, /stats; one warning naming the fallback format
  printf 'hi\n/stats\nmore\n/stats\n' >"$TMP/chat_in"
  expect 0 "" -- "$BIN" chat -m "$TMP/tiny_ok.gguf" -n 4 -t 2 --seed 1 <"$TMP/chat_in"
  if [[ $(grep -c "^last reply: TTFT" "$TMP/out") -eq 2 && $(wc -l <"$TMP/err") -eq 1 ]] &&
     grep -q "has no chat template (a base model?); using the gemma turn format" "$TMP/err"; then ok
  else bad "tiny chat: $(cat "$TMP/out" "$TMP/err")"; fi
else
  bad "no venv python at $PY (run scripts/setup.sh)"
fi
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
