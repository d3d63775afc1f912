// SPDX-License-Identifier: Apache-2.0
#include "relay/routes.h"

#include <algorithm>
#include <deque>
#include <map>
#include <sstream>

#include "relay/fail.h"

namespace mesh::relay {

namespace {

bool lists(const HostEntry& a, uint32_t b) {
  return std::find(a.neighbours.begin(), a.neighbours.end(), b) != a.neighbours.end();
}

}  // namespace

std::string describe_host(const HostEntry& h) {
  std::string s;
  for (const Ipv4Prefix& a : h.addrs) {
    if (!s.empty()) s += '+';
    s += format_ipv4(a.addr);
  }
  return s.empty() ? "(no address)" : s;
}

bool shared_subnet(const HostEntry& a, const HostEntry& b, Ipv4Prefix* a_addr, uint32_t* b_addr) {
  for (const Ipv4Prefix& x : a.addrs) {
    for (const Ipv4Prefix& y : b.addrs) {
      if (x.prefix == y.prefix && x.addr != y.addr && in_subnet(x, y.addr)) {
        *a_addr = x;
        *b_addr = y.addr;
        return true;
      }
    }
  }
  return false;
}

bool parse_route_pins(const std::string& text, std::vector<RoutePin>* out, std::string* why) {
  out->clear();
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('='), slash = item.find('/');
    if (eq == std::string::npos || slash == std::string::npos || slash > eq)
      return fail(why, "'" + item + "' is not <address>/<prefix>=<via-address>");
    const auto net = parse_ipv4(item.substr(0, slash));
    const auto via = parse_ipv4(item.substr(eq + 1));
    const std::string len = item.substr(slash + 1, eq - slash - 1);
    if (!net || !via || len.empty() || len.size() > 2 ||
        len.find_first_not_of("0123456789") != std::string::npos || std::stoi(len) > 32)
      return fail(why, "'" + item + "' is not <address>/<prefix>=<via-address>");
    out->push_back({Ipv4Prefix{*net, static_cast<uint8_t>(std::stoi(len))}, *via});
  }
  return true;
}

bool find_route(const std::vector<HostEntry>& hosts, uint32_t self,
                const std::vector<Ipv4Prefix>& dest, const std::vector<RoutePin>& pins, Route* out,
                std::string* why) {
  std::map<uint32_t, const HostEntry*> by_id;
  for (const HostEntry& h : hosts) by_id[h.id] = &h;
  auto me = by_id.find(self);
  if (me == by_id.end()) return fail(why, "this host is not in its own cable graph");
  std::string known;
  for (const auto& [id, h] : by_id) {
    if (!known.empty()) known += ", ";
    known += describe_host(*h);
  }
  const HostEntry* target = nullptr;
  for (const auto& [id, h] : by_id) {
    for (const Ipv4Prefix& a : h->addrs) {
      for (const Ipv4Prefix& d : dest) {
        if (a.addr == d.addr) target = h;
      }
    }
  }
  std::string dest_text;
  for (const Ipv4Prefix& d : dest) {
    if (!dest_text.empty()) dest_text += ", ";
    dest_text += format_ipv4(d.addr);
  }
  if (target == nullptr)
    return fail(why, "no route from host " + describe_host(*me->second) + " to " + dest_text +
                         ": no relay agent announces that address (known hosts: " + known +
                         "); is a plugin process running on the destination's host and on every "
                         "host between, and is the cable graph connected?");
  if (target->id == self) return fail(why, "the destination is this host");
  // Adjacency: both ends list each other and share a subnet.
  std::map<uint32_t, std::vector<uint32_t>> adj;
  for (const auto& [id, h] : by_id) {
    for (uint32_t n : h->neighbours) {
      auto other = by_id.find(n);
      Ipv4Prefix a;
      uint32_t b = 0;
      if (other != by_id.end() && n != id && lists(*other->second, id) &&
          shared_subnet(*h, *other->second, &a, &b))
        adj[id].push_back(n);
    }
  }
  // BFS from the destination: dist[h] = cables from h to it.
  std::map<uint32_t, size_t> dist;
  std::deque<uint32_t> q{target->id};
  dist[target->id] = 0;
  while (!q.empty()) {
    const uint32_t h = q.front();
    q.pop_front();
    for (uint32_t n : adj[h]) {
      if (dist.emplace(n, dist[h] + 1).second) q.push_back(n);
    }
  }
  auto d_self = dist.find(self);
  if (d_self == dist.end()) {
    std::string reach, unreach;
    for (const auto& [id, h] : by_id) {
      std::string& list = dist.count(id) ? reach : unreach;
      if (!list.empty()) list += ", ";
      list += describe_host(*h);
    }
    return fail(why, "no route from host " + describe_host(*me->second) + " to " + dest_text +
                         " (host " + describe_host(*target) +
                         "): the cable graph is disconnected; "
                         "hosts connected to the destination: " +
                         reach + "; hosts cut off from it (this one included): " + unreach +
                         "; check the cables and that a plugin process runs on every host");
  }
  Route r;
  r.dest_host = target->id;
  r.hops = d_self->second;
  std::vector<uint32_t> candidates;
  uint32_t pinned = 0;
  for (const RoutePin& p : pins) {
    bool match = false;
    for (const Ipv4Prefix& d : dest) match = match || in_subnet(p.dest, d.addr);
    if (!match) continue;
    for (uint32_t n : adj[self]) {
      for (const Ipv4Prefix& a : by_id[n]->addrs) {
        if (a.addr == p.via) pinned = n;
      }
    }
    if (pinned == 0 || !dist.count(pinned))
      return fail(why, "NCCL_MESH_RELAY_VIA pins " + format_prefix(p.dest) + " to " +
                           format_ipv4(p.via) +
                           ", which is not a neighbour of this host with a "
                           "path to the destination");
    break;
  }
  for (uint32_t n : adj[self]) {
    if (pinned != 0 ? n == pinned : dist.count(n) && dist[n] + 1 == r.hops) candidates.push_back(n);
  }
  std::sort(candidates.begin(), candidates.end());
  for (uint32_t n : candidates) {
    NextHop hop;
    hop.host = n;
    shared_subnet(*me->second, *by_id[n], &hop.local, &hop.peer_addr);
    r.next.push_back(hop);
  }
  // One shortest path for messages: always the lowest-id next hop.
  uint32_t at = candidates.front();
  r.path = {self, at};
  while (at != target->id) {
    uint32_t best = 0;
    for (uint32_t n : adj[at]) {
      if (dist.count(n) && dist[n] + 1 == dist[at] && (best == 0 || n < best)) best = n;
    }
    at = best;
    r.path.push_back(at);
  }
  *out = std::move(r);
  return true;
}

}  // namespace mesh::relay
