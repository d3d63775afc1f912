#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch over the mesh plugin: N ranks as processes on one GPU, each its own NCCL "host".

The launcher (default) starts one process set per world size: every rank is this script with
--worker, in its own process with NCCL_HOSTID=host<rank> and the plugin environment, so all of
PyTorch's NCCL traffic goes through the network plugin. Each worker runs
init_process_group("nccl"), checks all_reduce / all_gather / broadcast / reduce_scatter results
exactly, then trains a tiny model with DistributedDataParallel and checks that the parameters
are bit-identical on all ranks and match a single-process reference trained on the whole batch.
The launcher also requires "via NET/<net>/" lines in every rank's NCCL log.

Exit status: 0 all passed, 1 a check failed, 2 usage/setup error, --skip-exit-code without a GPU.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

GRACE_AFTER_FAILURE_S = 10  # peers of a failed rank are blocked in a collective: end them
_children = []  # worker processes of the running set, ended if this launcher is terminated


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="2,4", help="world sizes, one process set each")
    p.add_argument("--plugin", help="absolute path of libnccl-net-mesh.so (net Mesh)")
    p.add_argument("--net", default="Mesh", choices=["Mesh", "Socket"])
    p.add_argument("--out", default="torch-check-out", help="logs and torch.json go here")
    p.add_argument("--timeout", type=float, default=240, help="seconds per process set")
    p.add_argument("--total-timeout", type=float, default=0,
                   help="seconds for the whole run (0: none); later sets get what is left")
    p.add_argument("--skip-exit-code", type=int, default=0)
    # Worker role (internal).
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    p.add_argument("--world", type=int, help=argparse.SUPPRESS)
    p.add_argument("--store", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    return p.parse_args()


# ----------------------------------------------------------------------------------- worker


class Checks:
    def __init__(self):
        self.items = []

    def add(self, name, ok, detail=""):
        self.items.append({"name": name, "ok": bool(ok), "detail": detail})
        if not ok:
            print(f"FAIL {name}: {detail}", flush=True)

    def failed(self):
        return [c for c in self.items if not c["ok"]]


def check_equal(checks, name, got, want):
    import torch

    got = got.cpu().flatten()
    want = want.to(got.dtype).flatten()
    ok = torch.equal(got, want)
    detail = ""
    if not ok:
        wrong = (got != want).nonzero().flatten()
        i = int(wrong[0])
        detail = f"{wrong.numel()} of {got.numel()} wrong; [{i}] got {got[i].item()} want {want[i].item()}"
    checks.add(name, ok, detail)


def run_collectives(checks, rank, world, dev):
    """Inputs are small integers so every dtype, bfloat16 included, gives exact results."""
    import torch
    import torch.distributed as dist

    n, r = world, rank
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int64):
        tag = str(dtype).replace("torch.", "")
        for numel in (1, 1000, (4 << 20) + 3):
            idx = torch.arange(numel, dtype=torch.int64)
            # all_reduce (sum): sum_r (idx % 13 + r + 1)
            x = ((idx % 13) + r + 1).to(dtype).to(dev)
            dist.all_reduce(x)
            check_equal(checks, f"all_reduce/{tag}/{numel}", x, (idx % 13) * n + n * (n + 1) // 2)
            # all_reduce (max)
            x = ((idx + r) % 17).to(dtype).to(dev)
            dist.all_reduce(x, op=dist.ReduceOp.MAX)
            want = torch.stack([(idx + q) % 17 for q in range(n)]).max(dim=0).values
            check_equal(checks, f"all_reduce_max/{tag}/{numel}", x, want)
            # all_gather_into_tensor: block q is rank q's input
            x = ((idx % 7) + 10 * r).to(dtype).to(dev)
            out = torch.empty(n * numel, dtype=dtype, device=dev)
            dist.all_gather_into_tensor(out, x)
            check_equal(checks, f"all_gather/{tag}/{numel}", out,
                        torch.cat([(idx % 7) + 10 * q for q in range(n)]))
            # broadcast from the last rank
            x = ((idx % 11) + 10 * r).to(dtype).to(dev)
            dist.broadcast(x, src=n - 1)
            check_equal(checks, f"broadcast/{tag}/{numel}", x, (idx % 11) + 10 * (n - 1))
            # reduce_scatter_tensor (sum): block `rank` of the sum over ranks
            big = torch.arange(n * numel, dtype=torch.int64)
            x = ((big % 5) + r).to(dtype).to(dev)
            out = torch.empty(numel, dtype=dtype, device=dev)
            dist.reduce_scatter_tensor(out, x)
            mine = big[r * numel:(r + 1) * numel]
            check_equal(checks, f"reduce_scatter/{tag}/{numel}", out,
                        (mine % 5) * n + n * (n - 1) // 2)
    # The list form of all_gather and a barrier, as user code writes them.
    t = torch.full((3,), float(r), device=dev)
    parts = [torch.empty_like(t) for _ in range(n)]
    dist.all_gather(parts, t)
    check_equal(checks, "all_gather_list", torch.stack(parts),
                torch.arange(n, dtype=torch.float32).repeat_interleave(3).view(n, 3))
    dist.barrier(device_ids=[dev.index])


def run_ddp(checks, rank, world, dev):
    """A few SGD steps with DDP; params must stay identical on all ranks and equal a
    single-process reference trained on the concatenated batch (float64, so the only
    difference is summation order)."""
    import copy

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(),
                                torch.nn.Linear(32, 4)).double().to(dev)
    reference = copy.deepcopy(model)
    ddp = DDP(model, device_ids=[dev.index])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    initial = torch.cat([p.detach().flatten() for p in model.parameters()]).clone()
    gen = torch.Generator().manual_seed(1234)  # same batches on every rank
    per_rank = 8
    for _ in range(5):
        xs = torch.randn(world * per_rank, 16, generator=gen, dtype=torch.float64)
        ys = torch.randn(world * per_rank, 4, generator=gen, dtype=torch.float64)
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        opt.zero_grad()
        # DDP averages gradients over ranks: with equal shards and a mean loss this is the
        # gradient of the mean loss over the whole batch, which is what the reference uses.
        F.mse_loss(ddp(xs[mine].to(dev)), ys[mine].to(dev)).backward()
        opt.step()
        ref_opt.zero_grad()
        F.mse_loss(reference(xs.to(dev)), ys.to(dev)).backward()
        ref_opt.step()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    same = all(torch.equal(gathered[0], g) for g in gathered)
    checks.add("ddp/params_identical_across_ranks", same,
               "" if same else f"max diff {max((gathered[0] - g).abs().max().item() for g in gathered)}")
    ref_flat = torch.cat([p.detach().flatten() for p in reference.parameters()])
    diff = (flat - ref_flat).abs().max().item()
    close = torch.allclose(flat, ref_flat, rtol=1e-9, atol=1e-12)
    checks.add("ddp/params_match_single_process", close, f"max abs diff {diff:.3g}")
    # Guards against a vacuous pass: the steps must actually have changed the parameters.
    checks.add("ddp/params_changed", not torch.equal(flat, initial), "parameters never moved")


def worker(args):
    import datetime

    import torch
    import torch.distributed as dist

    print(f"torch_check rank {args.rank}/{args.world}: torch {torch.__version__}, "
          f"NCCL_HOSTID={os.environ.get('NCCL_HOSTID')} NCCL_NET={os.environ.get('NCCL_NET')}",
          flush=True)
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    # device_id makes PyTorch create the NCCL communicator now, not at the first collective.
    dist.init_process_group("nccl", init_method=f"file://{args.store}", rank=args.rank,
                            world_size=args.world, device_id=dev,
                            timeout=datetime.timedelta(seconds=120))
    print(f"torch_check rank {args.rank}: NCCL {torch.cuda.nccl.version()}", flush=True)
    checks = Checks()
    run_collectives(checks, args.rank, args.world, dev)
    run_ddp(checks, args.rank, args.world, dev)
    torch.cuda.synchronize()
    dist.destroy_process_group()
    with open(args.result, "w") as f:
        json.dump({"rank": args.rank, "checks": checks.items}, f)
    failed = checks.failed()
    print(f"torch_check rank {args.rank}: {len(checks.items) - len(failed)}/{len(checks.items)} "
          f"checks passed", flush=True)
    return 1 if failed else 0


# --------------------------------------------------------------------------------- launcher


def rank_env(rank, args):
    """Same environment as the C++ launcher (tests/gpu/launcher.cc)."""
    env = dict(os.environ)
    env.update({
        "NCCL_HOSTID": f"host{rank}",  # N one-GPU "hosts": all traffic through the net plugin
        "NCCL_SOCKET_IFNAME": "lo",
        "NCCL_MNNVL_ENABLE": "0",
        "NCCL_NET_PLUGIN_REF_COUNT": "1",
        "NCCL_DEBUG": "INFO",
        "PYTHONUNBUFFERED": "1",
    })
    env.setdefault("NCCL_DEBUG_SUBSYS", "INIT,NET")
    env.pop("NCCL_DEBUG_FILE", None)
    if args.net == "Mesh":
        env.update({"NCCL_NET_PLUGIN": args.plugin, "NCCL_NET": "Mesh", "NCCL_MESH_IFNAME": "lo"})
    else:
        env.update({"NCCL_NET_PLUGIN": "none", "NCCL_NET": "Socket"})
    return env


def scan_log(path, net):
    """Returns (via lines, problems) from one rank's log."""
    via, problems, version = 0, [], ""
    good = f"via NET/{net}/"
    with open(path, errors="replace") as f:
        for line in f:
            if "NCCL version " in line and not version:
                version = line.split("NCCL version ", 1)[1].split()[0]
            if "] via " in line and ("[send]" in line or "[receive]" in line):
                if good in line:
                    via += 1
                else:
                    problems.append(f"traffic not via NET/{net}: {line.strip()}")
    if via == 0:
        problems.append(f'no "{good}" line in {path}')
    return via, problems[:3], version


def run_world(world, args, timeout):
    name = f"torch-{args.net}-n{world}"
    folder = os.path.join(args.out, name)
    shutil.rmtree(folder, ignore_errors=True)  # a stale store file would confuse the rendezvous
    os.makedirs(folder)
    store = os.path.join(folder, "store")
    procs, logs, results = [], [], []
    start = time.monotonic()
    for r in range(world):
        log = os.path.join(folder, f"rank{r}.log")
        result = os.path.join(folder, f"result-rank{r}.json")
        logs.append(log)
        results.append(result)
        with open(log, "w") as f:
            _children.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--worker", "--rank", str(r),
                 "--world", str(world), "--store", store, "--result", result, "--net", args.net],
                env=rank_env(r, args), stdout=f, stderr=subprocess.STDOUT))
            procs.append(_children[-1])
    problems, first_failure = [], None
    while any(p.poll() is None for p in procs):
        now = time.monotonic()
        if first_failure is None and any(p.poll() not in (None, 0) for p in procs):
            first_failure = now
        over = now - start > timeout
        if over or (first_failure is not None and now - first_failure > GRACE_AFTER_FAILURE_S):
            problems.append(f"timeout after {timeout:.0f} s" if over
                            else "killed the remaining ranks after a rank failed")
            for p in procs:
                if p.poll() is None:
                    p.kill()
            for p in procs:
                p.wait()
            break
        time.sleep(0.05)
    codes = [p.returncode for p in procs]
    _children.clear()
    for r, code in enumerate(codes):
        if code != 0:
            problems.append(f"rank {r}: exit {code} (log: {logs[r]})")
    via_total, version, checks, failed = 0, "", 0, []
    for r in range(world):
        via, log_problems, v = scan_log(logs[r], args.net)
        via_total += via
        version = version or v
        if codes[r] == 0:
            problems += [f"rank {r}: {p}" for p in log_problems]
        try:
            with open(results[r]) as f:
                items = json.load(f)["checks"]
        except (OSError, ValueError, KeyError):
            items = []
            if codes[r] == 0:
                problems.append(f"rank {r}: no result file {results[r]}")
        checks += len(items)
        failed += [f"rank {r}: {c['name']}: {c['detail']}" for c in items if not c["ok"]]
    outcome = {"name": name, "nranks": world, "net": args.net, "passed": not problems and not failed,
               "seconds": round(time.monotonic() - start, 2), "exit_codes": codes,
               "via_net_lines": via_total, "nccl_version": version, "checks": checks,
               "failed_checks": failed, "problems": problems, "dir": folder}
    print(f"[{'PASS' if outcome['passed'] else 'FAIL'}] {name}: {checks} checks, {len(failed)} failed, "
          f"{via_total} via-NET/{args.net} lines, NCCL {version or '?'}, {outcome['seconds']} s",
          flush=True)
    for line in (problems + failed)[:12]:
        print(f"       {line}", flush=True)
    return outcome


