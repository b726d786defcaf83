#!/usr/bin/env python3
"""The include rule of src/ (docs/architecture.md): folders form layers, and a file may
include its own folder, the folders its folder lists below, and the public headers of
include/. Any other #include "..." is an upward or unlisted edge: reported as
FILE:LINE: folder -> folder (header), exit 1.

  check_layers.py [ROOT]     ROOT: the repository (default: this script's parent's parent)

The table is the architecture: lower layers never include upper ones, and the programs
(cli/, server/), the measuring library (bench/) and the trace report library (report/) see
the public API only.
"""
import os
import re
import sys

# folder -> the folders its files may include (besides itself and include/), lowest first
ALLOWED = {
    "base": [],
    "tensor": ["base"],
    "format": ["base", "tensor"],
    "kernels": ["base", "tensor"],
    "prof": ["base", "tensor"],
    "tokenizer": ["base", "format"],
    "sample": ["base", "tensor", "kernels"],
    "grammar": ["base", "tokenizer"],
    "model": ["base", "tensor", "format", "kernels", "prof", "tokenizer"],
    "runtime": ["base", "tensor", "format", "kernels", "prof", "tokenizer", "sample", "grammar",
                "model"],
    # on the public API only (include/): what the programs share, the measuring and the report
    # libraries, the programs
    "common": [],
    "bench": ["common"],
    "report": ["common"],
    "server": ["common"],
    "cli": ["bench", "report", "server", "common"],
}
# The public header of a layer that is itself on the public API: what the layers above may
# include of it (by its bare name: CMake gives them that folder, not src/).
PUBLIC_OF = {"bench": "bench.h", "report": "report.h", "server": "server.h", "common": "strbuf.h"}
# more public headers of such a layer (common's reasoning splitter: the server's and the CLI's)
MORE_PUBLIC = {"common": ("reasoning.h",)}

def below(folder):
    """Every folder `folder` may reach through the table."""
    seen, todo = set(), list(ALLOWED.get(folder, []))
    while todo:
        f = todo.pop()
        if f not in seen:
            seen.add(f)
            todo += ALLOWED.get(f, [])
    return seen


INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def check(root):
    src = os.path.join(root, "src")
    public = set(os.listdir(os.path.join(root, "include")))
    bad = []
    n_files = 0
    for dirpath, _, files in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        folder = rel.split(os.sep)[0]
        if folder == ".":
            continue
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            n_files += 1
            path = os.path.join(dirpath, f)
            with open(path, encoding="utf-8", errors="replace") as fh:
                for ln, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    if "/" not in inc:
                        # a public header, a header of the same folder, or the public header
                        # of a public-API layer this one may use
                        if inc in public or os.path.exists(os.path.join(dirpath, inc)):
                            continue
                        if any(PUBLIC_OF.get(t) == inc or inc in MORE_PUBLIC.get(t, ()) for t in ALLOWED.get(folder, [])):
                            continue
                        bad.append(f"{os.path.relpath(path, root)}:{ln}: {folder} -> ? ({inc}: not in "
                                   f"include/ nor in src/{rel})")
                        continue
                    target = inc.split("/")[0]
                    if target == folder:
                        continue
                    if folder not in ALLOWED:
                        bad.append(f"{os.path.relpath(path, root)}:{ln}: {folder} -> {target} ({inc}): "
                                   f"src/{folder} is not in tools/check_layers.py's table")
                        continue
                    if target in ALLOWED[folder]:
                        if target in PUBLIC_OF and inc != f"{target}/{PUBLIC_OF[target]}":
                            bad.append(f"{os.path.relpath(path, root)}:{ln}: {folder} -> {target} "
                                       f"({inc}): only {PUBLIC_OF[target]} is public")
                        continue
                    kind = "upward" if folder in below(target) else "unlisted"
                    bad.append(f"{os.path.relpath(path, root)}:{ln}: {folder} -> {target} ({inc}): {kind} edge")
    return n_files, bad


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    n_files, bad = check(root)
    for b in bad:
        print(b)
    if bad:
        print(f"check_layers: {len(bad)} include edge(s) break the layer rule in {n_files} files")
        return 1
    print(f"check_layers: {n_files} files, every include goes down a layer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
