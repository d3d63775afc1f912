// SPDX-License-Identifier: Apache-2.0
// select_interfaces, group_devices and choose_rails over synthetic interface tables.
#include "topology/selection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace mesh::topology {
namespace {

// a.b.c.d in host order.
constexpr uint32_t ip(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return (a << 24) | (b << 16) | (c << 8) | d;
}

Interface nic(const std::string& name, uint32_t addr, uint8_t prefix, bool up = true) {
  Interface itf;
  itf.name = name;
  itf.addr = {addr, prefix};
  itf.up = up;
  return itf;
}

Interface loopback(bool up = true) {
  Interface itf = nic("lo", ip(127, 0, 0, 1), 8, up);
  itf.loopback = true;
  itf.mtu = 65536;
  return itf;
}

Interface pci_nic(const std::string& name, uint32_t addr, uint8_t prefix, const std::string& pci,
                  int numa, int speed) {
  Interface itf = nic(name, addr, prefix);
  itf.pci_path = pci;
  itf.numa_node = numa;
  itf.speed_mbps = speed;
  return itf;
}

std::vector<std::string> names_of(const std::vector<Interface>& v) {
  std::vector<std::string> out;
  for (const Interface& i : v) out.push_back(i.name);
  return out;
}

// How many notes mention both `needle1` and `needle2`.
int notes_with(const Selection& s, const std::string& needle1, const std::string& needle2) {
  return static_cast<int>(std::count_if(s.notes.begin(), s.notes.end(), [&](const std::string& n) {
    return n.find(needle1) != std::string::npos && n.find(needle2) != std::string::npos;
  }));
}

using Names = std::vector<std::string>;

// ---------------------------------------------------------------------------------------------
// select_interfaces

TEST(SelectInterfaces, DefaultExcludesLoopbackAndDownInterfaces) {
  const std::vector<Interface> all = {loopback(), nic("eth0", ip(10, 0, 0, 1), 24),
                                      nic("eth1", ip(10, 0, 1, 1), 24, /*up=*/false),
                                      nic("eth2", ip(10, 0, 2, 1), 30)};
  const Selection s = select_interfaces(all, IfnameFilter::parse(""));
  EXPECT_EQ(names_of(s.used), (Names{"eth0", "eth2"}));
  EXPECT_EQ(s.used[0].addr, (Ipv4Prefix{ip(10, 0, 0, 1), 24}));
  EXPECT_EQ(s.used[1].addr, (Ipv4Prefix{ip(10, 0, 2, 1), 30}));
  EXPECT_FALSE(s.loopback_fallback);
  ASSERT_EQ(s.notes.size(), 2u);
  EXPECT_EQ(notes_with(s, "eth1 (10.0.1.1/24)", "down"), 1);
  EXPECT_EQ(notes_with(s, "lo (127.0.0.1/8)", "loopback"), 1);
}

TEST(SelectInterfaces, KeepsDiscoveryOrder) {
  const std::vector<Interface> all = {nic("z9", ip(10, 0, 9, 1), 24), loopback(),
                                      nic("a1", ip(10, 0, 1, 1), 24),
                                      nic("m5", ip(10, 0, 5, 1), 24)};
  const Selection s = select_interfaces(all, IfnameFilter::parse(""));
  EXPECT_EQ(names_of(s.used), (Names{"z9", "a1", "m5"}));
}

TEST(SelectInterfaces, LoopbackFallbackWhenNothingElseIsUp) {
  const std::vector<Interface> all = {nic("eth0", ip(10, 0, 0, 1), 24, /*up=*/false), loopback()};
  const Selection s = select_interfaces(all, IfnameFilter::parse(""));
  EXPECT_EQ(names_of(s.used), (Names{"lo"}));
  EXPECT_TRUE(s.used[0].loopback);
  EXPECT_TRUE(s.loopback_fallback);
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_EQ(notes_with(s, "eth0", "down"), 1);
}

TEST(SelectInterfaces, LoopbackOnlyMachine) {
  const Selection s = select_interfaces({loopback()}, IfnameFilter::parse(""));
  EXPECT_EQ(names_of(s.used), (Names{"lo"}));
  EXPECT_TRUE(s.loopback_fallback);
  EXPECT_TRUE(s.notes.empty());
}

TEST(SelectInterfaces, DownLoopbackIsNotAFallback) {
  const Selection s = select_interfaces({loopback(/*up=*/false)}, IfnameFilter::parse(""));
  EXPECT_TRUE(s.used.empty());
  EXPECT_FALSE(s.loopback_fallback);
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_EQ(notes_with(s, "lo", "down"), 1);
}

TEST(SelectInterfaces, NoInterfacesAtAll) {
  const Selection s = select_interfaces({}, IfnameFilter::parse(""));
  EXPECT_TRUE(s.used.empty());
  EXPECT_TRUE(s.notes.empty());
  EXPECT_FALSE(s.loopback_fallback);
}

TEST(SelectInterfaces, FilterNamingLoIncludesIt) {
  const std::vector<Interface> all = {loopback(), nic("eth0", ip(10, 0, 0, 1), 24)};
  const Selection s = select_interfaces(all, IfnameFilter::parse("lo"));
  EXPECT_EQ(names_of(s.used), (Names{"lo"}));
  EXPECT_FALSE(s.loopback_fallback);  // chosen, not a fallback
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_EQ(notes_with(s, "eth0 (10.0.0.1/24)", "NCCL_MESH_IFNAME"), 1);
}

TEST(SelectInterfaces, FilterNamingLoAndANicUsesBoth) {
  const std::vector<Interface> all = {loopback(), nic("eth0", ip(10, 0, 0, 1), 24),
                                      nic("eth1", ip(10, 0, 1, 1), 24)};
  const Selection s = select_interfaces(all, IfnameFilter::parse("=lo,eth0"));
  EXPECT_EQ(names_of(s.used), (Names{"lo", "eth0"}));
  EXPECT_FALSE(s.loopback_fallback);
  EXPECT_EQ(notes_with(s, "eth1", "excluded by NCCL_MESH_IFNAME"), 1);
}

TEST(SelectInterfaces, FilterExcludesAndNotesEachExclusion) {
  const std::vector<Interface> all = {
      loopback(), nic("docker0", ip(172, 17, 0, 1), 16), nic("enp1s0", ip(10, 0, 1, 1), 24),
      nic("enp2s0", ip(10, 0, 2, 1), 24), nic("enp3s0", ip(10, 0, 3, 1), 24, /*up=*/false)};
  const Selection s = select_interfaces(all, IfnameFilter::parse("enp"));
  EXPECT_EQ(names_of(s.used), (Names{"enp1s0", "enp2s0"}));
  EXPECT_FALSE(s.loopback_fallback);
  ASSERT_EQ(s.notes.size(), 3u);
  EXPECT_EQ(notes_with(s, "lo (127.0.0.1/8)", "excluded by NCCL_MESH_IFNAME"), 1);
  EXPECT_EQ(notes_with(s, "docker0 (172.17.0.1/16)", "excluded by NCCL_MESH_IFNAME"), 1);
  EXPECT_EQ(notes_with(s, "enp3s0 (10.0.3.1/24)", "down"), 1);
}

TEST(SelectInterfaces, FilterDoesNotResurrectDownInterfaces) {
  const std::vector<Interface> all = {nic("eth0", ip(10, 0, 0, 1), 24, /*up=*/false), loopback()};
  const Selection s = select_interfaces(all, IfnameFilter::parse("eth0"));
  EXPECT_TRUE(s.used.empty());
  // A filter is an explicit choice: no silent fallback to an interface it excluded.
  EXPECT_FALSE(s.loopback_fallback);
}

TEST(SelectInterfaces, ExclusionFilterDoesNotAddLoopback) {
  // selection.h: "With a filter: every up interface the filter accepts (loopback included if
  // named)". "^docker" does not name lo; with real NICs up, lo must stay out: a loopback rail
  // pairs with the peer's own 127.0.0.1 and connects to this host instead of the peer.
  const std::vector<Interface> all = {loopback(), nic("docker0", ip(172, 17, 0, 1), 16),
                                      nic("eth0", ip(10, 0, 0, 1), 24)};
  const Selection s = select_interfaces(all, IfnameFilter::parse("^docker"));
  EXPECT_EQ(names_of(s.used), (Names{"eth0"}));
}

TEST(SelectInterfaces, AnInterfaceWithTwoAddressesAppearsOncePerAddress) {
  const std::vector<Interface> all = {nic("eth0", ip(10, 0, 0, 1), 24),
                                      nic("eth0", ip(10, 0, 9, 1), 24)};
  const Selection s = select_interfaces(all, IfnameFilter::parse(""));
  ASSERT_EQ(s.used.size(), 2u);
  EXPECT_EQ(s.used[0].addr.addr, ip(10, 0, 0, 1));
  EXPECT_EQ(s.used[1].addr.addr, ip(10, 0, 9, 1));
}

// ---------------------------------------------------------------------------------------------
// group_devices

TEST(GroupDevices, Empty) {
  EXPECT_TRUE(group_devices({}).empty());
}

TEST(GroupDevices, GroupsPciNicsByNumaNodeAndVirtualsTogether) {
  const std::string pa = "/sys/devices/pci0000:00/0000:01:00.0";
  const std::string pb = "/sys/devices/pci0000:80/0000:81:00.0";
  const std::string pc = "/sys/devices/pci0000:00/0000:02:00.0";
  Interface veth = nic("veth0", ip(10, 9, 0, 1), 24);
  veth.speed_mbps = 10000;
  const std::vector<Interface> used = {
      pci_nic("eth0", ip(10, 0, 0, 1), 24, pa, 0, 100000),
      pci_nic("eth1", ip(10, 0, 1, 1), 24, pb, 1, 25000),
      pci_nic("eth2", ip(10, 0, 2, 1), 24, pc, 0, 200000),
      veth,
      loopback(),
  };
  const std::vector<NetDevice> d = group_devices(used);
  ASSERT_EQ(d.size(), 3u);

  EXPECT_EQ(d[0].name, "mesh0:eth0+eth2");
  EXPECT_EQ(d[0].pci_path, pa);  // first member's
  EXPECT_EQ(d[0].numa_node, 0);
  EXPECT_EQ(d[0].speed_mbps, 200000);  // fastest cable: separate subnets are not summed
  EXPECT_EQ(d[0].members, (std::vector<size_t>{0, 2}));

  EXPECT_EQ(d[1].name, "mesh1:eth1");
  EXPECT_EQ(d[1].pci_path, pb);
  EXPECT_EQ(d[1].numa_node, 1);
  EXPECT_EQ(d[1].speed_mbps, 25000);
  EXPECT_EQ(d[1].members, (std::vector<size_t>{1}));

  EXPECT_EQ(d[2].name, "mesh2:veth0+lo");
  EXPECT_EQ(d[2].pci_path, "");
  EXPECT_EQ(d[2].numa_node, -1);
  EXPECT_EQ(d[2].speed_mbps, 10000);
  EXPECT_EQ(d[2].members, (std::vector<size_t>{3, 4}));
}

TEST(GroupDevices, DeviceOrderFollowsFirstMember) {
  const std::vector<Interface> used = {
      nic("veth0", ip(10, 9, 0, 1), 24),
      pci_nic("eth1", ip(10, 0, 1, 1), 24, "/p/1", 1, 25000),
      pci_nic("eth0", ip(10, 0, 0, 1), 24, "/p/0", 0, 25000),
  };
  const std::vector<NetDevice> d = group_devices(used);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].name, "mesh0:veth0");
  EXPECT_EQ(d[1].name, "mesh1:eth1");
  EXPECT_EQ(d[2].name, "mesh2:eth0");
}

