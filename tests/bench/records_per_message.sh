#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Clear-to-send records per message on the TCP control sockets, counted by strace (sendto of
# one 16-byte record each) in the two ring all-reduces where records cost the plugin the most
# against the bench's plain-TCP ring (issue 28, measurements.md twenty-first pass); a record is
# a small TCP segment and a read at the other end, about 6 us of CPU on the 2-core test machine.
# * 3 ranks, 1 MiB (341 KiB steps): such steps were cleared unasked when the receive was posted,
#   one record per message: under a 1 MiB bound the sender needed the record of the step
#   before last at once. Under twice the window for messages under half of it they asked for
#   credit about every second step (0.51 per message); under four times, about every fifth
#   (0.21).
# * 4 ranks, 256 KiB (64 KiB steps): every message past half the bound asked for credit until
#   the answer came, 0.19-0.26 per message; with one credit asked at a time, 0.07.
# * The same 4-rank ring, and 3 ranks at 64 KiB (21 KiB steps), with every receive posted on a
#   1 MiB buffer as NCCL posts its Simple protocol's step slots (--recv-capacity 1M): the
#   receiver cleared each one unasked for its buffer alone, 1.00 per message (hello version 8);
#   now only after a message of half the window, so they ask for credit as above.
# The counts are structural (the same within a few records run to run, and with the machine
# busy); the limits sit between before and after. One mode was not: in about 1 run in 6 at 4
# ranks, 256 KiB, one rank's messages on one of its four data sockets all asked for their
# clear-to-send for the whole run (0.19-0.30 records per message), because that socket's window
# had stayed at 64-80 KiB while the others grew, and a 64 KiB step with its header never fit in
# it. Such a message now goes in more parts that fit (measurements.md, twenty-ninth pass): 460
# records in each of 16 runs, where 555-660 and, in that mode, 1,361-1,364 were read before. So
# each case runs once again, as before the twenty-eighth pass.
# usage: records_per_message.sh BENCH [PLUGIN]
# shellcheck source=tests/bench/strace_setup.sh
. "$(dirname "$0")/strace_setup.sh"
check() {  # ranks size iters steps limit before [bench options...]
  ranks=$1 size=$2 iters=$3 steps=$4 limit=$5 before=$6
  shift 6
  rm -f "$dir"/t.*
  # --iter-bytes high enough that the bench runs every one of --iters all-reduces.
  # shellcheck disable=SC2086
  strace -ff -qq -e trace=sendto -o "$dir/t" "$bench" ${plugin:+--plugin "$plugin"} \
    --nranks "$ranks" --pattern ring-allreduce --sizes "$size" --iters "$iters" --warmup 5 \
    --iter-bytes 1G --no-tcp-baseline --quiet --timeout 60 "$@" >"$dir/out" || exit 1
  grep -q "^# data verified: every received byte matched" "$dir/out" ||
    { echo "the bench did not verify its data ($ranks ranks, $size)"; exit 1; }
  python3 - "$dir" "$ranks" "$size${1:+ $*}" "$iters" "$steps" "$limit" "$before" <<'PY'
import glob, sys
d, ranks, size, iters, steps, limit, before = sys.argv[1:]
messages = (int(iters) + 5) * int(steps)  # every rank sends one message per step
records = 0
for f in glob.glob(d + "/t.*"):
    for line in open(f):
        # sendto(fd, "...", 16, MSG_NOSIGNAL|MSG_DONTWAIT, NULL, 0) = 16: one record (a
        # clear-to-send, or an ask: the header's 16 bytes of fields).
        records += line.startswith("sendto(") and ", 16, MSG_" in line and line.rstrip().endswith("= 16")
per = records / messages
print(f"{ranks} ranks, {size}: {records} records for {messages} messages, {per:.3f} per message")
if per > float(limit):
    sys.exit(f"{per:.3f} records per message (more than {limit}; {before} before): "
             "clear-to-sends that the sender's bound did not need")
PY
}
# Steps of all ranks: 3 ranks x 2(3-1), 4 ranks x 2(4-1).
check 3 1M 256 12 0.35 0.51
check 4 256K 300 24 0.13 0.19-0.26
check 4 256K 300 24 0.13 1.00 --recv-capacity 1M
check 3 64K 300 12 0.13 1.00 --recv-capacity 1M
