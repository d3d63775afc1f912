// SPDX-License-Identifier: Apache-2.0
// Shortest paths over the cable graph that the beacons describe. Pure functions over data,
// unit-tested without a network.
//
// Graph: one node per host entry; an edge between two hosts that each list the other as a
// neighbour (both hear the other's beacons, so the cable works both ways) and share a subnet (that
// subnet's addresses are where the socket goes). A route from `self` to the host owning one of
// the destination's addresses is any shortest path; every neighbour on some shortest path is an
// equal-cost next hop, and the stream index picks among them (stream s on next hop s mod k), so
// the streams of one connection take both ways round a ring.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "relay/beacon.h"
#include "util/ipv4.h"

namespace mesh::relay {

struct NextHop {
  uint32_t host = 0;       // the neighbour's host id
  Ipv4Prefix local;        // this host's address on the shared subnet
  uint32_t peer_addr = 0;  // the neighbour's address on it
};

struct Route {
  uint32_t dest_host = 0;
  size_t hops = 0;             // cables from self to the destination
  std::vector<NextHop> next;   // equal-cost next hops, ordered by host id
  std::vector<uint32_t> path;  // one shortest path (host ids, self first, dest last)
};

// NCCL_MESH_RELAY_VIA: "<dest-prefix>=<via-address>,...": connections to an address inside
// dest-prefix leave through the neighbour owning via-address (later agents route on their own).
struct RoutePin {
  Ipv4Prefix dest;
  uint32_t via = 0;
};
bool parse_route_pins(const std::string& text, std::vector<RoutePin>* out, std::string* why);

// The path to the host that owns one of `dest` (exact address match). False with *why naming
// what is missing: the destination unknown to the graph, or the graph disconnected (which hosts
// this host can reach and which it cannot). `pins` restrict the first hop.
bool find_route(const std::vector<HostEntry>& hosts, uint32_t self,
                const std::vector<Ipv4Prefix>& dest, const std::vector<RoutePin>& pins, Route* out,
                std::string* why);

// The next hop stream `stream` takes.
inline const NextHop& pick_next_hop(const Route& r, size_t stream) {
  return r.next[stream % r.next.size()];
}

// "198.18.20.1+198.18.23.2": a host by its addresses, for messages.
std::string describe_host(const HostEntry& h);

// Two hosts' addresses on a shared subnet (same prefix length, same network); false if none.
bool shared_subnet(const HostEntry& a, const HostEntry& b, Ipv4Prefix* a_addr, uint32_t* b_addr);

}  // namespace mesh::relay
