#!/usr/bin/env bash
# lumen perplexity against llama-perplexity's figures (tests/golden/perplexity.txt, from
# tools/gen_golden_ppl.py): the default model's PPL on a slice of Debian's GPL-3 text (-c 128)
# within PPL_TOL of llama.cpp's two batch paths; a base file written by lumen and read back
# gives KL 0 and top-1 100%; lumen reads a base file written by llama-perplexity
# (tests/data/kld_base_tiny_qwen3.bin, a random-weight model the test regenerates); malformed
# base files give one line and exit 1; bad flags one line and exit 2. With llama.cpp's tools
# present (.reference/bin, or $LUMEN_REFERENCE_BIN) and not in quick mode, also: llama-perplexity
# writes the default model's base file and lumen reads it, and the other way round.
# LM_TEST_LABELS: model;cli
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
BIN="${LUMEN_BIN:-$ROOT/build/lumen}"
MODEL="${LUMEN_MODEL:-$ROOT/models/gemma-3-270m-q4_k_m.gguf}"
GOLD="$ROOT/tests/golden/perplexity.txt"
TINY_BASE="$ROOT/tests/data/kld_base_tiny_qwen3.bin"
PY="${LUMEN_PYTHON:-$ROOT/.venv/bin/python}"
REF="${LUMEN_REFERENCE_BIN:-$ROOT/.reference/bin}/llama-perplexity"
QUICK=0; [[ -n "${LUMEN_TEST_QUICK:-}" && "${LUMEN_TEST_QUICK}" != 0 ]] && QUICK=1
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
gold() { sed -n "s/^$1 //p" "$GOLD"; }
# |a/b - 1| <= tol (fractions)
within() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a / b - 1; if (d < 0) d = -d; exit !(d <= t) }'; }
reldiff() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.3f%%", 100 * (a / b - 1) }'; }

# Tolerance on PPL against llama-perplexity. lumen and llama.cpp sum in different orders
# (matmul kernels, attention), and on this model a last-bit difference moves later logits
# by ~0.2 (tests/test_model_gemma3_golden.c), so per-token log-likelihoods differ, not the
# method. llama.cpp's own two batch paths differ by 0.47% on this slice (19.0483 vs 19.1386,
# KL 0.0062 between them); lumen measured: +0.67% vs its default path, +0.19% vs -b 1.
PPL_TOL=0.01
# A base file read back by the program that wrote it differs only by the file's 16-bit
# log-probability steps (16/65535 nats): |mean KL| ~1e-6 (limit 1e-5), 100% the same top token.

# ------------------------------------------------------------------ the default model's PPL
read -r lic off nbytes tsha <<<"$(gold gemma.text)"
head -c "$nbytes" "$lic" >"$TMP/slice.txt" 2>/dev/null
got_sha=$(sha256sum "$TMP/slice.txt" | cut -d' ' -f1)
if [[ "$got_sha" != "$tsha" ]]; then
  bad "$lic (first $nbytes bytes) has sha256 $got_sha, the golden file was made from $tsha"
