#!/usr/bin/env python3
"""N `lumen serve` replicas behind HAProxy on loopback, for bench/serve_trace.py and the replica
tests (tests/test_deploy_haproxy.py): the replicas on free ports (servers.Server), HAProxy run in
the foreground on deploy/haproxy/haproxy.cfg itself, the replicas' and the stats socket's
addresses given through the environment variables the file reads. Only the balance lines change
for the comparisons (round robin, least connections); everything else is the committed file.

    with Cluster(3, "build/lumen", threads=1) as c:
        httpx.post(c.url + "/v1/chat/completions", json=...)   # X-Lumen-Replica: r1 | r2 | r3
        c.stats()        # HAProxy's per-replica counters
        c.metrics(0)     # replica 0's /metrics as {name: value}
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import servers

ROOT = servers.ROOT
CONFIG = ROOT / "deploy" / "haproxy" / "haproxy.cfg"
POLICIES = ("prefix", "roundrobin", "leastconn")


def haproxy_binary():
    """Path of haproxy, or None (bash scripts/setup.sh --haproxy installs Debian's)."""
    return shutil.which("haproxy") or (os.path.exists("/usr/sbin/haproxy") and "/usr/sbin/haproxy") or None


def config_text(n, policy="prefix", src=CONFIG, maxconn=None):
    """The committed configuration for n replicas (n <= its server lines) under a policy:
    'prefix' is the file as it is; 'roundrobin' / 'leastconn' replace its balance lines;
    maxconn (the replicas' --parallel + --queue) replaces the file's per-replica maxconn."""
    text = Path(src).read_text()
    lines, kept = [], 0
    for line in text.splitlines():
        s = line.strip()
        if maxconn is not None and s.startswith("default-server "):
            line, subs = re.subn(r"\bmaxconn \d+", "maxconn %d" % maxconn, line)
            assert subs == 1, line
        if re.match(r"server r\d+ ", s):
            kept += 1
            if kept > n:
                continue
        if policy != "prefix" and re.match(r"(balance|hash-type|hash-balance-factor)\b", s):
            if s.startswith("balance"):
                lines.append(line[:len(line) - len(line.lstrip())] + "balance " + policy)
            continue
        lines.append(line)
    if kept < n:
        raise ValueError("%s has %d server lines, %d replicas asked" % (src, kept, n))
    return "\n".join(lines) + "\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_metrics(text):
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


class Cluster:
    """n replicas + HAProxy; start() returns once HAProxy sees every replica up. HAProxy's
    per-replica maxconn is the replicas' parallel + queue (as the committed file's 72 is lumen's
    defaults 8 + 64), and each replica takes 2 x that many connections from one address
    (--max-connections-per-ip: HAProxy's idle connections and checks on top, all from
    127.0.0.1), unless extra sets it."""

    def __init__(self, n, binary, threads=1, parallel=8, queue=64, ctx=None, policy="prefix",
                 extra=(), log_dir=None, model=None):
        assert policy in POLICIES, policy
        self.n, self.policy = n, policy
        self.maxconn = parallel + queue
        if "--max-connections-per-ip" not in [str(x) for x in extra]:
            extra = list(extra) + ["--max-connections-per-ip", str(2 * self.maxconn)]
        self.dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="lumen-cluster-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self._argv = lambda: servers.lumen_serve_argv(binary, model, threads=threads, parallel=parallel,
                                                      ctx=ctx, queue=queue, extra=extra)
        self.replicas = [servers.Server("r%d" % (i + 1), self._argv(), log_path=self.dir / ("r%d.log" % (i + 1)))
                         for i in range(n)]
        self.proc = None
        self.url = None
        self.sock = self.dir / "haproxy.sock"
        self.log_path = self.dir / "haproxy.log"

    # ---------------------------------------------------------------- life cycle
    def start(self, timeout=180.0):
        exe = haproxy_binary()
        if not exe:
            raise RuntimeError("haproxy is not installed (bash scripts/setup.sh --haproxy)")
        for r in self.replicas:
            r.start(timeout)
        cfg = self.dir / "haproxy.cfg"
        cfg.write_text(config_text(self.n, self.policy, maxconn=self.maxconn))
        port = free_port()
        env = dict(os.environ, LUMEN_LB_BIND="127.0.0.1:%d" % port, LUMEN_LB_STATS=str(self.sock))
        for i, r in enumerate(self.replicas):
            env["LUMEN_R%d" % (i + 1)] = r.url.replace("http://", "")
        log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen([exe, "-f", str(cfg)], stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                         preexec_fn=servers._die_with_parent)
        finally:
            log.close()
        self.url = "http://127.0.0.1:%d" % port
        self.wait_up([r.name for r in self.replicas], timeout=30)
        return self

    def wait_up(self, names, timeout=30.0, status="UP"):
        """Waits until HAProxy reports each named replica in the status (UP, DOWN, ...)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("haproxy exited %d:\n%s" % (self.proc.returncode, self.log_text()))
            try:
                st = self.stats()
                if all(st.get(nm, {}).get("status", "").startswith(status) for nm in names):
                    return st
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("haproxy: %s not %s within %.0f s" % (names, status, timeout))
            time.sleep(0.1)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # HAProxy's hard stop: clients are done
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        codes = [r.stop() for r in self.replicas]
        return codes

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()
        return False

    def restart_replica(self, i, timeout=180.0):
        """A new process for replica i on its old port (HAProxy keeps the address)."""
        old = self.replicas[i]
        port = old.url.rsplit(":", 1)[1]
        argv = self._argv()
        argv[argv.index("--port") + 1] = port
        self.replicas[i] = servers.Server(old.name, argv, log_path=self.dir / ("%s.restart.log" % old.name))
        return self.replicas[i].start(timeout)

    # ---------------------------------------------------------------- looking at it
    def admin(self, command):
        """One command on HAProxy's stats socket (its runtime API); the answer."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(self.sock))
            s.sendall(command.encode() + b"\n")
            out = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                out += b
        return out.decode()

    def stats(self):
        """{replica name: HAProxy's CSV row (status, scur, smax, stot, ...)} of the backend."""
        lines = self.admin("show stat").splitlines()
        head = lines[0].lstrip("# ").split(",")
        out = {}
        for line in lines[1:]:
            row = dict(zip(head, line.split(",")))
            if row.get("pxname") == "lumen" and row.get("svname") not in ("BACKEND", "FRONTEND"):
                out[row["svname"]] = row
        return out

    def metrics(self, i):
        with urllib.request.urlopen(self.replicas[i].url + "/metrics", timeout=10) as r:
            return parse_metrics(r.read().decode())

    def log_text(self):
        try:
            return self.log_path.read_text("utf-8", "replace")
        except OSError:
            return ""
