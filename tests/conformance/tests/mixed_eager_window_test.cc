// SPDX-License-Identifier: Apache-2.0
// Hosts may set NCCL_MESH_TCP_EAGER_WINDOW differently. A TCP sender leaves out the ask for a
// message over a quarter of its window, because the receiver sends that clear-to-send unasked
// (transport/tcp/wire.h); the receiver must judge "a quarter" by the sender's window, which the
// sender's hello carries (handshake/hello.h), not by its own. Judged by its own larger window it
// would send none, and every such message would wait out the sender's grace period (20 ms)
// before asking: slower, never wrong. So the case moves messages that must wait for their
// clear-to-send (larger than the sender's window: they cannot go early) one at a time, between
// peers with the same window and between peers whose receiver's window is 128 times larger,
// checks every byte, and bounds the second run's time by the first's.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/fixture.h"

namespace conformance {
namespace {

const Millis kMixedReplyWait = scaled(120000);

// One run: `count` messages of `size`, one in flight at a time, from a peer whose plugin runs
// with `sender_window` to one with `receiver_window`. Returns the transfer's wall time in us.
uint64_t timed_one_way(uint64_t sender_window, uint64_t receiver_window, uint64_t size,
                       size_t count) {
  PeerPair pair;
  if (!connect_peer_pair({"NCCL_MESH_TCP_EAGER_WINDOW=" + std::to_string(sender_window)},
                         {"NCCL_MESH_TCP_EAGER_WINDOW=" + std::to_string(receiver_window)},
                         kMixedReplyWait, &pair)) {
    return 0;
  }
  PeerProcess* sender = pair.sender.get();
  PeerProcess* receiver = pair.receiver.get();

  StreamSpec send;
  send.dir = Direction::kSend;
  send.comm_id = pair.send_id;
  send.seed = 0xE1D0 + sender_window + receiver_window;
  send.window = 1;
  send.messages = exact(std::vector<uint64_t>(count, size));
  StreamSpec recv = send;
  recv.dir = Direction::kRecv;
  recv.comm_id = pair.recv_id;
  TransferRequest to_sender, to_receiver;
  to_sender.streams = {send};
  to_receiver.streams = {recv};
  const auto start = Clock::now();
  EXPECT_TRUE(receiver->start(Op::kTransfer, to_receiver));
  EXPECT_TRUE(sender->start(Op::kTransfer, to_sender));
  TransferReply sent, received;
  EXPECT_TRUE(sender->finish(&sent, kMixedReplyWait)) << sender->error();
  EXPECT_TRUE(receiver->finish(&received, kMixedReplyWait)) << receiver->error();
  const uint64_t us = elapsed_us(start);
  EXPECT_EQ(sent.results.size(), 1u);
  EXPECT_EQ(received.results.size(), 1u);
  if (sent.results.size() == 1 && received.results.size() == 1) {
    EXPECT_TRUE(sent.results[0].ok) << "sender " << describe(send, sent.results[0]);
    EXPECT_TRUE(received.results[0].ok) << "receiver " << describe(recv, received.results[0]);
  }
  EXPECT_EQ(sender->quit(kMixedReplyWait), "");
  EXPECT_EQ(receiver->quit(kMixedReplyWait), "");
  return us;
}

TEST(MixedEagerWindowTest, TheReceiverClearsUnaskedByTheSendersWindow) {
  // 160 KiB: over the sender's 128 KiB window (it cannot go early: it waits for its
  // clear-to-send) and over a quarter of it (the sender does not ask), but not over a quarter of
  // the receiver's own 16 MiB.
  constexpr uint64_t kSize = 160 * KiB;
  constexpr size_t kCount = 300;
  const uint64_t same = timed_one_way(128 * KiB, 128 * KiB, kSize, kCount);
  const uint64_t mixed = timed_one_way(128 * KiB, 16384 * KiB, kSize, kCount);
  std::printf(
      "%zu messages of 160 KiB, one at a time: %.1f ms with the same window, %.1f ms "
      "with the receiver's 128 times larger\n",
      kCount, static_cast<double>(same) / 1000, static_cast<double>(mixed) / 1000);
  // Waiting out the grace period is at least 6 s more for the 300 messages; the bound leaves the
  // second run room for a busy machine (ctest runs tests side by side: 107 and 313 ms seen).
  EXPECT_LT(mixed, 2 * same + static_cast<uint64_t>(scaled(1000).count()) * 1000)
      << "the receiver did not send the clear-to-sends unasked that the sender waited for";
  // The other way round the sender asks for each one (a quarter of 16 MiB is more than 160 KiB)
  // and the receiver sends none unasked: correct either way.
  (void)timed_one_way(16384 * KiB, 128 * KiB, kSize, 40);
}

}  // namespace
}  // namespace conformance
