// SPDX-License-Identifier: Apache-2.0
#include "tools/doctor/host_order.h"

#include <algorithm>

namespace mesh::doctor {

HostOrderHint ring_host_order(const std::vector<PeerRoute>& routes,
                              const std::vector<PeerLink>& links, bool probed,
                              const std::string& this_host) {
  HostOrderHint hint;
  // This host under the name the hosts file gives it (the order is read against that file),
  // else its hostname.
  std::vector<std::string> names = {this_host};
  for (const PeerRoute& r : routes)
    if (r.self) names[0] = r.peer.name;
  std::vector<std::pair<size_t, size_t>> cables;
  // Peers that did not answer --probe. A cable is known when one of its ends is this host or
  // answered (links_between_peers adds the hosts file's addresses of one that did not), so the
  // map is whole unless two peers stayed silent: the cable between them is unknown.
  std::vector<std::string> silent;
  for (const PeerRoute& r : routes) {
    if (r.self) continue;
    names.push_back(r.peer.name);
    if (!r.rails.empty()) cables.emplace_back(0, names.size() - 1);
    if (std::none_of(r.probes.begin(), r.probes.end(),
                     [](const CableProbe& p) { return p.info.has_value(); }))
      silent.push_back(r.peer.name);
  }
  const auto index_of = [&](const std::string& name) {
    return static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
  };
  for (const PeerLink& l : links) cables.emplace_back(index_of(l.a), index_of(l.b));
  hint.known = probed && silent.size() <= 1;
  const size_t others = names.size() - 1;
  if (others + 1 >= 3 && !hint.known && cables.size() < others * (others + 1) / 2) {
    if (!probed) {
      hint.message =
          "cables between peers unknown: add --probe (with --serve on every peer) for the host "
          "order that makes NCCL's ring follow the cables";
      return hint;
    }
    std::string list;
    for (const std::string& n : silent) list += (list.empty() ? "" : ", ") + n;
    hint.message =
        "cables between " + list +
        " unknown: they did not answer --probe from here (a peer answers only over a cable to "
        "this host, or with no --serve running). Run --probe on a host cabled to all but one of "
        "the others, or on each host, for the host order that makes NCCL's ring follow the "
        "cables";
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
  if (probed && silent.size() == 1)
    hint.message += " (" + silent[0] +
                    " did not answer --probe: its cables are the hosts file's "
                    "addresses on the subnets of the hosts that answered)";
  return hint;
}

}  // namespace mesh::doctor
