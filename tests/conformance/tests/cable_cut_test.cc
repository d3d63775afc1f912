// SPDX-License-Identifier: Apache-2.0
// A cable that goes dark mid-transfer while both processes stay alive: nothing closes the
// sockets, so only the transport's own timeouts can notice. Over RDMA that is the QP's retry
// limit (NCCL_MESH_IB_TIMEOUT x NCCL_MESH_IB_RETRY_CNT): the pending requests must fail with a
// WARN naming the QP and the completion status, not hang. Then the link comes back and new
// connections work. The test takes a real interface down, so it runs only where it is given a
// disposable one (MESH_CONFORMANCE_CUT_LINK, set by the Soft-RoCE lane inside its VM).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "harness/call_timer.h"
#include "harness/env.h"
#include "tests/fixture.h"

namespace conformance {
namespace {

const char* cut_link() {
  const char* v = std::getenv("MESH_CONFORMANCE_CUT_LINK");
  return v != nullptr && v[0] != '\0' ? v : nullptr;
}

// How long the QPs retry before they give up (NCCL_MESH_IB_TIMEOUT/RETRY_CNT as the plugin
// reads them; the lane sets a short timeout), three times over, at least 10 s. Not scaled by
// MESH_CONF_TIME_SCALE: the retry timers run on wall-clock time however slow the CPU is.
Millis cut_budget() {
  const char* t = std::getenv("NCCL_MESH_IB_TIMEOUT");
  const char* r = std::getenv("NCCL_MESH_IB_RETRY_CNT");
  const int timeout = t != nullptr ? std::atoi(t) : 20;
  const int retries = r != nullptr ? std::atoi(r) : 6;
  const double retry_s = 4.096e-6 * static_cast<double>(1ull << std::clamp(timeout, 1, 31));
  const double total_s = retry_s * (retries + 1) * 3;
  return Millis(std::max<int64_t>(10000, static_cast<int64_t>(total_s * 1000)));
}

bool set_link(const std::string& link, bool up) {
  const std::string cmd = "ip link set dev " + link + (up ? " up" : " down");
  return std::system(cmd.c_str()) == 0;
}

class CableCutTest : public VersionedTest {
 protected:
  void TearDown() override {
    if (cut_) set_link(cut_link(), true);
    VersionedTest::TearDown();
  }
  bool cut_ = false;
};

TEST_P(CableCutTest, PendingRequestsFailWithTheTransportErrorAndNewConnectionsWorkAfter) {
  if (cut_link() == nullptr) {
    GTEST_SKIP() << "takes an interface down: set MESH_CONFORMANCE_CUT_LINK=<ifname> to a "
                    "disposable test link (the Soft-RoCE lane does, inside its VM)";
  }
  std::vector<Link> out, in;
  ASSERT_NO_FATAL_FAILURE(open_both(1, &out, &in));
  // The sender has one message in flight; the peer posts all 8 receives at once, so when the
  // sender posts message 2 (after the cut) its clear-to-send is already there and the data
  // writes go out over the dead cable.
  Flow flow;
  flow.messages = exact(std::vector<uint64_t>(8, 4 * MiB));
  flow.window = 1;
  flow.send_tolerate_error_from = 2;
  Exchange ex;
  ex.outbound(out[0], flow);
  ex.remote_specs[0].window = 8;
  ex.remote_specs[0].tolerate_timeout = true;  // its receives may just stay pending
  ex.remote_specs[0].tolerate_error_from = 2;
  RunHooks hooks;
  hooks.before_post = [&](size_t, size_t index) {
    if (index != 2) return false;
    cut_ = set_link(cut_link(), false);
    return true;
  };
  const size_t warns_before = local_warnings().size();
  const ExchangeResult r = run(ex, cut_budget(), hooks);
  ASSERT_TRUE(cut_) << "could not take " << cut_link() << " down";
  ASSERT_EQ(r.local.size(), 1u);
  const StreamResult& send = r.local[0];
  EXPECT_EQ(send.completed, 2u) << r.report();
  EXPECT_GE(send.failed_at, 2) << "sends over the cut cable did not fail:" << r.report();
  EXPECT_NE(send.rc, ncclSuccess);
  std::printf("[ cut      ] send failed %.2f s after the cut with %s\n",
              static_cast<double>(send.error_after_us) / 1e6,
              result_name(static_cast<ncclResult_t>(send.rc)));
  const auto warns = local_warnings();
  ASSERT_GT(warns.size(), warns_before) << "the failure must be explained by a WARN";
  std::string joined;
  for (size_t i = warns_before; i < warns.size(); ++i) joined += warns[i] + "\n";
  if (expected_transport() == "rdma") {
    // The control socket is idle and alive: the QP's own error must be what is reported.
    EXPECT_NE(joined.find("completion error"), std::string::npos) << joined;
  }

  // Closing the broken comms does not block.
  CallTimer timer;
  close_send(out[0].local);
  close_recv(in[0].local);
  timer.stop();
  EXPECT_LT(timer.charged_us(), static_cast<uint64_t>(kDataCallLimit.count()) * 1000);

  // The cable comes back: a new peer process connects and moves data over it.
  ASSERT_TRUE(set_link(cut_link(), true));
  cut_ = false;
  std::this_thread::sleep_for(std::chrono::seconds(2));  // carrier, then the RDMA port state
  ASSERT_NO_FATAL_FAILURE(respawn_peer());
  std::vector<Link> out2, in2;
  ASSERT_NO_FATAL_FAILURE(open_both(1, &out2, &in2));
  expect_traffic(out2, in2, "after the cable came back");
}

// One version: the behaviour under test is below the ABI, and each run waits for timeouts.
MESH_INSTANTIATE_VERSIONS(CableCutTest, 11);

}  // namespace
}  // namespace conformance
