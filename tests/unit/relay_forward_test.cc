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
//
// A middle hop of a chain (issue 26 item 2): its setup against the same hostile input (the
// next relay host never sees a byte of a refused connector); the writing side it shares with
// the connector (relay_chunk_writer.h) against hostile credits; the next relay's answer
// (trailer) checked; and a chain of hops simulated without verbs: chunk numbers, tags and
// lengths survive every hop, credits pace every hop, a fault is caught at the hop it hits.
#include "transport/rdma/relay_forward.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <vector>

#include "handshake/hello.h"
#include "relay/request.h"
#include "transport/rdma/relay_chunk_writer.h"
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
  virtual bool middle_hop() const { return false; }
  void SetUp() override {
    Pair u = socket_pair(), d = socket_pair();
    up_ = std::move(u.test);
    down_ = std::move(d.test);
    ForwardSockets s;
    s.up = std::move(u.forward);
    s.down = std::move(d.forward);
    s.down_local = 0xC6120505;
    s.down_peer = 0xC6120506;
    s.down_relay = middle_hop();
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

// The same forward as a middle hop of a chain (its down socket reaches the next relay host's
// forwarder): the connector's hostile setup is refused before anything reaches the next hop.
class RelayForwardMiddleSetup : public RelayForwardSetup {
 protected:
  bool middle_hop() const override { return true; }
};

TEST_F(RelayForwardMiddleSetup, AValidRequestWithoutRdmaHereFailsSetup) {
  expect_relay_ok();
  const auto b = hello_with(encode_setup(connector_setup()));
  ASSERT_EQ(send(up_.get(), b.data(), b.size(), 0), static_cast<ssize_t>(b.size()));
  EXPECT_EQ(refusal(), handshake::HelloReply::kSetupFailed);
}

TEST_F(RelayForwardMiddleSetup, ARelaysAnswerFromTheConnectorIsRefused) {
  expect_relay_ok();
  SetupMessage m = connector_setup();
  m.relay_slots = 64;  // a relay's trailer (an upstream relay host posing as one?)
  m.relay_slot_bytes = 16u << 20;
  const auto b = hello_with(encode_setup(m));
  ASSERT_EQ(send(up_.get(), b.data(), b.size(), 0), static_cast<ssize_t>(b.size()));
  EXPECT_EQ(refusal(), handshake::HelloReply::kMalformed);
}

TEST_F(RelayForwardMiddleSetup, ATruncatedRelayTrailerIsMalformed) {
  expect_relay_ok();
  std::vector<uint8_t> ext = encode_setup(connector_setup());
  ext.resize(ext.size() - 1);
  const auto b = hello_with(ext);
  ASSERT_EQ(send(up_.get(), b.data(), b.size(), 0), static_cast<ssize_t>(b.size()));
  EXPECT_EQ(refusal(), handshake::HelloReply::kMalformed);
}

TEST_F(RelayForwardMiddleSetup, ASilentConnectorTimesOut) {
  expect_relay_ok();
  const auto b = hello_with(encode_setup(connector_setup()));
  ASSERT_EQ(send(up_.get(), b.data(), 30, 0), 30);
  EXPECT_EQ(refusal(), handshake::HelloReply::kSetupFailed);
}

// --- the next relay host's answer (the trailer a middle hop and a connector read) -----------

SetupMessage relay_answer(uint32_t slots, uint32_t slot_bytes) {
  SetupMessage m;
  m.relay = true;
  m.ring_addr = 0x7f0000200000;
  m.relay_slots = slots;
  m.relay_slot_bytes = slot_bytes;
  QpInfo q;
  q.qpn = 0x22;
  q.mtu = 5;
  q.ring_rkey = 0x1234;
  m.qps.push_back(q);
  return m;
}

TEST(RelayAnswer, OnlyAStagingRingInRangeIsAccepted) {
  SetupMessage out;
  std::string why;
  std::vector<uint8_t> b = encode_setup(relay_answer(8, 512 * 1024));
  ASSERT_TRUE(decode_relay_answer(b.data(), b.size(), &out, &why)) << why;
  EXPECT_EQ(out.relay_slots, 8u);
  EXPECT_EQ(out.relay_slot_bytes, 512u * 1024);
  // A connector's trailer (K = S = 0): the next hop is no relay.
  b = encode_setup(relay_answer(0, 0));
  EXPECT_FALSE(decode_relay_answer(b.data(), b.size(), &out, &why));
  EXPECT_NE(why.find("without its staging ring"), std::string::npos) << why;
  // A plain receiver's setup (a destination where a relay was expected).
  SetupMessage plain = relay_answer(8, 4096);
  plain.relay = false;
  b = encode_setup(plain);
  EXPECT_FALSE(decode_relay_answer(b.data(), b.size(), &out, &why));
  // Out of range: too many slots, a slot size that is not a 4 KiB multiple or too large, none.
  for (auto [k, sz] :
       {std::pair<uint32_t, uint32_t>{65, 4096}, {8, 4097}, {8, 32u << 20}, {8, 0}, {0, 4096}}) {
    b = encode_setup(relay_answer(k, sz));
    EXPECT_FALSE(decode_relay_answer(b.data(), b.size(), &out, &why)) << k << " x " << sz;
  }
  // No staging ring address.
  SetupMessage none = relay_answer(8, 4096);
  none.ring_addr = 0;
  b = encode_setup(none);
  EXPECT_FALSE(decode_relay_answer(b.data(), b.size(), &out, &why));
  // Truncated anywhere.
  b = encode_setup(relay_answer(8, 4096));
  for (size_t n = 0; n < b.size(); ++n)
    EXPECT_FALSE(decode_relay_answer(b.data(), n, &out, &why)) << n << " bytes";
}

// --- the writing side of a hop (connector, or a middle relay host) ---------------------------

TEST(RelayChunkWriter, CreditsPaceTheSlotsAndAStaleOneIsIgnored) {
  SetupMessage a = relay_answer(4, 4096);
  a.qps.push_back(a.qps[0]);
  a.qps[1].ring_rkey = 0x5678;
  RelayChunkWriter w(a);
  for (uint64_t c = 0; c < 4; ++c) {
    ASSERT_TRUE(w.may_post()) << c;
    const RelayChunkWriter::Write x = w.next(2, 100 + static_cast<uint32_t>(c), c == 3);
    EXPECT_EQ(x.chunk, c);
    EXPECT_EQ(x.qp, c % 2);
    EXPECT_EQ(x.rkey, c % 2 == 0 ? 0x1234u : 0x5678u);
    EXPECT_EQ(x.remote_addr, 0x7f0000200000u + c * 4096);
    const ChunkImm i = decode_chunk_imm(x.imm);
    EXPECT_EQ(i.length, 100 + c);
    EXPECT_EQ(i.tag, c);
    EXPECT_EQ(i.last, c == 3);
    w.posted_one();
  }
  EXPECT_FALSE(w.may_post());      // every slot of the next relay is taken
  EXPECT_FALSE(w.take_credit(5));  // beyond the 4 posted: a protocol violation
  EXPECT_FALSE(w.may_post());      // and never taken as a credit
  EXPECT_TRUE(w.take_credit(2));
  EXPECT_TRUE(w.may_post());
  EXPECT_TRUE(w.take_credit(1));  // stale (a re-executed WRITE): ignored
  EXPECT_EQ(w.credit(), 2u);
  EXPECT_EQ(w.next(2, 0, true).remote_addr, 0x7f0000200000u);  // chunk 4 into slot 0
  EXPECT_TRUE(w.take_credit(~0ull) == false);
  RelayChunkWriter none;  // no relay answered: never posts
  EXPECT_FALSE(none.may_post());
}

// A chain connector -> relay 1 -> relay 2 -> destination, without verbs: every hop's
// RelayChunks checks what the previous hop's RelayChunkWriter wrote; writes "complete" at once
// and credits travel back after each step. Different K and QP counts at every hop.
struct Hop {
  RelayChunks in;        // this relay host's slots
  RelayChunkWriter out;  // into the next relay host's slots (unused at the last hop)
  size_t down_qps;
};

TEST(RelayChain, ChunkNumbersTagsAndLengthsSurviveEveryHop) {
  constexpr uint32_t kS = 4096;
  const size_t up_qps = 2;
  Hop h1{RelayChunks(3, kS, up_qps), RelayChunkWriter(relay_answer(5, kS)), 3};
  Hop h2{RelayChunks(5, kS, 3), RelayChunkWriter(), 1};
  RelayChunkWriter conn(relay_answer(3, kS));
  // 70 messages of 1..3 chunks (tags wrap past 64): lengths encode (message, chunk).
  std::vector<std::pair<uint32_t, bool>> sent;  // (length, last) in chunk order
  for (uint32_t m = 0; m < 70; ++m) {
    const uint32_t n = 1 + m % 3;
    for (uint32_t k = 0; k < n; ++k) sent.push_back({(m * 7 + k) % kS, k + 1 == n});
  }
  std::vector<std::pair<uint32_t, bool>> delivered;
  std::string why;
  for (int round = 0; round < 10000 && delivered.size() < sent.size(); ++round) {
    // the connector writes what its credit allows
    while (conn.posted() < sent.size() && conn.may_post()) {
      const auto& c = sent[conn.posted()];
      const RelayChunkWriter::Write w = conn.next(up_qps, c.first, c.second);
      ASSERT_TRUE(h1.in.arrived(w.qp, w.imm, &why)) << why;
      conn.posted_one();
    }
    // relay 1 writes on into relay 2 with the same immediate
    RelayChunks::Next n;
    std::vector<uint64_t> in_flight;
    while (h1.in.next(&n) && h1.out.may_post()) {
      const RelayChunkWriter::Write w = h1.out.next(h1.down_qps, n.length, n.last);
      ASSERT_EQ(w.chunk, n.chunk);
      ASSERT_TRUE(h2.in.arrived(w.qp, w.imm, &why)) << why;
      h1.out.posted_one();
      h1.in.forwarded(true);
      in_flight.push_back(n.chunk);
    }
    // relay 2 delivers to the destination (its ordinary protocol: lengths and last flags)
    std::vector<uint64_t> to_dest;
    while (h2.in.next(&n)) {
      delivered.push_back({n.length, n.last});
      h2.in.forwarded(true);
      to_dest.push_back(n.chunk);
    }
    for (uint64_t c : to_dest) ASSERT_TRUE(h2.in.written(c, &why)) << why;
    for (uint64_t c : in_flight) ASSERT_TRUE(h1.in.written(c, &why)) << why;
    // credits back: relay 2 -> relay 1, relay 1 -> connector
    ASSERT_TRUE(h1.out.take_credit(h2.in.freed()));
    ASSERT_TRUE(conn.take_credit(h1.in.freed()));
  }
  EXPECT_EQ(delivered, sent);
  EXPECT_EQ(h2.in.arrivals(), sent.size());
}

TEST(RelayChain, AChunkForwardedTwiceOrSkippedIsCaughtAtTheNextHop) {
  constexpr uint32_t kS = 4096;
  RelayChunks next(4, kS, 1);
  RelayChunkWriter w(relay_answer(4, kS));
  std::string why;
  ASSERT_TRUE(next.arrived(0, w.next(1, 10, false).imm, &why)) << why;
  // The middle hop's NIC (or a provider fault) repeats chunk 0's WRITE_WITH_IMM completion.
  const uint32_t again = w.next(1, 10, false).imm;
  EXPECT_FALSE(next.arrived(0, again, &why));
  EXPECT_NE(why.find("chunk tag mismatch"), std::string::npos) << why;
  // A skipped chunk: chunk 2's immediate where chunk 1 is expected.
  RelayChunks skip(4, kS, 1);
  ASSERT_TRUE(skip.arrived(0, chunk_imm(10, false, 0), &why)) << why;
  EXPECT_FALSE(skip.arrived(0, chunk_imm(10, true, 2), &why));
  EXPECT_NE(why.find("expected chunk 1 (tag 1), got tag 2"), std::string::npos) << why;
}

// A middle hop announces min(its slot size, the next relay's): a chunk that fits upstream fits
// every hop downstream; a chunk longer than the next slot is refused there, never truncated.
TEST(RelayChain, AChunkLongerThanTheNextHopsSlotIsRefusedThere) {
  RelayChunks next(4, 8192, 1);
  std::string why;
  EXPECT_FALSE(next.arrived(0, chunk_imm(8192 + 4096, true, 0), &why));
  EXPECT_NE(why.find("claims 12288 bytes in a slot of 8192"), std::string::npos) << why;
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
