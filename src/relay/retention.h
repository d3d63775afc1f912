// SPDX-License-Identifier: Apache-2.0
// Whether this host holds a silent neighbour (relay/link_state.h, "Retention"; docs/relay.md,
// "Timers"): the inputs come from this host's kernel only, never from the network.
//  - carrier: the local interface on the subnet shared with the neighbour is up and running
//    (SIOCGIFFLAGS IFF_UP and IFF_RUNNING: the kernel's operstate; a pulled cable, a peer port
//    gone down, `ip link set down` clear it);
//  - live relayed sockets: established TCP sockets of this network namespace between one of the
//    neighbour's addresses and the relay port (NCCL_MESH_RELAY_PORT), either end. That covers
//    every relayed connection that runs over the cable: this host's first hops to the
//    neighbour's agent (plugin data streams, the control socket of an RDMA relay sender), the
//    splices of this host's agent towards and from it, and the control sockets an RDMA forward
//    keeps for its whole life (its QPs live exactly as long).
// Both are read without blocking (an ioctl; a sock_diag netlink dump, which the kernel fills
// while it is read). Called by the agent's thread only, outside the agent's mutex.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "relay/beacon.h"
#include "util/ipv4.h"

namespace mesh::relay {

struct LocalCable {
  Ipv4Prefix addr;       // this host's address on the cable's subnet
  bool carrier = false;  // its interface is up and running
};

// Held: some cable that this host shares with `neighbour` (same prefix length, same subnet) has
// carrier and a live relayed socket to the neighbour's address on that subnet.
bool holds_neighbour(const HostEntry& neighbour, const std::vector<LocalCable>& cables,
                     const std::set<uint32_t>& relay_peers);

// True when `ifname` is up and running (carrier); false when down or unknown.
bool interface_has_carrier(const std::string& ifname);

// The remote addresses (host byte order) of every established IPv4 TCP socket in this network
// namespace whose local or remote port is `port`. False (with *why) when the kernel's socket
// table cannot be read (no sock_diag): the caller then holds nobody.
bool relay_socket_peers(uint16_t port, std::set<uint32_t>* out, std::string* why);

}  // namespace mesh::relay
