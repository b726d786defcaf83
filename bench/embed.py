#!/usr/bin/env python3
"""Embedding throughput, lumen against llama-server on the same file and threads (docs/embeddings.md;
issue 38's benchmark): for each input length, one POST /v1/embeddings of N inputs of exactly that
many token ids (the same random ids for both servers), rounds alternating between the servers;
inputs/s and tokens/s per round, the median and spread, and the ratio lumen / llama-server.
llama-server runs with --embeddings, a unified KV cache and a physical batch that holds the whole
request (-b / -ub = N x length, so it is not starved of batch), its pooling the file's.

usage: .venv/bin/python bench/embed.py -m MODEL.gguf [--inputs 32] [--lengths 64,256,512]
           [-t 1,2] [--rounds 5] [--json OUT.json]
smoke: .venv/bin/python bench/embed.py -m /tmp/lumen-embed-$UID/embed_qwen3_mean.gguf
           --inputs 4 --lengths 16 -t 1 --rounds 1
Not measured yet (the issue's list): rerank of 20 documents; embeddings mixed into an 8-stream
chat load (the chat streams' p99 inter-token latency with and without them).
"""
import argparse
import json
import random
import statistics
import sys
import time
import urllib.request
from pathlib import Path

import gguf

sys.path.insert(0, str(Path(__file__).resolve().parent))
import servers  # noqa: E402

ROOT = servers.ROOT


def n_vocab(model):
    r = gguf.GGUFReader(str(model))
    return len(r.fields["tokenizer.ggml.tokens"].data)


def post(url, body, timeout=600):
    req = urllib.request.Request(url + "/v1/embeddings", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def one_round(url, inputs):
    t0 = time.perf_counter()
    out = post(url, {"input": inputs, "encoding_format": "float"})
    dt = time.perf_counter() - t0
    if len(out.get("data", [])) != len(inputs):
        raise RuntimeError("%s answered %d vectors for %d inputs" % (url, len(out.get("data", [])), len(inputs)))
    n_tok = sum(map(len, inputs))
    return {"s": dt, "inputs_per_s": len(inputs) / dt, "tokens_per_s": n_tok / dt}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--inputs", type=int, default=32)
    ap.add_argument("--lengths", default="64,256,512")
    ap.add_argument("-t", "--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--lumen", default=str(ROOT / "build" / "lumen"))
    ap.add_argument("--llama-server", default=str(ROOT / ".reference" / "bin" / "llama-server"))
    ap.add_argument("--lumen-args", default="", help="more `lumen serve` flags (e.g. its step budget)")
    ap.add_argument("--json", help="write the rounds and summaries here")
    a = ap.parse_args()
    lengths = [int(x) for x in a.lengths.split(",")]
    rng = random.Random(38)
    nv = n_vocab(a.model)
    ctx = max(lengths) + 16
    results = []
    for th in [int(x) for x in a.threads.split(",")]:
        batch = a.inputs * max(lengths)
        runs = {
            # lumen's -c is its shared KV pool: room for every input at once
            "lumen": servers.Server("lumen", servers.lumen_serve_argv(
                a.lumen, a.model, threads=th, parallel=a.inputs, ctx=ctx * a.inputs,
                extra=a.lumen_args.split())),
            "llama-server": servers.Server("llama-server", servers.llama_server_argv(
                a.llama_server, a.model, threads=th, parallel=a.inputs, ctx=ctx * a.inputs,
                extra=["--embeddings", "-b", str(batch), "-ub", str(batch)])),
        }
        try:
            for s in runs.values():
                s.start()
            for L in lengths:
                inputs = [[rng.randrange(16, nv) for _ in range(L)] for _ in range(a.inputs)]
                for s in runs.values():  # warm-up
                    one_round(s.url, inputs[:2])
                rounds = {k: [] for k in runs}
                for r in range(a.rounds):  # alternating, the first server changing each round
                    order = list(runs) if r % 2 == 0 else list(runs)[::-1]
                    for k in order:
                        rounds[k].append(one_round(runs[k].url, inputs))
                row = {"threads": th, "length": L, "inputs": a.inputs}
                for k, rs in rounds.items():
                    v = [x["tokens_per_s"] for x in rs]
                    row[k] = {"tokens_per_s_median": statistics.median(v), "tokens_per_s_min": min(v),
                              "tokens_per_s_max": max(v),
                              "inputs_per_s_median": statistics.median(x["inputs_per_s"] for x in rs),
                              "rounds": rs}
                row["ratio"] = row["lumen"]["tokens_per_s_median"] / row["llama-server"]["tokens_per_s_median"]
                results.append(row)
                print("t=%d len=%4d x%d: lumen %8.1f tok/s (%6.2f inputs/s)  llama-server %8.1f tok/s "
                      "(%6.2f inputs/s)  ratio %.2f" % (
                          th, L, a.inputs, row["lumen"]["tokens_per_s_median"], row["lumen"]["inputs_per_s_median"],
                          row["llama-server"]["tokens_per_s_median"], row["llama-server"]["inputs_per_s_median"],
                          row["ratio"]), flush=True)
        finally:
            for s in runs.values():
                s.stop()
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
