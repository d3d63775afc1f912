#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# How every CI lane runs ctest (scripts/run-tests.sh, scripts/arm64-lane.sh):
#   scripts/ctest-lane.sh LANE BUILD_DIR [ctest arguments...]
# 1. The selected tests run with -j (one job per core): most are processes waiting on sockets,
#    timers and their peer process, so two at a time take about half the time (CI has 2 cores;
#    measured per lane in CONTRIBUTING.md). The tests that need the machine to themselves
#    say so with RUN_SERIAL (the namespace cases: they saturate the CPUs and assert timings), and
#    ctest runs those alone.
# 2. Up to 3 failed tests run once more, alone (as the Soft-RoCE lane does): a test that then
#    passes is reported as FLAKY in the run's summary (build-ci-logs/flaky.txt, by name, never
#    silently); more failures, or one that fails again, fail the lane.
# CTEST_LANE_JOBS overrides the job count (1: the old serial run).
set -uo pipefail
lane=$1 dir=$2
shift 2
jobs=${CTEST_LANE_JOBS:-$(nproc)}
ctest --test-dir "$dir" --output-on-failure --timeout 900 -j"$jobs" "$@" && exit 0
failed=$dir/Testing/Temporary/LastTestsFailed.log
[ -s "$failed" ] && [ "$(wc -l <"$failed")" -le 3 ] || exit 1
names=$(cut -d: -f2- "$failed" | tr '\n' ' ')
echo "=== lane $lane: rerunning alone: $names"
ctest --test-dir "$dir" --output-on-failure --timeout 900 --rerun-failed || exit 1
mkdir -p build-ci-logs
echo "lane $lane: FLAKY, failed once and passed alone: $names" >>build-ci-logs/flaky.txt
