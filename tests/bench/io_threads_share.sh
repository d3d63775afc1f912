#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The TCP I/O threads are sized by the process's share of the cores (issue 28; io_pool.h
# resolve_io_threads, util/host_roster.h): every rank of a local run joins the host's roster at
# init and counts the processes running the plugin on its cores at its first connection, by
# which time NCCL's bootstrap (here the bench's rendezvous) has every rank initialized. So each
# of 3 ranks must count at least 3 (other tests' processes may add to it, never take away).
# Before the roster a rank sized its threads as if it were alone on the host.
# usage: io_threads_share.sh BENCH PLUGIN
set -eu
bench=$1
plugin=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
NCCL_DEBUG=INFO "$bench" --plugin "$plugin" --pattern ring-allreduce --nranks 3 \
  --sizes 4,64K --iters 3 --warmup 1 --timeout 30 >"$dir/out.txt" 2>&1 || {
  echo "run failed:"; cat "$dir/out.txt"; exit 1; }
grep -q "^# data verified: every received byte matched" "$dir/out.txt"
for r in 0 1 2; do
  n=$(sed -n "s/^\[rank $r\].*TCP data sockets moved by .*which \([0-9]*\) processes running the plugin on this host may use.*/\1/p" "$dir/out.txt" | head -1)
  if [ -z "$n" ]; then
    echo "rank $r did not say how many processes share its cores:"; grep "rank $r" "$dir/out.txt"; exit 1
  fi
  if [ "$n" -lt 3 ]; then
    echo "rank $r counted $n processes on its cores, the run has 3:"; grep "moved by" "$dir/out.txt"; exit 1
  fi
  echo "rank $r: $n processes running the plugin share its cores"
done
