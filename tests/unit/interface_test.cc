// SPDX-License-Identifier: Apache-2.0
// read_sysfs_attributes over a synthetic sysfs tree, and discover_interfaces on this machine.
#include "topology/interface.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace mesh::topology {
namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p);
  f << text;
  ASSERT_TRUE(f.good()) << p;
}

// A fake /sys:
//   class/net/eth0      mtu 9000, speed 100000, device -> PCI 0000:01:00.0 on NUMA node 1
//   class/net/eth1      mtu 1500, speed -1 (link down), device -> PCI 0000:02:00.0, numa_node -1
//   class/net/veth0     mtu 1500, speed 10000, no device (virtual)
//   class/net/lo        mtu 65536, no speed file, no device
//   class/net/usb0      mtu 1500, speed 100, device -> a USB function (subsystem "usb")
//   class/net/eth2      mtu "garbage", empty speed file, device -> PCI 0000:03:00.0 without
//                       numa_node
//   class/net/old0      speed 4294967295 (SPEED_UNKNOWN as older kernels print it)
//   class/net/zero0     speed 0
class SysfsTree : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nccl-mesh-sysfs-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = fs::canonical(tmpl);  // /tmp itself may be a symlink

    const fs::path pci_bus = root_ / "bus" / "pci";
    const fs::path usb_bus = root_ / "bus" / "usb";
    fs::create_directories(pci_bus);
    fs::create_directories(usb_bus);
    const fs::path host = root_ / "devices" / "pci0000:00";
    make_function(host / "0000:01:00.0", pci_bus, "1\n");
    make_function(host / "0000:02:00.0", pci_bus, "-1\n");
    make_function(host / "0000:03:00.0", pci_bus, "");
    make_function(host / "0000:00:14.0" / "usb1" / "1-1", usb_bus, "0\n");

    netdev("eth0", "9000\n", "100000\n", "../../../devices/pci0000:00/0000:01:00.0");
    netdev("eth1", "1500\n", "-1\n", "../../../devices/pci0000:00/0000:02:00.0");
    netdev("veth0", "1500\n", "10000\n", "");
    netdev("lo", "65536\n", nullptr, "");
    netdev("usb0", "1500\n", "100\n", "../../../devices/pci0000:00/0000:00:14.0/usb1/1-1");
    netdev("eth2", "garbage\n", "", "../../../devices/pci0000:00/0000:03:00.0");
    netdev("old0", "1500\n", "4294967295\n", "");  // SPEED_UNKNOWN printed unsigned
    netdev("zero0", "1500\n", "0\n", "");
  }

  void TearDown() override {
    std::error_code ec;
    if (!root_.empty()) fs::remove_all(root_, ec);
  }

  // A device directory whose `subsystem` links to `bus`; numa_node written unless empty.
  static void make_function(const fs::path& dir, const fs::path& bus, const std::string& numa) {
    fs::create_directories(dir);
    fs::create_directory_symlink(bus, dir / "subsystem");
    if (!numa.empty()) write_file(dir / "numa_node", numa);
  }

  void netdev(const std::string& name, const std::string& mtu, const char* speed,
              const std::string& device_link) {
    const fs::path dir = root_ / "class" / "net" / name;
    fs::create_directories(dir);
    write_file(dir / "mtu", mtu);
    if (speed != nullptr) write_file(dir / "speed", speed);
    if (!device_link.empty()) fs::create_directory_symlink(device_link, dir / "device");
  }

  Interface read(const std::string& name) {
    Interface itf;
    itf.name = name;
    read_sysfs_attributes(itf, root_.string());
    return itf;
  }

  fs::path root_;
};

TEST_F(SysfsTree, PciNicWithSpeedAndNuma) {
  const Interface itf = read("eth0");
  EXPECT_EQ(itf.mtu, 9000);
  EXPECT_EQ(itf.speed_mbps, 100000);
  EXPECT_EQ(itf.pci_path, (root_ / "devices" / "pci0000:00" / "0000:01:00.0").string());
  EXPECT_EQ(itf.numa_node, 1);
}

TEST_F(SysfsTree, DownLinkSpeedMinusOneIsUnknown) {
  const Interface itf = read("eth1");
  EXPECT_EQ(itf.mtu, 1500);
  EXPECT_EQ(itf.speed_mbps, -1);
  EXPECT_EQ(itf.pci_path, (root_ / "devices" / "pci0000:00" / "0000:02:00.0").string());
  EXPECT_EQ(itf.numa_node, -1);
}

