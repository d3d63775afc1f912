#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Unit test of scripts/reliability-table.py's CI log parsing, the Soft-RoCE lane above all: which
VM a gtest line belongs to, pass / FAIL / FLAKY / skipped / not run per VM, and logs with and
without the lane. The logs are small hand-made excerpts in the format tests/softroce/run-lane.sh
and tests/softroce/guest/lane.sh print. Python 3 standard library only:

  python3 tests/docs/test_reliability_table.py
"""

import importlib.util
import os
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
    "reliability_table", os.path.join(ROOT, "scripts", "reliability-table.py"))
rt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rt)

CUT = "Plugin/CableCutTest.PendingRequestsFailWithTheTransportErrorAndNewConnectionsWorkAfter"
DEATH = "Plugin/PeerDeathTest.KilledPeerFailsPendingRequestsInBoundedTime"
FLUSH = "Plugin/TransferTest.GpuReceivesAreFlushedOnRdma"
CUT_RX, DEATH_RX, FLUSH_RX = (row[1] for row in rt.SOFTROCE_ROWS[:3])


def guest(topo, body, verdict="PASS", secs="100.0", detail="[ PASSED ] 3 tests.", wire="PASS"):
    """One VM's guest output: banner, the suite's gtest lines, the records."""
    return (f"=== [guest] kernel 6.1.0-56-amd64, 2 vCPUs, topology {topo}, veth MTU 9000, "
            f"transport rdma, time scale 10\n"
            f"=== [guest] conformance-{topo}: mesh_conformance_test, rank 0 ...\n"
            f"{body}"
            f"=== [guest] {verdict} conformance-{topo} ({secs}s) {detail}\n"
            f"=== [guest] {wire} conformance-{topo}-wire (0.0s) tx on the cable: a:900MiB "
            f"b:901MiB (each >= 64 MiB)\n")


def gtest(*results, summary="[  PASSED  ] 3 tests.\n", note=None):
    """A suite run: (status, name, ms) results, then gtest's closing summary."""
    out = f"Note: Google Test filter = {note}\n" if note else ""
    out += f"[==========] Running {len(results)} tests from 2 test suites.\n"
    for status, name, ms in results:
        out += f"[ RUN      ] {name}\n"
        if status == "CUT":
            out += "[ cut      ] send failed 0.56 s after the cut with ncclRemoteError\n"
            status = "OK"
        tag = {"OK": "       OK ", "FAILED": "  FAILED  ", "SKIPPED": "  SKIPPED "}[status]
        param = f", where GetParam() = {name[-2:].lstrip('v')}" if status == "FAILED" else ""
        out += f"[{tag}] {name}{param} ({ms} ms)\n"
    out += f"[==========] {len(results)} tests from 2 test suites ran. (9999 ms total)\n"
    return out + summary


ALL_PASS = gtest(("OK", f"{DEATH}/v10", 6958), ("CUT", f"{CUT}/v11", 13773),
                 ("OK", f"{FLUSH}/v11", 948))


def host_vm(name, body, step="PASS", asan=False):
    what = "ASan+UBSan build (/b), v11 tests" if asan else "(transport rdma, veth MTU 9000)"
    vm = f"{name}, {what}" if asan else f"{name} {what}"
    return (f"=== softroce lane: VM {vm}\n[softroce 01:20:19] booting ...\n{body}"
            f"=== [guest] PASS\n=== softroce lane: step vm-{name}{'-asan' if asan else ''}: "
            f"{step} in 195.1s\n")


LANE = ("=== softroce lane: setup (packages, kernel, initramfs; cached in /x)\n"
        "[softroce 01:20:15] setup done in 2.5s\n"
        "=== softroce lane: step setup: PASS in 2.6s\n"
        + host_vm("dual", guest("dual", ALL_PASS)
                  + "RATIO plugin_vs_ib_write_bw=1.188 (best of 3 each)\n"
                  + 'LANE_BW {"ratio":1.188}\n')
        + host_vm("mesh3", guest("mesh3", gtest(
            ("OK", f"{DEATH}/v10", 7000), ("SKIPPED", f"{CUT}/v11", 1197),
            ("OK", f"{FLUSH}/v11", 900),
            summary="[  PASSED  ] 2 tests.\n[  SKIPPED ] 1 test, listed below:\n"
                    f"[  SKIPPED ] {CUT}/v11\n"), detail="[ PASSED ] 2 tests."))
        + host_vm("pair", guest("pair", gtest(
            ("OK", f"{DEATH}/v11", 15670), ("CUT", f"{CUT}/v11", 18304),
            ("OK", f"{FLUSH}/v11", 3179), note="*/v11")), asan=True)
        + "=== softroce lane summary (transport rdma, total 549.6s)\n")


def parse(text):
    return rt.parse_ci_log(text)


def vm_named(sr, name):
    return next(vm for vm in sr["vms"] if vm["name"] == name)


