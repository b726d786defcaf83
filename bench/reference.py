#!/usr/bin/env python3
"""Where llama.cpp's own command-line tools are: `bash scripts/setup.sh --reference` builds them
(llama-batched-bench, llama-bench, llama-server, llama-perplexity, llama-lookup, llama-cli) from
the llama.cpp tree vendored in the pinned llama-cpp-python sdist into .reference/bin.

    import reference                      # bench scripts run as .venv/bin/python bench/x.py
    exe = reference.tool("llama-batched-bench")

$LUMEN_REFERENCE_BIN points at another folder of them (e.g. another checkout's .reference/bin).
`python bench/reference.py` lists the tools and the version they were built from.
"""
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETUP_HINT = "run: bash scripts/setup.sh --reference"


class ReferenceMissing(RuntimeError):
    """A llama.cpp tool is missing or was built from another version than the pinned one."""


def pinned() -> str:
    """'llama-cpp-python==X.Y.Z' from requirements-reference.txt (the one place it is written)."""
    req = ROOT / "requirements-reference.txt"
    for line in req.read_text(encoding="utf-8").splitlines():
        m = re.match(r"(llama[-_]cpp[-_]python==[^;]+)", re.sub(r"\s+", "", line.split("#", 1)[0]))
        if m:
            return m.group(1)
    raise ReferenceMissing("%s has no 'llama-cpp-python==VERSION' line" % req)


def bin_dir() -> Path:
    env = os.environ.get("LUMEN_REFERENCE_BIN")
    return Path(env) if env else ROOT / ".reference" / "bin"


def built_from() -> str:
    """The pin the tools in bin_dir() were built from ('' when there is no stamp)."""
    try:
        return (bin_dir() / "VERSION").read_text(encoding="utf-8").split()[0]
    except (OSError, IndexError):
        return ""


def tool(name: str) -> str:
    """Absolute path of llama.cpp tool `name` (e.g. 'llama-batched-bench'); raises
    ReferenceMissing, saying how to build it, when it is absent or stale."""
    d = bin_dir()
    exe = d / name
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        raise ReferenceMissing("llama.cpp tool '%s' not found in %s; %s" % (name, d, SETUP_HINT))
    want, have = pinned(), built_from()
    if have != want:
        raise ReferenceMissing("llama.cpp tools in %s were built from %s, requirements-reference.txt "
                               "pins %s; %s" % (d, have or "an unknown version", want, SETUP_HINT))
    return str(exe)


def main():
    d = bin_dir()
    tools = sorted(p.name for p in d.glob("llama-*")) if d.is_dir() else []
    if not tools:
        sys.exit("reference: no llama.cpp tools in %s; %s" % (d, SETUP_HINT))
    print("%s (built from %s; pinned %s)" % (d, built_from() or "?", pinned()))
    for t in tools:
        print("  " + t)


if __name__ == "__main__":
    main()
