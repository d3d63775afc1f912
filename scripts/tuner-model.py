#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What forcing NCCL's Ring costs on a full mesh, by NCCL's own cost model.

Evaluates the cost model of NCCL 2.28.9 (src/graph/tuning.cc: ncclTopoTuneModel and
ncclTopoGetAlgoTime; the constants are NCCL's published defaults) for one GPU per node on the
network (NCCL_HW_NET), Hopper, an Intel host, LL and Simple (LL128 needs a GPU-NIC path of PXN
or better, which a host-attached NIC of this plugin is not), and prints, per collective, node
count and size, the algorithm NCCL picks by itself and the ratio (Ring's best time) / (NCCL's
best time): 1.00 means steering to Ring costs nothing there. docs/measurements.md ("Tuner: the
rule for auto") holds its output; the tuner's default threshold (NCCL_MESH_TUNER_MIN_BYTES) is
the size from which the ratio is 1.00 for AllReduce at 3..8 nodes.

Usage: scripts/tuner-model.py [--channels C] [--bw GBPS_PER_CHANNEL] [--nodes 3,4,5,8]
"""
import argparse

TREE, RING, PAT = 0, 1, 6
LL, SIMPLE = 0, 2
NAMES = {TREE: "Tree", RING: "Ring", PAT: "PAT"}
PROTO = {LL: "LL", SIMPLE: "Simple"}
BASE_LAT = {TREE: [6.8, 14.0, 8.4], RING: [6.6, 14.0, 8.4], PAT: [8.0, 8.0, 8.0]}
NET_LAT_TREE = [5.0, 8.5, 14.0]  # hwLatencies[NET][Tree]: NCCL uses it for every algo at ppn 1
LL_MAX_BW = 20.4                  # llMaxBws[Intel][>2 nodes]
PER_CH_MAX_TREE_BW = 36.0         # perChMaxTreeBws[Hopper][>2 nodes]
TREE_CORRECTION = {  # treeCorrectionFactor[proto][log2(nBytes/64)]
    LL: [1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0,
         1.0, 1.0],
    SIMPLE: [.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9,
             .9],
}
RING_ABLE = ("AllReduce", "AllGather", "ReduceScatter")


def log2i(n):
    return n.bit_length() - 1 if n > 0 else -1


def entries(coll, n, channels, bw):
    """(algorithm, protocol) -> (bus bandwidth converted to algorithm bandwidth, latency)."""
    nsteps = 2 * (n - 1) if coll == "AllReduce" else n - 1
    out = {}
    for a in (TREE, RING, PAT):
        if coll == "AllReduce" and a == PAT:
            continue
        if coll != "AllReduce" and a == TREE:
            continue
        for p in (LL, SIMPLE):
            if a == PAT and p != SIMPLE:
                continue
            bus = channels * bw
            if a == RING and p == LL:
                bus = min(LL_MAX_BW, bus * .5)
            if a == TREE:
                bus = min(bus * .92, channels * PER_CH_MAX_TREE_BW)
                if p == LL:
                    bus = min(bus / 3.8, LL_MAX_BW)
            if a == PAT:
                bus *= .75
            if a == RING:
                bus *= n / nsteps
            elif coll == "AllReduce":
                bus *= .5
            lat = BASE_LAT[a][p]
            inter = NET_LAT_TREE[p]
            if a == RING:
                lat += (2 * (n - 1) if coll == "AllReduce" else n - 1) * inter
            elif a == TREE:
                lat += 2 * log2i(n) * inter
            else:
                lat += log2i(n) * (inter / 3.5) + n * 2.8
            out[(a, p)] = (bus, lat)
    return out


def time_us(coll, n, channels, nbytes, a, p, bus, lat):
    ls = log2i(nbytes >> 6)
    if a == TREE and 0 <= ls < 23:
        bus *= TREE_CORRECTION[p][ls]
    if a == RING and p == SIMPLE and coll == "AllReduce" and nbytes // (channels * n) >= 64:
        lat *= 1.4
    return lat + nbytes / (1000 * bus)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--channels", type=int, default=2)
    ap.add_argument("--bw", type=float, default=12.0, help="GB/s per channel (200 Gb/s NIC: 12)")
    ap.add_argument("--nodes", default="3,4,5,8")
    args = ap.parse_args()
    sizes = [1 << e for e in range(10, 27, 2)]
    nodes = [int(x) for x in args.nodes.split(",")]
    print(f"NCCL 2.28.9 cost model, 1 GPU per node, {args.channels} channels x {args.bw} GB/s")
    print("cell: NCCL's own pick, then Ring's time / NCCL's best time\n")
    print("| collective | nodes | " + " | ".join(f"{s >> 10} KiB" for s in sizes) +
          " | NCCL picks Ring from |")
    print("|---|---|" + "---|" * len(sizes) + "---|")
    for coll in RING_ABLE:
        for n in nodes:
            table = entries(coll, n, args.channels, args.bw)
            cells, crossover = [], None
            all_sizes = [1 << e for e in range(6, 31)]
            ratio_at = {}
            for s in all_sizes:
                t = {k: time_us(coll, n, args.channels, s, k[0], k[1], *v) for k, v in table.items()}
                best = min(t, key=t.get)
                ring = min(v for k, v in t.items() if k[0] == RING)
                ratio_at[s] = (f"{NAMES[best[0]]}/{PROTO[best[1]]}", ring / t[best])
            for i, s in enumerate(all_sizes):
                if all(ratio_at[x][1] <= 1.0001 for x in all_sizes[i:]):
                    crossover = s
                    break
            for s in sizes:
                pick, r = ratio_at[s]
                cells.append(f"{pick} {r:.2f}")
            cross = f"{crossover >> 10} KiB" if crossover and crossover >= 1024 else f"{crossover} B"
            print(f"| {coll} | {n} | " + " | ".join(cells) + f" | {cross} |")


if __name__ == "__main__":
    main()
