// SPDX-License-Identifier: Apache-2.0
#include "tools/doctor/host_order.h"

#include <algorithm>

namespace mesh::doctor {

HostOrderHint ring_host_order(const std::vector<PeerRoute>& routes,
                              const std::vector<PeerLink>& links, bool probed,
                              const std::string& this_host) {
  HostOrderHint hint;
  std::vector<std::string> names = {this_host};
  std::vector<std::pair<size_t, size_t>> cables;
  bool all_reported = true;
  for (const PeerRoute& r : routes) {
    if (r.self) continue;
    names.push_back(r.peer.name);
    if (!r.rails.empty()) cables.emplace_back(0, names.size() - 1);
    all_reported =
        all_reported && std::any_of(r.probes.begin(), r.probes.end(),
                                    [](const CableProbe& p) { return p.info.has_value(); });
  }
  const auto index_of = [&](const std::string& name) {
    return static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
  };
  for (const PeerLink& l : links) cables.emplace_back(index_of(l.a), index_of(l.b));
  hint.known = probed && all_reported;
  const size_t others = names.size() - 1;
  if (others + 1 >= 3 && !hint.known && cables.size() < others * (others + 1) / 2) {
    hint.message =
        "cables between peers unknown: add --probe (with --serve on every peer) for the host "
        "order that makes NCCL's ring follow the cables";
    return hint;
  }
  const topology::RingOrder order = topology::ring_order(names.size(), cables);
  hint.kind = order.kind;
  for (size_t i : order.order) hint.hosts.push_back(names[i]);
  std::string list;
  for (const std::string& h : hint.hosts) list += (list.empty() ? "" : " -> ") + h;
  switch (order.kind) {
    case topology::RingOrder::kCycle:
      hint.message =
          "launch ranks in this host order (rank 0 on the first; any rotation works): " + list +
          ": every NCCL ring neighbour is a cable";
      break;
    case topology::RingOrder::kPath:
      hint.message = "launch ranks in this host order: " + list +
                     "; the ring's closing hop (last -> first) has no cable: the plugin relays it "
                     "through the hosts between (TCP, slower than a cable; docs/relay.md)";
      break;
    case topology::RingOrder::kNone:
      hint.message =
          "no host order puts every NCCL ring neighbour on a cable (a host without a cable to "
          "two others, or the mesh is not connected)";
      break;
  }
  return hint;
}

}  // namespace mesh::doctor
