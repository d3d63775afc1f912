#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""NCCL's choices over Mesh against its choices over Socket (issue 28).

The first GPU run had NCCL over Mesh 1.30-1.46x slower than over Socket at 1 KiB with 3-4 ranks,
where the bench's loop on the 2-core machine has Mesh faster than NCCL's Socket net code at every
size. What is left between the two is NCCL itself, and the first thing to rule out is that it
chose differently: another algorithm, protocol or channel count for the same collective and
size (the plugin's tuner, its properties). With NCCL_DEBUG_SUBSYS including TUNING, NCCL 2.28's
rank 0 logs each collective it enqueues (src/enqueue.cc):

    <host>:<pid>:<tid> [<dev>] NCCL INFO AllReduce: 1024 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..1}

This reads the rank0.log of each bench set that nccl-mesh-gpu-e2e --mode bench wrote
(DIR/bench-<net>-n<ranks>/rank0.log), and prints per rank count and collective, for each size,
what NCCL chose over each net, marking the cells where Mesh and Socket differ, then one line per
rank count:

    SUMMARY choices n3: Mesh and Socket agree in 18 of 20 cells; differ: AllReduce 1024 B (Mesh RING/LL 2 ch, Socket TREE/LL 2 ch); ...

A cell with several choices over one net (NCCL changed its mind between calls) lists them all.
Exit status 1 when no set had a TUNING line (TUNING was not on, or no set ran: DIR may not
exist), else 0: a difference is a finding, not a failure.
"""
import argparse
import collections
import pathlib
import re
import sys

LINE = re.compile(r"NCCL INFO (\w+): (\d+) Bytes -> Algo (\S+) proto (\S+) "
                  r"channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}")
SET = re.compile(r"^bench-(Mesh|Socket)-n(\d+)$")


def read_choices(log):
    """{(collective, bytes): set of "ALGO/PROTO N ch"} from one rank0.log."""
    cells = collections.defaultdict(set)
    with open(log, errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if m:
                func, nbytes, algo, proto, lo, hi = m.groups()
                cells[(func, int(nbytes))].add(f"{algo}/{proto} {int(hi) - int(lo) + 1} ch")
    return cells


def show(choices):
    return ", ".join(sorted(choices)) if choices else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the --out folder of nccl-mesh-gpu-e2e --mode bench")
    args = ap.parse_args()
    sets = collections.defaultdict(dict)  # ranks -> net -> cells
    top = pathlib.Path(args.dir)
    for d in sorted(top.iterdir()) if top.is_dir() else []:
        m = SET.match(d.name)
        if m and (d / "rank0.log").is_file():
            cells = read_choices(d / "rank0.log")
            if cells:
                sets[int(m.group(2))][m.group(1)] = cells
    if not sets:
        print(f"choices: no NCCL TUNING line in {args.dir}/bench-*-n*/rank0.log "
              "(NCCL_DEBUG_SUBSYS must include TUNING)", file=sys.stderr)
        return 1
    for n in sorted(sets):
        nets = sets[n]
        mesh, sock = nets.get("Mesh", {}), nets.get("Socket", {})
        keys = sorted(set(mesh) | set(sock))
        print(f"## {n} ranks: NCCL's choice per collective and size (rank 0's TUNING lines)")
        print("| collective | bytes | Mesh | Socket | |")
        print("|---|---|---|---|---|")
        differ = []
        for key in keys:
            a, b = mesh.get(key, set()), sock.get(key, set())
            same = a == b
            if not same:
                differ.append(f"{key[0]} {key[1]} B (Mesh {show(a)}, Socket {show(b)})")
            print(f"| {key[0]} | {key[1]} | {show(a)} | {show(b)} | {'' if same else 'differ'} |")
        print()
        if not mesh or not sock:
            print(f"SUMMARY choices n{n}: only {'Mesh' if mesh else 'Socket'} has TUNING lines")
            continue
        agree = len(keys) - len(differ)
        line = f"SUMMARY choices n{n}: Mesh and Socket agree in {agree} of {len(keys)} cells"
        print(line + (f"; differ: {'; '.join(differ)}" if differ else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
