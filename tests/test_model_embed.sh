#!/usr/bin/env bash
# Embeddings (docs/embeddings.md) on reduced Qwen3 copies as embedding models (pooling last
# with EOS appended, as Qwen3-Embedding; and mean; tools/gen_golden_embed.py writes them and
# the goldens): `lumen embed` against llama.cpp's vectors and the float64 reference (cosine >=
# 0.9999 each, and no worse than llama.cpp's own to the reference by more than 1e-6), the same
# token counts; batch invariance: each input alone, all together, and in 8-token steps (mean
# pooling over chunks) print the same bits; --dimensions N is the first N values renormalised;
# a chat model without --pooling, bad flags: one line each.
# LM_TEST_LABELS: model;cli
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
BIN="${LUMEN_BIN:-$ROOT/build/lumen}"
MODEL="${LUMEN_MODEL:-$ROOT/models/gemma-3-270m-q4_k_m.gguf}"
PY="${LUMEN_PYTHON:-$ROOT/.venv/bin/python}"
DIR="${LUMEN_EMBED_DIR:-/tmp/lumen-embed-$(id -u)}"
# the sanitizer pass (LUMEN_TEST_QUICK=1) leaves out each input alone and the chat model
QUICK=0; [[ -n "${LUMEN_TEST_QUICK:-}" && "${LUMEN_TEST_QUICK}" != 0 ]] && QUICK=1
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

# the models (deterministic; regenerated when a file's sha256 differs from its golden's)
need=0
for name in qwen3_last qwen3_mean qwen3_rank; do
    want=$(sed -n 's/^sha256 //p' "$ROOT/tests/golden/embed_$name.txt")
    have=$(sha256sum "$DIR/embed_$name.gguf" 2>/dev/null | cut -d' ' -f1)
    [[ "$want" == "$have" ]] || need=1
done
if [[ $need == 1 ]] && ! "$PY" "$ROOT/tools/gen_golden_embed.py" --dir "$DIR" --models-only >"$TMP/gen.log" 2>&1; then
    echo "SKIP: cannot write the embedding models (needs numpy + gguf): $(tail -1 "$TMP/gen.log")"
    exit 0
fi

for name in qwen3_last qwen3_mean; do
    G="$ROOT/tests/golden/embed_$name.txt"
    M="$DIR/embed_$name.gguf"
    want=$(sed -n 's/^sha256 //p' "$G")
    [[ "$(sha256sum "$M" | cut -d' ' -f1)" == "$want" ]] || { bad "$name: the regenerated model's sha256 is not the golden's"; continue; }
    mapfile -t inputs < <(sed -n 's/^input //p' "$G")
    "$BIN" embed -m "$M" -t 2 "${inputs[@]}" >"$TMP/all.jsonl" 2>"$TMP/err" || { bad "$name: lumen embed failed: $(cat "$TMP/err")"; continue; }
    "$BIN" embed -m "$M" -t 1 -b 8 "${inputs[@]}" >"$TMP/chunked.jsonl" 2>"$TMP/err" || bad "$name: -b 8: $(cat "$TMP/err")"
    cmp -s "$TMP/all.jsonl" "$TMP/chunked.jsonl" && ok || bad "$name: 8-token steps on 1 thread change the vectors"
    if [[ $QUICK == 0 ]]; then
        for i in "${!inputs[@]}"; do
            "$BIN" embed -m "$M" -t 2 "${inputs[$i]}" | sed "s/^{\"index\": 0/{\"index\": $i/" >>"$TMP/alone.jsonl"
        done
        cmp -s "$TMP/all.jsonl" "$TMP/alone.jsonl" && ok || bad "$name: an input alone differs from the same input beside others"
    fi
    "$BIN" embed -m "$M" --dimensions 256 "${inputs[@]}" >"$TMP/d256.jsonl" 2>"$TMP/err" || bad "$name: --dimensions: $(cat "$TMP/err")"
    if "$PY" - "$G" "$TMP/all.jsonl" "$TMP/d256.jsonl" <<'PYEOF'
import json, sys
import numpy as np
g = {}
cur = None
rows = []
for line in open(sys.argv[1]):
    k, _, v = line.rstrip("\n").partition(" ")
    if k == "input":
        cur = {}
        rows.append(cur)
    elif k in ("llama", "ref"):
        cur[k] = np.array([float(x) for x in v.split()])
    elif k in ("n_tokens", "cos_llama_ref"):
        cur[k] = float(v)
got = [json.loads(l) for l in open(sys.argv[2])]
d256 = [json.loads(l) for l in open(sys.argv[3])]
cos = lambda a, b: float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
bad = 0
for i, (r, o, d) in enumerate(zip(rows, got, d256)):
    v = np.array(o["embedding"], dtype=np.float64)
    c_ref, c_ll = cos(v, r["ref"]), cos(v, r["llama"])
    print("input %d: %d tokens, cos(lumen, ref) %.9f, cos(lumen, llama.cpp) %.9f, llama.cpp's to ref %.9f"
          % (i, o["n_tokens"], c_ref, c_ll, r["cos_llama_ref"]))
    if o["n_tokens"] != r["n_tokens"] or len(v) != len(r["ref"]):
        print("FAIL: input %d: %d tokens / %d values, llama.cpp %d / %d" % (i, o["n_tokens"], len(v), r["n_tokens"], len(r["ref"])))
        bad += 1
    if not (c_ref >= 0.9999 and c_ll >= 0.9999 and c_ref >= r["cos_llama_ref"] - 1e-6):
        print("FAIL: input %d: cosine below 0.9999, or worse than llama.cpp's to the reference" % i)
        bad += 1
    if abs(np.linalg.norm(v) - 1) > 1e-5:
        print("FAIL: input %d: |v| = %.7f, not L2-normalised" % (i, np.linalg.norm(v)))
        bad += 1
    t = v[:256] / np.linalg.norm(v[:256])
    dv = np.array(d["embedding"])
    if len(dv) != 256 or np.abs(dv - t).max() > 1e-6:
        print("FAIL: input %d: --dimensions 256 is not the first 256 values renormalised" % i)
        bad += 1
