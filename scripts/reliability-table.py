#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Renders docs/reliability.md from test results (issue 8: every row comes from a CI test).

  scripts/reliability-table.py [--ci-log LOG]... [--rows FILE]... [-o docs/reliability.md]

--ci-log: the output of scripts/run-tests.sh (what .ci/run prints): ctest's per-test result lines
  of every lane (after "=== lane NAME: test"), the fuzz lane's "fuzz_T: N executions" lines and
  the softroce lane's output (tests/softroce/run-lane.sh: one qemu VM per topology, each running
  the conformance suite over rdma_rxe; a log of run-lane.sh alone, with "=== softroce lane:"
  lines and no "=== lane" header, is read as that lane). RELIABILITY lines in it (a failing
  netns case prints its output) are read as rows too. With several logs, the last one that has
  a softroce lane gives its rows.
--rows: reliability.jsonl files the namespace cases append to (BUILD/netns-logs/); default:
  build-ci-*/netns-logs/reliability.jsonl, the directories run-tests.sh builds in.

Rows measured by the namespace cases (tests/netns/cases.py, RELIABILITY lines) come with their
numbers; rows for the conformance, soak and fuzz tests state what the test asserts and take their
result from the ctest lines of every lane. The Soft-RoCE rows (cable cut, killed peer, GPU flush,
the whole suite with its cable check) take theirs from the gtest lines of each VM, attributed to
the VM by the host's "=== softroce lane: VM X" line (or, in a guest-only log, the guest's
"topology X" banner): pass, FAIL, FLAKY (failed, then passed when the lane reran it alone),
skipped or not run, per VM. The lane's RATIO line (bandwidth, not a reliability row) goes into
the header note. A row whose test did not run says "not run". Python 3 standard library only."""

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
    ("32 requests outstanding, completed and tested out of order (message 0 held while 1-31 "
     "complete, then 32 posted), sends and receives, every ABI v6-v12 (TCP over loopback)",
     r"TransferTest\.AnyThirtyTwoRequestsMayBeOutstandingInAnyOrder",
     "every message is accepted and arrives intact, no WARN",
     "n/a (no error expected)", "sanitizer lanes"),
    ("Peer process SIGKILLed mid-transfer (two processes over loopback, every ABI v6-v12)",
     r"PeerDeathTest\.KilledPeerFailsPendingRequestsInBoundedTime",
     "the pending receive and the sends after the kill fail (no hang) with a WARN; further sends "
     "on the dead comm fail; closeSend/closeRecv of the dead comms return within 1 s; the process "
     "connects to a new peer and moves data",
     "<= 10 s asserted (the kernel resets a dead process's sockets at once)",
     "sanitizer lanes (LeakSanitizer at exit, TSan)"),
    ("Malformed handles: 64 random, every truncation, every bit flipped, every byte replaced "
     "(~1300)",
     r"BadHandleTest\.MalformedHandlesAreRejectedOnTheFirstCall",
     "connect() fails on its first call (never a comm), each with a WARN naming the field; the "
     "listener whose handle was mangled still accepts the real one",
     "first call, < 200 ms asserted", "sanitizer lanes"),
    ("Forged nonce (a handle valid in every field, checksum included, but another nonce: a stale "
     "handle or an impostor)",
     r"BadHandleTest\.WrongNonceIsRefusedWithinTheConnectTimeout",
     "the listener refuses it; connect() fails with a WARN; nothing reaches the listener's "
     "accept(); a real connect afterwards works",
     "<= NCCL_MESH_CONNECT_TIMEOUT_MS (2 s in the suite) + 3 s asserted", "sanitizer lanes"),
    ("Connect to a listener that was closed",
     r"BadHandleTest\.ConnectToAClosedListenerFails",
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
     "cycle; RSS stays within a bound (5000 cycles release, 1000 ASan, 120 TSan)",
     "n/a", "fds, threads, RSS (release), LeakSanitizer (ASan)"),
    ("Sockets inherited by a spawned child process",
     r"DescriptorHygieneTest\.PluginSocketsDoNotLeakIntoChildProcesses",
     "none: every plugin socket and pipe is close-on-exec, so a dead peer's connections do not "
     "stay half open in a child", "n/a", "descriptors in the child (asserted 0)"),
    ("Peers without a cable between them (ring4 a-c, b-d; line5 non-neighbours)",
     r"^netns\.(ring4|line5)$",
     "relayed through the hosts between over TCP: every ordered pair moves verified data; with "
     "NCCL_MESH_RELAY=0 both ranks exit non-zero naming 'no common subnet' and the setting",
     "<= bench --timeout 15 s + 20 s asserted (relay off)", "-"),
    ("Relay host killed / a cable of a relayed route cut mid-transfer (line5 a-b-c)",
     r"^netns\.relay-fault-(kill|cut)$",
     "both ends of the relayed pair fail with a plugin error; a direct pair on other cables "
     "finishes verified",
     "<= bench --timeout 15 s + 2 s asserted (kill ~0.3 s, cut ~5 s with a 5 s user timeout)",
     "-"),
]

FUZZ_ROW = ("Fuzzed parsers: handle, hello, wire header, settings (libFuzzer, ASan+UBSan); a "
            "hostile TCP peer scripted against either end of a connection (fuzz_tcp_peer: "
            "headers, asks, credit requests, clear-to-sends, stray data, EOF over loopback TCP)",
            "no crash, no sanitizer report on any input the fuzzer generates from the corpus; "
            "a receive never reports more than its buffer")

# Soft-RoCE lane rows (tests/softroce/: the conformance suite over rdma_rxe inside qemu VMs):
# (fault, gtest name regex, what the plugin does (= what the test asserts), time to error when no
# measurement is in the log, which time the result cell shows per VM ("cut": the test's own
# "[ cut ]" line, "test": gtest's "(N ms)" of the whole test, None: none), leak check).
SR_LEAKS = "ASan+UBSan pair VM (v11; LeakSanitizer at exit)"
SOFTROCE_ROWS = [
    ("Cable cut mid-transfer over RDMA (Soft-RoCE VM: `ip link set <veth> down` on the peer's "
     "end with a 4 MiB send stream in flight; `NCCL_MESH_IB_TIMEOUT=14`, 67 ms per try)",
     r"CableCutTest\.",
     "the sends posted over the dead cable fail (no hang) with ncclRemoteError and a WARN naming "
     "the QP and the completion status (transport retry counter exceeded: the QPs' retries run "
     "out; the idle control socket does not notice a cut); closing the broken comms does not "
     "block; once the link is up again a new peer connects and moves data over it",
     "within the test's 10 s budget (3 x the QP retry time, at least 10 s)", "cut", SR_LEAKS),
    ("Peer process SIGKILLed mid-transfer over RDMA (Soft-RoCE VM, two processes, every ABI "
     "v6-v12)",
     r"PeerDeathTest\.",
     "the receive pending at the kill and the sends after it fail (no hang) with a WARN: the dead "
     "process's kernel closes the connection's TCP control socket, and after a 0.5 s grace (its "
     "last completions may still arrive) the requests fail with \"the peer closed the "
     "connection\" (or earlier with a QP's retry-exceeded completion error); further sends fail; "
     "closeSend/closeRecv return within the call bound; a new peer connects and moves data",
     "<= 10 s x MESH_CONF_TIME_SCALE asserted (not printed; the per-VM times are the whole "
     "test: transfers, kill, error, close, new peer)", "test", SR_LEAKS),
    ("GPU receive flush over RDMA (buffers registered as NCCL_PTR_CUDA, host memory standing in; "
     "Soft-RoCE VM, every ABI v6-v12)",
     r"TransferTest\.GpuReceivesAreFlushedOnRdma",
     "iflush after each non-empty receive (5 of 6 messages, 1 B to 1 MiB+3) is a real request: a "
     "1-byte RDMA READ of the buffer on a loopback QP, tested to completion; the data is intact",
     "n/a (no error expected)", None, SR_LEAKS),
    ("GPU memory the CPU must not touch (stand-in: pages registered as NCCL_PTR_CUDA, then "
     "mprotect(PROT_NONE); sends and receives, 0 B to 64 MiB around the inline limit; Soft-RoCE "
     "VM, v11, also with NCCL_MESH_TEST_HOST_AS_GPU=1)",
     r"GpuMemoryTest\.StandInMemoryCarriesEverySizeBothWaysWithoutCpuAccess",
     "every message arrives intact both ways with no CPU access by the plugin or libibverbs (an "
     "inline send of GPU memory would SIGSEGV here); every non-empty receive is flushed with a "
     "real READ; with the setting on, the device advertises NCCL_PTR_CUDA",
     "n/a (no error expected)", None, SR_LEAKS),
    ("GPU flush of a receive striped over two RDMA devices (dual VM: one rxe device per cable)",
     r"GpuMemoryTest\.FlushReadsThroughEveryDeviceThatWrote",
     "16 flushes run alone: every device that carried the receive moved >= 16 packets (one "
     "loopback READ per device per flush; rxe hw_counters sent_pkts + rcvd_pkts)",
     "n/a (no error expected)", None, SR_LEAKS),
    ("Connector calls connect() again only after 8 x the ACK timeout (the listener already "
     "called accept())",
     r"ReadyTest\.FirstMessageDoesNotWaitForRetransmissionWhenConnectorIsLate",
     "accept() returns the receive comm only after the connector's ready byte (its QPs are in "
     "RTS): the first message completes within 100 ms x MESH_CONF_TIME_SCALE of the second "
     "connect(), no clear-to-send lost to a QP in INIT",
     "n/a (no error expected)", None, SR_LEAKS),
    ("auto mode, a device advertising GPU memory (NCCL_MESH_TEST_HOST_AS_GPU=1), a peer without "
     "RDMA (NCCL_MESH_TRANSPORT=tcp)",
     r"GpuOverTcpTest\.GpuDeviceRefusesTcpConnectionWithOneClearWarn",
     "connect() fails on its first call with exactly one WARN naming the cable and the fix "
     "(RDMA at both ends, or NCCL_MESH_TRANSPORT=tcp on every rank), instead of regMr failing "
     "later with ncclInvalidArgument",
     "first call", None, SR_LEAKS),
    ("32 requests outstanding, completed and tested out of order over RDMA (message 0 held "
     "while 1-31 complete, then 32 posted), sends and receives",
     r"TransferTest\.AnyThirtyTwoRequestsMayBeOutstandingInAnyOrder",
     "every message is accepted and arrives intact, no WARN (request slots are a pool, not "
     "sequence % 32)",
     "n/a (no error expected)", None, SR_LEAKS),
]
SOFTROCE_SUITE_ROW = (
    "Whole conformance suite over RDMA, per VM topology (Soft-RoCE: dual = two cables, each "
    "connection striped over both; mesh3 = the A-B cable picked out of two per node; pair = one "
    "cable)",
    "every test passes with both ranks on rxe devices and every connection reporting the lane's "
    "transport; the cable check (`<name>-wire`): each veth end of the cable carried >= 64 MiB "
    "(the suite did not run over another path)",
    "-", SR_LEAKS)


# --- Soft-RoCE lane -------------------------------------------------------------------------
# One gtest name appears once per VM (and again when the lane reruns a failure alone), so every
# line is attributed to the VM whose output it is part of. The host prints "=== softroce lane: VM
# X" before each VM and "step vm-X" after it; the guest's banner names its topology (the ASan VM
# is a second "pair", told apart only by the host's line).

def new_softroce():
    return {"vms": [], "ratio": [], "setup": None, "total": None, "failed": False}


def new_vm(name: str, asan: bool = False) -> dict:
    return {"name": name + ("-asan" if asan else ""), "topology": name, "asan": asan,
            "banner": False, "transport": None, "step": None, "tests": {}, "running": None,
            "runs": [], "started": 0, "note": None, "filter": None, "records": {}, "cut": []}


def vm_label(vm: dict) -> str:
    label = ("ASan+UBSan " if vm["asan"] else "") + vm["topology"]
    # The lane can run over TCP (LANE_TRANSPORT=tcp): the rows must not claim RDMA then.
    if vm["transport"] and vm["transport"] != "rdma":
        label += f" over {vm['transport'].upper()}"
    return label


GTEST_RESULT = re.compile(r"\[\s*(OK|FAILED|SKIPPED)\s*\] ([^\s,]+)"
                          r"(?:, where GetParam\(\) = [^(]*?)? \((\d+) ms\)\s*$")


def parse_softroce_line(sr: dict, line: str) -> None:
    vms = sr["vms"]
    m = re.match(r"=== softroce lane: VM (\S+?)(?:,| \(|$)(.*)", line)
    if m:
        vms.append(new_vm(m.group(1), "ASan" in m.group(2)))
        return
    m = re.match(r"=== softroce lane: step (\S+): (PASS|FAIL.*?) in ([\d.]+)s", line)
    if m:
        name, verdict = m.group(1), m.group(2)
        if name == "setup":
            sr["setup"] = verdict
        elif name.startswith("vm-"):
            vm = next((v for v in reversed(vms) if "vm-" + v["name"] == name), None)
            if vm is None:  # a step that failed before its VM booted (e.g. no ASan build)
                base = name[3:]
                vm = new_vm(base[:-5], True) if base.endswith("-asan") else new_vm(base)
                vms.append(vm)
            vm["step"] = verdict
        return
    m = re.match(r"=== softroce lane summary \(.*total ([\d.]+)s\)", line)
    if m:
        sr["total"] = float(m.group(1))
        return
    m = re.match(r"=== \[guest\] kernel .*?topology (\S+?),.*?transport (\w+)", line)
    if m:
        # A guest-only log has no host lines: its banner starts the VM.
        if not vms or vms[-1]["banner"]:
            vms.append(new_vm(m.group(1)))
        vms[-1].update(banner=True, topology=m.group(1), transport=m.group(2))
        return
    m = re.match(r"RATIO (plugin_vs_ib_write_bw=.*)", line)
    if m:  # (its LANE_BW line holds the same numbers as JSON; the note needs only these)
        sr["ratio"].append((vm_label(vms[-1]) if vms else "?", m.group(1).strip()))
        return
    if not vms:
        if not re.match(r"\[ RUN |\[==========\]|=== \[guest\] (PASS|FAIL) ", line):
            return  # the host's own lines before the first VM ("[softroce hh:mm:ss] ...")
        vms.append(new_vm("?"))  # gtest output with no VM line at all
    vm = vms[-1]
    m = re.match(r"=== \[guest\] (PASS|FAIL) (\S+) \(([\d.]+)s\) ?(.*)", line)
    if m:
        vm["records"][m.group(2)] = (m.group(1), float(m.group(3)), m.group(4).strip())
        return
    m = re.match(r"\[ RUN      \] (\S+)", line)
    if m:
        vm["running"] = m.group(1)
        return
    m = GTEST_RESULT.match(line)
    if m:
        vm["tests"].setdefault(m.group(2), []).append((m.group(1), int(m.group(3)) / 1000.0))
        vm["running"] = None
        return
    m = re.match(r"\[ cut\s*\] send failed ([\d.]+) s after the cut", line)
    if m:
        vm["cut"].append(float(m.group(1)))
        return
    m = re.match(r"Note: Google Test filter = (\S+)", line)
    if m:
        vm["note"] = m.group(1)
        return
    if line.startswith("[==========] Running "):
        # Only the suite's own run has a filter worth naming; a rerun's is its failed tests.
        vm["started"] += 1
        if vm["started"] == 1:
            vm["filter"] = vm["note"]
        vm["note"] = None
        return
    # gtest's closing summary of each run (the suite, then a rerun of its failures if any)
    m = re.match(r"\[==========\] (\d+) tests? from .* ran\.", line)
    if m:
        vm["runs"].append({"ran": int(m.group(1)), "passed": 0, "failed": 0, "skipped": 0})
        return
    m = re.match(r"\[\s*(PASSED|FAILED|SKIPPED)\s*\] (\d+) tests?[.,]", line)
    if m and vm["runs"]:
        vm["runs"][-1][m.group(1).lower()] = int(m.group(2))


def read_text(path: str) -> str:
    with open(path, errors="replace") as f:
        return f.read()


def parse_ci_log(text: str):
    """ctest results per lane {lane: {test: (status, seconds)}}, fuzz lines, RELIABILITY rows,
    the softroce lane (None when the log has none)."""
    results = {lane: {} for lane in LANES}
    fuzz = []
    rows = []
    softroce = None
    lane = "release"
    for line in text.splitlines():
        m = re.match(r"=== lane (\w+)", line)
        if m:
            lane = m.group(1)
            if lane == "softroce":
                softroce = softroce or new_softroce()
                softroce["failed"] |= line.startswith("=== lane softroce FAILED")
            continue
        # run-lane.sh's own first line: its output without run-tests.sh's header is that lane.
        if line.startswith("=== softroce lane:") and lane != "softroce":
            lane = "softroce"
            softroce = softroce or new_softroce()
        if lane == "softroce":
            parse_softroce_line(softroce, line)
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
    return results, fuzz, rows, softroce


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


def fmt_range(values, digits: int = 1) -> str:
    lo, hi = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return f"{lo} s" if lo == hi else f"{lo}-{hi} s"


def versions(names) -> str:
    """'v8-v11' for the ABI versions of a parameterized test's instances ('' if it has none)."""
    vs = sorted(int(m.group(1)) for n in names for m in [re.search(r"/v(\d+)$", n)] if m)
    if not vs:
        return ""
    if vs == list(range(vs[0], vs[-1] + 1)) and len(vs) > 1:
        return f"v{vs[0]}-v{vs[-1]}"
    return ", ".join(f"v{v}" for v in vs)