TEST(GroupDevices, PciNicWithUnknownNumaIsNotInTheVirtualGroup) {
  const std::vector<Interface> used = {
      pci_nic("eth0", ip(10, 0, 0, 1), 24, "/p/0", -1, 25000),
      nic("veth0", ip(10, 9, 0, 1), 24),
  };
  const std::vector<NetDevice> d = group_devices(used);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].name, "mesh0:eth0");
  EXPECT_EQ(d[0].pci_path, "/p/0");
  EXPECT_EQ(d[0].numa_node, -1);
  EXPECT_EQ(d[1].name, "mesh1:veth0");
  EXPECT_EQ(d[1].pci_path, "");
}

TEST(GroupDevices, TwoAddressesOnOneNetdevListItOnce) {
  const std::vector<Interface> used = {
      pci_nic("eth0", ip(10, 0, 0, 1), 24, "/p/0", 0, 100000),
      pci_nic("eth0", ip(10, 0, 9, 1), 24, "/p/0", 0, 100000),
      pci_nic("eth1", ip(10, 0, 1, 1), 24, "/p/1", 0, 100000),
  };
  const std::vector<NetDevice> d = group_devices(used);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].name, "mesh0:eth0+eth1");
  EXPECT_EQ(d[0].members, (std::vector<size_t>{0, 1, 2}));  // every address is still a member
}

