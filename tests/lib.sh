# Shared helpers of the shell tests: the pass/fail counters (ok, bad) and `expect` for a
# command's exit code and one-line error. Source it after setting TMP (a scratch folder):
#   source "$ROOT/tests/lib.sh"
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

# expect CODE PATTERN -- command...: exit code, stderr has exactly one line matching PATTERN
# (a zero exit may print any stderr; an empty PATTERN matches all)
expect() {
  local code="$1" pat="$2"; shift 3
  "$@" >"$TMP/out" 2>"$TMP/err"
  local got=$?
  local lines; lines=$(wc -l <"$TMP/err")
  if [[ $got -ne $code ]]; then bad "$*: exit $got, expected $code; stderr: $(head -c 300 "$TMP/err")"; return; fi
  if [[ $code -ne 0 && $lines -ne 1 ]]; then bad "$*: $lines stderr lines, expected 1: $(head -c 300 "$TMP/err")"; return; fi
  if [[ -n "$pat" ]] && ! grep -qE -- "$pat" "$TMP/err"; then bad "$*: stderr lacks /$pat/: $(cat "$TMP/err")"; return; fi
  ok
}
