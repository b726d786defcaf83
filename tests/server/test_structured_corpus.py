"""The schema corpus (tests/data/schemas/*.json) through lumen serve with the real model: each
schema as response_format json_schema, greedy and sampled; every answer that ends ("stop") parses
and validates with `jsonschema` (formats checked), and an answer cut by max_tokens says "length".
The full corpus is marked slow; the default run takes a fixed sample of it (every 4th schema)."""
import json
from pathlib import Path

import jsonschema
import pytest

from conftest import QUICK, client

SCHEMAS = sorted((Path(__file__).resolve().parents[1] / "data" / "schemas").glob("*.json"))
SAMPLE = SCHEMAS[::8] if QUICK else SCHEMAS[::4]
FORMATS = jsonschema.Draft202012Validator.FORMAT_CHECKER


def ask(c, schema, name, temperature, seed):
    r = c.chat.completions.create(
        model="lumen", max_tokens=160, temperature=temperature, seed=seed,
        messages=[{"role": "user", "content": "Write one example of %s as JSON." % name}],
        response_format={"type": "json_schema",
                         "json_schema": {"name": "corpus", "schema": schema, "strict": True}})
    return r.choices[0]


def check(path, c):
    schema = json.loads(path.read_text())["schema"]
    for temperature, seed in ((0.0, 0), (0.9, 7)):
        ch = ask(c, schema, path.stem.replace("_", " "), temperature, seed)
        if ch.finish_reason == "length":  # documented: the JSON is cut, incomplete
            continue
        assert ch.finish_reason == "stop", (path.name, ch.finish_reason)
        value = json.loads(ch.message.content)
        jsonschema.validate(value, schema, format_checker=FORMATS)


@pytest.mark.parametrize("path", SAMPLE, ids=lambda p: p.stem)
def test_corpus_sample(server, path):
    check(path, client(server))


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in SCHEMAS if p not in SAMPLE], ids=lambda p: p.stem)
def test_corpus_rest(server, path):
    check(path, client(server))


def test_forced_tokens_counted(server):
    """Jump-forward shows in /metrics: a schema whose keys the grammar forces adds forced tokens."""
    schema = {"type": "object", "additionalProperties": False, "required": ["first_name", "last_name"],
              "properties": {"first_name": {"type": "string", "maxLength": 12},
                             "last_name": {"type": "string", "maxLength": 12}}}
    m0 = server.metrics()["lumen_grammar_forced_tokens_total"]
    ch = ask(client(server), schema, "a person", 0.0, 0)
    jsonschema.validate(json.loads(ch.message.content), schema)
    assert server.metrics()["lumen_grammar_forced_tokens_total"] > m0
