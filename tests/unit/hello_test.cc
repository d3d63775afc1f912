// SPDX-License-Identifier: Apache-2.0
// The handshake hello every socket of a connection opens with, and the listener's reply.
#include "handshake/hello.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <random>
#include <set>
#include <string>

namespace mesh::handshake {
namespace {

using Buffer = std::array<uint8_t, kHelloSize>;

static_assert(kHelloSize == 56);
static_assert(kReplySize == 4);

Hello make_hello(Role role, uint16_t index, uint16_t ndata) {
  Hello h;
  h.role = role;
  h.index = index;
  h.ndata = ndata;
  for (size_t i = 0; i < kNonceSize; ++i) h.nonce[i] = static_cast<uint8_t>(0x30 + i);
  h.conn_id = 0x0123456789ABCDEFull;
  h.agreement = {TunerMode::kRing, 0x0000123456789AULL};
  h.tcp_window = 0x00C0FFEE;
  return h;
}

Buffer encoded(const Hello& h) {
  Buffer b{};
  encode_hello(h, b.data());
  return b;
}

void put_be16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}

void put_be32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

// Recomputes the documented checksum: FNV-1a of [0,52), big-endian at [52,56).
void resign(Buffer& b) {
  put_be32(b.data() + 52, fnv1a(b.data(), 52));
}

void expect_same(const Hello& got, const Hello& want) {
  EXPECT_EQ(got.role, want.role);
  EXPECT_EQ(got.index, want.index);
  EXPECT_EQ(got.ndata, want.ndata);
  EXPECT_EQ(got.nonce, want.nonce);
  EXPECT_EQ(got.conn_id, want.conn_id);
  EXPECT_EQ(got.agreement, want.agreement);
  EXPECT_EQ(got.tcp_window, want.tcp_window);
}

// Decoding must fail with a reason containing `reason` and leave *out untouched.
void expect_rejected(const Buffer& b, const std::string& reason) {
  Hello out;
  out.conn_id = 77;
  out.index = 5;
  std::string why;
  EXPECT_FALSE(decode_hello(b.data(), &out, &why));
  EXPECT_NE(why.find(reason), std::string::npos)
      << "why: '" << why << "', expected '" << reason << "'";
  EXPECT_EQ(out.conn_id, 77u);
  EXPECT_EQ(out.index, 5);
}

TEST(HelloCodec, LayoutIsBigEndianAsDocumented) {
  const Buffer b = encoded(make_hello(Role::kData, 0x0102, 0x0003));
  const uint8_t header[] = {'M', 'S', 'H', 'H', 10, 1, 0x01, 0x02, 0x00, 0x03};
  for (size_t i = 0; i < sizeof(header); ++i) EXPECT_EQ(b[i], header[i]) << i;
  for (size_t i = 10; i < 16; ++i) EXPECT_EQ(b[i], 0) << i;
  for (size_t i = 0; i < kNonceSize; ++i) EXPECT_EQ(b[16 + i], 0x30 + i) << i;
  const uint8_t conn[] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF};
  for (size_t i = 0; i < sizeof(conn); ++i) EXPECT_EQ(b[32 + i], conn[i]) << i;
  // The agreement: u8 tuner mode (ring = 1), then the threshold as 56 bits.
  const uint8_t agreement[] = {0x01, 0x00, 0x00, 0x12, 0x34, 0x56, 0x78, 0x9A};
  for (size_t i = 0; i < sizeof(agreement); ++i) EXPECT_EQ(b[40 + i], agreement[i]) << i;
  // The connector's TCP eager window.
  const uint8_t window[] = {0x00, 0xC0, 0xFF, 0xEE};
  for (size_t i = 0; i < sizeof(window); ++i) EXPECT_EQ(b[48 + i], window[i]) << i;
  Buffer copy = b;
  resign(copy);
  EXPECT_EQ(copy, b);
}

TEST(HelloCodec, EncodeWritesExactly56Bytes) {
  std::array<uint8_t, kHelloSize + 8> big;
  big.fill(0xCC);
  encode_hello(make_hello(Role::kControl, 0, 4), big.data());
  for (size_t i = kHelloSize; i < big.size(); ++i) EXPECT_EQ(big[i], 0xCC) << i;
}

TEST(HelloCodec, RoundTripControl) {
  const Hello h = make_hello(Role::kControl, 0, 4);
  Hello out;
  std::string why;
  ASSERT_TRUE(decode_hello(encoded(h).data(), &out, &why)) << why;
  expect_same(out, h);
}

TEST(HelloCodec, RoundTripData) {
  for (const auto& [index, ndata] :
       {std::pair<uint16_t, uint16_t>{0, 1}, {3, 4}, {0, 64}, {63, 64}, {17, 32}}) {
    const Hello h = make_hello(Role::kData, index, ndata);
    Hello out;
    std::string why;
    ASSERT_TRUE(decode_hello(encoded(h).data(), &out, &why)) << why;
    expect_same(out, h);
  }
}

