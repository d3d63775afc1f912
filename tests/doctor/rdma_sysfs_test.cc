// SPDX-License-Identifier: Apache-2.0
// RDMA sysfs discovery and GID selection over synthetic /sys trees: a ConnectX-like table with
// RoCE v1/v2 pairs, an rxe table, IPv6-only and v1-only tables, overrides, InfiniBand.
#include "topology/rdma_sysfs.h"

#include <gtest/gtest.h>

#include "fixtures.h"

namespace mesh::topology {
namespace {

using doctor::testing::addr;
using doctor::testing::contains;
using doctor::testing::TempDir;

constexpr const char* kZero = "0000:0000:0000:0000:0000:0000:0000:0000";

// Writes GID entry `i` of <dev>/ports/<port>; an empty type leaves gid_attrs/types absent
// (sysfs answers EINVAL for it, which reads as absent).
void gid(const TempDir& t, const std::string& dev, int port, int i, const std::string& value,
         const std::string& type, const std::string& ndev) {
  const std::string base = "class/infiniband/" + dev + "/ports/" + std::to_string(port);
  t.write(base + "/gids/" + std::to_string(i), value);
  if (!type.empty()) t.write(base + "/gid_attrs/types/" + std::to_string(i), type);
  if (!ndev.empty()) t.write(base + "/gid_attrs/ndevs/" + std::to_string(i), ndev);
}

void port_attrs(const TempDir& t, const std::string& dev, int port, const std::string& ll) {
  const std::string base = "class/infiniband/" + dev + "/ports/" + std::to_string(port);
  t.write(base + "/state", "4: ACTIVE");
  t.write(base + "/phys_state", "5: LinkUp");
  t.write(base + "/link_layer", ll);
  t.write(base + "/rate", "200 Gb/sec (2X NDR)");
  t.write(base + "/lid", "0x0");
}

// A ConnectX port with 10.0.0.1 and 2001:db8::1: the kernel lists each address twice, RoCE v1
// then RoCE v2, so the IPv4 RoCE v2 entry is index 3. Slots 6..9 are unused (zero).
void connectx(const TempDir& t) {
  const std::string nd = "enp1s0f0np0";
  port_attrs(t, "mlx5_0", 1, "Ethernet");
  gid(t, "mlx5_0", 1, 0, "fe80:0000:0000:0000:0a5c:2dff:fe11:2233", "IB/RoCE v1", nd);
  gid(t, "mlx5_0", 1, 1, "fe80:0000:0000:0000:0a5c:2dff:fe11:2233", "RoCE v2", nd);
  gid(t, "mlx5_0", 1, 2, "0000:0000:0000:0000:0000:ffff:0a00:0001", "IB/RoCE v1", nd);
  gid(t, "mlx5_0", 1, 3, "0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2", nd);
  gid(t, "mlx5_0", 1, 4, "2001:0db8:0000:0000:0000:0000:0000:0001", "IB/RoCE v1", nd);
  gid(t, "mlx5_0", 1, 5, "2001:0db8:0000:0000:0000:0000:0000:0001", "RoCE v2", nd);
  for (int i = 6; i < 10; ++i) gid(t, "mlx5_0", 1, i, kZero, "", "");
  t.mkdir("class/infiniband/mlx5_0/device/net/" + nd);
}

const RdmaPort& only_port(const std::vector<RdmaPort>& ports) {
  EXPECT_EQ(ports.size(), 1u);
  return ports.front();
}

TEST(RdmaSysfs, NoInfinibandClassMeansNoPorts) {
  TempDir t;
  EXPECT_TRUE(discover_rdma_ports(t.path()).empty());
}

TEST(RdmaSysfs, ReadsConnectXPort) {
  TempDir t;
  connectx(t);
  const auto ports = discover_rdma_ports(t.path());
  const RdmaPort& p = only_port(ports);
  EXPECT_EQ(p.device, "mlx5_0");
  EXPECT_EQ(p.port, 1);
  EXPECT_EQ(p.state, "4: ACTIVE");
  EXPECT_EQ(p.link_layer, LinkLayer::kEthernet);
  EXPECT_EQ(rate_gbps(p.rate), 200);
  EXPECT_EQ(p.active_mtu, -1);   // not exported by this tree
  ASSERT_EQ(p.gids.size(), 6u);  // zero slots skipped
  EXPECT_EQ(p.gids[3].index, 3);
  EXPECT_EQ(p.gids[3].type, GidType::kRoceV2);
  EXPECT_EQ(p.gids[2].type, GidType::kIbOrRoceV1);
  EXPECT_EQ(format_gid(p.gids[3].gid), "::ffff:10.0.0.1");
  EXPECT_EQ(p.netdevs, std::vector<std::string>{"enp1s0f0np0"});
  EXPECT_EQ(ports_for_netdev(ports, "enp1s0f0np0").size(), 1u);
  EXPECT_TRUE(ports_for_netdev(ports, "eth0").empty());
}

TEST(GidSelection, ConnectXPicksTheIpv4RoceV2EntryAtIndex3) {
  TempDir t;
  connectx(t);
  const RdmaPort p = only_port(discover_rdma_ports(t.path()));
  const GidChoice c = select_gid(p, addr("10.0.0.1"));
  ASSERT_TRUE(c.index.has_value());
  EXPECT_EQ(*c.index, 3);
  EXPECT_FALSE(c.use_lid);
  EXPECT_TRUE(contains(c.why, "RoCE v2")) << c.why;
  EXPECT_TRUE(contains(c.why, "::ffff:10.0.0.1")) << c.why;
  EXPECT_TRUE(contains(c.why, "enp1s0f0np0")) << c.why;
}

TEST(GidSelection, RxeTableIndex1IsTheIpv4Entry) {
  // rdma_rxe is RoCE-v2-only: index 0 is the fe80:: default GID, index 1 ::ffff:<IPv4>.
  TempDir t;
  port_attrs(t, "rxe_a", 1, "Ethernet");
  gid(t, "rxe_a", 1, 0, "fe80:0000:0000:0000:b0c4:12ff:fe34:5601", "RoCE v2", "sr0a");
  gid(t, "rxe_a", 1, 1, "0000:0000:0000:0000:0000:ffff:c612:0001", "RoCE v2", "sr0a");
  const RdmaPort p = only_port(discover_rdma_ports(t.path()));
  EXPECT_EQ(p.netdevs, std::vector<std::string>{"sr0a"});  // from gid_attrs/ndevs only
  const GidChoice c = select_gid(p, addr("198.18.0.1"));
  ASSERT_TRUE(c.index.has_value());
  EXPECT_EQ(*c.index, 1);
}

TEST(GidSelection, Ipv6EntriesOnlyGiveNoIndex) {
  TempDir t;
  port_attrs(t, "mlx5_1", 1, "Ethernet");
  gid(t, "mlx5_1", 1, 0, "fe80:0000:0000:0000:0a5c:2dff:fe11:2244", "RoCE v2", "eth2");
  gid(t, "mlx5_1", 1, 1, "2001:0db8:0000:0000:0000:0000:0000:0002", "RoCE v2", "eth2");
  const RdmaPort p = only_port(discover_rdma_ports(t.path()));
  const GidChoice c = select_gid(p, addr("10.0.0.2"));
  EXPECT_FALSE(c.index.has_value());
  EXPECT_FALSE(c.use_lid);
  EXPECT_TRUE(contains(c.why, "no GID for 10.0.0.2")) << c.why;
  EXPECT_TRUE(contains(c.why, "2001:db8::2")) << c.why;  // says what was found instead
}

TEST(GidSelection, OnlyRoceV1IsReportedAndNotChosen) {
  TempDir t;
  port_attrs(t, "mlx4_0", 1, "Ethernet");
  gid(t, "mlx4_0", 1, 0, "fe80:0000:0000:0000:0a5c:2dff:fe11:2255", "IB/RoCE v1", "eth3");
  gid(t, "mlx4_0", 1, 1, "0000:0000:0000:0000:0000:ffff:0a00:0001", "IB/RoCE v1", "eth3");
  const RdmaPort p = only_port(discover_rdma_ports(t.path()));
  const GidChoice c = select_gid(p, addr("10.0.0.1"));
  EXPECT_FALSE(c.index.has_value());
  EXPECT_TRUE(contains(c.why, "only RoCE v1 entries for 10.0.0.1 (index 1)")) << c.why;
}

TEST(GidSelection, OtherAddressOnThePortIsNoMatch) {
  TempDir t;
  port_attrs(t, "rxe_b", 1, "Ethernet");
  gid(t, "rxe_b", 1, 1, "0000:0000:0000:0000:0000:ffff:0a00:0002", "RoCE v2", "eth4");
  const GidChoice c = select_gid(only_port(discover_rdma_ports(t.path())), addr("10.0.0.1"));
  EXPECT_FALSE(c.index.has_value());
  EXPECT_TRUE(contains(c.why, "::ffff:10.0.0.2")) << c.why;
}

TEST(GidSelection, EmptyTable) {
  RdmaPort p;
  p.link_layer = LinkLayer::kEthernet;
  const GidChoice c = select_gid(p, addr("10.0.0.1"));
  EXPECT_FALSE(c.index.has_value());
  EXPECT_TRUE(contains(c.why, "GID table empty")) << c.why;
}

TEST(GidSelection, OverrideIndex) {
  TempDir t;
  connectx(t);
  const RdmaPort p = only_port(discover_rdma_ports(t.path()));

  // The automatic entry: no remark.
  GidChoice c = select_gid(p, addr("10.0.0.1"), 3);
  ASSERT_TRUE(c.index.has_value());
  EXPECT_EQ(*c.index, 3);
  EXPECT_TRUE(contains(c.why, "NCCL_MESH_GID_INDEX=3")) << c.why;
  EXPECT_FALSE(contains(c.why, "the RoCE v2 entry of")) << c.why;

  // Another existing entry: honoured, with the automatic choice named.
  c = select_gid(p, addr("10.0.0.1"), 2);
  ASSERT_TRUE(c.index.has_value());
  EXPECT_EQ(*c.index, 2);
  EXPECT_TRUE(contains(c.why, "IB/RoCE v1")) << c.why;
  EXPECT_TRUE(contains(c.why, "the RoCE v2 entry of 10.0.0.1 is 3")) << c.why;

  // An unused (zero) slot and a slot past the table: no index.
  for (int bad : {7, 200}) {
    c = select_gid(p, addr("10.0.0.1"), bad);
    EXPECT_FALSE(c.index.has_value()) << bad;
    EXPECT_TRUE(contains(c.why, "no such non-zero entry")) << c.why;
  }
}

TEST(GidSelection, UnreadableTypeIsUsedOnlyAsLastResort) {
  TempDir t;
  port_attrs(t, "mlx5_2", 1, "Ethernet");
  gid(t, "mlx5_2", 1, 2, "0000:0000:0000:0000:0000:ffff:0a00:0001", "", "eth5");
  GidChoice c = select_gid(only_port(discover_rdma_ports(t.path())), addr("10.0.0.1"));
  ASSERT_TRUE(c.index.has_value());
  EXPECT_EQ(*c.index, 2);
  EXPECT_TRUE(contains(c.why, "type unreadable")) << c.why;

  // A typed RoCE v2 entry wins over an earlier untyped one.
  gid(t, "mlx5_2", 1, 5, "0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2", "eth5");
  c = select_gid(only_port(discover_rdma_ports(t.path())), addr("10.0.0.1"));
  ASSERT_TRUE(c.index.has_value());
  EXPECT_EQ(*c.index, 5);
}

TEST(GidSelection, InfinibandUsesTheLid) {
  TempDir t;
  port_attrs(t, "mlx5_3", 1, "InfiniBand");
  t.write("class/infiniband/mlx5_3/ports/1/lid", "0x1a");
  gid(t, "mlx5_3", 1, 0, "fe80:0000:0000:0000:0002:c903:0011:2233", "IB/RoCE v1", "");
  t.mkdir("class/infiniband/mlx5_3/device/net/ib0");
  const RdmaPort p = only_port(discover_rdma_ports(t.path()));
  EXPECT_EQ(p.link_layer, LinkLayer::kInfiniBand);
  EXPECT_EQ(p.lid, 0x1a);
  EXPECT_EQ(p.netdevs, std::vector<std::string>{"ib0"});  // IPoIB, from device/net
  const GidChoice c = select_gid(p, addr("10.1.0.1"), 4);
  EXPECT_TRUE(c.use_lid);
  EXPECT_FALSE(c.index.has_value());
  EXPECT_TRUE(contains(c.why, "LID 26")) << c.why;
  EXPECT_TRUE(contains(c.why, "ignored")) << c.why;
}

TEST(RdmaSysfs, MultiPortDeviceMapsNetdevsByDevPort) {
  TempDir t;
  port_attrs(t, "mlx5_4", 1, "Ethernet");
  port_attrs(t, "mlx5_4", 2, "Ethernet");
  t.write("class/infiniband/mlx5_4/device/net/ethA/dev_port", "0");
  t.write("class/infiniband/mlx5_4/device/net/ethB/dev_port", "1");
  const auto ports = discover_rdma_ports(t.path());
  ASSERT_EQ(ports.size(), 2u);
  EXPECT_EQ(ports[0].netdevs, std::vector<std::string>{"ethA"});
  EXPECT_EQ(ports[1].netdevs, std::vector<std::string>{"ethB"});
}

TEST(RdmaSysfs, ActiveMtuInBytesOrVerbsEnum) {
  TempDir t;
  port_attrs(t, "a", 1, "Ethernet");
  t.write("class/infiniband/a/ports/1/active_mtu", "4096");
  port_attrs(t, "b", 1, "Ethernet");
  t.write("class/infiniband/b/ports/1/active_mtu", "3");  // IBV_MTU_1024
  const auto ports = discover_rdma_ports(t.path());
  ASSERT_EQ(ports.size(), 2u);
  EXPECT_EQ(ports[0].active_mtu, 4096);
  EXPECT_EQ(ports[1].active_mtu, 1024);
}

TEST(Gid, ParseFormatAndIpv4Mapping) {
  const auto g = parse_gid("0000:0000:0000:0000:0000:ffff:c612:0102");
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(format_gid(*g), "::ffff:198.18.1.2");
  EXPECT_EQ(gid_ipv4(*g), addr("198.18.1.2"));
  EXPECT_FALSE(is_zero_gid(*g));
  EXPECT_TRUE(is_zero_gid(*parse_gid(kZero)));
  EXPECT_FALSE(gid_ipv4(*parse_gid("fe80::1")).has_value());
  EXPECT_FALSE(gid_ipv4(*parse_gid("::1.2.3.4")).has_value());  // IPv4-compatible, not mapped
  EXPECT_FALSE(parse_gid("not a gid").has_value());
  EXPECT_EQ(rate_gbps("100 Gb/sec (4X EDR)"), 100);
  EXPECT_EQ(rate_gbps(""), -1);
}

}  // namespace
}  // namespace mesh::topology

