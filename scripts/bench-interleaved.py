#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compares two builds of the plugin side by side: runs nccl-mesh-bench with each .so in turn
(A, B, A, B, ...: same machine, same minutes, so load drifts hit both alike), each run measuring
the plugin and plain TCP per size, and prints one markdown table of every row plus medians.

  scripts/bench-interleaved.py --bench BUILD/src/tools/bench/nccl-mesh-bench \
      --plugin old=/path/old.so --plugin new=/path/new.so --rounds 3 -- --sizes 128K,2M,4M

Arguments after -- go to every bench run (add -q; --json is set here). Each run's steal (the
share of the machine's CPU time the hypervisor gave to other guests, /proc/stat) is printed;
--max-steal PCT runs one again when it was higher (a shared cloud host's neighbours). Environment passes
through (e.g. NCCL_MESH_TCP_IO_THREADS); --plugin-env NAME=VAR=VALUE sets a variable for one
plugin's runs only (the same .so under two names compares settings), --plugin-args NAME=ARGS
extra bench arguments for one plugin's runs (e.g. --tcp-spin). Exit status 1 if any run
fails. With --pattern ring-allreduce or ring-traffic the tables are per rank count and size: plugin
time and the bench's own plain-TCP ring time of the same run, and the median of their ratio:

  scripts/bench-interleaved.py --bench ... --plugin old=old.so --plugin new=new.so --rounds 3 \
      -- --nranks 4 --pattern ring-allreduce --sizes 1K,64K,256K,1M,4M -q

The bench times the plugin first and the TCP ring second at each size, and the one timed second
runs slower on a small machine (2 cores, 3 ranks, 1 MiB: up to 19%; docs/measurements.md,
twentieth pass). --alternate-order passes --tcp-first to every even round, so each median covers
both orders (an even --rounds balances them), and the summary adds the median of each order.
--versus NAME adds each plugin's time over NAME's in the same round (runs next to each other),
e.g. Mesh against NCCL's own Socket transport built by scripts/build-nccl-socket.sh:

  NCCL_SOCKET_IFNAME=lo scripts/bench-interleaved.py --bench ... --plugin mesh=mesh.so \
      --plugin sock=OUT/libnccl-net-ncclsocket.so --versus sock --rounds 10 --alternate-order \
      -- --nranks 3 --pattern ring-allreduce --sizes 1K,64K,256K,1M,4M -q"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def running_tasks():
    """Tasks runnable right now on the machine (/proc/stat procs_running, this script included)."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("procs_running"):
                return int(line.split()[1])
    return 0


def wait_for_quiet(max_running, timeout_s):
    """On a shared machine: waits until at most max_running tasks are runnable in five samples
    100 ms apart (other people's builds paused), at most timeout_s; returns the 1-minute load
    average when the run starts."""
    deadline = time.time() + timeout_s
    while max_running > 0 and time.time() < deadline:
        if all(running_tasks() <= max_running and time.sleep(0.1) is None for _ in range(5)):
            break
        time.sleep(0.5)
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def cpu_ticks():
    """(steal, total) jiffies of the machine so far (/proc/stat "cpu" line): the time a
    hypervisor gave this guest's virtual CPUs to someone else counts as steal."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    steal = fields[7] if len(fields) > 7 else 0
    return steal, sum(fields[:8])


def steal_share(before, after):
    """Share of the machine's CPU time stolen between two cpu_ticks() samples (0..1)."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else 0.0


def fmt_size(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def num(v, digits):
    return "-" if v is None else f"{v:.{digits}f}"


def print_ring(plugins, rows, steal):
    """Ring patterns: one row per rank count and size, times of the plugin and of the bench's own
    plain-TCP ring measured in the same run; the summary is the median over rounds of the
    per-run ratio plugin time / TCP time (below 1: the plugin is faster)."""
    def first(r):
        """Which transport the run timed first at this size (bench --tcp-first; rows of a bench
        that does not record it were timed plugin first)."""
        return (r.get("order") or ["plugin"])[0]

    print("| round | plugin | ranks | size | first | plugin us | TCP us | time ratio "
          "| plugin busbw GB/s | TCP busbw GB/s | steal % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for rnd, name, r in rows:
        ratio = None
        if r.get("tcp_time_us"):
            ratio = r["plugin_time_us"] / r["tcp_time_us"]
        print(f"| {rnd} | {name} | {r['nranks']} | {fmt_size(r['bytes'])} | {first(r)} "
              f"| {num(r['plugin_time_us'], 1)} | {num(r.get('tcp_time_us'), 1)} | {num(ratio, 2)} "
              f"| {num(r['plugin_gbps'], 3)} | {num(r.get('tcp_gbps'), 3)} "
              f"| {100 * steal[(rnd, name)]:.1f} |")
    print()
    # With both orders present, the median ratio of each is printed too.
    both = len({first(r) for _, _, r in rows if r.get("tcp_time_us")}) == 2
    extra = " median ratio, plugin first / TCP first |" if both else ""
    print("| plugin | ranks | size | median plugin us | median TCP us | median time ratio (range) "
          "| runs <= 1.0 |" + extra)
    print("|---|---|---|---|---|---|---|" + ("---|" if both else ""))
    for name, _ in plugins:
        keys = sorted({(r["nranks"], r["bytes"]) for _, n, r in rows if n == name})
        for nranks, size in keys:
            sel = [r for _, n, r in rows if n == name and r["nranks"] == nranks
                   and r["bytes"] == size]
            pt = [r["plugin_time_us"] for r in sel]
            tt = [r["tcp_time_us"] for r in sel if r.get("tcp_time_us")]
            ratios = [r["plugin_time_us"] / r["tcp_time_us"] for r in sel if r.get("tcp_time_us")]
            if not ratios:
                # --no-tcp-baseline (plugin alone, e.g. sustained runs): the range of its times.
                print(f"| {name} | {nranks} | {fmt_size(size)} | {statistics.median(pt):.1f} "
                      f"({min(pt):.1f}-{max(pt):.1f}) | - | - | - |")
                continue
            ok = sum(1 for x in ratios if x <= 1.0)
            by_order = ""
            if both:
                def med(who):
                    sub = [r["plugin_time_us"] / r["tcp_time_us"] for r in sel
                           if r.get("tcp_time_us") and first(r) == who]
                    return f"{statistics.median(sub):.2f} ({len(sub)})" if sub else "-"
                by_order = f" {med('plugin')} / {med('tcp')} |"
            print(f"| {name} | {nranks} | {fmt_size(size)} | {statistics.median(pt):.1f} "
                  f"| {statistics.median(tt):.1f} | {statistics.median(ratios):.2f} "
                  f"({min(ratios):.2f}-{max(ratios):.2f}) | {ok}/{len(ratios)} |{by_order}")


def print_versus(plugins, rows, ref):
    """Ring patterns, --versus REF: each other plugin's time over REF's at the same rank count
    and size in the same round (the runs next to each other), median over rounds (below 1: that
    plugin is faster than REF). Compares two transports directly, not through the TCP ring."""
    ref_time = {(rnd, r["nranks"], r["bytes"]): r["plugin_time_us"]
                for rnd, n, r in rows if n == ref}
    print()
    print(f"| plugin | ranks | size | median time / {ref}'s (range) | runs <= 1.0 |")
    print("|---|---|---|---|---|")
    for name, _ in plugins:
        if name == ref:
            continue
        keys = sorted({(r["nranks"], r["bytes"]) for _, n, r in rows if n == name})
        for nranks, size in keys:
            ratios = [r["plugin_time_us"] / ref_time[(rnd, nranks, size)]
                      for rnd, n, r in rows if n == name and r["nranks"] == nranks
                      and r["bytes"] == size and ref_time.get((rnd, nranks, size))]
            if not ratios:
                print(f"| {name} | {nranks} | {fmt_size(size)} | - (no run of {ref} in the "
                      f"same round) | - |")
                continue
            ok = sum(1 for x in ratios if x <= 1.0)
            print(f"| {name} | {nranks} | {fmt_size(size)} | {statistics.median(ratios):.2f} "
                  f"({min(ratios):.2f}-{max(ratios):.2f}) | {ok}/{len(ratios)} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--plugin", action="append", required=True, help="NAME=PATH, twice or more")
    ap.add_argument("--plugin-env", action="append", default=[],
                    help="NAME=VAR=VALUE: set VAR only for that plugin's runs")
    ap.add_argument("--plugin-args", action="append", default=[],
                    help="NAME=ARGS: extra bench arguments (split on spaces) for that plugin's "
                         "runs only, e.g. 'spin=--tcp-spin' to time the plain-TCP ring polling")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-running", type=int, default=0,
                    help="before each run wait (up to --gate-timeout s) until at most this many "
                         "tasks are runnable on the machine (0: do not wait)")
    ap.add_argument("--gate-timeout", type=float, default=60)
    ap.add_argument("--max-steal", type=float, default=0,
                    help="percent: a run during which the hypervisor stole more of the machine's "
                         "CPU time than this is run again, up to --steal-retries times (0: keep "
                         "every run); each run's steal is printed either way")
    ap.add_argument("--steal-retries", type=int, default=3)
    ap.add_argument("--alternate-order", action="store_true",
                    help="ring patterns: time the TCP ring first (bench --tcp-first) in every "
                         "even round, the plugin first in odd ones")
    ap.add_argument("--versus", metavar="NAME",
                    help="ring patterns: also print each plugin's time over NAME's (one of the "
                         "--plugin names) in the same round, e.g. against NCCL's own Socket "
                         "built by scripts/build-nccl-socket.sh")
    ap.add_argument("bench_args", nargs=argparse.REMAINDER)
    opt = ap.parse_args()
    extra = [a for a in opt.bench_args if a != "--"]
    plugins = [p.split("=", 1) for p in opt.plugin]
    if opt.versus is not None and opt.versus not in [name for name, _ in plugins]:
        ap.error(f"--versus {opt.versus}: not one of the --plugin names")
    envs = {name: dict(os.environ) for name, _ in plugins}
    for spec in opt.plugin_env:
        name, var, value = spec.split("=", 2)
        envs[name][var] = value
    args = {name: [] for name, _ in plugins}
    for spec in opt.plugin_args:
        name, value = spec.split("=", 1)
        args[name] += value.split()
    rows = []
    steal = {}
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(1, opt.rounds + 1):
            for name, path in plugins:
                out = os.path.join(tmp, f"{name}-{rnd}.json")
                cmd = [opt.bench, "--plugin", path, "--json", out] + extra + args[name]
                if opt.alternate_order and rnd % 2 == 0:
                    cmd.append("--tcp-first")
                for attempt in range(1 + max(0, opt.steal_retries)):
                    load = wait_for_quiet(opt.max_running, opt.gate_timeout)
                    print(f"# round {rnd} {name} (load {load:.2f}): {' '.join(cmd)}",
                          file=sys.stderr, flush=True)
                    t0 = cpu_ticks()
                    res = subprocess.run(cmd, stdout=subprocess.DEVNULL, env=envs[name])
                    steal[(rnd, name)] = steal_share(t0, cpu_ticks())
                    over = opt.max_steal > 0 and 100 * steal[(rnd, name)] > opt.max_steal
                    print(f"# round {rnd} {name}: steal {100 * steal[(rnd, name)]:.1f}%"
                          + (" (over --max-steal: run again)" if over and attempt < opt.steal_retries
                             else ""), file=sys.stderr, flush=True)
                    if res.returncode != 0 or not over:
                        break
                if res.returncode != 0 or not os.path.exists(out):
                    print(f"# round {rnd} {name}: bench exited {res.returncode}", file=sys.stderr)
                    failed = True
                    continue
                with open(out) as f:
                    for r in json.load(f)["rows"]:
                        rows.append((rnd, name, r))
    if rows and all(r.get("pattern", "").startswith("ring") for _, _, r in rows):
        print_ring(plugins, rows, steal)
        if opt.versus is not None:
            print_versus(plugins, rows, opt.versus)
        return 1 if failed else 0
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
