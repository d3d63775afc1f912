// SPDX-License-Identifier: Apache-2.0
#include "topology/interface.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <climits>
#include <cstdlib>
#include <fstream>

#include "topology/cable_facts.h"

namespace mesh::topology {
namespace {

bool read_int(const std::string& path, int* out) {
  std::ifstream f(path);
  long long v = 0;
  if (!(f >> v)) return false;  // e.g. speed of a down link reads as EINVAL
  if (v < INT_MIN || v > INT_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) == nullptr) return {};
  return buf;
}

}  // namespace

void read_sysfs_attributes(Interface& itf, const std::string& sysfs_root) {
  const std::string dir = sysfs_root + "/class/net/" + itf.name;
  int v = 0;
  if (read_int(dir + "/mtu", &v)) itf.mtu = v;
  // veth reports 10000, lo has no speed file, a down PHY gives -1 or an error: all "unknown"
  // unless positive.
  if (read_int(dir + "/speed", &v) && v > 0) itf.speed_mbps = v;
  // Only PCI functions count as physical NICs for NCCL's topology (it realpaths
  // <pciPath>/subsystem and expects "pci").
  const std::string dev = real_path(dir + "/device");
  if (!dev.empty()) {
    const std::string subsystem = real_path(dev + "/subsystem");
    if (subsystem.size() >= 4 && subsystem.compare(subsystem.size() - 4, 4, "/pci") == 0) {
      itf.pci_path = dev;
      if (read_int(dev + "/numa_node", &v)) itf.numa_node = v;
    }
  }
}

void read_cable_facts(std::vector<Interface>& itfs, const std::string& sysfs_root,
                      const std::string& proc_root) {
  std::ifstream route(proc_root + "/net/route");
  const std::set<std::string> default_via = parse_default_route_interfaces(route);
  std::ifstream arp(proc_root + "/net/arp");
  const std::vector<Neighbour> neighbours = parse_arp_table(arp);
  for (Interface& itf : itfs) {
    if (!itf.loopback)
      itf.not_a_cable = not_a_cable_reason(read_netdev_facts(sysfs_root, itf.name));
    itf.default_route = default_via.count(itf.name) != 0;
    itf.neighbours.clear();
    for (const Neighbour& n : neighbours) {
      if (n.dev == itf.name && in_subnet(itf.addr, n.addr) && n.addr != itf.addr.addr)
        itf.neighbours.push_back(n.addr);
    }
  }
}

std::vector<Interface> discover_interfaces(const std::string& sysfs_root,
                                           const std::string& proc_root) {
  std::vector<Interface> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    Interface itf;
    itf.name = a->ifa_name;
    const auto* sin = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    itf.addr.addr = ntohl(sin->sin_addr.s_addr);
    uint8_t prefix = 32;
    if (a->ifa_netmask != nullptr) {
      const auto* mask = reinterpret_cast<const sockaddr_in*>(a->ifa_netmask);
      if (auto p = prefix_from_netmask(ntohl(mask->sin_addr.s_addr))) prefix = *p;
    }
    itf.addr.prefix = prefix;
    itf.up = (a->ifa_flags & IFF_UP) && (a->ifa_flags & IFF_RUNNING);
    itf.loopback = (a->ifa_flags & IFF_LOOPBACK) != 0;
    read_sysfs_attributes(itf, sysfs_root);
    out.push_back(std::move(itf));
  }
  freeifaddrs(list);
  read_cable_facts(out, sysfs_root, proc_root);
  return out;
}

}  // namespace mesh::topology
