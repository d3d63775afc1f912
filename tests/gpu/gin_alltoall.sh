#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs nccl-mesh-gin-alltoall (gin_alltoall.cu) on N ranks for each N given, all on this
# machine's GPU(s), every rank its own "host" for NCCL (NCCL_HOSTID), so every byte goes through
# the plugin: NCCL 2.28.9 loads ncclNetPlugin_v11 and ncclGinPlugin_v11 from it, and its GIN
# proxy thread turns each device-side put into the plugin's iputSignal.
#
# Usage: gin_alltoall.sh PROGRAM PLUGIN OUTDIR N [N...]   (e.g. ... out 2 3 4)
# Checks per N: every rank exits 0 with its [PASS] line; every rank log shows NCCL loading the
# GIN plugin Mesh (v11) and the plugin's "GIN: rank r connected" line. Exit 77 when no GPU.
# Knobs: GIN_ELEMENTS (65536 uint32 per peer), GIN_ITERS (5), GIN_TIMEOUT_S (30 per N: a run takes 1-2 s on an H200, and one hung N must leave the step time for the others).
set -uo pipefail
prog=${1:?program} plugin=${2:?plugin} out=${3:?outdir}
shift 3
mkdir -p "$out"
if [[ ! -x "$prog" ]]; then
  echo "SKIP gin-alltoall: $prog not built (it needs NCCL's nccl_device.h, NCCL >= 2.28)"
  exit 77
fi
status=0
for n in "$@"; do
  dir="$out/gin-$n"
  rm -rf "$dir" && mkdir -p "$dir"
  pids=()
  for ((r = 0; r < n; r++)); do
    # What NCCL 2.28.9 needs for GIN through an external plugin: the plugin as the net plugin
    # (GIN is looked up only in its library), symmetric memory (cuMem, on by default), and GIN
    # not disabled; NCCL_GIN_TYPE=2 refuses anything but a proxy-type GIN device.
    env NCCL_NET_PLUGIN="$plugin" NCCL_NET=Mesh NCCL_GIN_ENABLE=1 NCCL_GIN_TYPE=2 \
      NCCL_CUMEM_ENABLE=1 NCCL_HOSTID="gin-host-$r" NCCL_MESH_IFNAME=lo \
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
      timeout -k 5 "${GIN_TIMEOUT_S:-30}" "$prog" "$r" "$n" "$dir/id" "${GIN_ELEMENTS:-65536}" \
      "${GIN_ITERS:-5}" >"$dir/rank$r.log" 2>&1 &
    pids+=($!)
  done
  fail=0 skip=0
  for ((r = 0; r < n; r++)); do
    wait "${pids[$r]}"
    rc=$?
    if ((rc == 77)); then skip=1; elif ((rc != 0)); then
      fail=1
      echo "[FAIL] gin-alltoall $n ranks: rank $r exited $rc"
      tail -5 "$dir/rank$r.log"
    fi
  done
  if ((skip)); then
    echo "SKIP gin-alltoall: no GPU"
    exit 77
  fi
  for ((r = 0; r < n; r++)); do
    log="$dir/rank$r.log"
    grep -q '^\[PASS\] gin-alltoall' "$log" || { fail=1; echo "[FAIL] rank $r: no PASS line"; }
    grep -q 'Loaded gin plugin Mesh (v11)' "$log" ||
      { fail=1; echo "[FAIL] rank $r: NCCL did not load the GIN plugin Mesh (v11)"; }
    grep -q "GIN: rank $r connected to $((n - 1)) ranks" "$log" ||
      { fail=1; echo "[FAIL] rank $r: no 'GIN: rank $r connected' line from the plugin"; }
  done
  if ((fail)); then status=1; else
    echo "[PASS] gin-alltoall $n ranks: $(grep -h '^\[PASS\]' "$dir"/rank0.log | cut -d: -f2-)"
  fi
done
exit $status
