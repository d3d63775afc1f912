// SPDX-License-Identifier: Apache-2.0
// Clear-to-sends on request (wire.h, design.md "Clear-to-sends on request"): where messages can
// go on TCP window room, the sender asks for the clear-to-sends it needs instead of the receiver
// sending one per posted receive; a message that cannot go asks and waits in flight, and the
// receiver skips the sequence numbers of messages sent before theirs; and a sender that closes
// with a clear-to-send unread still delivers what it sent. Both ends as TcpConnection
// over loopback TCP, and each end against a peer that the test plays on the raw sockets.
#include <gtest/gtest.h>
#include <linux/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tcp_test_requests.h"
#include "tcp_test_sockets.h"
#include "transport/tcp/tcp_connection.h"
#include "transport/tcp/wire.h"
#include "util/lingering_close.h"

namespace mesh::tcp {
namespace {

using namespace mesh::tcp::tcp_test;

TcpOptions options(size_t window_bytes) {
  return window_test_options(64 * 1024, window_bytes);
}

// A sender that asks at once also for a message its receiver clears unasked (no grace period,
// wire.h): the cases that drive the ask itself with such a message.
TcpOptions asking_options(size_t window_bytes) {
  TcpOptions o = options(window_bytes);
  o.ask_grace_ns = 0;
  return o;
}

TcpOptions grace_options(size_t window_bytes, int64_t grace_ms) {
  TcpOptions o = options(window_bytes);
  o.ask_grace_ns = grace_ms * 1000000;
  return o;
}

// Bytes a TCP socket has received (for a sender's control socket: clear-to-send records).
uint64_t bytes_received(int fd) {
  return tcp_info_of(fd).tcpi_bytes_received;
}

bool readable_within(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1;
}

// Exactly n bytes from a raw (blocking) socket, within 10 s.
bool read_exact(int fd, uint8_t* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    if (!readable_within(fd, 10000)) return false;
    const ssize_t k = recv(fd, out + got, n - got, 0);
    if (k <= 0) return false;
    got += static_cast<size_t>(k);
  }
  return true;
}

// A data socket's header (kHeaderSize) or, on the control socket, an ask (the header's fields
// alone, kAskSize), then any payload bytes behind it.
void write_record(int fd, const MessageHeader& h, bool ask, const std::vector<uint8_t>& payload) {
  uint8_t b[kHeaderSize];
  ask ? encode_ask(h, b) : encode_header(h, b);
  ASSERT_TRUE(send_all(fd, b, ask ? kAskSize : kHeaderSize));
  if (!payload.empty()) {
    ASSERT_TRUE(send_all(fd, payload.data(), payload.size()));
  }
}

void write_header(int fd, const MessageHeader& h, const std::vector<uint8_t>& payload = {}) {
  write_record(fd, h, /*ask=*/false, payload);
}

void write_ask(int fd, const MessageHeader& h, const std::vector<uint8_t>& payload = {}) {
  write_record(fd, h, /*ask=*/true, payload);
}

void write_cts(int fd, const ClearToSend& c) {
  uint8_t b[kCtsSize];
  encode_cts(c, b);
  ASSERT_TRUE(send_all(fd, b, sizeof(b)));
}

// A few test() calls, as NCCL's proxy makes in its loop: a receiver waiting for a header reads
// the asks on its control socket every few calls (tcp_connection.cc kAskPolls). True if done.
bool test_a_few(TcpConnection& c, void* req) {
  for (int i = 0; i < 16; ++i) {
    if (test_once(c, req)) return true;
  }
  return false;
}

// One TcpConnection end; the test holds the other end's raw sockets (control, then one data:
// every header and payload travels on it, the control socket carries asks and clear-to-sends).
struct HalfRaw {
  std::unique_ptr<TcpConnection> conn;
  UniqueFd control;
  UniqueFd data;
  int conn_control = -1;  // the connection's own control socket (it owns it), to inspect
};

HalfRaw half_raw(bool sender, const TcpOptions& o) {
  handshake::ConnectedSockets s;
  HalfRaw h;
  tcp_pair(&s.control, &h.control);
  h.conn_control = s.control.get();
  UniqueFd a;
  tcp_pair(&a, &h.data);
  s.data.push_back(std::move(a));
  s.peer = "raw peer";
  s.local = "test";
  h.conn = std::make_unique<TcpConnection>(sender, std::move(s), o);
  return h;
}

// Message 0 from the raw sender, the first with kFlagOnRequest: before it the receiver sends one
// clear-to-send per posted receive (read off the control socket here), after it only those asked
// for.
void first_message_on_request(HalfRaw& h) {
  uint8_t c[kCtsSize];
  std::vector<uint8_t> b0(4096);
  void* r0 = post_recv(*h.conn, b0);
  ASSERT_TRUE(read_exact(h.control.get(), c, sizeof(c)));
  EXPECT_EQ(decode_cts(c).seq, 0u);
  EXPECT_EQ(decode_cts(c).capacity, 4096u);
  auto p0 = pattern(100, 1);
  ASSERT_NO_FATAL_FAILURE(write_header(h.data.get(), {0, kFlagOnRequest, 1, 100}, p0));
  ASSERT_EQ(ncclSuccess, wait_done(*h.conn, r0));
  EXPECT_TRUE(std::equal(p0.begin(), p0.end(), b0.begin()));
}

// A 1 KiB send, which goes at once within the eager budget, then a 4 MiB one beyond the 1 MiB
// window bound, which waits for its clear-to-send (and asks for it, at once with
// asking_options); the first is tested done.
struct TwoSends {
  std::vector<uint8_t> small = pattern(1024, 1);
  std::vector<uint8_t> large = pattern(4 << 20, 2);
  void* s0 = nullptr;
  void* s1 = nullptr;
};

void post_small_then_asking(HalfRaw& h, TwoSends* t) {
  t->s0 = post_send(*h.conn, t->small);
  t->s1 = post_send(*h.conn, t->large);
  ASSERT_NE(t->s0, nullptr);
  ASSERT_NE(t->s1, nullptr);
  ASSERT_TRUE(done_within(*h.conn, t->s0, 5000));
}

// test() until it returns an error (at most 10 s), which it returns; the request must not
// complete meanwhile (`never` says why not).
ncclResult_t error_of(TcpConnection& c, void* req, const char* never) {
  ncclResult_t rc = ncclSuccess;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (rc == ncclSuccess && std::chrono::steady_clock::now() < deadline) {
    int done = 0;
    rc = c.test(static_cast<RequestHeader*>(req), &done, nullptr);
    EXPECT_EQ(done, 0) << never;
    if (done) break;
  }
  return rc;
}

// The receiver posts first (as NCCL's proxy posts receives ahead) with buffers of `capacity`
// bytes (0: the message's size), then the sender sends: returns how many clear-to-send records
// the sender's control socket received.
uint64_t clear_to_sends_for_a_flow(const TcpOptions& o, int messages, size_t size,
                                   size_t capacity = 0) {
  Endpoints e = connect_tcp(o);
  const uint64_t before = bytes_received(e.send_fds[0]);
  for (int i = 0; i < messages; ++i) {
    auto msg = pattern(size, static_cast<uint8_t>(i));
    std::vector<uint8_t> buf(std::max(size, capacity));
    void* rreq = post_recv(*e.recv, buf);
    void* sreq = nullptr;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((sreq = post_send(*e.send, msg)) == nullptr &&
           std::chrono::steady_clock::now() < deadline) {
      test_once(*e.recv, rreq);
    }
    EXPECT_NE(sreq, nullptr) << "message " << i;
    if (sreq == nullptr) return 0;
    EXPECT_EQ(ncclSuccess, wait_done(*e.send, sreq)) << "message " << i;
    EXPECT_EQ(ncclSuccess, wait_done(*e.recv, rreq)) << "message " << i;
    EXPECT_TRUE(std::equal(msg.begin(), msg.end(), buf.begin())) << "message " << i;
  }
  // The last clear-to-sends written may still be on their way.
  const auto settle = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < settle) std::this_thread::yield();
  return (bytes_received(e.send_fds[0]) - before) / kCtsSize;
}

