#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# scripts/nccl-choices-report.py (issue 28: whether NCCL chose the same algorithm, protocol and
# channels over Mesh as over Socket) on rank logs in NCCL 2.28's TUNING format: 2 ranks where
# both nets agree, 3 ranks where a 1 KiB all-reduce went Ring over Mesh and Tree over Socket, a
# cell where NCCL changed its mind between calls, and lines that are not choices.
# usage: nccl_choices_report.sh REPO_ROOT
set -eu
root=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; cat "$dir/out.txt" >&2; exit 1; }
choice() {  # FILE FUNC BYTES ALGO PROTO HI
  echo "gpu0:1234:1240 [0] NCCL INFO $2: $3 Bytes -> Algo $4 proto $5 channel{Lo..Hi}={0..$6}" >>"$1"
}
for net in Mesh Socket; do
  mkdir -p "$dir/bench-$net-n2" "$dir/bench-$net-n3"
  f=$dir/bench-$net-n2/rank0.log
  echo "gpu0:1234:1234 [0] NCCL INFO NCCL version 2.28.9+cuda13.0" >"$f"
  choice "$f" AllReduce 1024 RING LL 1
  choice "$f" AllReduce 1024 RING LL 1
  choice "$f" AllGather 2048 RING LL 1
  f=$dir/bench-$net-n3/rank0.log
  echo "gpu0:1234:1234 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/$net/0" >"$f"
  choice "$f" AllReduce 65536 RING LL 1
  choice "$f" AllGather 3072 RING LL 1
done
choice "$dir/bench-Mesh-n3/rank0.log" AllReduce 1024 RING LL 1
choice "$dir/bench-Socket-n3/rank0.log" AllReduce 1024 TREE LL 1
choice "$dir/bench-Mesh-n3/rank0.log" AllReduce 4194304 RING LL128 1
choice "$dir/bench-Mesh-n3/rank0.log" AllReduce 4194304 RING SIMPLE 1
choice "$dir/bench-Socket-n3/rank0.log" AllReduce 4194304 RING SIMPLE 1
# A set that ran without TUNING has no cells; a folder that is not a bench set is ignored.
mkdir -p "$dir/bench-Mesh-n4" "$dir/check-Mesh-n3-LL"
echo "gpu0:1 [0] NCCL INFO Using network Mesh" >"$dir/bench-Mesh-n4/rank0.log"
choice "$dir/check-Mesh-n3-LL/rank0.log" AllReduce 1024 TREE LL 1

python3 "$root/scripts/nccl-choices-report.py" "$dir" >"$dir/out.txt" 2>&1 || fail "exit $?"
grep -qx "SUMMARY choices n2: Mesh and Socket agree in 2 of 2 cells" "$dir/out.txt" ||
  fail "n2 line"
grep -qx "SUMMARY choices n3: Mesh and Socket agree in 2 of 4 cells; differ: AllReduce 1024 B (Mesh RING/LL 2 ch, Socket TREE/LL 2 ch); AllReduce 4194304 B (Mesh RING/LL128 2 ch, RING/SIMPLE 2 ch, Socket RING/SIMPLE 2 ch)" "$dir/out.txt" ||
  fail "n3 line"
grep -q "SUMMARY choices n4" "$dir/out.txt" && fail "n4 had no TUNING lines"
grep -qx "| AllReduce | 1024 | RING/LL 2 ch | TREE/LL 2 ch | differ |" "$dir/out.txt" || fail "n3 table"
# No TUNING line anywhere: exit 1, saying what to turn on.
rm -rf "$dir/bench-"*-n2 "$dir/bench-"*-n3
if python3 "$root/scripts/nccl-choices-report.py" "$dir" >"$dir/out.txt" 2>&1; then
  fail "no TUNING lines, yet exit 0"
fi
grep -q "NCCL_DEBUG_SUBSYS must include TUNING" "$dir/out.txt" || fail "no hint"
echo "OK: choices per net, the cells that differ, sets without TUNING"
