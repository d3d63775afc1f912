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

// One entry per route, in the same order; filled only for peers without a cable to this host.
std::vector<RelayPlan> plan_relays(const Model& model, const std::vector<PeerRoute>& routes);

}  // namespace mesh::doctor
