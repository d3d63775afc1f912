#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One device call (2026-11-27, H200): every GPU step of scripts/gpu-e2e.sh with the binaries
# built here (--prebuild), the ceiling step (issue 28) included; logs into $1 (3 files).
C=$(cd "$(dirname "$0")" && pwd)
O=${1:?out}
nvidia-smi -L; nproc; uname -r
python3 -c 'import nvidia.nccl as m, os; print("nccl wheel", m.__path__[0], os.listdir(m.__path__[0] + "/lib"))'
ldd "$C/libnccl-net-mesh.so" "$C/nccl-mesh-bench" "$C/nccl-mesh-gin-alltoall" | grep -E 'not found|crypto|fmt|nccl|cudart'
T=/tmp/e2e
GPU_E2E_PREBUILT=$C GPU_E2E_BUDGET_S=${BUDGET:-535} TORCH_RANKS=2 GIN_TIMEOUT_S=45 \
  PYTHONUNBUFFERED=1 timeout -k 5 570 bash scripts/gpu-e2e.sh "$T"
echo "gpu-e2e exit $?"
cp "$T/gpu-e2e.log" "$T/summary.json" "$T/all-logs.tar.gz" "$O/" 2>/dev/null
ls -la "$O"
