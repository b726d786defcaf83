"""Speculative decoding in lumen serve: per request ("lookup", "draft_max") and as the
server's default (--lookup): the same greedy and seeded text as without, alone and with
8 streams at once, and the drafting counters on /metrics."""
import concurrent.futures as cf

import pytest

from conftest import MODEL, QUICK, Server, client

N_GEN = 24 if QUICK else 48
COPY = ("Text: The old lighthouse stood at the edge of the cliff for more than two hundred "
        "years. Every night its keeper climbed the narrow stairs and trimmed the wick.\n"
        "The same text, repeated exactly:\n")
PROMPTS = [COPY, "Once upon a time, in a small village by the sea,",
           "List: red, green, blue, cyan, magenta, yellow.\nThe list again: red,",
           "def area(r):\n    return 3.14159 * r * r\n\n# renamed to circle_area:\ndef circle_area("]


def gen(c, prompt, extra=None, **kw):
    kw.setdefault("max_tokens", N_GEN)
    kw.setdefault("temperature", 0)
    r = c.completions.create(model="lumen", prompt=prompt, extra_body=extra or {}, **kw)
    return r.choices[0].text


@pytest.fixture(scope="module")
def lookup_server():
    s = Server("--lookup", "--draft-max", "6")
    yield s
    s.stop()


def test_per_request_lookup_same_text(server):
    c = client(server)
    m0 = server.metrics()
    for p in PROMPTS:
        assert gen(c, p, {"lookup": True}) == gen(c, p)
        assert gen(c, p, {"lookup": True, "draft_max": 3}, temperature=0.8, seed=11) == \
            gen(c, p, temperature=0.8, seed=11)
    m1 = server.metrics()
    drafted = m1["lumen_spec_drafted_tokens_total"] - m0["lumen_spec_drafted_tokens_total"]
    accepted = m1["lumen_spec_accepted_tokens_total"] - m0["lumen_spec_accepted_tokens_total"]
    assert drafted > 0 and 0 < accepted <= drafted
    assert m1["lumen_spec_verify_steps_total"] > m0["lumen_spec_verify_steps_total"]
    assert m1["lumen_spec_verify_seconds_total"] > 0
    assert m1["lumen_spec_verify_plain_seconds_total"] > 0


def test_server_default_and_override(server, lookup_server):
    c0, c1 = client(server), client(lookup_server)
    want = [gen(c0, p) for p in PROMPTS]
    m0 = lookup_server.metrics()
    assert gen(c1, COPY, {"lookup": False}) == want[0]
    assert lookup_server.metrics()["lumen_spec_drafted_tokens_total"] == \
        m0["lumen_spec_drafted_tokens_total"]  # "lookup": false: no drafts
    # 8 streams at once, each the text it gets alone without drafting
    with cf.ThreadPoolExecutor(8) as ex:
        got = list(ex.map(lambda i: gen(c1, PROMPTS[i % len(PROMPTS)]), range(8)))
    assert got == [want[i % len(PROMPTS)] for i in range(8)]
    assert lookup_server.metrics()["lumen_spec_drafted_tokens_total"] > \
        m0["lumen_spec_drafted_tokens_total"]


@pytest.fixture(scope="module")
def draft_server():
    # the default model as its own draft (-md): every draft is accepted (batch invariance)
    s = Server("-md", MODEL, "--draft-max", "4")
    yield s
    s.stop()


def test_draft_model_same_text(server, draft_server):
    c0, c1 = client(server), client(draft_server)
    want = [gen(c0, p) for p in PROMPTS[:2]]
    m0 = draft_server.metrics()
    # greedy: the same text with the draft model (the server's default) and without it
    assert [gen(c1, p) for p in PROMPTS[:2]] == want
    assert gen(c1, PROMPTS[0], {"draft_model": False}) == want[0]
    with cf.ThreadPoolExecutor(4) as ex:  # 4 streams at once, drafting in batched rounds
        got = list(ex.map(lambda i: gen(c1, PROMPTS[i % 2]), range(4)))
    assert got == [want[i % 2] for i in range(4)]
    m1 = draft_server.metrics()
    drafted = m1["lumen_spec_drafted_tokens_total"] - m0["lumen_spec_drafted_tokens_total"]
    accepted = m1["lumen_spec_accepted_tokens_total"] - m0["lumen_spec_accepted_tokens_total"]
    assert 0 < drafted and accepted == drafted  # its own draft: all accepted when it drafts
    assert m1["lumen_spec_draft_forwards_total"] > m0["lumen_spec_draft_forwards_total"]
    assert m1["lumen_spec_draft_forward_seconds_total"] > 0
