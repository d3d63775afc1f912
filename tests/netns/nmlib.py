# SPDX-License-Identifier: Apache-2.0
"""Helpers for the namespace tests: run nccl-mesh-bench ranks inside hosts, diff counters,
soft assertions. Used by cases.py and measure.py."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import meshtopo  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TOPOLOGIES = os.path.join(HERE, "topologies")
KiB, MiB = 1024, 1024 * 1024

_port = itertools.count(int(os.environ.get("NETNS_BASE_PORT", "29400")))


LOG = sys.stdout  # measure.py sends progress to stderr


def log(msg: str) -> None:
    print(msg, file=LOG, flush=True)


class Failures:
    """Soft assertions: a case records every failed check and fails once at the end."""

    def __init__(self):
        self.items: list[str] = []

    def check(self, cond: bool, what: str) -> bool:
        log(f"  {'ok  ' if cond else 'FAIL'} {what}")
        if not cond:
            self.items.append(what)
        return cond


# ----------------------------------------------------------------------------------------------
# Topologies
# ----------------------------------------------------------------------------------------------

@contextlib.contextmanager
def topology(name: str, prefix: str):
    """Bring a shipped topology up (tearing down leftovers first) and always tear it down."""
    topo = meshtopo.Topology(os.path.join(TOPOLOGIES, f"{name}.topo"), prefix)
    topo.down()
    t0 = time.monotonic()
    topo.up()
    log(f"  topology {name} up in {time.monotonic() - t0:.1f}s (namespaces {prefix}*)")
    try:
        yield topo
    finally:
        topo.down()


def snapshot(topo: meshtopo.Topology) -> dict:
    return {(r["host"], r["ifname"]): r for r in topo.counters()}


def diff(before: dict, after: dict) -> dict:
    """Bytes moved per (host, ifname) between two snapshots: {'rx': n, 'tx': n}."""
    out = {}
    for k, a in after.items():
        b = before.get(k, {"rx_bytes": 0, "tx_bytes": 0})
        out[k] = {"rx": a["rx_bytes"] - b["rx_bytes"], "tx": a["tx_bytes"] - b["tx_bytes"]}
    return out


def cable_bytes(topo: meshtopo.Topology, d: dict, cable: meshtopo.Cable) -> int:
    """Bytes the cable carried, both directions, each counted once (tx of both ends)."""
    return sum(d.get((e.host, e.ifname), {"tx": 0})["tx"] for e in (cable.a, cable.b))


def iface_bytes(d: dict, host: str, ifname: str) -> int:
    x = d.get((host, ifname), {"rx": 0, "tx": 0})
    return x["rx"] + x["tx"]


def fmt_bytes(n: float) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= div:
            return f"{n / div:.1f} {unit}"
    return f"{int(n)} B"


# ----------------------------------------------------------------------------------------------
# The bench
# ----------------------------------------------------------------------------------------------

class Build:
    def __init__(self, build_dir: str):
        self.dir = os.path.abspath(build_dir)
        self.bench = os.environ.get("NCCL_MESH_BENCH") or os.path.join(
            self.dir, "src", "tools", "bench", "nccl-mesh-bench")
        self.plugin = os.environ.get("NCCL_MESH_PLUGIN") or os.path.join(
            self.dir, "libnccl-net-mesh.so")
        self.logdir = os.environ.get("NETNS_LOG_DIR") or os.path.join(self.dir, "netns-logs")
        self.sanitizer = ""
        with contextlib.suppress(OSError):
            with open(os.path.join(self.dir, "CMakeCache.txt")) as f:
                m = re.search(r"^MESH_SANITIZE:\w+=(\w*)$", f.read(), re.M)
                self.sanitizer = m.group(1) if m else ""
        # Margins on top of the plugin's own timeouts (scheduling, process exit) grow under the
        # sanitizers, as in the conformance suite: x3 ASan, x5 TSan. The timeouts themselves
        # (NCCL_MESH_*_TIMEOUT_MS) do not scale.
        self.time_scale = {"address": 3.0, "thread": 5.0}.get(self.sanitizer, 1.0)

    def missing(self) -> list[str]:
        return [p for p in (self.bench, self.plugin) if not os.path.exists(p)]


CLOSE_RE = re.compile(
    r"^CLOSE rank \d+: (?P<failure>after the failure, )?(?P<comms>\d+) comm\(s\) closed and "
    r"finalize returned in (?P<secs>[\d.]+) s; fds (?P<fd0>-?\d+) -> (?P<fd1>-?\d+), threads "
    r"(?P<t0>-?\d+) -> (?P<t1>-?\d+)(?P<tail>.*)$")


class Rank:
    """One bench process running in one host's namespace."""

    def __init__(self, job: "BenchJob", rank: int, host: str, argv: list[str], env: dict):
        self.job, self.rank, self.host = job, rank, host
        base = os.path.join(job.logdir, f"{job.label}.r{rank}.{host}")
        self.out_path, self.json_path = base + ".log", base + ".json"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.json_path)
        self.argv = argv + ["--json", self.json_path]
        self._out = open(self.out_path, "w")
        self.t_start = time.monotonic()
        self.t_end: float | None = None
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", job.topo.ns(host), *self.argv], env=env,
            stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def poll(self) -> int | None:
        rc = self.proc.poll()
        if rc is not None and self.t_end is None:
            self.t_end = time.monotonic()
            self._out.close()
        return rc

    @property
    def rc(self) -> int | None:
        return self.poll()

    def kill(self, sig=signal.SIGKILL) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(sig)

    def output(self) -> str:
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def result(self) -> dict | None:
        try:
            with open(self.json_path) as f:
                return json.load(f)
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def error_lines(self) -> list[str]:
        return [l for l in self.output().splitlines() if re.match(r"^ERROR\b", l)]

    def reported_error(self) -> bool:
        """Exit 3, or any non-zero exit with an ERROR line (the brief's contract)."""
        rc = self.rc
        return rc == 3 or (rc not in (None, 0) and bool(self.error_lines()))

    def warn_lines(self) -> list[str]:
        """The plugin's WARN lines (the bench prints them as '[rank R] NCCL WARN ...')."""
        return [l for l in self.output().splitlines() if "NCCL WARN" in l]

    def close_report(self) -> dict | None:
        """The bench's CLOSE line (--duration mode: comms closed and finalize, after a failure
        or at a clean end): {'after_failure', 'comms', 'close_s', 'fds', 'threads', 'lsan',
        'errors'}, fds/threads as (before init, after close); None when it printed none."""
        m = None
        for line in self.output().splitlines():
            m = CLOSE_RE.match(line) or m
        if m is None:
            return None
        tail = m.group("tail")
        lsan = ("leaks" if "LeakSanitizer: LEAKS" in tail else
                "clean" if "LeakSanitizer: no leaks" in tail else None)
        return {"after_failure": bool(m.group("failure")), "comms": int(m.group("comms")),
                "close_s": float(m.group("secs")),
                "fds": (int(m.group("fd0")), int(m.group("fd1"))),
                "threads": (int(m.group("t0")), int(m.group("t1"))), "lsan": lsan,
                "errors": "close errors" in tail}

    def wait_line(self, pattern: str, limit: float) -> float | None:
        """Polls the log until a line matches `pattern` (regex): the monotonic time it was seen,
        None when the rank exited or `limit` s passed first."""
        deadline = time.monotonic() + limit
        rx = re.compile(pattern, re.M)
        while time.monotonic() < deadline:
            if rx.search(self.output()):
                return time.monotonic()
            if self.poll() is not None:
                return time.monotonic() if rx.search(self.output()) else None
            time.sleep(0.02)
        return None

    def tail(self, n: int = 15) -> str:
        lines = self.output().splitlines()
        return "\n".join(f"      | {l}" for l in lines[-n:])


