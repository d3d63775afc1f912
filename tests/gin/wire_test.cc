// SPDX-License-Identifier: Apache-2.0
// The GIN message header codec (src/gin/wire.h): valid headers round-trip, and each field a
// peer could get wrong is refused on its own.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "gin/wire.h"
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

}  // namespace
}  // namespace mesh::gin
