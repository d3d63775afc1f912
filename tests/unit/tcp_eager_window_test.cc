// SPDX-License-Identifier: Apache-2.0
// Window-checked eager sends (NCCL_MESH_TCP_EAGER_WINDOW, design.md "Eager sends"): a message
// beyond the small eager budget may go before its clear-to-send only when the receiver's kernel
// has already advertised TCP window room for all of it, so that no byte ever waits in the
// sender's socket behind a zero window (where TCP_USER_TIMEOUT would kill a healthy connection
// whose receiver is merely late). Real TCP connections over loopback: the window is the
// kernel's, as on a cable.
#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tcp_test_requests.h"
#include "tcp_test_sockets.h"
#include "transport/tcp/peer_window.h"
#include "transport/tcp/tcp_connection.h"
#include "util/socket_util.h"

namespace mesh::tcp {
namespace {

using namespace mesh::tcp::tcp_test;
using Clock = std::chrono::steady_clock;

// A tiny blind budget, so that what goes early goes on window room.
TcpOptions options(size_t window_bytes) {
  return window_test_options(1024, window_bytes);
}

// Bytes a socket holds that it has not sent (waiting for window), from the kernel.
uint32_t unsent_bytes(int fd) {
  return tcp_info_of(fd).tcpi_notsent_bytes;
}

// Writes to a non-blocking TCP socket whose peer reads nothing until it would block; returns the
// bytes the socket took.
uint64_t fill_until_blocked(int fd) {
  std::vector<uint8_t> data(64 * 1024, 1);
  uint64_t written = 0;
  for (;;) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) return written;
    written += static_cast<uint64_t>(n);
  }
}

// The room peer_window_room() reports once it reads zero, or after 5 s (the last ACK, with the
// closed window, may take a moment); false if the kernel did not answer.
bool settled_room(int fd, uint64_t* room) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  do {
    if (!peer_window_room(fd, room)) return false;
  } while (*room != 0 && Clock::now() < deadline);
  return true;
}

TEST(PeerWindow, AFreshLoopbackConnectionHasRoomAndASocketPairHasNone) {
  SKIP_WITHOUT_WINDOWS();
  UniqueFd a, b;
  ASSERT_NO_FATAL_FAILURE(tcp_pair(&a, &b));
  uint64_t room = 0;
  ASSERT_TRUE(peer_window_room(a.get(), &room)) << "this kernel's TCP_INFO has no tcpi_snd_wnd";
  EXPECT_GE(room, 16u * 1024) << "a new loopback connection advertised under 16 KiB";
  // A peer that reads nothing: once the window is full and bytes wait in the socket, the
  // room is zero (not the window's size).
  set_nonblocking(a.get(), true);
  const uint64_t written = fill_until_blocked(a.get());
  ASSERT_GT(written, 0u);
  ASSERT_TRUE(settled_room(a.get(), &room));
  EXPECT_EQ(room, 0u) << "room left with " << written << " bytes written to a peer that reads none";
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  UniqueFd u0(fds[0]), u1(fds[1]);
  EXPECT_FALSE(peer_window_room(u0.get(), &room)) << "a UNIX socket answered";
}