TEST(TcpCtsOnRequest, AFlowThatGoesOnWindowRoomNeedsFewClearToSends) {
  SKIP_WITHOUT_WINDOWS();
  constexpr int kMessages = 256;
  // 32 KiB messages go at once (budget or window room); the receiver answers only the headers
  // that ask for credit, about one in NCCL_NET_MAX_REQUESTS / 2.
  const uint64_t on_request = clear_to_sends_for_a_flow(options(1024 * 1024), kMessages, 32768);
  EXPECT_LE(on_request, static_cast<uint64_t>(kMessages / 4))
      << "the receiver still sends a clear-to-send for most receives";
  EXPECT_GE(on_request, 1u) << "no credit ever came back: the bounds would stop the sender";
  // Without window checks the receiver sends one per receive, as before.
  const uint64_t proactive = clear_to_sends_for_a_flow(options(0), kMessages, 32768);
  EXPECT_EQ(proactive, static_cast<uint64_t>(kMessages));
  std::printf(
      "clear-to-sends for %d messages of 32 KiB: %llu on request, %llu with window "
      "checks off\n",
      kMessages, static_cast<unsigned long long>(on_request),
      static_cast<unsigned long long>(proactive));
}

// NCCL posts every receive of its Simple protocol with its whole step slot (1 MiB by default),
// whatever the message: the buffer is at least half the window, but the messages are small, so
// they go early and their charges come back by credit. A record per receive, sent unasked
// because of the buffer alone, was one per message (hello version 8): 13-50% of the plugin's time
// in a 3-4 rank ring of 21-85 KiB steps (measurements.md, twenty-fourth pass).
TEST(TcpCtsOnRequest, SmallMessagesIntoLargeBuffersNeedFewClearToSends) {
  SKIP_WITHOUT_WINDOWS();
  constexpr int kMessages = 256;
  const uint64_t records =
      clear_to_sends_for_a_flow(options(1024 * 1024), kMessages, 32768, 1024 * 1024);
  EXPECT_LE(records, static_cast<uint64_t>(kMessages / 4))
      << "large buffers still get a clear-to-send each, unasked, for small messages";
  EXPECT_GE(records, 1u) << "no credit ever came back: the bounds would stop the sender";
  // Messages of half the window into such buffers: one each, as before (few fit in the bound).
  const uint64_t large =
      clear_to_sends_for_a_flow(options(1024 * 1024), 32, 512 * 1024, 1024 * 1024);
  EXPECT_GE(large, 31u) << "messages of half the window lost their unasked records";
  std::printf(
      "clear-to-sends into 1 MiB buffers: %llu for %d messages of 32 KiB, %llu for 32 of "
      "512 KiB\n",
      static_cast<unsigned long long>(records), kMessages, static_cast<unsigned long long>(large));
}

// One connection carries collectives of any size one after the other (runs of small messages,
// runs of half-window ones, single ones in between), into receives NCCL posts ahead on slots of
// one size. Both ends must agree on which receive is owed its record unasked (wire.h
// owes_unasked): a sender that waits for a record its receiver does not owe waits out the
// grace period, 10 s here (a sender that waits after any two messages fails this at message 12),
// and one that asks where the record is owed anyway is harmless. (The receiver's record when
// it reads a large header is mostly masked here by the next receive it posts, whose record
// brings the earlier ones: TheReceiverAnswersAsksAndCreditsOnly checks it alone.) A 256 KiB
// window keeps the bytes small enough for the sanitizer builds.
TEST(TcpCtsOnRequest, MixedSizesIntoSlotSizedBuffersNeverWaitForARecordNotOwed) {
  SKIP_WITHOUT_WINDOWS();
  constexpr size_t kWindow = 256 * 1024;
  Endpoints e = connect_tcp(grace_options(kWindow, 10000));
  // Every transition: long runs of small messages (so that the receives posted ahead were
  // posted after small headers only) before one, two and three large ones, and a single small
  // one between large ones.
  std::vector<size_t> kSizes;
  for (size_t large : {1, 2, 3}) {
    for (int k = 0; k < 12; ++k) kSizes.push_back(k % 3 == 0 ? 1024 : 16384);
    // A whole window: none goes early, each waits for its record.
    for (size_t k = 0; k < large; ++k) kSizes.push_back(kWindow);
    kSizes.push_back(4096);
    kSizes.push_back(200000);
  }
  constexpr size_t kMessages = 200;
  constexpr size_t kAhead = 8;
  auto size_of = [&](size_t i) { return kSizes[i % kSizes.size()]; };
  std::vector<std::vector<uint8_t>> rbuf(kAhead, std::vector<uint8_t>(kWindow));
  std::vector<std::vector<uint8_t>> smsg(kAhead);
  void* rreq[kAhead] = {};
  void* sreq[kAhead] = {};
  size_t r_posted = 0, r_done = 0, s_posted = 0, s_done = 0, prepared = kMessages;
  const auto start = std::chrono::steady_clock::now();
  while (r_done < kMessages || s_done < kMessages) {
    ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5))
        << "sent " << s_done << ", received " << r_done << " of " << kMessages
        << ": a message waits for a record its receiver does not owe";
    while (r_posted < kMessages && r_posted - r_done < kAhead) {
      rreq[r_posted % kAhead] = post_recv(*e.recv, rbuf[r_posted % kAhead]);
      ++r_posted;
    }
    while (s_posted < kMessages && s_posted - s_done < kAhead) {
      std::vector<uint8_t>& m = smsg[s_posted % kAhead];
      if (prepared != s_posted) {
        m = pattern(size_of(s_posted), static_cast<uint8_t>(s_posted));
        prepared = s_posted;
      }
      void* q = post_send(*e.send, m);
      if (q == nullptr) break;  // retry later
      sreq[s_posted % kAhead] = q;
      ++s_posted;
    }
    while (s_done < s_posted && test_once(*e.send, sreq[s_done % kAhead])) ++s_done;
    while (r_done < r_posted) {
      int size = 0;
      if (!test_once(*e.recv, rreq[r_done % kAhead], &size)) break;
      const auto want = pattern(size_of(r_done), static_cast<uint8_t>(r_done));
      ASSERT_EQ(static_cast<size_t>(size), want.size()) << "message " << r_done;
      ASSERT_TRUE(std::equal(want.begin(), want.end(), rbuf[r_done % kAhead].begin()))
          << "message " << r_done;
      ++r_done;
    }
  }
}

