// SPDX-License-Identifier: Apache-2.0
// mesh::netmask, in_subnet, prefix_from_netmask, parse_ipv4 and format_ipv4/format_prefix.
#include "util/ipv4.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace mesh {
namespace {

TEST(Netmask, EdgePrefixLengths) {
  EXPECT_EQ(netmask(0), 0x00000000u);
  EXPECT_EQ(netmask(1), 0x80000000u);
  EXPECT_EQ(netmask(8), 0xff000000u);
  EXPECT_EQ(netmask(16), 0xffff0000u);
  EXPECT_EQ(netmask(24), 0xffffff00u);
  EXPECT_EQ(netmask(30), 0xfffffffcu);
  EXPECT_EQ(netmask(31), 0xfffffffeu);
  EXPECT_EQ(netmask(32), 0xffffffffu);
}

TEST(Netmask, PrefixAbove32SaturatesToHostMask) {
  EXPECT_EQ(netmask(33), 0xffffffffu);
}

TEST(Netmask, IsConstexpr) {
  static_assert(netmask(24) == 0xffffff00u);
  static_assert(in_subnet({0x0a000001u, 24}, 0x0a0000feu));
  SUCCEED();
}

TEST(InSubnet, Slash24) {
  const Ipv4Prefix net{0xc0a8014du, 24};      // 192.168.1.77/24
  EXPECT_TRUE(in_subnet(net, 0xc0a80100u));   // 192.168.1.0
  EXPECT_TRUE(in_subnet(net, 0xc0a80101u));   // 192.168.1.1
  EXPECT_TRUE(in_subnet(net, 0xc0a801ffu));   // 192.168.1.255
  EXPECT_FALSE(in_subnet(net, 0xc0a800ffu));  // 192.168.0.255
  EXPECT_FALSE(in_subnet(net, 0xc0a80200u));  // 192.168.2.0
  EXPECT_FALSE(in_subnet(net, 0x0a01014du));  // 10.1.1.77
}

TEST(InSubnet, Slash30) {
  const Ipv4Prefix net{0x0a010105u, 30};  // 10.1.1.5/30: 10.1.1.4 .. 10.1.1.7
  EXPECT_FALSE(in_subnet(net, 0x0a010103u));
  EXPECT_TRUE(in_subnet(net, 0x0a010104u));
  EXPECT_TRUE(in_subnet(net, 0x0a010105u));
  EXPECT_TRUE(in_subnet(net, 0x0a010106u));
  EXPECT_TRUE(in_subnet(net, 0x0a010107u));
  EXPECT_FALSE(in_subnet(net, 0x0a010108u));
}

TEST(InSubnet, Slash31PairsContainExactlyTheTwoEnds) {
  // RFC 3021 point-to-point: 10.0.0.0/31 is 10.0.0.0 and 10.0.0.1, seen from either end.
  for (const uint32_t self : {0x0a000000u, 0x0a000001u}) {
    const Ipv4Prefix net{self, 31};
    EXPECT_TRUE(in_subnet(net, 0x0a000000u)) << self;
    EXPECT_TRUE(in_subnet(net, 0x0a000001u)) << self;
    EXPECT_FALSE(in_subnet(net, 0x0a000002u)) << self;
    EXPECT_FALSE(in_subnet(net, 0x09ffffffu)) << self;
  }
  // The next pair up does not overlap.
  const Ipv4Prefix next{0x0a000003u, 31};
  EXPECT_TRUE(in_subnet(next, 0x0a000002u));
  EXPECT_FALSE(in_subnet(next, 0x0a000001u));
  EXPECT_FALSE(in_subnet(next, 0x0a000004u));
}

TEST(InSubnet, Slash32ContainsOnlyItself) {
  const Ipv4Prefix host{0x0a000005u, 32};
  EXPECT_TRUE(in_subnet(host, 0x0a000005u));
  EXPECT_FALSE(in_subnet(host, 0x0a000004u));
  EXPECT_FALSE(in_subnet(host, 0x0a000006u));
  EXPECT_FALSE(in_subnet(host, 0x8a000005u));  // differs only in the top bit
}

TEST(InSubnet, Slash0ContainsEverything) {
  const Ipv4Prefix any{0x0a000005u, 0};
  EXPECT_TRUE(in_subnet(any, 0x00000000u));
  EXPECT_TRUE(in_subnet(any, 0xffffffffu));
  EXPECT_TRUE(in_subnet(any, 0xc0a80101u));
}

TEST(InSubnet, Slash1SplitsOnTheTopBit) {
  const Ipv4Prefix low{0x0a000001u, 1};
  EXPECT_TRUE(in_subnet(low, 0x7fffffffu));
  EXPECT_FALSE(in_subnet(low, 0x80000000u));
}

TEST(PrefixFromNetmask, ContiguousMasks) {
  EXPECT_EQ(prefix_from_netmask(0x00000000u), uint8_t{0});
  EXPECT_EQ(prefix_from_netmask(0x80000000u), uint8_t{1});
  EXPECT_EQ(prefix_from_netmask(0xff000000u), uint8_t{8});
  EXPECT_EQ(prefix_from_netmask(0xffffff00u), uint8_t{24});
  EXPECT_EQ(prefix_from_netmask(0xfffffffcu), uint8_t{30});
  EXPECT_EQ(prefix_from_netmask(0xfffffffeu), uint8_t{31});
  EXPECT_EQ(prefix_from_netmask(0xffffffffu), uint8_t{32});
}

TEST(PrefixFromNetmask, NonContiguousMasksAreRejected) {
  EXPECT_EQ(prefix_from_netmask(0xff00ff00u), std::nullopt);
  EXPECT_EQ(prefix_from_netmask(0x00ffffffu), std::nullopt);  // inverted /8
  EXPECT_EQ(prefix_from_netmask(0x7fffffffu), std::nullopt);
  EXPECT_EQ(prefix_from_netmask(0xfffffffdu), std::nullopt);  // hole in bit 1
  EXPECT_EQ(prefix_from_netmask(0x00000001u), std::nullopt);
  EXPECT_EQ(prefix_from_netmask(0xffff7f00u), std::nullopt);
}

TEST(FormatIpv4, KnownAddresses) {
  EXPECT_EQ(format_ipv4(0x0a000001u), "10.0.0.1");
  EXPECT_EQ(format_ipv4(0x00000000u), "0.0.0.0");
  EXPECT_EQ(format_ipv4(0xffffffffu), "255.255.255.255");
  EXPECT_EQ(format_ipv4(0xc0a8010au), "192.168.1.10");
  EXPECT_EQ(format_ipv4(0x7f000001u), "127.0.0.1");
}

TEST(FormatPrefix, AddressSlashLength) {
  EXPECT_EQ(format_prefix({0xc0a80101u, 24}), "192.168.1.1/24");
  EXPECT_EQ(format_prefix({0x0a000000u, 31}), "10.0.0.0/31");
  EXPECT_EQ(format_prefix({0x00000000u, 0}), "0.0.0.0/0");
  EXPECT_EQ(format_prefix(Ipv4Prefix{}), "0.0.0.0/32");  // defaults
}

TEST(ParseIpv4, KnownAddresses) {
  EXPECT_EQ(parse_ipv4("10.0.0.1"), 0x0a000001u);
  EXPECT_EQ(parse_ipv4("0.0.0.0"), 0x00000000u);
  EXPECT_EQ(parse_ipv4("255.255.255.255"), 0xffffffffu);
  EXPECT_EQ(parse_ipv4("192.168.1.10"), 0xc0a8010au);
  EXPECT_EQ(parse_ipv4("172.16.254.3"), 0xac10fe03u);
}

TEST(ParseIpv4, ParsesOnlyTheViewNotTheWholeBuffer) {
  const std::string_view buffer = "10.0.0.1/24";
  EXPECT_EQ(parse_ipv4(buffer.substr(0, 8)), 0x0a000001u);
}

TEST(ParseIpv4, Rejects) {
  for (const char* bad : {"", "10.0.0", "10.0.0.256", "10.0.0.1.2", "a.b.c.d", " 10.0.0.1",
                          "10.0.0.1 ", "10.0.0.1/24", "-1.0.0.0", "1..2.3", "10.0.0.", ".10.0.0.1",
                          "0x0a.0.0.1", "::1", "10,0,0,1", "256.0.0.0", "1.2.3.4x"}) {
    EXPECT_EQ(parse_ipv4(bad), std::nullopt) << "'" << bad << "'";
  }
}

TEST(ParseIpv4, RejectsTextAfterAnEmbeddedNul) {
  // A string_view carries its length: the bytes after the NUL are part of the input, so this is
  // not an IPv4 address.
  using namespace std::string_view_literals;
  EXPECT_EQ(parse_ipv4("10.0.0.1\0garbage"sv), std::nullopt);
}

TEST(Ipv4, FormatParseRoundTrip) {
  uint32_t a = 0x12345678u;
  for (int i = 0; i < 4096; ++i) {
    a = a * 1664525u + 1013904223u;  // LCG: addresses spread over the whole space
    const std::string text = format_ipv4(a);
    ASSERT_EQ(parse_ipv4(text), a) << text;
  }
  for (const uint32_t edge : {0u, 1u, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu}) {
    EXPECT_EQ(parse_ipv4(format_ipv4(edge)), edge);
  }
}

TEST(Ipv4Prefix, EqualityComparesAddressAndPrefix) {
  EXPECT_EQ((Ipv4Prefix{0x0a000001u, 24}), (Ipv4Prefix{0x0a000001u, 24}));
  EXPECT_NE((Ipv4Prefix{0x0a000001u, 24}), (Ipv4Prefix{0x0a000001u, 25}));
  EXPECT_NE((Ipv4Prefix{0x0a000001u, 24}), (Ipv4Prefix{0x0a000002u, 24}));
}

}  // namespace
}  // namespace mesh
