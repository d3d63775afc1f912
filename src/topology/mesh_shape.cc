// SPDX-License-Identifier: Apache-2.0
#include "topology/mesh_shape.h"

#include <algorithm>
#include <set>

namespace mesh::topology {
namespace {

// Depth-first search for a Hamiltonian path starting at `order[0]`, preferring one that closes
// into a cycle. `budget` bounds the number of extensions tried.
struct Search {
  const std::vector<std::vector<size_t>>& adj;
  std::vector<size_t> order;
  std::vector<bool> seen;
  std::vector<size_t> best_path;
  long budget = 1'000'000;

  bool closes(size_t last) const {
    const auto& n = adj[last];
    return std::find(n.begin(), n.end(), order[0]) != n.end();
  }

  // True once a cycle is found (stop); records the first full path seen.
  bool extend() {
    if (order.size() == adj.size()) {
      if (best_path.empty()) best_path = order;
      return adj.size() >= 3 && closes(order.back());
    }
    for (size_t next : adj[order.back()]) {
      if (seen[next] || --budget < 0) continue;
      seen[next] = true;
      order.push_back(next);
      if (extend()) return true;
      order.pop_back();
      seen[next] = false;
    }
    return false;
  }
};

}  // namespace

size_t count_cables(const std::vector<Interface>& used) {
  std::set<std::pair<uint32_t, uint8_t>> subnets;
  for (const Interface& itf : used)
    subnets.emplace(itf.addr.addr & netmask(itf.addr.prefix), itf.addr.prefix);
  return subnets.size();
}

RingOrder ring_order(size_t hosts, const std::vector<std::pair<size_t, size_t>>& cables) {
  RingOrder result;
  if (hosts == 0) return result;
  std::vector<std::vector<size_t>> adj(hosts);
  for (const auto& [a, b] : cables) {
    if (a >= hosts || b >= hosts || a == b) continue;
    if (std::find(adj[a].begin(), adj[a].end(), b) == adj[a].end()) adj[a].push_back(b);
    if (std::find(adj[b].begin(), adj[b].end(), a) == adj[b].end()) adj[b].push_back(a);
  }
  for (auto& n : adj) std::sort(n.begin(), n.end());
  if (hosts <= 2) {
    // One host, or two joined by a cable: the ring's only hop is that cable.
    if (hosts == 1 || !adj[0].empty())
      result = {RingOrder::kCycle, hosts == 1 ? std::vector<size_t>{0} : std::vector<size_t>{0, 1}};
    return result;
  }
  // A cycle may start anywhere, so host 0 first; a path (line) must start at one of its ends,
  // so try every start when no cycle exists.
  for (size_t start = 0; start < hosts; ++start) {
    Search s{adj, {start}, std::vector<bool>(hosts, false), {}};
    s.seen[start] = true;
    if (s.extend()) return {RingOrder::kCycle, s.order};
    if (!s.best_path.empty()) return {RingOrder::kPath, s.best_path};
    if (s.budget < 0) break;
  }
  return result;
}

}  // namespace mesh::topology
