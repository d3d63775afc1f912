#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# NCCL's own Socket transport, built from a NCCL source tree by scripts/build-nccl-socket.sh,
# driven by nccl-mesh-bench as it drives Mesh (issue 28: "never slower than NCCL's Socket" set
# against NCCL's code, not only against the bench's --tcp-like-socket stand-in): a 3-rank ring
# all-reduce over it with every byte checked, in the bench's slices and in NCCL's, and the
# interleaved script's --versus table of Mesh against it. Registered only when the build is
# given a NCCL tree (-DMESH_NCCL_SRC=DIR, tests/bench/CMakeLists.txt): CI has none.
# usage: nccl_socket.sh BENCH PLUGIN BUILD_SCRIPT INTERLEAVED_SCRIPT NCCL_SRC
set -eu
bench=$1
plugin=$2
build=$3
script=$4
src=$5
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$build" "$src" "$dir/sock" >"$dir/build.txt" 2>&1 || {
  echo "build-nccl-socket.sh failed:"; cat "$dir/build.txt"; exit 1; }
sock=$dir/sock/libnccl-net-ncclsocket.so
export NCCL_SOCKET_IFNAME=lo
for slices in 512K nccl; do
  "$bench" --plugin "$sock" --pattern ring-allreduce --nranks 3 --sizes 4,1000,64K,1M \
    --slice-bytes "$slices" --iters 5 --warmup 2 --timeout 60 >"$dir/ring.txt" 2>&1 || {
    echo "ring over NCCL's Socket (--slice-bytes $slices) failed:"; cat "$dir/ring.txt"; exit 1; }
  grep -q "^# nccl-mesh-bench .*: plugin Socket (" "$dir/ring.txt" &&
    grep -q "^# data verified: every received byte matched" "$dir/ring.txt" || {
    echo "ring over NCCL's Socket (--slice-bytes $slices): not NCCL's Socket, or not verified:"
    cat "$dir/ring.txt"; exit 1; }
done
python3 "$script" --bench "$bench" --plugin "mesh=$plugin" --plugin "sock=$sock" --versus sock \
  --rounds 2 -- --nranks 3 --pattern ring-allreduce --sizes 64K --iters 20 --warmup 2 \
  --timeout 60 -q >"$dir/versus.txt" 2>"$dir/versus.err" || {
  echo "bench-interleaved.py --versus sock failed:"; cat "$dir/versus.err"; exit 1; }
grep -q "^| mesh | 3 | 64 KiB | [0-9.]* ([0-9.]*-[0-9.]*) | [0-2]/2 |$" "$dir/versus.txt" || {
  echo "no table of Mesh against NCCL's Socket:"; cat "$dir/versus.txt"; exit 1; }
grep "^| mesh | 3 | 64 KiB | [0-9.]* (" "$dir/versus.txt"
echo "NCCL's Socket: built, rings verified, Mesh timed against it"
