#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# run-lane.sh - the Soft-RoCE lane, host side: runs the conformance suite and a bandwidth check
# of a built plugin over RDMA (rdma_rxe) inside a qemu TCG VM (tests/softroce/run-softroce.sh).
#
# Usage: tests/softroce/run-lane.sh [--setup] BUILD_DIR
#   --setup     only install the Debian packages, fetch the kernel and build the initramfs
#               (done anyway, and cached, by the first VM boot); BUILD_DIR is then optional
#   BUILD_DIR   a configured and built tree with the targets nccl-net-mesh,
#               mesh_conformance_test, mesh_conformance_peer and nccl-mesh-bench
# Steps: setup, VM "dual" (conformance suite striped over two cables sr0a,sr1a <-> sr0b,sr1b,
# then ib_write_bw and nccl-mesh-bench over the first cable), VM "mesh3" (conformance suite
# node A <-> node B; then relay-line3: on mesh3's line A-B-C, A <-> C relayed by B), and with
# LANE_ASAN_BUILD a VM "pair" running the suite under ASan+UBSan.
# Everything the guest prints is printed here; each step's wall time is printed; the exit status
# is non-zero when any step failed.
# Env: LANE_TRANSPORT rdma (default) | tcp, passed to the guest (tests/softroce/guest/lane.sh,
#      which also reads LANE_TIME_SCALE, LANE_BW_SECONDS, LANE_BW_BYTES, LANE_BW_WINDOW,
#      LANE_GTEST_FILTER, LANE_RERUN_FAILED, LANE_STEPS, LANE_RELAY_TRANSPORT,
#      LANE_RELAY_FILTER, LANE_RELAY_MANY, LANE_RELAY_CONNECT_TIMEOUT_MS);
#      LANE_TOPOLOGIES (default "dual mesh3": pair plus a second cable, and the triangle); LANE_VM_TIMEOUT per VM (default 1500 s: mesh3 runs the relay steps too);
#      LANE_MTU of the test veths (default 9000: RoCE MTU 4096, as on jumbo-frame cables; at
#      1500 rxe under TCG loses and retransmits much more and the lane takes longer);
#      LANE_ASAN_BUILD an ASan+UBSan tree (MESH_SANITIZE=address) with the plugin and the
#      conformance suite: one more pair VM runs the suite's v11 tests (but ReadyTest) with it (RDMA code under
#      the sanitizers: the host has no RDMA device, so its sanitizer lanes cover TCP only);
#      SOFTROCE_LAB (work dir, default ${XDG_CACHE_HOME:-$HOME/.cache}/softroce-lab).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SETUP_ONLY=0
if [ "${1:-}" = --setup ]; then SETUP_ONLY=1; shift; fi
BUILD=${1:-}
if [ "$SETUP_ONLY" = 0 ] && [ -z "$BUILD" ]; then
  sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
TRANSPORT=${LANE_TRANSPORT:-rdma}
TOPOS=${LANE_TOPOLOGIES:-dual mesh3}
VM_TIMEOUT=${LANE_VM_TIMEOUT:-1500}
MTU=${LANE_MTU:-9000}

T_LANE=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
SUMMARY=()
STATUS=0
step() { # name rc seconds
  local v=PASS; [ "$2" = 0 ] || { v="FAIL (exit $2)"; STATUS=1; }
  SUMMARY+=("$(printf '%-22s %7ss  %s' "$1" "$3" "$v")")
  echo "=== softroce lane: step $1: $v in ${3}s"
}

echo "=== softroce lane: setup (packages, kernel, initramfs; cached in ${SOFTROCE_LAB:-${XDG_CACHE_HOME:-$HOME/.cache}/softroce-lab})"
t=$(date +%s.%N)
"$HERE/run-softroce.sh" --setup
step setup $? "$(since "$t")"
if [ "$SETUP_ONLY" = 1 ] || [ $STATUS != 0 ]; then exit $STATUS; fi

# The binaries (the plugin's location depends on the CMake layout: look for it).
BUILD=$(cd "$BUILD" && pwd) || exit 2
find_one() { # name: first regular file of that name in the build tree
  find "$BUILD" -name "$1" -type f -not -path '*/CMakeFiles/*' 2>/dev/null | sort | head -1
}
PLUGIN_SO=$(find_one libnccl-net-mesh.so)
CONF_TEST=$(find_one mesh_conformance_test)
CONF_PEER=$(find_one mesh_conformance_peer)
BENCH=$(find_one nccl-mesh-bench)
for v in PLUGIN_SO CONF_TEST CONF_PEER BENCH; do
  if [ -z "${!v}" ]; then echo "=== softroce lane: no ${v} in $BUILD (build the targets first)" >&2; exit 2; fi
  echo "    $v=${!v}"