TEST(HelloCodec, RoundTripExtremeConnIds) {
  for (const uint64_t id : {0ull, 1ull, 0xFFFFFFFFFFFFFFFFull, 0x8000000000000000ull}) {
    Hello h = make_hello(Role::kData, 1, 2);
    h.conn_id = id;
    Hello out;
    std::string why;
    ASSERT_TRUE(decode_hello(encoded(h).data(), &out, &why)) << why;
    EXPECT_EQ(out.conn_id, id);
  }
}

TEST(HelloDecode, RejectsBadMagic) {
  Buffer b = encoded(make_hello(Role::kControl, 0, 4));
  put_be32(b.data(), 0x4D534831u);  // the handle's magic, "MSH1"
  resign(b);
  expect_rejected(b, "bad magic");
}

TEST(HelloDecode, RejectsOtherVersions) {
  for (const uint8_t v : std::initializer_list<uint8_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 255}) {
    Buffer b = encoded(make_hello(Role::kControl, 0, 4));
    b[4] = v;
    resign(b);
    expect_rejected(b, "version " + std::to_string(v));
  }
}

TEST(HelloDecode, RejectsChecksumMismatch) {
  Buffer b = encoded(make_hello(Role::kData, 1, 4));
  b[47] = static_cast<uint8_t>(b[47] ^ 0x10);
  expect_rejected(b, "checksum");
  Buffer c = encoded(make_hello(Role::kData, 1, 4));
  c[39] = static_cast<uint8_t>(c[39] + 1);  // conn id changed without re-signing
  expect_rejected(c, "checksum");
}

TEST(HelloDecode, RejectsUnknownRole) {
  for (const uint8_t role : std::initializer_list<uint8_t>{2, 3, 128, 255}) {
    Buffer b = encoded(make_hello(Role::kData, 0, 4));
    b[5] = role;
    resign(b);
    expect_rejected(b, "role " + std::to_string(role));
  }
}

TEST(HelloDecode, RejectsDataStreamCountOutOfRange) {
  for (const uint16_t ndata : {uint16_t{0}, uint16_t{65}, uint16_t{1000}, uint16_t{65535}}) {
    Buffer b = encoded(make_hello(Role::kControl, 0, 4));
    put_be16(b.data() + 8, ndata);
    resign(b);
    expect_rejected(b, "data stream count " + std::to_string(ndata));
  }
}

TEST(HelloDecode, RejectsIndexOutOfRange) {
  {  // The control socket is always index 0.
    Buffer b = encoded(make_hello(Role::kControl, 1, 4));
    expect_rejected(b, "stream index 1");
  }
  for (const auto& [index, ndata] :
       {std::pair<uint16_t, uint16_t>{4, 4}, {5, 4}, {1, 1}, {64, 64}, {65535, 64}}) {
    Buffer b = encoded(make_hello(Role::kData, index, ndata));
    expect_rejected(b, "stream index " + std::to_string(index));
  }
}

TEST(HelloDecode, ExtensionOnlyOnControlAndBounded) {
  {  // A control hello may announce an extension, and then needs no data sockets.
    Hello h = make_hello(Role::kControl, 0, 0);
    h.ext_len = 656;
    Buffer b = encoded(h);
    Hello out;
    std::string why;
    ASSERT_TRUE(decode_hello(b.data(), &out, &why)) << why;
    EXPECT_EQ(out.ext_len, 656);
    EXPECT_EQ(out.ndata, 0);
  }
  {  // Over the bound: nothing is allocated from a peer's length.
    Hello h = make_hello(Role::kControl, 0, 0);
    h.ext_len = static_cast<uint16_t>(kMaxExtension + 1);
    expect_rejected(encoded(h), "extension");
  }
  {  // Data sockets carry no extension.
    Hello h = make_hello(Role::kData, 1, 4);
    h.ext_len = 16;
    expect_rejected(encoded(h), "extension");
  }
  {  // Zero data sockets only with an extension.
    expect_rejected(encoded(make_hello(Role::kControl, 0, 0)), "data stream count 0");
  }
}

TEST(HelloDecode, RejectsNonZeroReservedFields) {
  for (const size_t i : {12, 13, 14, 15}) {
    Buffer b = encoded(make_hello(Role::kData, 1, 4));
    b[i] = 0x01;
    resign(b);
    SCOPED_TRACE("byte " + std::to_string(i));
    expect_rejected(b, "reserved");
  }
}

// The window a sender announces bounds what its receiver assumes (transport/tcp/wire.h): the
// settings' range and nothing beyond, so a peer cannot make the listener reason about more.
TEST(HelloDecode, TakesATcpWindowUpToTheSettingsBoundAndNoMore) {
  for (const uint32_t w : {0u, 1u, 1u << 20, kMaxTcpWindow}) {
    Hello h = make_hello(Role::kControl, 0, 4);
    h.tcp_window = w;
    Hello out;
    std::string why;
    ASSERT_TRUE(decode_hello(encoded(h).data(), &out, &why)) << w << ": " << why;
    EXPECT_EQ(out.tcp_window, w);
  }
  for (const uint32_t w : {kMaxTcpWindow + 1, 0xFFFFFFFFu}) {
    Hello h = make_hello(Role::kControl, 0, 4);
    h.tcp_window = w;
    SCOPED_TRACE(w);
    expect_rejected(encoded(h), "TCP eager window");
  }
}

