#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The GPU call's plumbing, without a GPU (issue 28: a lent machine gives a session one call of at
# most 600 s, so what it runs must be right the first time). Prebuilt binaries stand in as
# scripts: a program that says SKIP and exits 77, as nccl-mesh-gpu-e2e does where no GPU is.
#   - scripts/gpu-e2e.sh refuses an unknown GPU_E2E_STEPS name before it writes anything;
#   - with GPU_E2E_STEPS it runs the listed steps only, and summary.json has those and no other;
#   - a listed step that cannot run (versus-socket without NCCL's Socket plugin) is NOT-RUN;
#   - without GPU_E2E_STEPS every step of the full run is still there;
#   - the choices step runs the program with TUNING on and hands its rank logs to the report;
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

# The choices step hands the bench's rank logs to the report: a stand-in that writes what
# NCCL 2.28's rank 0 logs with TUNING on (it is run with NCCL_DEBUG_SUBSYS including TUNING).
mkdir "$dir/tuning"
cat >"$dir/tuning/nccl-mesh-gpu-e2e" <<'STANDIN'
#!/bin/sh
case ",$NCCL_DEBUG_SUBSYS," in *,TUNING,*) ;; *) echo "TUNING is off"; exit 1 ;; esac
while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
for net in Mesh Socket; do
  mkdir -p "$out/bench-$net-n2"
  echo "gpu0:1:1 [0] NCCL INFO AllReduce: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}" \
    >"$out/bench-$net-n2/rank0.log"
done
STANDIN
chmod +x "$dir/tuning/nccl-mesh-gpu-e2e"
: >"$dir/tuning/libnccl-net-mesh.so"
env GPU_E2E_PREBUILT="$dir/tuning" GPU_E2E_BUDGET_S=120 GPU_E2E_STEPS=choices \
  "$root/scripts/gpu-e2e.sh" "$dir/choices" >"$dir/e2e.txt" 2>&1 || true
[ "$(status_of "$dir/choices/summary.json" choices)" = "['PASS']" ] ||
  fail "choices: $(status_of "$dir/choices/summary.json" choices): $(cat "$dir/choices/choices.log")"
grep -q "SUMMARY choices n2: Mesh and Socket agree in 1 of 1 cells" "$dir/e2e.txt" ||
  fail "choices: no SUMMARY line in $(cat "$dir/e2e.txt")"

# The issue's one-call script checks its binaries before it spends device time.
rc=0
"$root/scripts/gpu-issue28.sh" "$dir/prebuilt" "$dir/i28" >"$dir/i28.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "gpu-issue28.sh without nccl-mesh-bench: exit $rc, expected 2"
grep -q "lacks nccl-mesh-bench" "$dir/i28.txt" || fail "gpu-issue28.sh: $(cat "$dir/i28.txt")"
echo "OK: step selection, NOT-RUN, the full run, choices and the one-call script's preflight"
