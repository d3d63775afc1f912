// SPDX-License-Identifier: Apache-2.0
// The 128-byte connection handle: encode/decode round trips and rejection of corrupted input.
#include "handshake/handle.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

namespace mesh::handshake {
namespace {

using Buffer = std::array<uint8_t, kHandleSize>;

static_assert(kHandleSize == 128);
static_assert(kMaxHandleAddrs == 17);  // (128 - 40) / 5

constexpr uint32_t ip(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return (a << 24) | (b << 16) | (c << 8) | d;
}

// A random unicast address 1.0.0.0 .. 223.255.255.x: never 0, multicast or broadcast.
uint32_t random_unicast(std::mt19937& rng) {
  const auto below = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  return ip(1 + below(223), below(256), below(256), below(256));
}

Nonce test_nonce() {
  Nonce n{};
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<uint8_t>(0xA0 + i);
  return n;
}

Handle make_handle(size_t naddrs) {
  Handle h;
  h.port = 0xBEEF;
  h.nonce = test_nonce();
  for (size_t i = 0; i < naddrs; ++i) {
    h.addrs.push_back({ip(10, 0, static_cast<uint32_t>(i), 1), static_cast<uint8_t>(24 + i % 9)});
  }
  return h;
}

Buffer encoded(const Handle& h) {
  Buffer b{};
  std::string why;
  EXPECT_TRUE(encode_handle(h, b.data(), &why)) << why;
  return b;
}

// Recomputes the checksum as handle.h documents it: FNV-1a over [0,24) continued over [28,128),
// stored big-endian at [24,28). After a mutation this makes the specific check, not the
// checksum, the one that has to reject the handle.
void resign(Buffer& b) {
  uint32_t sum = fnv1a(b.data(), 24);
  sum = fnv1a(b.data() + 28, kHandleSize - 28, sum);
  b[24] = static_cast<uint8_t>(sum >> 24);
  b[25] = static_cast<uint8_t>(sum >> 16);
  b[26] = static_cast<uint8_t>(sum >> 8);
  b[27] = static_cast<uint8_t>(sum);
}

void put_be32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

// Decoding must fail, say why (containing `reason`) and leave *out untouched.
void expect_rejected(const Buffer& b, const std::string& reason) {
  Handle out;
  out.port = 4242;
  std::string why;
  EXPECT_FALSE(decode_handle(b.data(), b.size(), &out, &why));
  EXPECT_NE(why.find(reason), std::string::npos)
      << "why: '" << why << "', expected '" << reason << "'";
  EXPECT_EQ(out.port, 4242);
  EXPECT_TRUE(out.addrs.empty());
}

void expect_same(const Handle& got, const Handle& want) {
  EXPECT_EQ(got.port, want.port);
  EXPECT_EQ(got.nonce, want.nonce);
  ASSERT_EQ(got.addrs.size(), want.addrs.size());
  for (size_t i = 0; i < want.addrs.size(); ++i) {
    EXPECT_EQ(got.addrs[i], want.addrs[i]) << "address " << i;
  }
}

TEST(Fnv1a, KnownVectors) {
  const auto str = [](const char* s) { return reinterpret_cast<const uint8_t*>(s); };
  EXPECT_EQ(fnv1a(str(""), 0), 0x811c9dc5u);
  EXPECT_EQ(fnv1a(str("a"), 1), 0xe40c292cu);
  EXPECT_EQ(fnv1a(str("foobar"), 6), 0xbf9cf968u);
  // Continuing with the running hash as the seed equals hashing the concatenation.
  EXPECT_EQ(fnv1a(str("bar"), 3, fnv1a(str("foo"), 3)), 0xbf9cf968u);
}

TEST(HandleCodec, LayoutIsBigEndianAsDocumented) {
  Handle h;
  h.port = 0x1234;
  h.nonce = test_nonce();
  h.addrs = {{ip(10, 1, 2, 3), 31}, {ip(192, 168, 7, 9), 24}};
  const Buffer b = encoded(h);
  EXPECT_EQ(b[0], 'M');
  EXPECT_EQ(b[1], 'S');
  EXPECT_EQ(b[2], 'H');
  EXPECT_EQ(b[3], '1');
  EXPECT_EQ(b[4], 3);  // version
  EXPECT_EQ(b[5], 2);  // address count
  EXPECT_EQ(b[6], 0x12);
  EXPECT_EQ(b[7], 0x34);
  for (size_t i = 0; i < kNonceSize; ++i) EXPECT_EQ(b[8 + i], 0xA0 + i) << i;
  for (size_t i = 28; i < 32; ++i) EXPECT_EQ(b[i], 0) << i;
  // The agreement (defaults: tuner auto = 0, threshold 131072 in 56 bits), then the addresses
  // from byte 40.
  const uint8_t agreement[] = {0, 0, 0, 0, 0, 0x02, 0, 0};
  for (size_t i = 0; i < sizeof(agreement); ++i) EXPECT_EQ(b[32 + i], agreement[i]) << i;
  const uint8_t addrs[] = {10, 1, 2, 3, 31, 192, 168, 7, 9, 24};
  for (size_t i = 0; i < sizeof(addrs); ++i) EXPECT_EQ(b[40 + i], addrs[i]) << i;
  for (size_t i = 50; i < kHandleSize; ++i) EXPECT_EQ(b[i], 0) << i;
  // The stored checksum is the documented one.
  Buffer copy = b;
  resign(copy);
  EXPECT_EQ(copy, b);
}

TEST(HandleCodec, AgreementRoundTripsAndIsValidated) {
  Handle h = make_handle(2);
  h.agreement = {TunerMode::kOff, 131072};
  Buffer b = encoded(h);
  EXPECT_EQ(b[32], 2);  // off
  Handle out;
  std::string why;
  ASSERT_TRUE(decode_handle(b.data(), b.size(), &out, &why)) << why;
  EXPECT_EQ(out.agreement, h.agreement);
  b[32] = 7;
  resign(b);
  expect_rejected(b, "tuner mode");
}

TEST(HandleCodec, EncodeWritesExactly128Bytes) {
  std::array<uint8_t, kHandleSize + 16> big;
  big.fill(0xCC);
  std::string why;
  ASSERT_TRUE(encode_handle(make_handle(kMaxHandleAddrs), big.data(), &why)) << why;
  for (size_t i = kHandleSize; i < big.size(); ++i) EXPECT_EQ(big[i], 0xCC) << i;
}

TEST(HandleCodec, RoundTripOneAddress) {
  const Handle h = make_handle(1);
  const Buffer b = encoded(h);
  Handle out;
  std::string why;
  ASSERT_TRUE(decode_handle(b.data(), b.size(), &out, &why)) << why;
  expect_same(out, h);
}

TEST(HandleCodec, RoundTripMaxAddresses) {
  const Handle h = make_handle(kMaxHandleAddrs);
  const Buffer b = encoded(h);
  EXPECT_EQ(b[5], kMaxHandleAddrs);
  Handle out;
  std::string why;
  ASSERT_TRUE(decode_handle(b.data(), b.size(), &out, &why)) << why;
  expect_same(out, h);
}

TEST(HandleCodec, RoundTripBoundaryValues) {
  Handle h;
  h.port = 65535;
  h.nonce.fill(0xFF);
  h.addrs = {{ip(223, 255, 255, 255), 32},  // highest address below multicast
             {ip(0, 0, 0, 1), 0},           // prefix 0 is a valid (if odd) prefix
             {ip(127, 0, 0, 1), 8}};
  const Buffer b = encoded(h);
  Handle out;
  std::string why;
  ASSERT_TRUE(decode_handle(b.data(), b.size(), &out, &why)) << why;
  expect_same(out, h);
}

TEST(HandleCodec, EncodeKeepsTheFirstMaxAddresses) {
  for (const size_t extra : {size_t{1}, size_t{6}}) {
    const Handle h = make_handle(kMaxHandleAddrs + extra);
    std::array<uint8_t, kHandleSize + 16> big;
    big.fill(0xCC);
    std::string why;
    ASSERT_TRUE(encode_handle(h, big.data(), &why)) << why;
    for (size_t i = kHandleSize; i < big.size(); ++i) EXPECT_EQ(big[i], 0xCC) << extra << " " << i;
    EXPECT_EQ(big[5], kMaxHandleAddrs);
    Handle out;
    ASSERT_TRUE(decode_handle(big.data(), kHandleSize, &out, &why)) << why;
    ASSERT_EQ(out.addrs.size(), kMaxHandleAddrs);
    for (size_t i = 0; i < kMaxHandleAddrs; ++i) EXPECT_EQ(out.addrs[i], h.addrs[i]) << i;
  }
}

TEST(HandleCodec, RandomValidHandlesRoundTrip) {
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 2000; ++iter) {
    Handle h;
    h.port = static_cast<uint16_t>(1 + rng() % 65535);
    for (auto& x : h.nonce) x = static_cast<uint8_t>(rng());
    const size_t n = 1 + rng() % kMaxHandleAddrs;
    for (size_t i = 0; i < n; ++i) {
      h.addrs.push_back({random_unicast(rng), static_cast<uint8_t>(rng() % 33)});
    }
    const Buffer b = encoded(h);
    Handle out;
    std::string why;
    ASSERT_TRUE(decode_handle(b.data(), b.size(), &out, &why)) << why << " iter " << iter;
    expect_same(out, h);
  }
}

TEST(HandleCodec, EncodeRejectsUnencodableHandles) {
  Buffer b{};
  std::string why;
  Handle none = make_handle(0);
  EXPECT_FALSE(encode_handle(none, b.data(), &why));
  EXPECT_NE(why.find("no local address"), std::string::npos) << why;

  why.clear();
  Handle port0 = make_handle(2);
  port0.port = 0;
  EXPECT_FALSE(encode_handle(port0, b.data(), &why));
  EXPECT_NE(why.find("port is 0"), std::string::npos) << why;

  why.clear();
  Handle prefix33 = make_handle(3);
  prefix33.addrs[2].prefix = 33;
  EXPECT_FALSE(encode_handle(prefix33, b.data(), &why));
  EXPECT_NE(why.find("prefix length 33"), std::string::npos) << why;
}

TEST(HandleDecode, EverySingleBitFlipIsRejected) {
  for (const size_t n : {size_t{1}, size_t{3}, kMaxHandleAddrs}) {
    const Buffer good = encoded(make_handle(n));
    for (size_t bit = 0; bit < kHandleSize * 8; ++bit) {
      Buffer b = good;
      b[bit / 8] = static_cast<uint8_t>(b[bit / 8] ^ (1u << (bit % 8)));
      Handle out;
      std::string why;
      EXPECT_FALSE(decode_handle(b.data(), b.size(), &out, &why))
          << n << " addresses, bit " << bit << " (byte " << bit / 8 << ")";
      EXPECT_FALSE(why.empty());
    }
  }
}

TEST(HandleDecode, RejectsNullAndShortBuffers) {
  const Buffer good = encoded(make_handle(2));
  Handle out;
  std::string why;
  EXPECT_FALSE(decode_handle(nullptr, kHandleSize, &out, &why));
  EXPECT_NE(why.find("NULL"), std::string::npos) << why;
  for (const size_t len : {size_t{0}, size_t{1}, size_t{32}, kHandleSize - 1}) {
    why.clear();
    EXPECT_FALSE(decode_handle(good.data(), len, &out, &why)) << len;
    EXPECT_NE(why.find("expected 128"), std::string::npos) << why;
  }
  EXPECT_TRUE(out.addrs.empty());
}

TEST(HandleDecode, RejectsBadMagic) {
  for (const uint32_t magic : {0u, 0x4D534832u /* MSH2 */, 0x314853CDu, 0x4D534848u /* MSHH */}) {
    Buffer b = encoded(make_handle(2));
    put_be32(b.data(), magic);
    resign(b);
    expect_rejected(b, "bad magic");
  }
}

TEST(HandleDecode, RejectsOtherVersions) {
  for (const uint8_t version : std::initializer_list<uint8_t>{0, 1, 2, 4, 255}) {
    Buffer b = encoded(make_handle(2));
    b[4] = version;
    resign(b);
    expect_rejected(b, "protocol version " + std::to_string(version));
  }
}

TEST(HandleDecode, RejectsZeroAndTooManyAddresses) {
  {
    Buffer b = encoded(make_handle(1));
    b[5] = 0;
    std::memset(b.data() + kHandleHeaderSize, 0, 5);  // keep the padding rule satisfied
    resign(b);
    expect_rejected(b, "address count 0");
  }
  for (const uint8_t n : std::initializer_list<uint8_t>{20, 25, 255}) {
    Buffer b = encoded(make_handle(kMaxHandleAddrs));
    b[5] = n;
    resign(b);
    expect_rejected(b, "address count " + std::to_string(n));
  }
}

TEST(HandleDecode, RejectsCountDisagreeingWithTheList) {
  {  // Fewer than encoded: the third entry becomes non-zero padding.
    Buffer b = encoded(make_handle(3));
    b[5] = 2;
    resign(b);
    expect_rejected(b, "padding");
  }
  {  // More than encoded: the extra entry is 0.0.0.0/0.
    Buffer b = encoded(make_handle(3));
    b[5] = 4;
    resign(b);
    expect_rejected(b, "not a unicast");
  }
}

TEST(HandleDecode, RejectsPortZero) {
  Buffer b = encoded(make_handle(2));
  b[6] = 0;
  b[7] = 0;
  resign(b);
  expect_rejected(b, "port is 0");
}

TEST(HandleDecode, RdmaMaskBitsOnlyForPresentAddresses) {
  for (const size_t n : {size_t{1}, size_t{2}, kMaxHandleAddrs}) {
    for (uint32_t bit = 0; bit < 32; ++bit) {
      Buffer b = encoded(make_handle(n));
      const uint32_t mask = 1u << bit;
      b[28] = static_cast<uint8_t>(mask >> 24);
      b[29] = static_cast<uint8_t>(mask >> 16);
      b[30] = static_cast<uint8_t>(mask >> 8);
      b[31] = static_cast<uint8_t>(mask);
      resign(b);
      SCOPED_TRACE(std::to_string(n) + " addresses, bit " + std::to_string(bit));
      if (bit < n) {
        Handle out;
        std::string why;
        ASSERT_TRUE(decode_handle(b.data(), b.size(), &out, &why)) << why;
        EXPECT_EQ(out.rdma_mask, mask);
      } else {
        expect_rejected(b, "RDMA mask");
      }
    }
  }
}

TEST(HandleCodec, RdmaMaskRoundTripsAndIsTrimmedToTheAddresses) {
  Handle h = make_handle(3);
  h.rdma_mask = 0xFFFFFFFFu;  // more bits than addresses: only the first 3 are encoded
  Buffer b{};
  std::string why;
  ASSERT_TRUE(encode_handle(h, b.data(), &why)) << why;
  Handle out;
  ASSERT_TRUE(decode_handle(b.data(), b.size(), &out, &why)) << why;
  EXPECT_EQ(out.rdma_mask, 0x7u);
}

TEST(HandleDecode, RejectsNonZeroPaddingAtEveryPosition) {
  for (const size_t n : {size_t{1}, size_t{7}, kMaxHandleAddrs}) {
    for (size_t i = kHandleHeaderSize + n * 5; i < kHandleSize; ++i) {
      Buffer b = encoded(make_handle(n));
      b[i] = 0x80;
      resign(b);
      SCOPED_TRACE(std::to_string(n) + " addresses, byte " + std::to_string(i));
      expect_rejected(b, "padding");
    }
  }
}

TEST(HandleDecode, RejectsPrefixAbove32) {
  for (const uint8_t prefix : std::initializer_list<uint8_t>{33, 64, 255}) {
    for (const size_t entry : {size_t{0}, size_t{2}}) {
      Buffer b = encoded(make_handle(3));
      b[kHandleHeaderSize + entry * 5 + 4] = prefix;
      resign(b);
      SCOPED_TRACE("entry " + std::to_string(entry) + " prefix " + std::to_string(prefix));
      expect_rejected(b, "prefix length " + std::to_string(prefix));
    }
  }
}

TEST(HandleDecode, RejectsNonUnicastAddresses) {
  for (const uint32_t addr : {0u, 0xffffffffu, ip(224, 0, 0, 1), ip(239, 255, 255, 255),
                              ip(230, 1, 2, 3), ip(224, 0, 0, 0)}) {
    for (const size_t entry : {size_t{0}, size_t{1}}) {
      Buffer b = encoded(make_handle(2));
      put_be32(b.data() + kHandleHeaderSize + entry * 5, addr);
      resign(b);
      SCOPED_TRACE("entry " + std::to_string(entry) + " address " + format_ipv4(addr));
      expect_rejected(b, "not a unicast");
    }
  }
}

TEST(HandleDecode, RejectsChecksumMismatch) {
  Buffer b = encoded(make_handle(2));
  b[26] = static_cast<uint8_t>(b[26] + 1);
  expect_rejected(b, "checksum");
  // A field changed without re-signing: every check passes except the checksum.
  Buffer c = encoded(make_handle(2));
  c[6] = static_cast<uint8_t>(c[6] ^ 0x40);  // another non-zero port
  expect_rejected(c, "checksum");
  Buffer d = encoded(make_handle(2));
  d[8] = static_cast<uint8_t>(d[8] ^ 0x01);  // the nonce
  expect_rejected(d, "checksum");
}

TEST(HandleDecode, RandomBuffersNeverDecode) {
  Buffer b{};
  for (uint32_t seed = 0; seed < 20000; ++seed) {
    std::mt19937 rng(seed);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    Handle out;
    std::string why;
    ASSERT_FALSE(decode_handle(b.data(), b.size(), &out, &why)) << "seed " << seed;
  }
}

TEST(HandleDecode, RandomBodiesBehindAValidHeaderNeverDecode) {
  // Magic, version, count, port, reserved and padding all valid; nonce, addresses and checksum
  // random: only the checksum stands between these and acceptance.
  Buffer b{};
  for (uint32_t seed = 0; seed < 20000; ++seed) {
    std::mt19937 rng(seed);
    b.fill(0);
    put_be32(b.data(), kHandleMagic);
    b[4] = kHandleVersion;
    const size_t n = 1 + rng() % kMaxHandleAddrs;
    b[5] = static_cast<uint8_t>(n);
    b[6] = static_cast<uint8_t>(1 + rng() % 255);
    b[7] = static_cast<uint8_t>(rng());
    for (size_t i = 8; i < 28; ++i) b[i] = static_cast<uint8_t>(rng());
    for (size_t i = 0; i < n; ++i) {
      put_be32(b.data() + kHandleHeaderSize + i * 5, random_unicast(rng));
      b[kHandleHeaderSize + i * 5 + 4] = static_cast<uint8_t>(rng() % 33);
    }
    Handle out;
    std::string why;
    ASSERT_FALSE(decode_handle(b.data(), b.size(), &out, &why)) << "seed " << seed;
    ASSERT_NE(why.find("checksum"), std::string::npos) << why;
  }
}

}  // namespace
}  // namespace mesh::handshake
