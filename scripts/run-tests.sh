#!/usr/bin/env bash
# Every test lane, as CI runs it:
#   1. release build: unit, conformance, tool and (as root) namespace-mesh suites via ctest;
#   2. ASan+UBSan build: unit and conformance suites;
#   3. TSan build: unit and conformance suites;
#   4. libFuzzer (clang): every parser target for a bounded time (scripts/run-fuzz.sh).
# Usage: scripts/run-tests.sh [lane ...]   lanes: release asan tsan fuzz (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
lanes=("$@")
[ ${#lanes[@]} -eq 0 ] && lanes=(release asan tsan fuzz)
jobs=$(nproc)
status=0
run_lane() {
  local lane=$1 dir=build-ci-$1 args=() labels=""
  case $lane in
    release) args=(-DCMAKE_BUILD_TYPE=Release) ;;
    asan) args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DMESH_SANITIZE=address
                "-DMESH_SUBDIRS=tests/unit;tests/conformance;tests/soak"); labels="unit|conformance|soak" ;;
    tsan) args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DMESH_SANITIZE=thread
                "-DMESH_SUBDIRS=tests/unit;tests/conformance;tests/soak"); labels="unit|conformance|soak" ;;
    fuzz) echo "=== lane fuzz"; scripts/run-fuzz.sh "${MESH_FUZZ_SECONDS:-30}"; return ;;
    *) echo "unknown lane $lane" >&2; return 2 ;;
  esac
  echo "=== lane $lane: configure and build"
  cmake -S . -B "$dir" "${args[@]}" >/dev/null
  cmake --build "$dir" -j"$jobs"
  echo "=== lane $lane: test"
  local ctest_args=(--test-dir "$dir" --output-on-failure --timeout 900)
  [ -n "$labels" ] && ctest_args+=(-L "$labels")
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ctest "${ctest_args[@]}"
}
for lane in "${lanes[@]}"; do
  if ! run_lane "$lane"; then
    echo "=== lane $lane FAILED"
    status=1
  fi
done
exit $status