def instance_status(attempts) -> str:
    """One test instance in one VM: its attempts in order (the suite's run, then a rerun)."""
    kinds = [k for k, _ in attempts]
    if kinds[-1] == "FAILED":
        return "FAIL"
    if "FAILED" in kinds:
        return "FLAKY"  # the lane reran it alone and it passed: still shown, not hidden
    return "skipped" if all(k == "SKIPPED" for k in kinds) else "pass"


def softroce_vm_result(vm: dict, pattern: str, times) -> tuple:
    """(status, cell text) of one row's tests in one VM."""
    rx = re.compile(pattern)
    hits = {t: a for t, a in vm["tests"].items() if rx.search(t)}
    label = vm_label(vm)
    if vm["running"] and rx.search(vm["running"]):
        # started and never finished: the suite crashed or the VM's time ran out
        why = f"VM step {vm['step']}" if vm["step"] else "the log ends there"
        return "FAIL", (f"FAIL {label} ({re.sub(r'^Plugin/', '', vm['running'])} started, no "
                        f"result: {why})")
    if not hits:
        return "not run", f"not run {label}"
    per = {t: instance_status(a) for t, a in hits.items()}
    order = ["FAIL", "FLAKY", "pass", "skipped"]
    status = min(per.values(), key=order.index)
    extras = []
    if len(hits) > 1 or versions(hits):
        extras.append(versions(hits) or f"{len(hits)} tests")
    for st, what in (("FAIL", "failed"), ("FLAKY", "failed, then passed alone")):
        bad = sorted(t for t, s in per.items() if s == st)
        if bad:
            extras.append(f"{versions(bad) or ', '.join(bad)} {what}")
    if status != "skipped":
        if times == "cut" and vm["cut"]:
            extras.append(f"error {fmt_range(vm['cut'], 2)} after the cut")
        elif times:
            extras.append(fmt_range([s for a in hits.values() for k, s in a if k != "SKIPPED"]))
    elif vm["topology"] == "mesh3" and "CableCut" in pattern:
        extras.append("the lane gives it no link to cut there")
    return status, f"{status} {label}" + (f" ({'; '.join(extras)})" if extras else "")