class SoftRoceLane(unittest.TestCase):
    def test_lane_alone_is_read_as_the_softroce_lane(self):
        results, _, _, sr = parse(LANE)
        self.assertFalse(any(results.values()))
        self.assertEqual([vm["name"] for vm in sr["vms"]], ["dual", "mesh3", "pair-asan"])
        self.assertEqual(sr["ratio"], [("dual", "plugin_vs_ib_write_bw=1.188 (best of 3 each)")])

    def test_gtest_lines_are_attributed_to_their_vm(self):
        sr = parse(LANE)[3]
        self.assertEqual(vm_named(sr, "dual")["tests"][f"{DEATH}/v10"], [("OK", 6.958)])
        self.assertEqual(vm_named(sr, "mesh3")["tests"][f"{DEATH}/v10"], [("OK", 7.0)])
        asan = vm_named(sr, "pair-asan")
        self.assertTrue(asan["asan"])
        self.assertEqual(asan["topology"], "pair")
        self.assertEqual(asan["filter"], "*/v11")
        self.assertEqual(asan["cut"], [0.56])
        self.assertEqual(vm_named(sr, "mesh3")["step"], "PASS")

    def test_rows_per_vm(self):
        sr = parse(LANE)[3]
        self.assertEqual(
            rt.softroce_row_result(sr, CUT_RX, "cut"),
            "pass dual (v11; error 0.56 s after the cut); skipped mesh3 (v11; the lane gives it "
            "no link to cut there); pass ASan+UBSan pair (v11; error 0.56 s after the cut)")
        self.assertEqual(rt.softroce_row_result(sr, DEATH_RX, "test"),
                         "pass dual (v10; 7.0 s); pass mesh3 (v10; 7.0 s); "
                         "pass ASan+UBSan pair (v11; 15.7 s)")
        self.assertIn("pass dual (v11)", rt.softroce_row_result(sr, FLUSH_RX, None))
        suite = rt.softroce_suite_result(sr)
        self.assertIn("pass dual (3 passed; 100 s; cable check pass (a:900MiB b:901MiB))", suite)
        self.assertIn("pass mesh3 (2 passed, 1 skipped;", suite)
        self.assertIn("pass ASan+UBSan pair (3 passed, filter */v11;", suite)
        self.assertIn("RATIO plugin_vs_ib_write_bw=1.188", rt.softroce_note(sr))

    def test_flaky_rerun(self):
        first = gtest(("OK", f"{DEATH}/v8", 7000), ("FAILED", f"{DEATH}/v10", 6267),
                      summary="[  PASSED  ] 1 test.\n[  FAILED  ] 1 test, listed below:\n"
                              f"[  FAILED  ] {DEATH}/v10, where GetParam() = 10\n\n"
                              " 1 FAILED TEST\n")
        rerun = (f"=== [guest] conformance-pair: rerunning the failed test(s) once: {DEATH}/v10\n"
                 + gtest(("OK", f"{DEATH}/v10", 8239), summary="[  PASSED  ] 1 test.\n",
                         note=f"{DEATH}/v10"))
        log = host_vm("pair", guest("pair", first + rerun,
                                    detail=f"FLAKY (failed, then passed alone): {DEATH}/v10; "
                                           "[ PASSED ] 1 tests."))
        sr = parse(log)[3]
        self.assertEqual(rt.softroce_row_result(sr, DEATH_RX, "test"),
                         "FLAKY pair (v8, v10; v10 failed, then passed alone; 6.3-8.2 s)")
        suite = rt.softroce_suite_result(sr)
        self.assertTrue(suite.startswith("FLAKY pair (1 passed, 1 failed; failed, then passed "
                                         "alone: PeerDeathTest.KilledPeer"), suite)
        self.assertNotIn("filter", suite)  # the rerun's filter is not the suite's
        self.assertEqual(rt.softroce_row_result(sr, CUT_RX, "cut"), "not run pair")

    def test_failed_test_and_failed_again(self):
        body = gtest(("FAILED", f"{DEATH}/v11", 6000), ("OK", f"{FLUSH}/v11", 900),
                     summary="[  PASSED  ] 1 test.\n[  FAILED  ] 1 test, listed below:\n")
        body += gtest(("FAILED", f"{DEATH}/v11", 6100),
                      summary="[  FAILED  ] 1 test, listed below:\n")
        log = ("=== lane softroce: build (build-ci-release)\n=== lane softroce: test\n"
               + host_vm("dual", guest("dual", body, verdict="FAIL",
                                       detail=f"failed again alone: {DEATH}/v11"),
                         step="FAIL (exit 1)")
               + "=== lane softroce FAILED\n")
        sr = parse(log)[3]
        self.assertEqual(rt.softroce_row_result(sr, DEATH_RX, "test"),
                         "FAIL dual (v11; v11 failed; 6.0-6.1 s)")
        self.assertIn("pass dual", rt.softroce_row_result(sr, FLUSH_RX, None))
        self.assertTrue(rt.softroce_suite_result(sr).startswith(
            "FAIL dual (1 passed, 1 failed; failed: PeerDeathTest."))

    def test_crash_or_vm_timeout_leaves_a_test_without_result(self):
        body = ("=== [guest] kernel 6.1.0-56-amd64, 2 vCPUs, topology dual, veth MTU 9000, "
                "transport rdma, time scale 10\n[==========] Running 3 tests from 2 test suites."
                f"\n[ RUN      ] {DEATH}/v8\n[       OK ] {DEATH}/v8 (7000 ms)\n"
                f"[ RUN      ] {DEATH}/v9\n")
        log = ("=== softroce lane: VM dual (transport rdma, veth MTU 9000)\n" + body
               + "=== softroce lane: step vm-dual: FAIL (exit 124) in 900.0s\n")
        sr = parse(log)[3]
        self.assertEqual(rt.softroce_row_result(sr, DEATH_RX, "test"),
                         "FAIL dual (PeerDeathTest.KilledPeerFailsPendingRequestsInBoundedTime/v9 "
                         "started, no result: VM step FAIL (exit 124))")
        self.assertEqual(rt.softroce_row_result(sr, FLUSH_RX, None), "not run dual")
        self.assertEqual(rt.softroce_suite_result(sr),
                         "FAIL dual (no suite result: VM step FAIL (exit 124))")

    def test_asan_step_that_failed_before_its_vm(self):
        log = (host_vm("dual", guest("dual", ALL_PASS))
               + "=== softroce lane: LANE_ASAN_BUILD=/b lacks the plugin or the conformance suite"
               + "\n=== softroce lane: step vm-pair-asan: FAIL (exit 2) in 0.0s\n")
        sr = parse(log)[3]
        self.assertEqual([vm["name"] for vm in sr["vms"]], ["dual", "pair-asan"])
        self.assertTrue(rt.softroce_row_result(sr, FLUSH_RX, None).endswith(
            "; not run ASan+UBSan pair"))
        self.assertIn("not checked", rt.softroce_leaks(sr, "x", FLUSH_RX))

    def test_guest_only_log_starts_a_vm_at_each_banner(self):
        sr = parse("=== softroce lane: step setup: PASS in 1s\n" + guest("pair", ALL_PASS)
                   + guest("mesh3", ALL_PASS))[3]
        self.assertEqual([vm["name"] for vm in sr["vms"]], ["pair", "mesh3"])