TEST(TcpCtsOnRequest, AMessageTheWindowCannotTakeAsksAndGoesOnceTheReceiverPosts) {
  SKIP_WITHOUT_WINDOWS();
  Endpoints e = connect_tcp(asking_options(1024 * 1024));
  auto big = pattern(8 << 20, 5);  // beyond the 1 MiB bound: it must wait for its clear-to-send
  auto small = pattern(512, 6);    // within the budget, but behind a message that waits
  void* s0 = post_send(*e.send, big);
  ASSERT_NE(s0, nullptr) << "a message that cannot go early neither asked nor went";
  void* s1 = post_send(*e.send, small);
  ASSERT_NE(s1, nullptr);
  EXPECT_FALSE(done_within(*e.send, s0, 300)) << "8 MiB went before any receive was posted";
  EXPECT_FALSE(done_within(*e.send, s1, 50)) << "a message overtook one waiting for its turn";
  std::vector<uint8_t> b0(big.size()), b1(small.size());
  void* r0 = post_recv(*e.recv, b0);
  void* r1 = post_recv(*e.recv, b1);
  // Moved by the caller (no pool): both ends progress from this thread.
  bool d[4] = {};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!(d[0] && d[1] && d[2] && d[3]) && std::chrono::steady_clock::now() < deadline) {
    if (!d[0]) d[0] = test_once(*e.send, s0);
    if (!d[1]) d[1] = test_once(*e.send, s1);
    if (!d[2]) d[2] = test_once(*e.recv, r0);
    if (!d[3]) d[3] = test_once(*e.recv, r1);
  }
  ASSERT_TRUE(d[0] && d[1] && d[2] && d[3]);
  EXPECT_EQ(b0, big);
  EXPECT_EQ(b1, small);
}

TEST(TcpCtsOnRequest, TheSenderAsksOnTheWireAndSendsOnceItsClearToSendArrives) {
  SKIP_WITHOUT_WINDOWS();
  HalfRaw h = half_raw(/*sender=*/true, asking_options(1024 * 1024));
  TwoSends t;
  ASSERT_NO_FATAL_FAILURE(post_small_then_asking(h, &t));
  const auto& m0 = t.small;
  const auto& m1 = t.large;
  uint8_t b[kHeaderSize];
  ASSERT_TRUE(read_exact(h.data.get(), b, sizeof(b)));
  MessageHeader hd = decode_header(b);
  EXPECT_EQ(hd.seq, 0u);
  EXPECT_EQ(hd.flags, kFlagOnRequest);
  EXPECT_EQ(hd.nparts, 1u);
  std::vector<uint8_t> got(1024);
  ASSERT_TRUE(read_exact(h.data.get(), got.data(), got.size()));
  EXPECT_EQ(got, m0);
  ASSERT_TRUE(read_exact(h.control.get(), b, kAskSize));
  hd = decode_header(b);
  EXPECT_EQ(hd.seq, 1u);
  EXPECT_EQ(hd.flags, kFlagAsk | kFlagOnRequest) << "the second message did not ask";
  EXPECT_EQ(hd.size, m1.size());
  EXPECT_FALSE(readable_within(h.data.get(), 200))
      << "header or payload sent before the clear-to-send";
  EXPECT_FALSE(readable_within(h.control.get(), 0)) << "more than the ask on the control socket";
  // One clear-to-send skips message 0 (sent before its own) and clears message 1.
  ASSERT_NO_FATAL_FAILURE(write_cts(h.control.get(), {1, 0, m1.size()}));
  // The sender moves its bytes from test() (no pool): read them on another thread meanwhile.
  got.assign(m1.size(), 0);
  std::thread reader([&] {
    ASSERT_TRUE(read_exact(h.data.get(), b, sizeof(b)));
    hd = decode_header(b);
    EXPECT_TRUE(read_exact(h.data.get(), got.data(), got.size()));
  });
  EXPECT_EQ(ncclSuccess, wait_done(*h.conn, t.s1));
  reader.join();
  EXPECT_EQ(hd.seq, 1u);
  EXPECT_EQ(hd.flags, kFlagOnRequest);
  EXPECT_EQ(hd.nparts, 1u);
  EXPECT_EQ(got, m1);
}

// A message that asked learns from its clear-to-send that the receiver's buffer is smaller: its
// header goes out alone (the receiver fails with its own message, as for any size mismatch) and
// the send fails. (A first version of the data-stream headers failed the send at once and never
// sent the header: the receiver waited for it until NCCL's timeout, caught by the conformance
// case MessageLargerThanReceiveBufferFailsTheReceiver.)
TEST(TcpCtsOnRequest, AnAskedMessageTooLargeForItsBufferSendsItsHeaderAloneAndFails) {
  SKIP_WITHOUT_WINDOWS();
  HalfRaw h = half_raw(/*sender=*/true, asking_options(1024 * 1024));
  TwoSends t;
  ASSERT_NO_FATAL_FAILURE(post_small_then_asking(h, &t));
  std::vector<uint8_t> first(kHeaderSize + t.small.size());
  ASSERT_TRUE(read_exact(h.data.get(), first.data(), first.size()));
  uint8_t b[kAskSize];
  ASSERT_TRUE(read_exact(h.control.get(), b, sizeof(b)));
  ASSERT_EQ(decode_header(b).flags, kFlagAsk | kFlagOnRequest);
  ASSERT_NO_FATAL_FAILURE(write_cts(h.control.get(), {1, 0, 1 << 20}));
  EXPECT_EQ(error_of(*h.conn, t.s1, "a send larger than the receiver's buffer completed"),
            ncclInvalidUsage);
  uint8_t header[kHeaderSize];
  ASSERT_TRUE(read_exact(h.data.get(), header, sizeof(header))) << "the header did not go out";
  const MessageHeader hd = decode_header(header);
  EXPECT_EQ(hd.seq, 1u);
  EXPECT_EQ(hd.size, t.large.size());
  EXPECT_FALSE(readable_within(h.data.get(), 200)) << "payload sent into a buffer too small";
}