def softroce_missing(sr) -> str:
    if sr is None:
        return "not run (no Soft-RoCE lane in the CI log)"
    if sr["setup"] not in (None, "PASS"):
        return f"not run (the lane's setup step {sr['setup']})"
    if sr["failed"] and not sr["vms"]:
        return "not run (the softroce lane FAILED before its VMs ran)"
    return "not run (no VM ran)"


def softroce_row_result(sr, pattern: str, times) -> str:
    if sr is None or not sr["vms"]:
        return softroce_missing(sr)
    return "; ".join(softroce_vm_result(vm, pattern, times)[1] for vm in sr["vms"])


def softroce_suite_result(sr) -> str:
    """Per VM: the suite record's verdict, gtest's counts of its first run, the cable check."""
    if sr is None or not sr["vms"]:
        return softroce_missing(sr)
    cells = []
    for vm in sr["vms"]:
        label = vm_label(vm)
        name = next((n for n in vm["records"]
                     if n.startswith("conformance-") and not n.endswith("-wire")), None)
        if name is None:
            why = f"VM step {vm['step']}" if vm["step"] else "the log ends inside the VM"
            status = "FAIL" if vm["step"] or vm["running"] else "not run"
            cells.append(f"{status} {label} (no suite result: {why})")
            continue
        verdict, secs, detail = vm["records"][name]
        status = "pass" if verdict == "PASS" else "FAIL"
        if status == "pass" and detail.startswith("FLAKY"):
            status = "FLAKY"
        extras = []
        if vm["runs"]:
            run = vm["runs"][0]
            counts = [f"{run['passed']} passed"] + [f"{run[k]} {k}" for k in ("failed", "skipped")
                                                    if run[k]]
            extras.append(", ".join(counts) + (f", filter {vm['filter']}"
                                               if vm["filter"] else ""))
        elif "timed out" in detail:
            extras.append("timed out")
        per = {t: instance_status(a) for t, a in vm["tests"].items()}
        for st, what in (("FLAKY", "failed, then passed alone"), ("FAIL", "failed")):
            bad = sorted(re.sub(r"^Plugin/", "", t) for t, s in per.items() if s == st)
            if bad:
                extras.append(f"{what}: {', '.join(bad)}")
        extras.append(f"{secs:.0f} s")
        wire = vm["records"].get(name + "-wire")
        if wire is None:
            extras.append("no cable check")
        else:
            moved = re.sub(r"^tx on the cable:\s*|\s*\(each.*$", "", wire[2])
            extras.append(f"cable check {'pass' if wire[0] == 'PASS' else 'FAIL'} ({moved})")
        cells.append(f"{status} {label} ({'; '.join(extras)})")
    return "; ".join(cells)