TEST(HelloDecode, RejectsAnUnknownTunerMode) {
  Buffer b = encoded(make_hello(Role::kData, 1, 4));
  b[40] = 3;  // auto, ring, off are 0..2
  resign(b);
  expect_rejected(b, "tuner mode");
}

TEST(HelloDecode, RejectsAThresholdBeyondTheSettingsRange) {
  Buffer b = encoded(make_hello(Role::kData, 1, 4));
  b[41] = 0x01;  // 2^48
  resign(b);
  expect_rejected(b, "threshold");
}

TEST(HelloDecode, EverySingleBitFlipIsRejected) {
  for (const Hello& h : {make_hello(Role::kControl, 0, 4), make_hello(Role::kData, 3, 4)}) {
    const Buffer good = encoded(h);
    for (size_t bit = 0; bit < kHelloSize * 8; ++bit) {
      Buffer b = good;
      b[bit / 8] = static_cast<uint8_t>(b[bit / 8] ^ (1u << (bit % 8)));
      Hello out;
      std::string why;
      EXPECT_FALSE(decode_hello(b.data(), &out, &why)) << "bit " << bit;
      EXPECT_FALSE(why.empty());
    }
  }
}

TEST(HelloDecode, RandomBuffersNeverDecode) {
  Buffer b{};
  for (uint32_t seed = 0; seed < 20000; ++seed) {
    std::mt19937 rng(seed);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    if (seed % 2 == 1) {  // half of them with a valid magic and version
      put_be32(b.data(), kHelloMagic);
      b[4] = kHelloVersion;
    }
    Hello out;
    std::string why;
    ASSERT_FALSE(decode_hello(b.data(), &out, &why)) << "seed " << seed;
  }
}

TEST(HelloReply, EncodeLayout) {
  std::array<uint8_t, kReplySize> b{};
  encode_reply(HelloReply::kWrongNonce, b.data());
  EXPECT_EQ(b, (std::array<uint8_t, 4>{'M', 'S', 'R', 2}));
  encode_reply(HelloReply::kAccepted, b.data());
  EXPECT_EQ(b, (std::array<uint8_t, 4>{'M', 'S', 'R', 1}));
}

TEST(HelloReply, RoundTripEveryReply) {
  for (const HelloReply r : {HelloReply::kAccepted, HelloReply::kWrongNonce, HelloReply::kMalformed,
                             HelloReply::kBusy}) {
    std::array<uint8_t, kReplySize> b{};
    encode_reply(r, b.data());
    HelloReply out = r == HelloReply::kBusy ? HelloReply::kAccepted : HelloReply::kBusy;
    ASSERT_TRUE(decode_reply(b.data(), &out));
    EXPECT_EQ(out, r);
  }
}

TEST(HelloReply, RejectsInvalidReplies) {
  const std::array<std::array<uint8_t, 4>, 8> bad = {{
      {'M', 'S', 'R', 0},
      {'M', 'S', 'R', 7},
      {'M', 'S', 'R', 255},
      {'X', 'S', 'R', 1},
      {'M', 'X', 'R', 1},
      {'M', 'S', 'X', 1},
      {'M', 'S', 'H', 1},  // start of a hello/handle, not a reply
      {0, 0, 0, 0},
  }};
  for (const auto& b : bad) {
    HelloReply out = HelloReply::kMalformed;
    EXPECT_FALSE(decode_reply(b.data(), &out)) << int{b[0]} << " " << int{b[3]};
    EXPECT_EQ(out, HelloReply::kMalformed);  // untouched
  }
}

TEST(HelloReply, TextsAreDistinct) {
  EXPECT_STREQ(reply_text(HelloReply::kAccepted), "accepted");
  std::set<std::string> texts;
  for (const HelloReply r :
       {HelloReply::kAccepted, HelloReply::kWrongNonce, HelloReply::kMalformed, HelloReply::kBusy,
        HelloReply::kSetupFailed, HelloReply::kSettingsDiffer}) {
    const std::string t = reply_text(r);
    EXPECT_FALSE(t.empty());
    texts.insert(t);
  }
  EXPECT_EQ(texts.size(), 6u);
  EXPECT_NE(std::string(reply_text(HelloReply::kSettingsDiffer)).find("NCCL_MESH_TUNER"),
            std::string::npos);
  EXPECT_NE(std::string(reply_text(HelloReply::kWrongNonce)).find("nonce"), std::string::npos);
}

}  // namespace
}  // namespace mesh::handshake