TEST(GroupDevices, TwoAddressesOnAVirtualNetdevListItOnce) {
  const std::vector<Interface> used = {nic("br0", ip(10, 0, 0, 1), 24),
                                       nic("br0", ip(10, 0, 9, 1), 24)};
  const std::vector<NetDevice> d = group_devices(used);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].name, "mesh0:br0");
  EXPECT_EQ(d[0].members, (std::vector<size_t>{0, 1}));
}

TEST(GroupDevices, UnknownSpeedIs10000) {
  const std::vector<Interface> used = {
      pci_nic("eth0", ip(10, 0, 0, 1), 24, "/p/0", 0, -1),
      pci_nic("eth1", ip(10, 0, 1, 1), 24, "/p/1", 0, -1),
      loopback(),  // speed -1
  };
  const std::vector<NetDevice> d = group_devices(used);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].speed_mbps, 10000);
  EXPECT_EQ(d[1].speed_mbps, 10000);
}

TEST(GroupDevices, KnownSpeedWinsOverUnknownMembers) {
  const std::vector<Interface> used = {
      pci_nic("eth0", ip(10, 0, 0, 1), 24, "/p/0", 0, -1),
      pci_nic("eth1", ip(10, 0, 1, 1), 24, "/p/1", 0, 40000),
  };
  const std::vector<NetDevice> d = group_devices(used);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].speed_mbps, 40000);
}