// isend until it returns a request (NCCL calls it again after "retry later"), at most `ms`
// milliseconds; the request, or nullptr.
void* send_when_taken(TcpConnection& c, std::vector<uint8_t>& data, int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  void* req = nullptr;
  while (req == nullptr && std::chrono::steady_clock::now() < until) req = post_send(c, data);
  return req;
}

// Completes a send of `size` payload bytes by the connection under test while the raw side reads
// them (the sender moves its bytes from test(), so the read runs on another thread): returns
// the header and the payload as they came off the data socket.
std::vector<uint8_t> complete_and_read(HalfRaw& h, void* req, size_t size) {
  std::vector<uint8_t> got(kHeaderSize + size);
  std::thread reader([&] { EXPECT_TRUE(read_exact(h.data.get(), got.data(), got.size())); });
  EXPECT_EQ(ncclSuccess, wait_done(*h.conn, req));
  reader.join();
  return got;
}

// Message 0 from the connection under test, a sender: cleared by the raw receiver first, so it
// goes whatever the window; its header and payload are read off the data socket.
void first_send_cleared(HalfRaw& h, std::vector<uint8_t> msg) {
  ASSERT_NO_FATAL_FAILURE(write_cts(h.control.get(), {0, 0, msg.size()}));
  void* s0 = send_when_taken(*h.conn, msg, 10000);
  ASSERT_NE(s0, nullptr);
  EXPECT_EQ(decode_header(complete_and_read(h, s0, msg.size()).data()).seq, 0u);
}

// A message of at least half the sender's window after one that large: its receiver sends the
// clear-to-send unasked (when it posts the receive, or once it reads the header before: wire.h),
// so the sender waits for that record without asking (an ask was a syscall at each end for a
// record already on its way), answering "retry later", and sends as soon as it arrives.
TEST(TcpCtsOnRequest, AMessageItsReceiverClearsUnaskedWaitsForThatRecordWithoutAsking) {
  SKIP_WITHOUT_WINDOWS();
  HalfRaw h = half_raw(/*sender=*/true, grace_options(1024 * 1024, 60000));
  TwoSends t;
  ASSERT_NO_FATAL_FAILURE(first_send_cleared(h, pattern(512 * 1024, 3)));
  EXPECT_EQ(send_when_taken(*h.conn, t.large, 200), nullptr) << "4 MiB taken without its record";
  EXPECT_FALSE(readable_within(h.control.get(), 0)) << "it asked for a record sent unasked";
  EXPECT_FALSE(readable_within(h.data.get(), 0)) << "bytes left before the clear-to-send";
  ASSERT_NO_FATAL_FAILURE(write_cts(h.control.get(), {1, 0, t.large.size()}));
  t.s1 = send_when_taken(*h.conn, t.large, 10000);
  ASSERT_NE(t.s1, nullptr) << "the clear-to-send came and the message still waits";
  const std::vector<uint8_t> got = complete_and_read(h, t.s1, t.large.size());
  const MessageHeader hd = decode_header(got.data());
  EXPECT_EQ(hd.seq, 1u);
  EXPECT_EQ(hd.size, t.large.size());
  EXPECT_TRUE(std::equal(t.large.begin(), t.large.end(), got.begin() + kHeaderSize));
  EXPECT_FALSE(readable_within(h.control.get(), 0)) << "an ask after all";
}

// After two smaller messages nothing is owed unasked (the receiver's buffer alone does not tell
// the message's size: wire.h owes_unasked), so a large message that cannot go asks at once,
// grace period or not. With hello version 8 it waited the whole grace period here.
TEST(TcpCtsOnRequest, AMessageOfHalfTheWindowAfterTwoSmallerOnesAsksAtOnce) {
  SKIP_WITHOUT_WINDOWS();
  HalfRaw h = half_raw(/*sender=*/true, grace_options(1024 * 1024, 60000));
  TwoSends t;
  for (int i = 0; i < 2; ++i) {
    void* s = post_send(*h.conn, t.small);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(done_within(*h.conn, s, 5000));
    std::vector<uint8_t> got(kHeaderSize + t.small.size());
    ASSERT_TRUE(read_exact(h.data.get(), got.data(), got.size()));
  }
  t.s1 = send_when_taken(*h.conn, t.large, 2000);
  ASSERT_NE(t.s1, nullptr) << "it waits for a record its receiver does not owe";
  uint8_t b[kAskSize];
  ASSERT_TRUE(read_exact(h.control.get(), b, sizeof(b)));
  const MessageHeader ask = decode_header(b);
  EXPECT_EQ(ask.seq, 2u);
  EXPECT_EQ(ask.flags, kFlagAsk | kFlagOnRequest);
  EXPECT_FALSE(readable_within(h.data.get(), 0)) << "bytes left before the clear-to-send";
  ASSERT_NO_FATAL_FAILURE(write_cts(h.control.get(), {2, 0, t.large.size()}));
  const std::vector<uint8_t> got = complete_and_read(h, t.s1, t.large.size());
  EXPECT_EQ(decode_header(got.data()).seq, 2u);
  EXPECT_TRUE(std::equal(t.large.begin(), t.large.end(), got.begin() + kHeaderSize));
}

// The record does not come within the grace period (a receiver late by more, or a buffer too
// small for the message, which the receiver then does not clear unasked): the sender asks, and
// the small buffer fails both sides as it would have without the wait, instead of a send that
// never starts.
TEST(TcpCtsOnRequest, AMessageWhoseUnaskedRecordDoesNotComeAsksAfterTheGracePeriod) {
  SKIP_WITHOUT_WINDOWS();
  constexpr int kGraceMs = 40;
  HalfRaw h = half_raw(/*sender=*/true, grace_options(1024 * 1024, kGraceMs));
  TwoSends t;
  ASSERT_NO_FATAL_FAILURE(first_send_cleared(h, pattern(512 * 1024, 3)));
  const auto start = std::chrono::steady_clock::now();
  t.s1 = send_when_taken(*h.conn, t.large, 10000);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_NE(t.s1, nullptr) << "no ask after the grace period";
  EXPECT_GE(waited, std::chrono::milliseconds(kGraceMs)) << "asked before the grace period";
  uint8_t b[kAskSize];
  ASSERT_TRUE(read_exact(h.control.get(), b, sizeof(b)));
  const MessageHeader ask = decode_header(b);
  EXPECT_EQ(ask.seq, 1u);
  EXPECT_EQ(ask.flags, kFlagAsk | kFlagOnRequest);
  EXPECT_EQ(ask.size, t.large.size());
  ASSERT_NO_FATAL_FAILURE(write_cts(h.control.get(), {1, 0, 1 << 20}));
  EXPECT_EQ(error_of(*h.conn, t.s1, "a send larger than the receiver's buffer completed"),
            ncclInvalidUsage);
}

