#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GPU end-to-end run of NCCL over the mesh plugin, on the one-GPU test machine, in < 10 minutes:
#   build (plugin + tests/gpu + nccl-mesh-bench) -> start MPS -> correctness for 2,3,4 ranks x
#   Simple/LL/LL128 -> the same suite over NCCL's Socket (harness sanity) -> benchmark Mesh vs
#   Socket -> the rig's ceiling (issue 28, below) -> PyTorch check -> GIN all-to-all (issue 27) ->
#   the correctness suite on emulated rings and lines of 3, 4 and 5 ranks ->
#   benchmark: emulated ring with the tuner vs the full mesh -> Mesh against NCCL's own Socket
#   net code in the bench's loop (when prebuilt with NCCL_SRC, below) -> NCCL version check ->
#   summary.
#   MPS is always stopped again.
#
# Usage: scripts/gpu-e2e.sh OUTDIR        (or GPU_E2E_OUT=OUTDIR scripts/gpu-e2e.sh)
# Writes OUTDIR/gpu-e2e.log (this output), OUTDIR/<step>.log, OUTDIR/summary.json, and per step
# the program's own folders: check/ check-socket/ bench/ torch/ check-ring/ check-line/
# bench-ring/ (rank logs, check.json, bench.json, torch.json), and OUTDIR/all-logs.tar.gz with
# all of it. GPU_E2E_COMPACT=1 leaves only top-level files (JSONs copied up as check-check.json
# etc.). Exit status 0 only if every step passed.
#
# Emulated ring and line (issue 18): the ranks still run on one GPU with one NCCL_HOSTID each,
# but rank r gets NCCL_MESH_EMULATE=<ring|line>:N:r, so the plugin sees only the 127.77.x.y/30
# addresses of its own emulated cables and ranks that are not neighbours share no subnet. NCCL
# loads the plugin's tuner (NCCL_MESH_TUNER, default auto), which steers the ring-able
# collectives to its Ring; everything else between non-neighbours (tree/PAT, all-to-all,
# send/recv, the line's closing hop) needs the relay. Steps:
#   check-ring, check-line   the correctness suite (its splits included: a communicator without
#                            the last rank, all ranks reversed), N = 3, 4 and 5 ranks x
#                            CHECK_EMULATE_PROTOS; each rank log must show the plugin loaded, "via
#                            NET/Mesh", NCCL's "TUNER/Plugin: Using Mesh", the plugin's "tuner: ...
#                            steering to Ring" and its 127.77 addresses. Issue 24: a 3-rank split
#                            of the 4-line hung NCCL when ranks decided from their own cables; N=3
#                            and 5 (a line's middle rank has 2 cables, its ends 1) would have
#                            caught it. Every rank of a communicator logs the same decision digest.
#   bench-ring               all_reduce (and the other collectives) on the emulated ring with the
#                            tuner and on the full mesh (plain loopback), same run, same rank
#                            count; its TARGET line gives the busbw ratio at >= 64 MiB against
#                            issue 18's >= 0.9x (reported, not failed, like the other targets)
# The rig's ceiling (issue 28): step `ceiling` runs nccl-mesh-bench --pattern ring-traffic for
# each of BENCH_RANKS (the plugin alone, no NCCL, no GPU: exactly the traffic of a ring
# all-reduce, every rank sending to its successor while receiving from its predecessor, N at
# once, plus the bench's plain-TCP ring of the same run) into ceiling/ring-traffic-nN.json, then
# scripts/ceiling-report.py prints Mesh / ceiling next to Mesh / Socket per size and the line
# `TARGET all_reduce N ranks: Mesh busbw at >= 64 MiB NN% of the ring-traffic ceiling (target
# >= 90%)` ("NOT a ceiling" above 110%: the first run, step by step on one connection, was
# outrun by NCCL's 2 channels). Knobs: CEILING_SIZES (1K..512M, the bench's sizes),
# CEILING_CHANNELS (2: connections per neighbour, NCCL's channel count), CEILING_RECV_CAPACITY
# (1M: the buffer each receive is posted with, as NCCL posts its Simple protocol's whole step
# slot whatever the message; 0: the message's own size), CEILING_SLICES (nccl: NCCL's Simple
# slices, two per chunk, 32K-1M, so the ceiling moves NCCL's messages; or a size, e.g. the
# bench's 512K), CEILING (0: skip). The same step then times the plugin's ring all-reduce in
# NCCL's slices against the bench's TCP ring framed as NCCL's Socket (--tcp-like-socket) into
# ceiling/socket-like-nN.json: SOCKET_LIKE (0: skip), SOCKET_LIKE_SIZES (1K,64K,256K,1M,4M).
# The bench step's own targets include `never slower than Socket at any size` per collective
# and rank count (tests/gpu/README.md).
# A step whose ranks failed for want of a relay ("no common subnet": a plugin built without it,
# or NCCL_MESH_RELAY=0) prints a "relay:" line and a NOTE, and its status is NO-RELAY.
#
# The plugin's build needs rdma-core's headers (infiniband/verbs.h), which the GPU test machine
# lacks and cannot install: build there only where they exist, or build here and carry it:
#   scripts/gpu-e2e.sh --prebuild DIR   (on the development machine: plugin, program and the CUDA
#                                        runtime they need into DIR, nothing run)
#   GPU_E2E_PREBUILT=DIR scripts/gpu-e2e.sh OUTDIR   (on the GPU machine: no build step)
#
# Another NCCL (issue 17: NCCL 2.30, which loads the plugin as ncclNetPlugin_v12). The GPU machine
# reaches no network, so bring NCCL's source along (e.g. a `git archive` of NVIDIA/nccl at tag
# v2.30.7-1 unpacked inside the repository's working tree), then on the GPU machine:
#   scripts/gpu-e2e.sh --build-nccl SRC [DEST]   (make src.build for CUDA_ARCHS only, into DEST,
#                                                 default SRC/build; a few minutes on 16 cores)
#   scripts/gpu-e2e.sh --nccl DEST OUTDIR        (= NCCL_HOME=DEST: tests/gpu built against it,
#                                                 its lib/ first on the loader path)
# The nccl-version step then expects the version in DEST/include/nccl.h on every rank of the
# check and bench steps, and "Loaded net plugin Mesh (vN)" with the ABI that NCCL probes first
# (v12 for 2.30, v11 for 2.28/2.29, ...). PyTorch may bring its own NCCL: with --nccl its rank
# logs are listed, not required to match.
#
# Knobs (environment): PYTHON (python3), NCCL_HOME (default: the nvidia.nccl wheel of $PYTHON),
# GPU_E2E_BUILD (build dir, default <repo>/build-gpu-e2e), CUDA_ARCHS (90), GPU_E2E_BUDGET_S
# (570: the whole run), CHECK_RANKS (2,3,4), CHECK_PROTOS (Simple,LL,LL128),
# CHECK_SOCKET_PROTOS (Simple,LL,LL128), BENCH_RANKS (2,3,4), TORCH_RANKS (2,4),
# CHECK_EMULATE (ring,line: one step per shape; empty: none), CHECK_EMULATE_RANKS (3,4,5),
# CHECK_EMULATE_PROTOS (Simple,LL,LL128), BENCH_EMULATE (ring: the shape compared with the full
# mesh; empty: no bench-ring step), BENCH_EMULATE_RANKS (4), EMULATE_TUNER (auto: NCCL_MESH_TUNER
# of the emulated steps; ring, off, or none = NCCL_TUNER_PLUGIN=none), GIN_RANKS (2,3,4: the
# gin-alltoall step, tests/gpu/gin_alltoall.sh; GIN_ELEMENTS, GIN_ITERS pass through),
# GPU_E2E_STEPS (empty: every step; else a comma list of the steps to run, in the script's
# order whatever the list's: check-mesh check-socket bench ceiling choices torch gin-alltoall
# check-ring check-line bench-ring bench-line versus-socket nccl-version; build always runs where
# nothing is prebuilt; the emulated steps also need their shape in CHECK_EMULATE /
# BENCH_EMULATE). A step left out is not in summary.json and does not fail the run; a listed
# step that cannot run (no bench program, no NCCL Socket plugin, the build failed) is NOT-RUN; an
# unknown name ends the run before anything runs. A lent GPU machine gives a session about one
# call of at most 600 s: scripts/gpu-issue28.sh runs the open issue's steps in one.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${GPU_E2E_BUILD:-$ROOT/build-gpu-e2e}