done

# The GIN suite and its CUDA driver stand-in (step gin-mesh3), when the tree has them.
GIN_FILES=()
GIN_TEST=$(find_one mesh_gin_test)
GIN_CUDA=$(find_one libmesh_gin_fake_cuda.so)
if [ -n "$GIN_TEST" ] && [ -n "$GIN_CUDA" ]; then
  GIN_FILES=(-f "$GIN_TEST" -f "$GIN_CUDA")
  echo "    GIN_TEST=$GIN_TEST GIN_CUDA=$GIN_CUDA"
fi

GUEST_ENV=(-e "LANE_TRANSPORT=$TRANSPORT")
for v in LANE_TIME_SCALE LANE_BW_SECONDS LANE_BW_BYTES LANE_BW_WINDOW LANE_GTEST_FILTER \
         LANE_RERUN_FAILED LANE_SKIP_BW LANE_SKIP_STANDIN LANE_STANDIN_FILTER LANE_STEPS \
         LANE_RELAY_TRANSPORT LANE_RELAY_FILTER LANE_RELAY_MANY LANE_RELAY_CONNECT_TIMEOUT_MS \
         LANE_RELAY_IB_TIMEOUT LANE_RELAY_DRAIN_MS LANE_GIN_FILTER LANE_GIN_BW_BYTES; do
  [ -n "${!v:-}" ] && GUEST_ENV+=(-e "$v=${!v}")
done
for topo in $TOPOS; do
  echo "=== softroce lane: VM $topo (transport $TRANSPORT, veth MTU $MTU)"
  t=$(date +%s.%N)
  "$HERE/run-softroce.sh" -n "$topo" -M "$MTU" -t "$VM_TIMEOUT" \
    -f "$PLUGIN_SO" -f "$CONF_TEST" -f "$CONF_PEER" -f "$BENCH" "${GIN_FILES[@]}" \
    -f "$HERE/guest/lane.sh" "${GUEST_ENV[@]}" -- 'bash /guest/lane.sh'
  step "vm-$topo" $? "$(since "$t")"
done

if [ -n "${LANE_ASAN_BUILD:-}" ]; then
  ABUILD=$(cd "$LANE_ASAN_BUILD" && pwd) || exit 2
  A_SO=$(find "$ABUILD" -name libnccl-net-mesh.so -type f -not -path '*/CMakeFiles/*' | head -1)
  A_TEST=$(find "$ABUILD" -name mesh_conformance_test -type f -not -path '*/CMakeFiles/*' | head -1)
  A_PEER=$(find "$ABUILD" -name mesh_conformance_peer -type f -not -path '*/CMakeFiles/*' | head -1)
  if [ -z "$A_SO" ] || [ -z "$A_TEST" ] || [ -z "$A_PEER" ]; then
    echo "=== softroce lane: LANE_ASAN_BUILD=$ABUILD lacks the plugin or the conformance suite" >&2
    step vm-pair-asan 2 0.0
  else
    # v11 tests but ReadyTest: its point is how soon a late connector's first message arrives
    # (a timer, not memory), and under ASan in the VM it took 110 of the step's 290 s; dual and
    # mesh3 run it without the sanitizer.
    echo "=== softroce lane: VM pair, ASan+UBSan build ($ABUILD), v11 tests but ReadyTest"
    t=$(date +%s.%N)
    "$HERE/run-softroce.sh" -n pair -M "$MTU" -t "$VM_TIMEOUT" \
      -f "$A_SO" -f "$A_TEST" -f "$A_PEER" -f "$HERE/guest/lane.sh" \
      -e "LANE_TRANSPORT=$TRANSPORT" -e LANE_SANITIZER=address -e LANE_SKIP_BW=1 \
      -e 'LANE_GTEST_FILTER=*/v11-Plugin/ReadyTest.*' -- 'bash /guest/lane.sh'
    step vm-pair-asan $? "$(since "$t")"
  fi
fi

echo "=== softroce lane summary (transport $TRANSPORT, total $(since "$T_LANE")s)"
printf '    %s\n' "${SUMMARY[@]}"
exit $STATUS
