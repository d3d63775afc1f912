#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# --local-cpus (issue 28, measurements.md twenty-third pass): local mode pins rank r to the r-th
# CPU of the list, before exec, and every rank checks that it runs on that CPU alone, so a run
# whose header says "ranks pinned" was. A CPU this process may not use, and a multi-host run,
# are refused with a message.
# usage: local_cpus.sh BENCH PLUGIN
set -eu
bench=$1
plugin=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The first and the last CPU this process may run on (a CI container may not have CPU 0).
cpus=$(python3 -c 'import os; c = sorted(os.sched_getaffinity(0)); print(c[0], c[-1])')
first=${cpus% *}
last=${cpus#* }
"$bench" --plugin "$plugin" --pattern ring-allreduce --nranks 3 --local-cpus "$first,$last" \
  --sizes 4,64K --iters 3 --warmup 1 --timeout 30 >"$dir/pinned.txt" 2>&1 || {
  echo "pinned run failed:"; cat "$dir/pinned.txt"; exit 1; }
grep -q "^# 3 ranks on .*ranks pinned to CPUs $first,$last,$first)" "$dir/pinned.txt" || {
  echo "the header does not name the pinned CPUs $first,$last,$first:"; cat "$dir/pinned.txt"; exit 1; }
grep -q "^# data verified: every received byte matched" "$dir/pinned.txt"
if "$bench" --plugin "$plugin" --pattern ring-allreduce --nranks 2 --local-cpus "$first,1023" \
  --sizes 4 --iters 1 --warmup 0 --timeout 10 >"$dir/bad.txt" 2>&1; then
  echo "a CPU this process may not use was accepted:"; cat "$dir/bad.txt"; exit 1
fi
grep -q "local-cpus: CPU 1023 is not one this process may run on" "$dir/bad.txt" || {
  echo "no message for CPU 1023:"; cat "$dir/bad.txt"; exit 1; }
if "$bench" --plugin "$plugin" --rank 0 --nranks 2 --rendezvous 127.0.0.1:9 \
  --local-cpus "$first" --timeout 5 >"$dir/multi.txt" 2>&1; then
  echo "--local-cpus was accepted in multi-host mode:"; cat "$dir/multi.txt"; exit 1
fi
grep -q "local-cpus pins the ranks of local mode only" "$dir/multi.txt" || {
  echo "no message for multi-host mode:"; cat "$dir/multi.txt"; exit 1; }
echo "local cpus: ranks pinned to $first,$last,$first; CPU 1023 and multi-host mode refused"
