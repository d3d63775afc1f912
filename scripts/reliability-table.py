#!/usr/bin/env python3
"""Renders docs/reliability.md from test results (issue 8: every row comes from a CI test).

  scripts/reliability-table.py [--ci-log LOG]... [--rows FILE]... [-o docs/reliability.md]

--ci-log: the output of scripts/run-tests.sh (what .ci/run prints): ctest's per-test result lines
  of every lane (after "=== lane NAME: test") and the fuzz lane's "fuzz_T: N executions" lines.
  RELIABILITY lines in it (a failing netns case prints its output) are read as rows too.
--rows: reliability.jsonl files the namespace cases append to (BUILD/netns-logs/); default:
  build-ci-*/netns-logs/reliability.jsonl, the directories run-tests.sh builds in.

Rows measured by the namespace cases (tests/netns/cases.py, RELIABILITY lines) come with their
numbers; rows for the conformance, soak and fuzz tests state what the test asserts and take their
result from the ctest lines of every lane. A row whose test did not run says "not run". Python 3
standard library only."""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LANES = ("release", "asan", "tsan")
LANE_NAMES = {"release": "release", "asan": "ASan+UBSan", "tsan": "TSan"}

# Tests that are not namespace cases: (fault or bad input, ctest name regex, what the plugin does
# (= what the test asserts), time to error, leak check). Results come from the ctest lines.
CTEST_ROWS = [
    ("Peer process SIGKILLed mid-transfer (two processes over loopback, every ABI v8-v11)",
     r"PeerDeathTest\.KilledPeerFailsPendingRequestsInBoundedTime",
     "the pending receive and the sends after the kill fail (no hang) with a WARN; further sends "
     "on the dead comm fail; closeSend/closeRecv of the dead comms return within 1 s; the process "
     "connects to a new peer and moves data",
     "<= 10 s asserted (the kernel resets a dead process's sockets at once)",
     "sanitizer lanes (LeakSanitizer at exit, TSan)"),
    ("Malformed handles: 64 random, every truncation, every bit flipped, every byte replaced "
     "(~1300)",
     r"BadInputTest\.MalformedHandlesAreRejectedOnTheFirstCall",
     "connect() fails on its first call (never a comm), each with a WARN naming the field; the "
     "listener whose handle was mangled still accepts the real one",
     "first call, < 200 ms asserted", "sanitizer lanes"),
    ("Forged nonce (a handle valid in every field, checksum included, but another nonce: a stale "
     "handle or an impostor)",
     r"BadInputTest\.WrongNonceIsRefusedWithinTheConnectTimeout",
     "the listener refuses it; connect() fails with a WARN; nothing reaches the listener's "
     "accept(); a real connect afterwards works",
     "<= NCCL_MESH_CONNECT_TIMEOUT_MS (2 s in the suite) + 3 s asserted", "sanitizer lanes"),
    ("Connect to a listener that was closed",
     r"BadInputTest\.ConnectToAClosedListenerFails",
     "connect() fails with a WARN; other connections keep working",
     "<= NCCL_MESH_CONNECT_TIMEOUT_MS + 3 s asserted", "sanitizer lanes"),
    ("Garbage, resets, half-open and partial-handshake clients on the handshake port (no traffic "
     "running)",
     r"BadInputTest\.GarbageAndHalfOpenConnectionsDoNotDisturbTheListener",
     "none becomes a comm or an error at accept(); a real connect succeeds next to them; after "
     "closeListen every raw connection is closed by the plugin",
     "n/a (no error expected)", "every raw socket closed (asserted)"),
    ("Message larger than the posted receive buffer",
     r"TransferTest\.MessageLargerThanReceiveBufferFailsTheReceiver",
     "the receiver's irecv/test fails with a WARN on both sides, no byte lands past the buffer; "
     "both processes keep working on new connections",
     "<= 10 s asserted", "sanitizer lanes"),
    ("Receiver that posts its irecv seconds late (live but slow peer; user timeout 1.5 s)",
     r"LateReceiverTest\.SendWaitsForAReceiverThatPostsLate",
     "no error: the send waits (clear-to-send keeps the bytes out of a zero TCP window, which "
     "Linux would abort after TCP_USER_TIMEOUT) and completes once the receive is posted",
     "n/a (no error expected)", "sanitizer lanes"),
    ("Repeated connect/transfer/close cycles",
     r"ConnectionTest\.ClosedConnectionsReleaseTheirSockets",
     "after a warm-up cycle, 4 more cycles leave exactly the same number of open descriptors",
     "n/a", "fds back to the baseline (asserted)"),
    ("Soak: listen/connect/accept/transfer/close for thousands of cycles in one process",
     r"^soak$",
     "after the warm-up, open descriptors and threads return to the same value after every "
     "cycle; RSS stays within a bound (10000 cycles release, 1000 ASan, 300 TSan)",
     "n/a", "fds, threads, RSS (release), LeakSanitizer (ASan)"),
    ("Sockets inherited by a spawned child process",
     r"DescriptorHygieneTest\.PluginSocketsDoNotLeakIntoChildProcesses",
     "none: every plugin socket and pipe is close-on-exec, so a dead peer's connections do not "
     "stay half open in a child", "n/a", "descriptors in the child (asserted 0)"),
    ("Peers without a cable between them (ring4 a-c, b-d; line5 non-neighbours)",
     r"^netns\.(ring4|line5)$",
     "every rank exits non-zero, one reports the plugin's error naming 'no common subnet' and the "
     "relay setting; nothing is sent on any cable",
     "<= bench --timeout 15 s + 20 s asserted", "-"),
]

