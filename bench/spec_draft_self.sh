#!/bin/bash
# The default model as its own draft (lumen run -md): plain, -md (adaptive), -md --draft-fixed
# --draft-max 4 and 8, alternating, 3 rounds, 2 prompts; prints each run's stats line (run it
# under an exclusive CPU lock: flock -x LOCK bash bench/spec_draft_self.sh). docs/speculative.md.
cd "$(dirname "$0")/.." || exit 1
B=build/lumen; M=models/gemma-3-270m-q4_k_m.gguf
P1="Once upon a time, in a small village by the sea,"
P2="Text: The old lighthouse stood at the edge of the cliff for more than two hundred years. Every night its keeper climbed the narrow stairs and trimmed the wick.
The same text, repeated exactly:
"
for pi in 1 2; do
  if [ $pi = 1 ]; then P="$P1"; else P="$P2"; fi
  for round in 1 2 3; do
    for mode in plain md mdk4 mdk8; do
      case $mode in
        plain) a="";; md) a="-md $M";; mdk4) a="-md $M --draft-fixed --draft-max 4";; mdk8) a="-md $M --draft-fixed --draft-max 8";;
      esac
      line=$($B run -p "$P" -n 128 --temp 0 --ignore-eos -t 2 $a 2>&1 >"${TMPDIR:-/tmp}"/spec_draft_out_${pi}_${mode}.txt | tail -1)
      echo "prompt$pi round$round $mode | $line"
    done
  done
done
# greedy: every mode's text (last round) must be plain decoding's
rc=0
for pi in 1 2; do
  for mode in md mdk4 mdk8; do
    if cmp -s "${TMPDIR:-/tmp}/spec_draft_out_${pi}_plain.txt" "${TMPDIR:-/tmp}/spec_draft_out_${pi}_${mode}.txt"; then
      echo "prompt$pi $mode: same text"
    else
      echo "prompt$pi $mode: TEXT DIFFERS"; rc=1
    fi
  done
done
exit $rc
