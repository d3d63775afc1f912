#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The host's own ceilings on the GPU machine: memory copy bandwidth by thread count, and the
# plugin alone (no GPU) streaming between every ordered pair of 2 and 4 ranks at once.
C=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$C"
nproc
for t in 1 2 4 8 16; do "$C/membw" $t; done
for n in 2 4; do
  echo "== plugin alone, $n ranks, every ordered pair streaming at once, 1 MiB, window 8"
  timeout 60 "$C/nccl-mesh-bench" --plugin "$C/libnccl-net-mesh.so" --nranks $n --duration 4 \
    --sizes 1M --no-verify -q 2>&1 | grep -E '^ +[0-9]+->' | tee /tmp/pairs.txt
  awk '{s += $NF} END {printf "aggregate %.2f GB/s over %d flows\n", s, NR}' /tmp/pairs.txt
done
