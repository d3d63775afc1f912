// SPDX-License-Identifier: Apache-2.0
// The relay agent's splicer (relay/splice.h) over socketpairs: bytes intact and in order both
// ways, the bounded buffer (a receiver that does not read stops the splice reading), EOF passed
// on, and an error resetting both ends.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "relay/splice.h"
#include "tcp_test_sockets.h"

namespace mesh::relay {
namespace {

struct Pair {
  int outer;       // the endpoint's end (the test reads and writes here)
  UniqueFd inner;  // the splice's end
};

Pair make_pair(int bufsize = 0) {
  int sv[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  if (bufsize > 0) {
    for (int fd : sv) {
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof(bufsize));
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof(bufsize));
    }
  }
  fcntl(sv[0], F_SETFL, O_NONBLOCK);
  fcntl(sv[1], F_SETFL, O_NONBLOCK);
  return {sv[0], UniqueFd(sv[1])};
}

// Every case runs with pipes and splice(2) (zero copy, the default) and with the copy buffer.
class SpliceTest : public ::testing::TestWithParam<bool> {
 protected:
  static void SetUpTestSuite() { Splice::block_sigpipe_in_this_thread(); }
  bool zero_copy() const { return GetParam(); }
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 9));
  return v;
}

// Drives both directions until everything written has been read (or no progress for a while).
void shuttle(Splice& s, int up, int down, const std::vector<uint8_t>& up_out,
             const std::vector<uint8_t>& down_out, std::vector<uint8_t>* up_in,
             std::vector<uint8_t>* down_in) {
  size_t up_sent = 0, down_sent = 0;
  uint8_t buf[65536];
  for (int idle = 0; idle < 1000;) {
    bool progress = false;
    if (up_sent < up_out.size()) {
      const ssize_t n = write(up, up_out.data() + up_sent, up_out.size() - up_sent);
      if (n > 0) up_sent += static_cast<size_t>(n), progress = true;
    }
    if (down_sent < down_out.size()) {
      const ssize_t n = write(down, down_out.data() + down_sent, down_out.size() - down_sent);
      if (n > 0) down_sent += static_cast<size_t>(n), progress = true;
    }
    EXPECT_TRUE(s.pump()) << s.error();
    for (auto [fd, into] : {std::pair{down, down_in}, std::pair{up, up_in}}) {
      const ssize_t n = read(fd, buf, sizeof(buf));
      if (n > 0) into->insert(into->end(), buf, buf + n), progress = true;
    }
    if (up_in->size() == down_out.size() && down_in->size() == up_out.size()) return;
    idle = progress ? 0 : idle + 1;
  }
}

TEST_P(SpliceTest, CarriesBytesIntactAndInOrderBothWays) {
  Pair up = make_pair(), down = make_pair();
  Splice s(std::move(up.inner), std::move(down.inner), 4096, zero_copy());
  EXPECT_EQ(s.zero_copy(), zero_copy());  // small: many wraps
  const auto a = pattern(3 << 20, 1), b = pattern(1 << 20, 7);
  std::vector<uint8_t> got_up, got_down;
  shuttle(s, up.outer, down.outer, a, b, &got_up, &got_down);
  EXPECT_TRUE(got_down == a) << got_down.size() << " of " << a.size();
  EXPECT_TRUE(got_up == b) << got_up.size() << " of " << b.size();
  EXPECT_EQ(s.bytes(0), a.size());
  EXPECT_EQ(s.bytes(1), b.size());
  close(up.outer);
  close(down.outer);
}

TEST_P(SpliceTest, PreloadedBytesGoFirst) {
  Pair up = make_pair(), down = make_pair();
  Splice s(std::move(up.inner), std::move(down.inner), 1024, zero_copy());
  EXPECT_EQ(s.zero_copy(), zero_copy());
  const uint8_t req[3] = {'R', 'E', 'Q'}, rep[2] = {'O', 'K'};
  s.preload(1, req, sizeof(req));
  s.preload(0, rep, sizeof(rep));
  ASSERT_EQ(write(up.outer, "xy", 2), 2);
  ASSERT_TRUE(s.pump());
  char buf[16] = {};
  EXPECT_EQ(read(down.outer, buf, sizeof(buf)), 5);
  EXPECT_EQ(std::string(buf, 5), "REQxy");
  EXPECT_EQ(read(up.outer, buf, sizeof(buf)), 2);
  EXPECT_EQ(std::string(buf, 2), "OK");
  close(up.outer);
  close(down.outer);
}

TEST_P(SpliceTest, ABlockedReceiverStopsTheReadingAtTheBufferSize) {
  Pair up = make_pair(16384), down = make_pair(16384);
  const size_t cap = 8192;
  Splice s(std::move(up.inner), std::move(down.inner), cap, zero_copy());
  EXPECT_EQ(s.zero_copy(), zero_copy());
  // The downstream end never reads: the splice fills the socket buffers, then its own buffer,
  // then stops reading upstream (EPOLLIN no longer wanted), so the sender's writes block.
  const auto data = pattern(8 << 20, 3);
  size_t sent = 0;
  for (int i = 0; i < 200; ++i) {
    const ssize_t n = write(up.outer, data.data() + sent, data.size() - sent);
    if (n > 0) sent += static_cast<size_t>(n);
    ASSERT_TRUE(s.pump()) << s.error();
  }
  EXPECT_LT(sent, 1u << 20) << "the sender was never pushed back";
  EXPECT_EQ(s.events(0) & EPOLLIN, 0u) << "the full buffer still asks for upstream data";
  EXPECT_NE(s.events(1) & EPOLLOUT, 0u) << "bytes wait for the downstream end";
  // Held in the splice: at most its buffer.
  EXPECT_LE(s.bytes(0), sent);
  // Now the receiver reads: everything arrives intact.
  std::vector<uint8_t> got;
  uint8_t buf[65536];
  for (int idle = 0; got.size() < data.size() && idle < 2000;) {
    bool progress = false;
    if (sent < data.size()) {
      const ssize_t n = write(up.outer, data.data() + sent, data.size() - sent);
      if (n > 0) sent += static_cast<size_t>(n), progress = true;
    }
    ASSERT_TRUE(s.pump()) << s.error();
    const ssize_t n = read(down.outer, buf, sizeof(buf));
    if (n > 0) got.insert(got.end(), buf, buf + n), progress = true;
    idle = progress ? 0 : idle + 1;
  }
  EXPECT_TRUE(got == data) << got.size() << " of " << data.size();
  close(up.outer);
  close(down.outer);
}

