#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `--slice-bytes nccl` sends the messages NCCL's Simple ring all-reduce sends (two slices per
# chunk, 32 KiB-1 MiB: sizes.h nccl_slice_floats), counted on the wire: every message's first
# sendmsg carries its 64-byte header as a separate first buffer (transport/tcp/wire.h), so
# strace's count of those is the plugin's message count. The check's own 512 KiB slices send
# 2(N-1) messages per rank and all-reduce at these sizes; NCCL's shape more where a chunk is
# over 64 KiB (issue 28: per-message costs the check does not see).
# The plain-TCP ring framed as NCCL's Socket transport frames them (--tcp-like-socket) sends
# the same messages, each behind its 4-byte size in a send() of its own: counted the same way.
# usage: nccl_slices.sh BENCH [PLUGIN]
# shellcheck source=tests/bench/strace_setup.sh
. "$(dirname "$0")/strace_setup.sh"
check() {  # ranks size per_rank slice_option [plugin|tcp]
  ranks=$1 size=$2 per_rank=$3 slice=$4 who=${5:-plugin}
  rm -f "$dir"/t.*
  if [ "$who" = tcp ]; then only="--tcp-only --tcp-like-socket" trace=sendto; else only=--no-tcp-baseline trace=sendmsg; fi
  # --iter-bytes high enough that the bench runs every one of --iters all-reduces.
  # shellcheck disable=SC2086
  strace -ff -qq -e trace=$trace -o "$dir/t" "$bench" ${plugin:+--plugin "$plugin"} \
    --nranks "$ranks" --pattern ring-allreduce --sizes "$size" --iters 40 --warmup 5 \
    --iter-bytes 1G $only --quiet --timeout 60 --slice-bytes "$slice" >"$dir/out"
  grep -q "^# data verified: every received byte matched" "$dir/out"
  python3 - "$dir" "$ranks" "$size" "$per_rank" "$slice" "$who" <<'PY'
import glob, re, sys
d, ranks, size, per_rank, slice_, who = sys.argv[1:]
want = 45 * int(per_rank) * int(ranks)  # (40 timed + 5 warm-up) all-reduces
headers = 0
size_send = re.compile(r'^sendto\(\d+, "[^"]*"(\.\.\.)?, 4, .*= 4$')
for f in glob.glob(d + "/t.*"):
    for line in open(f):
        if who == "tcp":
            # sendto(fd, "\0\0\4\0", 4, MSG_DONTWAIT|MSG_NOSIGNAL, NULL, 0) = 4: a size (not
            # the plugin's handshake magic "MSR\1": it still connects with --tcp-only).
            headers += bool(size_send.match(line.rstrip())) and '"MSR' not in line
        else:
            # sendmsg(fd, {msg_name=NULL, msg_namelen=0, msg_iov=[{iov_base="..."...,
            # iov_len=64}, {iov_base=... (the payload)}], ...) = N: a message's header and its
            # first bytes.
            headers += line.startswith("sendmsg(") and "iov_len=64}, {" in line
print(f"{who}: {ranks} ranks, {size}, --slice-bytes {slice_}: {headers} messages, {want} expected")
# The handshake's own messages (if any) are few; a miscut chunk is off by hundreds.
if not want <= headers <= want + 8 * int(ranks):
    sys.exit(f"{headers} messages on the wire, expected {want} ({per_rank} per rank and all-reduce)")
PY
}
# 2 ranks, 1 MiB: 512 KiB chunks, two 256 KiB slices each, 2 steps: 4 per rank (512K slices: 2).
check 2 1M 4 nccl
check 2 1M 2 512K
# 3 ranks, 1 MiB: 341 KiB chunks in two 170.7 KiB slices, 4 steps: 8; 64 KiB: 21 KiB chunks in
# one slice each: 4.
check 3 1M 8 nccl
check 3 64K 4 nccl
# 4 ranks, 256 KiB: 64 KiB chunks in two 32 KiB slices, 6 steps: 12 (512K slices: 6).
check 4 256K 12 nccl
# The TCP ring framed as NCCL's Socket: the same messages as the plugin's.
check 2 1M 4 nccl tcp
check 4 256K 12 nccl tcp
