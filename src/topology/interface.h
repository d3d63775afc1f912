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

  // Facts for the default choice of cables (select_interfaces; topology/cable_facts.h), filled
  // by discover_interfaces. Synthetic tables leave them empty: "looks like a cable".
  std::string not_a_cable;     // why the netdev is not a cable ("a bridge (sysfs bridge/)"), or ""
  bool default_route = false;  // an IPv4 default route (any metric) leaves through this netdev
  // Addresses on this address's subnet that answered ARP on this netdev (the kernel's neighbour
  // table, complete entries): how many other hosts share the subnet, as far as the kernel knows.
  std::vector<uint32_t> neighbours;
};

// Reads IPv4 interfaces with getifaddrs() and enriches them from sysfs under `sysfs_root` and
// from the routing and neighbour tables under `proc_root` (normally "/sys" and "/proc"; tests
// point them at synthetic trees). Reads files only: never blocks on the network.
std::vector<Interface> discover_interfaces(const std::string& sysfs_root = "/sys",
                                           const std::string& proc_root = "/proc");

// Fills not_a_cable, default_route and neighbours of every entry of `itfs` from
// `<sysfs_root>/class/net/<name>/`, `<proc_root>/net/route` and `<proc_root>/net/arp`.
void read_cable_facts(std::vector<Interface>& itfs, const std::string& sysfs_root,
                      const std::string& proc_root);

// Fills mtu, speed, pci_path and numa_node of `itf` from `<sysfs_root>/class/net/<name>/`.
void read_sysfs_attributes(Interface& itf, const std::string& sysfs_root);

}  // namespace mesh::topology
