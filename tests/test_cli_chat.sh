#!/usr/bin/env bash
# lumen chat in a real terminal (tmux: send-keys, capture-pane): a message streams a reply,
# /stats prints TTFT and tok/s, a second turn prefills only its new tokens (KV kept),
# /reset, /exit, Ctrl-C stops a long reply and the prompt comes back, Ctrl-C at the prompt
# clears the line, Ctrl-D leaves with status 0. Then the non-interactive mode (stdin not a
# terminal), the context-full handling, the missing-template warning, and the progress
# line: drawn under tmux, absent when stderr is not a terminal.
# LM_TEST_LABELS: model;cli
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
BIN="${LUMEN_BIN:-$ROOT/build/lumen}"
MODEL="${LUMEN_MODEL:-$ROOT/models/gemma-3-270m-q4_k_m.gguf}"
TMP="$(mktemp -d)"
# a private tmux server (own socket dir, no user config) and a temporary HOME: the test
# never touches the user's tmux or files
export TMUX_TMPDIR="$TMP" HOME="$TMP/home" LC_ALL=C.UTF-8 # UTF-8 typed at the prompt
mkdir -p "$HOME"
T=(tmux -L lumen-test -f /dev/null)
cleanup() { "${T[@]}" kill-server >/dev/null 2>&1; rm -rf "$TMP"; }
trap cleanup EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
# the sanitizer builds are 5-10x slower: wait longer there
if [[ -n "${LUMEN_TEST_QUICK:-}" ]]; then LIMIT=240; else LIMIT=60; fi

if ! command -v tmux >/dev/null; then
  echo "FAIL: tmux is not installed (scripts/setup.sh installs it)" >&2
  echo "0 passed, 1 failed"
  exit 1
fi

screen() { "${T[@]}" capture-pane -p -J -t "$1" -S -1000 2>/dev/null; }
# wait_for SESSION REGEX [SECONDS]: until the screen matches (extended regex, whole screen)
wait_for() {
  local s=$1 re=$2 lim=${3:-$LIMIT} t0=$SECONDS
  while ((SECONDS - t0 < lim)); do
    if screen "$s" | grep -qE -- "$re"; then return 0; fi
    sleep 0.2
  done
  return 1
}
# count of prompt lines ("> " at the start of a line) on the screen
prompts() { screen "$1" | grep -cE '^> '; }
wait_prompts() { # SESSION N: until there are N prompt lines
  local s=$1 n=$2 t0=$SECONDS
  while ((SECONDS - t0 < LIMIT)); do
    (($(prompts "$s") >= n)) && return 0
    sleep 0.2
  done
  return 1
}
# start SESSION COMMAND: a 120x40 terminal running COMMAND, then "[exit N]"
start() {
  "${T[@]}" new-session -d -s "$1" -x 120 -y 40 -c "$ROOT" \
    "bash -c '$2; echo \"[exit \$?]\"; sleep 600'"
}

CHAT="'$BIN' chat -m '$MODEL' -t 2 --temp 0"

# ---------------------------------------------------------------- a conversation
start a "$CHAT -n 16 --history '$HOME/history'"
if wait_for a '/help for commands' && wait_prompts a 1; then ok; else bad "no prompt: $(screen a | tail -5)"; fi
if screen a | grep -q "has no chat template (a base model?); using the gemma turn format"; then ok
else bad "no missing-template warning: $(screen a | head -3)"; fi
"${T[@]}" send-keys -t a "Hello, who are you? Café" Enter
if wait_prompts a 2; then ok; else bad "turn 1: no reply/prompt: $(screen a | tail -5)"; fi
# libedit took the non-ASCII character (it needs the locale's LC_CTYPE)
if screen a | grep -q '^> Hello, who are you? Café$'; then ok; else bad "typed UTF-8 lost: $(screen a | grep '^> ')"; fi
# history: Up brings the last message back (then Ctrl-U clears the line)
"${T[@]}" send-keys -t a Up
recalled() { (($(screen a | grep -c '^> Hello, who are you? Café$') == 2)); }
t0=$SECONDS
until recalled || ((SECONDS - t0 > 10)); do sleep 0.2; done
if recalled; then ok
else bad "history: Up did not recall the message: $(screen a | tail -3)"; fi
"${T[@]}" send-keys -t a C-u
# the reply is the text between the message line and the next prompt
reply=$(screen a | sed -n '/^> Hello, who are you?/,/^> /p' | sed '1d;$d' | tr -d '\n ')
if [[ -n "$reply" ]]; then ok; else bad "turn 1: empty reply: $(screen a | tail -5)"; fi
"${T[@]}" send-keys -t a "/stats" Enter
if wait_for a 'last reply: TTFT [0-9.]+ ms \| prompt [0-9]+ tok: [0-9]+ prefilled .* \| reply [0-9]+ tok, [0-9.]+ tok/s'; then ok
else bad "/stats: $(screen a | tail -3)"; fi
"${T[@]}" send-keys -t a "What is the capital of France?" Enter
wait_prompts a 4 || bad "turn 2: no reply/prompt: $(screen a | tail -5)"
"${T[@]}" send-keys -t a "/stats" Enter
wait_prompts a 5
line=$(screen a | grep 'last reply:' | tail -1)
if [[ $line =~ prompt\ ([0-9]+)\ tok:\ ([0-9]+)\ prefilled.*\ ([0-9]+)\ reused ]] &&
   ((BASH_REMATCH[2] < BASH_REMATCH[1] && BASH_REMATCH[3] > 0 && BASH_REMATCH[2] + BASH_REMATCH[3] == BASH_REMATCH[1])); then ok
