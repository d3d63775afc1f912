// SPDX-License-Identifier: Apache-2.0
// Which local interface a socket's packets leave through, when several local interfaces share
// one subnet (the two PCIe halves of a DGX Spark ConnectX-7 port, each its own netdev, addressed
// in one /24).
//
// Linux routes by destination: binding a socket to a source address does not choose the egress
// interface, so without help every byte to that subnet leaves through the interface whose route
// the kernel finds first. SO_BINDTODEVICE does choose it (unprivileged since Linux 5.7, for a
// socket not yet bound to a device; IP_UNICAST_IF does not apply to TCP). A device-bound socket
// also accepts only packets that ARRIVE on its device, so it is safe only where peers' frames
// for the address reach that interface: each interface must answer ARP for its own addresses
// only (arp_ignore=1 or 2). Where that is not set the plugin leaves the socket unbound (it then
// works, on one half) and says what to configure.
//
// Interfaces alone on their subnet are never bound: the route already picks them, and a
// device-bound socket would drop packets for its address that arrive elsewhere (Linux is a
// weak-host system), which would change behaviour for no gain.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "util/ipv4.h"

namespace mesh {

struct LocalAddress {
  std::string ifname;
  Ipv4Prefix addr;
  bool up = false;  // IFF_UP: the kernel has a connected route for it
};

// This network namespace's IPv4 addresses (getifaddrs), up or not; empty if it fails.
std::vector<LocalAddress> read_local_addresses();

struct DeviceBinding {
  enum class Action {
    kNone,      // the address is alone on its subnet (or unknown): routing already picks it
    kBind,      // SO_BINDTODEVICE to `ifname`
    kNeedsArp,  // shares its subnet, but arp_ignore is not 1/2: left unbound, one WARN
  };
  Action action = Action::kNone;
  std::string ifname;                    // interface that owns the address ("" if none)
  Ipv4Prefix subnet;                     // its subnet: network address and prefix
  std::vector<std::string> shared_with;  // other up interfaces on the same subnet
  int arp_ignore = -1;                   // effective value, max(all, <if>); -1 unknown
};

// Pure decision over a table of local addresses. `arp_ignore_of(ifname)` returns the effective
// net.ipv4.conf arp_ignore of the interface (max of conf.all and conf.<if>), -1 if unknown.
DeviceBinding decide_device_binding(uint32_t local_addr, const std::vector<LocalAddress>& all,
                                    const std::function<int(const std::string&)>& arp_ignore_of);

// arp_ignore values that make an interface answer ARP only for its own addresses.
constexpr bool arp_ignore_pins_halves(int v) {
  return v == 1 || v == 2;
}

// The fixes, as shell lines, for the WARNs and the doctor.
// sysctls: arp_ignore=1, arp_announce=2, rp_filter=2 for each of `ifnames`.
std::string halves_sysctl_fix(const std::vector<std::string>& ifnames);
// Policy routing that makes unbound sockets with source `addr` leave through `ifname`:
// "ip rule add from A table N; ip route add SUBNET dev IF src A table N".
std::string policy_routing_fix(const std::string& ifname, const Ipv4Prefix& addr, int table);

// Runtime: reads the local addresses (getifaddrs) and arp_ignore (/proc/sys) once per local
// address and process (like the plugin's own interface discovery), decides, and binds
// `fd` (a fresh socket, before bind/connect or bind/listen) to the device of `local_addr` where
// it shares a subnet. Never fails the caller: where it cannot bind, it logs one WARN per subnet
// (arp_ignore) or interface (setsockopt) and process that says what to configure, and the
// socket stays as it was.
// Returns true when fd is bound to a device. Thread-safe (called from the handshake thread).
bool bind_to_rail_device(int fd, uint32_t local_addr);

}  // namespace mesh
