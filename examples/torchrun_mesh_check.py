# SPDX-License-Identifier: Apache-2.0
"""torchrun check of a switchless mesh: collectives, a DDP step and an FSDP step, verified.

    torchrun --nnodes=N --nproc_per_node=G --node_rank=R \
             --master_addr=MGMT_ADDR_OF_NODE0 --master_port=29500 \
             torchrun_mesh_check.py [--sizes 4K,1M,64M] [--iters 5] [--backend auto|nccl|gloo]

With GPUs (backend nccl): every collective runs through NCCL and so through nccl-mesh when
NCCL_NET_PLUGIN=mesh and NCCL_NET=Mesh are set (docs/deploy.md); the script refuses to run a
multi-node NCCL job without NCCL_NET=Mesh, which would otherwise fall back to NCCL's Socket
transport in silence. On CPU-only machines (backend gloo) it checks what NCCL's jobs depend on
besides the plugin: the rendezvous, the bootstrap network (GLOO_SOCKET_IFNAME, which on a ring
or line must be the management network, as NCCL_SOCKET_IFNAME), and the same collective and
DDP checks; FSDP needs GPUs in this PyTorch generation and is skipped with the reason.

Every check compares results with values computed locally; the script exits 1 on the first
mismatch (and torchrun then fails the job), 0 when everything matched. Rank 0 prints one line
per check and a bandwidth table (algorithm bandwidth of all_reduce, as nccl-tests reports it).
"""
import argparse
import datetime
import os
import socket
import sys
import time

import torch
import torch.distributed as dist


def parse_size(text):
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def log(rank, msg):
    if rank == 0:
        print(msg, flush=True)


def fail(rank, msg):
    print(f"[rank {rank}] FAIL: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def check_environment(rank, world, backend, nnodes):
    """The settings docs/deploy.md asks for, checked where a wrong one fails late or silently."""
    env = {k: os.environ.get(k) for k in ("NCCL_NET_PLUGIN", "NCCL_NET", "NCCL_SOCKET_IFNAME",
                                           "GLOO_SOCKET_IFNAME", "NCCL_MESH_IFNAME")}
    log(rank, "environment: " + ", ".join(f"{k}={v if v is not None else '(unset)'}"
                                         for k, v in env.items()))
    if backend == "nccl" and nnodes > 1:
        if env["NCCL_NET"] != "Mesh":
            fail(rank, "NCCL_NET is not 'Mesh': a plugin that fails to load would fall back to "
                       "NCCL's Socket transport without an error (docs/deploy.md, step 5)")
        if not env["NCCL_NET_PLUGIN"]:
            fail(rank, "NCCL_NET_PLUGIN is unset: set it to 'mesh' (docs/deploy.md, step 5)")
    for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        if nnodes > 1 and not env[var]:
            log(rank, f"note: {var} unset: on a ring or line of hosts set it to the management "
                      "interface, which reaches every host (docs/deploy.md, step 5)")


def check_collectives(rank, world, device, sizes, iters):
    # all_reduce: rank r contributes r+1 in every element; the sum is world*(world+1)/2.
    expected_sum = world * (world + 1) / 2
    rows = []
    for size in sizes:
        n = max(1, size // 4)
        buf = torch.full((n,), float(rank + 1), dtype=torch.float32, device=device)
        dist.all_reduce(buf)
        if not torch.all(buf == expected_sum):
            fail(rank, f"all_reduce of {size} B: got {buf[:4].tolist()}..., want {expected_sum}")
        dist.barrier()
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buf)
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = (time.perf_counter() - start) / iters
        rows.append((n * 4, seconds))
    log(rank, f"ok   all_reduce: {len(sizes)} sizes, every element = {expected_sum:g}")

    # all_gather: each rank's slot holds its own rank.
    parts = [torch.empty(1024, device=device) for _ in range(world)]
    dist.all_gather(parts, torch.full((1024,), float(rank), device=device))
    for r, part in enumerate(parts):
        if not torch.all(part == float(r)):
            fail(rank, f"all_gather: slot {r} holds {part[0].item()}, want {r}")
    log(rank, f"ok   all_gather: {world} slots of 4 KiB, each from its rank")

    # broadcast from the last rank.
    src = world - 1
    b = torch.full((4096,), 7.0 if rank == src else -1.0, device=device)
    dist.broadcast(b, src=src)
    if not torch.all(b == 7.0):
        fail(rank, f"broadcast from rank {src}: got {b[0].item()}")
    log(rank, f"ok   broadcast: 16 KiB from rank {src}")

    # send/recv around the ring (neighbours; on a partial mesh, a pair NCCL may relay).
    if world > 1:
        right, left = (rank + 1) % world, (rank - 1) % world
        out = torch.full((65536,), float(rank), device=device)
        got = torch.empty(65536, device=device)
        reqs = [dist.isend(out, right), dist.irecv(got, left)]
        for q in reqs:
            q.wait()
        if not torch.all(got == float(left)):
            fail(rank, f"recv from rank {left}: got {got[0].item()}")
        log(rank, "ok   send/recv: 256 KiB to the next rank, from the previous one")
    return rows


def check_ddp(rank, world, device):
    # Every rank computes the gradient of its own batch; DDP averages them. The result must be
    # the gradient of the mean loss over all ranks' batches, computed here on one rank.
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 4).to(device)
    reference = torch.nn.Linear(16, 4).to(device)
    reference.load_state_dict(model.state_dict())
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None)
    batches = [torch.randn(8, 16, generator=torch.Generator().manual_seed(100 + r)).to(device)
               for r in range(world)]
    ddp(batches[rank]).square().mean().backward()
    full = torch.cat(batches)
    (reference(full).square().mean()).backward()
    for got, want in zip(model.parameters(), reference.parameters()):
        if not torch.allclose(got.grad, want.grad, rtol=1e-4, atol=1e-5):
            fail(rank, "DDP: averaged gradient differs from the single-process gradient")
    log(rank, f"ok   DDP: one step of Linear(16,4) over {world} ranks, gradients match the "
              "single-process result")


