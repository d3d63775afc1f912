#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 28: which TCP data-path setting makes Mesh no slower than NCCL's Socket at mid sizes.

Reads the bench JSONs of scripts/gpu-knob-sweep.sh (OUT/<setting>/r<round>/bench.json, each a
`nccl-mesh-gpu-e2e --mode bench --net Mesh,Socket` run) and prints, per setting, the median over
the rounds of Mesh's time per call divided by Socket's (both from the same run), per collective,
rank count and size, then one summary line per setting: cells slower than Socket, the worst
cell, and the geometric mean of the ratios. Any directory of such runs works, e.g. the H200
repeats of 2026-11-27 as one setting:

  scripts/knob-sweep-report.py default=docs/benchmarks/h200-2026-11-27/bench-small-*.json

Arguments: SETTING=FILE (repeatable; several files per setting are its rounds) or --dir OUT.
Exit status 1 only when nothing could be read."""
import argparse
import glob
import json
import math
import os
import statistics
import sys

SIZES = (1 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20)


def cells(path):
    """(coll, nranks, size) -> Mesh time / Socket time of one run."""
    times = {}
    for s in json.load(open(path))["sets"]:
        for r in s["results"]:
            if not r.get("ok"):
                continue
            # all_gather / reduce_scatter round sizes down to a multiple of the rank count
            size = 1 << (max(r["bytes"], 1) - 1).bit_length()
            if size in SIZES:
                times[(r["coll"], s["nranks"], size, s["net"])] = r["time_us"]
    out = {}
    for (coll, n, size, net), t in times.items():
        sock = times.get((coll, n, size, "Socket"))
        if net == "Mesh" and sock:
            out[(coll, n, size)] = t / sock
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*", help="SETTING=FILE")
    ap.add_argument("--dir", help="a gpu-knob-sweep.sh output folder")
    a = ap.parse_args()
    files = {}
    for spec in a.runs:
        name, _, path = spec.partition("=")
        files.setdefault(name, []).extend(sorted(glob.glob(path)) or [path])
    if a.dir:
        for path in sorted(glob.glob(os.path.join(a.dir, "*", "r*", "bench.json"))):
            files.setdefault(os.path.basename(os.path.dirname(os.path.dirname(path))), []).append(
                path)
    ratios = {}
    for name, paths in files.items():
        for p in paths:
            try:
                for key, v in cells(p).items():
                    ratios.setdefault(name, {}).setdefault(key, []).append(v)
            except (OSError, ValueError, KeyError) as e:
                print(f"knob-sweep-report: {p}: {e}", file=sys.stderr)
    if not ratios:
        print("knob-sweep-report: no bench results read", file=sys.stderr)
        return 1
    summary = []
    for name in files:
        table = ratios.get(name, {})
        if not table:
            continue
        rounds = max(len(v) for v in table.values())
        print(f"\n{name}: median Mesh/Socket time per call over {rounds} run(s)")
        colls = sorted({k[0] for k in table})
        ranks = sorted({k[1] for k in table})
        print(f"{'coll':15s} {'ranks':>5s} " + " ".join(f"{s // 1024:>6d}K" for s in SIZES))
        med = {k: statistics.median(v) for k, v in table.items()}
        for coll in colls:
            for n in ranks:
                row = [med.get((coll, n, s)) for s in SIZES]
                if any(x is not None for x in row):
                    print(f"{coll:15s} {n:5d} " +
                          " ".join(f"{x:7.2f}" if x is not None else "      -" for x in row))
        worst = max(med, key=med.get)
        slower = sum(1 for v in med.values() if v > 1.0)
        gmean = math.exp(sum(math.log(v) for v in med.values()) / len(med))
        summary.append(f"SWEEP {name}: {slower} of {len(med)} cells slower than Socket at the "
                       f"median; worst {worst[0]} {worst[1]} ranks {worst[2] // 1024}K at "
                       f"{med[worst]:.2f}x; geometric mean {gmean:.3f}")
    print()
    for line in summary:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
