// SPDX-License-Identifier: Apache-2.0
// IP-layer checks over synthetic inventories: each check passing and failing.
#include <gtest/gtest.h>

#include "fixtures.h"
#include "tools/doctor/report.h"

namespace mesh::doctor {
namespace {

using testing::add_netdevs;
using testing::contains;
using testing::iface;
using testing::netdev;

Inventory triangle_node() {
  // Node A of a triangle: one cable to B, one to C, plus a management port and loopback.
  Inventory inv;
  inv.interfaces = {iface("lo", "127.0.0.1/8", 65536), iface("srab", "198.18.1.1/24"),
                    iface("srac", "198.18.2.1/24")};
  add_netdevs(inv);
  inv.sysctls = {{"net.ipv4.conf.all.rp_filter", "2"}, {"net.ipv4.conf.all.accept_local", "0"}};
  return inv;
}

TEST(MeshInterfaces, OkWithCableInterfaces) {
  const Inventory inv = triangle_node();
  const Findings f = check_mesh_interfaces(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
  EXPECT_TRUE(contains(f[0].subject, "srab")) << f[0].subject;
}

TEST(MeshInterfaces, FailWhenNothingIsUsable) {
  Inventory inv = triangle_node();
  for (auto& i : inv.interfaces) i.up = false;
  const Findings f = check_mesh_interfaces(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kFail);
  EXPECT_TRUE(contains(f[0].message, "link is down")) << f[0].message;
  EXPECT_FALSE(f[0].fix.empty());
}

TEST(MeshInterfaces, WarnOnLoopbackFallbackButNotWhenAskedFor) {
  Inventory inv;
  inv.interfaces = {iface("lo", "127.0.0.1/8", 65536)};
  add_netdevs(inv);
  Findings f = check_mesh_interfaces(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kWarn);
  inv.settings.ifname = "lo";
  f = check_mesh_interfaces(inv, build_model(inv));
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
}

TEST(Ipv4Address, OkWhenEveryRelevantInterfaceHasOne) {
  Inventory inv = triangle_node();
  inv.netdevs.push_back(netdev("docker0", "down"));  // virtual and down: not a cable
  Netdev slave = netdev("enp9s0", "up", "/sys/devices/pci0000:00/0000:09:00.0", "ixgbe");
  slave.enslaved = true;  // its bond carries the address
  inv.netdevs.push_back(slave);
  const Findings f = check_ipv4_addresses(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
}

TEST(Ipv4Address, WarnForRdmaNamedAndUpPhysicalInterfaces) {
  Inventory inv = triangle_node();
  inv.netdevs.push_back(netdev("enp1s0f0np0", "up", "/sys/devices/pci0000:00/0000:01:00.0"));
  inv.netdevs.push_back(netdev("srad", "down"));
  inv.netdevs.push_back(netdev("eth7", "down"));
  topology::RdmaPort port;
  port.device = "mlx5_0";
  port.netdevs = {"eth7"};
  inv.rdma_ports.push_back(port);
  inv.settings.ifname = "sr";  // names srad, which has no address
  const Findings f = check_ipv4_addresses(inv, build_model(inv));
  ASSERT_EQ(f.size(), 3u);
  for (const Finding& x : f) {
    EXPECT_EQ(x.verdict, Verdict::kWarn);
    EXPECT_TRUE(contains(x.fix, "ip addr add")) << x.fix;
  }
  EXPECT_EQ(f[0].subject, "enp1s0f0np0");
  EXPECT_TRUE(contains(f[0].message, "physical link is up")) << f[0].message;
  EXPECT_EQ(f[1].subject, "srad");
  EXPECT_TRUE(contains(f[1].message, "NCCL_MESH_IFNAME")) << f[1].message;
  EXPECT_EQ(f[2].subject, "eth7");
  EXPECT_TRUE(contains(f[2].message, "mlx5_0")) << f[2].message;
}

TEST(Ipv4Address, IpoibNeedsAnAddressForTheHandshake) {
  Inventory inv = triangle_node();
  inv.netdevs.push_back(netdev("ib0", "up", "/sys/devices/pci0000:00/0000:03:00.0", "mlx5_core"));
  topology::RdmaPort port;
  port.device = "mlx5_2";
  port.link_layer = topology::LinkLayer::kInfiniBand;
  port.netdevs = {"ib0"};
  inv.rdma_ports.push_back(port);
  const Findings f = check_ipv4_addresses(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(f[0].message, "IPoIB")) << f[0].message;
}

TEST(SharedSubnet, OkWithOneSubnetPerCable) {
  Inventory inv = triangle_node();
  // Two addresses on one netdev are not multi-homing.
  inv.interfaces.push_back(iface("srab", "198.18.1.11/24"));
  const Findings f = check_shared_subnets(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
}

TEST(SharedSubnet, WarnAndExplainTwoInterfacesOnOneSubnet) {
  Inventory inv = triangle_node();
  // The two PCIe halves of a DGX Spark port, or a mistake: the check explains both.
  inv.interfaces.push_back(iface("srab2", "198.18.1.5/30"));
  add_netdevs(inv);
  const Findings f = check_shared_subnets(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(f[0].subject, "198.18.1.0/24")) << f[0].subject;
  EXPECT_TRUE(contains(f[0].subject, "srab2")) << f[0].subject;
  EXPECT_TRUE(contains(f[0].message, "DGX Spark")) << f[0].message;
  EXPECT_TRUE(contains(f[0].message, "asymmetric routing")) << f[0].message;
}

Inventory spark_node(const std::string& arp_ignore, const std::string& arp_announce) {
  // A DGX Spark: the two PCIe halves of one ConnectX-7 port on one subnet, plus management.
  Inventory inv;
  inv.interfaces = {iface("lo", "127.0.0.1/8", 65536), iface("enP7s7", "10.0.0.5/24"),
                    iface("enp1s0f0np0", "198.18.20.1/24"),
                    iface("enP2p1s0f0np0", "198.18.20.2/24")};
  add_netdevs(inv);
  inv.sysctls = {{"net.ipv4.conf.all.rp_filter", "2"},
                 {"net.ipv4.conf.all.arp_ignore", arp_ignore},
                 {"net.ipv4.conf.all.arp_announce", arp_announce}};
  return inv;
}

TEST(SharedSubnet, SaysThePluginBindsEachHalfWhenArpIsSet) {
  const Inventory inv = spark_node("1", "2");
  const Findings f = check_shared_subnets(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
  EXPECT_TRUE(contains(f[0].subject, "198.18.20.0/24")) << f[0].subject;
  EXPECT_TRUE(contains(f[0].message, "SO_BINDTODEVICE")) << f[0].message;
  EXPECT_TRUE(contains(f[0].message, "policy routing")) << f[0].message;
}

TEST(SharedSubnet, SaysThePluginCannotBindWithDefaultArp) {
  const Inventory inv = spark_node("0", "0");
  const Findings f = check_shared_subnets(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(f[0].message, "enp1s0f0np0 (arp_ignore=0)")) << f[0].message;
  EXPECT_TRUE(contains(f[0].message, "everything")) << f[0].message;
  EXPECT_FALSE(contains(f[0].message, "stripes")) << f[0].message;
  EXPECT_TRUE(contains(f[0].fix, "net.ipv4.conf.enP2p1s0f0np0.arp_ignore=1")) << f[0].fix;
  EXPECT_TRUE(contains(f[0].fix, "net.ipv4.conf.enp1s0f0np0.arp_announce=2")) << f[0].fix;
  EXPECT_TRUE(contains(f[0].fix, "net.ipv4.conf.enp1s0f0np0.rp_filter=2")) << f[0].fix;
}

TEST(ArpHalves, OkWithoutSharedSubnetsOrWithTheSysctlsSet) {
  Inventory inv = triangle_node();
  Findings f = check_arp_halves(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
  EXPECT_TRUE(contains(f[0].message, "no interfaces share")) << f[0].message;
  inv = spark_node("1", "2");
  f = check_arp_halves(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
  // Per-interface values count too: the kernel applies max(all, <if>).
  inv = spark_node("0", "0");
  for (const char* n : {"enp1s0f0np0", "enP2p1s0f0np0"}) {
    inv.sysctls[std::string("net.ipv4.conf.") + n + ".arp_ignore"] = "2";
    inv.sysctls[std::string("net.ipv4.conf.") + n + ".arp_announce"] = "2";
  }
  f = check_arp_halves(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk) << f[0].message;
}

TEST(ArpHalves, WarnsWithTheFixForEachHalf) {
  for (const auto& [ignore, announce] :
       {std::pair{"0", "2"}, std::pair{"1", "0"}, std::pair{"8", "2"}}) {
    const Inventory inv = spark_node(ignore, announce);
    const Findings f = check_arp_halves(inv, build_model(inv));
    ASSERT_EQ(f.size(), 1u);
    EXPECT_EQ(f[0].verdict, Verdict::kWarn) << ignore << "/" << announce;
    EXPECT_TRUE(contains(f[0].subject, std::string("enp1s0f0np0 (arp_ignore=") + ignore +
                                           ", arp_announce=" + announce + ")"))
        << f[0].subject;
    EXPECT_TRUE(contains(f[0].fix,
                         "sysctl -w net.ipv4.conf.enp1s0f0np0.arp_ignore=1 "
                         "net.ipv4.conf.enp1s0f0np0.arp_announce=2 "
                         "net.ipv4.conf.enp1s0f0np0.rp_filter=2"))
        << f[0].fix;
    EXPECT_FALSE(contains(f[0].subject, "enP7s7")) << f[0].subject;  // management: own subnet
  }
}

TEST(LocalMtu, OkAndWarnForSmallMtuOnFastLinks) {
  Inventory inv = triangle_node();
  inv.interfaces[1].speed_mbps = 200000;
  Findings f = check_local_mtu(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);

  inv.interfaces[1].mtu = 1500;
  f = check_local_mtu(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kWarn);
  EXPECT_EQ(f[0].subject, "srab");
  EXPECT_TRUE(contains(f[0].fix, "ip link set dev srab mtu 9000")) << f[0].fix;
}

TEST(RpFilter, OkWhenLooseOrOff) {
  Inventory inv = triangle_node();
  inv.sysctls["net.ipv4.conf.srab.rp_filter"] = "1";  // max(all=2, 1) = 2: loose
  inv.sysctls["net.ipv4.conf.srac.rp_filter"] = "0";
  const Findings f = check_rp_filter(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
}

TEST(RpFilter, WarnWhenStrictWithOneSubnetPerCable) {
  Inventory inv = triangle_node();
  inv.sysctls["net.ipv4.conf.all.rp_filter"] = "0";
  inv.sysctls["net.ipv4.conf.srab.rp_filter"] = "1";
  const Findings f = check_rp_filter(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kWarn);
  EXPECT_EQ(f[0].subject, "srab");
  EXPECT_TRUE(contains(f[0].fix, "net.ipv4.conf.srab.rp_filter=2")) << f[0].fix;
  EXPECT_FALSE(contains(f[0].fix, "conf.all")) << f[0].fix;  // all is already 0
}

TEST(RpFilter, FailWhenStrictAndMultiHomed) {
  Inventory inv = triangle_node();
  inv.interfaces.push_back(iface("vlan.7", "198.18.2.9/24"));
  add_netdevs(inv);
  inv.sysctls["net.ipv4.conf.all.rp_filter"] = "1";
  const Findings f = check_rp_filter(inv, build_model(inv));
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].verdict, Verdict::kWarn);  // srab: own subnet
  EXPECT_EQ(f[1].verdict, Verdict::kFail);  // srac and vlan.7 share 198.18.2.0/24
  EXPECT_EQ(f[2].verdict, Verdict::kFail);
  EXPECT_TRUE(contains(f[2].fix, "net.ipv4.conf.all.rp_filter=2")) << f[2].fix;
  EXPECT_EQ(worst(f), Verdict::kFail);
}

TEST(RpFilter, SysctlNamesWriteDotsAsSlashes) {
  Inventory inv;
  inv.interfaces = {iface("eth0.100", "198.18.5.1/24")};
  add_netdevs(inv);
  inv.sysctls = {{"net.ipv4.conf.eth0.100.rp_filter", "1"}};
  const Findings f = check_rp_filter(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(contains(f[0].fix, "net.ipv4.conf.eth0/100.rp_filter=2")) << f[0].fix;
}

TEST(AcceptLocal, OkWithoutSharedSubnets) {
  const Inventory inv = triangle_node();
  const Findings f = check_accept_local(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
}

TEST(AcceptLocal, WarnWhenBothCableEndsMayBeLocal) {
  // A loopback test rig: both ends of a veth pair on one host, one subnet.
  Inventory inv;
  inv.interfaces = {iface("sr0a", "198.18.0.1/24"), iface("sr0b", "198.18.0.2/24")};
  add_netdevs(inv);
  inv.sysctls = {{"net.ipv4.conf.all.accept_local", "0"}, {"net.ipv4.conf.sr0a.accept_local", "1"}};
  Findings f = check_accept_local(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(f[0].fix, "net.ipv4.conf.sr0b.accept_local=1")) << f[0].fix;
  EXPECT_FALSE(contains(f[0].fix, "sr0a.accept_local")) << f[0].fix;

  inv.sysctls["net.ipv4.conf.all.accept_local"] = "1";  // ORed with every interface's
  f = check_accept_local(inv, build_model(inv));
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
}

TEST(LocalChecks, ExitCodeFailsOnlyOnFail) {
  Inventory inv = triangle_node();
  inv.env = {{"NCCL_NET", "Mesh"}, {"NCCL_NET_PLUGIN", "mesh"}};
  // The gin check warns when it could not inspect the plugin: this host's was found.
  inv.gin.plugin_path = "/usr/lib/libnccl-net-mesh.so";
  inv.gin.exported = {std::begin(kGinSymbols), std::end(kGinSymbols)};
  Findings f = run_local_checks(inv, build_model(inv));
  EXPECT_EQ(worst(f), Verdict::kOk);
  EXPECT_EQ(exit_code(f), 0);

  inv.env.erase("NCCL_NET");  // warn
  f = run_local_checks(inv, build_model(inv));
  EXPECT_EQ(worst(f), Verdict::kWarn);
  EXPECT_EQ(exit_code(f), 0);

  inv.env["NCCL_NET"] = "Socket";  // fail
  f = run_local_checks(inv, build_model(inv));
  EXPECT_EQ(exit_code(f), 1);
}

}  // namespace
}  // namespace mesh::doctor
