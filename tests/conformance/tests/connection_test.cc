// SPDX-License-Identifier: Apache-2.0
// Connection setup and teardown as NCCL's proxy service thread performs them: listen, the handle
// through the bootstrap, connect/accept retried until they hand out comms, closeListen right after
// accept, and close* on idle comms.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <set>
#include <string>

#include "handshake/handle.h"
#include "harness/call_timer.h"
#include "harness/log_capture.h"
#include "harness/open_fds.h"
#include "tests/fixture.h"

namespace conformance {
namespace {

class ConnectionTest : public VersionedTest {};

TEST_P(ConnectionTest, ListenReturnsAtOnceWithLoopbackHandle) {
  for (int i = 0; i < 2; ++i) {
    HandleBytes handle{};
    void* lcomm = nullptr;
    uint64_t us = 0;
    std::string error;
    // listen_once checks: quick, non-NULL comm, nothing written past 128 bytes.
    ASSERT_TRUE(listen_once(net(), ctx(), 0, &handle, &lcomm, &us, &error)) << error;
    mesh::handshake::Handle decoded;
    std::string why;
    EXPECT_TRUE(mesh::handshake::decode_handle(handle.data(), handle.size(), &decoded, &why))
        << why;
    // NCCL_MESH_IFNAME=lo: the handle may only advertise loopback addresses (in the Soft-RoCE
    // lane: only addresses of MESH_CONFORMANCE_IFNAME's interfaces).
    for (const mesh::Ipv4Prefix& a : decoded.addrs) {
      EXPECT_TRUE(rank_may_advertise(Rank::kTest, a.addr))
          << "advertised " << mesh::format_prefix(a)
          << " with NCCL_MESH_IFNAME=" << rank_ifname(Rank::kTest);
    }
    // A listen comm that never sees a connection is closed when its communicator goes away.
    CallTimer timer;
    EXPECT_EQ(net().close_listen(lcomm), ncclSuccess);
    timer.stop();
    EXPECT_LT(timer.charged_us(), static_cast<uint64_t>(kSetupCallLimit.count()) * 1000);
  }
}

TEST_P(ConnectionTest, HandleExchangeInEachDirection) {
  std::vector<Link> out, in;
  ASSERT_NO_FATAL_FAILURE(open_outbound(1, &out));  // this process connects
  ASSERT_NO_FATAL_FAILURE(open_inbound(1, &in));    // the peer connects
  expect_traffic(out, in, "after a one-way handshake each way");
  EXPECT_TRUE(local_warnings().empty())
      << "WARN during a clean run:" << join_lines(local_warnings());
}

TEST_P(ConnectionTest, SimultaneousConnectAndAcceptDoNotDeadlock) {
  // Each rank listens, the handles cross, then each rank loops connect+accept in one thread.
  std::vector<Link> out, in;
  ASSERT_NO_FATAL_FAILURE(open_both(4, &out, &in));
  expect_traffic(out, in, "after simultaneous connect/accept");
}

TEST_P(ConnectionTest, SixteenConnectionsUsedConcurrently) {
  std::vector<Link> out, in;
  ASSERT_NO_FATAL_FAILURE(open_both(16, &out, &in));
  std::mt19937_64 rng(0x16C0 + static_cast<uint64_t>(version()));
  std::uniform_int_distribution<uint64_t> size(0, 256 * 1024);
  Exchange ex;
  for (size_t i = 0; i < out.size() + in.size(); ++i) {
    Flow flow;
    flow.window = 4;
    for (int m = 0; m < 6; ++m) flow.messages.push_back({size(rng), 0});
    for (MessageSpec& m : flow.messages) m.capacity = m.size;
    if (i < out.size()) {
      ex.outbound(out[i], flow);
    } else {
      ex.inbound(in[i - out.size()], flow);
    }
  }
  const ExchangeResult r = run(ex);
  EXPECT_TRUE(r.all_ok()) << r.report();
}

TEST_P(ConnectionTest, ClosingIdleConnectionsLeavesOthersWorking) {
  std::vector<Link> out, in;
  ASSERT_NO_FATAL_FAILURE(open_both(3, &out, &in));
  ASSERT_NO_FATAL_FAILURE(expect_traffic(out, in, "before closing"));

  const auto timed = [](auto&& close_call) {
    CallTimer timer;
    const ncclResult_t rc = close_call();
    timer.stop();
    return std::make_pair(rc, timer.charged_us());
  };
  const uint64_t limit_us = static_cast<uint64_t>(kSetupCallLimit.count()) * 1000;
  auto [send_rc, send_us] = timed([&] { return close_send(out[0].local); });
  EXPECT_EQ(send_rc, ncclSuccess) << "closeSend of an idle comm";
  EXPECT_LT(send_us, limit_us) << "closeSend blocked";
  auto [recv_rc, recv_us] = timed([&] { return close_recv(in[0].local); });
  EXPECT_EQ(recv_rc, ncclSuccess) << "closeRecv of an idle comm";
  EXPECT_LT(recv_us, limit_us) << "closeRecv blocked";
  const StatusReply peer_recv = remote_close(CommKind::kRecv, out[0].remote);
  EXPECT_EQ(peer_recv.rc, ncclSuccess) << "peer closeRecv: " << peer_recv.error;
  EXPECT_LT(peer_recv.call_us, limit_us) << "peer closeRecv blocked";
  const StatusReply peer_send = remote_close(CommKind::kSend, in[0].remote);
  EXPECT_EQ(peer_send.rc, ncclSuccess) << "peer closeSend: " << peer_send.error;
  EXPECT_LT(peer_send.call_us, limit_us) << "peer closeSend blocked";

  // An idle listen comm on each side.
  std::vector<HandleBytes> handles;
  std::vector<void*> lcomms;
  ASSERT_NO_FATAL_FAILURE(listen_local(1, &handles, &lcomms));
  EXPECT_EQ(close_listen(lcomms[0]), ncclSuccess);
  ListenReply listened;
  ASSERT_TRUE(peer().call(Op::kListen, ListenRequest{0, 0, 1}, &listened, scaled(10000)));
  ASSERT_EQ(listened.error, "");
  EXPECT_EQ(remote_close(CommKind::kListen, listened.listen_ids[0]).rc, ncclSuccess);

  expect_traffic({out[1], out[2]}, {in[1], in[2]}, "on the connections left open");
  std::vector<Link> out2, in2;
  ASSERT_NO_FATAL_FAILURE(open_both(1, &out2, &in2));
  expect_traffic(out2, in2, "on a connection opened after the closes");
  EXPECT_TRUE(local_warnings().empty())
      << "WARN during a clean run:" << join_lines(local_warnings());
}

TEST_P(ConnectionTest, ClosedConnectionsReleaseTheirSockets) {
  // One warm-up cycle lets the plugin create whatever it keeps for the process (threads, epoll).
  const auto cycle = [&] {
    std::vector<Link> out, in;
    ASSERT_NO_FATAL_FAILURE(open_both(2, &out, &in));
    ASSERT_NO_FATAL_FAILURE(expect_traffic(out, in, "in a connect/close cycle"));
    for (const Link& l : out) {
      EXPECT_EQ(close_send(l.local), ncclSuccess);
      EXPECT_EQ(remote_close(CommKind::kRecv, l.remote).rc, ncclSuccess);
    }
    for (const Link& l : in) {
      EXPECT_EQ(close_recv(l.local), ncclSuccess);
      EXPECT_EQ(remote_close(CommKind::kSend, l.remote).rc, ncclSuccess);
    }
  };
  ASSERT_NO_FATAL_FAILURE(cycle());
  const std::set<std::string> baseline = open_fds_quiet(scaled(3000));
  for (int i = 0; i < 4; ++i) ASSERT_NO_FATAL_FAILURE(cycle());
  // Settled: a standby relay agent's bind retry holds two sockets for a moment (open_fds.h).
  const std::set<std::string> after = open_fds_settled(baseline, scaled(3000));
  EXPECT_EQ(after.size(), baseline.size())
      << "file descriptors leaked by connect/close cycles; new:"
      << fds_missing_from(baseline, after) << "\ngone:" << fds_missing_from(after, baseline);
}

MESH_INSTANTIATE_ALL_VERSIONS(ConnectionTest);

// Plugin sockets must be close-on-exec: otherwise every process the application spawns holds them,
// and a dead peer's connections stay half open.
class DescriptorHygieneTest : public PeerFixture {};

TEST_F(DescriptorHygieneTest, PluginSocketsDoNotLeakIntoChildProcesses) {
  ASSERT_NO_FATAL_FAILURE(start(11));
  std::vector<Link> out, in;
  ASSERT_NO_FATAL_FAILURE(open_both(1, &out, &in));
  std::vector<HandleBytes> handles;
  std::vector<void*> lcomms;
  ASSERT_NO_FATAL_FAILURE(listen_local(1, &handles, &lcomms));
  std::string error;
  auto child = PeerProcess::spawn(peer_path(), plugin_path(), &error);
  ASSERT_TRUE(child) << error;
  InitReply rep;
  ASSERT_TRUE(child->call(Op::kInit, InitRequest{11, 1}, &rep, scaled(10000))) << child->error();
  EXPECT_EQ(rep.inherited_fds, 0u) << "sockets/pipes without O_CLOEXEC reached a spawned process "
                                      "(the child's stderr lists them)";
  EXPECT_EQ(child->quit(scaled(10000)), "");
}

}  // namespace
}  // namespace conformance
