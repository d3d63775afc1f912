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

// The part count of a 1 MiB message from a sender with four data streams over `cables` cables
// (stream i from local address 127.0.0.(1 + i mod cables), as plan_data_streams lays rails out),
// read from the header the test receives on the raw sockets; every byte checked on the socket
// its part names.
uint16_t parts_of_a_large_message(size_t cables, size_t io_threads) {
  constexpr size_t kStreams = 4;
  constexpr size_t kSize = 1 << 20;
  handshake::ConnectedSockets s;
  UniqueFd ctl;
  std::vector<UniqueFd> raw(kStreams);
  tcp_pair(&s.control, &ctl);
  for (size_t i = 0; i < kStreams; ++i) {
    UniqueFd a;
    tcp_pair(&a, &raw[i], 0x7f000001 + static_cast<uint32_t>(i % cables));
    s.data.push_back(std::move(a));
  }
  s.peer = "raw receiver";
  s.local = "test";
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
    for (size_t i = 0; i < kStreams; ++i) {
      uint8_t buf[65536];
      const ssize_t n = recv(raw[i].get(), buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        got[i].insert(got[i].end(), buf, buf + n);
        total += static_cast<size_t>(n);
      }
    }
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

}  // namespace
}  // namespace mesh::tcp
