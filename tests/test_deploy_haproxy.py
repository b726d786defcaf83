"""Three `lumen serve` replicas (one thread each) behind HAProxy on deploy/haproxy/haproxy.cfg,
on 127.0.0.1, started and stopped here (bench/cluster.py): conversations keep landing on the
replica that holds their prefix (its /metrics counts the hits); many requests of one hot key
never put a replica above the configured load bound; a replica drained (SIGUSR1), stopped and
restarted costs no request; a replica stopped (SIGTERM, no grace) or killed (SIGKILL) mid-run
fails only its own in-flight requests, each cleanly, and every later request succeeds; the
replicas closing idle keep-alive connections (--keep-alive-timeout 1 here) fails no request of
clients that reuse theirs.
Run by tests/test_deploy_haproxy.sh (label slow); skipped when haproxy is not installed."""
import json
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import cluster  # noqa: E402

BIN = os.environ.get("LUMEN_BIN") or str(ROOT / "build" / "lumen")
ARTIFACTS = Path(os.environ.get("LUMEN_TEST_ARTIFACTS") or "/tmp/lumen-test-deploy-haproxy")
SYSTEM = "You are the assistant of tenant {}. " + ("Answer briefly and stay polite; these notes "
                                                  "describe the tenant's products in some detail. ") * 6


BALANCER_NAME = "llm.example.com"


def messages(tenant, conv, history=()):
    return ([{"role": "system", "content": SYSTEM.format(tenant)},
             {"role": "user", "content": "Conversation %d: tell me about item %d." % (conv, conv)}]
            + list(history))


def chat(url, msgs, max_tokens=8, stream=False, timeout=180, out=None):
    """One chat request through HAProxy: {status, replica, text, usage, events, error, done},
    filled into out (if given) as the answer arrives."""
    body = {"messages": msgs, "max_tokens": max_tokens, "temperature": 0, "stream": stream,
            "ignore_eos": True}
    if stream:
        body["stream_options"] = {"include_usage": True}
    out = {} if out is None else out
    out.update({"status": None, "replica": None, "text": "", "usage": None, "events": [], "error": None,
                "done": False})
    try:
        with httpx.Client(timeout=timeout) as c:
            with c.stream("POST", url + "/v1/chat/completions", json=body) as r:
                out["status"], out["replica"] = r.status_code, r.headers.get("x-lumen-replica")
                if not stream or r.status_code != 200:
                    data = r.read()
                    try:
                        j = json.loads(data)
                    except ValueError:
                        out["error"] = "not JSON: %r" % data[:200]
                        return out
                    if r.status_code == 200:
                        out["text"] = j["choices"][0]["message"]["content"]
                        out["usage"] = j["usage"]
                    else:
                        out["error"] = j.get("error")
                    return out
                for line in r.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    data = line[6:]
                    out["events"].append(data)
                    if data == "[DONE]":
                        out["done"] = True
                        continue
                    j = json.loads(data)
                    if j.get("error"):
                        out["error"] = j["error"]
                    for ch in j.get("choices") or []:
                        out["text"] += (ch.get("delta") or {}).get("content") or ""
                    if j.get("usage"):
                        out["usage"] = j["usage"]
    except httpx.HTTPError as e:  # a stream cut by a replica's death: the chunked body is incomplete
        out["error"] = "%s: %s" % (type(e).__name__, e)
    return out


@pytest.fixture(scope="module")
def lb():
    if not cluster.haproxy_binary():
        pytest.skip("haproxy is not installed (bash scripts/setup.sh --haproxy)")
    # --keep-alive-timeout 1 (default 5): the replicas close HAProxy's idle connections often,
    # so every test also meets that race; --allowed-host: the balancer's name (README)
    c = cluster.Cluster(3, BIN, threads=1, parallel=4, queue=16, log_dir=ARTIFACTS,
                        extra=["--shutdown-grace", "0", "--keep-alive-timeout", "1",
                               "--allowed-host", BALANCER_NAME])
    with c:
        yield c


def replica_index(lb, name):
    return [r.name for r in lb.replicas].index(name)


def hits(lb):
    return [lb.metrics(i)["lumen_prefix_cache_hits_total"] for i in range(len(lb.replicas))]


def test_conversations_stay_on_their_replica(lb):
    """6 conversations of 2 tenants, 3 turns each: every turn on the first turn's replica,
    each later turn finds its whole history cached there (its /metrics counts the hits)."""
    h0 = hits(lb)
    convs = {i: {"msgs": messages(i % 2, i), "replicas": [], "cached": [], "prompt": []} for i in range(6)}
    for turn in range(3):
        for i, cv in convs.items():
            r = chat(lb.url, cv["msgs"], max_tokens=8)
            assert r["status"] == 200, r
            cv["replicas"].append(r["replica"])
            cv["prompt"].append(r["usage"]["prompt_tokens"])
            cv["cached"].append(r["usage"]["prompt_tokens_details"]["cached_tokens"])
            cv["msgs"] = cv["msgs"] + [{"role": "assistant", "content": r["text"]},
                                       {"role": "user", "content": "And then, turn %d?" % (turn + 1)}]
    client_cached = [0] * 3
    for i, cv in convs.items():
        assert len(set(cv["replicas"])) == 1, (i, cv["replicas"])
        for k in (1, 2):  # all but the last block of the previous turn's prompt + answer
            assert cv["cached"][k] >= cv["prompt"][k - 1] - 16, (i, cv)
        client_cached[replica_index(lb, cv["replicas"][0])] += sum(cv["cached"])
    assert len({cv["replicas"][0] for cv in convs.values()}) >= 2  # spread, not all on one
    h1 = hits(lb)
    assert [b - a for a, b in zip(h0, h1)] == client_cached, (h0, h1, client_cached)


