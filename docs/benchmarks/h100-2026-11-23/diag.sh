#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Diagnostic runs: where does Mesh's busbw top out on the H100 machine?
set -u
C=$(cd "$(dirname "$0")" && pwd)
O=${1:?out}
mkdir -p "$O"
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export LD_LIBRARY_PATH="$NCCL_HOME/lib:$C"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p /tmp/mps /tmp/mps-log
{
echo "== raw plugin bench (no GPU), 2 ranks over lo"
timeout 60 "$C/nccl-mesh-bench" --plugin "$C/libnccl-net-mesh.so" --sizes 512K,4M,32M --no-verify --latency-max-bytes 8 -q 2>&1 | tail -25
echo "== raw plugin bench bidir"
timeout 60 "$C/nccl-mesh-bench" --plugin "$C/libnccl-net-mesh.so" --sizes 512K,4M --bidir --no-verify --latency-max-bytes 8 -q 2>&1 | tail -15
echo "== raw plugin bench streams=8"
NCCL_MESH_TCP_STREAMS=8 timeout 60 "$C/nccl-mesh-bench" --plugin "$C/libnccl-net-mesh.so" --sizes 512K,4M --no-verify --latency-max-bytes 8 -q 2>&1 | tail -12
} > "$O/raw.log" 2>&1
nvidia-cuda-mps-control -d
run() {  # name env... -- args
  local name=$1; shift
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done; shift
  echo "=== $name: ${envs[*]} $*"
  env "${envs[@]}" timeout 120 "$C/nccl-mesh-gpu-e2e" --mode bench --plugin "$C/libnccl-net-mesh.so" \
    --ranks 2 --sizes 64M,256M --seconds-per-size 0.5 --out "$O/$name" --timeout 100 "$@" 2>&1 |
    grep -vE '^(TARGET|JSON|\[PASS\])' | grep -E 'ranks|size|M ' 
  grep -h 'coll channels' "$O/$name"/*/rank0.log | head -2
}
{
run v0-default X=1 -- --net Mesh,Socket
run v1-streams8 NCCL_MESH_TCP_STREAMS=8 -- --net Mesh
run v2-streams2 NCCL_MESH_TCP_STREAMS=2 -- --net Mesh
run v3-nch4 NCCL_MIN_NCHANNELS=4 NCCL_MAX_NCHANNELS=4 -- --net Mesh,Socket
run v4-buff16m NCCL_BUFFSIZE=16777216 -- --net Mesh
run v5-chunk512k NCCL_MESH_TCP_MIN_CHUNK=524288 -- --net Mesh
run v6-nch8 NCCL_MIN_NCHANNELS=8 NCCL_MAX_NCHANNELS=8 -- --net Mesh
} > "$O/variants.log" 2>&1 &
VP=$!
sleep 25
top -b -H -n 1 -w 200 | head -45 > "$O/top.txt"
wait $VP
echo quit | nvidia-cuda-mps-control
cat "$O/raw.log" "$O/variants.log" "$O/top.txt"