TEST(GroupDevices, HalvesOfOnePortAddUpDifferentCablesDoNot) {
  // A DGX Spark: two ports, each two PCIe functions on one subnet, all on NUMA node 0. A
  // connection to one peer stripes over both halves of the cable to it: 2 x 100G. The other
  // port's cable goes to another peer: not added.
  const std::vector<Interface> used = {
      pci_nic("p0a", ip(10, 0, 5, 1), 24, "/p/0", 0, 100000),
      pci_nic("p0b", ip(10, 0, 5, 2), 24, "/p/1", 0, 100000),
      pci_nic("p1a", ip(10, 0, 6, 1), 24, "/p/2", 0, 100000),
      pci_nic("p1b", ip(10, 0, 6, 2), 24, "/p/3", 0, 100000),
      pci_nic("p1b", ip(10, 0, 6, 9), 24, "/p/3", 0, 100000),  // 2nd address: same link
  };
  const std::vector<NetDevice> d = group_devices(used);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].speed_mbps, 200000);
  EXPECT_EQ(speed_to_one_peer(used, {0}), 100000);
  EXPECT_EQ(speed_to_one_peer(used, {0, 2}), 100000);
  EXPECT_EQ(speed_to_one_peer(used, {2, 3, 4}), 200000);
  EXPECT_EQ(speed_to_one_peer(used, {}), 0);
}

TEST(GroupDevices, SlowerThan10GIsReportedAsIs) {
  const std::vector<Interface> used = {pci_nic("eth0", ip(10, 0, 0, 1), 24, "/p/0", 0, 1000)};
  const std::vector<NetDevice> d = group_devices(used);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].speed_mbps, 1000);
}

