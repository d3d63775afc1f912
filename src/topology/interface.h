// SPDX-License-Identifier: Apache-2.0
// Local network interfaces as the plugin sees them: one entry per IPv4 address.
#pragma once

#include <string>
#include <vector>

#include "util/ipv4.h"

namespace mesh::topology {

struct Interface {
  std::string name;  // netdev name, e.g. "enp1s0f0np0"
  Ipv4Prefix addr;   // address and prefix length of its subnet
  bool up = false;   // IFF_UP and IFF_RUNNING
  bool loopback = false;
  int mtu = -1;          // bytes, -1 when unknown
  int speed_mbps = -1;   // link speed from sysfs, -1 when unknown (veth, lo, down links)
  std::string pci_path;  // realpath of the PCI function, empty for virtual interfaces
  int numa_node = -1;    // NUMA node of the PCI function, -1 when unknown
};

// Reads IPv4 interfaces with getifaddrs() and enriches them from sysfs under `sysfs_root`
// (normally "/sys"; tests point it at a synthetic tree).
std::vector<Interface> discover_interfaces(const std::string& sysfs_root = "/sys");

// Fills mtu, speed, pci_path and numa_node of `itf` from `<sysfs_root>/class/net/<name>/`.
void read_sysfs_attributes(Interface& itf, const std::string& sysfs_root);

}  // namespace mesh::topology