else bad "turn 2 does not reuse the KV: '$line'"; fi
"${T[@]}" send-keys -t a "/reset" Enter
if wait_for a '\(conversation cleared\)'; then ok; else bad "/reset: $(screen a | tail -3)"; fi
"${T[@]}" send-keys -t a "/stats" Enter
if wait_for a '^no reply yet'; then ok; else bad "/stats after /reset: $(screen a | tail -3)"; fi
"${T[@]}" send-keys -t a "/exit" Enter
if wait_for a '^\[exit 0\]'; then ok; else bad "/exit: $(screen a | tail -3)"; fi
# --history FILE: saved on exit (libedit's format encodes spaces as \040)
if grep -q 'Hello,.*who.*Caf' "$HOME/history" 2>/dev/null; then ok
else bad "--history: no message saved in $HOME/history: $(head -c 200 "$HOME/history" 2>&1)"; fi

# ---------------------------------------------------------------- Ctrl-C, Ctrl-D
start b "$CHAT -n 2000"
wait_prompts b 1 || bad "b: no prompt: $(screen b | tail -3)"
"${T[@]}" send-keys -t b "Tell me a long story about the sea." Enter
# streaming: reply text is on the screen while no new prompt has come yet
streamed() { screen b | awk '/^> Tell me a long story/ { f = 1; next } f && NF { n++ } END { exit !(n > 0) }'; }
t0=$SECONDS
until streamed || ((SECONDS - t0 > LIMIT)); do sleep 0.2; done
if streamed && (($(prompts b) == 1)); then ok
else bad "no streamed text mid-reply: $(screen b | tail -5)"; fi
"${T[@]}" send-keys -t b C-c
if wait_for b '^\[reply stopped\]' 30 && wait_prompts b 2; then ok
else bad "Ctrl-C did not stop the reply: $(screen b | tail -5)"; fi
# the process is still there: a command answers
"${T[@]}" send-keys -t b "/stats" Enter
if wait_for b '\(interrupted\)'; then ok; else bad "/stats after Ctrl-C: $(screen b | tail -3)"; fi
# Ctrl-C at the prompt drops the typed line and stays
"${T[@]}" send-keys -t b "half a line"
wait_for b '^> half a line' 10
"${T[@]}" send-keys -t b C-c
if wait_for b '^> half a line\^C' 10 && wait_prompts b 4; then ok
else bad "Ctrl-C at the prompt: $(screen b | tail -3)"; fi
"${T[@]}" send-keys -t b C-d
if wait_for b '^\[exit 0\]'; then ok; else bad "Ctrl-D did not leave with 0: $(screen b | tail -3)"; fi

# ---------------------------------------------------------------- non-interactive
printf 'Hello there\n/stats\nAnd then?\n/stats\n/reset\n/stats\n' |
  "$BIN" chat -m "$MODEL" -t 2 --temp 0 -n 8 >"$TMP/out" 2>"$TMP/err"
rc=$?
if ((rc == 0)) && (($(grep -c 'last reply: TTFT' "$TMP/out") == 2)) && grep -q '^(conversation cleared)' "$TMP/out" &&
   grep -q '^no reply yet' "$TMP/out"; then ok
