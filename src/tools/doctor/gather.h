// SPDX-License-Identifier: Apache-2.0
// Fills an Inventory from the running machine: getifaddrs and sysfs through the plugin's own
// discovery, /proc/sys for sysctls, the process environment, loaded modules, and whether
// rdma-core's libibverbs can be loaded. Read-only: nothing is changed on the machine.
#pragma once

#include <string>

#include "tools/doctor/inventory.h"

namespace mesh::doctor {

struct GatherOptions {
  std::string sysfs_root = "/sys";
  std::string proc_root = "/proc";
  std::string dev_root = "/dev";
};

Inventory gather_inventory(const GatherOptions& opts = {});

// Inventory::gin (gather_gin.cc): dlopens the plugin, the GIN core's CUDA driver and
// libnccl.so.2 in this process.
void gather_gin_facts(Inventory& inv);

// The parts of gather_inventory that read only files under the roots (tested on synthetic
// trees): every netdev of <sysfs>/class/net, and the rp_filter/accept_local/arp_ignore/arp_announce
// sysctls of "all", "default" and each netdev; loaded and built-in kernel modules.
std::vector<Netdev> read_netdevs(const std::string& sysfs_root);
std::map<std::string, std::string> read_ipv4_conf_sysctls(const std::string& proc_root,
                                                          const std::vector<Netdev>& netdevs);
// Each netdev's byte counters and those of the RDMA ports on it (topology/link_counters.h).
std::map<std::string, topology::LinkCounters> read_link_counters(
    const std::vector<Netdev>& netdevs, const std::vector<topology::RdmaPort>& rdma_ports,
    const std::string& sysfs_root);
std::set<std::string> read_modules(const std::string& proc_root, const std::string& sysfs_root);

}  // namespace mesh::doctor
