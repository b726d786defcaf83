#!/usr/bin/env bash
# The encoders (docs/embeddings.md, "Encoders") on reduced copies that tools/gen_golden_embed.py
# --bert-only writes with their goldens: bge-small (bert: width 384, 12 heads, 2 layers, the
# real WordPiece vocabulary; embed_bert_mean.txt), nomic-embed-text-v1.5 (nomic-bert: width 768,
# RoPE, SwiGLU; embed_nomic_mean.txt) and a bge-reranker head (embed_bert_rank.txt).
# `lumen embed` against llama.cpp's vectors and the float64 reference, mean (the file's) and cls
# pooling (cosine >= 0.9999 each), the same token counts; `lumen rerank` as llama.cpp; batch
# invariance (each input alone on 1 thread = all together on 2; -b 8, which the engine widens
# to the context for an encoder); an input beyond the 512 positions, generation, rank without
# a head and malformed bert files (no position_embd, a wrong shape): one line each.
# LM_TEST_LABELS: model;cli
set -u
ROOT="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
BIN="${LUMEN_BIN:-$ROOT/build/lumen}"
PY="${LUMEN_PYTHON:-$ROOT/.venv/bin/python}"
DIR="${LUMEN_EMBED_DIR:-/tmp/lumen-embed-$(id -u)}"
G="$ROOT/tests/golden/embed_bert_mean.txt"
M="$DIR/embed_bert_mean.gguf"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

RG="$ROOT/tests/golden/embed_bert_rank.txt"
RM="$DIR/embed_bert_rank.gguf"
NG="$ROOT/tests/golden/embed_nomic_mean.txt"
NM="$DIR/embed_nomic_mean.gguf"
same() { [[ "$(sha256sum "$1" 2>/dev/null | cut -d' ' -f1)" == "$(sed -n 's/^sha256 //p' "$2")" ]]; }
if ! { same "$M" "$G" && same "$RM" "$RG" && same "$NM" "$NG"; } &&
   ! "$PY" "$ROOT/tools/gen_golden_embed.py" --dir "$DIR" --bert-only --models-only >"$TMP/gen.log" 2>&1; then
    echo "SKIP: cannot write the bert models (needs numpy + gguf): $(tail -1 "$TMP/gen.log")"
    exit 0
fi
same "$M" "$G" && same "$RM" "$RG" && same "$NM" "$NG" || { echo "FAIL: a regenerated bert model's sha256 is not its golden's"; exit 1; }
mapfile -t inputs < <(sed -n 's/^input //p' "$G")

