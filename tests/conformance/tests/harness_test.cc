// SPDX-License-Identifier: Apache-2.0
// The harness's own hygiene: what it opens must not show up as the plugin's leaks in the suite's
// descriptor checks (ConnectionTest.ClosedConnectionsReleaseTheirSockets,
// DescriptorHygieneTest), and those checks tell a leak from a socket open for a moment.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>

#include "harness/call_timer.h"
#include "harness/env.h"
#include "harness/open_fds.h"

namespace conformance {
namespace {

TEST(HarnessTest, CallTimersInThreadsThatEndLeaveNoDescriptorsBehind) {
  const size_t before = open_fds().size();
  for (int i = 0; i < 8; ++i) {
    std::thread([] {
      CallTimer timer;
      timer.stop();
    }).join();
  }
  EXPECT_EQ(open_fds().size(), before)
      << "a CallTimer's /proc/thread-self/schedstat stays open after its thread ended";
}

// Test processes that ctest runs side by side must not share a relay agent (main() sets the
// environment before any test runs): one process's standby retries and take-overs would open and
// close sockets in the middle of another's descriptor counts.
TEST(HarnessTest, OnLoopbackEachTestProcessHasARelayPortOfItsOwn) {
  if (!on_loopback(Rank::kTest)) GTEST_SKIP() << "the suite runs on test links, not loopback";
  if (relay_port_from_caller())
    GTEST_SKIP() << "the caller's environment sets NCCL_MESH_RELAY_PORT";
  const char* port = std::getenv("NCCL_MESH_RELAY_PORT");
  ASSERT_NE(port, nullptr) << "NCCL_MESH_RELAY_PORT not set for this test process";
  EXPECT_NE(std::string(port), "18515") << "the default relay port is shared by every process";
}

// A standby relay agent's bind retry (relay/agent.cc, try_bind) holds a TCP and a UDP socket for
// a moment: a snapshot in that moment shows two sockets the leak check must not count. Stand-in:
// a thread that holds two sockets for 200 ms while the check runs.
TEST(HarnessTest, SocketsOpenForAMomentAreNotCountedAsLeaks) {
  const std::set<std::string> baseline = open_fds();
  std::atomic<bool> opened{false};
  std::thread retry([&] {
    const int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    opened = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (l >= 0) close(l);
    if (u >= 0) close(u);
  });
  while (!opened) std::this_thread::yield();
  // What the check saw before it settled (the flake of ClosedConnectionsReleaseTheirSockets).
  EXPECT_EQ(open_fds().size(), baseline.size() + 2) << "the stand-in's sockets are not open";
  const std::set<std::string> settled = open_fds_settled(baseline, std::chrono::seconds(5));
  retry.join();
  EXPECT_EQ(settled.size(), baseline.size())
      << "sockets closed 200 ms later still counted:" << fds_missing_from(baseline, settled);
}

TEST(HarnessTest, ADescriptorThatStaysOpenIsStillReported) {
  const std::set<std::string> baseline = open_fds();
  const int leaked = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(leaked, 0);
  const std::set<std::string> settled = open_fds_settled(baseline, std::chrono::milliseconds(300));
  EXPECT_EQ(settled.size(), baseline.size() + 1);
  EXPECT_NE(fds_missing_from(baseline, settled).find("socket:["), std::string::npos)
      << fds_missing_from(baseline, settled);
  close(leaked);
}

}  // namespace
}  // namespace conformance
