#!/usr/bin/env python3
"""No circles between the files of a folder of src/ (docs/architecture.md): file A depends on
file B of its folder when A's object file references a symbol (function or variable) that B's
defines, read with nm from a build tree, so a header declaring the functions of many .c files
(runtime/engine.h) adds no false edge, and a call the compiler kept is an edge whatever the
build type (Release, ASan, TSan trees alike). Each circle is reported as a file chain with the
symbols of each link; exit 1 when one is not in EXCEPTIONS, or when an exception no longer
matches (the list only shrinks).

  check_cycles.py BUILD_DIR [--allow FOLDER:A.c,B.c ...]

BUILD_DIR: a CMake build tree of this repository (its CMakeFiles/<target>.dir/src/<folder>/
*.c.o). --allow adds an exception (tests/test_layers.sh proves the rule with it).
"""
import glob
import os
import subprocess
import sys
from collections import defaultdict

# Circles allowed, each as its folder and the set of files of one strongly connected component
# ({"folder": [{"a.c", "b.c"}]}): a component found must be listed exactly, and a listed one must
# still be found, so the list can only shrink. There are none: keep it that way.
EXCEPTIONS = {}

# nm -P types: defined globals, and references (U; lowercase w / v: an undefined weak symbol)
DEFINED = set("TDBRCGSVWi")
REFERENCED = set("Uwv")


def source_dir(build):
    """The tree the build was configured from (CMakeCache.txt), or None."""
    try:
        with open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("CMAKE_HOME_DIRECTORY:"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return None


def objects(build):
    """{(folder, file.c): [object paths]} of every target's src/ objects in the build tree,
    but those whose source is gone (a renamed file's object stays in the tree)."""
    found, src = defaultdict(list), source_dir(build)
    for o in glob.glob(os.path.join(build, "CMakeFiles", "*.dir", "src", "**", "*.c.o"), recursive=True):
        rel = o.split(os.sep + "src" + os.sep, 1)[1]  # folder/.../file.c.o
        if src and not os.path.exists(os.path.join(src, "src", rel[:-2])):
            continue
        parts = rel.split(os.sep)
        found[(parts[0], "/".join(parts[1:])[:-2])].append(o)
    return found


def symbols(paths):
    """{object path: (defined set, referenced set)} from one nm run."""
    out = subprocess.run(["nm", "-P", "-A"] + paths, capture_output=True, text=True, check=True).stdout
    syms = {p: (set(), set()) for p in paths}
    for line in out.splitlines():
        head, _, rest = line.rpartition(": ")
        f = rest.split()
        if len(f) < 2 or head not in syms:
            continue
        name, kind = f[0], f[1]
        if kind in DEFINED:
            syms[head][0].add(name)
        elif kind in REFERENCED:
            syms[head][1].add(name)
    return syms


def graph(build):
    """{folder: {file: {dep file: [symbols]}}}."""
    objs = objects(build)
    if not objs:
        return None
    syms = symbols(sorted(p for ps in objs.values() for p in ps))
    defs, refs = defaultdict(set), defaultdict(set)
    for key, ps in objs.items():
        for p in ps:  # a file built into several targets: the union
            defs[key] |= syms[p][0]
            refs[key] |= syms[p][1]
    by_folder = defaultdict(dict)
    for (folder, f) in objs:
        by_folder[folder][f] = defaultdict(list)
    owner = defaultdict(dict)  # folder -> symbol -> file
    for (folder, f), ds in defs.items():
        for s in ds:
            owner[folder][s] = f
    for (folder, f), rs in refs.items():
        for s in sorted(rs):
            g = owner[folder].get(s)
            if g and g != f:
                by_folder[folder][f][g].append(s)
    return by_folder


def components(edges):
    """Strongly connected components of more than one file (Tarjan, iterative)."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = n[0]
        n[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n[0]
                    n[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def shortest(edges, comp, a, b):
    """The shortest path a -> ... -> b inside comp (breadth first), as a list of files."""
    prev, todo = {a: None}, [a]
    while todo:
        nxt = []
        for v in todo:
            for w in sorted(edges[v]):
                if w in comp and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        todo = nxt
    path, v = [], b
    while v is not None:
        path.append(v)
        v = prev[v]
    return path[::-1]


def cycles(edges, comp):
    """Chains that cover every link of the component: for each link a -> b, b's shortest way
    back to a; each circle once (rotated to start at its least file)."""
    seen, out = set(), []
    for a in sorted(comp):
        for b in sorted(edges[a]):
            if b not in comp:
                continue
            c = [a] + shortest(edges, comp, b, a)[:-1]
            i = c.index(min(c))
            c = c[i:] + c[:i]
            if tuple(c) not in seen:
                seen.add(tuple(c))
                out.append(c)
    return out


def chain(edges, c):
    links = []
    for a, b in zip(c, c[1:] + c[:1]):
        s = edges[a][b]
        links.append(f"{a} -({', '.join(s[:2])}{', ...' if len(s) > 2 else ''})-> ")
    return "".join(links) + c[0]


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__.strip())
        return 2
    build, allow = args[0], {k: [set(x) for x in v] for k, v in EXCEPTIONS.items()}
    i = 1
    while i < len(args):
        if args[i] != "--allow" or i + 1 >= len(args) or ":" not in args[i + 1]:
            print(f"check_cycles: unexpected argument '{args[i]}' (--allow FOLDER:A.c,B.c)")
            return 2
        folder, files = args[i + 1].split(":", 1)
        allow.setdefault(folder, []).append(set(files.split(",")))
        i += 2
    g = graph(build)
    if g is None:
        print(f"check_cycles: no object files under {build}/CMakeFiles/*.dir/src/ (build first)")
        return 1
    bad, allowed, used = [], 0, set()
    for folder in sorted(g):
        edges = g[folder]
        for comp in components(edges):
            ok = comp in allow.get(folder, [])
            if ok:
                allowed += 1
                used.add((folder, frozenset(comp)))
                continue
            bad.append(f"src/{folder}: a circle between {len(comp)} files: {', '.join(sorted(comp))}")
            for c in cycles(edges, comp):
                bad.append(f"  {folder}/: {chain(edges, c)}")
    for folder, comps in sorted(allow.items()):
        for comp in comps if folder in g else []:  # a folder this tree did not build: unknown
            if (folder, frozenset(comp)) not in used:
                bad.append(f"src/{folder}: the exception {{{', '.join(sorted(comp))}}} is no longer a "
                           f"circle: remove it from tools/check_cycles.py's EXCEPTIONS (or shrink it "
                           f"to the circle found)")
    n_files = sum(len(v) for v in g.values())
    for b in bad:
        print(b)
    if bad:
        print(f"check_cycles: {len(bad)} problem line(s) in {n_files} files of {build}")
        return 1
    print(f"check_cycles: {n_files} files in {len(g)} folders, no circle between files"
          + (f" but the {allowed} listed exception(s)" if allowed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