TEST(GroupDevices, NamesUniqueAndEveryInterfaceInExactlyOneDevice) {
  std::vector<Interface> used;
  for (int numa = 0; numa < 4; ++numa) {
    for (int port = 0; port < 3; ++port) {
      const std::string name = "enp" + std::to_string(numa) + "s" + std::to_string(port);
      const std::string pci = "/p/" + std::to_string(numa) + "/" + std::to_string(port);
      const uint32_t third = static_cast<uint32_t>(numa * 10 + port);
      used.push_back(pci_nic(name, ip(10, 0, third, 1), 24, pci, numa, 100000));
      used.push_back(pci_nic(name, ip(10, 1, third, 1), 24, pci, numa, 100000));  // 2nd address
    }
  }
  used.push_back(nic("veth0", ip(10, 9, 0, 1), 24));
  used.push_back(nic("veth1", ip(10, 9, 1, 1), 24));
  const std::vector<NetDevice> d = group_devices(used);
  ASSERT_EQ(d.size(), 5u);
  std::set<std::string> device_names;
  std::vector<int> seen(used.size(), 0);
  for (const NetDevice& dev : d) {
    device_names.insert(dev.name);
    for (size_t m : dev.members) ++seen[m];
  }
  EXPECT_EQ(device_names.size(), d.size());
  for (size_t i = 0; i < used.size(); ++i) EXPECT_EQ(seen[i], 1) << i;
  EXPECT_EQ(d[0].name, "mesh0:enp0s0+enp0s1+enp0s2");
  EXPECT_EQ(d[3].name, "mesh3:enp3s0+enp3s1+enp3s2");
  EXPECT_EQ(d[4].name, "mesh4:veth0+veth1");
  EXPECT_EQ(d[2].numa_node, 2);
  EXPECT_EQ(d[2].members.size(), 6u);
}

// ---------------------------------------------------------------------------------------------
// choose_rails

struct ExpectedRail {
  size_t local_index;
  uint32_t local_addr;
  uint8_t local_prefix;
  uint32_t peer_addr;
};

void expect_rails(const std::vector<Rail>& got, const std::vector<ExpectedRail>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("rail " + std::to_string(i));
    EXPECT_EQ(got[i].local_index, want[i].local_index);
    EXPECT_EQ(format_prefix(got[i].local),
              format_prefix({want[i].local_addr, want[i].local_prefix}));
    EXPECT_EQ(format_ipv4(got[i].peer_addr), format_ipv4(want[i].peer_addr));
  }
}

std::vector<Ipv4Prefix> addrs_of(const std::vector<Interface>& v) {
  std::vector<Ipv4Prefix> out;
  for (const Interface& i : v) out.push_back(i.addr);
  return out;
}

// A triangle: three nodes, one cable between each pair. Node X's interface to Y is listed in
// the order {to the lower-lettered peer, to the higher-lettered peer}.
struct Triangle {
  std::vector<Interface> a, b, c;
};

TEST(ChooseRails, TriangleWithSlash24Cables) {
  // A-B 10.0.1.0/24, A-C 10.0.2.0/24, B-C 10.0.3.0/24.
  const Triangle t{
      {nic("toB", ip(10, 0, 1, 1), 24), nic("toC", ip(10, 0, 2, 1), 24)},
      {nic("toA", ip(10, 0, 1, 2), 24), nic("toC", ip(10, 0, 3, 1), 24)},
      {nic("toA", ip(10, 0, 2, 2), 24), nic("toB", ip(10, 0, 3, 2), 24)},
  };
  expect_rails(choose_rails(t.a, addrs_of(t.b)), {{0, ip(10, 0, 1, 1), 24, ip(10, 0, 1, 2)}});
  expect_rails(choose_rails(t.a, addrs_of(t.c)), {{1, ip(10, 0, 2, 1), 24, ip(10, 0, 2, 2)}});
  expect_rails(choose_rails(t.b, addrs_of(t.a)), {{0, ip(10, 0, 1, 2), 24, ip(10, 0, 1, 1)}});
  expect_rails(choose_rails(t.b, addrs_of(t.c)), {{1, ip(10, 0, 3, 1), 24, ip(10, 0, 3, 2)}});
  expect_rails(choose_rails(t.c, addrs_of(t.a)), {{0, ip(10, 0, 2, 2), 24, ip(10, 0, 2, 1)}});
  expect_rails(choose_rails(t.c, addrs_of(t.b)), {{1, ip(10, 0, 3, 2), 24, ip(10, 0, 3, 1)}});
}

