"""lumen serve through the official `openai` client: completions and chat, streamed and
whole, stop strings, max_tokens, seeds, logprobs, usage, concurrency and batch invariance
end to end."""
import concurrent.futures as cf

from conftest import QUICK, client

N_GEN = 12 if QUICK else 24
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "The three primary colors are",
    "def fibonacci(n):",
    "The most important invention of the 20th century was",
    "Water boils at",
    "In 1492, Christopher Columbus",
    "My favourite recipe for pancakes starts with",
    "The quick brown fox",
    "Photosynthesis is the process by which",
    "The largest planet in our solar system is",
    "To be or not to be,",
    "A haiku about autumn:",
    "The stock market today",
    "Machine learning is",
    "The first rule of programming is",
]


def complete(c, prompt, **kw):
    kw.setdefault("max_tokens", N_GEN)
    kw.setdefault("temperature", 0)
    return c.completions.create(model="lumen", prompt=prompt, **kw)


def stream_complete(c, prompt, **kw):
    """Text, finish reasons of the chunks, ids, and the usage chunk of a streamed completion."""
    kw.setdefault("max_tokens", N_GEN)
    kw.setdefault("temperature", 0)
    text, finishes, ids, usage = "", [], set(), None
    for ch in c.completions.create(model="lumen", prompt=prompt, stream=True, **kw):
        ids.add(ch.id)
        if ch.usage is not None:
            usage = ch.usage
        for choice in ch.choices:
            text += choice.text
            if choice.finish_reason is not None:
                finishes.append(choice.finish_reason)
    return text, finishes, ids, usage


def test_completion_basic(server):
    c = client(server)
    r = complete(c, PROMPTS[0])
    assert r.object == "text_completion" and r.id.startswith("cmpl-")
    assert len(r.choices) == 1 and r.choices[0].text
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens == 6  # <bos> + 5 words (checked against /tokenize below)
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_stream_equals_whole_completions(server):
    c = client(server)
    for p in PROMPTS[:3]:
        whole = complete(c, p)
        text, finishes, ids, usage = stream_complete(c, p, stream_options={"include_usage": True})
        assert text == whole.choices[0].text
        assert finishes == [whole.choices[0].finish_reason]  # exactly one chunk with a finish reason
        assert len(ids) == 1  # one id per stream
        assert usage.completion_tokens == whole.usage.completion_tokens
        assert usage.prompt_tokens == whole.usage.prompt_tokens


def test_stream_equals_whole_chat(server):
    c = client(server)
    msgs = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Name a color."}]
    whole = c.chat.completions.create(model="lumen", messages=msgs, max_tokens=N_GEN, temperature=0)
    assert whole.object == "chat.completion" and whole.id.startswith("chatcmpl-")
    assert whole.choices[0].message.role == "assistant"
    text, finishes, roles, ids = "", [], [], set()
    for ch in c.chat.completions.create(model="lumen", messages=msgs, max_tokens=N_GEN, temperature=0,
                                        stream=True):
        assert ch.object == "chat.completion.chunk"
        ids.add(ch.id)
        for choice in ch.choices:
            if choice.delta.role:
                roles.append(choice.delta.role)
            text += choice.delta.content or ""
            if choice.finish_reason is not None:
                finishes.append(choice.finish_reason)
    assert text == whole.choices[0].message.content
    assert finishes == [whole.choices[0].finish_reason]
    assert roles == ["assistant"] and len(ids) == 1


def test_chat_usage_matches_template(server):
    """usage.prompt_tokens is the templated prompt's token count (Gemma turns)."""
    c = client(server)
    msgs = [{"role": "user", "content": "Hello there"}]
    r = c.chat.completions.create(model="lumen", messages=msgs, max_tokens=2, temperature=0)
    templ = "<start_of_turn>user\nHello there<end_of_turn>\n<start_of_turn>model\n"
    st, _, tok = server.post("/tokenize", {"content": templ, "add_special": True})
    assert st == 200
    assert r.usage.prompt_tokens == len(tok["tokens"])
    # content parts are joined like a string
    r2 = c.chat.completions.create(model="lumen", max_tokens=2, temperature=0,
                                   messages=[{"role": "user", "content": [{"type": "text", "text": "Hello there"}]}])
    assert r2.usage.prompt_tokens == r.usage.prompt_tokens
    assert r2.choices[0].message.content == r.choices[0].message.content


def test_token_id_prompt(server):
    c = client(server)
    st, _, tok = server.post("/tokenize", {"content": PROMPTS[0], "add_special": True})
    assert st == 200 and tok["tokens"][0] == 2
    a = complete(c, PROMPTS[0])
    b = complete(c, tok["tokens"])
    assert a.choices[0].text == b.choices[0].text
    assert a.usage.prompt_tokens == b.usage.prompt_tokens == len(tok["tokens"])


