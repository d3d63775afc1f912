// SPDX-License-Identifier: Apache-2.0
// The harness's own hygiene: what it opens must not show up as the plugin's leaks in the suite's
// descriptor checks (ConnectionTest.ClosedConnectionsReleaseTheirSockets,
// DescriptorHygieneTest).
#include <dirent.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <string>
#include <thread>

#include "harness/call_timer.h"
#include "harness/env.h"

namespace conformance {
namespace {

size_t open_fd_count() {
  size_t n = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (readdir(dir) != nullptr) ++n;
    closedir(dir);
  }
  return n;
}

TEST(HarnessTest, CallTimersInThreadsThatEndLeaveNoDescriptorsBehind) {
  const size_t before = open_fd_count();
  for (int i = 0; i < 8; ++i) {
    std::thread([] {
      CallTimer timer;
      timer.stop();
    }).join();
  }
  EXPECT_EQ(open_fd_count(), before)
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

}  // namespace
}  // namespace conformance
