#!/usr/bin/env python3
"""The namespace test cases. Run one with:  cases.py --build BUILD_DIR [--prefix nm-X-] CASE
(run-all.sh runs them all and always tears down). `cases.py --list` names them.

Every case builds its own topology under the given prefix and tears it down in a finally block;
traffic only flows between interfaces of those namespaces (198.18.0.0/15)."""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import meshtopo  # noqa: E402
from nmlib import (KiB, MiB, BenchJob, Build, Failures, cable_bytes, diff, fmt_bytes,  # noqa: E402
                   iface_bytes, log, snapshot, topology, wait_traffic)

# Attribution thresholds, relative to the payload the bench moved (both directions):
ON_CABLE_MIN = 0.95      # the joining cable(s) carry at least 95% of the payload
NOISE_MAX = 0.01         # any other interface (mgmt, other cables, stubs) at most 1% of it
SHARE_RANGE = (0.35, 0.65)  # each of two rails carries 35-65% of what both carried
PAIR_SIZES = "4M,32M"
PAIR_TIMEOUT = 30        # bench --timeout for the transfers that must succeed
FAULT_USER_TIMEOUT_MS = 5000  # NCCL_MESH_TCP_USER_TIMEOUT_MS in the fault cases: the plugin's
                              # own dead-cable detection, well below the bench's watchdog
FAULT_TIMEOUT = 15       # bench --timeout in the fault cases: the error must come within it
FAULT_GRACE = 2          # seconds allowed beyond FAULT_TIMEOUT (process exit)
FAULT_DURATION = 25      # --duration of the transfers that run through a fault
FAULT_START_LIMIT = 60   # seconds for both transfers to get going (bench setup on a busy box)
NOADJ_TIMEOUT = 15       # bench --timeout when no common subnet exists

CASES = {}


def case(fn):
    CASES[fn.__name__.replace("_", "-")] = fn
    return fn


# ----------------------------------------------------------------------------------------------
# Shared steps
# ----------------------------------------------------------------------------------------------

def run_pair(F, build, topo, x, y, sizes=PAIR_SIZES, **kw):
    """One bench job, rank 0 on x and rank 1 on y; returns (job, counter diff)."""
    before = snapshot(topo)
    job = BenchJob(build, topo, [x, y], f"{topo.name}-{x}{y}", sizes=sizes,
                   timeout=PAIR_TIMEOUT, **kw)
    finished = job.wait(PAIR_TIMEOUT + 30)
    d = diff(before, snapshot(topo))
    good = F.check(finished and job.ok(),
                   f"{x}->{y}: bench pairs --verify exits 0 on both ranks "
                   f"(rc {[r.rc for r in job.ranks]}{'' if finished else ', HUNG: killed'})")
    if not good:
        log(job.report())
    return job, d


def check_attribution(F, topo, job, d, x, y):
    """The cables joining x and y carry >= 95% of the payload; every other interface of every
    host (management legs, other cables, stubs) carries at most 1% of it."""
    cables = topo.cables_between(x, y)
    on = {c.name: cable_bytes(topo, d, c) for c in cables}
    payload = job.payload_bytes()
    basis = "payload reported by the bench"
    if payload is None:  # fall back to everything that crossed any interface of the pair
        payload = sum(v["tx"] for (h, _), v in d.items() if h in (x, y))
        basis = "all bytes the two hosts transmitted (bench JSON had no byte count)"
    F.check(payload >= 8 * MiB, f"{x}<->{y}: payload {fmt_bytes(payload)} ({basis})")
    total_on = sum(on.values())
    F.check(total_on >= ON_CABLE_MIN * payload,
            f"{x}<->{y}: cable(s) {', '.join(on)} carried {fmt_bytes(total_on)} = "
            f"{100 * total_on / max(payload, 1):.1f}% of the payload (>= {100 * ON_CABLE_MIN:.0f}%)")
    ends = {(e.host, e.ifname) for c in cables for e in (c.a, c.b)}
    noise_max = NOISE_MAX * payload
    worst = []
    for (h, ifn), v in sorted(d.items()):
        if (h, ifn) in ends:
            continue
        n = v["rx"] + v["tx"]
        if n > noise_max:
            worst.append(f"{h}:{ifn} {fmt_bytes(n)}")
    mg = sum(d.get((h, meshtopo.MGMT_IF), {"tx": 0})["tx"] for h in topo.host_names())
    F.check(not worst, f"{x}<->{y}: no other interface above {fmt_bytes(noise_max)} "
                       f"(1% of payload; management carried {fmt_bytes(mg)})"
                       + (f": {', '.join(worst)}" if worst else ""))
    return on, payload


