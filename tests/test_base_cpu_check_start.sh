#!/usr/bin/env bash
# The start-up CPU check runs before main() in build/lumen and in programs that never call it
# (a test binary, a helper): a required feature this CPU lacks (LUMEN_CPU_CHECK_EXTRA) gives
# exit 1 and exactly one stderr line naming it, and nothing of the program runs.
# LM_TEST_LABELS: unit
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
BIN="${LUMEN_BIN:-$ROOT/build/lumen}"
BUILD_DIR="$(dirname "$BIN")"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
source "$ROOT/tests/lib.sh" # ok, bad, expect

# refused EXTRA PATTERN -- command...: exit 1, empty stdout, one stderr line matching PATTERN
refused() {
  local extra="$1" pat="$2"; shift 3
  LUMEN_CPU_CHECK_EXTRA="$extra" "$@" >"$TMP/out" 2>"$TMP/err"
  local got=$? lines
  lines=$(wc -l <"$TMP/err")
  if [[ $got -ne 1 ]]; then bad "EXTRA=$extra $*: exit $got, expected 1; stderr: $(head -c 300 "$TMP/err")"; return; fi
  if [[ $lines -ne 1 ]]; then bad "EXTRA=$extra $*: $lines stderr lines, expected 1: $(head -c 300 "$TMP/err")"; return; fi
  if [[ -s "$TMP/out" ]]; then bad "EXTRA=$extra $*: the program ran (stdout: $(head -c 200 "$TMP/out"))"; return; fi
  if ! grep -qE -- "$pat" "$TMP/err"; then bad "EXTRA=$extra $*: stderr lacks /$pat/: $(cat "$TMP/err")"; return; fi
  ok
}

# no extra requirement: the binary runs
if "$BIN" --help >"$TMP/out" 2>&1 && grep -q usage "$TMP/out"; then ok; else bad "lumen --help without LUMEN_CPU_CHECK_EXTRA: $(head -c 300 "$TMP/out")"; fi
if LUMEN_CPU_CHECK_EXTRA= "$BIN" --help >/dev/null 2>&1; then ok; else bad "lumen --help with an empty LUMEN_CPU_CHECK_EXTRA"; fi

# a feature name nothing has
refused nosuchfeature "^lumen: this CPU lacks nosuchfeature \(unknown feature\); this binary was built for .*nosuchfeature \(.*\)\. Rebuild .*\.$" -- "$BIN" --help
# a real feature this CPU lacks, when /proc/cpuinfo names one of these as absent
if [[ -r /proc/cpuinfo ]] && grep -q '^flags' /proc/cpuinfo; then
  for pair in avx512fp16:avx512_fp16 amx-tile:amx_tile avx5124vnniw:avx512_4vnniw; do
    name=${pair%%:*} flag=${pair#*:}
    if ! grep -m1 '^flags' /proc/cpuinfo | grep -qw -- "$flag"; then
      refused "$name" "^lumen: this CPU lacks $name; this binary was built for .*\b$name \(" -- "$BIN" run -p hi -n 1
      refused "avx2+$name" "^lumen: this CPU lacks $name;" -- "$BIN" info "$ROOT/models/none.gguf"
      break
    fi
  done
fi
# programs that never reference the check get it too (linked with --undefined)
for prog in test_base_threadpool kernels_dequant_dump; do
  if [[ -x "$BUILD_DIR/$prog" ]]; then
    refused nosuchfeature "^lumen: this CPU lacks nosuchfeature" -- "$BUILD_DIR/$prog"
  else
    bad "$BUILD_DIR/$prog not built"
  fi
done

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
