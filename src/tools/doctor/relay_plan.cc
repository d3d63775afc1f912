// SPDX-License-Identifier: Apache-2.0
#include "tools/doctor/relay_plan.h"

#include <algorithm>

#include "relay/routes.h"

namespace mesh::doctor {
namespace {

void add_addr(relay::HostEntry* h, const Ipv4Prefix& a) {
  for (const Ipv4Prefix& have : h->addrs) {
    if (have.addr == a.addr) return;
  }
  h->addrs.push_back(a);
}

}  // namespace

std::string describe_relay(const RelayPlan& plan) {
  std::string via;
  for (const std::string& v : plan.via) via += (via.empty() ? "" : " -> ") + v;
  // The plugin relays over RDMA when every cable of the route has RDMA ports (docs/relay.md,
  // "RDMA relay": chained through every relay host), else over TCP.
  const std::string how = plan.via.size() == 1
                              ? "relayed over RDMA (where both cables have RDMA) or TCP via "
                              : "relayed over RDMA (where every cable has RDMA) or TCP via ";
  return how + via + " (" + std::to_string(plan.via.size() + 1) + " cables" +
         (plan.equal_cost_first_hops > 1
              ? ", " + std::to_string(plan.equal_cost_first_hops) + " equal-cost ways, all used"
              : std::string()) +
         ")";
}

std::string describe_rail(const Model& model, const topology::Rail& rail) {
  return model.selection.used[rail.local_index].name + " " + format_prefix(rail.local) + " -> " +
         format_ipv4(rail.peer_addr);
}

std::string describe_direct(const Model& model, const std::vector<topology::Rail>& rails) {
  std::string out;
  for (const topology::Rail& rail : rails)
    out += (out.empty() ? "" : "; ") + describe_rail(model, rail);
  return "direct over " +
         (rails.size() == 1 ? out : std::to_string(rails.size()) + " cables: " + out);
}

std::vector<RelayPlan> plan_relays(const Model& model, const std::vector<PeerRoute>& routes) {
  // Host 1 is this host, host i + 2 is routes[i]. Ids are only labels here: the plugin derives
  // them from the address set, and find_route never looks inside them.
  std::vector<relay::HostEntry> hosts(routes.size() + 1);
  for (size_t i = 0; i < hosts.size(); ++i) hosts[i].id = static_cast<uint32_t>(i + 1);
  for (const topology::Interface& itf : model.selection.used) add_addr(&hosts[0], itf.addr);
  for (size_t i = 0; i < routes.size(); ++i) {
    if (routes[i].self) continue;  // the hosts file lists this host too: host 1 already
    relay::HostEntry& h = hosts[i + 1];
    // A cable to this host: the peer's end is on our subnet, with our prefix length.
    for (const topology::Rail& rail : routes[i].rails) {
      add_addr(&h, Ipv4Prefix{rail.peer_addr, rail.local.prefix});
    }
    // Probed: the interfaces the peer's own plugin uses, with their real prefixes.
    for (const CableProbe& p : routes[i].probes) {
      if (!p.info) continue;
      for (const PeerInterface& itf : p.info->interfaces) {
        if (itf.used) add_addr(&h, itf.addr);
      }
    }
  }
  // The hosts file's addresses, so the route search finds each host. An address inside a subnet
  // another host is known to have (a cable's other end) gets that subnet's prefix, as the
  // beacons would report it; any other stays a /32, which joins no subnet.
  std::vector<Ipv4Prefix> known;
  for (const relay::HostEntry& h : hosts) known.insert(known.end(), h.addrs.begin(), h.addrs.end());
  for (size_t i = 0; i < routes.size(); ++i) {
    if (routes[i].self) continue;
    for (uint32_t a : routes[i].peer.addrs) {
      Ipv4Prefix p{a, 32};
      for (const Ipv4Prefix& k : known) {
        if (k.addr != a && in_subnet(k, a)) p.prefix = k.prefix;
      }
      add_addr(&hosts[i + 1], p);
    }
  }
  // Neighbours: two hosts with an address in one subnet (a cable, as the beacons would find it).
  for (size_t a = 0; a < hosts.size(); ++a) {
    for (size_t b = a + 1; b < hosts.size(); ++b) {
      Ipv4Prefix local;
      uint32_t peer = 0;
      if (relay::shared_subnet(hosts[a], hosts[b], &local, &peer)) {
        hosts[a].neighbours.push_back(hosts[b].id);
        hosts[b].neighbours.push_back(hosts[a].id);
      }
    }
  }
  std::vector<RelayPlan> out(routes.size());
  for (size_t i = 0; i < routes.size(); ++i) {
    const PeerRoute& r = routes[i];
    RelayPlan& plan = out[i];
    if (r.self || !r.rails.empty()) continue;  // this host, or a cable: nothing to relay
    std::vector<Ipv4Prefix> dest;
    for (uint32_t a : r.peer.addrs) dest.push_back(Ipv4Prefix{a, 32});
    relay::Route route;
    plan.found = relay::find_route(hosts, hosts[0].id, dest, {}, &route, &plan.why);
    if (!plan.found) continue;
    plan.equal_cost_first_hops = route.next.size();
    for (size_t k = 1; k + 1 < route.path.size(); ++k) {
      plan.via.push_back(routes[route.path[k] - 2].peer.name);
    }
  }
  return out;
}

}  // namespace mesh::doctor