def expect_failure(F, job, what, limit, want_text=None):
    """Every rank exits non-zero within `limit` s (no hang); at least one reports the error."""
    t0 = time.monotonic()
    finished = job.wait(limit)
    waited = time.monotonic() - t0
    times = [f"rank {r.rank}@{r.host}: rc={r.rc} after {(r.t_end or 0) - r.t_start:.2f}s"
             for r in job.ranks]
    ok = F.check(finished, f"{what}: no hang, all ranks exited within {limit:.0f}s "
                           f"({'; '.join(times)})")
    F.check(all(r.rc not in (0, None) for r in job.ranks), f"{what}: every rank exits non-zero")
    F.check(any(r.reported_error() for r in job.ranks),
            f"{what}: a rank reports the error (exit 3, or non-zero with an 'ERROR rank' line)")
    if want_text is not None:
        lines = [l for r in job.ranks for l in r.output().splitlines()
                 if re.search(want_text, l, re.I)]
        ok &= F.check(bool(lines), f"{what}: output has a line matching /{want_text}/"
                                   + (f": {lines[0].strip()[:200]}" if lines else ""))
    if not ok or F.items:
        log(job.report())
    return waited


def require_build(F, build) -> bool:
    missing = build.missing()
    return F.check(not missing, "bench and plugin are built" +
                   (f" (missing: {', '.join(missing)})" if missing else ""))


# ----------------------------------------------------------------------------------------------
# Cases
# ----------------------------------------------------------------------------------------------

@case
def topology_tool(F, build, prefix):
    """mesh-topo itself: every shipped topology comes up with the described addresses, every
    cable and the management network ping, non-adjacent hosts are unreachable, counters read,
    and down leaves nothing behind (also after a partial up)."""
    root_links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    root_links = sorted(re.sub(r"^\d+: ", "", l).split(":")[0] for l in root_links.splitlines())
    for path in sorted(os.listdir(meshtopo_dir())):
        if not path.endswith(".topo"):
            continue
        topo = meshtopo.Topology(os.path.join(meshtopo_dir(), path), prefix)
        try:
            topo.up()
            problems = meshtopo.check(topo, verbose=False)
            F.check(not problems, f"{topo.name}: check ({len(topo.hosts)} hosts, "
                                  f"{len(topo.cables)} cables)" +
                    ("" if not problems else ": " + "; ".join(problems)))
            rows = topo.counters()
            want = {(h, i.ifname) for h in topo.host_names() for i in topo.ifaces(h)}
            got = {(r["host"], r["ifname"]) for r in rows}
            F.check(want <= got and all(r["kind"] != "other" for r in rows),
                    f"{topo.name}: counters list exactly the described interfaces")
            # A cut cable shows up as unreachable from both ends, the others stay reachable.
            if topo.cables:
                c = topo.cables[0]
                subprocess.run(["ip", "-n", topo.ns(c.a.host), "link", "set", c.a.ifname, "down"],
                               check=True)
                res = meshtopo.probe_from(topo, c.b.host, [str(c.a.addr.ip)], timeout=0.5)
                F.check(res[str(c.a.addr.ip)] != "ok",
                        f"{topo.name}: cable {c.name} cut: {c.b.host} -> {c.a.addr.ip} "
                        f"{res[str(c.a.addr.ip)]}")
        finally:
            topo.down()
        F.check(not topo.existing_ns(), f"{topo.name}: down removed every namespace")
    # Partial up: create two of the namespaces by hand, then down must clean them.
    topo = meshtopo.Topology(os.path.join(meshtopo_dir(), "line5.topo"), prefix)
    for ns in topo.all_ns()[:2]:
        subprocess.run(["ip", "netns", "add", ns], check=True)
    topo.down()
    topo.down()  # idempotent
    F.check(not topo.existing_ns(), "down after a partial up removes everything, twice is fine")
    left = [n for n in meshtopo.list_netns() if n.startswith(prefix)]
    F.check(not left, f"no namespace with prefix {prefix} left ({' '.join(left) or 'none'})")
    now = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    now = sorted(re.sub(r"^\d+: ", "", l).split(":")[0] for l in now.splitlines())
    F.check(now == root_links, "the calling namespace's interfaces are unchanged")


