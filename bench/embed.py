#!/usr/bin/env python3
"""Embedding throughput, lumen against llama-server on the same file and threads (docs/embeddings.md;
issue 38's benchmark): for each input length, one POST /v1/embeddings of N inputs of exactly that
many token ids (the same random ids for both servers, new ones each round), rounds alternating;
inputs/s and tokens/s per round, the median and spread, and the ratio lumen / llama-server.
llama-server runs with --embeddings, a unified KV cache and a physical batch that holds the whole
request (-b / -ub = N x length, so it is not starved of batch), its pooling the file's.

--rerank (a reranker file: pooling rank): one POST /v1/rerank of one query and --docs documents of
--doc-tokens tokens each (English words, lengths set with lumen's /tokenize), lumen against
llama-server --reranking on the same file, rounds alternating; requests/s and documents/s, the
median of the per-round ratios; both servers' scores compared (largest difference, pairs ordered
differently and the score gap between them).

--mixed (a model that both generates and embeds, such as a Qwen3-Embedding file: one `lumen
serve` holds one model): --streams streaming /v1/completions clients (greedy, ignore_eos,
--max-tokens each, back to back) for --seconds, with and without one client posting
/v1/embeddings of --embed-batch x --embed-tokens token ids back to back; rounds alternate the
order of the two phases. The streams' inter-token gaps (p50, p99; the first --settle seconds of a
phase left out) per phase, and the p99 ratio with / without per round and its median.

usage: .venv/bin/python bench/embed.py -m MODEL.gguf [--inputs 32] [--lengths 64,256,512]
           [-t 1,2] [--rounds 5] [--json OUT.json]
       .venv/bin/python bench/embed.py --rerank -m RERANKER.gguf [--docs 20] [--doc-tokens 64,128]
       .venv/bin/python bench/embed.py --mixed -m EMBED_DECODER.gguf [-t 2] [--streams 8]
           [--seconds 20] [--rounds 3] [--embed-batch 8] [--embed-tokens 256]
smoke: .venv/bin/python bench/embed.py -m /tmp/lumen-embed-$UID/embed_qwen3_mean.gguf
           --inputs 4 --lengths 16 -t 1 --rounds 1
       .venv/bin/python bench/embed.py --rerank -m /tmp/lumen-embed-$UID/embed_bert_rank.gguf
           -t 1 --rounds 1
       .venv/bin/python bench/embed.py --mixed -m /tmp/lumen-embed-$UID/embed_qwen3_last.gguf
           -t 1 --rounds 1 --seconds 4
"""
import argparse
import asyncio
import json
import random
import statistics
import sys
import time
import urllib.request
from pathlib import Path

import gguf
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import servers  # noqa: E402
import serve_load  # noqa: E402  (its streaming client, prompts' words and percentiles)

ROOT = servers.ROOT


def n_vocab(model):
    r = gguf.GGUFReader(str(model))
    return len(r.fields["tokenizer.ggml.tokens"].data)


def post(url, body, path="/v1/embeddings", timeout=600):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def spread(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v)}


# ============================================================== embeddings (inputs/s, tokens/s)

def one_round(url, inputs):
    t0 = time.perf_counter()
    out = post(url, {"input": inputs, "encoding_format": "float"})
    dt = time.perf_counter() - t0
    if len(out.get("data", [])) != len(inputs):
        raise RuntimeError("%s answered %d vectors for %d inputs" % (url, len(out.get("data", [])), len(inputs)))
    n_tok = sum(map(len, inputs))
    return {"s": dt, "inputs_per_s": len(inputs) / dt, "tokens_per_s": n_tok / dt}


def run_embed(a):
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
                def fresh():
                    return [[rng.randrange(16, nv) for _ in range(L)] for _ in range(a.inputs)]
                for s in runs.values():  # warm-up
                    one_round(s.url, fresh()[:2])
                rounds = {k: [] for k in runs}
                for r in range(a.rounds):  # alternating, the first server changing each round
                    # new inputs every round (the same for both servers): a decoder-based
                    # embedding model's prompt cache must not answer a round from the one before
                    inputs = fresh()
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
    return results


