// SPDX-License-Identifier: Apache-2.0
// The file-reading parts of the inventory gather over synthetic /sys and /proc trees, and a
// smoke test of the real gather on this machine.
#include "tools/doctor/gather.h"

#include <gtest/gtest.h>

#include "fixtures.h"

namespace mesh::doctor {
namespace {

using testing::TempDir;

TEST(Gather, ReadsEveryNetdevWithState) {
  TempDir sys;
  sys.write("class/net/eth9/mtu", "9000");
  sys.write("class/net/eth9/operstate", "up");
  sys.write("class/net/eth9/flags", "0x1003");
  sys.write("class/net/eth9/speed", "100000");
  sys.write("class/net/lo/mtu", "65536");
  sys.write("class/net/lo/operstate", "unknown");
  sys.write("class/net/lo/flags", "0x9");
  sys.write("class/net/bond0/mtu", "1500");
  sys.write("class/net/slave1/mtu", "1500");
  sys.write("class/net/slave1/master", "bond0");    // a symlink in real sysfs
  sys.write("class/net/bonding_masters", "bond0");  // a file, not a device
  const auto nds = read_netdevs(sys.path());
  ASSERT_EQ(nds.size(), 4u);
  EXPECT_EQ(nds[0].name, "bond0");
  EXPECT_EQ(nds[1].name, "eth9");
  EXPECT_EQ(nds[1].mtu, 9000);
  EXPECT_EQ(nds[1].speed_mbps, 100000);
  EXPECT_EQ(nds[1].operstate, "up");
  EXPECT_FALSE(nds[1].loopback);
  EXPECT_TRUE(nds[1].pci_path.empty());  // no device link: virtual
  EXPECT_TRUE(nds[2].loopback);
  EXPECT_TRUE(nds[3].enslaved);
}

TEST(Gather, LinkCountersOfEveryNetdevWithItsRdmaPort) {
  TempDir sys;
  sys.write("class/net/eth9/statistics/tx_bytes", "4096");
  sys.write("class/net/eth9/statistics/rx_bytes", "8192");
  sys.write("class/infiniband/mlx5_0/ports/1/counters/port_xmit_data", "100");
  topology::RdmaPort port;
  port.device = "mlx5_0";
  port.netdevs = {"eth9"};
  const auto c = read_link_counters({testing::netdev("eth9", "up"), testing::netdev("lo", "up")},
                                    {port}, sys.path());
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c.at("eth9").tx_bytes, 4096u);
  EXPECT_EQ(c.at("eth9").rx_bytes, 8192u);
  ASSERT_EQ(c.at("eth9").rdma.size(), 1u);
  EXPECT_EQ(c.at("eth9").rdma[0].tx_bytes, 400u);  // 4-byte words
  EXPECT_TRUE(c.at("lo").rdma.empty());
  EXPECT_FALSE(c.at("lo").tx_bytes.has_value());  // no statistics in this tree
}

TEST(Gather, ReadsRpFilterAndAcceptLocal) {
  TempDir proc;
  proc.write("sys/net/ipv4/conf/all/rp_filter", "1");
  proc.write("sys/net/ipv4/conf/all/accept_local", "0");
  proc.write("sys/net/ipv4/conf/default/rp_filter", "1");
  proc.write("sys/net/ipv4/conf/eth9/rp_filter", "2");
  proc.write("sys/net/ipv4/conf/eth9/arp_ignore", "1");
  proc.write("sys/net/ipv4/conf/all/arp_announce", "2");
  Netdev eth9;
  eth9.name = "eth9";
  const auto s = read_ipv4_conf_sysctls(proc.path(), {eth9});
  EXPECT_EQ(s.at("net.ipv4.conf.all.rp_filter"), "1");
  EXPECT_EQ(s.at("net.ipv4.conf.all.accept_local"), "0");
  EXPECT_EQ(s.at("net.ipv4.conf.eth9.rp_filter"), "2");
  EXPECT_EQ(s.at("net.ipv4.conf.eth9.arp_ignore"), "1");
  EXPECT_EQ(s.at("net.ipv4.conf.all.arp_announce"), "2");
  EXPECT_EQ(s.count("net.ipv4.conf.eth9.accept_local"), 0u);
}

TEST(Gather, ModulesFromProcAndBuiltinsFromSys) {
  TempDir proc, sys;
  proc.write("modules",
             "nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)\n"
             "mlx5_ib 458752 0 - Live 0x0000000000000000");
  sys.mkdir("module/ib_uverbs");
  const auto mods = read_modules(proc.path(), sys.path());
  EXPECT_EQ(mods.count("nvidia_peermem"), 1u);
  EXPECT_EQ(mods.count("mlx5_ib"), 1u);
  EXPECT_EQ(mods.count("ib_uverbs"), 1u);
  EXPECT_EQ(mods.count("nvidia"), 0u);
}

TEST(Gather, RealMachineHasLoopback) {
  const Inventory inv = gather_inventory();
  EXPECT_FALSE(inv.hostname.empty());
  const bool lo = std::any_of(inv.interfaces.begin(), inv.interfaces.end(),
                              [](const topology::Interface& i) { return i.loopback; });
  EXPECT_TRUE(lo);
  // Every checks runs on the real inventory without throwing.
  const Findings f = run_local_checks(inv, build_model(inv));
  EXPECT_FALSE(f.empty());
}

}  // namespace
}  // namespace mesh::doctor