fi
read -r _ msha <<<"$(gold gemma.model)"
ctx=$(gold gemma.ctx)
read -ra d_chunks <<<"$(gold gemma.default.chunks)"; read -ra b1_chunks <<<"$(gold gemma.b1.chunks)"
n=${#d_chunks[@]}
copt=()
if ((QUICK)); then n=3; copt=(--chunks 3); fi
"$BIN" perplexity -m "$MODEL" -f "$TMP/slice.txt" -c "$ctx" -t 2 "${copt[@]}" >"$TMP/ppl.out" 2>"$TMP/ppl.err"
rc=$?
((rc == 0)) && ok || bad "perplexity exit $rc: $(cat "$TMP/ppl.err")"
mapfile -t mine < <(grep -o '\[[0-9]*\][0-9.]*,' "$TMP/ppl.out" | sed 's/.*\]//; s/,//')
if ((${#mine[@]} == n)); then ok; else bad "$n chunk values expected, got ${#mine[@]}: $(cat "$TMP/ppl.out")"; fi
final=$(sed -n 's/^Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\)$/\1/p' "$TMP/ppl.out")
[[ -n "$final" ]] && ok || bad "no 'Final estimate: PPL = X +/- Y' line: $(cat "$TMP/ppl.out")"
last=${mine[n - 1]:-0}
[[ "$final" == "$last" ]] && ok || bad "final $final != last running value $last"
want_d=${d_chunks[n - 1]}; want_b=${b1_chunks[n - 1]}
echo "PPL after $n chunks (-c $ctx): lumen $last, llama.cpp default $want_d ($(reldiff "$last" "$want_d")), -b 1 $want_b ($(reldiff "$last" "$want_b")); llama.cpp's own spread $(reldiff "$want_b" "$want_d")"
# between llama.cpp's two values, or within PPL_TOL of the nearer one; over all 13 chunks also
# within PPL_TOL of each (after 3 chunks, 189 scored tokens, llama.cpp's own spread is 1.5%,
# and the sanitizer build's -O1 code rounds differently again)
awk -v x="$last" -v a="$want_d" -v b="$want_b" -v t="$PPL_TOL" \
  'BEGIN { lo = a < b ? a : b; hi = a < b ? b : a; exit !(x >= lo * (1 - t) && x <= hi * (1 + t)) }' &&
  ok || bad "PPL $last: not within $PPL_TOL of llama-perplexity's $want_d .. $want_b"
if ((!QUICK)); then
  within "$last" "$want_d" "$PPL_TOL" && ok || bad "PPL $last vs llama-perplexity $want_d: beyond $PPL_TOL"
  within "$last" "$want_b" "$PPL_TOL" && ok || bad "PPL $last vs llama-perplexity -b 1 $want_b: beyond $PPL_TOL"
fi
# -b changes nothing (batch invariance): a smaller batch and two chunks per call, same figures
for b in 48 256; do
  "$BIN" perplexity -m "$MODEL" -f "$TMP/slice.txt" -c "$ctx" -b $b -t 2 --chunks 2 >"$TMP/b.out" 2>/dev/null
  want=$(grep -o '^\[1\][0-9.]*,\[2\][0-9.]*,' "$TMP/ppl.out")
  got=$(grep -o '^\[1\][0-9.]*,\[2\][0-9.]*,' "$TMP/b.out")
  [[ -n "$got" && "$got" == "$want" ]] && ok || bad "-b $b: '$got' vs '$want'"
done

# ------------------------------------------------------------------ write, read back
"$BIN" perplexity -m "$MODEL" -f "$TMP/slice.txt" -c 128 --chunks 2 -t 2 --kl-divergence-base "$TMP/own.bin" \
  >"$TMP/w.out" 2>"$TMP/w.err" && ok || bad "write base: $(cat "$TMP/w.err")"
want_size=$((20 + 2 * 128 * 4 + 2 * 63 * (262144 + 4) * 2))
size=$(stat -c %s "$TMP/own.bin" 2>/dev/null || echo 0)
((size == want_size)) && ok || bad "base file size $size, want $want_size"
"$BIN" perplexity -m "$MODEL" -f "$TMP/slice.txt" -c 128 --chunks 2 -t 2 >"$TMP/p.out" 2>/dev/null
w_final=$(sed -n 's/^Final estimate: PPL = \([0-9.]*\) .*/\1/p' "$TMP/w.out")
p_final=$(sed -n 's/^Final estimate: PPL = \([0-9.]*\) .*/\1/p' "$TMP/p.out")
within "$w_final" "$p_final" 0.0001 && ok || bad "PPL while writing $w_final vs plain $p_final"
"$BIN" perplexity -m "$MODEL" --kl-divergence-base "$TMP/own.bin" --kl-divergence -t 2 >"$TMP/k.out" 2>"$TMP/k.err"
rc=$?
((rc == 0)) && ok || bad "read back: exit $rc $(cat "$TMP/k.err")"
kmean=$(sed -n 's/^Mean    KLD: *\([-0-9.]*\).*/\1/p' "$TMP/k.out")
kmax=$(sed -n 's/^Maximum KLD: *\([-0-9.]*\).*/\1/p' "$TMP/k.out")
same=$(sed -n 's/^Same top p: *\([0-9.]*\).*/\1/p' "$TMP/k.out")
pq=$(sed -n 's/^Mean PPL(Q) *: *\([0-9.]*\).*/\1/p' "$TMP/k.out")
echo "read back: mean KLD $kmean, max $kmax, same top $same%, PPL $pq (written with $w_final)"
awk -v k="$kmean" -v m="$kmax" 'BEGIN { exit !(k + 0 <= 1e-5 && k + 0 >= -1e-5 && m + 0 < 1e-4) }' && ok ||
  bad "read back: mean KLD $kmean, max $kmax"
[[ "$same" == "100.000" ]] && ok || bad "read back: same top $same%"
within "$pq" "$w_final" 0.00001 && ok || bad "read back: PPL(Q) $pq vs $w_final"
[[ $(grep -c '^ *[0-9]* *[0-9.]* +/-' "$TMP/k.out") == 2 ]] && ok || bad "2 chunk lines expected: $(cat "$TMP/k.out")"

# ------------------------------------------------------------------ a base file from llama-perplexity
read -r tsha_model <<<"$(gold tiny.model)"
read -r _ _ tbytes ttsha <<<"$(gold tiny.text)"
read -r bsha bsize <<<"$(gold tiny.base)"
tiny_ok=0
if "$PY" "$ROOT/tools/make_arch_gguf.py" --family qwen3 --layers 1 --vocab 512 --dtype f16 "$TMP/tiny.gguf" >/dev/null 2>"$TMP/gen.err"; then
  tiny_ok=1
  [[ $(sha256sum "$TMP/tiny.gguf" | cut -d' ' -f1) == "$tsha_model" ]] && ok ||
    bad "tiny model sha256 differs from the golden file's (generator or numpy/gguf changed: tools/gen_golden_ppl.py)"
elif [[ "${LUMEN_ALLOW_SKIP:-}" == 1 ]]; then
  echo "SKIP: cannot generate the tiny model (needs numpy + gguf: bash scripts/setup.sh)"
else
  bad "cannot generate the tiny model: $(tail -1 "$TMP/gen.err") (LUMEN_ALLOW_SKIP=1 to skip)"
fi
[[ $(sha256sum "$TINY_BASE" | cut -d' ' -f1) == "$bsha" ]] && ok || bad "$TINY_BASE differs from the golden sha256"
if ((tiny_ok)); then
  read -r t_final _ <<<"$(gold tiny.final)"
  head -c "$tbytes" "$lic" >"$TMP/tiny.txt"
  "$BIN" perplexity -m "$TMP/tiny.gguf" -f "$TMP/tiny.txt" -c "$(gold tiny.ctx)" --chunks 3 -t 2 >"$TMP/t.out" 2>/dev/null
  t_mine=$(sed -n 's/^Final estimate: PPL = \([0-9.]*\) .*/\1/p' "$TMP/t.out")
  within "$t_mine" "$t_final" 0.005 && ok || bad "tiny PPL $t_mine vs llama-perplexity $t_final"
  "$BIN" perplexity -m "$TMP/tiny.gguf" --kl-divergence-base "$TINY_BASE" --kl-divergence -t 2 >"$TMP/tk.out" 2>"$TMP/tk.err" &&
    ok || bad "reading llama-perplexity's base file: $(cat "$TMP/tk.err")"
  kmean=$(sed -n 's/^Mean    KLD: *\([-0-9.]*\).*/\1/p' "$TMP/tk.out")
  same=$(sed -n 's/^Same top p: *\([0-9.]*\).*/\1/p' "$TMP/tk.out")
  pb=$(sed -n 's/^Mean PPL(base) *: *\([0-9.]*\).*/\1/p' "$TMP/tk.out")
  pq=$(sed -n 's/^Mean PPL(Q) *: *\([0-9.]*\).*/\1/p' "$TMP/tk.out")
  echo "llama-perplexity's tiny base: PPL(base) $pb (llama printed $t_final), PPL(Q) $pq (plain run $t_mine), mean KLD $kmean, same top $same%"
  # PPL(base) comes from the file's 16-bit log-probabilities: within their step of llama's value
  within "$pb" "$t_final" 0.0005 && ok || bad "PPL(base) $pb vs llama's $t_final"
  within "$pq" "$t_mine" 0.0001 && ok || bad "PPL(Q) $pq vs the plain run's $t_mine"
  awk -v k="$kmean" 'BEGIN { exit !(k + 0 < 1e-4 && k + 0 > -1e-4) }' && ok || bad "tiny mean KLD $kmean"
  [[ "$same" == "100.000" ]] && ok || bad "tiny same top $same%"
fi

# ------------------------------------------------------------------ malformed base files: one line, exit 1
expect1() {
  local what=$1 needle=$2; shift 2
  "$@" >/dev/null 2>"$TMP/err"
  local rc=$?
  if ((rc == 1)) && (($(wc -l <"$TMP/err") == 1)) && grep -q -- "$needle" "$TMP/err"; then ok
  else bad "$what: rc $rc, stderr: $(cat "$TMP/err") (want '$needle')"; fi
}
head -c $((bsize - 100)) "$TINY_BASE" >"$TMP/trunc.bin"
cp "$TINY_BASE" "$TMP/trail.bin"; printf 'xx' >>"$TMP/trail.bin"
expect1 truncated "truncated: 46744 bytes" "$BIN" perplexity -m "$MODEL" --kl-divergence-base "$TMP/trunc.bin" --kl-divergence
expect1 trailing "trailing data" "$BIN" perplexity -m "$MODEL" --kl-divergence-base "$TMP/trail.bin" --kl-divergence
expect1 "wrong magic" "starts with 'GGUF" "$BIN" perplexity -m "$MODEL" --kl-divergence-base "$MODEL" --kl-divergence
expect1 "vocab mismatch" "n_vocab 512, but the model" "$BIN" perplexity -m "$MODEL" --kl-divergence-base "$TINY_BASE" --kl-divergence
printf '_logits_\x80\x00\x00\x00\x00\x00\x04\x00\x01\x00\x00\x00' >"$TMP/hdr.bin"
expect1 "header only" "truncated: 20 bytes" "$BIN" perplexity -m "$MODEL" --kl-divergence-base "$TMP/hdr.bin" --kl-divergence

# ------------------------------------------------------------------ bad flags: one line, exit 2
expect2() {
  "$@" >/dev/null 2>"$TMP/err"
  local rc=$?
  if ((rc == 2)) && (($(wc -l <"$TMP/err") == 1)); then ok; else bad "$*: rc $rc, stderr: $(cat "$TMP/err")"; fi
}
expect2 "$BIN" perplexity -m "$MODEL"
expect2 "$BIN" perplexity -m "$MODEL" -f "$TMP/slice.txt" --bogus
expect2 "$BIN" perplexity -m "$MODEL" -f "$TMP/nope.txt"
expect2 "$BIN" perplexity -m "$MODEL" -f "$TMP/slice.txt" -c 2
expect2 "$BIN" perplexity -m "$MODEL" -f "$TMP/slice.txt" -c 128 -b 200
expect2 "$BIN" perplexity -m "$MODEL" -f "$TMP/slice.txt" -c 4096
expect2 "$BIN" perplexity -m "$MODEL" --kl-divergence
expect2 "$BIN" perplexity -m "$MODEL" --kl-divergence-base "$TMP/nope.bin" --kl-divergence
expect2 "$BIN" perplexity -m "$MODEL" -f "$TMP/slice.txt" --kl-divergence-base "$TINY_BASE" --kl-divergence
expect2 "$BIN" perplexity -m "$MODEL" --kl-divergence-base "$TMP/own.bin" --kl-divergence -c 64
expect2 "$BIN" perplexity -m "$TMP/nope.gguf" -f "$TMP/slice.txt"

# ------------------------------------------------------------------ with llama.cpp's tools
if ((QUICK)); then
  echo "SKIP: llama-perplexity cross-reads (quick mode)"
elif [[ ! -x "$REF" ]]; then
  echo "SKIP: llama-perplexity cross-reads ($REF not built: bash scripts/setup.sh --reference)"
else
  "$REF" -m "$MODEL" -f "$TMP/slice.txt" -c 128 --chunks 2 -t 2 --kl-divergence-base "$TMP/llama.bin" \
    >/dev/null 2>"$TMP/r.err" && ok || bad "llama-perplexity writing: $(tail -3 "$TMP/r.err")"
  "$BIN" perplexity -m "$MODEL" --kl-divergence-base "$TMP/llama.bin" --kl-divergence -t 2 >"$TMP/lk.out" 2>"$TMP/lk.err" &&
    ok || bad "lumen reading llama's file: $(cat "$TMP/lk.err")"
  kmean=$(sed -n 's/^Mean    KLD: *\([-0-9.]*\).*/\1/p' "$TMP/lk.out")
  same=$(sed -n 's/^Same top p: *\([0-9.]*\).*/\1/p' "$TMP/lk.out")
  "$REF" -m "$MODEL" -c 128 -t 2 --kl-divergence-base "$TMP/own.bin" --kl-divergence >"$TMP/rk.out" 2>"$TMP/rk.err" &&
    ok || bad "llama-perplexity reading lumen's file: $(tail -3 "$TMP/rk.err")"
  rmean=$(sed -n 's/^Mean    KLD: *\([-0-9.]*\).*/\1/p' "$TMP/rk.out")
  echo "cross-reads (-c 128, 2 chunks): lumen vs llama's file: mean KLD $kmean, same top $same%; llama vs lumen's file: mean KLD $rmean"
  # both engines' 8-bit activation rounding puts their KL near 6e-3 (llama.cpp's own two batch
  # paths: 0.0062 on the full slice; llama-perplexity prints its statistics from 100 rows on)
  awk -v a="$kmean" -v b="$rmean" 'BEGIN { exit !(a > 0 && a < 0.02 && b > 0 && b < 0.02) }' && ok ||
    bad "cross-read KLD $kmean / $rmean"
  awk -v s="$same" 'BEGIN { exit !(s >= 85) }' && ok || bad "cross-read same top $same%"
fi

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