// The header travels on a data socket and the ask on the control socket, so the ask may come
// second (the clear-to-send sent when the receive was posted let the header go): it is dropped,
// and the connection goes on. A header on the control socket, where only asks travel, fails it.
TEST(TcpCtsOnRequest, AnAskBehindItsHeaderIsDroppedAHeaderOnTheControlSocketFails) {
  SKIP_WITHOUT_WINDOWS();
  HalfRaw h = half_raw(/*sender=*/false, options(1024 * 1024));
  const int ctl = h.control.get();
  const int data = h.data.get();
  uint8_t c[kCtsSize];
  std::vector<uint8_t> b0(4096), b1(4096);
  void* r0 = post_recv(*h.conn, b0);
  ASSERT_TRUE(read_exact(ctl, c, sizeof(c)));
  auto p0 = pattern(100, 1);
  ASSERT_NO_FATAL_FAILURE(write_header(data, {0, kFlagOnRequest, 1, 100}, p0));
  ASSERT_EQ(ncclSuccess, wait_done(*h.conn, r0));
  ASSERT_NO_FATAL_FAILURE(write_ask(ctl, {0, kFlagAsk | kFlagOnRequest, 0, 100}));
  void* r1 = post_recv(*h.conn, b1);
  EXPECT_FALSE(test_a_few(*h.conn, r1)) << "the stale ask failed the connection";
  EXPECT_FALSE(readable_within(ctl, 100)) << "a clear-to-send for a message already received";
  auto p1 = pattern(200, 2);
  ASSERT_NO_FATAL_FAILURE(write_header(data, {1, kFlagOnRequest, 1, 200}, p1));
  ASSERT_EQ(ncclSuccess, wait_done(*h.conn, r1));
  EXPECT_TRUE(std::equal(p1.begin(), p1.end(), b1.begin()));
  // A header proper on the control socket.
  std::vector<uint8_t> b2(4096);
  void* r2 = post_recv(*h.conn, b2);
  ASSERT_NO_FATAL_FAILURE(write_ask(ctl, {2, kFlagOnRequest, 1, 10}, pattern(10, 3)));
  EXPECT_EQ(wait_done(*h.conn, r2), ncclRemoteError);
}

// A header whose padding is not zero (wire.h: reserved) fails the receive as a corrupted stream,
// before any payload byte is taken for the message; a well-formed one before it arrives intact.
TEST(TcpCtsOnRequest, AHeaderWithPaddingNotZeroFailsTheReceiver) {
  HalfRaw h = half_raw(/*sender=*/false, options(1024 * 1024));
  const int data = h.data.get();
  std::vector<uint8_t> b0(4096), b1(4096);
  void* r0 = post_recv(*h.conn, b0);
  auto p0 = pattern(100, 1);
  ASSERT_NO_FATAL_FAILURE(write_header(data, {0, kFlagOnRequest, 1, 100}, p0));
  ASSERT_EQ(ncclSuccess, wait_done(*h.conn, r0));
  EXPECT_TRUE(std::equal(p0.begin(), p0.end(), b0.begin()));
  void* r1 = post_recv(*h.conn, b1);
  uint8_t bad[kHeaderSize];
  encode_header({1, kFlagOnRequest, 1, 100}, bad);
  bad[kHeaderSize - 1] = 1;
  ASSERT_TRUE(send_all(data, bad, sizeof(bad)));
  auto p1 = pattern(100, 2);
  ASSERT_TRUE(send_all(data, p1.data(), p1.size()));
  EXPECT_EQ(wait_done(*h.conn, r1), ncclRemoteError);
}

TEST(TcpCtsOnRequest, AClearToSendThatSkipsAMessageThatAskedFailsTheSender) {
  SKIP_WITHOUT_WINDOWS();
  HalfRaw h = half_raw(/*sender=*/true, asking_options(1024 * 1024));
  TwoSends t;
  ASSERT_NO_FATAL_FAILURE(post_small_then_asking(h, &t));
  // Skipping message 1 claims its header arrived before its clear-to-send: it never left.
  ASSERT_NO_FATAL_FAILURE(write_cts(h.control.get(), {2, 0, 1 << 20}));
  EXPECT_EQ(error_of(*h.conn, t.s1, "the message completed without its clear-to-send"),
            ncclRemoteError);
}

