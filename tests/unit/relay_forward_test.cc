// SPDX-License-Identifier: Apache-2.0
// The RDMA relay's setup phase against hostile or impossible input (transport/rdma/
// relay_forward.h): whatever the connector sends, the forward answers the relay request "ok",
// then refuses with a hello reply (malformed hello or setup, no RDMA here, a connector that
// stops talking) and closes both sockets; the destination never sees a byte of a refused
// connector. Runs without RDMA hardware: the transport has no bound port, so a well-formed
// request ends in "setup failed" before any verbs call.
//
// The forward's chunk account (transport/rdma/relay_chunks.h) against hostile and impossible
// data-path input: chunk immediates with wrong tags (a duplicated or lost completion), chunks
// without a free slot, lengths over the slot, a completion for a write not in flight; and the
// drain decisions after the connector closed (complete messages held, a partial one).
#include "transport/rdma/relay_forward.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <vector>

#include "handshake/hello.h"
#include "relay/request.h"
#include "transport/rdma/relay_chunks.h"
#include "util/clock.h"

namespace mesh::rdma {
namespace {

struct Pair {
  UniqueFd test, forward;
};

Pair socket_pair() {
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

class RelayForwardSetup : public ::testing::Test {
 protected:
  void SetUp() override {
    Pair u = socket_pair(), d = socket_pair();
    up_ = std::move(u.test);
    down_ = std::move(d.test);
    ForwardSockets s;
    s.up = std::move(u.forward);
    s.down = std::move(d.forward);
    s.down_local = 0xC6120505;
    s.down_peer = 0xC6120506;
    s.what = "test connector -> test destination";
    forward_ = std::make_unique<RelayForward>(transport_, std::move(s), 8, 512 * 1024,
                                              monotonic_ms() + 1500);
  }
  // Steps the forward until it ends (false) or `ms` pass; true when it ended.
  bool run_until_done(int ms) {
    const int64_t end = monotonic_ms() + ms;
    bool progress = false;
    while (monotonic_ms() < end) {
      if (!forward_->step(monotonic_ms(), &progress)) return true;
    }
    return false;
  }
  std::vector<uint8_t> read_up(size_t n) {
    std::vector<uint8_t> b(n);
    size_t got = 0;
    while (got < n) {
      pollfd p{up_.get(), POLLIN, 0};
      bool progress = false;
      forward_->step(monotonic_ms(), &progress);
      if (poll(&p, 1, 10) <= 0) continue;
      const ssize_t r = recv(up_.get(), b.data() + got, n - got, 0);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    b.resize(got);
    return b;
  }
  void expect_relay_ok() {
    const auto r = read_up(relay::kRelayReplySize);
    ASSERT_EQ(r.size(), relay::kRelayReplySize);
    relay::ReplyCode code;
    ASSERT_TRUE(relay::decode_relay_reply(r.data(), &code));
    EXPECT_EQ(code, relay::ReplyCode::kOk);
  }
  // The forward's answer to the hello, after which it has closed both sockets.
  handshake::HelloReply refusal() {
    EXPECT_TRUE(run_until_done(3000));
    uint8_t b[handshake::kReplySize];
    EXPECT_EQ(recv(up_.get(), b, sizeof(b), MSG_DONTWAIT), static_cast<ssize_t>(sizeof(b)));
    handshake::HelloReply reply{};
    EXPECT_TRUE(handshake::decode_reply(b, &reply));
    uint8_t x;
    EXPECT_EQ(recv(up_.get(), &x, 1, MSG_DONTWAIT), 0);    // closed after the reply
    EXPECT_EQ(recv(down_.get(), &x, 1, MSG_DONTWAIT), 0);  // the destination saw nothing
    return reply;
  }
  std::vector<uint8_t> hello_with(const std::vector<uint8_t>& ext) {
    handshake::Hello h;
    h.role = handshake::Role::kControl;
    h.ndata = 0;
    h.conn_id = 42;
    h.ext_len = static_cast<uint16_t>(ext.size());
    std::vector<uint8_t> b(handshake::kHelloSize);
    handshake::encode_hello(h, b.data());
    b.insert(b.end(), ext.begin(), ext.end());
    return b;
  }
  SetupMessage connector_setup() {
    SetupMessage m;
    m.ring_addr = 0x7f0000001000;
    m.relay = true;
    QpInfo q;
    q.qpn = 0x11;
    q.psn = 1;
    q.mtu = 5;
    q.local_addr = 0xC6120501;
    q.peer_addr = 0xC6120502;
    q.ring_rkey = 7;
    m.qps.push_back(q);
    return m;
  }
  RdmaTransport transport_;  // nothing bound: no RDMA port anywhere
  UniqueFd up_, down_;
  std::unique_ptr<RelayForward> forward_;
};

TEST_F(RelayForwardSetup, GarbageInsteadOfAHelloIsMalformed) {
  expect_relay_ok();
  std::vector<uint8_t> junk(handshake::kHelloSize, 0x5a);
  ASSERT_EQ(send(up_.get(), junk.data(), junk.size(), 0), static_cast<ssize_t>(junk.size()));
  EXPECT_EQ(refusal(), handshake::HelloReply::kMalformed);
}

TEST_F(RelayForwardSetup, ADirectSetupIsNotARelayHop) {
  expect_relay_ok();
  SetupMessage m = connector_setup();
  m.relay = false;
  const auto b = hello_with(encode_setup(m));
  ASSERT_EQ(send(up_.get(), b.data(), b.size(), 0), static_cast<ssize_t>(b.size()));
  EXPECT_EQ(refusal(), handshake::HelloReply::kMalformed);
}

TEST_F(RelayForwardSetup, ARelaysAnswerFromTheConnectorIsRefused) {
  expect_relay_ok();
  SetupMessage m = connector_setup();
  m.relay_slots = 8;  // a relay's trailer: the connector must send zeros
  m.relay_slot_bytes = 4096;
  const auto b = hello_with(encode_setup(m));
  ASSERT_EQ(send(up_.get(), b.data(), b.size(), 0), static_cast<ssize_t>(b.size()));
  EXPECT_EQ(refusal(), handshake::HelloReply::kMalformed);
}

TEST_F(RelayForwardSetup, AValidRequestWithoutRdmaHereFailsSetup) {
  expect_relay_ok();
  const auto b = hello_with(encode_setup(connector_setup()));
  ASSERT_EQ(send(up_.get(), b.data(), b.size(), 0), static_cast<ssize_t>(b.size()));
  EXPECT_EQ(refusal(), handshake::HelloReply::kSetupFailed);
}

TEST_F(RelayForwardSetup, AConnectorThatStopsTalkingTimesOut) {
  expect_relay_ok();
  const auto b = hello_with(encode_setup(connector_setup()));
  ASSERT_EQ(send(up_.get(), b.data(), 20, 0), 20);  // a third of a hello, then silence
  EXPECT_EQ(refusal(), handshake::HelloReply::kSetupFailed);
}

TEST_F(RelayForwardSetup, AConnectorThatHangsUpEndsTheForward) {
  expect_relay_ok();
  up_.reset();
  EXPECT_TRUE(run_until_done(1000));
  uint8_t x;
  EXPECT_EQ(recv(down_.get(), &x, 1, MSG_DONTWAIT), 0);
}

TEST_F(RelayForwardSetup, ATruncatedRelayTrailerIsMalformed) {
  expect_relay_ok();
  std::vector<uint8_t> ext = encode_setup(connector_setup());
  ext.resize(ext.size() - 4);  // half of the 8-byte relay trailer
  const auto b = hello_with(ext);
  ASSERT_EQ(send(up_.get(), b.data(), b.size(), 0), static_cast<ssize_t>(b.size()));
  EXPECT_EQ(refusal(), handshake::HelloReply::kMalformed);
}

TEST_F(RelayForwardSetup, AHelloWithDataStreamsIsMalformed) {
  expect_relay_ok();
  const std::vector<uint8_t> ext = encode_setup(connector_setup());
  handshake::Hello h;
  h.role = handshake::Role::kControl;
  h.ndata = 2;  // an RDMA relay request carries no TCP data streams
  h.conn_id = 42;
  h.ext_len = static_cast<uint16_t>(ext.size());
  std::vector<uint8_t> b(handshake::kHelloSize);
  handshake::encode_hello(h, b.data());
  b.insert(b.end(), ext.begin(), ext.end());
  ASSERT_EQ(send(up_.get(), b.data(), b.size(), 0), static_cast<ssize_t>(b.size()));
  EXPECT_EQ(refusal(), handshake::HelloReply::kMalformed);
}

// --- the data path's account of the staging slots ------------------------------------------

constexpr uint32_t kSlotBytes = 4096;

// The immediate of chunk c as a well-behaved connector writes it.
uint32_t imm(uint64_t chunk, uint32_t len, bool last) {
  return chunk_imm(len, last, chunk);
}

// Forwards every arrived chunk in order, all with an onward write; returns how many.
int forward_all(RelayChunks& r) {
  int n = 0;
  RelayChunks::Next next;
  while (r.next(&next)) {
    r.forwarded(next.length > 0);
    ++n;
  }
  return n;
}

TEST(RelayChunks, ChunksStripedOverQpsArriveForwardAndFreeInOrder) {
  RelayChunks r(4, kSlotBytes, 2);
  std::string why;
  // chunk 0 on QP 0, 1 on QP 1, 2 on QP 0, 3 on QP 1 (QP 1's first completion may come first)
  ASSERT_TRUE(r.arrived(1, imm(1, 100, false), &why)) << why;
  RelayChunks::Next n;
  EXPECT_FALSE(r.next(&n));  // chunk 0 has not arrived: nothing goes on out of order
  ASSERT_TRUE(r.arrived(0, imm(0, kSlotBytes, false), &why)) << why;
  ASSERT_TRUE(r.arrived(0, imm(2, 0, false), &why)) << why;
  ASSERT_TRUE(r.arrived(1, imm(3, 7, true), &why)) << why;
  EXPECT_TRUE(r.holds_complete_message());
  ASSERT_TRUE(r.next(&n));
  EXPECT_EQ(n.chunk, 0u);
  EXPECT_EQ(n.length, kSlotBytes);
  EXPECT_EQ(forward_all(r), 4);
  EXPECT_EQ(r.writing(), 3u);  // chunk 2 is empty: no onward write
  EXPECT_EQ(r.freed(), 0u);    // chunk 0's write has not completed
  ASSERT_TRUE(r.written(1, &why)) << why;
  EXPECT_EQ(r.freed(), 0u);  // freed counts in order
  ASSERT_TRUE(r.written(0, &why)) << why;
  EXPECT_EQ(r.freed(), 3u);  // 0, 1 and the empty 2
  ASSERT_TRUE(r.written(3, &why)) << why;
  EXPECT_EQ(r.freed(), 4u);
  // the ring wraps: chunk 4 into slot 0 once slot 0 is free
  ASSERT_TRUE(r.arrived(0, imm(4, 1, true), &why)) << why;
  EXPECT_EQ(r.arrivals(), 5u);
}

TEST(RelayChunks, ADuplicatedCompletionIsATagMismatch) {
  RelayChunks r(8, kSlotBytes, 1);
  std::string why;
  ASSERT_TRUE(r.arrived(0, imm(0, 10, false), &why)) << why;
  // The provider reports chunk 0's completion twice: counting alone would take it for chunk 1.
  EXPECT_FALSE(r.arrived(0, imm(0, 10, false), &why));
  EXPECT_NE(why.find("chunk tag mismatch"), std::string::npos) << why;
  EXPECT_NE(why.find("expected chunk 1"), std::string::npos) << why;
}

TEST(RelayChunks, ALostCompletionIsATagMismatch) {
  RelayChunks r(8, kSlotBytes, 2);
  std::string why;
  ASSERT_TRUE(r.arrived(0, imm(0, 10, false), &why)) << why;
  // QP 0's next completion is chunk 4 (chunk 2's was lost): QP 0 expects chunk 2.
  EXPECT_FALSE(r.arrived(0, imm(4, 10, true), &why));
  EXPECT_NE(why.find("expected chunk 2 (tag 2), got tag 4"), std::string::npos) << why;
}

TEST(RelayChunks, TagsWrapEvery64Chunks) {
  RelayChunks r(2, kSlotBytes, 1);
  std::string why;
  for (uint64_t c = 0; c < 200; ++c) {
    ASSERT_TRUE(r.arrived(0, imm(c, 1, true), &why)) << "chunk " << c << ": " << why;
    ASSERT_EQ(forward_all(r), 1);
    ASSERT_TRUE(r.written(c, &why)) << why;
    ASSERT_EQ(r.freed(), c + 1);
  }
}

TEST(RelayChunks, AChunkWithoutAFreeSlotIsAViolation) {
  RelayChunks r(2, kSlotBytes, 1);
  std::string why;
  ASSERT_TRUE(r.arrived(0, imm(0, 1, true), &why)) << why;
  ASSERT_TRUE(r.arrived(0, imm(1, 1, true), &why)) << why;
  // Credit 0: chunk 2 would overwrite slot 0, which still holds chunk 0.
  EXPECT_FALSE(r.arrived(0, imm(2, 1, true), &why));
  EXPECT_NE(why.find("without a free slot"), std::string::npos) << why;
}

TEST(RelayChunks, AChunkLongerThanItsSlotIsRefused) {
  RelayChunks r(2, kSlotBytes, 1);
  std::string why;
  EXPECT_FALSE(r.arrived(0, imm(0, kSlotBytes + 1, true), &why));
  EXPECT_NE(why.find("claims 4097 bytes"), std::string::npos) << why;
  // Every bit pattern of the immediate: refused or accepted, never beyond the slot.
  for (uint32_t bits : {0xFFFFFFFFu, 0x7FFFFFFFu, kChunkLengthMask, 0x80000000u | kSlotBytes}) {
    RelayChunks f(2, kSlotBytes, 1);
    if (f.arrived(0, bits, &why)) {
      RelayChunks::Next n;
      ASSERT_TRUE(f.next(&n));
      EXPECT_LE(n.length, kSlotBytes);
    }
  }
}

TEST(RelayChunks, AnImpossibleQpOrWriteCompletionIsRefused) {
  RelayChunks r(4, kSlotBytes, 2);
  std::string why;
  EXPECT_FALSE(r.arrived(2, imm(2, 1, true), &why));  // the connection has QPs 0 and 1
  EXPECT_FALSE(r.written(0, &why));                   // nothing forwarded yet
  ASSERT_TRUE(r.arrived(0, imm(0, 1, true), &why)) << why;
  forward_all(r);
  ASSERT_TRUE(r.written(0, &why)) << why;
  EXPECT_FALSE(r.written(0, &why));  // a duplicated write completion
  EXPECT_NE(why.find("not in flight"), std::string::npos) << why;
  EXPECT_FALSE(r.written(1ull << 40, &why));
}

TEST(RelayChunks, DrainSeesCompleteAndPartialMessages) {
  RelayChunks r(8, kSlotBytes, 1);
  std::string why;
  EXPECT_FALSE(r.holds_complete_message());
  EXPECT_FALSE(r.holds_any());
  // message 0 = chunks 0, 1; message 1 = chunks 2, 3 of which only 2 arrived (its sender left)
  ASSERT_TRUE(r.arrived(0, imm(0, kSlotBytes, false), &why)) << why;
  EXPECT_FALSE(r.holds_complete_message());
  ASSERT_TRUE(r.arrived(0, imm(1, 5, true), &why)) << why;
  ASSERT_TRUE(r.arrived(0, imm(2, kSlotBytes, false), &why)) << why;
  EXPECT_TRUE(r.holds_complete_message());  // message 0: to deliver before closing
  RelayChunks::Next n;
  ASSERT_TRUE(r.next(&n));
  r.forwarded(true);
  EXPECT_TRUE(r.holds_complete_message());  // its last chunk is still held
  ASSERT_TRUE(r.next(&n));
  r.forwarded(true);
  EXPECT_FALSE(r.holds_complete_message());  // only the unfinished message 1 is left
  EXPECT_TRUE(r.holds_any());
  EXPECT_EQ(r.writing(), 2u);  // the drain also waits for these writes
}

}  // namespace
}  // namespace mesh::rdma
