// SPDX-License-Identifier: Apache-2.0
#include "tools/doctor/gather.h"

#include <dlfcn.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "topology/interface.h"
#include "topology/sysfs_files.h"

extern char** environ;  // POSIX; <unistd.h> declares it only under _GNU_SOURCE

namespace mesh::doctor {
namespace {

namespace fs = std::filesystem;

std::string driver_of(const std::string& netdev_dir) {
  std::error_code ec;
  const fs::path p = fs::canonical(netdev_dir + "/device/driver", ec);
  return ec ? std::string() : p.filename().string();
}

std::map<std::string, std::string> nccl_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || kv.rfind("NCCL_", 0) != 0) continue;
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

// rdma-core present means its verbs library loads; a missing provider library still shows up
// later as "no device", which the sysfs side covers.
void probe_libibverbs(Inventory& inv) {
  void* h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h != nullptr) {
    inv.libibverbs_loadable = true;
    dlclose(h);
    return;
  }
  const char* err = dlerror();
  inv.libibverbs_error = err != nullptr ? err : "dlopen failed";
}

}  // namespace

std::vector<Netdev> read_netdevs(const std::string& sysfs_root) {
  std::vector<Netdev> out;
  const std::string class_dir = sysfs_root + "/class/net";
  for (const std::string& name : topology::directory_entries(class_dir)) {
    const std::string dir = class_dir + "/" + name;
    if (!fs::exists(dir + "/mtu")) continue;  // bonding_masters and other non-device files
    // The plugin's own sysfs reader, so MTU, speed and PCI path match what the plugin sees.
    topology::Interface itf;
    itf.name = name;
    topology::read_sysfs_attributes(itf, sysfs_root);
    Netdev n;
    n.name = name;
    n.mtu = itf.mtu;
    n.speed_mbps = itf.speed_mbps;
    n.pci_path = itf.pci_path;
    n.numa_node = itf.numa_node;
    n.operstate = topology::read_first_line(dir + "/operstate").value_or("");
    const auto flags = topology::read_first_line(dir + "/flags");
    n.loopback = flags && (std::strtoul(flags->c_str(), nullptr, 16) & 0x8) != 0;  // IFF_LOOPBACK
    n.enslaved = fs::exists(dir + "/master");
    if (!n.pci_path.empty()) n.driver = driver_of(dir);
    out.push_back(std::move(n));
  }
  return out;
}

std::map<std::string, std::string> read_ipv4_conf_sysctls(const std::string& proc_root,
                                                          const std::vector<Netdev>& netdevs) {
  std::map<std::string, std::string> out;
  std::vector<std::string> scopes = {"all", "default"};
  for (const Netdev& n : netdevs) scopes.push_back(n.name);
  for (const std::string& scope : scopes) {
    for (const char* key : {"rp_filter", "accept_local", "arp_ignore", "arp_announce"}) {
      const auto v =
          topology::read_first_line(proc_root + "/sys/net/ipv4/conf/" + scope + "/" + key);
      if (v) out["net.ipv4.conf." + scope + "." + key] = *v;
    }
  }
  return out;
}

std::set<std::string> read_modules(const std::string& proc_root, const std::string& sysfs_root) {
  std::set<std::string> out;
  std::ifstream f(proc_root + "/modules");
  std::string line;
  while (std::getline(f, line)) {
    const size_t sp = line.find(' ');
    out.insert(line.substr(0, sp));
  }
  // Built-in modules do not appear in /proc/modules but do in /sys/module.
  for (const std::string& name : topology::directory_entries(sysfs_root + "/module"))
    out.insert(name);
  return out;
}

std::map<std::string, topology::LinkCounters> read_link_counters(
    const std::vector<Netdev>& netdevs, const std::vector<topology::RdmaPort>& rdma_ports,
    const std::string& sysfs_root) {
  std::map<std::string, topology::LinkCounters> out;
  for (const Netdev& n : netdevs) {
    out[n.name] = topology::read_link_counters(
        n.name, topology::ports_for_netdev(rdma_ports, n.name), sysfs_root);
  }
  return out;
}

Inventory gather_inventory(const GatherOptions& opts) {
  Inventory inv;
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) inv.hostname = host;
  utsname uts{};
  if (uname(&uts) == 0) inv.kernel_release = uts.release;
  inv.interfaces = topology::discover_interfaces(opts.sysfs_root, opts.proc_root);
  inv.netdevs = read_netdevs(opts.sysfs_root);
  inv.rdma_ports = topology::discover_rdma_ports(opts.sysfs_root);
  inv.sysctls = read_ipv4_conf_sysctls(opts.proc_root, inv.netdevs);
  inv.link_counters = read_link_counters(inv.netdevs, inv.rdma_ports, opts.sysfs_root);
  inv.env = nccl_environment();
  // The same object the plugin would build in this process from this environment.
  inv.settings = mesh::settings();
  inv.modules = read_modules(opts.proc_root, opts.sysfs_root);
  probe_libibverbs(inv);
  for (const std::string& name : topology::directory_entries(opts.dev_root + "/infiniband")) {
    if (name.rfind("uverbs", 0) == 0) ++inv.uverbs_devices;
  }
  inv.nvidia_driver =
      topology::read_first_line(opts.proc_root + "/driver/nvidia/version").value_or("");
  if (const auto plugin = inv.getenv("NCCL_NET_PLUGIN");
      plugin && plugin->find('/') != std::string::npos) {
    std::error_code ec;
    inv.net_plugin_file_exists = fs::exists(*plugin, ec);
  }
  gather_gin_facts(inv);
  return inv;
}

}  // namespace mesh::doctor