def check_fsdp(rank, world, device):
    if device.type != "cuda":
        log(rank, "skip FSDP: needs GPUs (the NCCL backend) in this PyTorch generation; "
                  "the CPU run checks the collectives and DDP")
        return
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    reference = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                    torch.nn.Linear(64, 8)).to(device)
    reference.load_state_dict(model.state_dict())
    sharded = FSDP(model.to(device), device_id=device)
    batches = [torch.randn(4, 64, generator=torch.Generator().manual_seed(200 + r)).to(device)
               for r in range(world)]
    loss = sharded(batches[rank]).square().mean()
    loss.backward()
    full_loss = reference(torch.cat(batches)).square().mean()
    full_loss.backward()
    # Gather the sharded gradients' norm across ranks and compare with the reference.
    local = torch.zeros(1, device=device)
    for p in sharded.parameters():
        if p.grad is not None:
            local += p.grad.float().square().sum()
    dist.all_reduce(local)
    want = sum(p.grad.float().square().sum() for p in reference.parameters())
    if not torch.allclose(local.sqrt(), want.sqrt(), rtol=1e-3):
        fail(rank, f"FSDP: gradient norm {local.sqrt().item()} vs {want.sqrt().item()}")
    log(rank, f"ok   FSDP: one step of a 2-layer MLP sharded over {world} ranks, gradient norm "
              "matches the single-process result")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="4K,256K,4M", help="all_reduce sizes (K/M/G suffixes)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    ap.add_argument("--timeout", type=int, default=120, help="seconds for any collective")
    args = ap.parse_args()

    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    nnodes = world // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", world)))
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if backend == "nccl" else "-"
    log(rank, f"torchrun mesh check: torch {torch.__version__}, backend {backend} (NCCL {nccl}), "
              f"{world} ranks on {nnodes} node(s), rank 0 on {socket.gethostname()}")
    check_environment(rank, world, backend, nnodes)

    sizes = [parse_size(s) for s in args.sizes.split(",") if s]
    rows = check_collectives(rank, world, device, sizes, args.iters)
    check_ddp(rank, world, device)
    check_fsdp(rank, world, device)

    log(rank, f"{'bytes':>12} {'time/op':>12} {'algbw GB/s':>11}")
    for nbytes, seconds in rows:
        log(rank, f"{nbytes:>12} {seconds * 1e6:>10.1f}us {nbytes / seconds / 1e9:>11.3f}")
    dist.barrier()
    log(rank, f"PASS: every check matched on {world} ranks")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