TEST(PeerWindow, ARememberedEdgeCoversWhatTheKernelPromisedAndNoMore) {
  SKIP_WITHOUT_WINDOWS();
  UniqueFd a, b;
  ASSERT_NO_FATAL_FAILURE(tcp_pair(&a, &b));
  WindowEdge edge;
  EXPECT_FALSE(edge.covers(0, 1)) << "an edge never measured covered a byte";
  uint64_t room = 0;
  ASSERT_TRUE(edge.measure(a.get(), 0, &room));
  ASSERT_GE(room, 16u * 1024);
  EXPECT_TRUE(edge.covers(0, room));
  EXPECT_FALSE(edge.covers(0, room + 1));
  // Half of it sent: the same edge still covers the other half, without asking the kernel.
  set_nonblocking(a.get(), true);
  std::vector<uint8_t> data(room / 2, 7);
  ASSERT_EQ(send(a.get(), data.data(), data.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(data.size()));
  const uint64_t asked = peer_window_queries();
  EXPECT_TRUE(edge.covers(data.size(), room - data.size()));
  EXPECT_FALSE(edge.covers(data.size(), room - data.size() + 1));
  EXPECT_EQ(peer_window_queries(), asked) << "covers() asked the kernel";
  // A peer that reads nothing: once its window is full, a new measurement moves the edge no
  // further than the bytes already sent.
  const uint64_t sent = data.size() + fill_until_blocked(a.get());
  ASSERT_TRUE(settled_room(a.get(), &room));
  ASSERT_TRUE(edge.measure(a.get(), sent, &room));
  EXPECT_EQ(room, 0u);
  EXPECT_FALSE(edge.covers(sent, 1)) << "the edge moved past a full window";
}

// Once a WindowEdge has seen its socket with nothing unacknowledged it knows how many bytes the
// socket took before the stream's count began (here: a 100-byte handshake), and then one TCP_INFO
// read gives the edge where the queue and the window took two syscalls. The edge must be the
// same as the two-syscall answer at every state: fresh, part sent, and a full window with bytes
// waiting in the socket (room 0, never more).
TEST(PeerWindow, ACalibratedEdgeAsksWithOneSyscallAndAgreesWithTheQueue) {
  SKIP_WITHOUT_WINDOWS();
  UniqueFd a, b;
  ASSERT_NO_FATAL_FAILURE(tcp_pair(&a, &b));
  std::vector<uint8_t> hello(100, 1);
  ASSERT_EQ(send(a.get(), hello.data(), hello.size(), MSG_NOSIGNAL), 100);
  ASSERT_EQ(recv(b.get(), hello.data(), hello.size(), MSG_WAITALL), 100);
  WindowEdge edge;
  uint64_t room = 0, truth = 0;
  // Wait until the handshake's bytes are acknowledged (loopback: at once), so that the first
  // ask may learn the offset.
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!edge.calibrated() && Clock::now() < deadline) {
    ASSERT_TRUE(edge.measure(a.get(), 0, &room, /*exact=*/true));
  }
  ASSERT_TRUE(edge.calibrated()) << "5 s with the handshake's 100 bytes unacknowledged";
  // The window's right edge only moves forward (a window update may arrive at any time), so an
  // answer between two two-syscall answers lies between them.
  uint64_t later = 0;
  ASSERT_TRUE(peer_window_room(a.get(), &truth));
  uint64_t before = peer_window_syscalls();
  ASSERT_TRUE(edge.measure(a.get(), 0, &room, true));
  EXPECT_EQ(peer_window_syscalls() - before, 1u) << "a calibrated edge still asked for the queue";
  ASSERT_TRUE(peer_window_room(a.get(), &later));
  EXPECT_GE(room, truth) << "fresh connection";
  EXPECT_LE(room, later) << "fresh connection";
  // Part of the window sent and read: the edge is where the queue and window say it is.
  set_nonblocking(a.get(), true);
  std::vector<uint8_t> data(room / 2, 7);
  ASSERT_EQ(send(a.get(), data.data(), data.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(data.size()));
  std::vector<uint8_t> sink(data.size());
  ASSERT_EQ(recv(b.get(), sink.data(), sink.size(), MSG_WAITALL),
            static_cast<ssize_t>(sink.size()));
  uint64_t sent = data.size();
  ASSERT_TRUE(peer_window_room(a.get(), &truth));
  ASSERT_TRUE(edge.measure(a.get(), sent, &room, true));
  ASSERT_TRUE(peer_window_room(a.get(), &later));
  EXPECT_GE(room, truth) << "after " << sent << " bytes";
  EXPECT_LE(room, later) << "after " << sent << " bytes";
  EXPECT_TRUE(edge.covers(sent, room));
  EXPECT_FALSE(edge.covers(sent, room + 1));
  // A peer that reads nothing more: once the window is full and bytes wait in the socket, the
  // one-syscall answer is 0 too.
  sent += fill_until_blocked(a.get());
  ASSERT_TRUE(settled_room(a.get(), &truth));
  ASSERT_EQ(truth, 0u);
  before = peer_window_syscalls();
  ASSERT_TRUE(edge.measure(a.get(), sent, &room, true));
  EXPECT_EQ(peer_window_syscalls() - before, 1u);
  EXPECT_EQ(room, 0u) << "room past a full window, " << sent << " bytes taken";
  EXPECT_FALSE(edge.covers(sent, 1));
}

// An ask that finds bytes unacknowledged, or whose caller's count may be stale (another thread
// may be moving queued bytes), learns no offset: it keeps asking with two syscalls.
TEST(PeerWindow, AnEdgeLearnsNoOffsetFromAnInexactCount) {
  SKIP_WITHOUT_WINDOWS();
  UniqueFd a, b;
  ASSERT_NO_FATAL_FAILURE(tcp_pair(&a, &b));
  WindowEdge edge;
  uint64_t room = 0;
  const uint64_t before = peer_window_syscalls();
  ASSERT_TRUE(edge.measure(a.get(), 0, &room, /*exact=*/false));
  ASSERT_TRUE(edge.measure(a.get(), 0, &room, /*exact=*/false));
  EXPECT_FALSE(edge.calibrated());
  EXPECT_EQ(peer_window_syscalls() - before, 4u);
  // A peer that reads nothing: the socket holds unsent bytes, so even an exact count learns
  // nothing (SIOCOUTQ is not 0).
  set_nonblocking(a.get(), true);
  const uint64_t sent = fill_until_blocked(a.get());
  ASSERT_TRUE(edge.measure(a.get(), sent, &room, /*exact=*/true));
  EXPECT_FALSE(edge.calibrated()) << "learnt an offset with " << sent << " bytes in the socket";
}

// The eager-send check asks the kernel (two syscalls per socket) only when a message would pass
// the edge it remembered; a flow of messages that fit goes on without asking per message. (It
// used to ask for both sockets of every message: 4 of the ~10 syscalls a message cost;
// measurements.md, issue 28.)
TEST(TcpEagerWindow, TheKernelIsAskedOnlyWhenTheRememberedEdgeRunsOut) {
  SKIP_WITHOUT_WINDOWS();
  constexpr int kMessages = 256;
  constexpr size_t kSize = 32 * 1024;
  Endpoints e = connect_tcp(options(1024 * 1024));
  const uint64_t before = peer_window_queries();
  const uint64_t syscalls_before = peer_window_syscalls();
  for (int i = 0; i < kMessages; ++i) {
    auto msg = pattern(kSize, static_cast<uint8_t>(i));
    std::vector<uint8_t> buf(kSize);
    void* rreq = post_recv(*e.recv, buf);
    void* sreq = post_send(*e.send, msg);
    // Goes at once on window room; or (rarely: a window the receiver has not reopened yet)
    // asks for its clear-to-send, which the posted receive answers.
    ASSERT_NE(sreq, nullptr) << "message " << i << " neither went nor asked";
    ASSERT_EQ(ncclSuccess, wait_done(*e.send, sreq)) << "message " << i;
    ASSERT_EQ(ncclSuccess, wait_done(*e.recv, rreq)) << "message " << i;
    ASSERT_EQ(buf, msg) << "message " << i;
  }
  const uint64_t asked = peer_window_queries() - before;
  const uint64_t syscalls = peer_window_syscalls() - syscalls_before;
  std::printf(
      "%d messages of 32 KiB on window room: the kernel was asked %llu times, in %llu "
      "syscalls\n",
      kMessages, static_cast<unsigned long long>(asked), static_cast<unsigned long long>(syscalls));
  EXPECT_GE(asked, 1u) << "the window was never measured: nothing went on window room";
  // The old check asked for both sockets of every message: 2 x 256 (510 measured). The edge
  // is asked again when a stream's bytes pass it: with the loopback windows of 64 KiB or more
  // that a drained receiver advertises, at most every other message on each of the two data
  // streams (28-30 asks in a release build, 88-130 under ThreadSanitizer on a loaded host).
  EXPECT_LE(asked, static_cast<uint64_t>(kMessages))
      << "the sender still asks the kernel for (nearly) every socket of every message";
  // Each of the two streams' edges learns its offset at an ask that finds its bytes
  // acknowledged and none queued (here: the first ask, or one soon after, since every message
  // is received before the next is sent); from then on an ask is one TCP_INFO read, not two
  // syscalls (peer_window.h). Before: exactly 2 x asks.
  EXPECT_LE(syscalls, asked + asked / 4 + 4)
      << "the asks still read the socket's queue as well as TCP_INFO";
}

TEST(TcpEagerWindow, ALargerSendGoesBeforeTheClearToSendWhenTheWindowHasRoom) {
  SKIP_WITHOUT_WINDOWS();
  Endpoints e = connect_tcp(options(1024 * 1024));
  auto msg = pattern(12 * 1024, 1);  // over the 1 KiB budget, within a new connection's window
  void* sreq = post_send(*e.send, msg);
  ASSERT_NE(sreq, nullptr) << "a 12 KiB send with window room waited for the clear-to-send";
  ASSERT_EQ(ncclSuccess, wait_done(*e.send, sreq));
  std::vector<uint8_t> buf(16 * 1024, 0xee);
  void* rreq = post_recv(*e.recv, buf);
  int size = 0;
  ASSERT_EQ(ncclSuccess, wait_done(*e.recv, rreq, &size));
  EXPECT_EQ(size, static_cast<int>(msg.size()));
  EXPECT_TRUE(std::equal(msg.begin(), msg.end(), buf.begin()));
}

TEST(TcpEagerWindow, OffOrWithoutAnAnswerTheSendWaits) {
  auto msg = pattern(12 * 1024, 2);
  Endpoints off = connect_tcp(options(0));
  EXPECT_EQ(post_send(*off.send, msg), nullptr) << "NCCL_MESH_TCP_EAGER_WINDOW=0 sent early";
  // UNIX socket pairs: the kernel cannot say what the peer takes, so nothing goes on window.
  handshake::ConnectedSockets s, r;
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  s.control.reset(fds[0]);
  r.control.reset(fds[1]);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  s.data.emplace_back(fds[0]);
  r.data.emplace_back(fds[1]);
  TcpConnection unix_send(true, std::move(s), options(1024 * 1024));
  TcpConnection unix_recv(false, std::move(r), options(1024 * 1024));
  EXPECT_EQ(post_send(unix_send, msg), nullptr) << "sent early without a window to check";
}

// Messages of `bytes` under a `window` (and no grace period: a message its receiver clears
// unasked asks at once, tcp_cts_on_request_test): the first `fit` go before any
// receive is posted and complete; the next asks for its clear-to-send, is in flight, but none of
// its bytes may go, so it cannot complete until the receiver posts. Then everything arrives.
void expect_bound(size_t window, size_t bytes, size_t fit) {
  TcpOptions o = options(window);
  o.ask_grace_ns = 0;
  Endpoints e = connect_tcp(o);
  std::vector<std::vector<uint8_t>> msgs;
  for (size_t i = 0; i <= fit; ++i) msgs.push_back(pattern(bytes, static_cast<uint8_t>(10 + i)));
  for (size_t i = 0; i < fit; ++i) {
    void* req = post_send(*e.send, msgs[i]);
    ASSERT_NE(req, nullptr) << "message " << i << " of " << fit << " within the bound waited";
    ASSERT_TRUE(done_within(*e.send, req, 5000)) << "message " << i;
  }
  void* last = post_send(*e.send, msgs[fit]);
  ASSERT_NE(last, nullptr) << "a message beyond the bound neither asked nor went";
  EXPECT_FALSE(done_within(*e.send, last, 300))
      << "message " << fit + 1 << " of " << bytes << " bytes went past the bound";
  std::vector<std::vector<uint8_t>> bufs(fit + 1, std::vector<uint8_t>(bytes));
  std::vector<void*> rreqs;
  for (auto& b : bufs) rreqs.push_back(post_recv(*e.recv, b));
  ASSERT_EQ(ncclSuccess, wait_done(*e.send, last));
  for (size_t i = 0; i <= fit; ++i) {
    ASSERT_EQ(ncclSuccess, wait_done(*e.recv, rreqs[i])) << "message " << i;
    EXPECT_EQ(bufs[i], msgs[i]) << "message " << i;
  }
}

// A message of at least half the window gets its clear-to-send when its receive is posted
// (wire.h): such messages may be a window ahead of those records. 12 KiB messages charge 12352
// bytes (header included): one fits in 20 KiB, the second waits.
TEST(TcpEagerWindow, BytesAheadOfTheClearToSendsAreBoundedByTheWindow) {
  SKIP_WITHOUT_WINDOWS();
  expect_bound(20 * 1024, 12 * 1024, 1);
}

// A smaller one returns its charge only with a credit, which its receiver sends once it has
// read the header (tcp_connection.cc credit_rule): four times the window, so that the credit
// asked at half of it comes back before the sender stops, and asked rarely (in a ring such
// messages keep a step or two unread whatever the bound). 4 KiB messages under a 10 KiB window
// charge 4160 bytes: nine fit in 40 KiB, the tenth waits (under twice the window four went and
// the fifth waited, under the window alone two and the third).
TEST(TcpEagerWindow, SmallerMessagesAreBoundedByFourTimesTheWindow) {
  SKIP_WITHOUT_WINDOWS();
  expect_bound(10 * 1024, 4 * 1024, 9);
}

// A receiver whose sockets' windows never grow past 64 KiB (the kernel grows one only when its
// reader drained more than it in one round trip; here SO_RCVBUF holds it): a 64 KiB message and
// its header never fit one of them, and each such message asked for its clear-to-send and waited
// for the receiver (4 ranks, 256 KiB all-reduce: a quarter of one rank's messages, all run
// long; measurements.md, twenty-ninth pass). In two parts over two sockets it fits: it goes before
// the receiver posts, and arrives whole.
TEST(TcpEagerWindow, AMessageOneSocketsWindowCannotTakeGoesInPartsThatFit) {
  SKIP_WITHOUT_WINDOWS();
  constexpr int kMessages = 32;
  constexpr size_t kSize = 64 * 1024;
  Endpoints e = connect_tcp(options(1024 * 1024), 4, 48 * 1024);
  const uint32_t window = tcp_info_of(e.send_fds[1]).tcpi_snd_wnd;
  ASSERT_LT(window, kSize + kHeaderSize)
      << "SO_RCVBUF did not hold the receiver's window under one message: the test proves nothing";
  int waited = 0;  // messages that did not go before their receive was posted
  for (int i = 0; i < kMessages; ++i) {
    auto msg = pattern(kSize, static_cast<uint8_t>(i));
    void* sreq = post_send(*e.send, msg);
    ASSERT_NE(sreq, nullptr) << "message " << i << " neither went nor asked";
    // The receiver's kernel takes the whole message while its process posts nothing yet.
    const bool early = done_within(*e.send, sreq, 300);
    if (!early) ++waited;
    std::vector<uint8_t> buf(kSize + 4096, 0xee);
    void* rreq = post_recv(*e.recv, buf);
    int size = 0;
    // One that waited needs both ends driven: the receiver reads its ask, the sender the answer.
    bool sent = early, received = false;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!(sent && received) && Clock::now() < deadline) {
      sent = sent || test_once(*e.send, sreq);
      received = received || test_once(*e.recv, rreq, &size);
    }
    ASSERT_TRUE(sent && received) << "message " << i << " did not arrive within 10 s";
    ASSERT_EQ(size, static_cast<int>(kSize)) << "message " << i;
    ASSERT_TRUE(std::equal(msg.begin(), msg.end(), buf.begin())) << "message " << i;
    ASSERT_TRUE(std::all_of(buf.begin() + kSize, buf.end(), [](uint8_t b) { return b == 0xee; }))
        << "message " << i << ": bytes written past its end";
  }
  std::printf("%d messages of 64 KiB under %u-byte windows: %d waited for their receiver\n",
              kMessages, window, waited);
  // Before: every one (the one socket it rode never had room for it). A window update the
  // receiver's kernel has not sent yet may still hold back one now and then.
  EXPECT_LE(waited, kMessages / 8) << "messages that fit in parts still waited for the receiver";
}

