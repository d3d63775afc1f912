// SPDX-License-Identifier: Apache-2.0
// Which local interfaces the plugin uses, which NCCL devices it exposes, and which local
// interface(s) reach a given peer. Pure functions over data: unit-tested without hardware.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "topology/ifname_filter.h"
#include "topology/interface.h"
#include "util/ipv4.h"

namespace mesh::topology {

// Why select_interfaces left an interface out.
enum class LeftOut {
  kFilter,        // NCCL_MESH_IFNAME does not take it
  kDown,          // not IFF_UP and IFF_RUNNING
  kLoopback,      // loopback while something else is usable
  kNotACable,     // a bridge, bridge port, tunnel, VPN, wireless or container interface
  kDefaultRoute,  // the IPv4 default route leaves through it: the management network
  kSwitch,        // more other hosts answer on its subnet than one cable can hold
};

const char* left_out_name(LeftOut reason);  // "filter", "down", ..., for JSON

struct Exclusion {
  Interface itf;
  LeftOut reason = LeftOut::kFilter;
  std::string why;      // what was found, e.g. "carries the IPv4 default route (...)"
  std::string include;  // how to use it anyway, e.g. "set NCCL_MESH_IFNAME==cb,cc,mgmt0"
};

struct Selection {
  std::vector<Interface> used;      // interfaces the plugin will use, in discovery order
  std::vector<std::string> notes;   // one line per excluded interface: "name (addr): why; include"
  std::vector<Exclusion> left_out;  // the same, as data (parallel to notes)
  bool loopback_fallback = false;   // nothing else was usable, so loopback is used
};

// True for the reasons of the automatic rules (kNotACable, kDefaultRoute, kSwitch): interfaces
// that NCCL_MESH_IFNAME can still take if they are cables after all.
bool automatic_rule(LeftOut reason);

// Without NCCL_MESH_IFNAME (or with a "^" exclusion list, which only removes names from this
// choice), an up interface is used only if it looks like a cable: not loopback, not a bridge,
// bridge port, tunnel, VPN, wireless or container interface (Interface::not_a_cable), not the
// interface of the IPv4 default route (the management network), and not on a subnet where more
// other hosts answered ARP than this host has netdevs on it (a switch: a cable joins two hosts;
// the two halves of a DGX Spark port show two addresses of one peer). Loopback is used only when
// nothing else is. An inclusion list ("enp1,enp2", "=mgmt0") takes every up interface it names,
// whatever it looks like (loopback too, e.g. "lo").
Selection select_interfaces(const std::vector<Interface>& all, const IfnameFilter& filter);

// When the automatic rules left no cable (only loopback, or nothing) but did leave candidates
// out: one line naming each and how to include one (the plugin WARNs it, the doctor shows it).
// Empty otherwise.
std::string describe_missing_cables(const Selection& sel);

// One NCCL device: a group of interfaces sharing a NUMA node (PCI NICs) or the group of
// virtual interfaces (veth, bridges, lo). NCCL places channels on devices by PCI locality; each
// device can still reach every peer because connect() routes by the peer's addresses.
struct NetDevice {
  std::string name;      // "mesh0:eth1+eth2", unique per process
  std::string pci_path;  // first member's PCI path, empty for the virtual group
  int numa_node = -1;
  int speed_mbps = 0;           // speed_to_one_peer of the members
  std::vector<size_t> members;  // indices into Selection::used
};

std::vector<NetDevice> group_devices(const std::vector<Interface>& used);

// The speed NCCL should size a device's channels for (ncclNetProperties.speed, Mb/s): what one
// connection to one peer can use. A connection stripes over every rail to its peer, and the
// halves of a port (several netdevs on one subnet, a DGX Spark ConnectX-7 port) are all rails
// of one cable, so a cable's speed is the sum over its netdevs; the device reports its fastest
// cable. Different subnets are different cables, usually to different peers: not summed (two
// cables to the same peer do give more than this; it is a lower bound). 0 when no member
// reports a speed.
int speed_to_one_peer(const std::vector<Interface>& used, const std::vector<size_t>& members);

// A path to a peer: a local interface and the peer address on the same subnet (one cable).
struct Rail {
  size_t local_index = 0;  // index into the `local` vector given to choose_rails
  Ipv4Prefix local;        // local address and subnet
  uint32_t peer_addr = 0;  // the peer's address on that subnet
};

// Every cable to the peer: each local interface whose subnet contains one of the peer's
// addresses, paired with a distinct peer address where possible (two PCIe halves of one port
// with two addresses each give two rails, not four). When `preferred` (the members of the
// device NCCL passed) has rails to the peer, only those are used, keeping traffic on that
// device's NUMA node; otherwise every rail is used, so any device reaches any peer. Rails to a
// peer address that is also a local address (loopback, a bridge with the same address on every
// host) are dropped when the peer is reachable any other way: they lead back to this host.
std::vector<Rail> choose_rails(const std::vector<Interface>& local,
                               const std::vector<Ipv4Prefix>& peer_addrs,
                               const std::vector<size_t>& preferred = {});

}  // namespace mesh::topology
