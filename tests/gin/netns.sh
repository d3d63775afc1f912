#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GIN suite across hosts of a namespace mesh (tests/netns): each forked rank enters its own
# host's namespace and uses that host's cables (NCCL_MESH_IFNAME=^mgmt), so GIN's collective
# connect picks a cable per pair, and on a line the pair without a cable goes through the relay.
#
# Usage: netns.sh BUILD_DIR [triangle|line3]   (root; exit 77 without root or `ip`)
#   triangle  tests/netns/topologies/triangle.topo: every pair cabled, 3 ranks
#   line3     hosts a-b-c of a line (a and c share no subnet): GIN over the TCP relay
# Runs the 3-rank ordering cases (v11, v13, v15), get/flush (v13) and a 2-rank signal case.
set -uo pipefail
build=${1:?usage: $0 BUILD_DIR [triangle|line3]}
shape=${2:-triangle}
here=$(cd "$(dirname "$0")" && pwd)
topo_tool="$here/../netns/mesh-topo"
if [[ $(id -u) -ne 0 ]] || ! command -v ip >/dev/null; then
  echo "SKIP: needs root and iproute2 (network namespaces)"
  exit 77
fi
work=$(mktemp -d)
case $shape in
  triangle) topo="$here/../netns/topologies/triangle.topo" ;;
  line3)
    topo="$work/line3.topo"
    cat >"$topo" <<'TOPO'
# line of three: a-b-c; a and c share no subnet
mgmt 198.19.254.0/24
host a
host b
host c
cable a:cb=198.18.11.1/24  b:ca=198.18.11.2/24
cable b:cc=198.18.12.1/24  c:cb=198.18.12.2/24
TOPO
    ;;
  *) echo "unknown shape $shape" >&2; exit 2 ;;
esac
prefix="nm-gin$$-"
cleanup() {
  "$topo_tool" --prefix "$prefix" down "$topo" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
"$topo_tool" --prefix "$prefix" up "$topo" || exit 1
export MESH_GIN_NETNS="${prefix}a,${prefix}b,${prefix}c" MESH_GIN_IFNAME='^mgmt'
# A relayed connect first waits for the relay agents' beacons.
export NCCL_MESH_CONNECT_TIMEOUT_MS=${NCCL_MESH_CONNECT_TIMEOUT_MS:-20000}
"$build/tests/gin/mesh_gin_test" \
  --gtest_filter='*OrderingTest*v11_3ranks:*OrderingTest*v13_3ranks:*OrderingTest*v15_3ranks:*GetAndFlush/v13:*SignalsInc*/v14'
