// SPDX-License-Identifier: Apache-2.0
// What tells a mesh cable from everything else that carries an IPv4 address: the management
// network, bridges, container and VM plumbing, VPN tunnels, switched LANs. select_interfaces
// (selection.h) takes, without NCCL_MESH_IFNAME, only interfaces that look like a cable; these
// are the facts it decides on. Each is read from the kernel without blocking (sysfs files,
// /proc/net/route, /proc/net/arp: no probe on the wire), so NCCL's init thread never waits.
#pragma once

#include <cstdint>
#include <istream>
#include <set>
#include <string>
#include <vector>

namespace mesh::topology {

// What sysfs says about one netdev (/sys/class/net/<name>/...).
struct NetdevFacts {
  std::string name;
  bool bridge = false;       // bridge/ exists: a Linux bridge (docker0, virbr0, br0, cni0)
  bool bridge_port = false;  // brport/ exists: enslaved to a bridge (its master holds the role)
  bool tun = false;       // tun_flags exists: a tun/tap device (OpenVPN, tailscale, zerotier, VMs)
  bool wireless = false;  // wireless/ or phy80211 exists
  int type = -1;          // ARPHRD_* from `type`: 1 Ethernet, 32 InfiniBand (IPoIB), ...
  std::string devtype;    // DEVTYPE= of `uevent`: "bridge", "vxlan", "wireguard", "wlan", ...
};

NetdevFacts read_netdev_facts(const std::string& sysfs_root, const std::string& name);

// Why a netdev is not a cable, from its facts first and its name where sysfs says nothing
// (well-known prefixes of container and VPN software: docker, virbr, br-, cni, flannel, cali,
// cilium, weave, vxlan, tun, tap, wg, tailscale, zt, ...). Empty when it may be a cable:
// Ethernet or IPoIB, not bridged, not a tunnel. A veth is a cable (the namespace test meshes
// and containers given a NIC of their own use them point to point). Loopback is not judged here.
std::string not_a_cable_reason(const NetdevFacts& facts);

// Names of the interfaces an IPv4 default route (destination 0.0.0.0/0, any metric) leaves
// through, from /proc/net/route's text (the main routing table; policy-routing tables other than
// main are not listed there).
std::set<std::string> parse_default_route_interfaces(std::istream& proc_net_route);

// One complete entry of the kernel's IPv4 neighbour table: a host that answered ARP on `dev`.
struct Neighbour {
  uint32_t addr = 0;  // host byte order
  std::string dev;
};

// Complete entries (ATF_COM) of /proc/net/arp's text; incomplete and failed ones are dropped
// (nobody answered them).
std::vector<Neighbour> parse_arp_table(std::istream& proc_net_arp);

}  // namespace mesh::topology
