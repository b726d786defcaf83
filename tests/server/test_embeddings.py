"""lumen serve's POST /v1/embeddings on a reduced Qwen3 embedding copy (mean pooling; written
by tools/gen_golden_embed.py, golden vectors in tests/golden/embed_qwen3_mean.txt) through the
official `openai` client (float and its default base64, dimensions) and raw HTTP: the same
bits as `lumen embed` (one path), cosine >= 0.9999 to the float64 reference, token-id inputs,
usage, batch invariance (alone, among others, beside a running generation), metrics; malformed
bodies one 400 each; a chat model (the default server) a 400 naming the pooling. POST /v1/rerank
on the reranker copy (tests/golden/embed_qwen3_rank.txt): scores within 1e-4 of llama.cpp's and
the reference's, best first, top_n, return_documents, the aliases, malformed bodies."""
import hashlib
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from conftest import API_KEY, BIN, ROOT, Server, client

DIR = os.environ.get("LUMEN_EMBED_DIR") or "/tmp/lumen-embed-%d" % os.getuid()
GOLD = os.path.join(ROOT, "tests", "golden", "embed_qwen3_mean.txt")
MODEL = os.path.join(DIR, "embed_qwen3_mean.gguf")


def golden():
    rows, sha = [], None
    for line in open(GOLD):
        k, _, v = line.rstrip("\n").partition(" ")
        if k == "sha256":
            sha = v
        elif k == "input":
            rows.append({"input": v})
        elif k in ("ref", "llama"):
            rows[-1][k] = np.array([float(x) for x in v.split()])
        elif k == "n_tokens":
            rows[-1][k] = int(v)
    return sha, rows


SHA, ROWS = golden()
TEXTS = [r["input"] for r in ROWS]


def model_ready():
    try:
        if hashlib.sha256(open(MODEL, "rb").read()).hexdigest() == SHA and os.path.exists(
                os.path.join(DIR, "embed_qwen3_rank.gguf")):
            return True
    except OSError:
        pass
    py = os.path.join(ROOT, ".venv", "bin", "python")
    gen = os.path.join(ROOT, "tools", "gen_golden_embed.py")
    r = subprocess.run([py if os.path.exists(py) else sys.executable, gen, "--dir", DIR, "--models-only"],
                       capture_output=True)
    return r.returncode == 0


@pytest.fixture(scope="module")
def esrv():
    if not model_ready():
        pytest.skip("cannot write the embedding model (numpy + gguf)")
    s = Server("--parallel", "8", "--api-key", API_KEY, "-c", "128", model=MODEL)
    yield s
    s.stop()


