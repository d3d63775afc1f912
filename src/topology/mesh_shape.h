// SPDX-License-Identifier: Apache-2.0
// Facts about the shape of the mesh: how many cables this host has (for the tuner's partial-mesh
// test) and in which order to launch hosts so that NCCL's ring follows the cables (for the
// doctor). Pure functions over data.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "topology/interface.h"

namespace mesh::topology {

// Distinct subnets among `used` (the interfaces the plugin uses): one per cable, where the
// halves of a port (several netdevs on one subnet) count once. Two cables to the same peer
// count twice: nothing local tells them apart from cables to two peers.
size_t count_cables(const std::vector<Interface>& used);

// Host order for NCCL's ring, which joins host i to host i+1 and the last to the first (with one
// GPU per host, NCCL numbers hosts by their first rank). `cables` are pairs of host indices
// 0..hosts-1; duplicates and self-pairs are ignored.
struct RingOrder {
  enum Kind {
    kCycle,  // every ring hop, the closing one included, is a cable
    kPath,   // every hop but the closing one (last -> first) is a cable: a line
    kNone,   // no order puts every ring neighbour on a cable (or the search gave up)
  } kind = kNone;
  std::vector<size_t> order;  // host indices, starting with host 0; empty for kNone
};

// Exhaustive search with a step budget (a Hamiltonian cycle, else path): instant for the meshes
// a switchless cluster has (a few to a few dozen hosts of degree 2-4).
RingOrder ring_order(size_t hosts, const std::vector<std::pair<size_t, size_t>>& cables);

}  // namespace mesh::topology