def meshtopo_dir():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "topologies")


@case
def triangle(F, build, prefix):
    """Every ordered pair of the triangle moves verified data over the cable joining it:
    >= 95% of the payload on that cable, <= 1% on every other interface."""
    if not require_build(F, build):
        return
    with topology("triangle", prefix) as topo:
        for x in topo.host_names():
            for y in topo.host_names():
                if x == y:
                    continue
                job, d = run_pair(F, build, topo, x, y)
                if job.ok():
                    check_attribution(F, topo, job, d, x, y)


@case
def triangle_bench3(F, build, prefix):
    """nccl-mesh-bench with one rank per host of the triangle: one run covers every ordered
    pair (verified, with the TCP baseline over the same cable) and a ring all-reduce."""
    if not require_build(F, build):
        return
    with topology("triangle", prefix) as topo:
        hosts = topo.host_names()
        job = BenchJob(build, topo, hosts, "triangle-bench3", sizes="64K,4M", tcp_baseline=True)
        finished = job.wait(PAIR_TIMEOUT + 60)
        F.check(finished and job.ok(), f"3-rank pairs run exits 0 on every rank "
                                       f"(rc {[r.rc for r in job.ranks]})")
        res = job.ranks[0].result() or {}
        pairs = {(row["src"], row["dst"]) for row in res.get("rows", [])
                 if row.get("pattern") == "pairs"}
        want = {(i, j) for i in range(3) for j in range(3) if i != j}
        F.check(pairs == want, f"rows for every ordered pair: {sorted(pairs)}")
        F.check(all(row.get("baselines") for row in res.get("rows", [])),
                "every row carries the plain-TCP baseline measured in the same run")
        if not job.ok():
            log(job.report())
        ring = BenchJob(build, topo, hosts, "triangle-ring3", pattern="ring-allreduce",
                        sizes="1M,8M")
        finished = ring.wait(PAIR_TIMEOUT + 60)
        F.check(finished and ring.ok(), f"3-rank ring all-reduce exits 0 with a checked result "
                                        f"(rc {[r.rc for r in ring.ranks]})")
        if not ring.ok():
            log(ring.report())

@case
def dual_link(F, build, prefix):
    """Two cables between a and b: the plugin stripes, each carries 35-65% of the traffic."""
    if not require_build(F, build):
        return
    with topology("dual-link", prefix) as topo:
        for x, y in (("a", "b"), ("b", "a")):
            job, d = run_pair(F, build, topo, x, y, sizes="4M,64M")
            if not job.ok():
                continue
            on, payload = check_attribution(F, topo, job, d, x, y)
            total = sum(on.values()) or 1
            lo, hi = SHARE_RANGE
            for name, n in on.items():
                F.check(lo <= n / total <= hi,
                        f"{x}->{y}: rail {name} carried {100 * n / total:.1f}% "
                        f"({fmt_bytes(n)}; want {100 * lo:.0f}-{100 * hi:.0f}%)")


