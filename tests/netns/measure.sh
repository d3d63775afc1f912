#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Per-cable byte shares (triangle, dual-link) and plugin-vs-TCP bandwidth over one veth, as a
# markdown table on stdout (progress on stderr). Needs root.  Usage: measure.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
prefix=${MESH_TOPO_PREFIX:-nm-m$$-}
trap '"$here/mesh-topo" --prefix "$prefix" purge >/dev/null' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
python3 "$here/measure.py" --build "$1" --prefix "$prefix"
