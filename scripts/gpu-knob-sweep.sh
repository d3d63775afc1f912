#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 28's next GPU step, prepared: on an H200 (2026-11-27) Mesh was still slower than NCCL's
# Socket at the median where NCCL's messages are 256 KiB-1 MiB (1 MiB collectives at 2-3 ranks,
# alltoall at 4 MiB, 1.03-1.12x). Such a message is striped over the connection's data sockets
# in pieces of at least NCCL_MESH_TCP_MIN_CHUNK (128 KiB) and moved by the I/O threads
# (NCCL_MESH_TCP_IO_THREADS: 4 on 16 cores for 2-3 ranks, 3 for 4 ranks, which share the cores:
# twenty-fifth pass; IO_THREADS=-1,0,4 adds the old 4-rank default). This sweeps both, ROUNDS times in turn (settings
# interleaved, so drift hits them all alike), every run Mesh and Socket side by side
# (nccl-mesh-gpu-e2e --mode bench --net Mesh,Socket), and prints the medians per setting with
# scripts/knob-sweep-report.py. One device call: about 10 s per run, 8 settings x 3 rounds.
# The eager window (NCCL_MESH_TCP_EAGER_WINDOW, 1 MiB) is swept too: a message of at least half of
# it gets a clear-to-send record per message, about 8 us of CPU each on the 2-core rig, where a
# 2 MiB window took 2 ranks at 1 MiB from 1.06-1.11x the TCP ring to 0.96-1.05x but 3 ranks at
# 4-16 MiB from 0.83-1.06x to 0.98-1.16x (docs/measurements.md, twenty-third pass); NCCL's own
# messages at 1 MiB are 256 KiB-1 MiB, pipelined over 2 channels, so the GPU decides.
# Even rounds run Socket before Mesh (--net Socket,Mesh): on the 2-core rig the transport timed
# second ran up to 19% slower at 1 MiB (docs/measurements.md, twentieth pass), so no setting's
# median should rest on one order; the report pairs the two by name, not by position.
#
# Usage (GPU machine, binaries from `scripts/gpu-e2e.sh --prebuild DIR`, carried):
#   scripts/gpu-knob-sweep.sh DIR OUTDIR
# Knobs: ROUNDS (3), RANKS (2,3,4), SIZES (1K,64K,256K,1M,4M), MIN_CHUNKS (128K,512K),
# IO_THREADS (-1,0: the default and NCCL's own thread), EAGER_WINDOWS (1M,2M), SWEEP_BUDGET_S
# (540: later runs are skipped, the report covers what ran).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=$(cd "${1:?usage: $0 PREBUILT_DIR OUTDIR}" && pwd) || exit 2
OUT=${2:?usage: $0 PREBUILT_DIR OUTDIR}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
[[ -x "$DIR/nccl-mesh-gpu-e2e" && -f "$DIR/libnccl-net-mesh.so" ]] ||
  { echo "$DIR lacks nccl-mesh-gpu-e2e or libnccl-net-mesh.so" >&2; exit 2; }
NCCL_HOME=${NCCL_HOME:-$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])' 2>/dev/null)}
export LD_LIBRARY_PATH="${NCCL_HOME:+$NCCL_HOME/lib:}$DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/mps}
export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/mps-log}
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d && trap 'echo quit | nvidia-cuda-mps-control' EXIT

IFS=', ' read -r -a chunks <<<"${MIN_CHUNKS:-128K,512K}"
IFS=', ' read -r -a ios <<<"${IO_THREADS:--1,0}"
IFS=', ' read -r -a wins <<<"${EAGER_WINDOWS:-1M,2M}"
settings=()
for chunk in "${chunks[@]}"; do
  for io in "${ios[@]}"; do
    for win in "${wins[@]}"; do settings+=("$chunk:$io:$win"); done
  done
done
start=$SECONDS
for ((round = 1; round <= ${ROUNDS:-3}; round++)); do
  for s in "${settings[@]}"; do
    IFS=: read -r chunk io win <<<"$s"
    name="chunk$chunk-io$io-win$win"
    nets=Mesh,Socket
    ((round % 2 == 0)) && nets=Socket,Mesh
    if ((SECONDS - start > ${SWEEP_BUDGET_S:-540})); then
      echo "budget spent: round $round of $name and later not run"
      break 2
    fi
    mkdir -p "$OUT/$name"
    NCCL_MESH_TCP_MIN_CHUNK=$(numfmt --from=iec "$chunk") NCCL_MESH_TCP_IO_THREADS=$io \
      NCCL_MESH_TCP_EAGER_WINDOW=$(numfmt --from=iec "$win") \
      timeout -k 5 90 "$DIR/nccl-mesh-gpu-e2e" --mode bench --net "$nets" \
      --plugin "$DIR/libnccl-net-mesh.so" --ranks "${RANKS:-2,3,4}" \
      --sizes "${SIZES:-1K,64K,256K,1M,4M}" --out "$OUT/$name/r$round" --timeout 60 \
      --total-timeout 85 >"$OUT/$name/r$round.log" 2>&1
    echo "round $round $name ($nets): exit $? ($((SECONDS - start)) s)"
  done
done
python3 "$ROOT/scripts/knob-sweep-report.py" --dir "$OUT" | tee "$OUT/report.txt"