def test_the_balancers_name_reaches_the_replicas(lb):
    """HAProxy passes the client's Host on: a replica started with --allowed-host NAME serves
    a client that calls the balancer NAME, and answers another name 403 (lumen's DNS-rebinding
    guard, which no retry hides)."""
    body = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 1}
    r = httpx.post(lb.url + "/v1/chat/completions", json=body, timeout=60,
                   headers={"Host": BALANCER_NAME + ":443"})
    assert r.status_code == 200, r.text
    r = httpx.post(lb.url + "/v1/chat/completions", json=body, timeout=60, headers={"Host": "other.example"})
    assert r.status_code == 403 and "host_not_allowed" in r.text, r.text


def test_replicas_closing_idle_connections_fail_nothing(lb):
    """6 clients keep their connection to HAProxy and send a request about every second, the
    replicas' --keep-alive-timeout: HAProxy sends their second and later requests on its idle
    connections to the replicas (http-reuse safe), some as the replica closes them; HAProxy
    retries those (retry-on conn-failure empty-response): no request fails."""
    reuse0 = sum(int(row.get("reuse") or 0) for row in lb.stats().values())
    outs = []

    def client(i):
        rng = random.Random(i)
        with httpx.Client(timeout=60) as c:
            for k in range(12):
                body = {"messages": [{"role": "user", "content": "client %d, request %d" % (i, k)}],
                        "max_tokens": 1}
                try:
                    r = c.post(lb.url + "/v1/chat/completions", json=body)
                    outs.append((r.status_code, r.text[:200]))
                except httpx.HTTPError as e:
                    outs.append((None, "%s: %s" % (type(e).__name__, e)))
                time.sleep(rng.uniform(0.9, 1.1))

    ths = [threading.Thread(target=client, args=(i,)) for i in range(6)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(120)
    assert len(outs) == 72 and all(st == 200 for st, _ in outs), [o for o in outs if o[0] != 200][:5]
    reuse = sum(int(row.get("reuse") or 0) for row in lb.stats().values()) - reuse0
    assert reuse > 0, lb.stats()  # the idle connections were used, so the race was run


def test_hot_key_stays_under_the_load_bound(lb):
    """12 concurrent requests of one conversation (a skewed trace at its worst): HAProxy's
    bounded load (hash-balance-factor 150) spreads them; no replica holds more than 150% of
    the mean of the requests in flight (+1 for the rounding of its slots)."""
    lb.admin("clear counters")  # smax: the most requests a replica held at once
    msgs = messages(7, 99)
    outs = [None] * 12
    ths = [threading.Thread(target=lambda i=i: outs.__setitem__(i, chat(lb.url, msgs, max_tokens=48)))
           for i in range(12)]
    for t in ths:
        t.start()
        time.sleep(0.02)
    for t in ths:
        t.join(180)
    assert all(o and o["status"] == 200 for o in outs), outs
    st = lb.stats()
    smax = {n: int(row["smax"]) for n, row in st.items()}
    assert max(smax.values()) <= 1.5 * 12 / 3 + 1, smax
    assert sum(1 for v in smax.values() if v > 0) >= 2, smax


def _steady_load(lb, stop, outs):
    i = 0
    while not stop.is_set():
        outs.append(chat(lb.url, messages(i % 3, 100 + i % 9), max_tokens=6))
        i += 1


def test_drain_and_restart_fails_nothing(lb):
    """Under steady load (2 clients), replica r1 is drained (SIGUSR1), HAProxy marks it down,
    its running requests end, it is stopped (SIGTERM) and started again on its address, HAProxy
    marks it up: no request fails, and r1 serves again afterwards."""
    stop, outs = threading.Event(), []
    ths = [threading.Thread(target=_steady_load, args=(lb, stop, outs)) for _ in range(2)]
    for t in ths:
        t.start()
    try:
        time.sleep(2)
        r1 = lb.replicas[0]
        os.kill(r1.pid, signal.SIGUSR1)
        lb.wait_up(["r1"], timeout=20, status="DOWN")
        deadline = time.monotonic() + 60
        while True:
            m = lb.metrics(0)
            if m["lumen_requests_running"] == 0 and m["lumen_requests_waiting"] == 0:
                break
            assert time.monotonic() < deadline, m
            time.sleep(0.1)
        assert r1.stop() == 0
        time.sleep(1)  # requests meanwhile go elsewhere (HAProxy has it down)
        lb.restart_replica(0)
        lb.wait_up(["r1"], timeout=30)
        n_before = len(outs)
        time.sleep(3)
    finally:
        stop.set()
        for t in ths:
            t.join(120)
    bad = [o for o in outs if o["status"] != 200]
    assert not bad and len(outs) > n_before, (len(outs), bad[:3])
    assert any(o["replica"] == "r1" for o in outs[n_before:]), [o["replica"] for o in outs[n_before:]]


def _in_flight(lb, n=6, max_tokens=400):
    """n streams and n whole answers of distinct conversations, spread by HAProxy, all held by
    the replicas: (their results, filled in as they go; their threads; the index of a replica
    holding at least one of each if there is one, else the busiest)."""
    outs = {(k, st): {} for k in range(n) for st in (True, False)}
    ths = [threading.Thread(target=chat, args=(lb.url, messages(k % 5, 200 + k)),
                            kwargs=dict(max_tokens=max_tokens, stream=st, out=o))
           for (k, st), o in outs.items()]
    for t in ths:
        t.start()
    deadline = time.monotonic() + 90
    while True:
        assert time.monotonic() < deadline, ([lb.metrics(i) for i in range(3)], outs)
        time.sleep(0.2)
        held = [int(m["lumen_requests_running"] + m["lumen_requests_waiting"])
                for m in (lb.metrics(i) for i in range(3))]
        where = [o.get("replica") for (k, st), o in outs.items() if st]
        if sum(held) < 2 * n or None in where:
            continue
        both = [i for i, r in enumerate(lb.replicas) if 0 < where.count(r.name) < held[i]]
        victim = both[0] if both else held.index(max(held))
        return outs, ths, victim


def _others_all_succeed(lb, n=9):
    outs = [chat(lb.url, messages(k % 5, 300 + k), max_tokens=4) for k in range(n)]
    assert all(o["status"] == 200 for o in outs), outs
    return outs


def _check_others(lb, outs, victim):
    """The streams of the other replicas ended whole; every whole answer is a 200 or a 502/503
    (never a truncated or malformed 200); the streams of the victim, to be checked by the caller."""
    name = lb.replicas[victim].name
    mine = []
    for (k, stream), o in outs.items():
        if stream and o["replica"] == name:
            mine.append(o)
        elif stream:
            assert o["status"] == 200 and o["done"] and not o["error"], o
            assert o["usage"]["completion_tokens"] == 400, o
        else:
            assert (o["status"] == 200 and o["usage"]["completion_tokens"] == 400) or o["status"] in (502, 503), o
    return mine


def test_replica_stopped_fails_only_its_requests_cleanly(lb):
    """SIGTERM with --shutdown-grace 0 on a replica running streams and whole answers: each of
    its streams ends with an error event (unavailable_error) and [DONE]; each of its whole
    answers gets its 503, which HAProxy replays on another replica (a 200 from there); the
    other replicas' requests end whole; every request afterwards succeeds. Then the replica
    is started again."""
    outs, ths, victim = _in_flight(lb)
    lb.replicas[victim].proc.send_signal(signal.SIGTERM)
    for t in ths:
        t.join(240)
    assert lb.replicas[victim].proc.wait(30) == 0
    mine = _check_others(lb, outs, victim)
    assert mine, outs  # the replica was streaming
    for o in mine:
        assert o["status"] == 200 and o["done"], o
        assert o["error"] and o["error"]["type"] == "unavailable_error", o
    assert all(o["status"] == 200 for (k, st), o in outs.items() if not st), outs  # replayed
    _others_all_succeed(lb)
    lb.restart_replica(victim)
    lb.wait_up([lb.replicas[victim].name], timeout=30)


def test_replica_killed_fails_only_its_requests_cleanly(lb):
    """SIGKILL on a replica running streams and whole answers: each of its streams ends
    without its last chunk (the client's HTTP library reports the cut; never a [DONE]); each
    of its whole answers is replayed on another replica by HAProxy (200) or answered 502/503;
    the other replicas' requests end whole; every request afterwards succeeds, at once
    (refused connections are retried elsewhere) and once HAProxy has the replica down."""
    outs, ths, victim = _in_flight(lb)
    name = lb.replicas[victim].name
    lb.replicas[victim].proc.send_signal(signal.SIGKILL)
    lb.replicas[victim].proc.wait(10)
    for t in ths:
        t.join(240)
    mine = _check_others(lb, outs, victim)
    assert mine, outs  # the replica was streaming
    for o in mine:
        assert o["status"] == 200 and not o["done"], o
        assert o["error"] and "RemoteProtocolError" in o["error"], o
    _others_all_succeed(lb)
    lb.wait_up([name], timeout=20, status="DOWN")
    _others_all_succeed(lb)
    lb.restart_replica(victim)
    lb.wait_up([name], timeout=30)
