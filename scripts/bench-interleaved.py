#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compares two builds of the plugin side by side: runs nccl-mesh-bench with each .so in turn
(A, B, A, B, ...: same machine, same minutes, so load drifts hit both alike), each run measuring
the plugin and plain TCP per size, and prints one markdown table of every row plus medians.

  scripts/bench-interleaved.py --bench BUILD/src/tools/bench/nccl-mesh-bench \
      --plugin old=/path/old.so --plugin new=/path/new.so --rounds 3 -- --sizes 128K,2M,4M

Arguments after -- go to every bench run (add -q; --json is set here). Environment passes
through (e.g. NCCL_MESH_TCP_IO_THREADS); --plugin-env NAME=VAR=VALUE sets a variable for one
plugin's runs only (the same .so under two names compares settings). Exit status 1 if any run
fails."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def fmt_size(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def num(v, digits):
    return "-" if v is None else f"{v:.{digits}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--plugin", action="append", required=True, help="NAME=PATH, twice or more")
    ap.add_argument("--plugin-env", action="append", default=[],
                    help="NAME=VAR=VALUE: set VAR only for that plugin's runs")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("bench_args", nargs=argparse.REMAINDER)
    opt = ap.parse_args()
    extra = [a for a in opt.bench_args if a != "--"]
    plugins = [p.split("=", 1) for p in opt.plugin]
    envs = {name: dict(os.environ) for name, _ in plugins}
    for spec in opt.plugin_env:
        name, var, value = spec.split("=", 2)
        envs[name][var] = value
    rows = []
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(1, opt.rounds + 1):
            for name, path in plugins:
                out = os.path.join(tmp, f"{name}-{rnd}.json")
                cmd = [opt.bench, "--plugin", path, "--json", out] + extra
                print(f"# round {rnd} {name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
                res = subprocess.run(cmd, stdout=subprocess.DEVNULL, env=envs[name])
                if res.returncode != 0 or not os.path.exists(out):
                    print(f"# round {rnd} {name}: bench exited {res.returncode}", file=sys.stderr)
                    failed = True
                    continue
                with open(out) as f:
                    for r in json.load(f)["rows"]:
                        rows.append((rnd, name, r))
    print("| round | plugin | pair | size | plugin GB/s | TCP GB/s | bw ratio | plugin CPU s/GB "
          "| TCP CPU s/GB | CPU ratio | plugin csw/GB | TCP csw/GB | threads/rank |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for rnd, name, r in rows:
        print(f"| {rnd} | {name} | {r['src']}->{r['dst']} | {fmt_size(r['bytes'])} "
              f"| {num(r['plugin_gbps'], 2)} | {num(r['tcp_gbps'], 2)} | {num(r['tcp_bw_ratio'], 2)} "
              f"| {num(r['plugin_cpu_s_per_gb'], 3)} | {num(r['tcp_cpu_s_per_gb'], 3)} "
              f"| {num(r['tcp_cpu_ratio'], 2)} | {num(r['plugin_csw_per_gb'], 0)} "
              f"| {num(r['tcp_csw_per_gb'], 0)} | {num(r['plugin_threads'], 0)} |")
    print()
    print("| plugin | size | median bw ratio (range) | median CPU ratio (range) | median plugin csw/GB |")
    print("|---|---|---|---|---|")
    for name, _ in plugins:
        sizes = sorted({r["bytes"] for _, n, r in rows if n == name})
        for size in sizes + [None]:
            sel = [r for _, n, r in rows if n == name and (size is None or r["bytes"] == size)]
            bw = [r["tcp_bw_ratio"] for r in sel if r["tcp_bw_ratio"] is not None]
            cpu = [r["tcp_cpu_ratio"] for r in sel if r["tcp_cpu_ratio"] is not None]
            csw = [r["plugin_csw_per_gb"] for r in sel if r["plugin_csw_per_gb"] is not None]
            if not bw:
                continue
            label = "all" if size is None else fmt_size(size)
            print(f"| {name} | {label} | {statistics.median(bw):.2f} ({min(bw):.2f}-{max(bw):.2f}) "
                  f"| {statistics.median(cpu):.2f} ({min(cpu):.2f}-{max(cpu):.2f}) "
                  f"| {statistics.median(csw):.0f} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