TEST(ChooseRails, TriangleWithSlash30Cables) {
  // A-B 10.0.0.0/30 (.1, .2), A-C 10.0.0.4/30 (.5, .6), B-C 10.0.0.8/30 (.9, .10): all in
  // one /24, so only the /30 boundaries tell the cables apart.
  const Triangle t{
      {nic("toB", ip(10, 0, 0, 1), 30), nic("toC", ip(10, 0, 0, 5), 30)},
      {nic("toA", ip(10, 0, 0, 2), 30), nic("toC", ip(10, 0, 0, 9), 30)},
      {nic("toA", ip(10, 0, 0, 6), 30), nic("toB", ip(10, 0, 0, 10), 30)},
  };
  expect_rails(choose_rails(t.a, addrs_of(t.b)), {{0, ip(10, 0, 0, 1), 30, ip(10, 0, 0, 2)}});
  expect_rails(choose_rails(t.a, addrs_of(t.c)), {{1, ip(10, 0, 0, 5), 30, ip(10, 0, 0, 6)}});
  expect_rails(choose_rails(t.b, addrs_of(t.a)), {{0, ip(10, 0, 0, 2), 30, ip(10, 0, 0, 1)}});
  expect_rails(choose_rails(t.b, addrs_of(t.c)), {{1, ip(10, 0, 0, 9), 30, ip(10, 0, 0, 10)}});
  expect_rails(choose_rails(t.c, addrs_of(t.a)), {{0, ip(10, 0, 0, 6), 30, ip(10, 0, 0, 5)}});
  expect_rails(choose_rails(t.c, addrs_of(t.b)), {{1, ip(10, 0, 0, 10), 30, ip(10, 0, 0, 9)}});
}

TEST(ChooseRails, TriangleWithSlash31Cables) {
  // A-B 10.0.0.0/31 (.0, .1), A-C 10.0.0.2/31 (.2, .3), B-C 10.0.0.4/31 (.4, .5).
  const Triangle t{
      {nic("toB", ip(10, 0, 0, 0), 31), nic("toC", ip(10, 0, 0, 2), 31)},
      {nic("toA", ip(10, 0, 0, 1), 31), nic("toC", ip(10, 0, 0, 4), 31)},
      {nic("toA", ip(10, 0, 0, 3), 31), nic("toB", ip(10, 0, 0, 5), 31)},
  };
  expect_rails(choose_rails(t.a, addrs_of(t.b)), {{0, ip(10, 0, 0, 0), 31, ip(10, 0, 0, 1)}});
  expect_rails(choose_rails(t.a, addrs_of(t.c)), {{1, ip(10, 0, 0, 2), 31, ip(10, 0, 0, 3)}});
  expect_rails(choose_rails(t.b, addrs_of(t.a)), {{0, ip(10, 0, 0, 1), 31, ip(10, 0, 0, 0)}});
  expect_rails(choose_rails(t.b, addrs_of(t.c)), {{1, ip(10, 0, 0, 4), 31, ip(10, 0, 0, 5)}});
  expect_rails(choose_rails(t.c, addrs_of(t.a)), {{0, ip(10, 0, 0, 3), 31, ip(10, 0, 0, 2)}});
  expect_rails(choose_rails(t.c, addrs_of(t.b)), {{1, ip(10, 0, 0, 5), 31, ip(10, 0, 0, 4)}});
}

TEST(ChooseRails, DualLinkGivesTwoRails) {
  const std::vector<Interface> local = {nic("eth0", ip(10, 0, 1, 1), 24),
                                        nic("eth1", ip(10, 0, 2, 1), 24)};
  const std::vector<ExpectedRail> want = {{0, ip(10, 0, 1, 1), 24, ip(10, 0, 1, 2)},
                                          {1, ip(10, 0, 2, 1), 24, ip(10, 0, 2, 2)}};
  expect_rails(choose_rails(local, {{ip(10, 0, 1, 2), 24}, {ip(10, 0, 2, 2), 24}}), want);
  // The peer's order of addresses does not change which local interface pairs with which.
  expect_rails(choose_rails(local, {{ip(10, 0, 2, 2), 24}, {ip(10, 0, 1, 2), 24}}), want);
}

