// SPDX-License-Identifier: Apache-2.0
// decide_device_binding and the fix texts over synthetic address tables (issue 16: the two
// PCIe halves of a DGX Spark port, addressed in one subnet).
#include "util/device_binding.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace mesh {
namespace {

constexpr uint32_t ip(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return (a << 24) | (b << 16) | (c << 8) | d;
}

LocalAddress addr(const std::string& name, uint32_t a, uint8_t prefix, bool up = true) {
  return {name, {a, prefix}, up};
}

// arp_ignore per interface from a table; -1 when absent.
auto arp(std::map<std::string, int> m) {
  return [m](const std::string& n) {
    const auto it = m.find(n);
    return it == m.end() ? -1 : it->second;
  };
}

const std::vector<LocalAddress> kSpark = {
    addr("lo", ip(127, 0, 0, 1), 8),
    addr("enP7s7", ip(10, 0, 0, 5), 24),  // management
    addr("enp1s0f0np0", ip(198, 18, 20, 1), 24),
    addr("enP2p1s0f0np0", ip(198, 18, 20, 2), 24),
};

TEST(DeviceBinding, HalvesOnOneSubnetAreBoundWhenArpIgnoreIsSet) {
  const auto d = decide_device_binding(ip(198, 18, 20, 2), kSpark,
                                       arp({{"enP2p1s0f0np0", 1}, {"enp1s0f0np0", 1}}));
  EXPECT_EQ(d.action, DeviceBinding::Action::kBind);
  EXPECT_EQ(d.ifname, "enP2p1s0f0np0");
  EXPECT_EQ(d.shared_with, std::vector<std::string>{"enp1s0f0np0"});
  EXPECT_EQ(format_prefix(d.subnet), "198.18.20.0/24");
  EXPECT_EQ(decide_device_binding(ip(198, 18, 20, 1), kSpark, arp({{"enp1s0f0np0", 2}})).action,
            DeviceBinding::Action::kBind);
}

TEST(DeviceBinding, HalvesWithDefaultArpIgnoreStayUnbound) {
  for (int v : {0, 3, 8, -1}) {
    const auto d = decide_device_binding(ip(198, 18, 20, 1), kSpark, arp({{"enp1s0f0np0", v}}));
    EXPECT_EQ(d.action, DeviceBinding::Action::kNeedsArp) << "arp_ignore=" << v;
    EXPECT_EQ(d.arp_ignore, v);
  }
}

TEST(DeviceBinding, AnAddressAloneOnItsSubnetIsNeverBound) {
  // Management, loopback, a triangle's cables: routing already picks the interface.
  for (uint32_t a : {ip(10, 0, 0, 5), ip(127, 0, 0, 1)}) {
    EXPECT_EQ(decide_device_binding(a, kSpark, arp({})).action, DeviceBinding::Action::kNone);
  }
  const std::vector<LocalAddress> triangle = {addr("cb", ip(198, 18, 1, 1), 24),
                                              addr("cc", ip(198, 18, 2, 1), 30)};
  EXPECT_EQ(decide_device_binding(ip(198, 18, 1, 1), triangle, arp({{"cb", 1}})).action,
            DeviceBinding::Action::kNone);
}

TEST(DeviceBinding, SecondAddressOnTheSameNetdevOrADownNeighbourIsNotSharing) {
  const std::vector<LocalAddress> t = {addr("eth1", ip(198, 18, 20, 1), 24),
                                       addr("eth1", ip(198, 18, 20, 9), 24),
                                       addr("eth2", ip(198, 18, 20, 2), 24, /*up=*/false)};
  EXPECT_EQ(decide_device_binding(ip(198, 18, 20, 1), t, arp({{"eth1", 1}})).action,
            DeviceBinding::Action::kNone);
}

TEST(DeviceBinding, OverlappingPrefixesShare) {
  // A /30 inside a neighbour's /24 is routed by the longer prefix, but the /24's interface
  // still sees the /30's peers: both are multi-homed.
  const std::vector<LocalAddress> t = {addr("eth1", ip(198, 18, 20, 1), 30),
                                       addr("eth2", ip(198, 18, 20, 9), 24)};
  EXPECT_EQ(decide_device_binding(ip(198, 18, 20, 1), t, arp({{"eth1", 1}})).action,
            DeviceBinding::Action::kBind);
  EXPECT_EQ(decide_device_binding(ip(198, 18, 20, 9), t, arp({{"eth2", 1}})).action,
            DeviceBinding::Action::kBind);
}

TEST(DeviceBinding, UnknownAddressIsLeftAlone) {
  EXPECT_EQ(decide_device_binding(ip(192, 0, 2, 1), kSpark, arp({})).action,
            DeviceBinding::Action::kNone);
}

TEST(DeviceBinding, FixTexts) {
  EXPECT_EQ(halves_sysctl_fix({"p0a", "eth0.100"}),
            "sysctl -w net.ipv4.conf.p0a.arp_ignore=1 net.ipv4.conf.p0a.arp_announce=2 "
            "net.ipv4.conf.p0a.rp_filter=2 net.ipv4.conf.eth0/100.arp_ignore=1 "
            "net.ipv4.conf.eth0/100.arp_announce=2 net.ipv4.conf.eth0/100.rp_filter=2");
  EXPECT_EQ(policy_routing_fix("p0b", {ip(198, 18, 20, 2), 24}, 1005),
            "ip rule add from 198.18.20.2 table 1005; ip route add 198.18.20.0/24 dev p0b src "
            "198.18.20.2 table 1005");
}

}  // namespace
}  // namespace mesh