// The transport's view: one binding per mesh interface, from the same sysfs rules.

#include "transport/rdma/devices.h"

namespace mesh::rdma {
namespace {

using doctor::testing::addr;
using doctor::testing::TempDir;

topology::Interface itf(const std::string& name, const std::string& a) {
  topology::Interface i;
  i.name = name;
  i.addr = {addr(a.c_str()), 24};
  i.up = true;
  return i;
}

TEST(RdmaBinding, MapsEachInterfaceToItsPortAndRoceV2Gid) {
  TempDir t;
  topology::connectx(t);
  topology::port_attrs(t, "rxe_a", 1, "Ethernet");
  topology::gid(t, "rxe_a", 1, 0, "fe80:0000:0000:0000:b0c4:12ff:fe34:5601", "RoCE v2", "sr0a");
  topology::gid(t, "rxe_a", 1, 1, "0000:0000:0000:0000:0000:ffff:c612:0001", "RoCE v2", "sr0a");
  const auto b = bind_interfaces(
      {itf("sr0a", "198.18.0.1"), itf("enp1s0f0np0", "10.0.0.1"), itf("eth9", "10.9.0.1")}, -1,
      t.path());
  ASSERT_EQ(b.size(), 3u);
  EXPECT_TRUE(b[0].usable);
  EXPECT_EQ(b[0].device, "rxe_a");
  EXPECT_EQ(b[0].gid_index, 1);
  EXPECT_EQ(topology::format_gid(b[0].gid), "::ffff:198.18.0.1");
  EXPECT_TRUE(b[1].usable);
  EXPECT_EQ(b[1].device, "mlx5_0");
  EXPECT_EQ(b[1].gid_index, 3);
  EXPECT_FALSE(b[2].usable);
  EXPECT_EQ(b[2].why, "no RDMA port on eth9");
}

TEST(RdmaBinding, UnusablePortsSayWhatWasFound) {
  TempDir t;
  topology::port_attrs(t, "rxe_down", 1, "Ethernet");
  t.write("class/infiniband/rxe_down/ports/1/state", "1: DOWN");
  topology::gid(t, "rxe_down", 1, 1, "0000:0000:0000:0000:0000:ffff:c612:0001", "RoCE v2", "sr0a");
  topology::port_attrs(t, "v1only", 1, "Ethernet");
  topology::gid(t, "v1only", 1, 0, "0000:0000:0000:0000:0000:ffff:0a00:0001", "IB/RoCE v1", "eth1");
  const auto b =
      bind_interfaces({itf("sr0a", "198.18.0.1"), itf("eth1", "10.0.0.1")}, -1, t.path());
  ASSERT_EQ(b.size(), 2u);
  EXPECT_FALSE(b[0].usable);
  EXPECT_NE(b[0].why.find("DOWN"), std::string::npos) << b[0].why;
  EXPECT_FALSE(b[1].usable);
  EXPECT_NE(b[1].why.find("RoCE v1"), std::string::npos) << b[1].why;
}

TEST(RdmaBinding, OverrideAndInfiniband) {
  TempDir t;
  topology::connectx(t);
  topology::port_attrs(t, "mlx5_ib", 1, "InfiniBand");
  t.mkdir("class/infiniband/mlx5_ib/device/net/ib0");
  const auto b =
      bind_interfaces({itf("enp1s0f0np0", "10.0.0.1"), itf("ib0", "10.1.0.1")}, 1, t.path());
  EXPECT_TRUE(b[0].usable);
  EXPECT_EQ(b[0].gid_index, 1);  // NCCL_MESH_GID_INDEX=1 wins (with a note in why)
  EXPECT_TRUE(b[1].usable);
  EXPECT_TRUE(b[1].use_lid);
  EXPECT_EQ(b[1].gid_index, -1);
}

}  // namespace
}  // namespace mesh::rdma