def softroce_names(sr, pattern: str) -> str:
    rx = re.compile(pattern)
    names = sorted({re.sub(r"/v\d+$", "/v*", t) for vm in (sr["vms"] if sr else [])
                    for t in vm["tests"] if rx.search(t)})
    return ", ".join(names) or pattern.replace("\\", "") + "*"


def softroce_leaks(sr, leaks: str, pattern: str = "") -> str:
    rx = re.compile(pattern)
    if sr and any(vm["asan"] and any(rx.search(t) for t in vm["tests"]) for vm in sr["vms"]):
        return leaks
    return "not checked (no ASan+UBSan VM ran: the lane needs LANE_ASAN_BUILD)"


def softroce_tte(sr, default: str, times) -> str:
    cuts = [c for vm in (sr["vms"] if sr else []) for c in vm["cut"]]
    if times == "cut" and cuts:
        return (f"{fmt_range(cuts, 2)} from the cut to the send's error (measured by the "
                f"test); {default}")
    return default


def softroce_note(sr) -> str:
    """The header's sentence on the lane: its VMs and its bandwidth ratio (not a row)."""
    if sr is None:
        return "The CI log has no Soft-RoCE lane: its rows say \"not run\"."
    if not sr["vms"]:
        return "The Soft-RoCE lane ran no VM: its rows say \"not run\"."
    transports = sorted({vm["transport"] for vm in sr["vms"] if vm["transport"]})
    details = ([f"transport {', '.join(transports)}"] if transports else []) + (
        [f"{sr['total']:.0f} s in all"] if sr["total"] else [])
    text = (f"The Soft-RoCE lane ran the VMs {', '.join(vm_label(vm) for vm in sr['vms'])}"
            + (f" ({'; '.join(details)})" if details else "") + ".")
    for label, ratio in sr["ratio"]:
        # Bandwidth is no reliability row; the ratio says whether the RDMA path costs much more
        # than perftest's (tests/softroce/README.md), so it is kept next to the rows' source.
        text += f" Its bandwidth step ({label}): RATIO {ratio}."
    return text