if [[ ${1:-} == --build-nccl ]]; then
  SRC=${2:?usage: $0 --build-nccl NCCL_SOURCE_DIR [DEST]}
  SRC=$(cd "$SRC" && pwd) || exit 1
  DEST=${3:-$SRC/build}
  [[ -f "$SRC/makefiles/version.mk" ]] || { echo "$SRC is not an NCCL source tree" >&2; exit 1; }
  nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  cuda_home=$(cd "$(dirname "$nvcc")/.." && pwd)
  gencode=""
  for arch in ${CUDA_ARCHS//,/ }; do gencode+=" -gencode=arch=compute_$arch,code=sm_$arch"; done
  [[ -n "$gencode" ]] || gencode="-gencode=arch=compute_90,code=sm_90"
  echo "building NCCL $(grep -E '^NCCL_(MAJOR|MINOR|PATCH)' "$SRC/makefiles/version.mk" |
    awk '{printf "%s%s", sep, $3; sep="."}') from $SRC into $DEST ($gencode)"
  make -C "$SRC" -j "$(nproc)" src.build BUILDDIR="$DEST" CUDA_HOME="$cuda_home" \
    NVCC_GENCODE="${gencode# }" || exit 1
  ls -l "$DEST/lib" "$DEST/include/nccl.h" || exit 1
  echo "now: $0 --nccl $DEST OUTDIR"
  exit 0
fi

NCCL_FROM_OPTION=0
if [[ ${1:-} == --nccl ]]; then
  NCCL_HOME=$(cd "${2:?usage: $0 --nccl NCCL_DIR OUTDIR}" && pwd) || exit 2
  [[ -f "$NCCL_HOME/include/nccl.h" && -d "$NCCL_HOME/lib" ]] ||
    { echo "$NCCL_HOME has no include/nccl.h and lib/" >&2; exit 2; }
  export NCCL_HOME
  NCCL_FROM_OPTION=1
  shift 2
fi

