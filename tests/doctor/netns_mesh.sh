#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nccl-mesh-doctor peer mode on a namespace triangle A-B-C (one veth "cable" and one /24 per
# pair, 198.18.0.0/15 only) plus a listed peer D without a cable, a peer E cabled to C only (no
# --serve: A cannot reach it, like the far end of a line), and an MTU mismatch on the A-C
# cable: --serve runs in B and C, the doctor in A with --hosts and --probe. Checks that the map
# routes each peer over its cable, finds the B-C cable from the peers' reports and the C-E cable
# from C's report and E's hosts-file address, reports D as uncabled and the A-C MTU mismatch as
# a failure, and that the host order names the two silent peers. Needs root; exits 77
# (skipped) otherwise.
#   tests/doctor/netns_mesh.sh PATH/TO/nccl-mesh-doctor
set -euo pipefail
doctor=$(realpath "$1")
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! command -v python3 >/dev/null; then
  echo "skipped: needs root, iproute2 and python3"
  exit 77
fi
p=dr$$-
work=$(mktemp -d)
pids=()
ns() { ip netns exec "$p$1" "${@:2}"; }
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for n in a b c e; do ip netns del "$p$n" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
if ! ip netns add "${p}a" 2>/dev/null; then
  echo "skipped: cannot create network namespaces"
  exit 77
fi
ip netns add "${p}b"
ip netns add "${p}c"
ip netns add "${p}e"
for n in a b c e; do ns $n ip link set lo up; done

# cable X Y SUBNET HOSTX HOSTY MTUX MTUY: veth srXY (in X) <-> srYX (in Y), 198.18.SUBNET.0/24
cable() {
  ip link add "sr$1$2" netns "$p$1" type veth peer name "sr$2$1" netns "$p$2"
  ns "$1" ip addr add "198.18.$3.$4/24" dev "sr$1$2"
  ns "$1" ip link set "sr$1$2" mtu "$6" up
  ns "$2" ip addr add "198.18.$3.$5/24" dev "sr$2$1"
  ns "$2" ip link set "sr$2$1" mtu "$7" up
}
cable a b 1 1 2 9000 9000
cable a c 2 1 3 9000 1500  # the mistake the doctor must find
cable b c 3 2 3 9000 9000
cable c e 4 3 5 9000 9000

# The kernel marks a link RUNNING (which the plugin requires) up to a second after both ends
# are up; wait for that, or the doctors would rightly skip the link as down.
for x in ab ba ac ca bc cb ce ec; do
  for _ in $(seq 50); do
    [ "$(ns "${x:0:1}" cat "/sys/class/net/sr$x/operstate")" = up ] && break
    sleep 0.1
  done
done

export NCCL_MESH_IFNAME=sr NCCL_NET=Mesh NCCL_NET_PLUGIN=mesh
port=29170
for n in b c; do
  ns $n "$doctor" --serve --port $port --serve-for 60 >"$work/serve-$n.log" 2>&1 &
  pids+=($!)
done
for n in b c; do
  want=2; [ $n = c ] && want=3  # c: its cables to a, b and e
  for _ in $(seq 100); do
    [ "$(grep -c '^serving probes on' "$work/serve-$n.log" || true)" = $want ] && break
    sleep 0.1
  done
  cat "$work/serve-$n.log"
  # Every cable address of the node, and nothing else (not 127.0.0.1).
  [ "$(grep -c '^serving probes on 198\.18\.' "$work/serve-$n.log")" = $want ] ||
    { echo "serve in $n did not listen on its $want cables"; exit 1; }
done

cat >"$work/hosts" <<'HOSTS'
# name  cable addresses
a 198.18.1.1,198.18.2.1
b 198.18.1.2,198.18.3.2
c 198.18.2.3,198.18.3.3
d 198.18.9.4
e 198.18.4.5
HOSTS

set +e
ns a "$doctor" --hosts "$work/hosts" --probe --probe-time 0.3 --streams 2 | tee "$work/text"
ns a "$doctor" --hosts "$work/hosts" --probe --probe-time 0.3 --streams 2 --json >"$work/json"
rc=$?
set -e
[ $rc -eq 1 ] || { echo "expected exit 1 (MTU mismatch on a-c), got $rc"; exit 1; }
for want in 'Cable counters' '  srab: sent ' '  srac: sent ' 'ok    peer-cable  *b .*direct over srab '; do
  grep -q -- "$want" "$work/text" || { echo "the text report lacks '$want'"; exit 1; }
done
python3 - "$work/json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
peers = {p["name"]: p for p in doc["peers"]}
assert peers["a"]["self"], peers["a"]
b, c, d = peers["b"]["rails"], peers["c"]["rails"], peers["d"]["rails"]
assert [r["local_interface"] for r in b] == ["srab"], b
assert [r["local_interface"] for r in c] == ["srac"], c
assert d == [], d
assert b[0]["probe"]["ok"] and c[0]["probe"]["ok"], (b, c)
assert b[0]["probe"]["peer_interface"]["name"] == "srba", b
assert c[0]["probe"]["peer_interface"]["mtu"] == 1500, c
links = [(l["a"], l["a_end"]["name"], l["b"], l["b_end"]["name"]) for l in doc["links_between_peers"]]
assert links == [("b", "srbc", "c", "srcb"), ("c", "srce", "e", "")], links
# E never answered (no cable from A): its end of C-E is the hosts file's address.
assert doc["links_between_peers"][1]["b_from_hosts_file"], doc["links_between_peers"]
assert doc["links_between_peers"][1]["b_end"]["addr"].startswith("198.18.4.5/"), doc["links_between_peers"]
# Two peers stayed silent (D, E): the cable between them is unknown, and the order line says
# which they are instead of asking for --probe and --serve (both given).
order = doc["ring_order"]
assert not order["known"] and "cables between d, e unknown" in order["message"], order
fails = {(f["check"], f["subject"].split(" ")[0]) for f in doc["checks"] if f["verdict"] == "fail"}
assert fails == {("mtu", "c")}, fails
# d has no cable and no route through what the doctor sees: a warning (the plugin would try to
# relay; the doctor cannot see cables beyond its probed neighbours).
warns = {(f["check"], f["subject"].split(" ")[0]) for f in doc["checks"] if f["verdict"] == "warn"}
assert ("peer-cable", "d") in warns, warns
# The route of every peer, in the checks' words: direct over which cable, or why not.
assert peers["b"]["route"].startswith("direct over srab "), peers["b"]
assert peers["c"]["route"].startswith("direct over srac "), peers["c"]
assert peers["d"]["route"] == "no cable and no route known here", peers["d"]
# Each mesh interface's byte counters: the probes crossed both cables both ways.
ifs = {i["name"]: i for i in doc["interfaces"]}
for n in ("srab", "srac"):
    cnt = ifs[n]["counters"]
    assert cnt and cnt["tx_bytes"] > 0 and cnt["rx_bytes"] > 0, (n, cnt)
print("namespace triangle: map, probes, peer links, MTU mismatch and missing cable all found")
PY
