#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the namespace mesh tests against a build. Needs root (network namespaces).
#   tests/netns/run-all.sh BUILD_DIR [CASE...]      (default: every case; `cases.py --list`)
# Environment: MESH_TOPO_PREFIX (namespace prefix, default nm-<pid>-), CASE_TIMEOUT (seconds per
# case, default 300), NETNS_LOG_DIR (bench logs, default BUILD_DIR/netns-logs).
# Prints "N passed, N failed" last; exits non-zero when any case fails (77 when not root: ctest's
# skip code). Always tears down, also on SIGINT/SIGTERM; a run killed with SIGKILL leaves
# namespaces that the next run removes.
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR [CASE...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
shift
if [ "$(id -u)" != 0 ]; then
  echo "run-all.sh: SKIPPED: needs root (network namespaces)" >&2
  exit 77
fi
for tool in ip python3 timeout; do
  command -v "$tool" >/dev/null || { echo "run-all.sh: $tool not found" >&2; exit 2; }
done

# Namespaces left by an earlier run-all.sh that was SIGKILLed (no trap runs then): their names
# carry the dead run's pid. Only empty ones are removed; one with processes inside is reported.
for ns in $(ip netns list | awk '{print $1}' | grep -E '^nm-[0-9]+-' || true); do
  pid=${ns#nm-}
  pid=${pid%%-*}
  kill -0 "$pid" 2>/dev/null && continue
  if [ -z "$(ip netns pids "$ns" 2>/dev/null)" ]; then
    echo "run-all.sh: removing $ns, left behind by run $pid"
    ip netns del "$ns" 2>/dev/null || true
  else
    echo "run-all.sh: $ns (from run $pid, gone) still has processes; left alone" >&2
  fi
done

prefix=${MESH_TOPO_PREFIX:-nm-$$-}
export MESH_TOPO_PREFIX=$prefix
child=
cleanup() {
  # Kills whatever still runs inside our namespaces and deletes every one of them.
  "$here/mesh-topo" --prefix "$prefix" purge >/dev/null 2>&1 ||
    "$here/mesh-topo" --prefix "$prefix" purge
}
on_signal() {
  # The case tears down in its finally blocks on SIGTERM; cleanup (EXIT) catches the rest.
  if [ -n "$child" ]; then
    kill -TERM "$child" 2>/dev/null
    wait "$child" 2>/dev/null
  fi
  exit "$1"
}
trap cleanup EXIT
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

if [ $# -gt 0 ]; then
  cases=("$@")
else
  mapfile -t cases < <(python3 "$here/cases.py" --list)
fi

passed=0
failed=0
failed_names=()
start=$(date +%s)
for c in "${cases[@]}"; do
  t0=$(date +%s)
  # In the background so that a signal to this script is handled at once (wait returns).
  timeout --kill-after=10 "${CASE_TIMEOUT:-300}" \
    python3 "$here/cases.py" --build "$build" --prefix "$prefix" "$c" &
  child=$!
  wait "$child"
  rc=$?
  child=
  cleanup  # a case that crashed or timed out may have left namespaces behind
  if [ $rc -eq 0 ]; then
    passed=$((passed + 1))
  else
    [ $rc -eq 124 ] && echo "== $c: TIMEOUT after ${CASE_TIMEOUT:-300}s"
    failed=$((failed + 1))
    failed_names+=("$c")
  fi
  echo "-- $c: rc=$rc, $(($(date +%s) - t0))s"
done
echo
echo "netns suite took $(($(date +%s) - start))s${failed_names[*]:+; failed: ${failed_names[*]}}"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
