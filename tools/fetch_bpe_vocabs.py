#!/usr/bin/env python3
# Puts llama.cpp's byte-level BPE (and Unigram nomic-bert-moe) test vocabularies (models/ggml-vocab-<name>.gguf + .inp)
# into models/vocab/ for tests/test_tokenizer_bpe_vocabs.c and tools/gen_golden_bpe_tokens.py.
# They come from llama-cpp-python's sdist on PyPI (pinned in requirements-reference.txt);
# the ones small enough to commit live in tests/data/vocab/ already.
#
# Usage: python3 tools/fetch_bpe_vocabs.py [--sdist llama_cpp_python-0.3.36.tar.gz]
# Idempotent: does nothing when every file is present.
import os
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIN = "llama-cpp-python==0.3.36"
NAMES = ["llama-bpe", "qwen2", "starcoder", "falcon", "mpt", "nomic-bert-moe"]
NO_INP = {"nomic-bert-moe"}  # llama.cpp ships no .inp for it
OUT = os.path.join(ROOT, "models/vocab")


def main():
    want = []
    for n in NAMES:
        for ext in (".gguf",) if n in NO_INP else (".gguf", ".gguf.inp"):
            f = "ggml-vocab-%s%s" % (n, ext)
            if not os.path.exists(os.path.join(OUT, f)):
                want.append(f)
    if not want:
        print("fetch_bpe_vocabs: models/vocab/ complete")
        return
    sdist = None
    if len(sys.argv) == 3 and sys.argv[1] == "--sdist":
        sdist = sys.argv[2]
    tmp = tempfile.mkdtemp()
    if not sdist:
        print("fetch_bpe_vocabs: downloading the %s sdist (~75 MB)" % PIN)
        subprocess.check_call([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
                               "-d", tmp, PIN])
        sdist = os.path.join(tmp, [f for f in os.listdir(tmp) if f.endswith(".tar.gz")][0])
    os.makedirs(OUT, exist_ok=True)
    with tarfile.open(sdist) as tf:
        members = {os.path.basename(m.name): m for m in tf.getmembers()
                   if "/vendor/llama.cpp/models/ggml-vocab-" in m.name}
        for f in want:
            if f not in members:
                raise SystemExit("fetch_bpe_vocabs: %s not in %s" % (f, sdist))
            data = tf.extractfile(members[f]).read()
            part = os.path.join(OUT, f + ".part")
            with open(part, "wb") as o:
                o.write(data)
            os.replace(part, os.path.join(OUT, f))
            print("fetch_bpe_vocabs: wrote models/vocab/%s (%d bytes)" % (f, len(data)))


if __name__ == "__main__":
    main()