FUZZ_ROW = ("Fuzzed parsers: handle, hello, wire header, settings (libFuzzer, ASan+UBSan)",
            "no crash, no sanitizer report on any input the fuzzer generates from the corpus")


def read_text(path: str) -> str:
    with open(path, errors="replace") as f:
        return f.read()


def parse_ci_log(text: str):
    """ctest results per lane {lane: {test: (status, seconds)}}, fuzz lines, RELIABILITY rows."""
    results = {lane: {} for lane in LANES}
    fuzz = []
    rows = []
    lane = "release"
    for line in text.splitlines():
        m = re.match(r"=== lane (\w+)", line)
        if m:
            lane = m.group(1)
            continue
        # "12/345 Test #12: Plugin/X.Y/v8  # GetParam() = 8 ....   Passed    0.42 sec"
        m = re.search(r"Test\s+#\d+: (\S+).*? \.{3,}\s*(?:\*+)?([A-Za-z][\w ]*?)\s+([\d.]+) sec",
                      line)
        if m and lane in results:
            results[lane][m.group(1)] = (m.group(2).strip(), float(m.group(3)))
            continue
        m = re.match(r"(fuzz_\w+): (\S+) executions in (\d+)s, no crash", line)
        if m:
            fuzz.append((m.group(1), m.group(2), int(m.group(3)), "pass"))
            continue
        m = re.match(r"(fuzz_\w+): CRASH", line)
        if m:
            fuzz.append((m.group(1), "?", 0, "FAIL"))
            continue
        i = line.find("RELIABILITY {")
        if i >= 0:
            try:
                row = json.loads(line[i + len("RELIABILITY "):])
            except json.JSONDecodeError:
                continue
            row.setdefault("lane", lane)
            rows.append(row)
    return results, fuzz, rows


def ctest_result(results, pattern: str):
    """'pass (release, ASan+UBSan)' style summary over the lanes that ran a matching test."""
    rx = re.compile(pattern)
    per_lane = []
    for lane in LANES:
        hits = {t: r for t, r in results[lane].items() if rx.search(t)}
        if not hits:
            continue
        bad = [t for t, (status, _) in hits.items() if status != "Passed"]
        secs = sum(s for _, s in hits.values())
        per_lane.append((lane, "FAIL" if bad else "pass", len(hits), secs))
    if not per_lane:
        return "not run", ""
    text = "; ".join(f"{status} {LANE_NAMES[lane]}" + (f" ({n} tests)" if n > 1 else "")
                     for lane, status, n, _ in per_lane)
    # Every ABI version's instance as one name ("Plugin/X.Y/v*").
    names = ", ".join(sorted({re.sub(r"/v\d+$", "/v*", t)
                              for lane in LANES for t in results[lane] if rx.search(t)}))
    return text, names