else bad "non-interactive: rc $rc: $(cat "$TMP/out" "$TMP/err")"; fi
if (($(wc -l <"$TMP/err") == 1)) && grep -q 'using the gemma turn format' "$TMP/err"; then ok
else bad "non-interactive stderr, expected only the template warning: $(cat "$TMP/err")"; fi
if grep -qP '\r|\x1b' "$TMP/out" "$TMP/err"; then bad "terminal control bytes without a terminal"; else ok; fi
# the same greedy conversation again gives the same text; re-prefilling gives the same too
printf 'Hello there\nAnd then?\n' | "$BIN" chat -m "$MODEL" -t 2 --temp 0 -n 8 >"$TMP/o1" 2>/dev/null
printf 'Hello there\nAnd then?\n' | "$BIN" chat -m "$MODEL" -t 2 --temp 0 -n 8 --no-kv-reuse >"$TMP/o2" 2>/dev/null
if [[ -s "$TMP/o1" ]] && cmp -s "$TMP/o1" "$TMP/o2"; then ok
else bad "KV reuse changed the replies: $(diff "$TMP/o1" "$TMP/o2" | head -5)"; fi

# context full: old turns are dropped with one line; a message too long alone is refused
long=$(printf 'word %.0s' {1..120})
printf 'Hello there my friend\nHow are you today?\nTell me about Paris\n%s\nBye\n' "$long" |
  "$BIN" chat -m "$MODEL" -t 2 --temp 0 -n 16 --ctx 80 -s "Be brief." >"$TMP/out" 2>"$TMP/err"
rc=$?
if ((rc == 0)) && grep -qE 'context full \(80 tokens\): dropped the oldest [0-9]+ turn' "$TMP/err" &&
   grep -q 'the context holds 80 (raise --ctx); not sent' "$TMP/err"; then ok
else bad "context full: rc $rc: $(cat "$TMP/err")"; fi

# bad flags: one line, exit 2
"$BIN" chat --bogus >/dev/null 2>"$TMP/err"; rc=$?
if ((rc == 2)) && (($(wc -l <"$TMP/err") == 1)); then ok; else bad "chat --bogus: rc $rc: $(cat "$TMP/err")"; fi
"$BIN" chat --template nope >/dev/null 2>"$TMP/err"; rc=$?
if ((rc == 2)) && grep -q "unknown format 'nope'" "$TMP/err"; then ok; else bad "--template nope: rc $rc"; fi

# ---------------------------------------------------------------- progress lines
# (LUMEN_PROGRESS_DELAY_MS=0: drawn at once instead of after ~2 s)
head -c 3000 "$ROOT/docs/kv_cache.md" >"$TMP/prompt.txt" # ~700 tokens: two prefill chunks
# under tmux: pipe-pane records the raw output, including the line that is erased later
"${T[@]}" new-session -d -s p -x 120 -y 40 -c "$ROOT" \
  "bash -c 'read -r _; LUMEN_PROGRESS_DELAY_MS=0 \"$BIN\" run -m \"$MODEL\" -t 2 -f \"$TMP/prompt.txt\" -n 1 --verbose >/dev/null; LUMEN_PROGRESS_DELAY_MS=0 \"$BIN\" bench -m \"$MODEL\" -t 2 -p 16 -n 0 -r 2 --bw-mib 0 >/dev/null; echo \"[exit \$?]\"; sleep 600'"
"${T[@]}" pipe-pane -o -t p "cat >>'$TMP/raw'"
"${T[@]}" send-keys -t p Enter
wait_for p '^\[exit 0\]' || bad "progress runs: $(screen p | tail -3)"
if grep -qaE 'prefill: [0-9]+/[0-9]+ tok' "$TMP/raw"; then ok; else bad "no prefill progress line under tmux"; fi
if grep -qaE 'lumen bench: pp16 t=2: [0-9]+/3 runs' "$TMP/raw"; then ok; else bad "no bench progress line under tmux"; fi
# ... and erased: nothing of it is left on the screen
if screen p | grep -qE 'prefill: |runs \('; then bad "progress line left on the screen"; else ok; fi
# stderr not a terminal: no progress line at all
LUMEN_PROGRESS_DELAY_MS=0 "$BIN" run -m "$MODEL" -t 2 -f "$TMP/prompt.txt" -n 1 --verbose >/dev/null 2>"$TMP/err"
if grep -qE 'prefill: |\x1b' "$TMP/err"; then bad "progress line without a terminal: $(head -c 300 "$TMP/err")"; else ok; fi
LUMEN_PROGRESS_DELAY_MS=0 "$BIN" bench -m "$MODEL" -t 2 -p 16 -n 0 -r 2 --bw-mib 0 >/dev/null 2>"$TMP/err"
if [[ -s "$TMP/err" ]]; then bad "bench wrote to stderr without a terminal: $(head -c 300 "$TMP/err")"; else ok; fi

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
