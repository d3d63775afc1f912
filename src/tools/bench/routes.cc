// SPDX-License-Identifier: Apache-2.0
#include "routes.h"

#include <fmt/format.h>

#include <algorithm>

#include "cable_merge.h"
#include "context.h"
#include "route_log.h"
#include "tools/common/link_counters_json.h"

namespace mesh::bench {
namespace {

using json = nlohmann::json;

std::string ifname_of(const LocalNet& net, const std::string& endpoint) {
  const auto addr = parse_ipv4(endpoint_addr(endpoint));
  return addr ? interface_of(net, *addr) : std::string();
}

json connection_json(const LocalNet& net, const std::vector<std::string>& log) {
  const ConnectionRoute c = parse_connection_log(log);
  return {{"known", c.known},
          {"transport", c.transport},
          {"local", c.local},
          {"local_if", ifname_of(net, c.local)},
          {"peer", c.peer},
          {"detail", c.detail},
          {"relayed", c.relayed},
          {"relay_transport", c.relay_transport},
          {"relay_path", c.relay_path},
          {"relay_hosts", c.relay_hosts},
          {"relay_summary", c.relay_summary},
          {"first_hops", c.first_hops}};
}

ConnectionRoute connection_from_json(const json& j) {
  ConnectionRoute c;
  c.known = j.at("known").get<bool>();
  c.transport = j.at("transport").get<std::string>();
  c.local = j.at("local").get<std::string>();
  c.peer = j.at("peer").get<std::string>();
  c.detail = j.at("detail").get<std::string>();
  c.relayed = j.at("relayed").get<bool>();
  c.relay_transport = j.at("relay_transport").get<std::string>();
  c.relay_path = j.at("relay_path").get<std::string>();
  c.relay_hosts = j.at("relay_hosts").get<std::vector<std::string>>();
  c.relay_summary = j.at("relay_summary").get<std::string>();
  c.first_hops = j.at("first_hops").get<std::string>();
  return c;
}

// The entry of `peer` in one rank's routes_json(), or null.
const json* route_to(const json& rank_routes, int peer) {
  for (const auto& r : rank_routes) {
    if (r.at("peer").get<int>() == peer) return &r;
  }
  return nullptr;
}

}  // namespace

CableSampler::CableSampler(const Context& ctx) : rdma_ports_(topology::discover_rdma_ports()) {
  for (const auto& i : ctx.local_net.used) {
    if (std::find(ifnames_.begin(), ifnames_.end(), i.name) == ifnames_.end()) {
      ifnames_.push_back(i.name);
    }
  }
}

std::vector<topology::LinkCounters> CableSampler::sample() const {
  std::vector<topology::LinkCounters> out;
  for (const auto& name : ifnames_) {
    out.push_back(
        topology::read_link_counters(name, topology::ports_for_netdev(rdma_ports_, name)));
  }
  return out;
}

json routes_json(const Context& ctx) {
  json out = json::array();
  for (const auto& l : ctx.links) {
    if (l.peer < 0) continue;
    out.push_back({{"peer", l.peer},
                   {"send", connection_json(ctx.local_net, l.send_log)},
                   {"recv", connection_json(ctx.local_net, l.recv_log)}});
  }
  return out;
}

json cables_json(const Context& ctx, const std::vector<topology::LinkCounters>& before,
                 const std::vector<topology::LinkCounters>& after) {
  json out = json::array();
  for (size_t i = 0; i < after.size() && i < before.size(); ++i) {
    const topology::LinkCounters d = topology::counter_delta(before[i], after[i]);
    json addrs = json::array();
    for (const auto& itf : ctx.local_net.used) {
      if (itf.name == d.ifname) addrs.push_back(format_prefix(itf.addr));
    }
    json c = tools::link_counters_json(d);
    c["rank"] = ctx.rank;
    c["host"] = ctx.hosts.empty() ? "" : ctx.hosts[static_cast<size_t>(ctx.rank)];
    c["interface"] = d.ifname;
    c["addrs"] = addrs;
    c["text"] = topology::describe_link_counters(d);
    out.push_back(c);
  }
  return out;
}

json pair_routes(const std::vector<json>& per_rank,
                 const std::vector<std::vector<std::string>>& rank_addrs) {
  json out = json::array();
  const int n = static_cast<int>(per_rank.size());
  for (int src = 0; src < n; ++src) {
    for (int dst = 0; dst < n; ++dst) {
      const json* s = src == dst ? nullptr : route_to(per_rank[static_cast<size_t>(src)], dst);
      const json* r = src == dst ? nullptr : route_to(per_rank[static_cast<size_t>(dst)], src);
      if (s == nullptr || r == nullptr) continue;
      const ConnectionRoute send = connection_from_json(s->at("send"));
      const ConnectionRoute recv = connection_from_json(r->at("recv"));
      json via = json::array();
      for (const auto& h : send.relay_hosts) via.push_back(label_relay_host(h, rank_addrs));
      out.push_back(
          {{"src", src},
           {"dst", dst},
           {"relayed", send.relayed},
           {"transport",
            send.relayed && !send.relay_transport.empty() ? send.relay_transport : send.transport},
           {"via", via},
           {"send", s->at("send")},
           {"recv", r->at("recv")},
           {"text", describe_pair_route(
                        src, dst, send, s->at("send").at("local_if").get<std::string>(), recv,
                        r->at("recv").at("local_if").get<std::string>(), rank_addrs)}});
    }
  }
  return out;
}

json merge_cables(const std::vector<json>& per_rank_cables) {
  std::vector<json> flat;
  std::vector<CableEnd> ends;
  for (const auto& rank : per_rank_cables) {
    for (const auto& c : rank) {
      CableEnd e;
      e.rank = c.at("rank").get<int>();
      e.host = c.value("host", "");
      e.interface = c.at("interface").get<std::string>();
      for (const auto& a : c.at("addrs")) e.addrs.push_back(a.get<std::string>());
      ends.push_back(std::move(e));
      flat.push_back(c);
    }
  }
  json out = json::array();
  for (const auto& group : group_cable_ends(ends)) {
    json c = flat[group.front()];  // the first rank's numbers: every rank read the same counters
    json ranks = json::array();
    for (size_t i : group) ranks.push_back(ends[i].rank);
    c["ranks"] = ranks;
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<std::string> cable_lines(const json& cables) {
  std::vector<std::string> out;
  for (const auto& c : cables) {
    std::string addrs;
    for (const auto& a : c.at("addrs")) addrs.append(" ").append(a.get<std::string>());
    std::string shared;
    if (c.contains("ranks") && c.at("ranks").size() > 1) {
      for (const auto& r : c.at("ranks")) {
        shared.append(shared.empty() ? " (one host: ranks " : ", ").append(r.dump());
      }
      shared += ")";
    }
    out.push_back(fmt::format("cable rank {} {}{}{}: {}", c.at("rank").get<int>(),
                              c.at("interface").get<std::string>(), addrs, shared,
                              c.at("text").get<std::string>()));
  }
  return out;
}

}  // namespace mesh::bench
