#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The doctor binary end to end on loopback only: --serve on 127.0.0.1 (any free port), then
# peer mode with --probe against it, text and --json. Nothing leaves 127.0.0.0/8.
#   tests/doctor/loopback_cli.sh PATH/TO/nccl-mesh-doctor
set -euo pipefail
doctor=$1
work=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
export NCCL_MESH_IFNAME=lo NCCL_NET=Mesh NCCL_NET_PLUGIN=mesh

"$doctor" --serve --port 0 --serve-for 60 >"$work/serve.log" &
server=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/^serving probes on 127\.0\.0\.1:\([0-9]*\) (lo)$/\1/p' "$work/serve.log")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "serve did not start:"; cat "$work/serve.log"; exit 1; }
# Serve binds the mesh addresses only: with NCCL_MESH_IFNAME=lo, one endpoint.
[ "$(grep -c '^serving probes on' "$work/serve.log")" = 1 ]

"$doctor" --peers 127.0.0.1 --port "$port" --probe --probe-time 0.2 --streams 2 | tee "$work/text"
grep -q '^Mesh map' "$work/text"
grep -Eq '^  ok +peer-probe +127\.0\.0\.1 via lo 127\.0\.0\.1/8 -> 127\.0\.0\.1: rtt' "$work/text"

"$doctor" --peers 127.0.0.1 --port "$port" --probe --probe-time 0.2 --streams 2 --json \
  >"$work/json"
python3 - "$work/json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["exit_code"] == 0, doc["summary"]
rail = doc["peers"][0]["rails"][0]
assert rail["local_interface"] == "lo", rail
probe = rail["probe"]
assert probe["ok"], probe
assert probe["peer_interface"]["name"] == "lo" and probe["peer_interface"]["mtu"] == 65536, probe
assert probe["send_mbytes_per_s"] > 0 and probe["recv_mbytes_per_s"] > 0, probe
assert probe["rtt_median_us"] > 0, probe
print("loopback peer mode: ok")
PY

# A port nobody serves: the probe check fails and so does the exit code.
set +e
"$doctor" --peers 127.0.0.1 --port 1 --probe --probe-time 0.1 >"$work/refused"
rc=$?
set -e
[ $rc -eq 1 ] || { echo "expected exit 1 for a refused probe, got $rc"; exit 1; }
grep -q 'fail  peer-probe' "$work/refused"
echo "all loopback checks passed"
