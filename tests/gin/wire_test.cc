// SPDX-License-Identifier: Apache-2.0
// The GIN message header codec (src/gin/wire.h): valid headers round-trip, and each field a
// peer could get wrong is refused on its own.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "gin/wire.h"
#include "transport/rdma/wire.h"
#include "util/byte_order.h"

namespace mesh::gin {
namespace {

Header put_with_signal() {
  Header h;
  h.kind = Kind::kPut;
  h.flags = kFlagLast | kFlagSignal;
  h.context = 3;
  h.reg = 7;
  h.signal_reg = 2;
  h.offset = 4096;
  h.length = 100;
  h.signal_offset = 24;
  h.signal_value = 5;
  h.signal_op = kSignalAdd;
  h.seq = 42;
  return h;
}

TEST(GinWire, PutWithSignalRoundTrips) {
  const Header h = put_with_signal();
  std::vector<uint8_t> msg(kHeaderSize + 100);
  encode_header(h, msg.data());
  Header d;
  std::string why;
  ASSERT_TRUE(decode_header(msg.data(), msg.size(), &d, &why)) << why;
  EXPECT_EQ(d.kind, Kind::kPut);
  EXPECT_EQ(d.context, 3);
  EXPECT_EQ(d.reg, 7u);
  EXPECT_EQ(d.signal_reg, 2u);
  EXPECT_EQ(d.offset, 4096u);
  EXPECT_EQ(d.length, 100u);
  EXPECT_EQ(d.signal_offset, 24u);
  EXPECT_EQ(d.signal_value, 5u);
  EXPECT_EQ(d.signal_op, kSignalAdd);
  EXPECT_EQ(d.seq, 42u);
}

TEST(GinWire, EachBadFieldIsRefused) {
  struct Case {
    const char* name;
    std::function<void(Header&)> mutate;
    size_t payload;
  };
  const std::vector<Case> cases = {
      {"payload differs from length", [](Header&) {}, 99},
      {"chunk above the maximum", [](Header& h) { h.length = kMaxChunk + 1; }, kMaxChunk + 1},
      {"unknown signal op", [](Header& h) { h.signal_op = 3; }, 100},
      {"unaligned signal", [](Header& h) { h.signal_offset = 4; }, 100},
      {"increment of 5", [](Header& h) { h.signal_op = kSignalInc; }, 100},
      {"signal not on the last message", [](Header& h) { h.flags = kFlagSignal; }, 100},
      {"unknown flag", [](Header& h) { h.flags |= 0x80; }, 100},
      {"context out of range", [](Header& h) { h.context = kMaxContexts; }, 100},
      {"signal fields without a signal", [](Header& h) { h.flags = kFlagLast; }, 100},
      {"get id on a put", [](Header& h) { h.get_id = 1; }, 100},
      {"get request with payload",
       [](Header& h) {
         h = Header{};
         h.kind = Kind::kGetRequest;
         h.flags = kFlagLast;
         h.length = 10;
       },
       10},
      {"get of 2 GiB",
       [](Header& h) {
         h = Header{};
         h.kind = Kind::kGetRequest;
         h.flags = kFlagLast;
         h.length = 2ULL << 30;
       },
       0},
      {"get reply naming a registration",
       [](Header& h) {
         h = Header{};
         h.kind = Kind::kGetReply;
         h.reg = 1;
       },
       0},
      {"bye with a length",
       [](Header& h) {
         h = Header{};
         h.kind = Kind::kBye;
         h.flags = kFlagLast;
         h.length = 1;
       },
       0},
  };
  for (const Case& c : cases) {
    Header h = put_with_signal();
    c.mutate(h);
    std::vector<uint8_t> msg(kHeaderSize + c.payload);
    encode_header(h, msg.data());
    Header d;
    std::string why;
    EXPECT_FALSE(decode_header(msg.data(), msg.size(), &d, &why)) << c.name;
    EXPECT_FALSE(why.empty()) << c.name;
  }
  // Bytes the encoder never writes: magic and kind.
  std::vector<uint8_t> msg(kHeaderSize + 100);
  encode_header(put_with_signal(), msg.data());
  msg[0] ^= 1;
  Header d;
  std::string why;
  EXPECT_FALSE(decode_header(msg.data(), msg.size(), &d, &why));
  encode_header(put_with_signal(), msg.data());
  msg[4] = 9;
  EXPECT_FALSE(decode_header(msg.data(), msg.size(), &d, &why));
  EXPECT_FALSE(decode_header(msg.data(), kHeaderSize - 1, &d, &why));
}

TEST(GinWire, GreetingRoundTripsAndRejectsJunk) {
  uint8_t buf[kGreetingSize];
  encode_greeting({3, 4, 0x1234}, buf);
  Greeting g;
  std::string why;
  ASSERT_TRUE(decode_greeting(buf, sizeof(buf), &g, &why)) << why;
  EXPECT_EQ(g.rank, 3u);
  EXPECT_EQ(g.nranks, 4u);
  EXPECT_EQ(g.comm_id, 0x1234u);
  EXPECT_FALSE(decode_greeting(buf, sizeof(buf) - 1, &g, &why));
  buf[12] = 1;
  EXPECT_FALSE(decode_greeting(buf, sizeof(buf), &g, &why));
}

TEST(GinWire, RegistrationKeyRoundTripsAndRejectsJunk) {
  Header h;
  h.kind = Kind::kRegKey;
  h.flags = kFlagLast;
  h.reg = 5;
  h.length = kRegKeySize;
  h.seq = 9;
  std::vector<uint8_t> msg(kHeaderSize + kRegKeySize);
  encode_header(h, msg.data());
  encode_reg_key({0x7f0000001000, 1 << 20, 0xabcd}, msg.data() + kHeaderSize);
  Header d;
  RegKey k;
  std::string why;
  ASSERT_TRUE(decode_header(msg.data(), msg.size(), &d, &why)) << why;
  ASSERT_TRUE(decode_reg_key(msg.data() + kHeaderSize, d.length, &k, &why)) << why;
  EXPECT_EQ(d.reg, 5u);
  EXPECT_EQ(k.addr, 0x7f0000001000u);
  EXPECT_EQ(k.size, 1u << 20);
  EXPECT_EQ(k.rkey, 0xabcdu);
  // The header: a payload of another size, no registration id, a context, a signal.
  const std::vector<std::pair<const char*, std::function<void(Header&)>>> bad = {
      {"no id", [](Header& x) { x.reg = 0; }},
      {"context", [](Header& x) { x.context = 1; }},
      {"offset", [](Header& x) { x.offset = 8; }},
      {"not last", [](Header& x) { x.flags = 0; }},
      {"signal",
       [](Header& x) { x.flags |= kFlagSignal, x.signal_op = kSignalInc, x.signal_value = 1; }},
      {"get id", [](Header& x) { x.get_id = 1; }},
  };
  for (const auto& [name, mutate] : bad) {
    Header x = h;
    mutate(x);
    encode_header(x, msg.data());
    EXPECT_FALSE(decode_header(msg.data(), msg.size(), &d, &why)) << name;
  }
  encode_header(h, msg.data());
  EXPECT_FALSE(decode_header(msg.data(), msg.size() - 1, &d, &why)) << "short payload";
  // The payload: reserved word, a range that wraps, a wrong size.
  uint8_t key[kRegKeySize];
  encode_reg_key({1, 2, 3}, key);
  key[23] = 1;
  EXPECT_FALSE(decode_reg_key(key, sizeof(key), &k, &why));
  encode_reg_key({~0ULL - 10, 100, 3}, key);
  EXPECT_FALSE(decode_reg_key(key, sizeof(key), &k, &why));
  encode_reg_key({1, 2, 3}, key);
  EXPECT_FALSE(decode_reg_key(key, sizeof(key) - 1, &k, &why));
}

// A one-sided peer's kRegKey: stored for a live id or one up to kRegKeyLookahead ahead of ours
// (it registered first), ignored for one deregistered here, refused beyond (a hostile peer would
// otherwise grow the key map without bound) and for id 0.
TEST(GinWire, RegistrationKeyIdsAreBoundedByTheLookahead) {
  EXPECT_EQ(reg_key_verdict(3, 5, true), 1);   // live here
  EXPECT_EQ(reg_key_verdict(3, 5, false), 0);  // deregistered here: not kept
  EXPECT_EQ(reg_key_verdict(5, 5, false), 1);  // our next: the peer registered first
  EXPECT_EQ(reg_key_verdict(5 + kRegKeyLookahead - 1, 5, false), 1);
  EXPECT_EQ(reg_key_verdict(5 + kRegKeyLookahead, 5, false), -1);
  EXPECT_EQ(reg_key_verdict(~0U, 5, false), -1);
  EXPECT_EQ(reg_key_verdict(0, 1, false), -1);
  EXPECT_EQ(reg_key_verdict(~0U, ~0U - 3, false), 1);  // no wrap in the distance
}

TEST(GinWire, RdmaHelloRoundTripsAndRejectsJunk) {
  rdma::SetupMessage m;
  rdma::QpInfo q;
  q.qpn = 0x11;
  q.psn = 0x22;
  q.mtu = 3;
  q.local_addr = 0x0a000001;
  q.peer_addr = 0x0a000002;
  m.qps.push_back(q);
  RdmaHello h;
  h.phase = 1;
  h.offer = true;
  h.setup = rdma::encode_setup(m);
  std::vector<uint8_t> bytes = encode_rdma_hello(h);
  RdmaHello d;
  std::string why;
  ASSERT_TRUE(decode_rdma_hello(bytes.data(), bytes.size(), &d, &why)) << why;
  EXPECT_TRUE(d.offer);
  EXPECT_EQ(d.setup, h.setup);
  RdmaHello ready;
  ready.phase = 2;
  const std::vector<uint8_t> r = encode_rdma_hello(ready);
  ASSERT_TRUE(decode_rdma_hello(r.data(), r.size(), &d, &why)) << why;
  EXPECT_FALSE(d.offer);
  EXPECT_EQ(d.phase, 2);
  // Each field on its own: magic, phase, offer byte, reserved words, length, truncation.
  for (size_t at : {0u, 4u, 5u, 6u, 8u, 12u}) {
    std::vector<uint8_t> x = bytes;
    x[at] ^= at == 4 ? 0x07 : 0x02;
    EXPECT_FALSE(decode_rdma_hello(x.data(), x.size(), &d, &why)) << "byte " << at;
  }
  EXPECT_FALSE(decode_rdma_hello(bytes.data(), bytes.size() - 1, &d, &why));
  EXPECT_FALSE(decode_rdma_hello(bytes.data(), kRdmaHelloHeader - 1, &d, &why));
  // An offer without a setup message, a ready with one, a setup naming two QPs or a relay.
  RdmaHello empty_offer;
  empty_offer.offer = true;
  std::vector<uint8_t> x = encode_rdma_hello(empty_offer);
  EXPECT_FALSE(decode_rdma_hello(x.data(), x.size(), &d, &why));
  RdmaHello ready_with_setup = h;
  ready_with_setup.phase = 2;
  x = encode_rdma_hello(ready_with_setup);
  EXPECT_FALSE(decode_rdma_hello(x.data(), x.size(), &d, &why));
  rdma::SetupMessage two = m;
  two.qps.push_back(q);
  h.setup = rdma::encode_setup(two);
  x = encode_rdma_hello(h);
  EXPECT_FALSE(decode_rdma_hello(x.data(), x.size(), &d, &why));
  rdma::SetupMessage relay = m;
  relay.relay = true;
  h.setup = rdma::encode_setup(relay);
  x = encode_rdma_hello(h);
  EXPECT_FALSE(decode_rdma_hello(x.data(), x.size(), &d, &why));
}

}  // namespace
}  // namespace mesh::gin
