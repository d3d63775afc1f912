#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 28's GPU items in one device call. A lent GPU machine gives a session 15 minutes of
# device time in all, at most 600 s a call, and its start takes minutes of them: there is room
# for one call, so this script puts the open issue's items in it, the must-show first:
#   1. perf   scripts/gpu-e2e.sh steps bench (NCCL over Mesh and over Socket, 2-4 ranks: the
#             TARGET lines "never slower than Socket at any size"), ceiling (the plugin alone with
#             a ring all-reduce's traffic: "Mesh busbw at >= 64 MiB NN% of the ceiling"), choices
#             (whether NCCL chose the same algorithm, protocol and channels over both nets) and
#             versus-socket (Mesh against NCCL's own Socket net code in the bench's loop), then
#             nccl-version;
#   2. check  check-mesh and check-socket: every collective and protocol through the data path
#             that thirty passes on the 2-core machine changed since the last GPU run (the bench
#             verifies its own sizes only);
#   3. sweep  scripts/gpu-knob-sweep.sh in the time left (its runs stop starting 95 s before
#             the end: one run may take 90 s).
# Each part writes its own folder under OUTDIR; OUTDIR/issue28-summary.txt collects the TARGET
# and SUMMARY lines and the sweep's report. Exit status 0 only if perf and check passed.
#
# Usage, on the development machine, then the GPU machine (the binaries carried, as an ignored
# folder of the working tree):
#   NCCL_SRC=<NCCL 2.28.9 tree> scripts/gpu-e2e.sh --prebuild build-gpu-prebuilt
#   scripts/gpu-issue28.sh build-gpu-prebuilt OUTDIR     (device call: timeout_s 590)
# Knobs: ISSUE28_BUDGET_S (560: the whole call), ISSUE28_PERF_S (280), ISSUE28_CHECK_S (150: at
# most; less where the sweep would get under its minimum), ISSUE28_SWEEP_MIN_S (120: less left
# and the sweep does not start), SWEEP_ROUNDS (2). The steps' own knobs pass through
# (BENCH_RANKS, CEILING_SIZES, CHECK_RANKS, ..., scripts/gpu-e2e.sh; RANKS, SIZES, MIN_CHUNKS,
# IO_THREADS, EAGER_WINDOWS, scripts/gpu-knob-sweep.sh).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage="usage: $0 PREBUILT_DIR OUTDIR"
DIR=$(cd "${1:?$usage}" && pwd) || exit 2
OUT=${2:?$usage}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 2
for f in nccl-mesh-gpu-e2e libnccl-net-mesh.so nccl-mesh-bench libnccl-net-ncclsocket.so; do
  [[ -e "$DIR/$f" ]] || {
    echo "$DIR lacks $f: build it with NCCL_SRC=<NCCL 2.28.9 tree> scripts/gpu-e2e.sh --prebuild DIR" >&2
    exit 2
  }
done
TOTAL=${ISSUE28_BUDGET_S:-560}
START=$SECONDS
left() { echo $((TOTAL - (SECONDS - START))); }
e2e() {  # e2e PART BUDGET_S STEPS
  echo "==== $1 ($2 s of $(left) s left): $3"
  GPU_E2E_PREBUILT=$DIR GPU_E2E_BUDGET_S=$2 GPU_E2E_STEPS=$3 PYTHONUNBUFFERED=1 \
    timeout -k 5 $(($2 + 15)) bash "$ROOT/scripts/gpu-e2e.sh" "$OUT/$1"
  local rc=$?
  echo "==== $1: exit $rc"
  return "$rc"
}
status=0
e2e perf "${ISSUE28_PERF_S:-280}" bench,ceiling,choices,versus-socket,nccl-version || status=1

sweep_min=${ISSUE28_SWEEP_MIN_S:-120}
check_s=${ISSUE28_CHECK_S:-150}
(($(left) - check_s < sweep_min)) && check_s=$(($(left) - sweep_min))
if ((check_s >= 60)); then
  e2e check "$check_s" check-mesh,check-socket || status=1
else
  echo "==== check: not run, ${check_s} s would be left for it"
  status=1
fi

if (($(left) >= sweep_min)); then
  sweep_s=$(($(left) - 95))
  echo "==== sweep (runs start for ${sweep_s} s)"
  ROUNDS=${SWEEP_ROUNDS:-2} SWEEP_BUDGET_S=$((sweep_s > 0 ? sweep_s : 0)) \
    timeout -k 5 $((sweep_s + 110)) bash "$ROOT/scripts/gpu-knob-sweep.sh" "$DIR" "$OUT/sweep"
  echo "==== sweep: exit $?"
else
  echo "==== sweep: not run, $(left) s left (ISSUE28_SWEEP_MIN_S=$sweep_min)"
fi

{
  echo "issue 28: $(nvidia-smi -L 2>/dev/null | head -1 || true) $(date -u +%FT%TZ), $((SECONDS - START)) s"
  for part in perf check; do
    echo "-- $part"
    # The part's own summary: its steps' verdicts and their SUMMARY and TARGET lines.
    sed -n '/=== gpu-e2e summary/,/^steps passed/p' "$OUT/$part/gpu-e2e.log" 2>/dev/null
  done
  echo "-- sweep"
  if [[ -s "$OUT/sweep/report.txt" ]]; then
    cat "$OUT/sweep/report.txt"
  else
    echo "no report: the sweep did not run or read no bench results (its lines are above)"
  fi
} | tee "$OUT/issue28-summary.txt"
exit $status