// Where every socket is full (a receiver that is behind), the message tried in one part, then
// two, three and four asks each socket's kernel once: the tries after the first answer from the
// edge just measured (before: the first socket's kernel again for each part count, four queries
// where one told it all).
TEST(TcpEagerWindow, AMessageTriedInMorePartsAsksEachSocketsKernelOnce) {
  SKIP_WITHOUT_WINDOWS();
  Endpoints e = connect_tcp(options(16 * 1024 * 1024), 4);
  // The data sockets filled behind the connection's back (their bytes never read: the test
  // looks only at how the sender decides), until each window is closed.
  for (size_t i = 1; i < e.send_fds.size(); ++i) {
    set_nonblocking(e.send_fds[i], true);
    ASSERT_GT(fill_until_blocked(e.send_fds[i]), 0u);
    uint64_t room = 1;
    ASSERT_TRUE(settled_room(e.send_fds[i], &room));
    ASSERT_EQ(room, 0u) << "socket " << i << " still has room";
  }
  auto msg = pattern(64 * 1024, 3);
  const uint64_t before = peer_window_queries();
  void* req = post_send(*e.send, msg);
  const uint64_t queries = peer_window_queries() - before;
  EXPECT_NE(req, nullptr) << "a message no window could take neither asked nor went";
  EXPECT_EQ(queries, 1u) << "the full first socket was asked again for each part count tried";
}

