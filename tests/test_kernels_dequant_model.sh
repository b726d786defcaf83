#!/usr/bin/env bash
# Dequantize real tensors of the default model (one per dtype present: q8_0 token_embd rows,
# q5_0, q4_K, q6_K, f32) and synthetic random blocks of the other dtypes (iq4_nl and iq4_xs
# too) with lumen, and compare with gguf-py's numpy dequantizer: must be bit-identical.
# LM_TEST_LABELS: model
set -euo pipefail
root="${LUMEN_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
model="${LUMEN_MODEL:-$root/models/gemma-3-270m-q4_k_m.gguf}"
py="${LUMEN_PYTHON:-$root/.venv/bin/python}"
dump="${LUMEN_DEQUANT_DUMP:-}"
if [[ -z "$dump" && -n "${LUMEN_BIN:-}" ]]; then dump="$(dirname "$LUMEN_BIN")/kernels_dequant_dump"; fi
[[ -n "$dump" ]] || dump="$root/build/kernels_dequant_dump"
if [[ ! -f "$model" ]]; then
    if [[ "${LUMEN_ALLOW_SKIP:-0}" == 1 ]]; then echo "SKIP: no model at $model"; exit 0; fi
    echo "FAIL: no model at $model"; exit 1
fi
[[ -x "$dump" ]] || { echo "FAIL: helper not built: $dump (cmake --build <dir> --target kernels_dequant_dump)"; exit 1; }
[[ -x "$py" ]] || { echo "FAIL: no python at $py"; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$py" - "$model" "$dump" "$tmp" <<'PY'
import subprocess, sys
import numpy as np
from gguf import GGUFReader, GGMLQuantizationType as T
from gguf.quants import dequantize
from gguf.constants import GGML_QUANT_SIZES

model, dump, tmp = sys.argv[1:4]
fails = passes = 0

def run(path, offset, qtype, ne0, rows, raw, label):
    global fails, passes
    out = f"{tmp}/out.f32"
    r = subprocess.run([dump, path, str(offset), str(int(qtype)), str(ne0), str(rows), out],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"FAIL {label}: helper exit {r.returncode}: {r.stderr.strip()}"); fails += 1; return
    got = np.fromfile(out, dtype=np.float32).reshape(rows, ne0)
    want = dequantize(raw, qtype).astype(np.float32, copy=False).reshape(rows, ne0)
    same = np.array_equal(got.view(np.uint32), want.view(np.uint32))
    if same:
        passes += 1
        print(f"ok   {label}: {rows} x {ne0} bit-identical")
    else:
        diff = np.abs(got.astype(np.float64) - want)
        n = int(np.count_nonzero(got.view(np.uint32) != want.view(np.uint32)))
        print(f"FAIL {label}: {n} values differ, max abs diff {diff.max():.3g}")
        fails += 1

reader = GGUFReader(model)
seen = set()
for t in reader.tensors:
    qt = t.tensor_type
    if qt in seen or qt not in (T.F32, T.Q8_0, T.Q5_0, T.Q4_K, T.Q6_K, T.F16, T.BF16, T.Q4_0, T.Q4_1,
                                T.Q5_1, T.Q2_K, T.Q3_K, T.Q5_K):
        continue
    seen.add(qt)
    ne0 = int(t.shape[0])
    n_rows = int(t.n_elements) // ne0
    rows = min(n_rows, 300)
    bs, ts = GGML_QUANT_SIZES[qt]
    row_bytes = ne0 // bs * ts
    raw = np.asarray(t.data).reshape(-1).view(np.uint8)[: rows * row_bytes]
    run(model, t.data_offset, qt, ne0, rows, raw, f"{t.name} ({qt.name})")

# synthetic blocks for dtypes the model lacks: random bytes, finite scales
rng = np.random.default_rng(1234)
for qt in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.F16, T.BF16,
           T.IQ4_NL, T.IQ4_XS):
    bs, ts = GGML_QUANT_SIZES[qt]
    rows, ne0 = 7, bs * (33 if bs == 32 else 5 if bs == 256 else 1000)
    nblk = rows * ne0 // bs
    raw = rng.integers(0, 256, size=(nblk, ts), dtype=np.uint8)
    def put_f16(col, lo, hi):
        raw[:, col:col + 2] = rng.uniform(lo, hi, nblk).astype(np.float16).view(np.uint8).reshape(nblk, 2)
    if qt in (T.Q4_0, T.Q5_0, T.Q8_0, T.IQ4_NL, T.IQ4_XS): put_f16(0, -0.01, 0.01)
    elif qt in (T.Q4_1, T.Q5_1): put_f16(0, 0, 0.01); put_f16(2, -0.1, 0.1)
    elif qt in (T.Q4_K, T.Q5_K): put_f16(0, 0, 0.01); put_f16(2, 0, 0.01)
    elif qt == T.Q2_K: put_f16(ts - 4, 0, 0.01); put_f16(ts - 2, 0, 0.01)
    elif qt in (T.Q3_K, T.Q6_K): put_f16(ts - 2, -0.01, 0.01)
    elif qt == T.F16: raw = rng.standard_normal(nblk).astype(np.float16).view(np.uint8).reshape(nblk, 2)
    elif qt == T.BF16:
        raw = (rng.standard_normal(nblk).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        raw = raw.view(np.uint8).reshape(nblk, 2)
    path = f"{tmp}/synthetic.bin"
    raw.tofile(path)
    run(path, 0, qt, ne0, rows, raw.reshape(rows, -1), f"synthetic {qt.name}")

print(f"{passes} passed, {fails} failed")
sys.exit(1 if fails else 0)
PY
