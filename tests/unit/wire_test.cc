// SPDX-License-Identifier: Apache-2.0
// The per-message header (64 bytes in front of a message's first part: 16 of fields, 48 of zero
// padding), the 16-byte ask on the control socket, and the clear-to-send.
#include "transport/tcp/wire.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>

namespace mesh::tcp {
namespace {

static_assert(kHeaderSize == 64 && kHeaderFieldsSize == 16 && kAskSize == 16);
static_assert(kFlagOnRequest == 0x2 && kFlagCredit == 0x4 && kFlagAsk == 0x8);

using Buffer = std::array<uint8_t, kHeaderFieldsSize>;

TEST(WireHeader, BigEndianLayout) {
  const MessageHeader h{0x01020304u, 0x0506, 0x0708, 0x1122334455667788ull};
  Buffer b{};
  encode_ask(h, b.data());
  const Buffer want = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
                       0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
  EXPECT_EQ(b, want);
}

TEST(WireHeader, OnePartHeaderBytes) {
  const MessageHeader h{7, kFlagOnRequest, 1, 100};
  Buffer b{};
  encode_ask(h, b.data());
  const Buffer want = {0, 0, 0, 7, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 100};
  EXPECT_EQ(b, want);
}

TEST(WireHeader, DecodeKnownBytes) {
  const Buffer b = {0xDE, 0xAD, 0xBE, 0xEF, 0x00, 0x01, 0x00, 0x40,
                    0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x05};
  const MessageHeader h = decode_header(b.data());
  EXPECT_EQ(h.seq, 0xDEADBEEFu);
  EXPECT_EQ(h.flags, 0x0001);
  EXPECT_EQ(h.nparts, 64);
  EXPECT_EQ(h.size, 0x0000010000000005ull);  // 1 TiB + 5
}

TEST(WireHeader, AnAskIsTheFieldsAlone) {
  std::array<uint8_t, kAskSize + 8> big;
  big.fill(0xCC);
  encode_ask({1, 0, 4, 1 << 20}, big.data());
  for (size_t i = kAskSize; i < big.size(); ++i) EXPECT_EQ(big[i], 0xCC) << i;
}

// The data socket's header: the same fields, then zeros up to 64 bytes, and nothing beyond.
TEST(WireHeader, AHeaderIsTheFieldsThenZerosTo64Bytes) {
  std::array<uint8_t, kHeaderSize + 8> big;
  big.fill(0xCC);
  const MessageHeader h{7, kFlagOnRequest, 1, 100};
  encode_header(h, big.data());
  Buffer fields{};
  encode_ask(h, fields.data());
  EXPECT_TRUE(std::equal(fields.begin(), fields.end(), big.begin()));
  for (size_t i = kHeaderFieldsSize; i < kHeaderSize; ++i) EXPECT_EQ(big[i], 0) << i;
  for (size_t i = kHeaderSize; i < big.size(); ++i) EXPECT_EQ(big[i], 0xCC) << i;
  EXPECT_TRUE(header_padding_is_zero(big.data()));
}

// Any byte of the padding set makes the header malformed; the fields never do.
TEST(WireHeader, PaddingMustBeZero) {
  for (size_t i = 0; i < kHeaderSize; ++i) {
    std::array<uint8_t, kHeaderSize> b{};
    b[i] = 0x80;
    EXPECT_EQ(header_padding_is_zero(b.data()), i < kHeaderFieldsSize) << i;
  }
}

TEST(WireHeader, RoundTrip) {
  const MessageHeader cases[] = {
      {0, 0, 0, 0},
      {1, kFlagCredit, 1, 65536},
      {0xFFFFFFFFu, 0xFFFF, 0xFFFF, 0xFFFFFFFFFFFFFFFFull},
      {42, 0, 4, 0x100000000ull},          // just above 4 GiB: needs the high word
      {43, 0, 64, 0x8000000000000000ull},  // top bit of the size
      {44, 0x8000, 1, 0x00000000FFFFFFFFull},
  };
  for (const MessageHeader& h : cases) {
    Buffer b{};
    encode_ask(h, b.data());
    const MessageHeader out = decode_header(b.data());
    EXPECT_EQ(out.seq, h.seq);
    EXPECT_EQ(out.flags, h.flags);
    EXPECT_EQ(out.nparts, h.nparts);
    EXPECT_EQ(out.size, h.size);
  }
}

TEST(WireHeader, EveryByteLandsInItsField) {
  // Changing one byte of the wire changes exactly one field, by exactly that byte's weight.
  Buffer zero{};
  for (size_t i = 0; i < kHeaderFieldsSize; ++i) {
    Buffer b = zero;
    b[i] = 1;
    const MessageHeader h = decode_header(b.data());
    EXPECT_EQ(h.seq, i < 4 ? uint32_t{1} << (8 * (3 - i)) : 0u) << i;
    EXPECT_EQ(h.flags, i >= 4 && i < 6 ? (1u << (8 * (5 - i))) : 0u) << i;
    EXPECT_EQ(h.nparts, i >= 6 && i < 8 ? (1u << (8 * (7 - i))) : 0u) << i;
    EXPECT_EQ(h.size, i >= 8 ? uint64_t{1} << (8 * (15 - i)) : 0u) << i;
  }
}

TEST(ClearToSend, BigEndianLayoutAndRoundTrip) {
  std::array<uint8_t, kCtsSize> b{};
  encode_cts({0x01020304u, 0, 0x1122334455667788ull}, b.data());
  const std::array<uint8_t, kCtsSize> want = {0x01, 0x02, 0x03, 0x04, 0,    0,    0,    0,
                                              0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
  EXPECT_EQ(b, want);
  const ClearToSend c = decode_cts(b.data());
  EXPECT_EQ(c.seq, 0x01020304u);
  EXPECT_EQ(c.reserved, 0u);
  EXPECT_EQ(c.capacity, 0x1122334455667788ull);
  b[5] = 0xff;  // a reserved byte set by a peer must be visible to the validator
  EXPECT_EQ(decode_cts(b.data()).reserved, 0x00ff0000u);
}

// Where the next message's first part goes (hello version 10): a one-part message under
// kSpreadMinBytes leaves it on its own data socket; anything else moves it past its parts.
TEST(NextFirstStream, SmallOnePartMessagesStayLargerOnesMovePastTheirParts) {
  static_assert(kSpreadMinBytes == 4096);
  EXPECT_EQ(next_first_stream(0, 0, 1, 4), 0u);
  EXPECT_EQ(next_first_stream(2, 1024, 1, 4), 2u);
  EXPECT_EQ(next_first_stream(3, kSpreadMinBytes - 1, 1, 4), 3u);
  EXPECT_EQ(next_first_stream(3, kSpreadMinBytes, 1, 4), 0u);
  EXPECT_EQ(next_first_stream(1, 64 * 1024, 1, 4), 2u);
  EXPECT_EQ(next_first_stream(1, 1 << 20, 4, 4), 1u);
  EXPECT_EQ(next_first_stream(2, 1 << 20, 3, 4), 1u);
  // Several parts always move on, however small (a peer may split what it likes).
  EXPECT_EQ(next_first_stream(0, 100, 2, 4), 2u);
  EXPECT_EQ(next_first_stream(0, 4096, 1, 1), 0u);
}

}  // namespace
}  // namespace mesh::tcp
