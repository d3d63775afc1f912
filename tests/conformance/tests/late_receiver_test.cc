// SPDX-License-Identifier: Apache-2.0
// NCCL's sender posts isend as soon as its data is ready, while the receiving rank may be busy
// elsewhere (compute, a checkpoint) long before it posts the matching irecv. A live but late
// receiver is not a failure: the send must wait, however long, and the connection must survive.
//
// "Long" is made short here: both ranks are spawned peers whose plugin runs with a small
// NCCL_MESH_TCP_USER_TIMEOUT_MS, so a plugin that times out a connection whose receiver merely
// stopped reading fails in seconds (with the default of 20 s the failure is the same, later).
// The setting is confined to these two processes so that it cannot make other tests timing
// dependent.
#include <gtest/gtest.h>

#include "tests/fixture.h"

namespace conformance {
namespace {

constexpr int kPeerTcpUserTimeoutMs = 1500;
const Millis kLateReplyWait = scaled(60000);

TEST(LateReceiverTest, SendWaitsForAReceiverThatPostsLate) {
  const std::vector<std::string> env = {"NCCL_MESH_TCP_USER_TIMEOUT_MS=" +
                                        std::to_string(kPeerTcpUserTimeoutMs)};
  PeerPair pair;
  ASSERT_TRUE(connect_peer_pair(env, env, kLateReplyWait, &pair));
  PeerProcess* sender = pair.sender.get();
  PeerProcess* receiver = pair.receiver.get();

  // Two 64 MiB messages: more than the socket buffers hold, so the sender's data sits unread for
  // the whole delay.
  const uint32_t delay_ms = 3 * kPeerTcpUserTimeoutMs;
  StreamSpec send;
  send.dir = Direction::kSend;
  send.comm_id = pair.send_id;
  send.seed = 0x1A7E;
  send.window = 1;
  send.messages = exact({64 * MiB, 64 * MiB});
  StreamSpec recv = send;
  recv.dir = Direction::kRecv;
  recv.comm_id = pair.recv_id;
  recv.first_post_delay_ms = delay_ms;
  TransferRequest to_sender, to_receiver;
  to_sender.streams = {send};
  to_receiver.streams = {recv};
  ASSERT_TRUE(receiver->start(Op::kTransfer, to_receiver));
  ASSERT_TRUE(sender->start(Op::kTransfer, to_sender));
  TransferReply sent, received;
  ASSERT_TRUE(sender->finish(&sent, kLateReplyWait)) << sender->error();
  ASSERT_TRUE(receiver->finish(&received, kLateReplyWait)) << receiver->error();
  ASSERT_EQ(sent.results.size(), 1u);
  ASSERT_EQ(received.results.size(), 1u);
  EXPECT_TRUE(sent.results[0].ok) << "receiver late by " << delay_ms << " ms: sender "
                                  << describe(send, sent.results[0]);
  EXPECT_TRUE(received.results[0].ok)
      << "receiver late by " << delay_ms << " ms: receiver " << describe(recv, received.results[0]);

  EXPECT_EQ(sender->quit(kLateReplyWait), "");
  EXPECT_EQ(receiver->quit(kLateReplyWait), "");
}

}  // namespace
}  // namespace conformance
