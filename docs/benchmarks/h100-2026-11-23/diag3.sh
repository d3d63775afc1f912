#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# 4 ranks: test() without a syscall per poll (new) vs before (prev), interleaved, CPU use
# sampled during one run; then the full gpu-e2e run of the new build.
set -u
C=$(cd "$(dirname "$0")" && pwd)
O=${1:?out}
mkdir -p "$O"
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p /tmp/mps /tmp/mps-log
(
export LD_LIBRARY_PATH="$NCCL_HOME/lib:$C"
nvidia-cuda-mps-control -d
run() {
  local name=$1 plugin=$2 net=$3
  echo "=== $name ($plugin, $net)"
  timeout 120 "$C/nccl-mesh-gpu-e2e" --mode bench --plugin "$C/$plugin" --net $net \
    --ranks 4 --sizes 64M,256M --seconds-per-size 1 --out "$O/$name" --timeout 100 2>&1 |
    grep -vE '^(TARGET|JSON|\[PASS\])' | grep -E 'ranks|M '
  rm -rf "$O/$name"
}
run new1 libnccl-net-mesh.so Mesh,Socket &
sleep 12; top -b -n 2 -d 3 -w 250 | awk '/^top -/{n++} n==2' | head -40 > /tmp/top-new.txt; wait
run prev1 libnccl-net-mesh-prev.so Mesh
run new2 libnccl-net-mesh.so Mesh
run prev2 libnccl-net-mesh-prev.so Mesh &
sleep 12; top -b -n 2 -d 3 -w 250 | awk '/^top -/{n++} n==2' | head -40 > /tmp/top-prev.txt; wait
echo quit | nvidia-cuda-mps-control
) > "$O/diag3.log" 2>&1
{ echo "== top during new1"; cat /tmp/top-new.txt; echo "== top during prev2"; cat /tmp/top-prev.txt; } >> "$O/diag3.log"; cat "$O/diag3.log"
GPU_E2E_PREBUILT=$C GPU_E2E_COMPACT=1 GPU_E2E_BUDGET_S=330 PYTHONUNBUFFERED=1 bash scripts/gpu-e2e.sh "$O/e2e" | tail -25