# model:pooling (the nomic copy has the same inputs)
for mp in bert_mean:mean bert_mean:cls nomic_mean:mean; do
    name=${mp%%:*} pool=${mp#*:}
    "$BIN" embed -m "$DIR/embed_$name.gguf" -t 2 --pooling "$pool" "${inputs[@]}" >"$TMP/$mp.jsonl" 2>"$TMP/err" ||
        { bad "$mp: lumen embed failed: $(cat "$TMP/err")"; continue; }
    if "$PY" - "$ROOT/tests/golden/embed_$name.txt" "$TMP/$mp.jsonl" "$pool" <<'PYEOF'
import json, sys
import numpy as np
rows = []
for line in open(sys.argv[1]):
    k, _, v = line.rstrip("\n").partition(" ")
    if k == "input":
        rows.append({})
    elif rows:
        rows[-1][k] = v
got = [json.loads(l) for l in open(sys.argv[2])]
p, bad = sys.argv[3], 0
assert len(got) == len(rows), "%d vectors for %d inputs" % (len(got), len(rows))
for i, (r, j) in enumerate(zip(rows, got)):
    e = np.array(j["embedding"], dtype=np.float64)
    if j["n_tokens"] != int(r["n_tokens"]):
        print("input %d: %d tokens, llama.cpp %s" % (i, j["n_tokens"], r["n_tokens"])); bad += 1
    for k in ("llama_" + p, "ref_" + p):
        x = np.array([float(v) for v in r[k].split()])
        c = e @ x / np.linalg.norm(e) / np.linalg.norm(x)
        if not c >= 0.9999:
            print("input %d: cosine to %s %.9f < 0.9999" % (i, k, c)); bad += 1
sys.exit(1 if bad else 0)
PYEOF
    then ok; else bad "$mp: vectors differ from llama.cpp's or the reference's"; fi
done

# batch invariance: each input alone on one thread gives the bits it gets among the others
for name in bert_mean nomic_mean; do
    for i in "${!inputs[@]}"; do
        "$BIN" embed -m "$DIR/embed_$name.gguf" -t 1 "${inputs[$i]}" | sed "s/^{\"index\": 0/{\"index\": $i/"
    done >"$TMP/alone.jsonl"
    cmp -s "$TMP/$name:mean.jsonl" "$TMP/alone.jsonl" && ok || bad "$name: an input alone differs from the same input beside others"
done
# an encoder's step holds its context whatever -b says (its inputs run whole): the same bits
"$BIN" embed -m "$M" -t 2 -b 8 "${inputs[@]}" >"$TMP/b8.jsonl" 2>"$TMP/err" || bad "-b 8: $(cat "$TMP/err")"
cmp -s "$TMP/bert_mean:mean.jsonl" "$TMP/b8.jsonl" && ok || bad "-b 8 changes the vectors"

# the cross-encoder (bge-reranker's head: [CLS] row -> cls -> tanh -> cls.output; the prompt
# [CLS] query [SEP] document): scores within 2e-3 of llama.cpp's and the reference's (random
# f16 weights: llama.cpp's own distance to the reference is up to 6e-4), in their order
mapfile -t docs < <(sed -n 's/^document //p' "$RG")
if "$BIN" rerank -m "$RM" -t 2 -q "$(sed -n 's/^query //p' "$RG")" "${docs[@]}" >"$TMP/rank.jsonl" 2>"$TMP/err" &&
   "$PY" - "$RG" "$TMP/rank.jsonl" <<'PYEOF'
import json, sys
g = {"llama": [], "ref": []}
for line in open(sys.argv[1]):
    k, _, v = line.rstrip("\n").partition(" ")
    if k in g:
        g[k].append(float(v))
got = {j["index"]: j["relevance_score"] for j in map(json.loads, open(sys.argv[2]))}
order = [j["index"] for j in map(json.loads, open(sys.argv[2]))]
bad = 0
for k, v in g.items():
    for i, s in enumerate(v):
        if not abs(got[i] - s) <= 2e-3:
            print("document %d: %.6f, %s %.6f" % (i, got[i], k, s)); bad += 1
    if order != sorted(range(len(v)), key=lambda i: -v[i]):
        print("order %s, %s's %s" % (order, k, sorted(range(len(v)), key=lambda i: -v[i]))); bad += 1
sys.exit(1 if bad else 0)
PYEOF
then ok; else bad "rerank: $(cat "$TMP/err")"; fi

# refusals: one line each, naming the limit or the tensor
refused() { # name, expected text, command...
    local name="$1" text="$2"; shift 2
    if "$@" >"$TMP/out" 2>"$TMP/err"; then bad "$name: accepted"; return; fi
    [[ $(wc -l <"$TMP/err") -le 1 ]] && grep -q -- "$text" "$TMP/err" && ok || bad "$name: $(cat "$TMP/err")"
}
printf 'word %.0s' $(seq 600) >"$TMP/long.txt"
refused "an input beyond the positions" "exceeds the context of 512 tokens" "$BIN" embed -m "$M" -f "$TMP/long.txt"
refused "generation" "embedding model without an LM head" "$BIN" run -m "$M" -p hello -n 2
refused "rank pooling without a head" "needs a classification head" "$BIN" rerank -m "$M" -q a b
refused "no position_embd" "position_embd.weight" "$BIN" embed -m "$ROOT/tests/data/bert_tiny_no_pos.gguf" x
refused "position_embd's shape" "'position_embd.weight' has shape" "$BIN" embed -m "$ROOT/tests/data/bert_tiny_bad_pos.gguf" x

echo "test_model_bert: $pass passed, $fail failed"
[[ $fail == 0 ]]
