#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Interleaved A/B of the round-robin stream placement: dffb6e1 (before) vs final, same machine.
set -u
C=$(cd "$(dirname "$0")" && pwd)
O=${1:?out}
mkdir -p "$O"
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export LD_LIBRARY_PATH="$NCCL_HOME/lib:$C" CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p /tmp/mps /tmp/mps-log
nvidia-cuda-mps-control -d
run() {
  local name=$1 plugin=$2 ranks=$3
  echo "=== $name ($plugin, $ranks ranks)"
  timeout 120 "$C/nccl-mesh-gpu-e2e" --mode bench --plugin "$C/$plugin" --net Mesh \
    --ranks $ranks --sizes 1K,1M,64M,256M --seconds-per-size 1 --out "$O/$name" --timeout 100 2>&1 |
    grep -vE '^(TARGET|JSON|\[PASS\])' | grep -E 'ranks|(K|M) '
  rm -rf "$O/$name"
}
for round in 1 2; do
  for n in 2 4; do
    run before-r$round-n$n libnccl-net-mesh-dffb6e1.so $n
    run final-r$round-n$n libnccl-net-mesh.so $n
  done
done
echo quit | nvidia-cuda-mps-control
