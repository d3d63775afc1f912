// SPDX-License-Identifier: Apache-2.0
// The host order that makes NCCL's ring follow the cables: NCCL joins host i to host i+1 and the
// last to the first (one GPU per host: hosts numbered by their first rank), so launching ranks in
// this order puts every ring neighbour on a cable. Built from the mesh map: this host's cables
// to each peer and, with --probe, the cables between peers from their reports.
#pragma once

#include <string>
#include <vector>

#include "tools/doctor/peers.h"
#include "topology/mesh_shape.h"

namespace mesh::doctor {

struct HostOrderHint {
  bool known = false;  // every cable of the mesh is known (probed, and every peer reported)
  topology::RingOrder::Kind kind = topology::RingOrder::kNone;
  // Launch order (rank 0 first); this host under its hosts-file name when the file lists it,
  // else as `this_host`.
  std::vector<std::string> hosts;
  std::string message;             // one line for the report
};

HostOrderHint ring_host_order(const std::vector<PeerRoute>& routes,
                              const std::vector<PeerLink>& links, bool probed,
                              const std::string& this_host);

}  // namespace mesh::doctor