TEST(TcpCtsOnRequest, TheReceiverAnswersAsksAndCreditsOnly) {
  SKIP_WITHOUT_WINDOWS();
  HalfRaw h = half_raw(/*sender=*/false, options(1024 * 1024));
  const int ctl = h.control.get();
  const int data = h.data.get();
  uint8_t c[kCtsSize];
  ASSERT_NO_FATAL_FAILURE(first_message_on_request(h));
  // After it: none for a plain receive...
  std::vector<uint8_t> b1(4096);
  void* r1 = post_recv(*h.conn, b1);
  EXPECT_FALSE(test_once(*h.conn, r1));
  EXPECT_FALSE(readable_within(ctl, 200)) << "a clear-to-send nobody asked for";
  // ...one for an ask, answered once its receive is posted...
  ASSERT_NO_FATAL_FAILURE(write_ask(ctl, {1, kFlagAsk | kFlagOnRequest, 0, 1000}));
  ASSERT_NO_FATAL_FAILURE(write_ask(ctl, {2, kFlagAsk | kFlagOnRequest, 0, 50}));
  EXPECT_FALSE(test_a_few(*h.conn, r1));
  ASSERT_TRUE(read_exact(ctl, c, sizeof(c)));
  EXPECT_EQ(decode_cts(c).seq, 1u);
  EXPECT_FALSE(readable_within(ctl, 200)) << "answered an ask whose receive is not posted";
  auto p1 = pattern(1000, 2);
  ASSERT_NO_FATAL_FAILURE(write_header(data, {1, kFlagOnRequest, 1, 1000}, p1));
  ASSERT_EQ(ncclSuccess, wait_done(*h.conn, r1));
  EXPECT_TRUE(std::equal(p1.begin(), p1.end(), b1.begin()));
  std::vector<uint8_t> b2(4096);
  void* r2 = post_recv(*h.conn, b2);
  ASSERT_TRUE(read_exact(ctl, c, sizeof(c)));
  EXPECT_EQ(decode_cts(c).seq, 2u) << "the ask read before its receive was posted";
  auto p2 = pattern(50, 3);
  ASSERT_NO_FATAL_FAILURE(write_header(data, {2, kFlagOnRequest, 1, 50}, p2));
  ASSERT_EQ(ncclSuccess, wait_done(*h.conn, r2));
  // ...and one for a header that asks for credit back.
  std::vector<uint8_t> b3(4096);
  void* r3 = post_recv(*h.conn, b3);
  auto p3 = pattern(60, 4);
  ASSERT_NO_FATAL_FAILURE(write_header(data, {3, kFlagOnRequest | kFlagCredit, 1, 60}, p3));
  ASSERT_EQ(ncclSuccess, wait_done(*h.conn, r3));
  ASSERT_TRUE(read_exact(ctl, c, sizeof(c)));
  EXPECT_EQ(decode_cts(c).seq, 3u);
  // A buffer of at least half the window gets one unasked only after a message that large
  // (NCCL posts its whole step slot for small messages too): none while the last header read
  // was small; once the header of such a message is read, the next receive gets its record
  // (not the receive just read: its header came, so the next record skips it); and while the
  // last header read was large, a large buffer gets it when it is posted. Few such messages fit
  // in the sender's bound, so their charges should come back when the receive is posted.
  std::vector<uint8_t> b4(512 * 1024), b5(512 * 1024), b6(512 * 1024);
  void* r4 = post_recv(*h.conn, b4);
  void* r5 = post_recv(*h.conn, b5);
  EXPECT_FALSE(test_once(*h.conn, r4));
  EXPECT_FALSE(readable_within(ctl, 100)) << "a clear-to-send unasked after a small message";
  auto p4 = pattern(512 * 1024, 5);
  std::thread writer([&] { write_header(data, {4, kFlagOnRequest, 1, p4.size()}, p4); });
  EXPECT_EQ(ncclSuccess, wait_done(*h.conn, r4));
  writer.join();
  EXPECT_TRUE(std::equal(p4.begin(), p4.end(), b4.begin()));
  ASSERT_TRUE(read_exact(ctl, c, sizeof(c)));
  EXPECT_EQ(decode_cts(c).seq, 5u) << "after a large header, the next receive's record";
  EXPECT_EQ(decode_cts(c).capacity, b5.size());
  void* r6 = post_recv(*h.conn, b6);
  ASSERT_TRUE(read_exact(ctl, c, sizeof(c)));
  EXPECT_EQ(decode_cts(c).seq, 6u) << "posted after a large header: its record at once";
  EXPECT_FALSE(readable_within(ctl, 100)) << "more records than receives";
  // Two, not one: a pipeline's step ends with a smaller message, and the next step's first
  // large one is still owed its record; after two small ones nothing is.
  auto small = pattern(100, 6);
  ASSERT_NO_FATAL_FAILURE(write_header(data, {5, kFlagOnRequest, 1, 100}, small));
  ASSERT_EQ(ncclSuccess, wait_done(*h.conn, r5));
  std::vector<uint8_t> b7(512 * 1024), b8(512 * 1024);
  void* r7 = post_recv(*h.conn, b7);
  ASSERT_TRUE(read_exact(ctl, c, sizeof(c)));
  EXPECT_EQ(decode_cts(c).seq, 7u) << "a large one, then a small one: still owed";
  ASSERT_NO_FATAL_FAILURE(write_header(data, {6, kFlagOnRequest, 1, 100}, small));
  ASSERT_EQ(ncclSuccess, wait_done(*h.conn, r6));
  void* r8 = post_recv(*h.conn, b8);
  EXPECT_FALSE(test_once(*h.conn, r7));
  EXPECT_FALSE(readable_within(ctl, 100)) << "a record unasked after two small messages";
  EXPECT_FALSE(test_once(*h.conn, r8));
}

// Half of the window its options give it, which on a real connection is the sender's (its hello,
// plugin.cc accept): the sender leaves out asks, and bounds what goes early, by the same number.
// A 384 KiB buffer under a 1 MiB window was cleared unasked when the line was a quarter. The
// message before (half the window, into a buffer that large) is large by any of these windows,
// so only the buffer decides (wire.h owes_unasked; its own receive got its record when posted:
// the one before it, message 0, is small, but "before the first" counts as large).
TEST(TcpCtsOnRequest, TheReceiverClearsUnaskedByTheWindowItIsGiven) {
  SKIP_WITHOUT_WINDOWS();
  struct Case {
    size_t window, buffer;
    bool cleared;
  };
  for (const Case& c : {Case{1 << 20, 512 << 10, true}, Case{1 << 20, 384 << 10, false},
                        Case{4 << 20, 512 << 10, false}, Case{4 << 20, 2 << 20, true}}) {
    SCOPED_TRACE("window " + std::to_string(c.window) + ", buffer " + std::to_string(c.buffer));
    HalfRaw h = half_raw(/*sender=*/false, options(c.window));
    ASSERT_NO_FATAL_FAILURE(first_message_on_request(h));
    std::vector<uint8_t> b1(c.window / 2);
    void* r1 = post_recv(*h.conn, b1);
    uint8_t rec[kCtsSize];
    ASSERT_TRUE(read_exact(h.control.get(), rec, sizeof(rec)));
    EXPECT_EQ(decode_cts(rec).seq, 1u);
    auto p1 = pattern(b1.size(), 7);
    std::thread writer([&] { write_header(h.data.get(), {1, kFlagOnRequest, 1, p1.size()}, p1); });
    EXPECT_EQ(ncclSuccess, wait_done(*h.conn, r1));
    writer.join();
    EXPECT_FALSE(readable_within(h.control.get(), 0)) << "a record for the large message read";
    std::vector<uint8_t> b2(c.buffer);
    void* r2 = post_recv(*h.conn, b2);
    EXPECT_FALSE(test_once(*h.conn, r2));
    EXPECT_EQ(readable_within(h.control.get(), 200), c.cleared);
  }
}