TEST_P(SpliceTest, EofIsPassedOnAndThePairFinishesWhenBothSidesClosed) {
  Pair up = make_pair(), down = make_pair();
  Splice s(std::move(up.inner), std::move(down.inner), 4096, zero_copy());
  EXPECT_EQ(s.zero_copy(), zero_copy());
  ASSERT_EQ(write(up.outer, "last", 4), 4);
  shutdown(up.outer, SHUT_WR);
  EXPECT_TRUE(s.pump());  // the other direction is still open
  char buf[8];
  EXPECT_EQ(read(down.outer, buf, sizeof(buf)), 4);
  EXPECT_EQ(read(down.outer, buf, sizeof(buf)), 0) << "EOF passed on after the data";
  // The downstream end may still answer, then closes.
  ASSERT_EQ(write(down.outer, "bye", 3), 3);
  close(down.outer);
  EXPECT_FALSE(s.pump());
  EXPECT_TRUE(s.error().empty()) << s.error();
  EXPECT_EQ(read(up.outer, buf, sizeof(buf)), 3);
  EXPECT_EQ(read(up.outer, buf, sizeof(buf)), 0);
  close(up.outer);
}

TEST_P(SpliceTest, AnErrorOnOneSideResetsBoth) {
  Pair up = make_pair(), down = make_pair();
  Splice s(std::move(up.inner), std::move(down.inner), 4096, zero_copy());
  EXPECT_EQ(s.zero_copy(), zero_copy());
  close(down.outer);  // the downstream end vanishes
  ASSERT_EQ(write(up.outer, "data", 4), 4);
  EXPECT_FALSE(s.pump());
  EXPECT_NE(s.error().find("downstream write"), std::string::npos) << s.error();
  EXPECT_EQ(s.fd(0), -1);
  EXPECT_EQ(s.fd(1), -1);
  char buf[8];
  EXPECT_LE(read(up.outer, buf, sizeof(buf)), 0) << "the upstream end sees the failure";
  close(up.outer);
}

// A connected TCP pair over loopback (a reset needs TCP; tcp_test_sockets.h): the outer end
// blocking, the inner (the splice's) non-blocking.
Pair make_tcp_pair() {
  UniqueFd outer, inner;
  mesh::tcp::tcp_test::tcp_pair(&outer, &inner);
  set_nonblocking(inner.get(), true);
  return {outer.release(), std::move(inner)};
}

// The relayed handshake's case: the destination answers ("busy") and closes a socket whose
// input it did not read, which resets the connection, while the connector is still sending.
// TCP would have delivered the answer before the reset; the relay must too. Before, the
// failed write towards the reset side ended the pump before the answer was read, and a read
// that met the reset dropped what it had read: the connector saw a reset and no answer (the
// TCP relay's 16-connection burst, tests/softroce/guest/lane.sh).
TEST_P(SpliceTest, WhatASideSentBeforeItResetReachesTheOtherSideFirst) {
  // Once with the connector still sending (the write towards the reset side fails first), once
  // without (the read that meets the reset is the first failure).
  for (const bool still_sending : {true, false}) {
    SCOPED_TRACE(still_sending ? "connector still sending" : "connector silent");
    Pair up = make_tcp_pair(), down = make_tcp_pair();
    Splice s(std::move(up.inner), std::move(down.inner), 4096, zero_copy());
    ASSERT_EQ(write(up.outer, "hello", 5), 5);  // reaches the destination, which never reads it
    for (int i = 0; i < 100 && s.pump(); ++i) {
      char peek[8];
      if (recv(down.outer, peek, sizeof(peek), MSG_PEEK | MSG_DONTWAIT) == 5) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_EQ(write(down.outer, "busy", 4), 4);
    close(down.outer);  // unread input: a reset, not a FIN
    if (still_sending) {
      ASSERT_EQ(write(up.outer, "more", 4), 4);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the reset reaches the splice
    bool alive = true;
    for (int i = 0; i < 100 && alive; ++i) {
      alive = s.pump();
      if (alive) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_FALSE(alive) << "the pair did not end after the destination's reset";
    EXPECT_FALSE(s.error().empty());
    char buf[16] = {};
    timeval tv{2, 0};
    setsockopt(up.outer, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    const ssize_t n = read(up.outer, buf, sizeof(buf));
    EXPECT_EQ(n, 4) << "the connector got no answer before the reset (" << s.error() << ")";
    EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "busy");
    EXPECT_LE(read(up.outer, buf, sizeof(buf)), 0) << "then the failure";
    close(up.outer);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, SpliceTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "ZeroCopy" : "CopyBuffer";
                         });

}  // namespace
}  // namespace mesh::relay