# ============================================================== rerank (requests/s, documents/s)

def n_tokens(url, text):
    return len(post(url, {"content": text, "add_special": False}, path="/tokenize")["tokens"])


def make_docs(url, n, lo, hi, rng):
    """n documents of English words, each the fewest words whose tokens (this model's vocabulary,
    by lumen's /tokenize) reach a length drawn from [lo, hi]."""
    docs = []
    for i in range(n):
        target = rng.randint(lo, hi)
        words = [rng.choice(serve_load.VOCAB) for _ in range(4 * hi)]
        words[0] = words[0].capitalize()
        k0, k1 = 1, len(words)
        while k0 < k1:  # the first word count that reaches the target
            mid = (k0 + k1) // 2
            if n_tokens(url, " ".join(words[:mid]) + ".") >= target:
                k1 = mid
            else:
                k0 = mid + 1
        docs.append(" ".join(words[:k0]) + ".")
    return docs


def rerank_round(url, query, docs):
    t0 = time.perf_counter()
    out = post(url, {"query": query, "documents": docs}, path="/v1/rerank")
    dt = time.perf_counter() - t0
    res = out.get("results", [])
    if sorted(r["index"] for r in res) != list(range(len(docs))):
        raise RuntimeError("%s answered %d results for %d documents" % (url, len(res), len(docs)))
    return {"s": dt, "requests_per_s": 1.0 / dt, "docs_per_s": len(docs) / dt,
            "prompt_tokens": (out.get("usage") or {}).get("prompt_tokens"),
            "scores": {r["index"]: r["relevance_score"] for r in res}}


def compare_scores(sa, sb):
    """Largest score difference, and the pairs the two servers order differently with the larger
    of the two servers' gaps between them (ties on near-equal scores are expected)."""
    idx = sorted(sa)
    diff = max(abs(sa[i] - sb[i]) for i in idx)
    discord, worst_gap = 0, 0.0
    for x in range(len(idx)):
        for y in range(x + 1, len(idx)):
            i, j = idx[x], idx[y]
            if (sa[i] - sa[j]) * (sb[i] - sb[j]) < 0:
                discord += 1
                worst_gap = max(worst_gap, abs(sa[i] - sa[j]), abs(sb[i] - sb[j]))
    same = sorted(idx, key=lambda i: -sa[i]) == sorted(idx, key=lambda i: -sb[i])
    return {"max_abs_diff": diff, "same_order": same, "discordant_pairs": discord,
            "discordant_max_gap": worst_gap}