def test_max_tokens_and_finish_reason(server):
    c = client(server)
    r = complete(c, PROMPTS[1], max_tokens=5, extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 5
    r = c.chat.completions.create(model="lumen", messages=[{"role": "user", "content": "Hi"}],
                                  max_completion_tokens=3, temperature=0, extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3
    # completions default to 16 tokens (OpenAI's default)
    r = c.completions.create(model="lumen", prompt=PROMPTS[1], temperature=0, extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 16


def test_stop_strings(server):
    c = client(server)
    base = complete(c, PROMPTS[0], max_tokens=N_GEN, logprobs=0, extra_body={"ignore_eos": True})
    text = base.choices[0].text
    toks = base.choices[0].logprobs.tokens
    assert "".join(toks) == text
    words = text.split()
    assert len(words) >= 4, text
    for stop in (words[2], " " + words[3], words[1][:2]):
        cut = text.index(stop)
        # the stop string completes with the first token whose pieces reach past cut + len(stop)
        acc, k = "", 0
        while len(acc) < cut + len(stop):
            acc += toks[k]
            k += 1
        for stream in (False, True):
            if stream:
                got, finishes, _, usage = stream_complete(c, PROMPTS[0], stop=[stop], max_tokens=N_GEN,
                                                          stream_options={"include_usage": True},
                                                          extra_body={"ignore_eos": True})
                finish = finishes[0]
                assert len(finishes) == 1
            else:
                r = complete(c, PROMPTS[0], stop=stop, max_tokens=N_GEN, extra_body={"ignore_eos": True})
                got, finish, usage = r.choices[0].text, r.choices[0].finish_reason, r.usage
            assert got == text[:cut], (stop, got)
            assert stop not in got
            assert finish == "stop"
            assert usage.completion_tokens == k, (stop, usage.completion_tokens, k)


def test_logprobs_never_ahead_of_text(server):
    """With a stop string, text that could begin it is held back; so are the logprobs of its
    tokens: every logprob entry goes out in the chunk that releases the start of its token's
    text or later, and the tokens of the stop string itself are never sent (stream or not)."""
    c = client(server)
    base = complete(c, PROMPTS[1], max_tokens=N_GEN, logprobs=0, extra_body={"ignore_eos": True})
    text, toks = base.choices[0].text, base.choices[0].logprobs.tokens
    assert "".join(toks) == text
    k = next(i for i in range(4, len(toks) - 3) if toks[i].strip() and text.find(toks[i]) == len("".join(toks[:i])))
    stop = toks[k] + toks[k + 1] + toks[k + 2]  # three tokens, the first seen first at token k
    cut = len("".join(toks[:k]))
    released, offsets = "", []
    for ch in c.completions.create(model="lumen", prompt=PROMPTS[1], stream=True, max_tokens=N_GEN,
                                   temperature=0, logprobs=0, stop=[stop], extra_body={"ignore_eos": True}):
        for choice in ch.choices:
            released += choice.text
            if choice.logprobs and choice.logprobs.tokens:
                for off in choice.logprobs.text_offset:
                    assert off < len(released), (off, released, choice.logprobs.tokens)  # never ahead
                    offsets.append(off)
    assert released == text[:cut], (stop, released)
    assert len(offsets) == k and all(o < cut for o in offsets), (offsets, cut)
    whole = complete(c, PROMPTS[1], max_tokens=N_GEN, logprobs=0, stop=[stop], extra_body={"ignore_eos": True})
    assert whole.choices[0].text == text[:cut]
    assert whole.choices[0].logprobs.tokens == toks[:k]


def test_seeded_sampling_reproducible(server):
    c = client(server)
    kw = dict(temperature=0.9, top_p=0.95, max_tokens=N_GEN, extra_body={"ignore_eos": True})
    a = complete(c, PROMPTS[2], seed=1234, **kw).choices[0].text
    b = complete(c, PROMPTS[2], seed=1234, **kw).choices[0].text
    s, _, _, _ = stream_complete(c, PROMPTS[2], seed=1234, **kw)
    assert a == b == s
    others = {complete(c, PROMPTS[2], seed=sd, **kw).choices[0].text for sd in (1, 2, 3)}
    assert len(others | {a}) > 1  # different seeds do sample differently


def test_logprobs_completions(server):
    c = client(server)
    r = complete(c, PROMPTS[4], logprobs=3)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == r.usage.completion_tokens
    for tok, val, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert val <= 0
        vals = list(top.values())
        assert len(vals) <= 3 and vals == sorted(vals, reverse=True) and all(v <= 0 for v in vals)
        best = max(top, key=top.get)  # greedy: the sampled token is the most likely one
        assert best == tok and abs(top[best] - val) < 1e-6


def test_logprobs_chat(server):
    c = client(server)
    r = c.chat.completions.create(model="lumen", messages=[{"role": "user", "content": "Count to five."}],
                                  max_tokens=N_GEN, temperature=0, logprobs=True, top_logprobs=5)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for e in content:
        assert e.logprob <= 0
        assert bytes(e.bytes).decode("utf-8", "replace") == e.token or "\ufffd" in e.token
        vals = [t.logprob for t in e.top_logprobs]
        assert len(vals) == 5 and vals == sorted(vals, reverse=True) and all(v <= 0 for v in vals)
        assert e.top_logprobs[0].token == e.token and abs(e.top_logprobs[0].logprob - e.logprob) < 1e-6
    # streamed logprobs are the same tokens
    toks = []
    for ch in c.chat.completions.create(model="lumen", messages=[{"role": "user", "content": "Count to five."}],
                                        max_tokens=N_GEN, temperature=0, logprobs=True, top_logprobs=5,
                                        stream=True):
        for choice in ch.choices:
            if choice.logprobs and choice.logprobs.content:
                toks += [e.token for e in choice.logprobs.content]
    assert toks == [e.token for e in content]


def test_penalties_and_logit_bias(server):
    c = client(server)
    base = complete(c, PROMPTS[0], max_tokens=4, logprobs=0)
    first = base.choices[0].logprobs.tokens[0]
    st, _, tok = server.post("/tokenize", {"content": first})
    assert st == 200 and len(tok["tokens"]) == 1
    r = complete(c, PROMPTS[0], max_tokens=4, logprobs=0, logit_bias={str(tok["tokens"][0]): -100})
    assert r.choices[0].logprobs.tokens[0] != first  # -100 bans the token
    st, _, tok = server.post("/tokenize", {"content": " banana"})
    assert len(tok["tokens"]) == 1
    r = complete(c, PROMPTS[0], max_tokens=2, logit_bias={str(tok["tokens"][0]): 100})
    assert r.choices[0].text.startswith(" banana")
    # penalties change a repetitive greedy continuation
    p = "one one one one one one one one"
    plain = complete(c, p, max_tokens=8).choices[0].text
    pen = complete(c, p, max_tokens=8, frequency_penalty=2.0, presence_penalty=2.0).choices[0].text
    assert plain != pen


def test_models_tokenize_detokenize(server):
    c = client(server)
    models = c.models.list()
    assert len(models.data) == 1
    m = models.data[0]
    assert m.id == "gemma-3-270m-q4_k_m.gguf" and m.owned_by == "lumen"
    assert m.meta["chat_template"] == "gemma" and "architecture" in m.meta["chat_template_source"]
    st, _, t = server.post("/tokenize", {"content": "Hello world", "with_pieces": True})
    assert st == 200 and [p["piece"] for p in t["tokens"]] == ["Hello", " world"]
    st, _, d = server.post("/detokenize", {"tokens": [p["id"] for p in t["tokens"]]})
    assert st == 200 and d == {"content": "Hello world"}
    # a byte-fallback piece that is not UTF-8 on its own comes as bytes
    st, _, t = server.post("/tokenize", {"content": "\U0001f600", "with_pieces": True})
    assert st == 200
    st, _, d = server.post("/detokenize", {"tokens": [p["id"] for p in t["tokens"]]})
    assert d["content"] == "\U0001f600"


def test_concurrent_streams_each_correct(server):
    """8 streams at once: each equals the same request run alone."""
    c = client(server)
    prompts = PROMPTS[:8]
    alone = [complete(c, p).choices[0].text for p in prompts]
    with cf.ThreadPoolExecutor(8) as ex:
        got = list(ex.map(lambda p: stream_complete(c, p)[0], prompts))
    assert got == alone


def test_batch_invariance_end_to_end(server):
    """The same greedy request gives the same text alone and among 15 others."""
    c = client(server)
    target = PROMPTS[5]
    alone = complete(c, target, extra_body={"ignore_eos": True}).choices[0].text
    others = PROMPTS[:5] + PROMPTS[6:] if not QUICK else PROMPTS[:5] + PROMPTS[6:8]
    with cf.ThreadPoolExecutor(len(others) + 1) as ex:
        futs = [ex.submit(complete, c, p, extra_body={"ignore_eos": True}) for p in others[:len(others) // 2]]
        mine = ex.submit(stream_complete, c, target, extra_body={"ignore_eos": True})
        futs += [ex.submit(complete, c, p, extra_body={"ignore_eos": True}) for p in others[len(others) // 2:]]
        text = mine.result()[0]
        for f in futs:
            assert f.result().choices[0].finish_reason == "length"
    assert text == alone
