#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# 3-4 ranks: the transport's own ceiling on this machine (no GPU) next to NCCL's numbers.
set -u
C=$(cd "$(dirname "$0")" && pwd)
O=${1:?out}
mkdir -p "$O"
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export LD_LIBRARY_PATH="$NCCL_HOME/lib:$C"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p /tmp/mps /tmp/mps-log
for n in 2 3 4; do
  echo "== plugin-only ring all-reduce (host memory, no GPU), $n ranks"
  timeout 90 "$C/nccl-mesh-bench" --plugin "$C/libnccl-net-mesh.so" --nranks $n --pattern ring-allreduce \
    --sizes 64M,256M --no-verify -q 2>&1 | grep -vE '^# (rank|ratio)'
done
nvidia-cuda-mps-control -d
run() {
  local name=$1 ranks=$2; shift 2
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done; shift
  echo "=== $name: ${envs[*]} $*"
  env "${envs[@]}" timeout 120 "$C/nccl-mesh-gpu-e2e" --mode bench --plugin "$C/libnccl-net-mesh.so" \
    --ranks $ranks --sizes 64M,256M --seconds-per-size 0.5 --out "$O/$name" --timeout 100 "$@" 2>&1 |
    grep -vE '^(TARGET|JSON|\[PASS\])' | grep -E 'ranks|size|M '
  rm -rf "$O/$name"
}
run n4-default 4 X=1 -- --net Mesh,Socket
run n4-nch4 4 NCCL_MIN_NCHANNELS=4 NCCL_MAX_NCHANNELS=4 -- --net Mesh,Socket
run n4-streams2 4 NCCL_MESH_TCP_STREAMS=2 -- --net Mesh
run n3-default 3 X=1 -- --net Mesh,Socket
echo quit | nvidia-cuda-mps-control