def fmt_tte(v) -> str:
    return "-" if v is None else f"{v:.2f} s"


def cell(s) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def render(results, fuzz, rows, sources, note) -> str:
    # Namespace rows: per lane and test only the newest run's rows (a rerun supersedes every
    # row of the earlier run, also faults it no longer produces); numbers from the release lane.
    newest = {}
    for r in rows:
        k = (r.get("lane"), r.get("test"))
        newest[k] = max(newest.get(k, ""), r.get("run", r.get("when", "")))
    rows = [r for r in rows
            if r.get("run", r.get("when", "")) == newest[(r.get("lane"), r.get("test"))]]
    latest = {}
    for r in rows:
        key = (r.get("test", "?"), r.get("fault", "?"))
        lane = {"address": "asan", "thread": "tsan"}.get(r.get("lane"), r.get("lane", "release"))
        prev = latest.setdefault(key, {}).get(lane)
        if prev is None or r.get("when", "") >= prev.get("when", ""):
            latest[key][lane] = r
    out = []
    w = out.append
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    w("# Reliability and security")
    w("")
    w("What the plugin does when a peer, a cable or the network misbehaves, and when it is fed "
      "bad input. Every row below is produced by a test that CI runs (`scripts/run-tests.sh`); "
      "this file is generated from their output by `scripts/reliability-table.py` (do not edit "
      "it by hand: change the test or the script, rerun CI, regenerate).")
    w("")
    w(f"Generated {now} from: {', '.join(sources) or '(no input)'}."
      + (f" {note}" if note else ""))
    w("")
    w("## Timeouts (defaults)")
    w("")
    w("| setting | default | what runs out |")
    w("|---|---|---|")
    w("| `NCCL_MESH_CONNECT_TIMEOUT_MS` | 30000 | `connect()` retries a peer's handshake service "
      "(refused, unreachable, no reply) until then, then fails with one WARN naming the peer, "
      "the local address and the last error. Also the lifetime of an unauthenticated socket on "
      "the handshake port. |")
    w("| `NCCL_MESH_TCP_USER_TIMEOUT_MS` | 20000 | `TCP_USER_TIMEOUT` and the keepalive budget of "
      "every connection socket: sent data unacknowledged this long (cut cable, dead host) or a "
      "silent peer on an idle socket becomes an error on the connection; `test()` returns it "
      "with one WARN per comm. 0 = kernel defaults (many minutes). |")
    w("| `NCCL_MESH_MAX_PENDING_HANDSHAKES` | 256 | unauthenticated sockets held at once per "
      "process, a quarter of them per source address; past a cap the oldest silent one is "
      "answered \"busy\" and closed to admit the newcomer. |")
    w("")
    w("The namespace cases shorten both timeouts to 5000 ms (so CI does not wait 20-30 s per "
      "fault); the time to error follows the setting: about the configured value plus a fraction "
      "of a second. A posted request is never timed out by the plugin itself: NCCL legitimately "
      "leaves receives pending for minutes while the peer is healthy, so a peer that is alive "
      "but does not progress (a stopped process, a rank busy elsewhere) is left to the caller's "
      "own timeout (NCCL's watchdog; the bench's `--timeout`).")
    w("")
    w("## Trust model")
    w("")
    w("The handshake port accepts a connection only if it presents the 16-byte random nonce of an "
      "open listen comm, which a peer can only know from the handle NCCL ships through its "
      "bootstrap (compared in constant time). The service listens only on the interfaces the "
      "plugin uses, caps pending unauthenticated sockets and their lifetime, and validates every "
      "field of every handle, hello and message header before use. Data after the handshake is "
      "not authenticated or encrypted: run it on cables you trust, as with NCCL's own "
      "transports.")
    w("")
    w("## Faults and bad input")
    w("")
    w("Time to error: from the fault to the error reaching the caller (the bench process "
      "exiting), measured; \"-\" where no error is the right outcome. Leaks: after every fault "
      "the bench closes every comm and finalizes, as NCCL's abort does, and prints how long that "
      "took and its open descriptors and threads before the plugin's init and after the close "
      "(`CLOSE rank R:` line; LeakSanitizer's check runs there too in the ASan lane). Result: "
      "per CI lane that ran the test.")
    w("")
    w("| fault or bad input | what the plugin did | time to error | leaks | result | test |")
    w("|---|---|---|---|---|---|")
    order = ["netns.fault-setup", "netns.fault-kill", "netns.fault-kill-rendezvous",
             "netns.fault-cut", "netns.fault-cut-restore", "netns.fault-lossy",
             "netns.fault-stall", "netns.fault-flood"]
    keys = sorted(latest, key=lambda k: (order.index(k[0]) if k[0] in order else 99,
                                         min(r.get("when", "") for r in latest[k].values())))
    for key in keys:
        by_lane = latest[key]
        main = by_lane.get("release") or next(iter(by_lane.values()))
        res = "; ".join(f"{by_lane[l]['result']} {LANE_NAMES[l]}"
                        + (f" ({fmt_tte(by_lane[l].get('time_to_error_s'))})"
                           if l != "release" and by_lane[l].get("time_to_error_s") is not None
                           else "")
                        for l in LANES if l in by_lane)
        settings = f" ({main['settings']})" if main.get("settings") else ""
        w(f"| {cell(main['fault'])}{cell(settings)} | {cell(main['behaviour'])} | "
          f"{fmt_tte(main.get('time_to_error_s'))} | {cell(main['leaks'])} | {cell(res)} | "
          f"`{key[0]}` |")
    for fault, pattern, behaviour, tte, leaks in CTEST_ROWS:
        res, name = ctest_result(results, pattern)
        w(f"| {cell(fault)} | {cell(behaviour)} | {cell(tte)} | {cell(leaks)} | {cell(res)} | "
          f"`{cell(name or pattern)}` |")
    if fuzz:
        execs = ", ".join(f"{t} {n} executions/{s} s" for t, n, s, _ in fuzz)
        res = "FAIL" if any(st != "pass" for *_, st in fuzz) else "pass"
        w(f"| {cell(FUZZ_ROW[0])} | {cell(FUZZ_ROW[1])}: {cell(execs)} | - | ASan (LeakSanitizer) "
          f"| {res} fuzz | `scripts/run-fuzz.sh` |")
    else:
        w(f"| {cell(FUZZ_ROW[0])} | {cell(FUZZ_ROW[1])} | - | ASan | not run | "
          f"`scripts/run-fuzz.sh` |")
    w("")
    w("## How the faults are made")
    w("")
    w("The namespace cases (`tests/netns/cases.py`, one ctest each, label `netns`) run "
      "`nccl-mesh-bench --duration` (a verified stream in both directions) between hosts that are "
      "network namespaces joined by veth cables (`tests/netns/README.md`):")
    w("")
    w("* cable cut: `ip link set cb down` in one host (the veth loses carrier on both ends); "
      "restored with `up`.")
    w("* killed peer: SIGKILL of a bench rank; stalled peer: SIGSTOP (its kernel keeps the TCP "
      "connections alive), SIGCONT to resume.")
    w("* connection setup: `--connect-delay` holds each rank between the handle exchange and "
      "`connect()`; the test kills or stops the peer in that window.")
    w("* packet loss: nftables, `numgen random mod 100 < N drop` in a `prerouting` chain on the "
      "receiving end of the cable (both ends), so the sender really loses the packet; a drop in "
      "the sender's `output` hook would be a local error that TCP sees at once. Why not "
      "`tc netem`: the development and CI kernel is built without `sch_netem` "
      "(`CONFIG_NET_SCH_NETEM` is not set, no module); its qdiscs are `tbf`, `htb`, `pfifo` and "
      "`ingress`.")
    w("* slow link and delay: `tc qdisc add dev X root tbf rate 200mbit burst 64kb latency 20ms` "
      "on both ends: a bandwidth cap whose queue adds delay under load (the RTT measured with "
      "`ping` during the stream is in the row). Without netem there is no fixed propagation "
      "delay; this is queueing delay, which is what a slow, busy link adds.")
    w("* handshake flood: `tests/netns/flood.py` in a third host holds half-open sockets (a few "
      "bytes of a hello, then silence) and opens garbage connections (64 random bytes) against "
      "the handshake ports (fixed with `NCCL_MESH_HANDSHAKE_PORT`) while the stream runs; "
      "throughput is read from the cable's byte counters over 5 s before and during the flood.")
    w("")
    w("## Known limitations (measured by the rows above)")
    w("")
    w("* A peer that is alive at the TCP level but makes no progress (SIGSTOP, a hung process "
      "whose kernel still ACKs) becomes an error only when its receive window stays shut on "
      "bytes it asked for (clear-to-send) for `NCCL_MESH_TCP_USER_TIMEOUT_MS`: Linux then aborts "
      "the connection. When its socket buffers took everything in flight (large `tcp_rmem`), "
      "nothing is outstanding and the plugin waits, as NCCL expects of a posted request; the "
      "caller's timeout (NCCL's watchdog) decides. The stall rows show both.")
    w("* The handshake service's WARNs about other hosts' sockets (refused, expired, evicted) "
      "are rate-limited per cause: the first in full, then one summary WARN per 10 s window "
      "with the count, the number of sources and the last one.")
    w("* Past `NCCL_MESH_MAX_PENDING_HANDSHAKES` (or a source's quarter of it) the listener "
      "closes the oldest silent socket to admit a newcomer, and a connector answered \"busy\" "
      "retries until its connect timeout. A flood from many source addresses that opens "
      "sockets faster than the cap every few milliseconds can still evict a real connector's "
      "socket before its hello is read; the connector then retries, and fails with the "
      "\"saturated\" WARN only if that lasts the whole connect timeout. The cables are trusted "
      "(see the trust model).")
    w("* Cuts: a cable that comes back within about half of `NCCL_MESH_TCP_USER_TIMEOUT_MS` "
      "keeps the connection (the restore row: 40%); longer cuts may fail although the cable is "
      "back before the timeout, because TCP's retransmission backoff can put the next "
      "retransmission after the deadline (3.5 s of 5 s failed in a trial, 3.0 s survived).")
    w("")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ci-log", action="append", default=[])
    ap.add_argument("--rows", action="append")
    ap.add_argument("--note", default="", help="a sentence on where the input came from")
    ap.add_argument("-o", "--output", default=os.path.join(ROOT, "docs", "reliability.md"))
    a = ap.parse_args()
    results = {lane: {} for lane in LANES}
    fuzz, rows, sources = [], [], []
    for path in a.ci_log:
        r, f, rr = parse_ci_log(read_text(path))
        for lane in LANES:
            results[lane].update(r[lane])
        fuzz += f
        rows += rr
        sources.append(f"`{os.path.basename(path)}` (CI log)")
    row_files = a.rows if a.rows is not None else sorted(
        glob.glob(os.path.join(ROOT, "build-ci-*", "netns-logs", "reliability.jsonl")))
    for path in row_files:
        n = 0
        for line in read_text(path).splitlines():
            line = line.strip()
            if line:
                try:
                    rows.append(json.loads(line))
                    n += 1
                except json.JSONDecodeError:
                    pass
        sources.append(f"`{os.path.relpath(path, ROOT)}` ({n} rows)")
    if not rows and not any(results.values()):
        print("reliability-table: no input (give --ci-log and/or --rows)", file=sys.stderr)
        return 1
    text = render(results, fuzz, rows, sources, a.note)
    with open(a.output, "w") as f:
        f.write(text)
    print(f"wrote {a.output}: {text.count(chr(10) + '| ') - 2} table rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