def fmt_tte(v) -> str:
    return "-" if v is None else f"{v:.2f} s"


def cell(s) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def render(results, fuzz, rows, sources, note, softroce=None) -> str:
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
      + (f" {note}" if note else "") + f" {softroce_note(softroce)}")
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
      "per CI lane that ran the test; for the Soft-RoCE rows per VM of that lane (the "
      "topology, or the ASan+UBSan pair VM that runs the v11 tests with the sanitizer build); "
      "FLAKY: failed, then passed when the lane reran it alone (`LANE_RERUN_FAILED`), shown so "
      "that a regression hiding behind the rerun stays visible.")
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
    for fault, pattern, behaviour, tte, times, leaks in SOFTROCE_ROWS:
        res = softroce_row_result(softroce, pattern, times)
        w(f"| {cell(fault)} | {cell(behaviour)} | {cell(softroce_tte(softroce, tte, times))} | "
          f"{cell(softroce_leaks(softroce, leaks, pattern))} | {cell(res)} | "
          f"`{cell(softroce_names(softroce, pattern))}` (Soft-RoCE) |")
    fault, behaviour, tte, leaks = SOFTROCE_SUITE_ROW
    w(f"| {cell(fault)} | {cell(behaviour)} | {tte} | {cell(softroce_leaks(softroce, leaks))} | "
      f"{cell(softroce_suite_result(softroce))} | `conformance-<topology>`, "
      f"`conformance-<topology>-wire` (`tests/softroce/guest/lane.sh`) |")
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
    w("The Soft-RoCE rows come from the conformance suite run over RDMA inside qemu VMs "
      "(`tests/softroce/`): rdma_rxe devices on veth cables, both ranks in one VM. Cable cut: "
      "the suite's `CableCutTest` takes the peer's end of a cable down (`ip link set ... down`, "
      "`MESH_CONFORMANCE_CUT_LINK`: sr1b in dual, sr0b in pair; mesh3 gives it none, so it "
      "skips there) with `NCCL_MESH_IB_TIMEOUT=14` so that the QP retries run out in under a "
      "second instead of minutes, then up again. Killed peer: SIGKILL of the suite's peer "
      "process. The ASan+UBSan pair VM runs the v11 tests with the sanitizer build (the host "
      "has no RDMA device, so the ASan and TSan lanes cover TCP only).")
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
    softroce = None
    for path in a.ci_log:
        r, f, rr, sr = parse_ci_log(read_text(path))
        for lane in LANES:
            results[lane].update(r[lane])
        fuzz += f
        rows += rr
        # Its VMs are one run's; merging two runs would mix their tests, so the last log wins.
        softroce = sr or softroce
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
    if not rows and not any(results.values()) and softroce is None:
        print("reliability-table: no input (give --ci-log and/or --rows)", file=sys.stderr)
        return 1
    text = render(results, fuzz, rows, sources, a.note, softroce)
    with open(a.output, "w") as f:
        f.write(text)
    print(f"wrote {a.output}: {text.count(chr(10) + '| ') - 2} table rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