// The receiver reads its control socket for asks once kAskPolls (8) test() calls found a header
// missing since the last header arrived. A flow whose every header arrives after one missed poll
// never reads it, however many messages it carries (counted across messages it read every 8th
// miss: 0.04-0.10 failed reads per message in a 3-rank ring); a header that stays missing has
// its ask read within 8 calls. The test sees the reads through a malformed ask planted on the
// control socket, which fails the receiver as soon as it is read.
TEST(TcpCtsOnRequest, TheReceiverReadsAsksOnlyAfterEightPollsWithoutAHeader) {
  SKIP_WITHOUT_WINDOWS();
  HalfRaw h = half_raw(/*sender=*/false, options(1024 * 1024));
  const int ctl = h.control.get();
  const int data = h.data.get();
  ASSERT_NO_FATAL_FAILURE(first_message_on_request(h));
  // Flags 0: no ask. Read, it fails the connection ("malformed ask").
  ASSERT_NO_FATAL_FAILURE(write_ask(ctl, {7, 0, 0, 8}));
  constexpr int kMessages = 24;  // three times kAskPolls misses, one per message
  for (uint32_t seq = 1; seq <= kMessages; ++seq) {
    std::vector<uint8_t> b(4096);
    void* r = post_recv(*h.conn, b);
    ASSERT_FALSE(test_once(*h.conn, r)) << "message " << seq << ": done before it was sent";
    auto p = pattern(200, static_cast<uint8_t>(seq));
    ASSERT_NO_FATAL_FAILURE(write_header(data, {seq, kFlagOnRequest, 1, 200}, p));
    ASSERT_EQ(ncclSuccess, wait_done(*h.conn, r))
        << "message " << seq << ": the receiver read its control socket although each header "
        << "arrived after one missed poll";
    ASSERT_TRUE(std::equal(p.begin(), p.end(), b.begin())) << "message " << seq;
  }
  // A header that stays missing: within 8 calls the receiver reads the asks (and here fails).
  std::vector<uint8_t> b(4096);
  void* r = post_recv(*h.conn, b);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the planted record is there
  ncclResult_t rc = ncclSuccess;
  int calls = 0;
  while (rc == ncclSuccess && calls < 8) {
    int done = 0;
    rc = h.conn->test(static_cast<RequestHeader*>(r), &done, nullptr);
    ++calls;
    EXPECT_EQ(done, 0);
  }
  EXPECT_EQ(rc, ncclRemoteError) << "8 calls without a header and the asks were not read";
}

// Before a message that would ask for credit the sender reads its control socket, since a record
// there returns charges and may spare the ask; but only where one can be on its way (a credit or
// ask of its own unanswered, the first request window, a receiver that sends them unasked).
// With every credit answered and read that read could only fail: 0.23-0.35 failed recv() per
// message in a 3-rank 256 KiB ring. The test plays the receiver on the raw sockets, answering
// each credit as TcpConnection does, then plants a malformed record once the sender has read
// every answer: the next message that wants credit must go without reading it (its isend
// succeeds and its header asks for credit), and the one after, whose credit is unanswered,
// reads it and fails.
TEST(TcpCtsOnRequest, TheSenderReadsForCreditOnlyWhereARecordCanBeOnItsWay) {
  SKIP_WITHOUT_WINDOWS();
  HalfRaw h = half_raw(/*sender=*/true, options(1024 * 1024));
  TcpConnection& conn = *h.conn;
  const UniqueFd& ctl = h.control;
  const UniqueFd& data = h.data;
  const int sender_ctl = h.conn_control;  // read here with FIONREAD
  auto msg = pattern(1024, 9);  // within the 64 KiB eager budget: every message goes at once
  bool planted = false;
  int credits_after = 0;  // messages that asked for credit after the planted record
  for (uint32_t seq = 0; seq < 400; ++seq) {
    void* req = nullptr;
    const ncclResult_t rc = conn.isend(msg.data(), msg.size(), 0, nullptr, &req);
    if (planted && rc != ncclSuccess) {
      EXPECT_EQ(rc, ncclRemoteError);
      EXPECT_EQ(credits_after, 1)
          << "the sender read its control socket before a message that wanted credit although "
             "every credit it had asked for was answered and read";
      return;
    }
    ASSERT_EQ(rc, ncclSuccess) << "message " << seq;
    ASSERT_NE(req, nullptr) << "message " << seq << " did not go on the eager budget";
    ASSERT_EQ(ncclSuccess, wait_done(conn, req)) << "message " << seq;
    uint8_t hb[kHeaderSize];
    ASSERT_TRUE(read_exact(data.get(), hb, sizeof(hb))) << "message " << seq;
    const MessageHeader header = decode_header(hb);
    ASSERT_EQ(header.seq, seq);
    std::vector<uint8_t> got(msg.size());
    ASSERT_TRUE(read_exact(data.get(), got.data(), got.size())) << "message " << seq;
    const bool credit = (header.flags & kFlagCredit) != 0;
    if (credit && planted) ++credits_after;
    // The receiver's answer to a credit: its clear-to-send (it skips the earlier messages,
    // which all went before theirs).
    if (credit && !planted) {
      ASSERT_NO_FATAL_FAILURE(write_cts(ctl.get(), {seq, 0, 4096}));
    }
    int unread = -1;
    ASSERT_EQ(ioctl(sender_ctl, FIONREAD, &unread), 0);
    if (!planted && !credit && seq >= 2 * NCCL_NET_MAX_REQUESTS && unread == 0) {
      ASSERT_NO_FATAL_FAILURE(write_cts(ctl.get(), {seq, 1, 4096}));  // reserved 1: malformed
      std::this_thread::sleep_for(std::chrono::milliseconds(20));     // there before the next
      planted = true;
    }
  }
  FAIL() << (planted ? "the planted record was never read" : "the sender never read an answer");
}

// One credit asked at a time: it returns every charge before it, so a sender whose credit is
// not answered yet asks again only a quarter of its bound, or of the request window, later.
// 32 KiB messages (32832 bytes with the header) are under half the 1 MiB window, so their bound
// is 4 MiB: all 32 of a request window go early with no receive posted, and from half of that
// window ahead they ask for credit. Every message past such a point asked until the answer came
// (0.19-0.26 records per message in a 4-rank 256 KiB ring); now one in eight (a quarter of the
// request window). The test plays the receiver on the raw sockets: it reads each message off the
// data socket, and answers nothing until the end.
TEST(TcpCtsOnRequest, ACreditIsAskedAgainOnlyAQuarterOfTheBoundLater) {
  SKIP_WITHOUT_WINDOWS();
  HalfRaw h = half_raw(/*sender=*/true, options(1024 * 1024));
  auto msg = pattern(32 * 1024, 3);
  std::vector<uint32_t> credits;
  uint32_t seq = 0;
  auto send_and_read = [&]() {
    void* req = post_send(*h.conn, msg);
    ASSERT_NE(req, nullptr) << "message " << seq << " neither went nor asked";
    std::vector<uint8_t> got(kHeaderSize + msg.size());
    ASSERT_TRUE(read_exact(h.data.get(), got.data(), got.size()))
        << "message " << seq << " waited within its bound";
    ASSERT_EQ(ncclSuccess, wait_done(*h.conn, req)) << "message " << seq;
    const MessageHeader header = decode_header(got.data());
    ASSERT_EQ(header.seq, seq);
    EXPECT_TRUE(std::equal(msg.begin(), msg.end(), got.begin() + kHeaderSize));
    if ((header.flags & kFlagCredit) != 0) credits.push_back(seq);
    ++seq;
  };
  for (int i = 0; i < NCCL_NET_MAX_REQUESTS; ++i) ASSERT_NO_FATAL_FAILURE(send_and_read());
  ASSERT_FALSE(credits.empty()) << "a request window of messages ahead and none asked for credit";
  for (size_t k = 1; k < credits.size(); ++k) {
    EXPECT_GE(credits[k] - credits[k - 1], 8u)
        << "credit asked by message " << credits[k] << " while that of message " << credits[k - 1]
        << " was still unanswered";
  }
  EXPECT_LE(credits.size(), 3u);
  // The answer to the last credit returns every charge before it: the next one goes early.
  ASSERT_NO_FATAL_FAILURE(write_cts(h.control.get(), {credits.back(), 0, msg.size()}));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // there before the next isend
  ASSERT_NO_FATAL_FAILURE(send_and_read());
}

