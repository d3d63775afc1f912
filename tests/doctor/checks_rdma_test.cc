// SPDX-License-Identifier: Apache-2.0
// RDMA checks over synthetic inventories: RoCE GIDs, rdma-core, GPU-direct.
#include <gtest/gtest.h>

#include "fixtures.h"

namespace mesh::doctor {
namespace {

using testing::add_netdevs;
using testing::contains;
using testing::iface;
using testing::netdev;
using topology::GidEntry;
using topology::GidType;
using topology::RdmaPort;

GidEntry entry(int index, const std::string& gid, GidType type, const std::string& ndev) {
  return {index, *topology::parse_gid(gid), type, ndev};
}

// A host with one RoCE NIC port on enp1s0f0np0 (10.0.0.1/24); `v2` adds the RoCE v2 entries.
Inventory roce_host(bool v2) {
  Inventory inv;
  inv.interfaces = {
      iface("enp1s0f0np0", "10.0.0.1/24", 9000, 200000, "/sys/devices/pci0000:00/0000:01:00.0")};
  add_netdevs(inv);
  RdmaPort p;
  p.device = "mlx5_0";
  p.port = 1;
  p.state = "4: ACTIVE";
  p.link_layer = topology::LinkLayer::kEthernet;
  p.netdevs = {"enp1s0f0np0"};
  p.gids.push_back(entry(0, "fe80::1", GidType::kIbOrRoceV1, "enp1s0f0np0"));
  p.gids.push_back(entry(2, "::ffff:10.0.0.1", GidType::kIbOrRoceV1, "enp1s0f0np0"));
  if (v2) {
    p.gids.push_back(entry(1, "fe80::1", GidType::kRoceV2, "enp1s0f0np0"));
    p.gids.push_back(entry(3, "::ffff:10.0.0.1", GidType::kRoceV2, "enp1s0f0np0"));
  }
  inv.rdma_ports.push_back(p);
  inv.libibverbs_loadable = true;
  inv.uverbs_devices = 1;
  return inv;
}

TEST(RoceGid, OkWithRoceV2Entry) {
  const Inventory inv = roce_host(true);
  const Findings f = check_roce_gids(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
  EXPECT_TRUE(contains(f[0].message, "GID index 3")) << f[0].message;
  EXPECT_TRUE(contains(f[0].subject, "mlx5_0 port 1")) << f[0].subject;
}

TEST(RoceGid, OkWithoutRdma) {
  Inventory inv;
  inv.interfaces = {iface("eth0", "10.0.0.1/24")};
  const Findings f = check_roce_gids(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
}

TEST(RoceGid, FailWhenOnlyRoceV1) {
  const Inventory inv = roce_host(false);
  const Findings f = check_roce_gids(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kFail);
  EXPECT_TRUE(contains(f[0].message, "only RoCE v1 entries for 10.0.0.1")) << f[0].message;
  EXPECT_TRUE(contains(f[0].fix, "cma_roce_mode -d mlx5_0 -p 1 -m 2")) << f[0].fix;
}

TEST(RoceGid, WarnOnlyWhenThePluginDoesNotUseTheInterface) {
  Inventory inv = roce_host(false);
  inv.interfaces.push_back(iface("eth0", "192.168.0.5/24"));
  add_netdevs(inv);
  inv.settings.ifname = "eth0";
  const Findings f = check_roce_gids(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(f[0].message, "does not use this interface")) << f[0].message;
}

TEST(RoceGid, FailWhenAddressMissingFromTable) {
  Inventory inv = roce_host(true);
  inv.interfaces[0].addr = testing::prefix("10.0.0.7/24");
  const Findings f = check_roce_gids(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kFail);
  EXPECT_TRUE(contains(f[0].message, "no GID for 10.0.0.7")) << f[0].message;
  EXPECT_TRUE(contains(f[0].fix, "rdma link show")) << f[0].fix;
}

TEST(RoceGid, OverrideDifferentFromAutoWarnsAndMissingOverrideFails) {
  Inventory inv = roce_host(true);
  inv.env["NCCL_MESH_GID_INDEX"] = "2";
  Findings f = check_roce_gids(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(f[0].fix, "NCCL_MESH_GID_INDEX=3")) << f[0].fix;

  inv.env["NCCL_MESH_GID_INDEX"] = "3";
  f = check_roce_gids(inv, build_model(inv));
  EXPECT_EQ(f[0].verdict, Verdict::kOk);

  inv.env["NCCL_MESH_GID_INDEX"] = "9";
  f = check_roce_gids(inv, build_model(inv));
  EXPECT_EQ(f[0].verdict, Verdict::kFail);
  EXPECT_TRUE(contains(f[0].message, "no such non-zero entry")) << f[0].message;
}

TEST(RoceGid, InfinibandIsOkByLid) {
  Inventory inv = roce_host(false);
  inv.rdma_ports[0].link_layer = topology::LinkLayer::kInfiniBand;
  inv.rdma_ports[0].lid = 7;
  const Findings f = check_roce_gids(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
  EXPECT_TRUE(contains(f[0].message, "LID 7")) << f[0].message;
}

TEST(RoceGid, WarnWhenPortIsNotActive) {
  Inventory inv = roce_host(true);
  inv.rdma_ports[0].state = "1: DOWN";
  const Findings f = check_roce_gids(inv, build_model(inv));
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(f[0].message, "1: DOWN")) << f[0].message;
  EXPECT_EQ(f[1].verdict, Verdict::kOk);
}

TEST(RdmaCore, OkWithoutRdmaDevices) {
  Inventory inv;
  inv.netdevs = {netdev("eth0", "up", "/sys/devices/pci0000:00/0000:02:00.0", "e1000e")};
  const Findings f = check_rdma_core(inv);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
  EXPECT_TRUE(contains(f[0].message, "not installed")) << f[0].message;
}

TEST(RdmaCore, OkWithDevicesLibraryAndUverbs) {
  const Inventory inv = roce_host(true);
  const Findings f = check_rdma_core(inv);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
}

TEST(RdmaCore, FailWhenLibibverbsIsMissing) {
  Inventory inv = roce_host(true);
  inv.libibverbs_loadable = false;
  inv.libibverbs_error = "libibverbs.so.1: cannot open shared object file";
  const Findings f = check_rdma_core(inv);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kFail);
  EXPECT_TRUE(contains(f[0].message, "cannot open shared object")) << f[0].message;
  EXPECT_TRUE(contains(f[0].fix, "rdma-core")) << f[0].fix;
}

TEST(RdmaCore, FailWithoutUverbsDeviceNodes) {
  Inventory inv = roce_host(true);
  inv.uverbs_devices = 0;
  const Findings f = check_rdma_core(inv);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kFail);
  EXPECT_TRUE(contains(f[0].fix, "/dev/infiniband")) << f[0].fix;
}

TEST(RdmaCore, WarnForRdmaCapableNicWithoutDevice) {
  Inventory inv;
  inv.netdevs = {netdev("enp1s0f0np0", "up", "/sys/devices/pci0000:00/0000:01:00.0", "mlx5_core")};
  const Findings f = check_rdma_core(inv);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(f[0].fix, "modprobe mlx5_ib ib_uverbs")) << f[0].fix;
}

TEST(GpuDirect, OkWithoutNvidiaDriver) {
  const Inventory inv = roce_host(true);
  const Findings f = check_gpudirect(inv);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
}

TEST(GpuDirect, OkWithNvidiaPeermem) {
  Inventory inv = roce_host(true);
  inv.modules = {"nvidia", "nvidia_peermem"};
  const Findings f = check_gpudirect(inv);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
  EXPECT_TRUE(contains(f[0].message, "nvidia_peermem is loaded")) << f[0].message;
}

TEST(GpuDirect, WarnWithoutPeermemSayingDmaBufIsUnverified) {
  Inventory inv = roce_host(true);
  inv.modules = {"nvidia"};
  inv.kernel_release = "6.8.0";
  inv.nvidia_driver = "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05";
  const Findings f = check_gpudirect(inv);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(f[0].message, "cannot be verified without a GPU")) << f[0].message;
  EXPECT_TRUE(contains(f[0].message, "open kernel module")) << f[0].message;
  EXPECT_TRUE(contains(f[0].fix, "modprobe nvidia_peermem")) << f[0].fix;
  EXPECT_TRUE(contains(f[0].fix, "DMA_BUF_SUPPORTED")) << f[0].fix;
}

TEST(GpuDirect, OkWithNvidiaButNoRdma) {
  Inventory inv;
  inv.modules = {"nvidia"};
  const Findings f = check_gpudirect(inv);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
}

}  // namespace
}  // namespace mesh::doctor