TEST(ChooseRails, TwoPcieHalvesOnOneSubnetPairDistinctPeerAddresses) {
  // A 2x PCIe x16 NIC: two netdevs on one port, both in 10.0.5.0/24, each with its own address;
  // the peer has the same arrangement. Two rails, not four, and not both to the same address.
  const std::vector<Interface> local = {nic("p0", ip(10, 0, 5, 1), 24),
                                        nic("p1", ip(10, 0, 5, 2), 24)};
  const std::vector<Ipv4Prefix> peer = {{ip(10, 0, 5, 3), 24}, {ip(10, 0, 5, 4), 24}};
  expect_rails(choose_rails(local, peer), {{0, ip(10, 0, 5, 1), 24, ip(10, 0, 5, 3)},
                                           {1, ip(10, 0, 5, 2), 24, ip(10, 0, 5, 4)}});
}

TEST(ChooseRails, TwoCablesTimesTwoHalvesAreFourRails) {
  // Two Spark ports cabled to the same peer, each port two same-subnet halves: rails over
  // halves and over cables combine, one per local netdev, each to a distinct peer address on
  // its cable (issue 16). Peer addresses listed cable by cable, in the peer's order.
  const std::vector<Interface> local = {
      nic("p0a", ip(10, 0, 5, 1), 24), nic("p0b", ip(10, 0, 5, 2), 24),
      nic("p1a", ip(10, 0, 6, 1), 24), nic("p1b", ip(10, 0, 6, 2), 24)};
  const std::vector<Ipv4Prefix> peer = {
      {ip(10, 0, 6, 3), 24}, {ip(10, 0, 5, 3), 24}, {ip(10, 0, 6, 4), 24}, {ip(10, 0, 5, 4), 24}};
  expect_rails(choose_rails(local, peer), {{0, ip(10, 0, 5, 1), 24, ip(10, 0, 5, 3)},
                                           {1, ip(10, 0, 5, 2), 24, ip(10, 0, 5, 4)},
                                           {2, ip(10, 0, 6, 1), 24, ip(10, 0, 6, 3)},
                                           {3, ip(10, 0, 6, 2), 24, ip(10, 0, 6, 4)}});
  // Preferring the device that holds both ports keeps all four.
  EXPECT_EQ(choose_rails(local, peer, {0, 1, 2, 3}).size(), 4u);
}

TEST(ChooseRails, PeerAddressIsReusedOnlyWhenItIsTheOnlyOne) {
  const std::vector<Interface> local = {nic("p0", ip(10, 0, 5, 1), 24),
                                        nic("p1", ip(10, 0, 5, 2), 24)};
  expect_rails(
      choose_rails(local, {{ip(10, 0, 5, 3), 24}}),
      {{0, ip(10, 0, 5, 1), 24, ip(10, 0, 5, 3)}, {1, ip(10, 0, 5, 2), 24, ip(10, 0, 5, 3)}});
}

TEST(ChooseRails, NoCommonSubnetGivesNoRail) {
  const std::vector<Interface> local = {nic("eth0", ip(10, 0, 1, 1), 24),
                                        nic("eth1", ip(10, 0, 2, 1), 24)};
  EXPECT_TRUE(choose_rails(local, {{ip(10, 0, 3, 2), 24}, {ip(10, 0, 4, 2), 24}}).empty());
  EXPECT_TRUE(choose_rails(local, {}).empty());
  EXPECT_TRUE(choose_rails({}, {{ip(10, 0, 1, 2), 24}}).empty());
  // Adjacent /31 that shares a /24 with the local one is still a different cable.
  EXPECT_TRUE(choose_rails({nic("eth0", ip(10, 0, 0, 0), 31)}, {{ip(10, 0, 0, 2), 31}}).empty());
}

TEST(ChooseRails, UnrelatedInterfacesAreIgnored) {
  const std::vector<Interface> local = {nic("docker0", ip(172, 17, 0, 1), 16),
                                        nic("eth0", ip(10, 0, 1, 1), 24),
                                        nic("mgmt0", ip(192, 168, 0, 5), 24)};
  expect_rails(choose_rails(local, {{ip(10, 0, 1, 2), 24}, {ip(10, 0, 7, 2), 24}}),
               {{1, ip(10, 0, 1, 1), 24, ip(10, 0, 1, 2)}});
}

