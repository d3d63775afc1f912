#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer targets with clang and runs each on its corpus (tests/fuzz/corpus/<t>)
# for a bounded time. Prints the total executions per target; any crash fails the run and
# leaves the reproducer in build-fuzz/crashes/ (turn it into a unit-test regression case).
# Usage: scripts/run-fuzz.sh [seconds-per-target]   (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMESH_SANITIZE=fuzzer -DMESH_SUBDIRS=tests/fuzz >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz_handle fuzz_hello fuzz_header fuzz_settings fuzz_rdma_setup \
  fuzz_relay_beacon fuzz_relay_request fuzz_gin_message fuzz_tcp_peer
mkdir -p build-fuzz/crashes
# One target per core at a time (each fuzzer is single-threaded): 8 targets x 20 s took 160 s
# of CI time one after the other. Each target's verdict is printed once all have finished.
fuzz_one() { # target: exit 0 when it ran its time without a crash
  local t=$1 work=build-fuzz/corpus-$1 log=build-fuzz/fuzz_$1.log
  rm -rf "$work" && cp -r "tests/fuzz/corpus/$t" "$work"
  build-fuzz/tests/fuzz/fuzz_$t -max_total_time="$secs" -print_final_stats=1 \
    -artifact_prefix=build-fuzz/crashes/$t- "$work" >"$log" 2>&1
}
targets=(handle hello header settings rdma_setup relay_beacon relay_request gin_message tcp_peer)
parallel=$(nproc)
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
  rm -f "build-fuzz/fuzz_$t.rc"
  { rc=0; fuzz_one "$t" || rc=$?; echo "$rc" >"build-fuzz/fuzz_$t.rc"; } &
done
wait
passed=0 failed=0
for t in "${targets[@]}"; do
  log=build-fuzz/fuzz_$t.log
  if [ "$(cat "build-fuzz/fuzz_$t.rc" 2>/dev/null)" = 0 ]; then
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    echo "fuzz_$t: $execs executions in ${secs}s, no crash"
    passed=$((passed + 1))
  else
    echo "fuzz_$t: CRASH (see $log and build-fuzz/crashes/)"
    tail -20 "$log"
    failed=$((failed + 1))
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
