"""The schema corpus (tests/data/schemas/*.json: {"schema", "valid"}) through lumen's
converter (schema_to_gbnf): (a) llama.cpp's own grammar parser accepts the GBNF (through
llama_cpp, on a vocab-only model), (b) random sentences of the grammar parse as JSON and
validate with `jsonschema` (formats checked), (c) every valid example, serialized as the
grammar spaces JSON (json.dumps defaults), is a sentence of the grammar, and every text listed
under "refuse" (edge cases: numbers that read back as a double equal to an exclusive bound)
is not."""
import datetime
import glob
import json
import os
import random
import re
import subprocess
import sys

import jsonschema
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import gbnf_py  # noqa: E402

ROOT = os.environ.get("LUMEN_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
TOOL = os.environ.get("LUMEN_SCHEMA_TO_GBNF", os.path.join(ROOT, "build", "schema_to_gbnf"))
N_SAMPLES = int(os.environ.get("LUMEN_SCHEMA_SAMPLES", "40"))


def _cases():
    """(id, case, samples): our own schemas one per file; the JSON-Schema-Test-Suite's groups
    (tests/data/schemas/jsts/*.json, lists) with fewer samples each."""
    out = []
    for f in sorted(glob.glob(os.path.join(ROOT, "tests", "data", "schemas", "*.json"))):
        out.append((os.path.basename(f)[:-5], json.load(open(f, encoding="utf-8")), N_SAMPLES))
    for f in sorted(glob.glob(os.path.join(ROOT, "tests", "data", "schemas", "jsts", "*.json"))):
        for i, case in enumerate(json.load(open(f, encoding="utf-8"))):
            out.append(("jsts-%s-%d" % (os.path.basename(f)[:-5], i), case, max(1, N_SAMPLES // 4)))
    return out


CASES = _cases()
sys.setrecursionlimit(20000)


def convert(schema_text):
    r = subprocess.run([TOOL, "-"], input=schema_text.encode(), capture_output=True, timeout=20)
    if r.returncode != 0:
        raise AssertionError("schema_to_gbnf failed: " + r.stderr.decode())
    return r.stdout.decode()


# ---- llama.cpp's grammar parser, through llama_cpp on a vocab-only model
_vocab = None
_quiet = None


def llama_vocab():
    """llama_cpp and a vocabulary, or None: llama-cpp-python is a reference package
    (scripts/setup.sh --reference), and the suite runs without it: then this check is left out
    and the rest of each case still runs."""
    global _vocab
    if _vocab is None:
        try:
            import llama_cpp
        except ImportError:
            _vocab = False
            return None
        model = os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf")
        if not os.path.exists(model):
            _vocab = False
            return None
        global _quiet
        _quiet = llama_cpp.llama_log_callback(lambda *a: None)  # kept alive: C holds it
        llama_cpp.llama_log_set(_quiet, None)
        p = llama_cpp.llama_model_default_params()
        p.vocab_only = True
        m = llama_cpp.llama_model_load_from_file(model.encode(), p)
        assert m
        _vocab = (llama_cpp, m, llama_cpp.llama_model_get_vocab(m))
    return _vocab or None


def llama_parses(gbnf):
    """Whether llama.cpp's grammar parser accepts gbnf (True when llama_cpp is not installed)."""
    if not llama_vocab():
        return True
    lc, _, vocab = _vocab
    s = lc.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root")
    if not s:
        return False
    lc.llama_sampler_free(s)
    return True


# ---- formats jsonschema cannot check here (no rfc3339 package): RFC 3339 by hand
_TIME = re.compile(r"^(\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-](\d\d):(\d\d))$")
checker = jsonschema.FormatChecker()


@checker.checks("time")
def _time(s):
    m = _TIME.match(s) if isinstance(s, str) else None
    if not isinstance(s, str):
        return True
    return bool(m) and int(m[1]) < 24 and int(m[2]) < 60 and int(m[3]) < 60 and \
        (m[6] is None or (int(m[6]) < 24 and int(m[7]) < 60))


@checker.checks("date-time")
def _date_time(s):
    if not isinstance(s, str):
        return True
    d, sep, t = s.partition("T")
    if not sep:
        return False
    try:
        datetime.date.fromisoformat(d)
    except ValueError:
        return False
    return len(d) == 10 and _time(t)


def validator(schema):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=checker)


def dumps(v):
    return json.dumps(v, ensure_ascii=False)


@pytest.mark.parametrize("name,case,samples", CASES, ids=[c[0] for c in CASES])
def test_schema(name, case, samples):
    schema = case["schema"]
    gbnf = convert(json.dumps(schema, ensure_ascii=False))
    assert llama_parses(gbnf), "llama.cpp refuses the grammar:\n" + gbnf
    g = gbnf_py.Grammar(gbnf)
    v = validator(schema)
    rng = random.Random(name)
    for _ in range(samples):
        text = g.generate(rng)
        try:
            inst = json.loads(text)
        except ValueError as e:
            raise AssertionError("not JSON: %r (%s)\n%s" % (text, e, gbnf))
        errs = list(v.iter_errors(inst))
        assert not errs, "sentence %r is invalid: %s\n%s" % (text, errs[0].message, gbnf)
        assert g.match(text), "the matcher refuses a generated sentence %r" % text
    for text in case.get("refuse", []):  # texts the grammar must not produce
        assert not g.match(text), "grammar accepts %r\n%s" % (text, gbnf)
    for inst in case["valid"]:
        assert not list(v.iter_errors(inst)), "corpus error: %r is not valid" % (inst,)
        assert g.match(dumps(inst)), "grammar refuses valid %s\n%s" % (dumps(inst), gbnf)


def _rand_bound(rng):
    k = rng.choice([0, 0, 1, 2, 3])
    v = round(rng.uniform(-300, 300), k)
    return int(v) if k == 0 else v


def test_number_bounds_random():
    """Random decimal/integer bounds, inclusive or not, on numbers and integers: a candidate
    the grammar accepts validates (soundness); one well inside the bounds is accepted."""
    rng = random.Random(23)
    for trial in range(80):
        schema = {"type": rng.choice(["number", "integer"])}
        for key in rng.sample(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"], rng.randint(1, 2)):
            schema[key] = _rand_bound(rng)
        try:
            gbnf = convert(json.dumps(schema))
        except AssertionError as e:
            assert "satisfies the bounds" in str(e), str(e)
            continue
        g = gbnf_py.Grammar(gbnf)
        v = validator(schema)
        lo = max([schema[k] for k in ("minimum", "exclusiveMinimum") if k in schema] or [-1e9])
        hi = min([schema[k] for k in ("maximum", "exclusiveMaximum") if k in schema] or [1e9])
        cands = set()
        for b in [schema[k] for k in schema if k != "type"]:
            for d in (0, 1e-15, 1e-9, 0.001, 0.5, 1, 7):
                for x in (b - d, b + d):
                    cands.update({repr(x), "%.3f" % x, "%d" % round(x), "%.17f" % x})
        for _ in range(20):
            cands.add("%.*f" % (rng.randint(0, 4), rng.uniform(lo - 5, hi + 5) if hi < 1e8 else rng.uniform(-500, 500)))
        for t in cands:
            if "e" in t or t in ("-0", "nan", "inf"):
                continue
            t = t.rstrip("0").rstrip(".") if "." in t and schema["type"] == "integer" else t
            x = json.loads(t)
            ok = not list(v.iter_errors(x))
            if g.match(t):
                assert ok, "%s: grammar accepts %s, invalid\n%s" % (schema, t, gbnf)
                continue
            canonical = re.fullmatch(r"-?(0|[1-9]\d{0,15})(\.\d{1,10})?", t) and \
                (schema["type"] == "number" or "." not in t) and not (t[0] == "-" and float(t) == 0)
            if ok and canonical and lo + 1e-9 < x < hi - 1e-9:
                raise AssertionError("%s: grammar refuses %s, valid\n%s" % (schema, t, gbnf))