TEST_F(SysfsTree, VirtualInterfaceHasNoPciPath) {
  const Interface itf = read("veth0");
  EXPECT_EQ(itf.mtu, 1500);
  EXPECT_EQ(itf.speed_mbps, 10000);
  EXPECT_EQ(itf.pci_path, "");
  EXPECT_EQ(itf.numa_node, -1);
}

TEST_F(SysfsTree, LoopbackWithoutSpeedFile) {
  const Interface itf = read("lo");
  EXPECT_EQ(itf.mtu, 65536);
  EXPECT_EQ(itf.speed_mbps, -1);
  EXPECT_EQ(itf.pci_path, "");
  EXPECT_EQ(itf.numa_node, -1);
}

TEST_F(SysfsTree, NonPciDeviceIsNotAPhysicalNic) {
  const Interface itf = read("usb0");
  EXPECT_EQ(itf.mtu, 1500);
  EXPECT_EQ(itf.speed_mbps, 100);
  EXPECT_EQ(itf.pci_path, "");
  EXPECT_EQ(itf.numa_node, -1);  // numa_node 0 of the USB function is not read
}

TEST_F(SysfsTree, UnreadableValuesStayUnknown) {
  const Interface itf = read("eth2");
  EXPECT_EQ(itf.mtu, -1);
  EXPECT_EQ(itf.speed_mbps, -1);
  EXPECT_EQ(itf.pci_path, (root_ / "devices" / "pci0000:00" / "0000:03:00.0").string());
  EXPECT_EQ(itf.numa_node, -1);
}

TEST_F(SysfsTree, UnknownSpeedEncodingsStayUnknown) {
  EXPECT_EQ(read("old0").speed_mbps, -1);
  EXPECT_EQ(read("zero0").speed_mbps, -1);
  EXPECT_EQ(read("old0").mtu, 1500);
}

TEST_F(SysfsTree, MissingInterfaceLeavesEverythingUnknown) {
  const Interface itf = read("nosuch0");
  EXPECT_EQ(itf.mtu, -1);
  EXPECT_EQ(itf.speed_mbps, -1);
  EXPECT_EQ(itf.pci_path, "");
  EXPECT_EQ(itf.numa_node, -1);
}

TEST_F(SysfsTree, MissingSysfsRoot) {
  Interface itf;
  itf.name = "eth0";
  read_sysfs_attributes(itf, (root_ / "does-not-exist").string());
  EXPECT_EQ(itf.mtu, -1);
  EXPECT_EQ(itf.speed_mbps, -1);
  EXPECT_EQ(itf.pci_path, "");
  EXPECT_EQ(itf.numa_node, -1);
}

TEST(DiscoverInterfaces, FindsLoopback) {
  const std::vector<Interface> all = discover_interfaces();
  ASSERT_FALSE(all.empty());
  bool found = false;
  for (const Interface& itf : all) {
    if (itf.addr.addr == 0x7f000001u) {
      found = true;
      EXPECT_EQ(itf.addr.prefix, 8);
      EXPECT_TRUE(itf.loopback);
      EXPECT_TRUE(itf.up);
      EXPECT_EQ(itf.pci_path, "");
    }
  }
  EXPECT_TRUE(found) << "no interface with 127.0.0.1/8";
}

TEST(DiscoverInterfaces, EveryEntryIsNamedWithAValidPrefix) {
  for (const Interface& itf : discover_interfaces()) {
    EXPECT_FALSE(itf.name.empty());
    EXPECT_LE(itf.addr.prefix, 32) << itf.name;
  }
}

TEST(DiscoverInterfaces, EmptySysfsRootStillListsAddresses) {
  // sysfs only enriches: without it the addresses are still found, attributes unknown.
  const std::vector<Interface> all = discover_interfaces("/nonexistent-sysfs-root");
  bool found = false;
  for (const Interface& itf : all) {
    EXPECT_EQ(itf.mtu, -1) << itf.name;
    EXPECT_EQ(itf.pci_path, "") << itf.name;
    if (itf.addr.addr == 0x7f000001u && itf.loopback) found = true;
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace mesh::topology