class CiLogWithOtherLanes(unittest.TestCase):
    RELEASE = ("=== lane release: configure and build\n=== lane release: test\n"
               "12/345 Test #12: Plugin/PeerDeathTest.KilledPeerFailsPendingRequestsInBoundedTime"
               "/v8  # GetParam() = 8 ......   Passed    0.42 sec\n"
               # a failing ctest test prints its gtest output: not a Soft-RoCE line
               f"[ RUN      ] {DEATH}/v9\n[       OK ] {DEATH}/v9 (500 ms)\n")

    def test_no_softroce_lane(self):
        results, _, _, sr = parse(self.RELEASE)
        self.assertIsNone(sr)
        self.assertIn(f"{DEATH}/v8", results["release"])
        self.assertEqual(rt.softroce_row_result(sr, DEATH_RX, "test"),
                         "not run (no Soft-RoCE lane in the CI log)")
        self.assertIn("no Soft-RoCE lane", rt.softroce_note(sr))
        text = rt.render(results, [], [], ["`ci.log` (CI log)"], "", sr)
        self.assertIn("| not run (no Soft-RoCE lane in the CI log) |", text)

    def test_lanes_then_softroce(self):
        log = (self.RELEASE + "=== lane fuzz\nfuzz_handle: 123 executions in 30s, no crash\n"
               "=== lane softroce: build (build-ci-release)\n=== lane softroce: test\n" + LANE)
        results, fuzz, _, sr = parse(log)
        self.assertEqual(len(results["release"]), 1)
        self.assertEqual(len(fuzz), 1)
        self.assertEqual([vm["name"] for vm in sr["vms"]], ["dual", "mesh3", "pair-asan"])
        text = rt.render(results, fuzz, [], ["`ci.log` (CI log)"], "", sr)
        self.assertIn("pass dual (v11; error 0.56 s after the cut)", text)
        self.assertIn("`Plugin/CableCutTest.PendingRequestsFailWithTheTransportErrorAndNew"
                      "ConnectionsWorkAfter/v*` (Soft-RoCE)", text)
        self.assertIn("RATIO plugin_vs_ib_write_bw=1.188", text.splitlines()[4])

    def test_softroce_setup_failed(self):
        sr = parse("=== lane softroce: test\n=== softroce lane: setup (packages, ...)\n"
                   "=== softroce lane: step setup: FAIL (exit 100) in 30.1s\n")[3]
        self.assertEqual(rt.softroce_row_result(sr, CUT_RX, "cut"),
                         "not run (the lane's setup step FAIL (exit 100))")

    def test_softroce_lane_that_failed_before_its_vms(self):
        sr = parse("=== lane softroce: build (build-ci-softroce)\nerror: ...\n"
                   "=== lane softroce FAILED\n")[3]
        self.assertEqual(rt.softroce_suite_result(sr),
                         "not run (the softroce lane FAILED before its VMs ran)")


if __name__ == "__main__":
    unittest.main()
