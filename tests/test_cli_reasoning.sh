#!/usr/bin/env bash
# lumen run --chat / lumen chat with a thinking model: a tiny random-weight copy with
# DeepSeek-R1's template (the generation prompt opens <think>, tools/make_arch_gguf.py), so
# every generated token is reasoning. Piped (stdout not a terminal) the reasoning is hidden and
# the stats count it apart; --show-reasoning shows it; under tmux (a terminal) it is shown with
# ANSI faint. The answer a chat keeps is never the reasoning.
# LM_TEST_LABELS: cli
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
BIN="${LUMEN_BIN:-$ROOT/build/lumen}"
PY="$ROOT/.venv/bin/python"
TMP="$(mktemp -d)"
export TMUX_TMPDIR="$TMP" HOME="$TMP/home" LC_ALL=C.UTF-8
mkdir -p "$HOME"
T=(tmux -L lumen-reason-test -f /dev/null)
cleanup() { "${T[@]}" kill-server >/dev/null 2>&1; rm -rf "$TMP"; }
trap cleanup EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

M="$TMP/r1.gguf"
"$PY" "$ROOT/tools/make_arch_gguf.py" --family qwen3_tiny --vocab 512 \
  --token-text "300=<｜User｜>" --token-type 300=3 --token-text "301=<｜Assistant｜>" --token-type 301=3 \
  --token-text "302=<｜end▁of▁sentence｜>" --token-type 302=3 --token-text "303=<think>" --token-type 303=4 \
  --token-text "304=</think>" --token-type 304=4 \
  --chat-template "$ROOT/tests/golden/chat_reasoning/r1_qwen.jinja" "$M" >/dev/null || { echo "FAIL: model" >&2; exit 1; }
RUN=("$BIN" run -m "$M" --chat -p hi -n 10 --temp 1 --seed 7 -t 1)

out=$("${RUN[@]}" 2>"$TMP/err")
[[ $? -eq 0 ]] && ok || bad "lumen run failed: $(cat "$TMP/err")"
[[ -z "${out//$'\n'/}" ]] && ok || bad "piped: the reasoning should be hidden, got '$out'"
grep -q "gen 10 tok (reasoning 10, answer 0)" "$TMP/err" && ok || bad "stats: $(cat "$TMP/err")"
shown=$("${RUN[@]}" --show-reasoning 2>/dev/null)
[[ -n "${shown//$'\n'/}" && "$shown" != *$'\x1b'* ]] && ok || bad "--show-reasoning piped: '$shown'"

# a terminal (a tmux pane): shown, faint (ESC[2m ... ESC[22m)
"${T[@]}" new-session -d -x 200 -y 20 "$(printf '%q ' "${RUN[@]}") 2>/dev/null; sleep 30" || bad "tmux did not start"
pane=""
for _ in $(seq 1 100); do
  pane=$("${T[@]}" capture-pane -p -e -t 0 2>/dev/null)
  [[ "$pane" == *$'\e[2m'* ]] && break
  sleep 0.1
done
[[ "$pane" == *$'\e[2m'* ]] && ok || bad "no faint reasoning in the pane: '$pane'"

# lumen chat, piped: the stats of the reply count the reasoning apart
chat=$(printf 'hi\n/stats\n' | "$BIN" chat -m "$M" -n 6 --temp 1 --seed 7 -t 1 2>/dev/null)
[[ "$chat" == *"reply 6 tok (reasoning 6, answer 0)"* ]] && ok || bad "chat /stats: '$chat'"

# gpt-oss's harmony format (tools/make_harmony_gguf.py: a bigram chain writes the analysis
# "Hmm ok."; a budget forces the final channel, whose body is the chain again): the analysis is
# reasoning (hidden piped), the final channel the answer; --reasoning-budget in run and chat
H="$TMP/harmony.gguf"
"$PY" "$ROOT/tools/make_harmony_gguf.py" "$H" || bad "harmony model"
HRUN=("$BIN" run -m "$H" --chat -p hi -n 30 --temp 0 -t 1)
[[ "$("${HRUN[@]}" --show-reasoning 2>/dev/null)" == "Hmm ok." ]] && ok || bad "harmony: the analysis shown"
[[ -z "$("${HRUN[@]}" 2>/dev/null | tr -d '\n')" ]] && ok || bad "harmony piped: the analysis should be hidden"
[[ "$("${HRUN[@]}" --reasoning-budget 1 2>/dev/null)" == "Hmm ok." ]] && ok || bad "harmony budget 1: the answer"
[[ "$("${HRUN[@]}" --reasoning-budget 1 --show-reasoning 2>/dev/null)" == $'Hmm\n\nHmm ok.' ]] && ok ||
  bad "harmony budget 1 shown"
[[ "$("${HRUN[@]}" --reasoning-budget 0 --show-reasoning 2>/dev/null)" == "Hmm ok." ]] && ok || bad "harmony budget 0"
"${HRUN[@]}" --reasoning-budget -2 >/dev/null 2>&1 && bad "--reasoning-budget -2 accepted" || ok
chat=$(printf 'hi\n/stats\n' | "$BIN" chat -m "$H" -n 30 --temp 0 -t 1 --reasoning-budget 2 2>/dev/null)
[[ "$chat" == *"Hmm ok."*"(reasoning 4, answer "* ]] && ok || bad "harmony chat: '$chat'"
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
