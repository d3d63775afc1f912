#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Measurements on namespace meshes, printed as markdown (run through measure.sh, as root):
  1. per-cable byte shares: each pair of the triangle, and the dual-link pair's two rails;
  2. bandwidth of one pair over one cable, plugin vs plain TCP over the same veth (the bench
     measures both in the same run), and the dual-link pair (plugin on two rails, TCP on one)."""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import meshtopo  # noqa: E402
import nmlib  # noqa: E402
from nmlib import (BenchJob, Build, cable_bytes, diff, fmt_bytes,  # noqa: E402
                   snapshot, topology)

SHARE_SIZES = "32M"
BW_SIZES = "1M,16M,64M"


def err(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(build, topo, x, y, label, **kw):
    before = snapshot(topo)
    job = BenchJob(build, topo, [x, y], label, timeout=60, **kw)
    finished = job.wait(240)
    d = diff(before, snapshot(topo))
    if not (finished and job.ok()):
        err(f"measure: {label} failed:\n{job.report()}")
        return None, d
    return job, d


def share_rows(topo, job, d, x, y):
    payload = job.payload_bytes() or 0
    rails = topo.cables_between(x, y)
    on = [(c, cable_bytes(topo, d, c)) for c in rails]
    total = sum(n for _, n in on) or 1
    ends = {(e.host, e.ifname) for c in rails for e in (c.a, c.b)}
    mgmt = sum(d.get((h, meshtopo.MGMT_IF), {"tx": 0})["tx"] for h in topo.host_names())
    other = sum(v["tx"] for k, v in d.items()
                if k not in ends and k[1] != meshtopo.MGMT_IF)
    rows = []
    for c, n in on:
        rows.append(f"| {topo.name} | {x}<->{y} | {c.name} ({c.a.addr.network}) | "
                    f"{fmt_bytes(payload)} | {fmt_bytes(n)} | {100 * n / max(payload, 1):.1f}% | "
                    f"{100 * n / total:.1f}% | {fmt_bytes(mgmt)} | {fmt_bytes(other)} |")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", required=True)
    ap.add_argument("--prefix", default=os.environ.get("MESH_TOPO_PREFIX", f"nm-m{os.getpid()}-"))
    a = ap.parse_args()
    meshtopo.check_root()
    nmlib.LOG = sys.stderr
    build = Build(a.build)
    if build.missing():
        err(f"measure: missing {', '.join(build.missing())}")
        return 2
    os.environ.setdefault("NCCL_DEBUG", "WARN")
    commands, shares, bw = [], [], []
    status = 0

    err("measure: triangle shares")
    with topology("triangle", a.prefix) as topo:
        for x, y in (("a", "b"), ("a", "c"), ("b", "c")):
            job, d = run(build, topo, x, y, f"measure-tri-{x}{y}", sizes=SHARE_SIZES, iters=8)
            if job is None:
                status = 1
                continue
            commands.append(job.describe(0))
            shares += share_rows(topo, job, d, x, y)
        err("measure: triangle bandwidth a-b, plugin vs TCP")
        job, _ = run(build, topo, "a", "b", "measure-tri-bw", sizes=BW_SIZES, iters=20,
                     warmup=2, tcp_baseline=True, verify=False, buffer_bytes=None)
        if job is None:
            status = 1
        else:
            commands.append(job.describe(0))
            bw += bw_rows(job, "triangle a-b, one cable (/24)")

    err("measure: dual-link shares and bandwidth")
    with topology("dual-link", a.prefix) as topo:
        job, d = run(build, topo, "a", "b", "measure-dual-ab", sizes=SHARE_SIZES, iters=8)
        if job is None:
            status = 1
        else:
            commands.append(job.describe(0))
            shares += share_rows(topo, job, d, "a", "b")
        job, _ = run(build, topo, "a", "b", "measure-dual-bw", sizes=BW_SIZES, iters=20,
                     warmup=2, tcp_baseline=True, verify=False, buffer_bytes=None)
        if job is None:
            status = 1
        else:
            commands.append(job.describe(0))
            bw += bw_rows(job, "dual-link a-b, plugin on 2 rails, TCP on 1")

    load = os.getloadavg()
    print(f"## nccl-mesh in network namespaces ({time.strftime('%Y-%m-%d %H:%M')}, "
          f"{os.cpu_count()} CPUs, load {load[0]:.1f})\n")
    print("Per-cable byte shares (sum of tx_bytes of both ends of each veth, before/after the "
          "run; payload = bytes the bench's verified messages carried, both directions):\n")
    print("| topology | pair | cable | payload | on cable | of payload | of pair's cables "
          "| management (tx) | other interfaces (tx) |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(shares))
    print("\nBandwidth, plugin vs plain TCP over the same veth (GB/s = 1e9 B/s; veth "
          "bandwidth is CPU-bound, so these compare software paths, not links):\n")
    print("| run | direction | size | plugin GB/s | TCP GB/s | plugin/TCP | TCP path |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(bw))
    print("\nCommands (rank 0 shown; rank 1 is the same with --rank 1 in the other host's "
          "namespace):\n")
    print("```")
    print(f"tests/netns/measure.sh {build.dir}")
    for c in commands:
        print(c)
    print("```")
    return status


def bw_rows(job, label):
    res = job.ranks[0].result() or {}
    out = []
    for r in res.get("rows", []):
        if r.get("pattern") not in ("pairs", "pairs-bidir"):
            continue
        p, t = r.get("plugin_gbps"), r.get("tcp_gbps")
        ratio = f"{p / t:.2f}" if p and t else "-"
        host = job.hosts
        out.append(f"| {label} | {host[r['src']]}->{host[r['dst']]} | {fmt_bytes(r['bytes'])} | "
                   f"{p if p is None else f'{p:.3f}'} | {t if t is None else f'{t:.3f}'} | "
                   f"{ratio} | {r.get('path', '-')} |")
    return out


if __name__ == "__main__":
    sys.exit(main())