def run_rerank(a):
    lo, hi = (int(x) for x in a.doc_tokens.split(","))
    rng = random.Random(38)
    query = "What is known about " + " ".join(rng.choice(serve_load.VOCAB) for _ in range(6)) + "?"
    ctx = a.docs * a.ctx_per_doc  # both servers: room for every prompt at once
    results = []
    for th in [int(x) for x in a.threads.split(",")]:
        runs = {
            "lumen": servers.Server("lumen", servers.lumen_serve_argv(
                a.lumen, a.model, threads=th, parallel=a.docs, ctx=ctx, extra=a.lumen_args.split())),
            # --reranking, one slot per document, a physical batch that holds every prompt
            "llama-server": servers.Server("llama-server", servers.llama_server_argv(
                a.llama_server, a.model, threads=th, parallel=a.docs, ctx=ctx,
                extra=["--reranking", "-b", str(ctx), "-ub", str(ctx)])),
        }
        try:
            for s in runs.values():
                s.start()
            warm = make_docs(runs["lumen"].url, 2, lo, hi, rng)
            for s in runs.values():  # warm-up
                rerank_round(s.url, query, warm)
            rounds = {k: [] for k in runs}
            for r in range(a.rounds):  # alternating, the first server changing each round
                # new documents every round (the same for both servers): no answer from a prompt
                # cache of the round before; within a request the query's prefix is shared
                docs = make_docs(runs["lumen"].url, a.docs, lo, hi, rng)
                order = list(runs) if r % 2 == 0 else list(runs)[::-1]
                for k in order:
                    rounds[k].append(rerank_round(runs[k].url, query, docs))
        finally:
            for s in runs.values():
                s.stop()
        ratios = [x["docs_per_s"] / y["docs_per_s"] for x, y in zip(rounds["lumen"], rounds["llama-server"])]
        agree = compare_scores(rounds["lumen"][-1]["scores"], rounds["llama-server"][-1]["scores"])
        row = {"threads": th, "docs": a.docs, "query": query, "ratio_median": statistics.median(ratios),
               "ratios": ratios, "scores": agree}
        for k, rs in rounds.items():
            row[k] = {"docs_per_s": spread([x["docs_per_s"] for x in rs]),
                      "requests_per_s": spread([x["requests_per_s"] for x in rs]),
                      "prompt_tokens": rs[-1]["prompt_tokens"],
                      "rounds": [{kk: v for kk, v in x.items() if kk != "scores"} for x in rs],
                      "scores": [rs[-1]["scores"][i] for i in range(a.docs)]}
        results.append(row)
        print("t=%d rerank %d docs (%s / %s prompt tokens): lumen %6.2f req/s %7.1f docs/s  llama-server "
              "%6.2f req/s %7.1f docs/s  ratio %.2f (median of %d rounds); scores: max |diff| %.2g, %s" % (
                  th, a.docs, row["lumen"]["prompt_tokens"], row["llama-server"]["prompt_tokens"],
                  row["lumen"]["requests_per_s"]["median"], row["lumen"]["docs_per_s"]["median"],
                  row["llama-server"]["requests_per_s"]["median"], row["llama-server"]["docs_per_s"]["median"],
                  row["ratio_median"], len(ratios), agree["max_abs_diff"],
                  "same order" if agree["same_order"] else
                  "ORDER DIFFERS: %d pairs, gaps up to %.2g" % (agree["discordant_pairs"], agree["discordant_max_gap"])),
              flush=True)
    return results


# ============================================================== mixed load (chat ITL with embeddings)

async def mixed_phase(url, a, with_embed, seed, nv):
    """--streams chat streams back to back for --seconds, with or without an embedding client; the
    gaps whose later token arrived after --settle and before the end, and the embedding count."""
    t0 = time.perf_counter()
    t_end = t0 + a.seconds
    chats, embeds = [], []
    rng = random.Random(seed)
    limits = httpx.Limits(max_connections=a.streams + 4)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0), limits=limits) as client:
        async def chat_loop(k):
            i = 0
            while time.perf_counter() < t_end:
                # a new prompt each time (no prefix reuse), greedy, ignore_eos: --max-tokens each
                text = serve_load.words(seed * 1000 + k * 100 + i, a.prompt_words)
                chats.append(await serve_load.stream(client, url, "completions",
                                                     serve_load.request_body("completions", text, a.max_tokens)))
                i += 1

        async def embed_loop():
            while time.perf_counter() < t_end:
                inputs = [[rng.randrange(16, nv) for _ in range(a.embed_tokens)] for _ in range(a.embed_batch)]
                t = time.perf_counter()
                r = await client.post(url + "/v1/embeddings", json={"input": inputs})
                r.raise_for_status()
                if len(r.json()["data"]) != a.embed_batch:
                    raise RuntimeError("embeddings: %d vectors for %d inputs" % (len(r.json()["data"]), a.embed_batch))
                embeds.append(time.perf_counter() - t)

        await asyncio.gather(*[chat_loop(k) for k in range(a.streams)], *([embed_loop()] if with_embed else []))
    bad = [r for r in chats if not r.ok]
    if bad:
        raise RuntimeError("a chat stream failed: %s %s" % (bad[0].status, bad[0].error))
    gaps = [g for r in chats for g in r.gaps(t0 + a.settle, t_end)]
    d = serve_load.dist_ms(gaps) or {}
    return {"with_embeddings": with_embed, "chat_requests": len(chats), "gaps_ms": d,
            "embed_requests": len(embeds), "embed_inputs_per_s": len(embeds) * a.embed_batch / a.seconds,
            "embed_request_s_median": statistics.median(embeds) if embeds else None}