def cos(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def cli_vectors(*args):
    out = subprocess.run([BIN, "embed", "-m", MODEL, "-t", "2", *args, *TEXTS], capture_output=True,
                         text=True, check=True).stdout
    return [json.loads(line)["embedding"] for line in out.splitlines()]


def test_openai_float_and_base64(esrv):
    c = client(esrv)
    f = c.embeddings.create(model="lumen", input=TEXTS, encoding_format="float")
    b = c.embeddings.create(model="lumen", input=TEXTS)  # the client asks for base64, decodes it
    cli = cli_vectors()
    assert [d.index for d in f.data] == list(range(len(TEXTS)))
    assert f.usage.prompt_tokens == f.usage.total_tokens == sum(r["n_tokens"] for r in ROWS)
    for r, df, db, v in zip(ROWS, f.data, b.data, cli):
        assert np.array_equal(np.float32(df.embedding), np.float32(v)), "not lumen embed's bits"
        assert np.array_equal(np.float32(db.embedding), np.float32(v)), "base64 is not the floats"
        assert cos(df.embedding, r["ref"]) >= 0.9999 and cos(df.embedding, r["llama"]) >= 0.9999


def test_dimensions(esrv):
    d = client(esrv).embeddings.create(model="lumen", input=TEXTS[0], dimensions=256, encoding_format="float")
    full = np.float64(cli_vectors()[0])
    v = np.float64(d.data[0].embedding)
    assert len(v) == 256 and abs(np.linalg.norm(v) - 1) < 1e-6
    assert np.abs(v - full[:256] / np.linalg.norm(full[:256])).max() < 1e-6


def test_token_inputs(esrv):
    st, _, tok = esrv.post("/tokenize", {"content": TEXTS[1], "add_special": True})
    ids = tok["tokens"]
    st1, _, one = esrv.post("/v1/embeddings", {"input": ids})
    st2, _, two = esrv.post("/v1/embeddings", {"input": [ids, ids[:3]]})
    _, _, txt = esrv.post("/v1/embeddings", {"input": TEXTS[1]})
    assert st == st1 == st2 == 200
    assert one["data"][0]["embedding"] == txt["data"][0]["embedding"] == two["data"][0]["embedding"]
    assert two["usage"]["prompt_tokens"] == len(ids) + 3 and len(two["data"]) == 2


def test_beside_generation(esrv):
    """The same vectors alone and while a generation streams on the same engine."""
    _, _, alone = esrv.post("/v1/embeddings", {"input": TEXTS})
    out = {}
    t = threading.Thread(target=lambda: out.update(r=esrv.post(
        "/v1/completions", {"prompt": "w1 w2", "max_tokens": 48, "temperature": 0, "ignore_eos": True})))
    t.start()
    esrv.wait_metric(lambda m: m.get("lumen_requests_running", 0) >= 1 or not t.is_alive(), timeout=30)
    _, _, beside = esrv.post("/v1/embeddings", {"input": TEXTS[::-1]})
    t.join()
    assert out["r"][0] == 200
    assert [d["embedding"] for d in beside["data"]][::-1] == [d["embedding"] for d in alone["data"]]
    m = esrv.metrics()
    assert m.get('lumen_requests_total{route="/v1/embeddings",status="200"}', 0) >= 2


@pytest.mark.parametrize("body, param", [
    ({"input": ""}, "input"),
    ({"input": []}, "input"),
    ({"input": ["w1", ""]}, "input[1]"),
    ({"input": [[]]}, "input[0]"),
    ({"input": [1, 99999]}, "input"),
    ({"input": [[1], [-1]]}, "input[1]"),
    ({"input": " ".join("w%d" % i for i in range(200))}, "input"),
    ({"input": "w1", "dimensions": 0}, "dimensions"),
    ({"input": "w1", "dimensions": -3}, "dimensions"),
    ({"input": "w1", "dimensions": 1025}, "dimensions"),
    ({"input": "w1", "dimensions": "8"}, "dimensions"),
    ({"input": 5}, "input"),
    ({"input": {"text": "w1"}}, "input"),
    ({"input": [[1], "w1"]}, "input[1]"),
    ({"input": ["w1", 2]}, "input[1]"),
    ({"input": "w1", "encoding_format": "hex"}, "encoding_format"),
    ({"input": "w1", "encoding_format": 1}, "encoding_format"),
    ({}, "input"),
])
def test_malformed(esrv, body, param):
    st, _, data = esrv.post("/v1/embeddings", body)
    assert st == 400, data
    assert data["error"]["type"] == "invalid_request_error" and data["error"]["param"] == param, data


def test_chat_model_refused(server):
    st, _, data = server.post("/v1/embeddings", {"input": "hello"})
    assert st == 400 and data["error"]["code"] == "model_not_embedding", data


# ---------------------------------------------------------------- POST /v1/rerank
RGOLD = os.path.join(ROOT, "tests", "golden", "embed_qwen3_rank.txt")
RMODEL = os.path.join(DIR, "embed_qwen3_rank.gguf")


def rerank_golden():
    g = {"docs": [], "llama": [], "ref": []}
    for line in open(RGOLD):
        k, _, v = line.rstrip("\n").partition(" ")
        if k in ("sha256", "query"):
            g[k] = v
        elif k == "document":
            g["docs"].append(v)
        elif k in ("llama", "ref"):
            g[k].append(float(v.split()[0]))
    return g


@pytest.fixture(scope="module")
def rsrv():
    if not model_ready():
        pytest.skip("cannot write the embedding models (numpy + gguf)")
    s = Server("--parallel", "4", "--api-key", API_KEY, "-c", "512", model=RMODEL)
    yield s
    s.stop()


def test_rerank_scores(rsrv):
    g = rerank_golden()
    assert hashlib.sha256(open(RMODEL, "rb").read()).hexdigest() == g["sha256"]
    st, _, r = rsrv.post("/v1/rerank", {"model": "x", "query": g["query"], "documents": g["docs"]})
    assert st == 200 and r["object"] == "list" and r["usage"]["prompt_tokens"] > 0, r
    order = sorted(range(len(g["ref"])), key=lambda i: -g["ref"][i])
    assert [x["index"] for x in r["results"]] == order
    for x in r["results"]:
        assert abs(x["relevance_score"] - g["ref"][x["index"]]) <= 1e-4
        assert abs(x["relevance_score"] - g["llama"][x["index"]]) <= 1e-4
        assert "document" not in x
    st, _, top = rsrv.post("/rerank", {"query": g["query"], "documents": g["docs"], "top_n": 2,
                                      "return_documents": True})
    assert st == 200 and [x["index"] for x in top["results"]] == order[:2]
    assert [x["document"]["text"] for x in top["results"]] == [g["docs"][i] for i in order[:2]]
    assert [x["relevance_score"] for x in top["results"]] == [x["relevance_score"] for x in r["results"][:2]]
    m = rsrv.metrics()
    assert m.get('lumen_requests_total{route="/v1/rerank",status="200"}', 0) >= 2


@pytest.mark.parametrize("body, param", [
    ({"documents": ["a"]}, "query"),
    ({"query": "", "documents": ["a"]}, "query"),
    ({"query": 3, "documents": ["a"]}, "query"),
    ({"query": "a"}, "documents"),
    ({"query": "a", "documents": []}, "documents"),
    ({"query": "a", "documents": "a"}, "documents"),
    ({"query": "a", "documents": ["a", 1]}, "documents[1]"),
    ({"query": "a", "documents": ["a"], "top_n": 0}, "top_n"),
    ({"query": "a", "documents": ["a"], "return_documents": "yes"}, "return_documents"),
    ({"query": "a", "documents": [" ".join("w%d" % i for i in range(400))]}, "documents"),
])
def test_rerank_malformed(rsrv, body, param):
    st, _, data = rsrv.post("/v1/rerank", body)
    assert st == 400 and data["error"]["param"] == param, data


def test_rerank_needs_reranker(esrv, rsrv):
    st, _, data = esrv.post("/v1/rerank", {"query": "a", "documents": ["b"]})
    assert st == 400 and data["error"]["code"] == "model_not_reranker", data
    st, _, data = rsrv.post("/v1/embeddings", {"input": "a"})
    assert st == 400 and data["error"]["code"] == "model_not_embedding", data


# ---------------------------------------------------------------- an encoder (bert)
BGOLD = os.path.join(ROOT, "tests", "golden", "embed_bert_mean.txt")
BMODEL = os.path.join(DIR, "embed_bert_mean.gguf")


def test_bert_embeddings():
    """The bge-small copy (tests/test_model_bert.sh's) served: the openai client's vectors
    within 0.9999 of llama.cpp's and the reference's, usage; a chat request a 400."""
    rows, sha = [], None
    for line in open(BGOLD):
        k, _, v = line.rstrip("\n").partition(" ")
        if k == "sha256":
            sha = v
        elif k == "input":
            rows.append({"input": v})
        elif rows:
            rows[-1][k] = v
    try:
        have = hashlib.sha256(open(BMODEL, "rb").read()).hexdigest()
    except OSError:
        have = None
    if have != sha:
        py = os.path.join(ROOT, ".venv", "bin", "python")
        gen = os.path.join(ROOT, "tools", "gen_golden_embed.py")
        if subprocess.run([py if os.path.exists(py) else sys.executable, gen, "--dir", DIR, "--bert-only",
                           "--models-only"], capture_output=True).returncode != 0:
            pytest.skip("cannot write the bert model (numpy + gguf)")
    s = Server("--api-key", API_KEY, model=BMODEL)
    try:
        c = client(s)
        r = c.embeddings.create(model="lumen", input=[x["input"] for x in rows])
        assert r.usage.prompt_tokens == sum(int(x["n_tokens"]) for x in rows)
        # longer than the server's step (256 tokens): an encoder's step holds its context
        assert len(c.embeddings.create(model="lumen", input="word " * 300).data[0].embedding) == 384
        for x, d in zip(rows, r.data):
            for k in ("llama_mean", "ref_mean"):
                assert cos(d.embedding, [float(v) for v in x[k].split()]) >= 0.9999, k
        with pytest.raises(Exception) as e:
            c.chat.completions.create(model="lumen", messages=[{"role": "user", "content": "hi"}],
                                      max_tokens=2)
        assert getattr(e.value, "status_code", None) == 400, repr(e.value)
    finally:
        s.stop()