sys.exit(1 if bad or len(got) != len(rows) else 0)
PYEOF
    then ok; else bad "$name: vectors against the goldens"; fi
    rm -f "$TMP/alone.jsonl"
done

# the reranker copy (pooling rank, Qwen3-Reranker's shape): lumen rerank's scores against
# llama.cpp's and the reference's (|d| <= 1e-4; measured <= 4.1e-5 from the reference, llama.cpp <= 3.2e-5), best first, --top-n
G="$ROOT/tests/golden/embed_qwen3_rank.txt"
M="$DIR/embed_qwen3_rank.gguf"
if [[ "$(sha256sum "$M" | cut -d' ' -f1)" != "$(sed -n 's/^sha256 //p' "$G")" ]]; then
    bad "qwen3_rank: the regenerated model's sha256 is not the golden's"
else
    mapfile -t docs < <(sed -n 's/^document //p' "$G")
    "$BIN" rerank -m "$M" -t 2 -q "$(sed -n 's/^query //p' "$G")" "${docs[@]}" >"$TMP/rank.jsonl" 2>"$TMP/err" || bad "lumen rerank: $(cat "$TMP/err")"
    "$BIN" rerank -m "$M" -t 1 -b 8 --top-n 2 -q "$(sed -n 's/^query //p' "$G")" "${docs[@]}" >"$TMP/rank2.jsonl" 2>&1
    [[ "$(head -2 "$TMP/rank.jsonl")" == "$(cat "$TMP/rank2.jsonl")" ]] && ok || bad "rerank --top-n 2 in 8-token steps: $(cat "$TMP/rank2.jsonl")"
    if "$PY" - "$G" "$TMP/rank.jsonl" <<'PYEOF'
import json, sys
ref, ll = [], []
for line in open(sys.argv[1]):
    k, _, v = line.rstrip("\n").partition(" ")
    if k == "ref": ref.append(float(v.split()[0]))
    if k == "llama": ll.append(float(v.split()[0]))
got = [json.loads(l) for l in open(sys.argv[2])]
order = sorted(range(len(ref)), key=lambda i: -ref[i])
bad = [g for g in got if abs(g["relevance_score"] - ref[g["index"]]) > 1e-4 or abs(g["relevance_score"] - ll[g["index"]]) > 1e-4]
for g in got:
    print("document %d: lumen %.7f, llama.cpp %.7f, reference %.7f" % (g["index"], g["relevance_score"], ll[g["index"]], ref[g["index"]]))
sys.exit(1 if bad or [g["index"] for g in got] != order else 0)
PYEOF
    then ok; else bad "rerank scores against the goldens"; fi
    out=$("$BIN" rerank -m "$DIR/embed_qwen3_mean.gguf" -q x y 2>&1); rc=$?
    [[ $rc == 1 && "$out" == *"classification head"* ]] && ok || bad "rerank on an embedding model: rc $rc: $out"
fi

# a chat model (no pooling_type): refused without --pooling, mean-pooled with it
if [[ -f "$MODEL" && $QUICK == 0 ]]; then
    out=$("$BIN" embed -m "$MODEL" "hello" 2>&1); rc=$?
    [[ $rc == 1 && "$out" == *"not an embedding model"* && $(wc -l <<<"$out") == 1 ]] && ok || bad "chat model without --pooling: rc $rc: $out"
    n=$("$BIN" embed -m "$MODEL" --pooling mean "hello" "world" | wc -l)
    [[ $n == 2 ]] && ok || bad "chat model with --pooling mean: $n lines"
fi
M="$DIR/embed_qwen3_mean.gguf"
for args in "--pooling rank x" "--dimensions 0 x" "--bogus x" ""; do
    out=$("$BIN" embed -m "$M" $args 2>&1); rc=$?
    [[ $rc == 2 && $(wc -l <<<"$out") == 1 ]] && ok || bad "embed $args: rc $rc (want 2): $out"
done
out=$("$BIN" embed -m "$M" --dimensions 4096 x 2>&1); rc=$?
[[ $rc == 1 && "$out" == *"dimensions 4096 out of range"* ]] && ok || bad "--dimensions 4096: rc $rc: $out"
out=$("$BIN" embed -m "$M" -c 4 "w1 w2 w3 w4 w5" 2>&1); rc=$?
[[ $rc == 1 && "$out" == *"exceeds the context"* ]] && ok || bad "input beyond -c 4: rc $rc: $out"

echo "embed: $pass passed, $fail failed"
[[ $fail == 0 ]]