TEST(TcpEagerWindow, ALateReceiverNeverLeavesBytesWaitingInTheSendersSockets) {
  SKIP_WITHOUT_WINDOWS();
  // A receiver that posts nothing (a rank still computing): the sender keeps offering 48 KiB
  // messages, with no bound but the windows. What goes early must all have left the sender's
  // sockets (taken by the receiver's kernel); the first message that would not fit waits for
  // its clear-to-send instead of queueing behind a zero window.
  Endpoints e = connect_tcp(options(16 * 1024 * 1024));
  std::vector<std::vector<uint8_t>> msgs;
  for (int i = 0; i < 32; ++i) msgs.push_back(pattern(48 * 1024, static_cast<uint8_t>(i)));
  std::vector<void*> sreqs;
  size_t early = 0;  // messages that went (and completed) with no receive posted
  for (auto& m : msgs) {
    void* req = post_send(*e.send, m);
    ASSERT_NE(req, nullptr) << "message " << sreqs.size() << " neither went nor asked";
    sreqs.push_back(req);
    // One that does not complete waits for its clear-to-send (it asked): stop offering.
    if (!done_within(*e.send, req, 300)) break;
    ++early;
  }
  ASSERT_GE(early, 1u) << "nothing went on window room";
  for (int fd : e.send_fds) {
    // Nagle and autocorking may hold a last segment for a moment; a zero window holds it for good.
    const auto settle = Clock::now() + std::chrono::seconds(1);
    while (unsent_bytes(fd) != 0 && Clock::now() < settle) std::this_thread::yield();
    EXPECT_EQ(unsent_bytes(fd), 0u) << "bytes wait in socket " << fd;
  }
  ASSERT_LT(early, msgs.size()) << "32 x 48 KiB fit the windows: the test proves nothing";
  // Once the receiver posts, everything arrives, in order and whole.
  std::vector<std::vector<uint8_t>> bufs(msgs.size(), std::vector<uint8_t>(48 * 1024));
  size_t sent = sreqs.size(), sdone = early, rdone = 0;
  std::vector<void*> rreqs;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (rdone < msgs.size() && Clock::now() < deadline) {
    if (rreqs.size() < msgs.size() && rreqs.size() < rdone + 8) {
      rreqs.push_back(post_recv(*e.recv, bufs[rreqs.size()]));
    }
    if (sent < msgs.size() && sent < rdone + 8) {
      if (void* req = post_send(*e.send, msgs[sent])) {
        sreqs.push_back(req);
        ++sent;
      }
    }
    if (sdone < sent && test_once(*e.send, sreqs[sdone])) ++sdone;
    if (rdone < rreqs.size() && test_once(*e.recv, rreqs[rdone])) {
      EXPECT_EQ(bufs[rdone], msgs[rdone]) << "message " << rdone;
      ++rdone;
    }
  }
  EXPECT_EQ(rdone, msgs.size());
  EXPECT_EQ(sdone, msgs.size());
}

}  // namespace
}  // namespace mesh::tcp
