// SPDX-License-Identifier: Apache-2.0
// Several ranks of one host see the same interfaces: each reports the same counters, and a
// report that lists (or sums) every rank's cable ends counts that host's bytes once per rank
// (issue 29). A cable end is one host's interface: the same host label, name and addresses.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace mesh::bench {

struct CableEnd {
  int rank = 0;
  std::string host;                // the rank's host label (rendezvous)
  std::string interface;           // netdev name
  std::vector<std::string> addrs;  // its addresses as the plugin uses them ("a.b.c.d/p")
};

// Groups of indices into `ends`, one group per distinct cable end, in order of first
// appearance; each group's indices in rank order.
std::vector<std::vector<size_t>> group_cable_ends(const std::vector<CableEnd>& ends);

}  // namespace mesh::bench