def _terminate(signum, _frame):
    """A `timeout` around this script must not leave ranks running on the GPU."""
    for p in _children:
        if p.poll() is None:
            p.kill()
    sys.exit(128 + signum)


def launcher(args):
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, _terminate)
    try:
        import torch
    except ImportError as e:
        print(f"SKIP: PyTorch not importable ({e})")
        return args.skip_exit_code
    if not torch.cuda.is_available():
        # device_count() does not create a context; is_available() is False without a driver.
        print(f"SKIP: no CUDA device (torch.cuda.is_available() is False, "
              f"device_count {torch.cuda.device_count()}, torch {torch.__version__})")
        return args.skip_exit_code
    if args.net == "Mesh":
        if not args.plugin or not os.path.isfile(args.plugin):
            print(f"ERROR: plugin library {args.plugin!r} not found (pass --plugin)")
            return 2
        args.plugin = os.path.abspath(args.plugin)
    os.makedirs(args.out, exist_ok=True)
    worlds = [int(w) for w in args.ranks.split(",") if w]
    outcomes, start = [], time.monotonic()
    for w in worlds:
        timeout = args.timeout
        if args.total_timeout > 0:
            # Stay inside the caller's budget so that torch.json is always written.
            left = args.total_timeout - (time.monotonic() - start)
            if left < 10:
                outcomes.append({"name": f"torch-{args.net}-n{w}", "nranks": w, "passed": False,
                                 "problems": ["not run: --total-timeout reached"]})
                print(f"[FAIL] torch-{args.net}-n{w}: not run, --total-timeout reached")
                continue
            timeout = min(timeout, left)
        outcomes.append(run_world(w, args, timeout))
    passed = sum(o["passed"] for o in outcomes)
    report = {"mode": "torch", "torch": torch.__version__, "plugin": args.plugin, "sets": outcomes,
              "sets_passed": passed, "sets_failed": len(outcomes) - passed}
    path = os.path.join(args.out, "torch.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=2)
    print(f"JSON report: {path}")
    print(f"SUMMARY torch: {passed}/{len(outcomes)} process sets passed")
    return 0 if passed == len(outcomes) else 1


def main():
    args = parse_args()
    return worker(args) if args.worker else launcher(args)


if __name__ == "__main__":
    sys.exit(main())
