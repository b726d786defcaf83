#!/usr/bin/env python3
"""The docs name what exists: every repository path, file and code name that README.md and
docs/*.md mention is in the tree. Reported as DOC:LINE: missing path|file|name 'X', exit 1.

  check_docs.py [ROOT]     ROOT: the repository (default: this script's parent's parent)

Paths: words under a top folder of the repository (src/, include/, tests/, bench/, tools/,
docs/, deploy/, fuzz/, scripts/, cmake/) or under a folder of src/ (runtime/engine.c is
src/runtime/engine.c), ending in an extension or a slash; globs (bench/results/x-*.md)
must match something. Files: a bare C file name (util.c) is some file's name, or one the
build writes (named in CMakeLists.txt or cmake/). Names, in backticks: an `lm_` / `LM_` /
`LUMEN_` identifier or a call form `name(...)`, and in docs/architecture.md any snake_case
identifier; in ```c blocks, calls and fields. Functions (`lm_x`, `x(...)`, code blocks)
are looked up as words of src/ and include/, other names (settings, targets) in the tree's
sources.
"""
import glob
import os
import re
import sys

TOP = ("src", "include", "tests", "bench", "tools", "docs", "deploy", "fuzz", "scripts", "cmake")
C_WORDS = {"if", "for", "while", "switch", "return", "sizeof", "defined"}

# a path-like word: not inside a longer word, a URL or a ~/ or ./ path
PATH_RE = re.compile(r"(?<![\w./~-])([A-Za-z_][\w.-]*/(?:[\w.*-]+/)*[\w.*-]*)")
# a bare C file name (util.c, kernels.h): some file of the tree has it
BARE_RE = re.compile(r"(?<![\w./-])([a-z][a-z0-9_]*\.[ch])\b(?![\w/-])")
TICK_RE = re.compile(r"`([^`\n]+)`")
IDENT_RE = re.compile(r"\b(?:lm|LM|LUMEN)_\w+")
CALL_RE = re.compile(r"^([A-Za-z_]\w*)\(.*\)$")
SNAKE_RE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$")
CODE_CALL_RE = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
FIELD_RE = re.compile(r"(?:->|\.)([a-z_]\w*)\b")


def words_in(root, tops):
    """Every identifier-like word in the files under ROOT/top for each top (a file or folder)."""
    words = set()
    for top in tops:
        top = os.path.join(root, top)
        files = [top] if os.path.isfile(top) else \
            [os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs]
        for f in files:
            if f.endswith((".c", ".h", ".py", ".sh", ".txt", ".cmake", ".html", ".js", ".css",
                           "run")):
                with open(f, encoding="utf-8", errors="replace") as fh:
                    words.update(re.findall(r"\w+", fh.read()))
    return words


def generated(root):
    """File names the build writes (named in CMakeLists.txt or cmake/*.cmake)."""
    text = ""
    files = [os.path.join(root, "CMakeLists.txt")] + glob.glob(os.path.join(root, "cmake", "*.cmake"))
    for f in files:
        if os.path.isfile(f):
            with open(f, encoding="utf-8", errors="replace") as fh:
                text += fh.read()
    return set(re.findall(r"[A-Za-z0-9_]+\.[ch]\b", text))


def src_dirs(root):
    src = os.path.join(root, "src")
    return {d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))} if os.path.isdir(src) else set()


def path_exists(root, p):
    """p names a file or folder of the tree (relative to ROOT, or to src/ for src's folders);
    None: p is not a repository path."""
    first = p.split("/", 1)[0]
    bases = []
    if first in TOP: bases.append(root)
    if first in src_dirs(root): bases.append(os.path.join(root, "src"))
    if not bases: return None
    for b in bases:
        full = os.path.join(b, p)
        if "*" in p:
            if glob.glob(full): return True
        elif os.path.exists(full):
            return True
    return False


def check_line(root, words, doc, ln, line, strict, missing):
    """words: (code, tree, names): the words of src/ + include/, of the whole tree's sources,
    and the tree's file names."""
    code, tree, names = words
    for m in BARE_RE.finditer(line):
        if m.group(1) not in names:
            missing.append(f"{doc}:{ln}: missing file '{m.group(1)}'")
    for m in PATH_RE.finditer(line):
        if line[m.end():m.end() + 1] == "<": continue  # a pattern: src/models/<arch>.cpp
        p = m.group(1).rstrip(".,:;")
        tail = p.rsplit("/", 1)[1]
        if tail and not re.search(r"\.\w+$", tail): continue  # prose like prefill/decode
        if path_exists(root, p) is False:
            missing.append(f"{doc}:{ln}: missing path '{p}'")
    for m in TICK_RE.finditer(line):
        span = m.group(1).strip()
        names = set(IDENT_RE.findall(span))
        c = CALL_RE.match(span)
        if c: names.add(c.group(1))
        if strict and SNAKE_RE.match(span): names.add(span)
        for n in sorted(names):
            # functions are code; LM_ / LUMEN_ settings and other names may live in the
            # build, the scripts or the tests
            where = code if n.startswith("lm_") or (c and n == c.group(1)) else tree
            if n not in where:
                missing.append(f"{doc}:{ln}: missing name '{n}'")


def check_code(words, doc, ln, line, missing):
    code = line.split("//", 1)[0]
    names = {n for n in CODE_CALL_RE.findall(code) if n not in C_WORDS}
    names |= set(FIELD_RE.findall(code))
    for n in sorted(names):
        if n not in words:
            missing.append(f"{doc}:{ln}: missing name '{n}'")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(here)
    words = (words_in(root, ("src", "include")),
             words_in(root, ("src", "include", "CMakeLists.txt", "cmake", "scripts", "tests", ".ci",
                             "bench", "tools", "fuzz", "deploy")),
             {f for top in ("src", "include", "tests", "bench", "tools", "fuzz")
              for _, _, fs in os.walk(os.path.join(root, top)) for f in fs} | generated(root))
    docs = ["README.md"] + sorted(os.path.relpath(p, root)
                                  for p in glob.glob(os.path.join(root, "docs", "*.md")))
    missing = []
    for doc in docs:
        path = os.path.join(root, doc)
        if not os.path.exists(path): continue
        strict = doc == os.path.join("docs", "architecture.md")
        fence = None
        with open(path, encoding="utf-8") as fh:
            for ln, line in enumerate(fh, 1):
                if line.lstrip().startswith("```"):
                    fence = None if fence is not None else line.strip()[3:].strip()
                    continue
                if fence is None:
                    check_line(root, words, doc, ln, line, strict, missing)
                elif fence == "c":
                    check_code(words[0], doc, ln, line, missing)
    for m in missing: print(m)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
