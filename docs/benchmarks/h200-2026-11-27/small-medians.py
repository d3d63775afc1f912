#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Median time per call, Mesh / Socket, of every bench JSON given (nccl-mesh-gpu-e2e --mode
bench), per collective, rank count and size up to 4 MiB: the run-to-run spread on one machine.
Usage: small-medians.py bench.json bench-small-*.json"""
import json
import statistics
import sys

times = {}
for path in sys.argv[1:]:
    for s in json.load(open(path))["sets"]:
        for r in s["results"]:
            if r["ok"] and r["bytes"] <= 4 << 20 and r["bytes"] >= 1000:
                # all_gather / reduce_scatter sizes are rounded to the rank count's multiple
                size = 1 << (r["bytes"] - 1).bit_length()
                times.setdefault((r["coll"], s["nranks"], size, s["net"]), []).append(r["time_us"])
print("coll            ranks  size   Mesh us  Socket us  Mesh/Socket  (samples)")
for key in sorted(k for k in times if k[3] == "Mesh"):
    coll, n, size, _ = key
    mesh, sock = times[key], times.get((coll, n, size, "Socket"))
    if not sock or size < 1024 or size not in (1 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20):
        continue
    m, s = statistics.median(mesh), statistics.median(sock)
    print(f"{coll:15s} {n:5d} {size // 1024:5d}K {m:9.1f} {s:10.1f} {m / s:12.2f}  ({len(mesh)})")