@case
def mixed(F, build, prefix):
    """/30, /31 and /24 (jumbo) cables next to decoy interfaces (the neighbouring /30 and /31,
    an address-less veth, a veth without carrier, a second address on a cable): every pair
    uses exactly its cable, and the decoys carry nothing."""
    if not require_build(F, build):
        return
    with topology("mixed", prefix) as topo:
        for x in topo.host_names():
            for y in topo.host_names():
                if x == y:
                    continue
                job, d = run_pair(F, build, topo, x, y)
                if not job.ok():
                    continue
                check_attribution(F, topo, job, d, x, y)
                stubs = [(s.end.host, s.end.ifname) for s in topo.stubs]
                F.check(all(iface_bytes(d, h, i) == 0 for h, i in stubs),
                        f"{x}<->{y}: decoys {' '.join(f'{h}:{i}' for h, i in stubs)} "
                        f"carried 0 bytes")


def adjacency_case(F, build, prefix, name):
    if not require_build(F, build):
        return
    with topology(name, prefix) as topo:
        hosts = topo.host_names()
        for i, x in enumerate(hosts):
            for y in hosts[i + 1:]:
                if topo.adjacent(x, y):
                    job, d = run_pair(F, build, topo, x, y, sizes="1M,8M")
                    if job.ok():
                        on = sum(cable_bytes(topo, d, c) for c in topo.cables_between(x, y))
                        F.check(on >= 16 * MiB,
                                f"{x}<->{y}: adjacent pair used its cable ({fmt_bytes(on)})")
                else:
                    before = snapshot(topo)
                    job = BenchJob(build, topo, [x, y], f"{name}-{x}{y}-noadj", sizes="1M",
                                   timeout=NOADJ_TIMEOUT)
                    expect_failure(F, job, f"{x}<->{y} (not adjacent)", NOADJ_TIMEOUT + 20,
                                   want_text=r"no common subnet.*relay|relay.*no common subnet")
                    d = diff(before, snapshot(topo))
                    cab = sum(v["tx"] for (h, i), v in d.items()
                              if h in (x, y) and i != meshtopo.MGMT_IF)
                    F.check(cab < 64 * KiB, f"{x}<->{y}: nothing sent on any cable "
                                            f"({fmt_bytes(cab)})")


@case
def ring4(F, build, prefix):
    """4-host ring: neighbours work; a-c and b-d fail with 'no common subnet' (relay hint)."""
    adjacency_case(F, build, prefix, "ring4")


@case
def line5(F, build, prefix):
    """5-host line: neighbours work; every other pair fails with 'no common subnet'."""
    adjacency_case(F, build, prefix, "line5")


