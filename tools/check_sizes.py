#!/usr/bin/env python3
"""Size limits (docs/architecture.md): every .c/.h under src/, tests/, bench/c/ and fuzz/ is at
most 700 lines, and every C function in them at most 150 lines, generated tables excepted (the
EXCEPTIONS list). Each failure is printed as FILE:LINE: ..., and the exit status is 1.

  check_sizes.py [ROOT]

ROOT: the repository (default: this script's parent). Its files are the ones git tracks there;
outside a git work tree (tests/test_layers.sh's temporary tree) every file found counts.
A function is found the way this code base writes one (K&R braces): a definition that starts
at column 0, whose header (one or more lines, a '(' before any '=') ends in '{', and whose body
ends at the next '}' at column 0 (or on the header's last line: a one-line body). Its length
counts the header's first line to that brace.
"""
import os
import re
import subprocess
import sys

MAX_FILE_LINES = 700
MAX_FUNC_LINES = 150
DIRS = ("src/", "tests/", "bench/c/", "fuzz/")

# Generated tables exempt from the limits, as {repository path: why}. Checked:
# src/tokenizer/bpe_unicode.c (generated, 384 lines, its functions short) and
# src/bench/breakdown_tables.c pass as they are, so there are none: keep it that way.
EXCEPTIONS = {}

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# column-0 lines that never open a function definition
NOT_A_HEADER = re.compile(r"^(#|//|/\*|\*|\}|typedef\b|extern\s+\"C\")")


def tracked_files(root):
    """Repository paths of the checked .c/.h files: git's list, or a walk outside git."""
    try:
        top = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, check=True).stdout.strip()
        if os.path.realpath(top) == os.path.realpath(root):
            out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--", *DIRS],
                                 capture_output=True, text=True, check=True).stdout
            return sorted(p for p in out.split("\0") if p.endswith((".c", ".h")))
    except (OSError, subprocess.CalledProcessError):
        pass
    paths = []
    for d in DIRS:
        for dirpath, _, names in os.walk(os.path.join(root, d)):
            for n in names:
                if n.endswith((".c", ".h")):
                    paths.append(os.path.relpath(os.path.join(dirpath, n), root))
    return sorted(p.replace(os.sep, "/") for p in paths)


def function_name(header):
    """The name defined by a function header: the identifier before its first '(' at
    depth 0, or after the '*' of 'int (*pick(int k))(void)' (None when the header is not a
    function: no '(', or an '=' before it, as in a table 'static int (*fns[])(void) = {')."""
    header = header.split("{")[0]
    if "=" in header:
        return None
    for i, ch in enumerate(header):
        if ch == "(":
            rest = header[i + 1:].lstrip()
            if rest.startswith("*"):
                m = IDENT.match(rest[1:].lstrip())
                return function_name(rest[1:]) if m else None
            names = IDENT.findall(header[:i])
            return names[-1] if names else None
    return None


def functions(lines):
    """(first line number, name, length in lines) of each function definition in lines."""
    found = []
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if not line[:1] or not (line[0].isalpha() or line[0] == "_") or NOT_A_HEADER.match(line):
            i += 1
            continue
        # gather the header up to its '{' (a definition) or ';' (a declaration, a table)
        start, header, j = i, "", i
        while j < n:
            if j > start and (not lines[j].strip() or lines[j].startswith("#")):
                j -= 1  # a macro call line ('AMX_DEF(name, 4)'), not a header: no '{' came
                break
            text = lines[j].split("//")[0].rstrip()
            header += " " + text
            if text.endswith(("{", ";", "}")):
                break
            j += 1
        header = header.rstrip()
        name = function_name(header) if header.endswith(("{", "}")) else None
        if name is None:
            i = j + 1
            continue
        if header.endswith("}"):  # a one-line body: 'static int f(void) { return 1; }'
            found.append((start + 1, name, j - start + 1))
            i = j + 1
            continue
        k = j + 1
        while k < n and not lines[k].startswith("}"):
            k += 1
        found.append((start + 1, name, k - start + 1))
        i = k + 1
    return found


def check(root):
    """(failures, files checked, functions checked)."""
    failures, n_files, n_funcs = [], 0, 0
    for path in tracked_files(root):
        if path in EXCEPTIONS:
            continue
        try:
            with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                lines = f.read().split("\n")
        except OSError as e:
            failures.append(f"{path}:1: cannot read ({e.strerror})")
            continue
        n_lines = len(lines) - 1 if lines and lines[-1] == "" else len(lines)
        if n_lines > MAX_FILE_LINES:
            failures.append(f"{path}:1: file is {n_lines} lines (limit {MAX_FILE_LINES})")
        n_files += 1
        for line_no, name, length in functions(lines):
            n_funcs += 1
            if length > MAX_FUNC_LINES:
                failures.append(f"{path}:{line_no}: function {name} is {length} lines "
                                f"(limit {MAX_FUNC_LINES})")
    return failures, n_files, n_funcs


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    failures, n_files, n_funcs = check(root)
    for f in failures:
        print(f)
    if not failures:
        print(f"check_sizes: {n_files} files, {n_funcs} functions, none over {MAX_FILE_LINES} / "
              f"{MAX_FUNC_LINES} lines")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