class BenchJob:
    """nranks bench processes, rank i in hosts[i], rendezvous on hosts[0]'s management address.
    rank_args: extra arguments for single ranks ({rank: [args]})."""

    def __init__(self, build: Build, topo: meshtopo.Topology, hosts: list[str], label: str,
                 pattern: str = "pairs", sizes: str | None = "4M,32M", verify: bool = True,
                 duration: float | None = None, timeout: float | None = 30,
                 tcp_baseline: bool = False, iters: int = 4, warmup: int = 1,
                 buffer_bytes: str | None = "64M", extra_args: list[str] | None = None,
                 env: dict | None = None, rank_args: dict | None = None):
        self.build, self.topo, self.hosts, self.label = build, topo, hosts, label
        self.logdir = build.logdir
        os.makedirs(self.logdir, exist_ok=True)
        self.port = next(_port)
        self.rendezvous = f"{topo.mgmt_addr(hosts[0])}:{self.port}"
        args = ["--plugin", build.plugin, "--nranks", str(len(hosts)),
                "--rendezvous", self.rendezvous, "--pattern", pattern]
        if sizes:
            args += ["--sizes", sizes]
        args += ["--verify" if verify else "--no-verify"]
        if duration is not None:
            args += ["--duration", f"{duration:g}"]
        if timeout is not None:
            args += ["--timeout", f"{timeout:g}"]
        if not tcp_baseline:
            args += ["--no-tcp-baseline"]
        if duration is None:
            args += ["--iters", str(iters), "--warmup", str(warmup)]
        if buffer_bytes:  # the default 256M per direction takes seconds to set up on a busy box
            args += ["--buffer-bytes", buffer_bytes]
        args += extra_args or []
        self.env = dict(os.environ)
        self.env.update({"NCCL_MESH_IFNAME": "^mgmt",
                         "NCCL_MESH_CONNECT_TIMEOUT_MS": "5000"})
        self.env.update(env or {})
        # A None value removes the variable: the safe-default cases run without NCCL_MESH_IFNAME.
        self.env = {k: v for k, v in self.env.items() if v is not None}
        self.ranks: list[Rank] = []
        for r, h in enumerate(hosts):
            argv = [build.bench, "--rank", str(r), *args, *(rank_args or {}).get(r, [])]
            self.ranks.append(Rank(self, r, h, argv, self.env))
            if r == 0:
                time.sleep(0.05)  # let rank 0 bind the rendezvous first (ranks also retry)

    def describe(self, rank: int = 0) -> str:
        envs = " ".join(f"{k}={self.env[k]}" for k in sorted(self.env)
                        if k.startswith("NCCL_"))
        return (f"ip netns exec {self.topo.ns(self.hosts[rank])} env {envs} "
                + " ".join(self.ranks[rank].argv[:-2]))

    def wait(self, limit: float) -> bool:
        """Wait until every rank exits or `limit` seconds pass; kill stragglers. True if all
        exited by themselves."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if all(r.poll() is not None for r in self.ranks):
                return True
            time.sleep(0.05)
        for r in self.ranks:
            if r.poll() is None:
                r.kill()
                r.proc.wait()
                r.poll()
        return False

    def running(self) -> bool:
        return any(r.poll() is None for r in self.ranks)

    def ok(self) -> bool:
        return all(r.rc == 0 for r in self.ranks)

    def report(self) -> str:
        parts = []
        for r in self.ranks:
            dt = (r.t_end or time.monotonic()) - r.t_start
            parts.append(f"    rank {r.rank} on {r.host}: rc={r.rc} after {dt:.1f}s "
                         f"(log {r.out_path})\n{r.tail()}")
        return "\n".join(parts)

    def payload_bytes(self) -> int | None:
        """Bytes the bench moved through the plugin, both directions, from its JSON."""
        return payload_from_results([r.result() for r in self.ranks])


def payload_from_results(results: list[dict | None]) -> int | None:
    """Bytes the plugin carried for the timed and warm-up messages of every measured row, from
    rank 0's --json (it holds every rank's rows). A row moves bytes * (iters + warm-up)
    messages (both directions for pairs-bidir); warm-up is the bench's plan_iterations() rule
    (min(--warmup, max(1, iters / 4))). Ping-pong rows (sizes <= --latency-max-bytes) would add
    more: the cases use sizes above it. None when no JSON was written."""
    res = next((r for r in results if r and "rows" in r), None)
    if res is None:
        return None
    warm_opt = int(res.get("warmup", 0))
    total = 0
    for row in res["rows"]:
        if row.get("pattern") not in ("pairs", "pairs-bidir"):
            continue
        iters = int(row["iters"])
        warm = min(warm_opt, max(1, iters // 4)) if warm_opt > 0 else 0
        n = int(row["bytes"]) * (iters + warm)
        total += 2 * n if row["pattern"] == "pairs-bidir" else n
    return total


def rank_tx(rank: "Rank", ifname: str) -> int | None:
    """tx_bytes of `ifname` in the namespace `rank` runs in, read from /proc/PID/net/dev of the
    rank's process: no subprocess (`ip netns exec` takes seconds on a saturated machine), so it
    can be polled finely. None once the process is gone."""
    try:
        with open(f"/proc/{rank.proc.pid}/net/dev") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name.strip() == ifname:
                    return int(rest.split()[8])
    except (OSError, ValueError, IndexError):
        pass
    return None


def wait_tx(ends: list, min_bytes: int, limit: float) -> float | None:
    """Polls (rank, ifname) ends every 20 ms until each has sent `min_bytes` more than when
    called: the seconds that took, None after `limit` s or when a rank is gone."""
    t0 = time.monotonic()
    start = [rank_tx(r, i) for r, i in ends]
    if None in start:
        return None
    while time.monotonic() - t0 < limit:
        now = [rank_tx(r, i) for r, i in ends]
        if None in now:
            return None
        if all(n - s >= min_bytes for n, s in zip(now, start)):
            return time.monotonic() - t0
        time.sleep(0.02)
    return None


def tx_rate(ends: list, window: float) -> float | None:
    """Bytes/s the (rank, ifname) ends sent together over `window` seconds (None: a rank
    exited meanwhile)."""
    b0, t0 = [rank_tx(r, i) for r, i in ends], time.monotonic()
    time.sleep(window)
    b1, t1 = [rank_tx(r, i) for r, i in ends], time.monotonic()
    if None in b0 or None in b1:
        return None
    return (sum(b1) - sum(b0)) / (t1 - t0)


def wait_traffic(topo: meshtopo.Topology, ends: list[tuple[str, str]], min_bytes: int,
                 limit: float, while_running: list | None = None) -> bool:
    """Wait until every (host, ifname) has sent `min_bytes` more than when called: transfers are
    in flight there. Gives up after `limit` s, or as soon as a job in `while_running` ends."""
    def tx(h, i):
        return meshtopo.read_ns_counters(topo.ns(h))[i]["tx_bytes"]
    start = {e: tx(*e) for e in ends}
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if all(tx(*e) - start[e] >= min_bytes for e in ends):
            return True
        if while_running and not all(j.running() for j in while_running):
            return False
        time.sleep(0.1)
    return False
