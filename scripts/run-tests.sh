#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every test lane, as CI runs it:
#   1. release build: unit, conformance, tool, install (install tree, .deb and, as root, its
#      dpkg round trip: tests/install) and (as root) namespace-mesh suites via ctest;
#   2. ASan+UBSan build: unit, conformance, soak and (as root) the namespace suite's fault and
#      multi-rank cases (SANITIZER_CASES in tests/netns/cases.py);
#   3. TSan build: the same;
#   4. libFuzzer (clang): every parser target for a bounded time (scripts/run-fuzz.sh);
#   5. Soft-RoCE: conformance suite and bandwidth over rdma_rxe in a qemu VM (tests/softroce/);
#   6. arm64: cross-built plugin, unit and conformance tests under qemu-user (scripts/arm64-lane.sh).
# Usage: scripts/run-tests.sh [lane ...]   lanes: release asan tsan fuzz softroce arm64 (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
lanes=("$@")
[ ${#lanes[@]} -eq 0 ] && lanes=(release asan tsan fuzz softroce arm64)
jobs=$(nproc)
status=0
# The sanitizer lanes also build as unity sources (CMake's UNITY_BUILD: 16 files of a target per
# compiler run), which parses the common headers once per batch instead of once per file: the
# lanes' trees build in about 40% less time (measured in CONTRIBUTING.md). The release lane
# stays the build users make (one compiler run per file), so a file that leans on another's
# includes or helpers still fails there, and a name two files of one target both define at file
# scope fails these lanes' build: helpers shared by files go in a header.
san_flags=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
           -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16)
run_lane() {
  local lane=$1 dir=build-ci-$1 args=() labels=""
  case $lane in
    # -U: every suite of the current default MESH_SUBDIRS, also in a tree configured before a
    # suite (tests/install) was added to it.
    release) args=(-DCMAKE_BUILD_TYPE=Release -UMESH_SUBDIRS) ;;
    # The sanitizer lanes build at -O1 with line tables only (-g1: file:line in reports):
    # ASan+UBSan at -O2 -g took 9 of the run's minutes to build, -O1 -g1 about half per file
    # (src/tools/bench/main.cc: 22.8 s -> 11.0 s); -O1 is what the sanitizers' docs advise.
    asan) args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DMESH_SANITIZE=address "${san_flags[@]}"
                "-DMESH_SUBDIRS=tests/unit;tests/conformance;tests/gin;tests/soak;src/tools/bench;tests/bench;tests/netns")
          labels="unit|conformance|soak|netns" ;;
    tsan) args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DMESH_SANITIZE=thread "${san_flags[@]}"
                "-DMESH_SUBDIRS=tests/unit;tests/conformance;tests/gin;tests/soak;src/tools/bench;tests/bench;tests/netns")
          labels="unit|conformance|soak|netns" ;;
    fuzz) echo "=== lane fuzz"; scripts/run-fuzz.sh "${MESH_FUZZ_SECONDS:-20}"; return ;;
    arm64) echo "=== lane arm64"; scripts/arm64-lane.sh build-ci-arm64; return ;;
    softroce)
      # The release lane's tree when there is one (its targets are then up to date), else a
      # tree with only the plugin, the conformance and GIN suites and the bench. LANE_TRANSPORT
      # (rdma by default) and the other LANE_* settings pass through (tests/softroce/README.md).
      local targets=(nccl-net-mesh mesh_conformance_test mesh_conformance_peer nccl-mesh-bench
                     mesh_gin_test mesh_gin_fake_cuda)
      if [ -f build-ci-release/CMakeCache.txt ]; then
        dir=build-ci-release
      else
        cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "-DMESH_SUBDIRS=src/tools;tests/conformance;tests/gin" \
          >/dev/null || return
      fi
      echo "=== lane softroce: build ($dir)"
      cmake --build "$dir" -j"$jobs" --target "${targets[@]}" || return
      echo "=== lane softroce: test"
      # The asan lane's tree, when it ran before, also runs the RDMA tests under ASan+UBSan.
      if [ -f build-ci-asan/CMakeCache.txt ]; then
        cmake --build build-ci-asan -j"$jobs" --target nccl-net-mesh mesh_conformance_test \
          mesh_conformance_peer || return
        LANE_ASAN_BUILD=build-ci-asan tests/softroce/run-lane.sh "$dir"
      else
        tests/softroce/run-lane.sh "$dir"
      fi
      return ;;
    *) echo "unknown lane $lane" >&2; return 2 ;;
  esac
  echo "=== lane $lane: configure and build"
  cmake -S . -B "$dir" "${args[@]}" >/dev/null || return
  cmake --build "$dir" -j"$jobs" || return
  echo "=== lane $lane: test"
  local ctest_args=()
  # Sanitizer lanes leave out the tests labelled x86-release-only (the reason is by each), and
  # ABI versions of the versioned suites: each version's adapter only converts arguments, on the
  # caller's thread, for the one core every version drives, and the release lane (and arm64's
  # v11) runs every version. ASan keeps the oldest and the newest adapters' conversions (the
  # conformance cases as v6, v11 and v12; GIN as v11 and v15); TSan, which looks for races
  # between threads that no adapter starts, keeps v11 and v12 (the I/O pool variants are v11)
  # and GIN's v15. The versions left out took 342 s of TSan's and 95 s of ASan's test time on a
  # 2-vCPU machine whose whole run took 4,753 s (stop 48; the budget is 70 min).
  local versions='/v(7|8|9|10)( |$)|^gin\..*/v1[234](_[0-9]ranks)?( |$)'
  [ "$lane" = tsan ] && versions='/v([6-9]|10)( |$)|^gin\..*/v1[1-4](_[0-9]ranks)?( |$)'
  [ -n "$labels" ] && ctest_args+=(-L "$labels" -LE x86-release-only -E "$versions")
  # In parallel, serial where a test says so, and up to 3 failures rerun alone (ctest-lane.sh).
  env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
      scripts/ctest-lane.sh "$lane" "$dir" "${ctest_args[@]}"
}
# Each lane's output goes to the console and to build-ci-logs/<lane>.log. CI keeps only the
# tail of the console, so the run ends with a summary: each lane's verdict and time, and for a
# lane that failed the lines of its log that say what failed (a failed lane's details are
# otherwise hundreds of lines above the tail).
mkdir -p build-ci-logs
rm -f build-ci-logs/flaky.txt
summary=()
for lane in "${lanes[@]}"; do
  log=build-ci-logs/$lane.log t0=$(date +%s)
  if run_lane "$lane" 2>&1 | tee "$log"; then
    summary+=("lane $lane: PASS in $(($(date +%s) - t0)) s")
  else
    echo "=== lane $lane FAILED"
    summary+=("lane $lane: FAILED in $(($(date +%s) - t0)) s (log: $log)")
    status=1
  fi
done
echo "=== run-tests summary"
printf '    %s\n' "${summary[@]}"
[ -s build-ci-logs/flaky.txt ] && sed 's/^/    /' build-ci-logs/flaky.txt
for lane in "${lanes[@]}"; do
  grep -q "^lane $lane: FAILED" < <(printf '%s\n' "${summary[@]}") || continue
  echo "=== lane $lane: what failed (from build-ci-logs/$lane.log)"
  grep -aE 'tests FAILED|\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception)\)|\*\*\*(Failed|Timeout)|: Failure$|^\[  FAILED  \]|error:|CRASH|FAIL|ERROR: (Address|Undefined|Leak)Sanitizer|WARNING: ThreadSanitizer|runtime error' \
    "build-ci-logs/$lane.log" | grep -v 'tests passed' | cut -c1-240 | tail -40
done
exit $status