def run_mixed(a):
    nv = n_vocab(a.model)
    results = []
    for th in [int(x) for x in a.threads.split(",")]:
        ctx = a.streams * (8 * a.prompt_words + a.max_tokens + 32) + a.embed_batch * (a.embed_tokens + 16)
        srv = servers.Server("lumen", servers.lumen_serve_argv(
            a.lumen, a.model, threads=th, parallel=a.streams + a.embed_batch, ctx=max(ctx, 8192),
            extra=a.lumen_args.split()))
        phases = []
        try:
            srv.start()
            post(srv.url, {"prompt": "warm up", "max_tokens": 4}, path="/v1/completions")
            post(srv.url, {"input": [[16] * 8]})
            for r in range(a.rounds):  # alternating: without first, then with first
                order = [False, True] if r % 2 == 0 else [True, False]
                for w in order:
                    ph = asyncio.run(mixed_phase(srv.url, a, w, 1 + 2 * r + int(w), nv))
                    ph["round"] = r
                    phases.append(ph)
                    g = ph["gaps_ms"]
                    print("t=%d round %d %-18s ITL p50 %7.2f ms  p99 %7.2f ms  (%d gaps, %d chat requests)%s" % (
                        th, r, "with embeddings" if w else "without", g.get("p50") or 0, g.get("p99") or 0,
                        g.get("n") or 0, ph["chat_requests"],
                        "  embeddings %.1f inputs/s" % ph["embed_inputs_per_s"] if w else ""), flush=True)
        finally:
            srv.stop()
        p99 = {(p["round"], p["with_embeddings"]): p["gaps_ms"].get("p99") for p in phases}
        ratios = [p99[(r, True)] / p99[(r, False)] for r in range(a.rounds) if p99[(r, True)] and p99[(r, False)]]
        row = {"threads": th, "streams": a.streams, "max_tokens": a.max_tokens, "embed_batch": a.embed_batch,
               "embed_tokens": a.embed_tokens, "seconds": a.seconds, "phases": phases,
               "p99_ratio_median": statistics.median(ratios) if ratios else None, "p99_ratios": ratios}
        results.append(row)
        print("t=%d mixed: chat p99 ITL with / without embeddings %s (median of %d rounds; goal <= 1.20)" % (
            th, "%.2f" % row["p99_ratio_median"] if ratios else "n/a", len(ratios)), flush=True)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--rerank", action="store_true", help="rerank of --docs documents (a reranker file)")
    mode.add_argument("--mixed", action="store_true", help="chat streams' ITL with and without embeddings")
    ap.add_argument("--inputs", type=int, default=32)
    ap.add_argument("--lengths", default="64,256,512")
    ap.add_argument("--docs", type=int, default=20)
    ap.add_argument("--doc-tokens", default="64,128", help="documents' token lengths: LO,HI")
    ap.add_argument("--ctx-per-doc", type=int, default=512, help="KV cells per document (--rerank)")
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64, help="tokens per chat request (--mixed)")
    ap.add_argument("--prompt-words", type=int, default=24, help="words per chat prompt (--mixed)")
    ap.add_argument("--seconds", type=float, default=20.0, help="length of a --mixed phase")
    ap.add_argument("--settle", type=float, default=1.0, help="seconds of a phase left out of the gaps")
    ap.add_argument("--embed-batch", type=int, default=8)
    ap.add_argument("--embed-tokens", type=int, default=256)
    ap.add_argument("-t", "--threads", default=None, help="thread counts (default 1,2; --mixed: 2)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--lumen", default=str(ROOT / "build" / "lumen"))
    ap.add_argument("--llama-server", default=str(ROOT / ".reference" / "bin" / "llama-server"))
    ap.add_argument("--lumen-args", default="", help="more `lumen serve` flags (e.g. its step budget)")
    ap.add_argument("--json", help="write the rounds and summaries here")
    a = ap.parse_args()
    if a.threads is None:
        a.threads = "2" if a.mixed else "1,2"
    servers.stop_servers_on_sigterm()
    results = run_rerank(a) if a.rerank else run_mixed(a) if a.mixed else run_embed(a)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
