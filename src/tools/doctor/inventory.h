// SPDX-License-Identifier: Apache-2.0
// Everything nccl-mesh-doctor knows about the local machine, as plain data. gather.cc fills it
// from the running system; unit tests build synthetic ones. Every check is a pure function of
// an Inventory (and of peer results), so each check is testable without the hardware it
// diagnoses.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tools/doctor/gin_facts.h"
#include "topology/interface.h"
#include "topology/link_counters.h"
#include "topology/rdma_sysfs.h"
#include "util/settings.h"

namespace mesh::doctor {

// One network device of /sys/class/net, whether or not it carries an IPv4 address.
struct Netdev {
  std::string name;
  std::string operstate;  // "up", "down", "unknown" (lo and some virtual devices), "" unread
  bool loopback = false;
  bool enslaved = false;  // member of a bond or bridge: its master carries the address
  int mtu = -1;
  int speed_mbps = -1;
  std::string pci_path;  // empty for virtual devices
  int numa_node = -1;
  std::string driver;  // driver of the PCI function ("mlx5_core"), empty for virtual devices
};

struct Inventory {
  std::string hostname;
  std::vector<topology::Interface> interfaces;  // one per IPv4 address (discover_interfaces)
  std::vector<Netdev> netdevs;                  // every netdev, sorted by name
  std::vector<topology::RdmaPort> rdma_ports;   // discover_rdma_ports
  // Byte counters of every netdev (and of the RDMA ports on it), keyed by netdev name.
  std::map<std::string, topology::LinkCounters> link_counters;
  // Values under /proc/sys, keyed by sysctl name: "net.ipv4.conf.all.rp_filter" -> "1".
  std::map<std::string, std::string> sysctls;
  std::map<std::string, std::string> env;  // the NCCL_* variables of this process
  Settings settings;                       // NCCL_MESH_* as the plugin reads them
  std::set<std::string> modules;           // loaded or built-in kernel modules
  bool libibverbs_loadable = false;        // dlopen("libibverbs.so.1") succeeded
  std::string libibverbs_error;            // dlerror() text otherwise
  int uverbs_devices = 0;                  // /dev/infiniband/uverbs* character devices
  std::string kernel_release;              // uname -r
  std::string nvidia_driver;  // first line of /proc/driver/nvidia/version, empty without driver
  // When NCCL_NET_PLUGIN names a file path: whether that file exists.
  std::optional<bool> net_plugin_file_exists;
  GinFacts gin;  // what the `gin` check needs (gather_gin.cc)

  const Netdev* netdev(const std::string& name) const;
  std::optional<std::string> sysctl(const std::string& key) const;
  std::optional<std::string> getenv(const std::string& name) const;
};

// NCCL_MESH_* settings from an environment map, parsed by the plugin's own parse_setting.
// Malformed values keep their default and add a line to *problems (when given).
Settings settings_from_env(const std::map<std::string, std::string>& env,
                           std::vector<std::string>* problems = nullptr);

}  // namespace mesh::doctor