TEST(ChooseRails, SecondAddressOnTheSameNetdevIsTheSameCable) {
  const std::vector<Interface> local = {nic("eth0", ip(10, 0, 1, 1), 24),
                                        nic("eth0", ip(10, 0, 9, 1), 24)};
  expect_rails(choose_rails(local, {{ip(10, 0, 1, 2), 24}, {ip(10, 0, 9, 2), 24}}),
               {{0, ip(10, 0, 1, 1), 24, ip(10, 0, 1, 2)}});
}

TEST(ChooseRails, SecondAddressIsUsedWhenTheFirstDoesNotMatch) {
  const std::vector<Interface> local = {nic("eth0", ip(192, 168, 0, 1), 24),
                                        nic("eth0", ip(10, 0, 1, 1), 24)};
  expect_rails(choose_rails(local, {{ip(10, 0, 1, 2), 24}}),
               {{1, ip(10, 0, 1, 1), 24, ip(10, 0, 1, 2)}});
}

TEST(ChooseRails, PreferredRestrictsToThatDevicesRails) {
  const std::vector<Interface> local = {nic("eth0", ip(10, 0, 1, 1), 24),
                                        nic("eth1", ip(10, 0, 2, 1), 24),
                                        nic("eth2", ip(10, 0, 3, 1), 24)};
  const std::vector<Ipv4Prefix> peer = {{ip(10, 0, 1, 2), 24}, {ip(10, 0, 2, 2), 24}};
  expect_rails(choose_rails(local, peer, {1}), {{1, ip(10, 0, 2, 1), 24, ip(10, 0, 2, 2)}});
  expect_rails(choose_rails(local, peer, {0, 2}), {{0, ip(10, 0, 1, 1), 24, ip(10, 0, 1, 2)}});
  expect_rails(choose_rails(local, peer, {0, 1}), {{0, ip(10, 0, 1, 1), 24, ip(10, 0, 1, 2)},
                                                   {1, ip(10, 0, 2, 1), 24, ip(10, 0, 2, 2)}});
}

TEST(ChooseRails, PreferredWithoutRailsToThePeerFallsBackToAll) {
  const std::vector<Interface> local = {nic("eth0", ip(10, 0, 1, 1), 24),
                                        nic("eth1", ip(10, 0, 2, 1), 24),
                                        nic("eth2", ip(10, 0, 3, 1), 24)};
  const std::vector<Ipv4Prefix> peer = {{ip(10, 0, 1, 2), 24}, {ip(10, 0, 2, 2), 24}};
  const std::vector<ExpectedRail> all = {{0, ip(10, 0, 1, 1), 24, ip(10, 0, 1, 2)},
                                         {1, ip(10, 0, 2, 1), 24, ip(10, 0, 2, 2)}};
  expect_rails(choose_rails(local, peer, {2}), all);
  expect_rails(choose_rails(local, peer, {}), all);
  expect_rails(choose_rails(local, peer, {7}), all);  // index outside `local`: no match
}

TEST(ChooseRails, LoopbackIsNotACableWhenARealCableExists) {
  // Both ranks use lo (e.g. NCCL_MESH_IFNAME=^docker) and both advertise 127.0.0.1/8. A rail
  // lo -> 127.0.0.1 reaches this host, not the peer: with a real cable to the peer it must not
  // be chosen (same-host peers still have the eth0 rail to their shared address).
  std::vector<Interface> local = {loopback(), nic("eth0", ip(10, 0, 1, 1), 24)};
  const std::vector<Ipv4Prefix> peer = {{ip(127, 0, 0, 1), 8}, {ip(10, 0, 1, 2), 24}};
  expect_rails(choose_rails(local, peer), {{1, ip(10, 0, 1, 1), 24, ip(10, 0, 1, 2)}});
}

TEST(ChooseRails, LoopbackOnlyPeersUseLoopback) {
  // Loopback fallback on a single host: lo is the only rail and must work.
  expect_rails(choose_rails({loopback()}, {{ip(127, 0, 0, 1), 8}}),
               {{0, ip(127, 0, 0, 1), 8, ip(127, 0, 0, 1)}});
}

}  // namespace
}  // namespace mesh::topology
