#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The TCP data path's syscalls per message, counted by strace in a 3-rank ring all-reduce of
# 64 KiB (21.8 KiB steps, each one message that goes before its clear-to-send) on one core:
# every recv() that finds nothing is CPU that NCCL's proxy thread takes from the copies. Before
# the sender read the control socket only when a message needs its records, and irecv() stopped
# looking for a header that test() looks for right after, there were 6.4 syscalls and 2.8
# failed recv()s per message; then about 4.4 and 0.8-1.0 (measurements.md, thirteenth pass).
# The receiver read its control socket for asks on every 8th irecv() and test() although no
# message of this ring asks: 0.30 reads per message, all failed; it now reads them only on
# every 8th test() that finds a header missing (fourteenth pass).
# A second run, at 256 KiB (87 KiB steps, each on window room), counts what the eager-send check
# and the credits cost: the window check read the socket's queue (SIOCOUTQ) as well as TCP_INFO
# for every ask, 0.25-0.44 ioctl() per message; a calibrated window edge reads TCP_INFO alone
# (peer_window.h), so none are left. And a sender whose message would ask for credit read its
# control socket first although no clear-to-send could be on its way: 0.23-0.24 failed reads per
# message here (0.34-0.35 with sendto traced too); with those reads only where a record was asked
# for, 0.04-0.05 (0.17-0.18) (measurements.md, sixteenth pass).
# And a message larger than the receiver's 4 KiB stage takes two successful reads, the stage's
# with the header and the rest of the payload: 2.0-2.1 per message here, as NCCL's Socket
# transport (its size, then its bytes). From the nineteenth pass of measurements.md the receiver
# read the header with a guessed payload length in one recvmsg() (1.0-1.1), which wrote the next
# message's bytes past a shorter message's end in NCCL's buffer (twenty-eighth pass): no more
# than two, and a read-ahead of what follows a payload into the stage.
# usage: syscalls_per_message.sh BENCH [PLUGIN]
# shellcheck source=tests/bench/strace_setup.sh
. "$(dirname "$0")/strace_setup.sh"
taskset -c 0 true 2>/dev/null && pin="taskset -c 0" || pin=""
# shellcheck disable=SC2086
strace -ff -qq -e trace=recvfrom,recvmsg,sendmsg,getsockopt,ioctl -o "$dir/t" \
  $pin "$bench" ${plugin:+--plugin "$plugin"} --nranks 3 --pattern ring-allreduce --sizes 64K \
  --iters 300 --warmup 5 --no-tcp-baseline --quiet --timeout 60 >"$dir/out"
grep -q "^# data verified: every received byte matched" "$dir/out"
python3 - "$dir" <<'PY'
import glob, re, sys
calls = failed_recv = sends = ask_reads = data_reads = 0
for f in glob.glob(sys.argv[1] + "/t.*"):
    for line in open(f):
        m = re.match(r"(\w+)\(\d+, .*\) += (-?\d+)", line)
        if not m:
            continue
        calls += 1
        sends += m.group(1) == "sendmsg"  # header and payload together
        read = m.group(1) in ("recvfrom", "recvmsg")
        failed_recv += read and int(m.group(2)) < 0
        # The receiver's reads of its control socket: a buffer of 2 x 32 ask records of 16
        # bytes (tcp_connection.h ask_in_); clear-to-sends are read into 32 x 16, data into 4 KiB
        # stages or message buffers of 21.8 KiB here, or by recvmsg() with the header.
        control = ", 1024, " in line or ", 512, " in line
        ask_reads += m.group(1) == "recvfrom" and ", 1024, " in line
        data_reads += read and not control and int(m.group(2)) > 0
# 305 all-reduces x 3 ranks x 4 steps, one message each; a send the socket took only in part
# adds a sendmsg() for the rest.
messages = 305 * 12
if sends < messages:
    sys.exit(f"{sends} sendmsg() calls traced for {messages} messages: the trace missed traffic")
per, fail, asks = calls / messages, failed_recv / messages, ask_reads / messages
reads = data_reads / messages
print(f"{messages} messages, {sends} sendmsg(): {per:.2f} data-path syscalls, {fail:.2f} "
      f"failed recv(), {reads:.2f} successful data reads and {asks:.3f} reads for asks per "
      f"message")
# Two reads per message when its bytes have all arrived (the header's, then the payload's); a
# part that arrives in pieces (the other core still sending) takes more.
if reads > 2.5:
    sys.exit(f"{reads:.2f} successful data reads per message (more than 2.5): a payload is read in "
             "pieces (2.0-2.1 expected: the header with the stage, then the rest)")
# Between before (6.2-6.4 and 2.6-2.8, also with the other core busy) and now (4.4-5.1 and
# 0.7-1.5): a failed recv() more per message than now is what the change took away.
if per > 5.6 or fail > 1.8:
    sys.exit("more than 5.6 syscalls or 1.8 failed recv() per message (6.4 and 2.8 before the "
             "sender read clear-to-sends only when needed)")
# No message of this ring asks for its clear-to-send: reads for asks come only from header
# misses now (0.045 per message, 0.10-0.11 with the other core busy), 0.30-0.37 before.
if asks > 0.2:
    sys.exit(f"{asks:.3f} reads of the receiver's control socket for asks per message (more "
             "than 0.2): it is read where no ask can be waiting")
PY
# shellcheck disable=SC2086
strace -ff -qq -e trace=recvfrom,sendmsg,ioctl -o "$dir/w" \
  $pin "$bench" ${plugin:+--plugin "$plugin"} --nranks 3 --pattern ring-allreduce --sizes 256K \
  --iters 300 --warmup 5 --no-tcp-baseline --quiet --timeout 60 >"$dir/out"
grep -q "^# data verified: every received byte matched" "$dir/out"
python3 - "$dir" <<'PY'
import glob, re, sys
sends = window_queue = failed_cts = 0
for f in glob.glob(sys.argv[1] + "/w.*"):
    for line in open(f):
        m = re.match(r"(\w+)\(\d+, (.*)\) += (-?\d+)", line)
        if not m:
            continue
        sends += m.group(1) == "sendmsg"
        window_queue += m.group(1) == "ioctl" and "OUTQ" in m.group(2)
        # The sender reads clear-to-sends into 32 x 16 bytes (tcp_connection.h cts_in_).
        failed_cts += m.group(1) == "recvfrom" and ", 512, " in line and int(m.group(3)) < 0
messages = 305 * 12
if sends < messages:
    sys.exit(f"{sends} sendmsg() calls traced for {messages} messages: the trace missed traffic")
queue, cts = window_queue / messages, failed_cts / messages
print(f"256 KiB: {messages} messages, {queue:.3f} SIOCOUTQ and {cts:.3f} failed reads of the "
      f"sender's control socket per message")
if queue > 0.05:
    sys.exit(f"{queue:.3f} SIOCOUTQ per message: the window check still reads the socket's queue "
             "(0.25-0.44 before the window edge learnt its offset)")
if cts > 0.2:
    sys.exit(f"{cts:.3f} failed reads of the sender's control socket per message: it reads for "
             "clear-to-sends nobody asked for (0.23-0.24 before, 0.04-0.05 after)")
PY