def fault_case(F, build, prefix, fault: str):
    """ring4: a-b and c-d transfer at once (--duration); the fault hits a-b; a-b must report it
    within the timeout, c-d must finish cleanly."""
    if not require_build(F, build):
        return
    with topology("ring4", prefix) as topo:
        env = {"NCCL_MESH_TCP_USER_TIMEOUT_MS": str(FAULT_USER_TIMEOUT_MS)}
        victim = BenchJob(build, topo, ["a", "b"], f"fault-{fault}-ab", sizes="8M",
                          duration=FAULT_DURATION, timeout=FAULT_TIMEOUT, env=env)
        other = BenchJob(build, topo, ["c", "d"], f"fault-{fault}-cd", sizes="8M",
                         duration=FAULT_DURATION, timeout=FAULT_TIMEOUT, env=env)
        t0 = time.monotonic()
        flowing = wait_traffic(topo, [("a", "cb"), ("c", "cd")], 16 * MiB, FAULT_START_LIMIT,
                               while_running=[victim, other])
        log(f"  traffic flowing on a-b and c-d after {time.monotonic() - t0:.1f}s")
        if not F.check(flowing and victim.running() and other.running(),
                       "both transfers are under way before the fault"):
            victim.wait(1), other.wait(1)
            log(victim.report())
            log(other.report())
            return
        time.sleep(1)
        t_fault = time.monotonic()
        if fault == "cut":
            subprocess.run(["ip", "-n", topo.ns("a"), "link", "set", "cb", "down"], check=True)
            survivors = victim.ranks
            what = "cable a-b cut"
        else:
            victim_rank = {"kill-rank1": 1, "kill-rank0": 0}[fault]
            victim.ranks[victim_rank].kill(signal.SIGKILL)
            survivors = [r for r in victim.ranks if r.rank != victim_rank]
            what = f"rank {victim_rank} ({victim.hosts[victim_rank]}) SIGKILLed"
        limit = FAULT_TIMEOUT + FAULT_GRACE
        deadline = t_fault + limit
        while time.monotonic() < deadline and any(r.poll() is None for r in survivors):
            time.sleep(0.05)
        hung = [r for r in survivors if r.poll() is None]
        for r in victim.ranks:
            if r.poll() is None:
                r.kill()
                r.proc.wait()
                r.poll()
        for r in survivors:
            dt = (r.t_end or time.monotonic()) - t_fault
            F.check(r not in hung and r.reported_error(),
                    f"{what}: rank {r.rank} on {r.host} reported the error "
                    f"{'(HUNG, killed)' if r in hung else f'rc={r.rc}'}; time to error "
                    f"{dt:.2f}s (limit {limit}s = --timeout {FAULT_TIMEOUT} + {FAULT_GRACE}; "
                    f"NCCL_MESH_TCP_USER_TIMEOUT_MS={FAULT_USER_TIMEOUT_MS})")
            log(f"  TIME-TO-ERROR {fault} rank{r.rank}@{r.host}: {dt:.2f}s")
            if r.error_lines():
                log(f"      {r.error_lines()[0][:200]}")
        if F.items:
            log(victim.report())
        F.check(other.running(), "c-d was still streaming when a-b had failed (they overlapped)")
        finished = other.wait(FAULT_DURATION + PAIR_TIMEOUT)
        F.check(finished and other.ok(),
                f"c-d on other cables kept working: rc {[r.rc for r in other.ranks]}"
                f"{'' if finished else ' (HUNG, killed)'}")
        if not other.ok():
            log(other.report())


@case
def fault_cut(F, build, prefix):
    """ring4: a-b and c-d stream at once; a-b's cable is cut (link down in a): both a-b ranks
    report the error in time, c-d finishes cleanly."""
    fault_case(F, build, prefix, "cut")


@case
def fault_kill(F, build, prefix):
    """ring4: a-b and c-d stream at once; rank 1 of a-b (in b) is SIGKILLed: rank 0 reports the
    error in time, c-d finishes cleanly."""
    fault_case(F, build, prefix, "kill-rank1")


@case
def fault_kill_rendezvous(F, build, prefix):
    """Like fault-kill, but the killed process is rank 0 (it also served the rendezvous)."""
    fault_case(F, build, prefix, "kill-rank0")


# ----------------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", help="build directory (holds libnccl-net-mesh.so)")
    ap.add_argument("--prefix", default=os.environ.get("MESH_TOPO_PREFIX", f"nm-t{os.getpid()}-"))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("case", nargs="?")
    a = ap.parse_args()
    if a.list:
        print("\n".join(CASES))
        return 0
    if a.case not in CASES or not a.build:
        ap.error(f"need --build and one case of: {', '.join(CASES)}")
    meshtopo.check_root()
    # SIGTERM (timeout, ctest) unwinds through the finally blocks that tear down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    F = Failures()
    t0 = time.monotonic()
    doc = " ".join((CASES[a.case].__doc__ or "").split("\n\n")[0].split())
    log(f"== {a.case}: {doc}")
    try:
        CASES[a.case](F, Build(a.build), a.prefix)
    except Exception as e:  # noqa: BLE001 - report, tear down (finally blocks ran), fail
        import traceback
        traceback.print_exc()
        F.items.append(f"exception: {e}")
    log(f"== {a.case}: {'PASS' if not F.items else f'FAIL ({len(F.items)} check(s))'} "
        f"in {time.monotonic() - t0:.1f}s")
    return 0 if not F.items else 1


if __name__ == "__main__":
    sys.exit(main())
