// SPDX-License-Identifier: Apache-2.0
#include "topology/cable_facts.h"

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "topology/sysfs_files.h"
#include "util/ipv4.h"

namespace mesh::topology {
namespace {

constexpr int kArphrdEther = 1;
constexpr int kArphrdInfiniband = 32;
constexpr int kArphrdLoopback = 772;
constexpr unsigned kAtfCom = 0x02;  // <net/if_arp.h>: the entry is complete (someone answered)

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// A fact (a DEVTYPE value, a name prefix) and what it says the netdev is.
struct Known {
  const char* key;
  const char* why;
};

// uevent's DEVTYPE values of links that are never a cable (Ethernet-framed tunnels and virtual
// switches report ARPHRD_ETHER, so `type` alone does not tell).
constexpr std::array<Known, 9> kDevtypes = {{
    {"bridge", "a bridge"},
    {"wlan", "a wireless interface"},
    {"wireguard", "a WireGuard tunnel"},
    {"vxlan", "a VXLAN tunnel"},
    {"geneve", "a Geneve tunnel"},
    {"gretap", "a GRE tunnel"},
    {"ip6gretap", "a GRE tunnel"},
    {"openvswitch", "an Open vSwitch port"},
    {"bareudp", "a UDP tunnel"},
}};

// Name prefixes of container, VM and VPN software, for what sysfs cannot tell (a container
// runtime's bridge shows as "a bridge" anyway; this catches their veth-less plumbing and
// tunnels made without a DEVTYPE).
constexpr std::array<Known, 17> kNames = {{
    {"docker", "a Docker network"},
    {"br-", "a container network bridge"},
    {"virbr", "a libvirt network"},
    {"lxcbr", "an LXC network"},
    {"lxdbr", "an LXD network"},
    {"podman", "a Podman network"},
    {"cni", "a Kubernetes CNI network"},
    {"flannel", "a Kubernetes (flannel) overlay"},
    {"cali", "a Kubernetes (Calico) interface"},
    {"cilium", "a Kubernetes (Cilium) interface"},
    {"weave", "a Kubernetes (Weave) overlay"},
    {"vxlan", "a VXLAN tunnel"},
    {"tun", "a tun device"},
    {"tap", "a tap device"},
    {"wg", "a WireGuard tunnel"},
    {"tailscale", "a Tailscale VPN"},
    {"zt", "a ZeroTier VPN"},
}};

}  // namespace

NetdevFacts read_netdev_facts(const std::string& sysfs_root, const std::string& name) {
  namespace fs = std::filesystem;
  const std::string dir = sysfs_root + "/class/net/" + name;
  NetdevFacts f;
  f.name = name;
  std::error_code ec;
  f.bridge = fs::exists(dir + "/bridge", ec);
  f.bridge_port = fs::exists(dir + "/brport", ec);
  f.tun = fs::exists(dir + "/tun_flags", ec);
  f.wireless = fs::exists(dir + "/wireless", ec) || fs::exists(dir + "/phy80211", ec);
  if (const auto t = read_first_line(dir + "/type")) f.type = std::atoi(t->c_str());
  std::ifstream uevent(dir + "/uevent");
  std::string line;
  while (std::getline(uevent, line)) {
    if (starts_with(line, "DEVTYPE=")) f.devtype = line.substr(8);
  }
  return f;
}

std::string not_a_cable_reason(const NetdevFacts& f) {
  if (f.bridge) return "a bridge (sysfs bridge/)";
  if (f.bridge_port) return "a bridge port (sysfs brport/)";
  if (f.tun) return "a tun/tap device (sysfs tun_flags)";
  if (f.wireless) return "a wireless interface";
  for (const Known& d : kDevtypes) {
    if (f.devtype == d.key) return std::string(d.why) + " (DEVTYPE=" + f.devtype + ")";
  }
  if (f.type >= 0 && f.type != kArphrdEther && f.type != kArphrdInfiniband &&
      f.type != kArphrdLoopback) {
    return "not an Ethernet or InfiniBand link (ARPHRD type " + std::to_string(f.type) +
           ": a tunnel or VPN)";
  }
  for (const Known& n : kNames) {
    if (starts_with(f.name, n.key)) {
      return std::string(n.why) + " (name starts with '" + n.key + "')";
    }
  }
  return {};
}

std::set<std::string> parse_default_route_interfaces(std::istream& in) {
  std::set<std::string> out;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string iface, dest, gateway, flags, refcnt, use, metric, mask;
    if (!(row >> iface >> dest >> gateway >> flags >> refcnt >> use >> metric >> mask)) continue;
    const unsigned long fl = std::strtoul(flags.c_str(), nullptr, 16);
    if ((fl & 0x1) == 0) continue;  // RTF_UP
    if (std::strtoul(dest.c_str(), nullptr, 16) == 0 &&
        std::strtoul(mask.c_str(), nullptr, 16) == 0)
      out.insert(iface);
  }
  return out;
}

std::vector<Neighbour> parse_arp_table(std::istream& in) {
  std::vector<Neighbour> out;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string ip, hwtype, flags, hwaddr, mask, dev;
    if (!(row >> ip >> hwtype >> flags >> hwaddr >> mask >> dev)) continue;
    if ((std::strtoul(flags.c_str(), nullptr, 16) & kAtfCom) == 0) continue;
    if (const auto addr = parse_ipv4(ip)) out.push_back({*addr, dev});
  }
  return out;
}

}  // namespace mesh::topology
