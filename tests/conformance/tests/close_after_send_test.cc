// SPDX-License-Identifier: Apache-2.0
// A sender whose sends completed may close its comm (end of a job, a pipeline stage that sends
// and exits) before the receiver is done: NCCL's contract is that a completed send's buffer is
// free and its data on its way, so every byte must still arrive.
//
// Over an RDMA relay a send completes once its chunks are in the relay host's staging slots,
// before the receiver posted anything; so there each direction runs the sender's stream alone
// until every isend tested done, the sender closes its send comm, and only then does the
// receiver post its receives: the relay host must deliver after the connector's close
// (docs/relay.md, "RDMA relay": delivery after close).
// Direct connections and the TCP relay keep a send's bytes (isend answers "retry", or on
// request holds the request) until the receiver has posted the matching receive (the
// clear-to-send), except for what the eager rules let go early (small
// messages, and on direct connections what the receiver's TCP windows already take: design.md),
// so in general a send cannot complete before its receive there: the receiver posts first, and
// the sender closes the moment its sends completed (their bytes may still be in socket buffers,
// the relay's splice, or on the wire).
// The messages (1.1 MiB in 6 chunks) fit the RDMA relay's default staging (8 slots of 512 KiB),
// which is what lets a relayed send complete before its receive.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "harness/log_capture.h"
#include "harness/timing.h"
#include "tests/fixture.h"

namespace conformance {
namespace {

class CloseAfterSendTest : public VersionedTest {
 protected:
  void SetUp() override {
    VersionedTest::SetUp();
    if (HasFatalFailure()) return;
    const size_t before = connection_count();
    ASSERT_NO_FATAL_FAILURE(open_both(1, &out_, &in_));
    warns_before_ = warn_count();  // init-time WARNs about the host's setup are not this test's
    for (const std::string& line : connections_since(before)) {
      if (line.find("connected: send connection") != std::string::npos) send_line_ = line;
    }
  }
  static Flow flow() {
    Flow f;
    f.messages = exact({0, 1, 4096, 65536 + 3, MiB});
    f.window = 8;  // every message posted at once
    return f;
  }
  // Whether a send completes before its receive is posted: only over an RDMA relay.
  bool decoupled() const { return send_line_.find("(RDMA relayed") != std::string::npos; }

  // This process sends, then closes its send comm; the peer receives.
  void local_sends_then_closes() {
    Exchange ex;
    ex.outbound(out_[0], flow());
    TransferRequest peer_recv;
    peer_recv.timeout_ms = static_cast<uint32_t>(recv_wait_.count());
    peer_recv.streams = ex.remote_specs;
    if (!decoupled()) {
      ASSERT_TRUE(peer().start(Op::kTransfer, peer_recv)) << peer().error();
    }
    const std::vector<StreamResult> sent =
        run_streams(net(), ex.local_specs, ex.local_comms, deadline_after(send_wait_));
    ASSERT_EQ(sent.size(), 1u);
    const bool sends_ok = sent[0].ok;
    if (sends_ok) {
      EXPECT_EQ(close_send(out_[0].local), ncclSuccess);
    }
    if (decoupled() && sends_ok) {
      ASSERT_TRUE(peer().start(Op::kTransfer, peer_recv)) << peer().error();
    }
    TransferReply got;
    const bool replied =
        (decoupled() && !sends_ok) || peer().finish(&got, recv_wait_ + scaled(10000));
    ASSERT_TRUE(sends_ok) << (decoupled() ? "before any receive was posted, " : "")
                          << "the sends did not complete (connection: " << send_line_
                          << "): " << describe(ex.local_specs[0], sent[0]);
    ASSERT_TRUE(replied) << peer().error();
    ASSERT_EQ(got.results.size(), 1u);
    EXPECT_TRUE(got.results[0].ok)
        << "the peer's receives after this process closed its send comm (connection: " << send_line_
        << "): " << describe(ex.remote_specs[0], got.results[0]);
  }

