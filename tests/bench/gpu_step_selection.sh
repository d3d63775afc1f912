#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The GPU call's plumbing, without a GPU (issue 28: a lent machine gives a session one call of at
# most 600 s, so what it runs must be right the first time). Prebuilt binaries stand in as
# scripts: a program that says SKIP and exits 77, as nccl-mesh-gpu-e2e does where no GPU is.
#   - scripts/gpu-e2e.sh refuses an unknown GPU_E2E_STEPS name before it writes anything;
#   - with GPU_E2E_STEPS it runs the listed steps only, and summary.json has those and no other;
#   - a listed step that cannot run (versus-socket without NCCL's Socket plugin) is NOT-RUN;
#   - without GPU_E2E_STEPS every step of the full run is still there;
#   - scripts/gpu-issue28.sh refuses a prebuilt folder that lacks a binary its steps need.
# usage: gpu_step_selection.sh REPO_ROOT
set -eu
root=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
mkdir "$dir/prebuilt"
printf '#!/bin/sh\necho "SKIP: no CUDA device (a stand-in)"\nexit 77\n' >"$dir/prebuilt/nccl-mesh-gpu-e2e"
chmod +x "$dir/prebuilt/nccl-mesh-gpu-e2e"
: >"$dir/prebuilt/libnccl-net-mesh.so"
steps_of() {  # the step names in a summary.json, space-separated
  python3 -c 'import json, sys; print(" ".join(s["step"] for s in json.load(open(sys.argv[1]))["steps"]))' "$1"
}
status_of() {  # SUMMARY STEP
  python3 -c 'import json, sys
print([s["status"] for s in json.load(open(sys.argv[1]))["steps"] if s["step"] == sys.argv[2]])' "$1" "$2"
}
run_e2e() {  # OUT, environment before
  env GPU_E2E_PREBUILT="$dir/prebuilt" GPU_E2E_BUDGET_S=120 CEILING=0 CHECK_EMULATE= \
    BENCH_EMULATE= PYTHON=/bin/false "$@" >"$dir/e2e.txt" 2>&1 || true
}

# An unknown step name: refused at once, with the names it knows, and no output folder.
rc=0
GPU_E2E_PREBUILT="$dir/prebuilt" GPU_E2E_STEPS=bench,benhc "$root/scripts/gpu-e2e.sh" "$dir/bad" \
  >"$dir/bad.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "unknown step: exit $rc, expected 2: $(cat "$dir/bad.txt")"
grep -q "no step 'benhc' (steps: check-mesh " "$dir/bad.txt" || fail "unknown step: $(cat "$dir/bad.txt")"
[ ! -e "$dir/bad" ] || fail "unknown step: $dir/bad was created"

# Two steps named, in the opposite order to the script's: those two run, in the script's order.
run_e2e GPU_E2E_STEPS="nccl-version, check-socket" "$root/scripts/gpu-e2e.sh" "$dir/two"
got=$(steps_of "$dir/two/summary.json")
[ "$got" = "check-socket nccl-version" ] || fail "GPU_E2E_STEPS=nccl-version,check-socket ran: $got"
[ "$(status_of "$dir/two/summary.json" check-socket)" = "['SKIP']" ] ||
  fail "check-socket: $(status_of "$dir/two/summary.json" check-socket), expected SKIP"
grep -q "== check-mesh: not selected" "$dir/e2e.txt" || fail "no 'not selected' line: $(cat "$dir/e2e.txt")"

# A listed step whose plugin is missing says NOT-RUN (the prebuilt folder has no NCCL Socket).
run_e2e GPU_E2E_STEPS=versus-socket "$root/scripts/gpu-e2e.sh" "$dir/vs"
got=$(steps_of "$dir/vs/summary.json")
[ "$got" = "versus-socket" ] || fail "GPU_E2E_STEPS=versus-socket ran: $got"
[ "$(status_of "$dir/vs/summary.json" versus-socket)" = "['NOT-RUN']" ] ||
  fail "versus-socket without a plugin: $(status_of "$dir/vs/summary.json" versus-socket)"

# No list: the whole run as before (the ceiling and emulated steps off by their own knobs).
run_e2e "$root/scripts/gpu-e2e.sh" "$dir/all"
got=$(steps_of "$dir/all/summary.json")
[ "$got" = "check-mesh check-socket bench choices torch gin-alltoall nccl-version" ] ||
  fail "the full run's steps: $got"

# The issue's one-call script checks its binaries before it spends device time.
rc=0
"$root/scripts/gpu-issue28.sh" "$dir/prebuilt" "$dir/i28" >"$dir/i28.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "gpu-issue28.sh without nccl-mesh-bench: exit $rc, expected 2"
grep -q "lacks nccl-mesh-bench" "$dir/i28.txt" || fail "gpu-issue28.sh: $(cat "$dir/i28.txt")"
echo "OK: step selection, NOT-RUN, the full run and the one-call script's preflight"