TEST(TcpCtsOnRequest, AsksOutsideTheRequestWindowOrTwiceFailTheReceiver) {
  SKIP_WITHOUT_WINDOWS();
  // A repeated ask fails the connection whether its receive was posted before both (seq 0),
  // between them (seq 1) or after both (seq 5): accepted, a peer streaming one ask kept NCCL's
  // thread inside a single test() call (2.4 s during a 3 s flood).
  enum Case { kOutOfWindow, kTwiceUnposted, kTwicePosted, kTwiceAroundThePost };
  for (const Case c : {kOutOfWindow, kTwiceUnposted, kTwicePosted, kTwiceAroundThePost}) {
    HalfRaw h = half_raw(/*sender=*/false, options(1024 * 1024));
    std::vector<uint8_t> b0(4096), b1(4096);
    void* r0 = post_recv(*h.conn, b0);
    const int ctl = h.control.get();
    const MessageHeader ask0{0, kFlagAsk | kFlagOnRequest, 0, 8};
    const MessageHeader ask1{1, kFlagAsk | kFlagOnRequest, 0, 8};
    const MessageHeader ask5{5, kFlagAsk | kFlagOnRequest, 0, 8};
    switch (c) {
      case kOutOfWindow:
        ASSERT_NO_FATAL_FAILURE(
            write_ask(ctl, {NCCL_NET_MAX_REQUESTS + 1, kFlagAsk | kFlagOnRequest, 0, 8}));
        break;
      case kTwiceUnposted:
        ASSERT_NO_FATAL_FAILURE(write_ask(ctl, ask5));
        ASSERT_NO_FATAL_FAILURE(write_ask(ctl, ask5));
        break;
      case kTwicePosted:
        ASSERT_NO_FATAL_FAILURE(write_ask(ctl, ask0));
        ASSERT_NO_FATAL_FAILURE(write_ask(ctl, ask0));
        break;
      case kTwiceAroundThePost: {
        // The first ask is read before its receive is posted (kept until irecv answers it).
        ASSERT_NO_FATAL_FAILURE(write_ask(ctl, ask1));
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        EXPECT_FALSE(test_a_few(*h.conn, r0));
        post_recv(*h.conn, b1);
        ASSERT_NO_FATAL_FAILURE(write_ask(ctl, ask1));
        break;
      }
    }
    EXPECT_EQ(wait_done(*h.conn, r0), ncclRemoteError) << "case " << c;
  }
}

// NCCL closes a send comm once every send tested done, while the receiver may still be reading
// them and posting its last receives. A clear-to-send that reaches the sender after its last
// read (here: for an eager message, posted after it went) must not turn the close into a reset:
// every byte of every completed send arrives on the data socket, then the end of the stream,
// and the control socket ends without a reset too (the receiver reads it for asks, and a reset
// there fails the connection). When headers and payloads of small messages travelled on the
// control socket, the old close's reset cut them off: 113,168 of 459,880 bytes, then
// "Connection reset by peer".
TEST(TcpClose, ASenderClosedWithAClearToSendUnreadStillDeliversEveryCompletedSend) {
  TcpOptions o;
  o.user_timeout_ms = 0;
  HalfRaw h = half_raw(/*sender=*/true, o);
  const int ctl = h.control.get();
  constexpr int kCleared = 7;
  constexpr size_t kInline = 65536;  // the default one-part size
  for (int i = 0; i < kCleared; ++i) {
    ASSERT_NO_FATAL_FAILURE(write_cts(ctl, {static_cast<uint32_t>(i), 0, kInline}));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::vector<std::vector<uint8_t>> msgs;
  for (int i = 0; i < kCleared; ++i) msgs.push_back(pattern(kInline, static_cast<uint8_t>(i)));
  msgs.push_back(pattern(1000, 9));  // goes eagerly, before its clear-to-send
  size_t sent = 0;
  for (auto& m : msgs) {
    void* r = nullptr;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while ((r = post_send(*h.conn, m)) == nullptr && std::chrono::steady_clock::now() < deadline) {
    }
    ASSERT_NE(r, nullptr);
    ASSERT_TRUE(done_within(*h.conn, r, 5000)) << "a send did not complete";
    sent += kHeaderSize + m.size();
  }
  // The receiver posts the eager message's receive late: its clear-to-send arrives unread.
  ASSERT_NO_FATAL_FAILURE(write_cts(ctl, {kCleared, 0, kInline}));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  h.conn->close();
  // Everything a socket delivers until its end; err: how it ended (0: a clean end of stream).
  auto drain = [](int fd, int* err) {
    size_t got = 0;
    *err = 0;
    std::vector<uint8_t> buf(1 << 16);
    for (;;) {
      if (!readable_within(fd, 10000)) {
        *err = ETIMEDOUT;
        break;
      }
      const ssize_t k = recv(fd, buf.data(), buf.size(), 0);
      if (k < 0) *err = errno;
      if (k <= 0) break;
      got += static_cast<size_t>(k);
    }
    return got;
  };
  int err = 0;
  EXPECT_EQ(drain(h.data.get(), &err), sent) << "bytes of completed sends lost at the close";
  EXPECT_EQ(err, 0) << std::strerror(err);
  // The control socket ends cleanly once the sender has read the late clear-to-send: shut down
  // (it lingers until the receiver's end), so it delivers its end of stream without a reset.
  std::thread ender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    shutdown(ctl, SHUT_WR);
  });
  EXPECT_EQ(drain(ctl, &err), 0u) << "the sender wrote on its control socket after its asks";
  ender.join();
  EXPECT_EQ(err, 0) << "control socket: " << std::strerror(err);
  // The receiver closes: the sender's socket stops lingering at once.
  h.control.reset();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (lingering_sockets() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(lingering_sockets(), 0u) << "the closed sender's socket outlived the receiver's FIN";
}

}  // namespace
}  // namespace mesh::tcp