if [[ ${1:-} == --prebuild ]]; then
  DEST=${2:?usage: $0 --prebuild DIR}
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMESH_SUBDIRS="src/tools;tests/gpu" \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" ${NCCL_HOME:+-DNCCL_ROOT="$NCCL_HOME"} &&
    cmake --build "$BUILD" -j "$(nproc)" --target nccl-net-mesh nccl-mesh-gpu-e2e \
      nccl-mesh-bench || exit 1
  # The GIN program needs NCCL's device API headers (nccl_device.h): optional.
  cmake --build "$BUILD" -j "$(nproc)" --target nccl-mesh-gin-alltoall ||
    echo "NOTE: nccl-mesh-gin-alltoall not built (NCCL without nccl_device.h?): no gin-alltoall step"
  mkdir -p "$DEST" &&
    cp "$BUILD/libnccl-net-mesh.so" "$BUILD/tests/gpu/nccl-mesh-gpu-e2e" \
      "$BUILD/src/tools/bench/nccl-mesh-bench" "$DEST/" || exit 1
  [[ -x "$BUILD/tests/gpu/nccl-mesh-gin-alltoall" ]] &&
    cp "$BUILD/tests/gpu/nccl-mesh-gin-alltoall" "$DEST/"
  # NCCL's own Socket transport as a plugin for the versus-socket step, from a NCCL source tree.
  if [[ -n "${NCCL_SRC:-}" ]]; then
    "$ROOT/scripts/build-nccl-socket.sh" "$NCCL_SRC" "$BUILD/nccl-socket" &&
      cp "$BUILD/nccl-socket/libnccl-net-ncclsocket.so" "$DEST/" || exit 1
  fi
  # The program links libcudart.so.N and the bench libfmt.so.N dynamically; the GPU machine's
  # loader path may lack them.
  for lib in $(ldd "$DEST/nccl-mesh-gpu-e2e" "$DEST/nccl-mesh-bench" |
    awk '/libcudart|libfmt/ {print $3}' | sort -u); do
    cp -L "$lib" "$DEST/"
  done
  ls -l "$DEST"
  exit 0
fi

# GPU_E2E_STEPS: which steps run (empty: all). selected NAME says whether NAME is one of them;
# listed NAME whether the list names it (a step that cannot run then says NOT-RUN).
ALL_STEPS=(check-mesh check-socket bench ceiling choices torch gin-alltoall check-ring
           check-line bench-ring bench-line versus-socket nccl-version)
IFS=', ' read -r -a ONLY_STEPS <<<"${GPU_E2E_STEPS:-}"
for step in ${ONLY_STEPS[@]+"${ONLY_STEPS[@]}"}; do
  [[ " ${ALL_STEPS[*]} " == *" $step "* ]] ||
    { echo "GPU_E2E_STEPS: no step '$step' (steps: ${ALL_STEPS[*]})" >&2; exit 2; }
