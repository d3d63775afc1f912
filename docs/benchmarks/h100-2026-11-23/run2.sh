#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Full gpu-e2e run, then a repeat of the large-size benchmark (run-to-run spread).
C=$(cd "$(dirname "$0")" && pwd)
O=${1:?out}
GPU_E2E_PREBUILT=$C GPU_E2E_COMPACT=1 GPU_E2E_BUDGET_S=400 PYTHONUNBUFFERED=1 bash scripts/gpu-e2e.sh "$O/e2e" | tail -45
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export LD_LIBRARY_PATH="$NCCL_HOME/lib:$C" CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
nvidia-cuda-mps-control -d
timeout 150 "$C/nccl-mesh-gpu-e2e" --mode bench --plugin "$C/libnccl-net-mesh.so" --net Mesh,Socket \
  --ranks 2,3,4 --sizes 1K,64M,256M --seconds-per-size 1 --out "$O/rep" --timeout 60 2>&1 |
  grep -vE '^\[PASS\]' > "$O/rep.log"
echo quit | nvidia-cuda-mps-control
rm -rf "$O/rep"
cat "$O/rep.log"
