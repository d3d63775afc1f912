// SPDX-License-Identifier: Apache-2.0
// How the plugin would reach each peer that has no cable to this host: relayed through which
// hosts, or not at all (the cable graph is disconnected). Computed with the relay layer's own
// route search (relay/routes.h) over what the doctor knows of the mesh: this host's interfaces,
// its cables to the peers, and, after --probe, the interfaces every peer's plugin uses (so
// cables between two peers are known only when probed).
#pragma once

#include <string>
#include <vector>

#include "tools/doctor/model.h"
#include "tools/doctor/peers.h"

namespace mesh::doctor {

struct RelayPlan {
  bool found = false;                // a route exists in the known graph
  std::vector<std::string> via;      // the relay hosts of one shortest route, in order (names)
  size_t equal_cost_first_hops = 0;  // how many neighbours start a shortest route
  std::string why;                   // when not found: what is missing (from find_route)
};

// "relayed over RDMA (where every cable has RDMA) or TCP via B -> C (3 cables, 2 equal-cost ways,
// all used)" for a found plan ("... (where both cables have RDMA) ..." with one relay host); the
// words the peer-cable check, the mesh map and the JSON all use.
std::string describe_relay(const RelayPlan& plan);

// "eth0 198.18.1.1/24 -> 198.18.1.2": one cable as connect() would use it.
std::string describe_rail(const Model& model, const topology::Rail& rail);

// "direct over eth0 198.18.1.1/24 -> 198.18.1.2" (one cable) or "direct over 2 cables: ...; ...".
std::string describe_direct(const Model& model, const std::vector<topology::Rail>& rails);

// One entry per route, in the same order; filled only for peers without a cable to this host.
std::vector<RelayPlan> plan_relays(const Model& model, const std::vector<PeerRoute>& routes);

}  // namespace mesh::doctor
