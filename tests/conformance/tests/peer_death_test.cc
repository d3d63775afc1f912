// SPDX-License-Identifier: Apache-2.0
// A rank that dies mid-transfer (SIGKILL: no close, no finalize) must turn the survivor's pending
// requests into errors within bounded time: NCCL would otherwise hang in test() forever.
#include <gtest/gtest.h>

#include "harness/call_timer.h"
#include "tests/fixture.h"

namespace conformance {
namespace {

// From the kill to the error. The kernel resets the dead process's sockets at once, so this only
// allows for scheduling and for a plugin that notices the reset on its next poll.
const Millis kDeathNoticeLimit = scaled(10000);

class PeerDeathTest : public VersionedTest {};

TEST_P(PeerDeathTest, KilledPeerFailsPendingRequestsInBoundedTime) {
  std::vector<Link> out, in;
  ASSERT_NO_FATAL_FAILURE(open_both(1, &out, &in));

  // 64 MiB messages, one in flight at a time. The peer receives only the first message sent to
  // it, so this process's later sends are pending when the peer dies: loopback sockets can buffer
  // a message or two (tcp_rmem allows 32 MiB per socket), but not the 448 MiB that follow.
  Flow to_peer;
  to_peer.messages = exact(std::vector<uint64_t>(8, 64 * MiB));
  to_peer.window = 1;
  Flow from_peer;
  from_peer.messages = exact(std::vector<uint64_t>(4, 64 * MiB));
  from_peer.window = 1;
  Exchange ex;
  ex.outbound(out[0], to_peer);  // local stream 0: this process sends
  ex.inbound(in[0], from_peer);  // local stream 1: this process receives
  ex.remote_specs[0].messages.resize(1);
  // The kill point: both first messages are complete (each stream is about to post its second;
  // window 1), so the peer is sending its message 1 and our message 1 is about to go out. On a
  // slow machine (a TCG VM) our send 0 can finish well after the peer's arrived: wait for both.
  bool sent_first = false, received_first = false, killed = false;
  RunHooks hooks;
  hooks.before_post = [&](size_t stream, size_t index) {
    if (index != 1 || killed) return false;
    (stream == 0 ? sent_first : received_first) = true;
    if (!sent_first || !received_first) return false;
    peer().kill_now();
    peer_killed();
    killed = true;
    return true;
  };
  const size_t warns_before = local_warnings().size();
  const ExchangeResult r = run(ex, scaled(30000), hooks);
  ASSERT_EQ(r.local.size(), 2u);
  const StreamResult& send = r.local[0];
  const StreamResult& recv = r.local[1];
  const uint64_t limit_us = static_cast<uint64_t>(kDeathNoticeLimit.count()) * 1000;
  ASSERT_TRUE(killed) << "the kill point was not reached:" << r.report();
  // The peer may have finished its message 1 while our send 0 completed: then message 2 is the
  // one pending at the kill. Not all 4 can have arrived.
  ASSERT_GE(recv.completed, 1u) << r.report();
  EXPECT_GE(recv.failed_at, 1) << "the receive pending at the kill did not fail:" << r.report();
  EXPECT_LT(recv.failed_at, 4) << r.report();
  EXPECT_NE(recv.rc, ncclSuccess);
  EXPECT_LE(recv.error_after_us, limit_us) << "receive error took too long";
  EXPECT_GE(send.failed_at, 1) << "sends after the kill did not fail:" << r.report();
  EXPECT_NE(send.rc, ncclSuccess);
  EXPECT_LE(send.error_after_us, limit_us) << "send error took too long";
  EXPECT_GT(local_warnings().size(), warns_before) << "the failure must be explained by a WARN";

  // New sends on the dead connection must start failing. The first few may still "complete" into
  // kernel buffers before the reset is seen (plain TCP semantics), but 64 MiB cannot.
  Exchange after;
  StreamSpec more;
  more.dir = Direction::kSend;
  more.seed = 99;
  more.tolerate_error_from = 0;
  more.messages = exact(std::vector<uint64_t>(64, MiB));
  after.local_specs.push_back(more);
  after.local_comms.push_back(out[0].local);
  const ExchangeResult again = run(after, kDeathNoticeLimit);
  ASSERT_EQ(again.local.size(), 1u);
  EXPECT_GE(again.local[0].failed_at, 0) << "sends on a dead connection:" << again.report();

  // Closing the dead comms returns (whatever the result) and does not take long.
  for (auto [comm, is_send] : {std::pair{out[0].local, true}, std::pair{in[0].local, false}}) {
    CallTimer timer;
    if (is_send) {
      close_send(comm);
    } else {
      close_recv(comm);
    }
    timer.stop();
    EXPECT_LT(timer.charged_us(), static_cast<uint64_t>(kDataCallLimit.count()) * 1000)
        << (is_send ? "closeSend" : "closeRecv") << " of a dead connection blocked";
  }

  // The surviving process still works with a new peer.
  ASSERT_NO_FATAL_FAILURE(respawn_peer());
  std::vector<Link> out2, in2;
  ASSERT_NO_FATAL_FAILURE(open_both(1, &out2, &in2));
  expect_traffic(out2, in2, "with a new peer after the first one died");
}

MESH_INSTANTIATE_ALL_VERSIONS(PeerDeathTest);

}  // namespace
}  // namespace conformance
