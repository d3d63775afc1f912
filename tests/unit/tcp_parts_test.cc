// SPDX-License-Identifier: Apache-2.0
// How many parts a large message goes in (tcp_connection.cc isend): over every data stream with
// I/O threads, which copy the parts in parallel; without them over the cables only. The sender
// is a TcpConnection over loopback TCP whose data sockets come from one, two or four source
// addresses (127.0.0.x, each a "cable"); the test reads what each socket carries.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "tcp_test_requests.h"
#include "tcp_test_sockets.h"
#include "transport/tcp/chunking.h"
#include "transport/tcp/io_pool.h"
#include "transport/tcp/tcp_connection.h"
#include "transport/tcp/wire.h"

namespace mesh::tcp {
namespace {

using namespace mesh::tcp::tcp_test;
using Clock = std::chrono::steady_clock;

// A sender's sockets whose other ends the test reads raw: the control socket's in *ctl, data
// stream i's in (*raw)[i], from local address 127.0.0.(1 + i mod cables) (as plan_data_streams
// lays rails out).
handshake::ConnectedSockets raw_receiver(size_t streams, size_t cables, UniqueFd* ctl,
                                         std::vector<UniqueFd>* raw) {
  handshake::ConnectedSockets s;
  raw->resize(streams);
  tcp_pair(&s.control, ctl);
  for (size_t i = 0; i < streams; ++i) {
    UniqueFd a;
    tcp_pair(&a, &(*raw)[i], 0x7f000001 + static_cast<uint32_t>(i % cables));
    s.data.push_back(std::move(a));
  }
  s.peer = "raw receiver";
  s.local = "test";
  return s;
}

// Appends what each raw socket has now to its buffer in *got; returns the bytes read.
size_t drain(const std::vector<UniqueFd>& raw, std::vector<std::vector<uint8_t>>* got) {
  size_t total = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    uint8_t buf[65536];
    const ssize_t n = recv(raw[i].get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      (*got)[i].insert((*got)[i].end(), buf, buf + n);
      total += static_cast<size_t>(n);
    }
  }
  return total;
}

// The part count of a 1 MiB message from a sender with four data streams over `cables` cables,
// read from the header the test receives on the raw sockets; every byte checked on the socket
// its part names.
uint16_t parts_of_a_large_message(size_t cables, size_t io_threads) {
  constexpr size_t kStreams = 4;
  constexpr size_t kSize = 1 << 20;
  UniqueFd ctl;
  std::vector<UniqueFd> raw;
  handshake::ConnectedSockets s = raw_receiver(kStreams, cables, &ctl, &raw);
  TcpOptions o;
  o.user_timeout_ms = 0;
  o.eager_bytes = 2 * kSize;  // goes on the eager budget: no clear-to-send needed
  o.io_threads = io_threads;
  TcpConnection conn(/*sender=*/true, std::move(s), o);
  auto msg = pattern(kSize, 5);
  void* req = nullptr;
  EXPECT_EQ(conn.isend(msg.data(), msg.size(), 0, nullptr, &req), ncclSuccess);
  EXPECT_NE(req, nullptr);
  if (req == nullptr) return 0;
  // Drain every raw socket while the sender moves its parts (the caller's test(), or the pool).
  std::vector<std::vector<uint8_t>> got(kStreams);
  bool done = false;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  size_t total = 0;
  while ((!done || total < kSize + kHeaderSize) && Clock::now() < deadline) {
    if (!done) {
      int d = 0;
      EXPECT_EQ(conn.test(static_cast<RequestHeader*>(req), &d, nullptr), ncclSuccess);
      done = d != 0;
    }
    total += drain(raw, &got);
  }
  EXPECT_TRUE(done) << "the send did not complete";
  EXPECT_GE(got[0].size(), kHeaderSize);
  if (got[0].size() < kHeaderSize) return 0;
  const MessageHeader h = decode_header(got[0].data());
  EXPECT_EQ(h.size, kSize);
  // Part i on stream i (the first message starts at stream 0), the header in front of part 0.
  for (uint32_t i = 0; i < h.nparts && i < kStreams; ++i) {
    const PartRange r = part_range(kSize, h.nparts, i);
    const size_t skip = i == 0 ? kHeaderSize : 0;
    EXPECT_EQ(got[i].size(), skip + r.length) << "stream " << i;
    if (got[i].size() != skip + r.length) continue;
    EXPECT_TRUE(std::equal(got[i].begin() + static_cast<std::ptrdiff_t>(skip), got[i].end(),
                           msg.begin() + static_cast<std::ptrdiff_t>(r.offset)))
        << "stream " << i;
  }
  return h.nparts;
}

// With I/O threads a large message is split over all data streams (the threads copy the parts
// in parallel); without them NCCL's thread copies every part itself, so the message is split
// only over the cables, whose NICs do move parts in parallel: a second part on one cable cost
// a sendmsg and a recv more and bought nothing (measurements.md, sixteenth pass: 1-4 MiB ring
// all-reduces 5-14% faster on 2 cores).
TEST(TcpParts, WithoutIoThreadsAMessageIsSplitOnlyOverTheCables) {
  EXPECT_EQ(parts_of_a_large_message(/*cables=*/1, /*io_threads=*/0), 1u);
  EXPECT_EQ(parts_of_a_large_message(2, 0), 2u);
  EXPECT_EQ(parts_of_a_large_message(4, 0), 4u);
  EXPECT_EQ(parts_of_a_large_message(1, 2), 4u) << "with I/O threads: all four streams";
  EXPECT_TRUE(IoPool::stop_if_idle()) << "a stream is still attached to the pool";
}

// Which data socket each message's header arrives on, for a sender with four data streams on
// one cable and no I/O threads (so every message here is one part): a one-part message under
// kSpreadMinBytes leaves the next one on its socket, a larger one moves it on (hello version
// 10, wire.h next_first_stream). Before, every message moved it on, and NCCL's small steps
// walked over all four sockets, each paying its own ACK per message.
TEST(TcpParts, SmallMessagesStayOnTheirDataSocketLargerOnesMoveOn) {
  constexpr size_t kStreams = 4;
  UniqueFd ctl;
  std::vector<UniqueFd> raw;
  handshake::ConnectedSockets s = raw_receiver(kStreams, /*cables=*/1, &ctl, &raw);
  TcpOptions o;
  o.user_timeout_ms = 0;
  o.eager_bytes = 1 << 20;  // all of them go on the eager budget: no clear-to-send needed
  const std::vector<size_t> sizes = {1024, 1024, 100, 16 * 1024, 1024, 0, 4095, 4096, 8, 5000, 8};
  // Message k's socket: 0 for the first, then the previous one's, moved on after 16 KiB,
  // 4096 and 5000 bytes.
  const std::vector<size_t> want = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3};
  TcpConnection conn(/*sender=*/true, std::move(s), o);
  std::vector<std::vector<uint8_t>> msgs;
  for (size_t k = 0; k < sizes.size(); ++k) msgs.push_back(pattern(sizes[k], uint8_t(k + 1)));
  std::vector<void*> reqs;
  for (auto& m : msgs) {
    void* req = nullptr;
    ASSERT_EQ(conn.isend(m.data(), m.size(), 0, nullptr, &req), ncclSuccess);
    ASSERT_NE(req, nullptr) << "message " << reqs.size() << " did not go eagerly";
    reqs.push_back(req);
  }
  size_t expected_bytes = 0;
  for (size_t n : sizes) expected_bytes += n + kHeaderSize;
  std::vector<std::vector<uint8_t>> got(kStreams);
  size_t total = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (total < expected_bytes && Clock::now() < deadline) {
    for (void* r : reqs) {
      int d = 0;
      ASSERT_EQ(conn.test(static_cast<RequestHeader*>(r), &d, nullptr), ncclSuccess);
    }
    total += drain(raw, &got);
  }
  ASSERT_EQ(total, expected_bytes);
  // Each socket carries whole messages, header then payload, in sequence order.
  std::vector<size_t> socket_of(sizes.size(), kStreams);
  for (size_t i = 0; i < kStreams; ++i) {
    size_t at = 0;
    while (at + kHeaderSize <= got[i].size()) {
      const MessageHeader h = decode_header(got[i].data() + at);
      ASSERT_LT(h.seq, sizes.size()) << "socket " << i;
      ASSERT_EQ(h.nparts, 1u) << "message " << h.seq;
      ASSERT_EQ(h.size, sizes[h.seq]) << "message " << h.seq;
      ASSERT_LE(at + kHeaderSize + h.size, got[i].size()) << "message " << h.seq;
      EXPECT_TRUE(std::equal(msgs[h.seq].begin(), msgs[h.seq].end(),
                             got[i].begin() + static_cast<std::ptrdiff_t>(at + kHeaderSize)))
          << "message " << h.seq;
      socket_of[h.seq] = i;
      at += kHeaderSize + h.size;
    }
    EXPECT_EQ(at, got[i].size()) << "socket " << i << " ends inside a message";
  }
  EXPECT_EQ(socket_of, want);
}

}  // namespace
}  // namespace mesh::tcp
