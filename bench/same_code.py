#!/usr/bin/env python3
"""The machine code of two lumen builds, function by function: which hot functions (the
kernels, the ops, the forward pass) execute the same instructions in both. A change that
moves or renames code should leave them the same; then their speed is the same by
construction, which a shared 2-core host cannot resolve to +-2% by timing (bench/ab.py).

Each function's disassembly (objdump -d) is normalised before it is compared: addresses,
rip-relative constants and call/jump targets' addresses are dropped (code and data moved),
and with --offsets also displacements from a register (a struct that gained a field moves
the ones after it). What still differs is listed with its count of differing lines; a function found under a
new name with the same instructions counts as renamed.

  .venv/bin/python bench/same_code.py OLD NEW [--pattern REGEX] [--offsets] [--rename OLD=NEW]

OLD and NEW are lumen binaries or trees holding build/lumen. The default pattern covers the
kernels, the ops and the forward pass. Exit 0 when every compared function is the same.
"""
import argparse
import os
import re
import subprocess
import sys
from difflib import SequenceMatcher

DEFAULT = (r"^(lm_(il|vec_dot|gemm|gemv|quant|dequant|rows|attn|op|matmul|fwd|forward|decoder_forward|"
           r"rmsnorm|rope|softmax|topk|act|kv_cache_write)|forward_worker|il_|dot_|gemm_|quant_)")
HEAD = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")


def binary(p):
    b = os.path.join(p, "build", "lumen") if os.path.isdir(p) else p
    if not os.access(b, os.X_OK):
        sys.exit(f"same_code: {b} is not an executable")
    return b


def functions(path, offsets, renames, bodies):
    """{name: normalised instructions}; every (name, instructions) also goes to bodies."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-M", "att", path],
                         check=True, capture_output=True, text=True).stdout
    funcs, name, raw, body = {}, None, None, None
    for line in out.splitlines():
        m = HEAD.match(line)
        if m:  # static functions of one name in several files: the first is compared by name
            raw = m.group(1)
            name = renames.get(raw, raw)
            body = []
            funcs.setdefault(name, body)
            bodies.append((name, body))
            continue
        if name is None or "\t" not in line:
            continue
        ins = line.split("\t", 1)[1]
        ins = re.sub(r"\s*#.*$", "", ins)                          # objdump's comments
        ins = re.sub(r"\b[0-9a-f]+ <([^>+]+)(\+0x[0-9a-f]+)?>",    # targets: by name (+offset),
                     lambda m: "<%s%s>" % ("SELF" if m.group(1) == raw else   # a jump within: SELF
                                           renames.get(m.group(1), m.group(1)), m.group(2) or ""), ins)
        ins = re.sub(r"-?0x[0-9a-f]+\(%rip\)", "RIP", ins)
        if offsets:
            ins = re.sub(r"-?0x[0-9a-f]+\(%r[a-z0-9]+", "OFF(%r", ins)
        body.append(ins.strip())
    return funcs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--pattern", default=DEFAULT, help="functions compared (regex on the name)")
    ap.add_argument("--offsets", action="store_true", help="ignore displacements from registers")
    ap.add_argument("--rename", action="append", default=[], metavar="OLD=NEW",
                    help="a function renamed between the builds")
    a = ap.parse_args()
    renames = dict(r.split("=", 1) for r in a.rename)
    old_bodies, new_bodies = [], []
    old = functions(binary(a.old), a.offsets, renames, old_bodies)
    new = functions(binary(a.new), a.offsets, {}, new_bodies)
    pat = re.compile(a.pattern)
    names = sorted(n for n in old.keys() & new.keys() if pat.search(n))
    same, differ = [], []
    for n in names:
        if old[n] == new[n]:
            same.append(n)
            continue
        sm = SequenceMatcher(None, old[n], new[n], autojunk=False)
        changed = sum(max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in sm.get_opcodes() if op != "equal")
        differ.append((n, changed, len(new[n])))
    # a function renamed (or a static one made public): the same instructions under another name
    by_body = {}
    for n, b in old_bodies:
        if n not in new:
            by_body.setdefault(tuple(b), []).append(n)
    renamed, only_new, matched = [], [], set()
    for n in sorted(new.keys() - old.keys()):
        if not pat.search(n):
            continue
        olds = by_body.get(tuple(new[n]))
        if olds:
            renamed.append((olds[0], n))
            matched.update(olds)
        else:
            only_new.append(n)
    only_old = sorted(n for n in old.keys() - new.keys() if pat.search(n) and n not in matched)
    print(f"same_code: {len(names)} functions in both matching the pattern: {len(same)} the same, "
          f"{len(differ)} different{' (register displacements ignored)' if a.offsets else ''}")
    for n, c, t in differ:
        print(f"  differs: {n}: {c} of {t} instructions")
    if renamed:
        print(f"  {len(renamed)} renamed with the same instructions: " +
              " ".join(f"{o}->{n}" for o, n in renamed))
    if only_old:
        print("  only in old: " + " ".join(only_old))
    if only_new:
        print("  only in new: " + " ".join(only_new))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