done
listed() { [[ " ${ONLY_STEPS[*]-} " == *" $1 "* ]]; }
selected() { [[ $1 == build || ${#ONLY_STEPS[@]} -eq 0 ]] || listed "$1"; }

OUT=${1:-${GPU_E2E_OUT:-}}
if [[ -z "$OUT" ]]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
exec > >(tee "$OUT/gpu-e2e.log") 2>&1

BUDGET=${GPU_E2E_BUDGET_S:-570}
PY=${PYTHON:-python3}
PREBUILT=${GPU_E2E_PREBUILT:-}
START=$SECONDS
STEPS=()  # "name status seconds" per step
RESERVE_S=0  # seconds run_step keeps back for the steps after it (the NCCL version check)

elapsed() { echo $((SECONDS - START)); }

# The emulated steps the knobs ask for (CHECK_EMULATE: shapes, one step each; BENCH_EMULATE: the
# shape of bench-<shape>). Unknown shapes are refused here, before anything runs.
IFS=', ' read -r -a EMULATE_SHAPES <<<"${CHECK_EMULATE-ring,line}"
BENCH_SHAPE=${BENCH_EMULATE-ring}
EMULATE_STEPS=()
for shape in ${EMULATE_SHAPES[@]+"${EMULATE_SHAPES[@]}"} $BENCH_SHAPE; do
  [[ $shape == ring || $shape == line ]] ||
    { echo "CHECK_EMULATE / BENCH_EMULATE take ring and line, not '$shape'" >&2; exit 2; }
done
for shape in ${EMULATE_SHAPES[@]+"${EMULATE_SHAPES[@]}"}; do EMULATE_STEPS+=("check-$shape"); done
[[ -n "$BENCH_SHAPE" ]] && EMULATE_STEPS+=("bench-$BENCH_SHAPE")

# run_step NAME BUDGET_S CMD...: runs CMD (a program or a function of this script) with its
# output in OUTDIR/NAME.log, bounded by its own budget and by what is left of the whole run; an
# argument @LIMIT@ becomes that bound minus 15 s, so a program can finish its report in time.
# Prints the lines that matter from the log.
run_step() {
  local name=$1 budget=$2
  shift 2
  if ! selected "$name"; then
    echo "== $name: not selected (GPU_E2E_STEPS=$GPU_E2E_STEPS)"
    return 0
  fi
  local left=$((BUDGET - $(elapsed) - 10 - RESERVE_S))
  local limit=$((budget < left ? budget : left))
  if ((limit < 20)); then
    echo "== $name: not run, only ${left}s of the ${BUDGET}s budget left"
    STEPS+=("$name NOT-RUN 0")
    return 1
  fi
  local args=() a
  for a in "$@"; do args+=("${a//@LIMIT@/$((limit - 15))}"); done
  echo "== $name (limit ${limit}s): ${args[*]}"
  local t0=$SECONDS rc=0
  if declare -F "${args[0]}" >/dev/null; then
    # timeout runs programs only: hand the function to a child bash.
    timeout -k 10 "$limit" bash -c "$(declare -f "${args[0]}"); \"\$@\"" _ "${args[@]}" \
      >"$OUT/$name.log" 2>&1 || rc=$?
  else
    timeout -k 10 "$limit" "${args[@]}" >"$OUT/$name.log" 2>&1 || rc=$?
  fi
  local took=$((SECONDS - t0)) status=PASS
  if ((rc == 124 || rc == 137)); then
    status=TIMEOUT
  elif ((rc == 77)); then
    status=SKIP  # no GPU: the step proved nothing
  elif ((rc != 0)); then
    status=FAIL
    # The launcher's "relay:" line: ranks without a shared (emulated) cable and no relay.
    grep -qE '^ +relay: no common subnet' "$OUT/$name.log" && status=NO-RELAY
  fi
  grep -E '^(\[PASS\]|\[FAIL\]|SUMMARY|TARGET|SKIP|ERROR|JSON report| +(problem|failed case|relay))' \
    "$OUT/$name.log" | head -60
  if [[ $status != PASS && $status != SKIP ]]; then
    echo "-- last lines of $OUT/$name.log (exit $rc):"
    tail -15 "$OUT/$name.log"
  fi
  # A rank killed by its timeout can leave the MPS server refusing new clients (seen on an H200
  # after the GIN step hung: the next steps' ranks failed cudaSetDevice with "CUDA-capable
  # device(s) is/are busy or unavailable"): the next step gets a fresh server.
  if [[ $status == TIMEOUT || $status == FAIL ]] && declare -F restart_mps >/dev/null; then
    restart_mps
  fi
  if [[ $status == NO-RELAY ]]; then
    echo "== NOTE $name: ranks that share no emulated cable could not connect (\"no common" \
         "subnet\"): this plugin has no relay (issue 18, branch relay) or relaying is off" \
         "(NCCL_MESH_RELAY=0); see the relay: lines above"
  fi
  echo "== $name: $status (exit $rc, ${took}s)"
  STEPS+=("$name $status $took")
  [[ $status == PASS ]]
}

# ---- environment ---------------------------------------------------------------------------
NCCL_HOME=${NCCL_HOME:-$("$PY" -c 'import nvidia.nccl as m; print(m.__path__[0])' 2>/dev/null || true)}
if [[ -z "$NCCL_HOME" || ! -d "$NCCL_HOME/lib" ]]; then
  echo "WARNING: no NCCL from the PyTorch venv (import nvidia.nccl failed); the system NCCL" \
       "will be used and the 2.28.9 version check will fail"
else
  # 2.28.9 first on the loader path: the system libnccl2 is 2.28.3.
  export LD_LIBRARY_PATH="$NCCL_HOME/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [[ -z "${CUDACXX:-}" ]] && ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
{
  echo "date: $(date -u +%FT%TZ)"
  echo "repo: $ROOT ($(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo no-git))"
  echo "NCCL_HOME: ${NCCL_HOME:-none}"
  nvidia-smi -L 2>&1 || true
  "${CUDACXX:-nvcc}" --version 2>&1 | tail -1 || true
  cmake --version 2>&1 | head -1
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
} >"$OUT/env.txt"
cat "$OUT/env.txt"

# ---- build ---------------------------------------------------------------------------------
export ROOT BUILD NCCL_HOME OUT
build() {
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" ${NCCL_HOME:+-DNCCL_ROOT="$NCCL_HOME"} &&
    cmake --build "$BUILD" -j "$(nproc)" --target nccl-net-mesh nccl-mesh-gpu-e2e &&
    { cmake --build "$BUILD" -j "$(nproc)" --target nccl-mesh-gin-alltoall ||
        echo "NOTE: nccl-mesh-gin-alltoall not built (NCCL without nccl_device.h?)"; } &&
    { cmake --build "$BUILD" -j "$(nproc)" --target nccl-mesh-bench ||
      echo "nccl-mesh-bench not built (CLI11, nlohmann-json, fmt missing?): no ceiling step"; }
}
BUILT=1
if [[ -n "$PREBUILT" ]]; then
  PREBUILT=$(cd "$PREBUILT" && pwd)
  E2E=$PREBUILT/nccl-mesh-gpu-e2e
  GIN_A2A=$PREBUILT/nccl-mesh-gin-alltoall
  PLUGIN=$PREBUILT/libnccl-net-mesh.so
  MESH_BENCH=$PREBUILT/nccl-mesh-bench
  # NCCL 2.28.9 stays first; the carried CUDA runtime only fills a gap.
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$PREBUILT"
  echo "== build: prebuilt binaries from $PREBUILT"
  ldd "$E2E" "$PLUGIN" | grep -E 'not found|nccl|cudart' || true
  [[ -x "$E2E" && -f "$PLUGIN" ]] || BUILT=0
else
  if ! echo '#include <infiniband/verbs.h>' | "${CXX:-c++}" -E -x c++ - >/dev/null 2>&1; then
    echo "NOTE: no rdma-core headers (infiniband/verbs.h) here, so the plugin cannot be built on" \
         "this machine: build it where they are with '$0 --prebuild DIR', copy DIR here and" \
         "run GPU_E2E_PREBUILT=DIR $0 OUTDIR"
  fi
  run_step build 240 build || BUILT=0
  E2E=$BUILD/tests/gpu/nccl-mesh-gpu-e2e
  GIN_A2A=$BUILD/tests/gpu/nccl-mesh-gin-alltoall
  MESH_BENCH=$BUILD/src/tools/bench/nccl-mesh-bench
  PLUGIN=$(find "$BUILD" -name libnccl-net-mesh.so -print -quit 2>/dev/null)
  PLUGIN=${PLUGIN:-$BUILD/libnccl-net-mesh.so}
fi
echo "program: $E2E"
echo "plugin:  $PLUGIN"

# ---- MPS: without it the ranks' kernels time-slice and small messages cost milliseconds -------
export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/mps}
export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/mps-log}
MPS_STARTED=0
stop_mps() {
  if ((MPS_STARTED)); then
    echo quit | nvidia-cuda-mps-control && echo "MPS stopped"
    MPS_STARTED=0
  fi
}
restart_mps() {
  if ((MPS_STARTED)); then
    echo quit | nvidia-cuda-mps-control
    sleep 2
    nvidia-cuda-mps-control -d && echo "MPS restarted" || MPS_STARTED=0
  fi
}
trap stop_mps EXIT
trap 'exit 130' INT TERM
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if nvidia-cuda-mps-control -d; then
  MPS_STARTED=1
  echo "MPS started (pipe $CUDA_MPS_PIPE_DIRECTORY)"
else
  echo "WARNING: could not start MPS: small-message timings will be dominated by time-slicing"
fi

if ((BUILT)); then
  # ---- correctness -------------------------------------------------------------------------
  run_step check-mesh 330 "$E2E" --mode check --net Mesh --plugin "$PLUGIN" \
    --ranks "${CHECK_RANKS:-2,3,4}" --protos "${CHECK_PROTOS:-Simple,LL,LL128}" \
    --out "$OUT/check" --timeout 150 --total-timeout @LIMIT@ --skip-exit-code 77
  # The same program (short sizes) over NCCL's own Socket transport, per protocol: a failure
  # here means the test or NCCL is wrong, not the plugin.
  run_step check-socket 90 "$E2E" --mode check --net Socket --ranks 2 --quick \
    --protos "${CHECK_SOCKET_PROTOS:-Simple,LL,LL128}" \
    --out "$OUT/check-socket" --timeout 40 --total-timeout @LIMIT@ --skip-exit-code 77

  # ---- benchmark ---------------------------------------------------------------------------
  run_step bench 200 "$E2E" --mode bench --net Mesh,Socket --plugin "$PLUGIN" \
    --ranks "${BENCH_RANKS:-2,3,4}" --out "$OUT/bench" --timeout 120 --total-timeout @LIMIT@ --skip-exit-code 77

  # ---- the rig's ceiling (issue 28): the plugin alone with a ring all-reduce's traffic ---------
  if [[ ${CEILING:-1} != 0 ]]; then
    BENCH_RANKS=${BENCH_RANKS:-2,3,4}
    export MESH_BENCH PLUGIN BENCH_RANKS CEILING_SIZES CEILING_CHANNELS CEILING_RECV_CAPACITY \
      CEILING_SLICES SOCKET_LIKE SOCKET_LIKE_SIZES
    ceiling() {
      local n rc=0 args=()
      mkdir -p "$OUT/ceiling"
      for n in ${BENCH_RANKS//,/ }; do
        echo "-- ring-traffic, $n ranks"
        # Same loopback as NCCL's ranks (NCCL_MESH_IFNAME=lo in the bench's local mode).
        # NCCL's channels (2 in the bench's runs: "2 coll channels" in its rank logs).
        "$MESH_BENCH" --plugin "$PLUGIN" --nranks "$n" --pattern ring-traffic \
          --channels "${CEILING_CHANNELS:-2}" --recv-capacity "${CEILING_RECV_CAPACITY:-1M}" \
          --slice-bytes "${CEILING_SLICES:-nccl}" \
          --sizes "${CEILING_SIZES:-1K,64K,256K,1M,4M,16M,64M,128M,256M,512M}" --warmup 1 \
          --timeout 60 --json "$OUT/ceiling/ring-traffic-n$n.json" || rc=1
        args+=(--ceiling "$n=$OUT/ceiling/ring-traffic-n$n.json")
      done
      python3 "$ROOT/scripts/ceiling-report.py" --gpu-bench "$OUT/bench/bench.json" "${args[@]}" ||
        rc=1
      # The 2-core machine's stand-in for Socket (measurements.md, twenty-sixth pass): the
      # plugin's ring in NCCL's slices against the bench's TCP ring framed and polled as NCCL's
      # Socket transport (--tcp-like-socket). Its ratios next to the bench step's Mesh / Socket
      # lines say whether that stand-in reads on this host as NCCL's Socket does.
      if [[ ${SOCKET_LIKE:-1} != 0 ]]; then
        for n in ${BENCH_RANKS//,/ }; do
          echo "-- ring-allreduce, NCCL's slices, against the Socket-like TCP ring, $n ranks"
          "$MESH_BENCH" --plugin "$PLUGIN" --nranks "$n" --pattern ring-allreduce \
            --slice-bytes nccl --tcp-like-socket --sizes "${SOCKET_LIKE_SIZES:-1K,64K,256K,1M,4M}" \
            --timeout 60 --json "$OUT/ceiling/socket-like-n$n.json" || rc=1
        done
      fi
      return $rc
    }
    if [[ -x "$MESH_BENCH" ]]; then
      run_step ceiling 150 ceiling
    elif selected ceiling; then
      echo "== ceiling: not run, no nccl-mesh-bench at $MESH_BENCH"
      STEPS+=("ceiling NOT-RUN 0")
    fi
  fi

  # ---- NCCL's choices over Mesh and over Socket (issue 28) ------------------------------------
  # The first GPU run had NCCL over Mesh 1.30-1.46x slower than over Socket at 1 KiB with 3-4
  # ranks, where the bench's loop has Mesh faster than NCCL's Socket net code at every size. The
  # first thing to rule out is that NCCL chose differently (algorithm, protocol, channels): a
  # few calls per size with NCCL_DEBUG_SUBSYS=TUNING (rank 0 logs each choice; too many lines for
  # the timed bench step), then scripts/nccl-choices-report.py: a table per rank count and a
  # `SUMMARY choices nN:` line naming the cells where Mesh and Socket differ. Knobs: CHOICES (0:
  # skip), CHOICES_SIZES (1K,64K,256K,1M,4M,64M).
  if [[ ${CHOICES:-1} != 0 ]]; then
    BENCH_RANKS=${BENCH_RANKS:-2,3,4}
    export E2E PLUGIN BENCH_RANKS CHOICES_SIZES
    choices() {  # the report reads whatever sets ran, also when one failed
      local rc=0
      NCCL_DEBUG_SUBSYS=INIT,NET,TUNING "$E2E" --mode bench --net Mesh,Socket --plugin "$PLUGIN" \
        --ranks "$BENCH_RANKS" --sizes "${CHOICES_SIZES:-1K,64K,256K,1M,4M,64M}" \
        --seconds-per-size 0.001 --out "$OUT/choices" --timeout 60 --total-timeout "$1" \
        --skip-exit-code 77 || rc=$?
      ((rc == 77)) && return 77
      python3 "$ROOT/scripts/nccl-choices-report.py" "$OUT/choices" || rc=1
      return $rc
    }
    run_step choices 90 choices @LIMIT@
  fi

  # ---- PyTorch -----------------------------------------------------------------------------
  run_step torch 150 "$PY" "$ROOT/tests/gpu/torch_check.py" --net Mesh --plugin "$PLUGIN" \
    --ranks "${TORCH_RANKS:-2,4}" --out "$OUT/torch" --timeout 100 --total-timeout @LIMIT@ --skip-exit-code 77

  # ---- GIN (issue 27): device-API all-to-all through ncclGinPlugin_v11 --------------------------
  # GIN_RANKS (2,3,4): rank counts; each rank log must show NCCL loading "gin plugin Mesh (v11)".
  run_step gin-alltoall 100 "$ROOT/tests/gpu/gin_alltoall.sh" "$GIN_A2A" "$PLUGIN" "$OUT/gin" \
    $(tr , ' ' <<<"${GIN_RANKS:-2,3,4}")

  # ---- emulated ring and line (issue 18): relay + tuner ---------------------------------------
  # The NCCL version check after these keeps its 20 s.
  RESERVE_S=25
  for shape in ${EMULATE_SHAPES[@]+"${EMULATE_SHAPES[@]}"}; do
    run_step "check-$shape" 240 "$E2E" --mode check --net Mesh --plugin "$PLUGIN" \
      --emulate "$shape" --tuner "${EMULATE_TUNER:-auto}" --ranks "${CHECK_EMULATE_RANKS:-3,4,5}" \
      --protos "${CHECK_EMULATE_PROTOS:-Simple,LL,LL128}" --out "$OUT/check-$shape" \
      --timeout 120 --total-timeout @LIMIT@ --skip-exit-code 77
  done
  if [[ -n "$BENCH_SHAPE" ]]; then
    run_step "bench-$BENCH_SHAPE" 150 "$E2E" --mode bench --net Mesh --plugin "$PLUGIN" \
      --emulate "none,$BENCH_SHAPE" --tuner "${EMULATE_TUNER:-auto}" \
      --ranks "${BENCH_EMULATE_RANKS:-4}" --out "$OUT/bench-$BENCH_SHAPE" --timeout 100 \
      --total-timeout @LIMIT@ --skip-exit-code 77
  fi

  # ---- Mesh against NCCL's own Socket net code, the bench's loop (issue 28) -------------------
  # The 2-core machine measured Mesh at 0.43-0.97 of NCCL's Socket transport driven by the bench
  # (docs/measurements.md, twenty-seventh pass), where the first GPU run had NCCL over Mesh at
  # 0.92-1.12 of NCCL over Socket at 256 KiB-1 MiB. The same comparison on this host, beside
  # the bench step's, tells the transports' share of that ratio from NCCL's (its proxy, the GPU,
  # its choices). Last, in the time left: it adds no check. Needs NCCL's Socket built as a plugin:
  # NCCL_SRC=<a NCCL source tree> $0 --prebuild DIR (scripts/build-nccl-socket.sh), or
  # NCCL_SOCKET_PLUGIN=PATH. Knobs: NCCL_SOCKET_ROUNDS (2), NCCL_SOCKET_SIZES (1K,64K,256K,1M,4M).
  SOCK_PLUGIN=${NCCL_SOCKET_PLUGIN:-${PREBUILT:+$PREBUILT/libnccl-net-ncclsocket.so}}
  if [[ -n "$SOCK_PLUGIN" && -f "$SOCK_PLUGIN" && -x "$MESH_BENCH" ]]; then
    BENCH_RANKS=${BENCH_RANKS:-2,3,4}
    export MESH_BENCH PLUGIN SOCK_PLUGIN BENCH_RANKS NCCL_SOCKET_ROUNDS NCCL_SOCKET_SIZES
    versus_socket() {
      local n rc=0 shape="--slice-bytes=nccl --recv-capacity=1M"
      mkdir -p "$OUT/versus-socket"
      for n in ${BENCH_RANKS//,/ }; do
        NCCL_SOCKET_IFNAME=lo python3 "$ROOT/scripts/bench-interleaved.py" --bench "$MESH_BENCH" \
          --plugin "mesh=$PLUGIN" --plugin "sock=$SOCK_PLUGIN" --versus sock \
          --plugin-args "mesh=$shape" --plugin-args "sock=$shape" \
          --rounds "${NCCL_SOCKET_ROUNDS:-2}" --alternate-order -- --nranks "$n" \
          --pattern ring-allreduce --sizes "${NCCL_SOCKET_SIZES:-1K,64K,256K,1M,4M}" -q \
          >"$OUT/versus-socket/n$n.md" || rc=1
        sed -n "/median time \/ sock's/,\$p" "$OUT/versus-socket/n$n.md"
        awk -F'|' -v n="$n" '/median time \/ sock/ {f = 1; next}
          f && $2 ~ /mesh/ {split($5, a, " "); if (a[1] + 0 > max) {max = a[1] + 0; at = $4}}
          END {gsub(/^ +| +$/, "", at)
               if (max > 0) printf "TARGET bench ring-allreduce %s ranks: Mesh / NCCL'"'"'s Socket " \
                 "net code (bench loop, no NCCL proxy, no GPU), median, at most %.2f (%s; " \
                 "target <= 1.0)\n", n, max, at}' "$OUT/versus-socket/n$n.md"
      done
      return $rc
    }
    run_step versus-socket 120 versus_socket
  else
    echo "== versus-socket: not run, no NCCL Socket plugin (NCCL_SRC=<NCCL tree> $0 --prebuild DIR" \
         "builds one)"
    # Counted only where it was asked for by name: a full run without NCCL's source stays green.
    listed versus-socket && STEPS+=("versus-socket NOT-RUN 0")
  fi
  RESERVE_S=0
else
  for step in check-mesh check-socket bench ceiling choices torch gin-alltoall ${EMULATE_STEPS[@]+"${EMULATE_STEPS[@]}"}; do
    selected "$step" && STEPS+=("$step NOT-RUN 0")
  done
  listed versus-socket && STEPS+=("versus-socket NOT-RUN 0")
  echo "== build failed: nothing else run"
fi

# ---- NCCL version: every rank must have run the expected NCCL, the plugin at its newest ABI ----
# Expected: the version in $NCCL_HOME/include/nccl.h (2.28.9 for the venv's wheel), and the ABI
# that version probes first (docs: README "NCCL and RCCL versions").
nccl_header_version() {
  awk '/^#define NCCL_(MAJOR|MINOR|PATCH) / {v[$2]=$3}
       END {if (v["NCCL_MAJOR"] != "") print v["NCCL_MAJOR"] "." v["NCCL_MINOR"] "." v["NCCL_PATCH"]}' \
    "$NCCL_HOME/include/nccl.h" 2>/dev/null
}
abi_for_nccl() {  # MAJOR.MINOR.PATCH -> the ncclNetPlugin_vN it loads from this plugin
  local minor
  minor=$(cut -d. -f2 <<<"$1")
  if ((minor >= 30)); then echo 12; elif ((minor >= 28)); then echo 11
  elif ((minor >= 26)); then echo 10; elif ((minor >= 24)); then echo 9
  elif ((minor >= 20)); then echo 8; elif ((minor == 19)); then echo 7; else echo 6; fi
}
export EXPECT_NCCL=${NCCL_EXPECT_VERSION:-$(nccl_header_version)}
EXPECT_NCCL=${EXPECT_NCCL:-2.28.9}
EXPECT_ABI=$(abi_for_nccl "$EXPECT_NCCL")
export EXPECT_ABI
# With --nccl, PyTorch's ranks may run the NCCL PyTorch ships: listed, not required.
export VERSION_DIRS="$OUT"
((NCCL_FROM_OPTION)) && VERSION_DIRS="$OUT/check $OUT/bench"
check_version() {
  local versions loaded d
  echo "expected: NCCL $EXPECT_NCCL, plugin loaded as v$EXPECT_ABI (ranks under $VERSION_DIRS)"
  for d in $VERSION_DIRS; do [[ -d $d ]] || echo "missing $d"; done
  versions=$(grep -rhoE 'NCCL version [0-9]+\.[0-9]+\.[0-9]+' $VERSION_DIRS --include='rank*.log' |
    sort | uniq -c)
  loaded=$(grep -rhoE 'Loaded net plugin Mesh \(v[0-9]+\)' $VERSION_DIRS --include='rank*.log' |
    sort | uniq -c)
  if [[ "$VERSION_DIRS" != "$OUT" && -d "$OUT/torch" ]]; then
    echo "PyTorch ranks (not checked):"
    grep -rhoE 'NCCL version [0-9]+\.[0-9]+\.[0-9]+|Loaded net plugin Mesh \(v[0-9]+\)' \
      "$OUT/torch" --include='rank*.log' | sort | uniq -c
  fi
  if [[ -z "$versions" || -z "$loaded" ]]; then
    echo "no \"NCCL version\" or \"Loaded net plugin Mesh\" line in the rank logs"
    return 1
  fi
  echo "$versions"
  echo "$loaded"
  ! grep -qv "NCCL version ${EXPECT_NCCL//./\\.}\$" <<<"$versions" &&
    ! grep -qv "Loaded net plugin Mesh (v$EXPECT_ABI)\$" <<<"$loaded"
}
run_step nccl-version 20 check_version

stop_mps

# ---- summary -------------------------------------------------------------------------------
pass=0
fail=0
skipped=0
echo
echo "================ gpu-e2e summary ($(elapsed)s of ${BUDGET}s) ================"
{
  echo "{"
  echo "  \"seconds\": $(elapsed),"
  echo "  \"steps\": ["
  sep=""
  for s in "${STEPS[@]}"; do
    read -r name status took <<<"$s"
    printf '    %s{"step": "%s", "status": "%s", "seconds": %s, "log": "%s"}\n' \
      "$sep" "$name" "$status" "$took" "$OUT/$name.log"
    sep=","
  done
  echo "  ],"
} >"$OUT/summary.json"
for s in "${STEPS[@]}"; do
  read -r name status took <<<"$s"
  printf '  %-14s %-9s %4ss\n' "$name" "$status" "$took"
  case $status in
    PASS) pass=$((pass + 1)) ;;
    SKIP) skipped=$((skipped + 1)) ;;
    *) fail=$((fail + 1)) ;;
  esac
done
for s in "${STEPS[@]}"; do
  read -r name _ <<<"$s"
  grep -hE '^(SUMMARY|TARGET)' "$OUT/$name.log" 2>/dev/null | sed 's/^/  /'
done
# The programs' TARGET lines (Mesh vs Socket, emulated ring vs full mesh), as JSON strings.
{
  echo '  "targets": ['
  sep=""
  for s in "${STEPS[@]}"; do
    read -r name _ <<<"$s"
    while IFS= read -r line; do
      line=${line//\\/\\\\}
      printf '    %s"%s"\n' "$sep" "${line//\"/\\\"}"
      sep=","
    done < <(grep -hE '^TARGET' "$OUT/$name.log" 2>/dev/null)
  done
  echo "  ],"
} >>"$OUT/summary.json"
printf '  "passed": %d,\n  "failed": %d,\n  "skipped": %d\n}\n' "$pass" "$fail" "$skipped" \
  >>"$OUT/summary.json"
echo "steps passed: $pass, failed: $fail, skipped (no GPU): $skipped; logs and JSON in $OUT"

# Everything in one archive too; GPU_E2E_COMPACT=1 keeps only a handful of top-level files
# (for runners that bring back few files, or none deeper than two folders).
tar -czf "$OUT/../.gpu-e2e-logs.$$.tar.gz" -C "$OUT" . 2>/dev/null &&
  mv "$OUT/../.gpu-e2e-logs.$$.tar.gz" "$OUT/all-logs.tar.gz"
if [[ ${GPU_E2E_COMPACT:-0} == 1 ]]; then
  for j in check/check.json check-socket/check.json bench/bench.json torch/torch.json \
    check-ring/check.json check-line/check.json bench-ring/bench.json bench-line/bench.json \
    ceiling/ring-traffic-n2.json ceiling/ring-traffic-n3.json ceiling/ring-traffic-n4.json; do
    [[ -f "$OUT/$j" ]] && cp "$OUT/$j" "$OUT/${j//\//-}"
  done
  rm -rf "$OUT/check" "$OUT/check-socket" "$OUT/bench" "$OUT/torch" "$OUT/check-ring" \
    "$OUT/check-line" "$OUT/bench-ring" "$OUT/bench-line" "$OUT/ceiling" "$OUT/env.txt"
  for s in "${STEPS[@]}"; do rm -f "$OUT/${s%% *}.log"; done
  echo "compacted to:" "$OUT"/*
fi
# A skipped step proved nothing: only a full pass is a success.
((fail == 0 && skipped == 0))
