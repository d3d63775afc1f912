#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Relayed vs direct bandwidth and per-cable shares on ring4 and line5, as markdown tables for
docs/measurements.md (issue 18). Needs root; tears its topologies down.

  tests/netns/measure_relay.py BUILD_DIR [--prefix nm-mr-] [--sizes 8M,32M] [--iters 8]

Per topology: one bench rank per host, every ordered pair in one run (direct pairs over their
cable, the others relayed), so relayed and direct rows are measured side by side; then one
relayed pair per topology with plugin processes only on the relay hosts, and the bytes each cable
carried during it."""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases  # noqa: E402
from nmlib import (MiB, BenchJob, Build, Failures, cable_bytes, diff, fmt_bytes, snapshot,  # noqa: E402
                   topology)


def pairs_table(topo, rows, sizes):
    hosts = topo.host_names()
    out = ["| topology | pair | route | size | plugin GB/s |", "|---|---|---|---|---|"]
    summary = []
    for size in sizes:
        direct, relayed = [], []
        for row in sorted(rows, key=lambda r: (r["src"], r["dst"])):
            if row["bytes"] != size:
                continue
            x, y = hosts[row["src"]], hosts[row["dst"]]
            adj = topo.adjacent(x, y)
            (direct if adj else relayed).append(row["plugin_gbps"])
            out.append(f"| {topo.name} | {x}->{y} | {'direct' if adj else 'relayed'} | "
                       f"{fmt_bytes(size)} | {row['plugin_gbps']:.2f} |")
        if direct and relayed:
            d, r = sum(direct) / len(direct), sum(relayed) / len(relayed)
            summary.append(f"| {topo.name} | {fmt_bytes(size)} | {d:.2f} ({len(direct)} pairs) | "
                           f"{r:.2f} ({len(relayed)} pairs) | {r / d:.2f} |")
    return out, summary


def shares_table(topo, d, payload, x, y):
    out = []
    for c in topo.cables:
        n = cable_bytes(topo, d, c)
        out.append(f"| {topo.name} | {x}<->{y} | {c.a.host}:{c.a.ifname}-{c.b.host}:{c.b.ifname} | "
                   f"{fmt_bytes(payload)} | {fmt_bytes(n)} | {100 * n / max(payload, 1):.1f}% |")
    mg = sum(v["tx"] for (h, i), v in d.items() if i == "mgmt0")
    out.append(f"| {topo.name} | {x}<->{y} | management (tx, all hosts) | {fmt_bytes(payload)} | "
               f"{fmt_bytes(mg)} | {100 * mg / max(payload, 1):.2f}% |")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--prefix", default=f"nm-mr{os.getpid() % 10000}-")
    ap.add_argument("--sizes", default="8M,32M")
    ap.add_argument("--iters", type=int, default=8)
    a = ap.parse_args()
    build = Build(a.build)
    F = Failures()
    sizes = [int(s[:-1]) * MiB for s in a.sizes.split(",")]
    pair_rows, summary, shares = [], [], []
    for name, x, y, relays in (("ring4", "a", "c", ["b", "d"]), ("line5", "a", "e", ["b", "c", "d"])):
        with topology(name, a.prefix) as topo:
            job = BenchJob(build, topo, topo.host_names(), f"measure-{name}-all", sizes=a.sizes,
                           iters=a.iters, timeout=120)
            if not F.check(job.wait(400) and job.ok(), f"{name}: all-pairs run"):
                print(job.report(), file=sys.stderr)
                continue
            rows = [r for r in (job.ranks[0].result() or {}).get("rows", [])
                    if r.get("pattern") == "pairs"]
            t, s = pairs_table(topo, rows, sizes)
            pair_rows += t if not pair_rows else t[2:]
            summary += s
            time.sleep(1)
            with cases.relay_holders(F, build, topo, relays, f"measure-{name}-{x}{y}"):
                before = snapshot(topo)
                pj = BenchJob(build, topo, [x, y], f"measure-{name}-{x}{y}", sizes="32M",
                              iters=a.iters, timeout=120)
                ok = pj.wait(300) and pj.ok()
                d = diff(before, snapshot(topo))
            if F.check(ok, f"{name}: {x}<->{y} relayed pair"):
                shares += shares_table(topo, d, pj.payload_bytes() or 0, x, y)
    print(f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
          f"{os.getloadavg()[0]:.1f}\n")
    print("| topology | size | direct GB/s (mean) | relayed GB/s (mean) | relayed/direct |")
    print("|---|---|---|---|---|")
    print("\n".join(summary) + "\n")
    print("\n".join(pair_rows) + "\n")
    print("| topology | pair | cable | payload | on cable (tx both ends) | of payload |")
    print("|---|---|---|---|---|---|")
    print("\n".join(shares))
    return 0 if not F.items else 1


if __name__ == "__main__":
    sys.exit(main())
