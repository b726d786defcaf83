#!/usr/bin/env python3
"""Cold start to first token, lumen against llama.cpp, with each process's peak RSS.

usage: .venv/bin/python bench/coldstart.py -m MODEL.gguf [-m ...] [-r 3] [-t 2] [-c 4096] [-p PROMPT]
                                           [--out bench/results/coldstart-<date>.md]

Per round and model, one process of each engine, engines alternating which goes first; before
each run the model file leaves the page cache (posix_fadvise DONTNEED after an fdatasync; root
cannot write /proc/sys/vm/drop_caches in this container), which mincore() then checks: the
"cached" column is the share of the file still in the page cache when the process starts
(a process that maps the file keeps its pages: the script refuses to evict while another
process maps it, and says so). Timed: wall clock from the spawn to the exit of a run that
generates one token (-n 1, greedy, same threads), so load + prefill + the first token +
teardown; the ratio column is llama.cpp's time over lumen's (> 1: lumen starts faster),
median over the rounds of each round's ratio. Peak RSS is the process's ru_maxrss (wait4).
  - lumen: `build/lumen run -m F --chat -p P -n 1 -t T --temp 0 --ctx C` (also its own load
    and TTFT, from its last line)
  - llama.cpp: `.reference/bin/llama-cli -m F -p P -n 1 -t T -st --temp 0 -c C --simple-io
    --no-display-prompt` (its chat CLI: one turn, then exit; its defaults otherwise: mmap,
    weight repacking, a warm-up run, f16 KV; without -c its KV cache takes the model's
    training context: 4 GB more RSS for Llama 3.2 1B)
Both wrap the prompt in the model's chat template.
"""
import argparse
import ctypes
import datetime
import glob
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.mmap.restype = ctypes.c_void_p
LIBC.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
LIBC.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
LIBC.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def cached_fraction(path):
    """Share of the file's pages in the page cache (mincore on a private mapping)."""
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = LIBC.mmap(None, size, 1, 2, fd, 0)  # PROT_READ, MAP_PRIVATE
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap for mincore failed")
        pg = os.sysconf("SC_PAGE_SIZE")
        n = (size + pg - 1) // pg
        vec = (ctypes.c_ubyte * n)()
        try:
            if LIBC.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
        finally:
            LIBC.munmap(addr, size)
        return sum(v & 1 for v in vec) / n
    finally:
        os.close(fd)


def mappers(path):
    """Other processes that map path (their pages cannot leave the page cache)."""
    real, out = os.path.realpath(path), []
    for maps in glob.glob("/proc/[0-9]*/maps"):
        pid = int(maps.split("/")[2])
        if pid == os.getpid():
            continue
        try:
            with open(maps) as f:
                if any(line.rstrip().endswith(real) for line in f):
                    out.append(pid)
        except OSError:
            pass
    return out


def evict(path):
    """Drops path from the page cache; returns the share still cached."""
    others = mappers(path)
    if others:
        sys.exit(f"coldstart: {path} is mapped by pids {others}: its pages cannot be evicted")
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)  # dirty pages (a freshly written file) do not drop
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return cached_fraction(path)


def run(cmd):
    """Wall seconds from spawn to exit, peak RSS bytes, stderr text."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"coldstart: {' '.join(cmd)} failed ({p.returncode}):\n{err.decode()[-2000:]}")
    return wall, ru.ru_maxrss * 1024, err.decode(errors="replace")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", action="append", required=True)
    ap.add_argument("-r", "--rounds", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-c", "--ctx", type=int, default=4096)
    ap.add_argument("-p", "--prompt", default="Write one sentence about the sea.")
    ap.add_argument("--lumen", default=os.path.join(ROOT, "build", "lumen"))
    ap.add_argument("--llama", default=os.path.join(ROOT, ".reference", "bin", "llama-cli"))
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    T, C = str(a.threads), str(a.ctx)
    engines = {
        "lumen": lambda m: [a.lumen, "run", "-m", m, "--chat", "-p", a.prompt, "-n", "1", "-t", T,
                            "--temp", "0", "--ctx", C],
        "llama.cpp": lambda m: [a.llama, "-m", m, "-p", a.prompt, "-n", "1", "-t", T, "-st",
                                "--temp", "0", "-c", C, "--simple-io", "--no-display-prompt"],
    }
    rows = []
    for m in a.model:
        res = {e: [] for e in engines}
        for r in range(a.rounds):
            order = list(engines) if r % 2 == 0 else list(engines)[::-1]
            for e in order:
                cached = evict(m)
                wall, rss, err = run(engines[e](m))
                x = {"wall": wall, "rss": rss, "cached": cached}
                g = re.search(r"load ([\d.]+) ms .*TTFT ([\d.]+) ms", err)
                if e == "lumen" and g:
                    x["load_ms"], x["ttft_ms"] = float(g.group(1)), float(g.group(2))
                res[e].append(x)
                print(f"coldstart: {os.path.basename(m)} round {r + 1} {e}: {wall:.2f} s, "
                      f"peak RSS {rss / 2**20:.0f} MiB, {100 * cached:.1f}% cached at start",
                      file=sys.stderr)
        ratios = [b["wall"] / l["wall"] for l, b in zip(res["lumen"], res["llama.cpp"])]
        rows.append((m, res, ratios))

    size = lambda m: os.path.getsize(m) / 2**20
    med = lambda v: statistics.median(v)
    lines = [f"# Cold start to first token: lumen vs llama.cpp ({datetime.date.today()})", "",
             f"`bench/coldstart.py -r {a.rounds} -t {a.threads} -c {a.ctx}`; prompt \"{a.prompt}\" (chat "
             "template), 1 greedy token. Wall clock spawn-to-exit with the file evicted from the "
             "page cache before every run (cached: the share still cached at the start, mincore); "
             "medians over rounds, engines alternating. ratio = llama.cpp / lumen (> 1: lumen "
             "faster). Peak RSS: ru_maxrss.", "",
             "| model | file MiB | lumen s | llama.cpp s | ratio (median, range) | lumen load + TTFT ms "
             "| lumen peak RSS MiB | llama.cpp peak RSS MiB | cached at start |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for m, res, ratios in rows:
        L, B = res["lumen"], res["llama.cpp"]
        lt = [x for x in L if "load_ms" in x]
        inner = (f"{med([x['load_ms'] for x in lt]):.0f} + {med([x['ttft_ms'] for x in lt]):.0f}"
                 if lt else "")
        cached = max(x["cached"] for x in L + B)
        lines.append(f"| {os.path.basename(m)} | {size(m):.0f} | {med([x['wall'] for x in L]):.2f} | "
                     f"{med([x['wall'] for x in B]):.2f} | {med(ratios):.2f} ({min(ratios):.2f}-"
                     f"{max(ratios):.2f}) | {inner} | {med([x['rss'] for x in L]) / 2**20:.0f} | "
                     f"{med([x['rss'] for x in B]) / 2**20:.0f} | <= {100 * cached:.1f}% |")
    text = "\n".join(lines) + "\n"
    print(text)
    out = a.out or os.path.join(ROOT, "bench", "results",
                                f"coldstart-{datetime.datetime.now():%Y-%m-%d-%H%M}.md")
    with open(out, "w") as f:
        f.write(text)
    print(f"coldstart: wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