  // The peer sends, then closes its send comm; this process receives.
  void peer_sends_then_closes() {
    Exchange ex;
    ex.inbound(in_[0], flow());
    TransferRequest peer_send;
    peer_send.timeout_ms = static_cast<uint32_t>(send_wait_.count());
    peer_send.streams = ex.remote_specs;
    std::vector<StreamResult> got;
    std::thread receiver;
    const auto receive = [&] {
      got = run_streams(net(), ex.local_specs, ex.local_comms, deadline_after(recv_wait_));
    };
    if (!decoupled()) receiver = std::thread(receive);  // posted first (the clear-to-send)
    TransferReply sent;
    const bool replied = peer().call(Op::kTransfer, peer_send, &sent, send_wait_ + scaled(10000));
    const bool sends_ok = replied && sent.results.size() == 1 && sent.results[0].ok;
    StatusReply closed;
    if (sends_ok) closed = remote_close(CommKind::kSend, in_[0].remote);
    if (decoupled() && sends_ok) receive();
    if (receiver.joinable()) receiver.join();
    ASSERT_TRUE(replied) << peer().error();
    ASSERT_TRUE(sends_ok) << (decoupled() ? "before any receive was posted, " : "")
                          << "the peer's sends did not complete: "
                          << (sent.results.empty() ? std::string("no result")
                                                   : describe(ex.remote_specs[0], sent.results[0]));
    EXPECT_EQ(closed.rc, ncclSuccess) << closed.error;
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0].ok) << "receives after the peer closed its send comm: "
                           << describe(ex.local_specs[0], got[0]);
  }

  std::vector<Link> out_, in_;
  std::string send_line_;  // this process's "connected:" line (names the transport)
  size_t warns_before_ = 0;
  const Millis send_wait_ = scaled(20000), recv_wait_ = scaled(60000);
};

TEST_P(CloseAfterSendTest, CompletedSendsArriveAfterTheSenderClosed) {
  std::cout << "[ CLOSE    ] "
            << (decoupled() ? "RDMA relay: sends complete and the sender closes before the "
                              "receiver posts"
                            : "sends complete into posted receives, the sender closes at once")
            << "; connection: " << send_line_ << std::endl;
  ASSERT_NO_FATAL_FAILURE(local_sends_then_closes());
  ASSERT_NO_FATAL_FAILURE(peer_sends_then_closes());
  EXPECT_TRUE(warns_since(warns_before_).empty())
      << "WARN during a clean run:" << join_lines(warns_since(warns_before_));
}

TEST_P(CloseAfterSendTest, MessagesHeldPastTheRelayDrainTimeoutFailTheReceiver) {
  // The relay host delivers after the connector's close only for NCCL_MESH_RELAY_RDMA_DRAIN_MS;
  // a receiver that posts later must get an error, never a hang or a silent loss. The lane
  // gives the relay host a short drain timeout and tells the suite
  // (MESH_CONFORMANCE_RELAY_DRAIN_MS).
  const char* env = std::getenv("MESH_CONFORMANCE_RELAY_DRAIN_MS");
  if (!decoupled() || env == nullptr) {
    GTEST_SKIP() << "needs an RDMA relay whose host's drain timeout is known "
                    "(MESH_CONFORMANCE_RELAY_DRAIN_MS, Soft-RoCE relay-line3); connection: "
                 << send_line_;
  }
  const Millis drain(std::atoll(env));
  Exchange ex;
  Flow f = flow();
  f.recv_expect_error_at = 0;  // the first receive (and so the stream) must fail
  ex.outbound(out_[0], f);
  const std::vector<StreamResult> sent =
      run_streams(net(), ex.local_specs, ex.local_comms, deadline_after(send_wait_));
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_TRUE(sent[0].ok) << "before any receive was posted, the sends did not complete: "
                          << describe(ex.local_specs[0], sent[0]);
  ASSERT_EQ(close_send(out_[0].local), ncclSuccess);
  // Past the relay host's drain timeout (its clock started at our close), plus a margin.
  std::this_thread::sleep_for(drain + std::chrono::milliseconds(5000));
  TransferRequest peer_recv;
  peer_recv.timeout_ms = static_cast<uint32_t>(recv_wait_.count());
  peer_recv.streams = ex.remote_specs;
  TransferReply got;
  ASSERT_TRUE(peer().call(Op::kTransfer, peer_recv, &got, recv_wait_ + scaled(10000)))
      << peer().error();
  ASSERT_EQ(got.results.size(), 1u);
  EXPECT_TRUE(got.results[0].ok)
      << "the receiver posted " << drain.count() + 5000
      << " ms after the sender closed, past the relay's drain timeout: its first receive must "
         "fail: "
      << describe(ex.remote_specs[0], got.results[0]);
  EXPECT_EQ(got.results[0].failed_at, 0);
}

MESH_INSTANTIATE_VERSIONS(CloseAfterSendTest, 12);

}  // namespace
}  // namespace conformance
